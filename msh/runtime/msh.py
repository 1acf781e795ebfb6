"""The running MSH: executes the engine's actions against the store and the network (DESIGN.md §2, §5).

:class:`Msh` is both the application's Python API and the runtime behind ``msh serve``.

Application API (synchronous, thread-safe; each call is one store transaction)
    :meth:`Msh.submit` -> MessageId; :meth:`Msh.status`; :meth:`Msh.inbox`, :meth:`Msh.fetch`,
    :meth:`Msh.ack`, :meth:`Msh.attempts`; callbacks ``on_delivered(message_id)``,
    ``on_failed(message_id, issue)`` and ``on_message(entry_id, message_id)``, called after the commit
    that decided them, on the runtime's event loop (keep them short; a callback that raises is logged,
    never retried). Only the runtime of this process calls them (after :meth:`Msh.start`, e.g. in
    :func:`msh.runtime.serving.serve`): an ``Msh`` used beside a separate ``msh serve`` never does, and
    polls :meth:`Msh.status` and :meth:`Msh.inbox` instead.

Runtime (asyncio, after :meth:`Msh.start`)
    * one store transaction per step: a received message, its duplicate-elimination record, inbox row
      and acknowledgment are committed together before the acknowledgment leaves (ebMS2 §6.5.2, DESIGN.md
      §5.2-§5.3); a submitted message is committed with its timer before its first transmission (§5.1);
    * transmissions re-send the stored bytes unchanged, at most ``sending.max_in_flight`` at once, over
      one keep-alive HTTP client; the answer on the connection (acknowledgment, ErrorList, SOAP Fault) is
      processed in the same transaction as the transmission's outcome;
    * a timer loop claims due timer rows (leases, so a process that died loses its claims) and feeds
      :class:`~msh.engine.TimerDue` to the sending state machine; after a restart it simply finds what is
      due. It wakes at the next due time, and at least every ``timers.poll_interval`` to pick up work
      that other processes wrote (``msh send`` while ``msh serve`` runs).

Store writes go through one :class:`~msh.store.writer.GroupCommitWriter` (group commit): every step of
every message is a unit of work run in a savepoint, and the units that queue up while one transaction
commits share the next one, so one disk flush serves many messages and their results (the reply to send,
the transmission to start, the callback to call) are acted on only after that commit. Parsing, agreement
checks and reads run beside it on a small thread pool, so neither the event loop nor the writer waits on
them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import logging
import os
import re
import socket
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO, Final, TypeVar

from cpa.check import CheckResult, check
from cpa.errors import CpaError
from cpa.loader import load
from cpa.model import CollaborationProtocolAgreement
from cpa.registry import CpaRegistry
from cpa.resolve import AgreementRefused, PartyKey, SendingParameters, party_keys
from msh.ebms.digest import content_digest
from msh.ebms.envelope import read_reply_address, serialise_envelope
from msh.ebms.errorlist import soap_fault
from msh.ebms.message import EbxmlMessage, ParseMode, parse_message, write_message
from msh.ebms.model import Envelope, MessageStatus, Party, ReplyAddress
from msh.ebms.namespaces import SERVICE_MSH
from msh.engine import (
    CancelTimer,
    ConflictingDuplicate,
    Discard,
    EndpointRef,
    ErrorReceived,
    Event,
    InboundDecision,
    NotifyDelivered,
    NotifyFailed,
    OutboundEvent,
    OutboundStatus,
    RecordAcknowledgment,
    Reject,
    Reliability,
    ReplySync,
    ResendStoredAck,
    ScheduleTimer,
    SendAsync,
    SignalReceived,
    StatusAnswer,
    StoredInbound,
    StoreInbound,
    Submit,
    TimerDue,
    Transmit,
    TransmitFailed,
    UnknownMessage,
    receive,
    step,
)
from msh.engine.binding import refusal, reply_status, transmission_outcome
from msh.engine.signals import foreign_signal
from msh.errors import ConfigurationError, EbmsError, EnvelopeError, Issue
from msh.runtime import attempts as attempts_
from msh.runtime.compose import Submission, compose, new_message_id
from msh.runtime.config import Settings
from msh.runtime.mapping import (
    TIMER_RETRY,
    TIMER_TRANSMIT,
    party_text,
    reliability_to_store,
    state_from_store,
    state_to_store,
)
from msh.safexml import parse_xml
from msh.store import api as store_api
from msh.store.api import Direction, DuplicateMessage, InboxEntry, InboxState, OutboundMessage, Store, Transaction
from msh.store.writer import GroupCommitWriter, Writer
from msh.transport.asgi import server_fault
from msh.transport.http import HttpTransport
from msh.transport.port import SOAP_CONTENT_TYPE, HttpReply, Request, Transport, TransportFailure
from msh.transport.tls import ClientContexts, client_certificate_issue

__all__ = ["HttpReply", "Msh", "ReceivedMessage", "load_agreements"]

log = logging.getLogger("msh.runtime")

_KEEP_FOR_FIRST_SEND: Final = 1 << 20  # bytes: a submitted body this small is kept in memory until sent once
_GROUP_COMMIT: Final = 64  # units of work (message steps) at most in one store transaction
_POOL_THREADS: Final = 2  # parsing, agreement checks, reads beside the writer
_PARSE_ON_LOOP: Final = 32 << 10  # bytes: a message this small is parsed on the event loop (a few ms at most,
# the limits of msh.safexml and the codec keep its work linear); a larger one on the work pool
_T = TypeVar("_T")

DeliveredCallback = Callable[[str], object]
FailedCallback = Callable[[str, Issue], object]
MessageCallback = Callable[[int, str], object]


def load_agreements(files: Iterable[Path], *, verify_signatures: bool = True) -> list[CollaborationProtocolAgreement]:
    """Load every agreement file of ``files`` (:meth:`AgreementSettings.files` expands folders); log each
    agreement's warnings (e.g. an unfilled signature template: it loads as unsigned)."""
    agreements = []
    for f in files:
        try:
            agreement = load(f, verify_signature=verify_signatures)
        except CpaError as exc:
            raise ConfigurationError(f"agreements.paths: {f} cannot be used:\n{exc}") from exc
        for warning in agreement.warnings:
            log.warning("agreements.paths: %s", warning)
        agreements.append(agreement)
    if not agreements:
        raise ConfigurationError("agreements.paths names no agreement file; add the CPA files this MSH works under")
    return agreements


@dataclass(frozen=True, slots=True)
class ReceivedMessage:
    """A message from the inbox: its entry, its envelope and its payloads (spooled; :meth:`close` them)."""

    entry: InboxEntry
    message: EbxmlMessage

    @property
    def envelope(self) -> Envelope:
        return self.message.envelope

    def close(self) -> None:
        self.message.close()


@dataclass
class _After:
    """Work decided in a unit of work, done once its transaction has committed; and the outbound rows
    the unit has read or written (so a second step of the same message in the unit reads no row)."""

    transmits: list[tuple[str, int]] = field(default_factory=list)
    notices: list[Callable[[], object]] = field(default_factory=list)
    async_replies: list[tuple[bytes, EndpointRef]] = field(default_factory=list)
    rows: dict[str, OutboundMessage] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Inbound:
    """A received message, parsed and checked against the agreements, ready for its unit of work;
    ``digest`` its content digest (business messages only: what duplicate elimination compares)."""

    message: EbxmlMessage
    raw: BinaryIO | bytes
    result: CheckResult
    now: datetime
    digest: str | None = None


class _Retry(Exception):
    """The transaction lost a race (a concurrent copy of the same MessageId committed first): run it again."""


_ENVELOPE_START = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?Envelope[\s>]")
_ENVELOPE_END = re.compile(rb"</(?:[A-Za-z_][\w.-]*:)?Envelope\s*>")


def _salvage_header(body: bytes) -> ReplyAddress | None:
    """Who to answer about a message that failed to parse, if its envelope can still be found and its
    MessageHeader's addressing read (to address the ErrorList to its sender, ebMS2 §4.2.4.2)."""
    start = _ENVELOPE_START.search(body, 0, 1 << 20)
    if start is None:
        return None
    end = _ENVELOPE_END.search(body, start.start(), start.start() + (1 << 20))
    if end is None:
        return None
    try:
        return read_reply_address(parse_xml(body[start.start() : end.end()], what="SOAP envelope"))
    except (EbmsError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A submission composed and serialised, with the unit of work that commits it."""

    message_id: str
    params: SendingParameters
    content_type: str
    body: bytes | BinaryIO
    unit: Callable[[Transaction], _After]

    def close(self) -> None:
        if not isinstance(self.body, bytes):
            self.body.close()


def _large(submission: Submission) -> bool:
    """Whether composing ``submission`` reads or copies enough to be done off the event loop."""
    sizes = (len(p.content) if isinstance(p.content, bytes) else _KEEP_FOR_FIRST_SEND + 1 for p in submission.payloads)
    return sum(sizes) > _KEEP_FOR_FIRST_SEND


def _party_text(party: Party) -> str:
    first = party.party_ids[0]
    return party_text(first.value, first.type)


def _owner() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{os.urandom(4).hex()}"


class Msh:
    """One MSH: agreements, store, and (after :meth:`start`) the HTTP client and timer loop."""

    def __init__(
        self,
        settings: Settings,
        *,
        store: Store | None = None,
        agreements: Iterable[CollaborationProtocolAgreement] | None = None,
        clock: Callable[[], datetime] = store_api.utc_now,
        on_delivered: DeliveredCallback | None = None,
        on_failed: FailedCallback | None = None,
        on_message: MessageCallback | None = None,
        transport: Transport | None = None,
        writer: Writer | None = None,
        ids: Callable[[], str] | None = None,
        offload: bool = True,
    ) -> None:
        """``store``, ``agreements``, ``transport`` and ``writer`` default to what ``settings`` say (the
        store at ``store.url``, the agreement files, HTTP(S), a group-commit writer); ``clock`` and ``ids``
        (the source of new MessageIds) to the real ones; ``offload`` False parses and reads on the event
        loop, never on a thread (the deterministic test network, :mod:`msh.testing.network`)."""
        self.settings = settings
        self.clock = clock
        self.party: PartyKey = (settings.identity.party_id, settings.identity.party_id_type)
        loaded = (
            list(agreements)
            if agreements is not None
            else load_agreements(settings.agreements.files(), verify_signatures=settings.agreements.verify_signatures)
        )
        ours = [c for c in loaded if any(self.party in party_keys(p) for p in c.party_infos)]
        if not ours:
            raise ConfigurationError(
                f"identity.party_id {self._party_label()} is not a party "
                f"of any loaded agreement ({', '.join(c.cpaid for c in loaded)}): check identity.party_id and "
                f"identity.party_id_type"
            )
        timeouts: dict[str, timedelta] = {}
        first = settings.sending.first_resend_timeout
        if first is not None:
            for cpa in ours:
                for info in cpa.party_infos:
                    for channel in (*info.delivery_channels, info.default_msh_channel):
                        timeouts[channel.channel_id] = first
        self.registry = CpaRegistry(ours, first_resend_timeouts=timeouts)
        self.store = store if store is not None else Store.open(settings.store.url)
        self._own_store = store is None
        self.on_delivered = on_delivered
        self.on_failed = on_failed
        self.on_message = on_message
        self.counters: Counter[str] = Counter()
        self._owner = _owner()
        self._tls = ClientContexts(
            certificate=settings.tls.certificate, private_key=settings.tls.private_key, trusted=settings.tls.trusted
        )
        self._writer: Writer = (
            writer
            if writer is not None
            else GroupCommitWriter(self.store, max_batch=_GROUP_COMMIT, name="msh-store-writer")
        )
        domain = settings.identity.message_id_domain
        self.ids: Callable[[], str] = ids if ids is not None else functools.partial(new_message_id, domain)
        self._offload = offload
        self._routes: dict[tuple[str, str, str, str], SendingParameters] = {}
        self._first_send: dict[str, tuple[str, str, bytes, SendingParameters]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pool: ThreadPoolExecutor | None = None
        s = settings.sending
        self.transport: Transport = (
            transport
            if transport is not None
            else HttpTransport(timeout=s.http_timeout, connect_timeout=s.connect_timeout, max_in_flight=s.max_in_flight)
        )
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timer_task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._running = False

    def _party_label(self) -> str:
        value, type_ = self.party
        return f"{value!r}" + (f" (type {type_})" if type_ else "")

    # ------------------------------------------------------------------------------ application API

    def submit(self, submission: Submission) -> str:
        """Commit a message for sending and return its MessageId; it is transmitted at once when the
        runtime runs in this process, else by the timer loop of the process that serves this store.

        Raises :class:`~cpa.resolve.AgreementRefused` (a :class:`ConfigurationError`) when no agreement
        in force lets us send it, :class:`ConfigurationError` for a choice the agreement forbids.
        Blocks until the commit; on an event loop, ``await`` :meth:`submit_async` instead.
        """
        prepared = self._prepare(submission)
        try:
            after = self._writer.call(prepared.unit)
        finally:
            prepared.close()
        return self._submitted(prepared, after)

    async def submit_async(self, submission: Submission) -> str:
        """:meth:`submit` for asyncio applications: the commit is awaited, not waited for, so many
        submissions share a commit (group commit) and the event loop goes on meanwhile."""
        prepared = await self._off_loop(self._prepare, submission) if _large(submission) else self._prepare(submission)
        try:
            after = await self._writer.run(prepared.unit)
        finally:
            prepared.close()
        return self._submitted(prepared, after)

    def _prepare(self, submission: Submission) -> _Prepared:
        """Resolve, compose and serialise a submission; its unit of work commits it (DESIGN.md §5.1)."""
        now = self.clock()
        params = self._resolve_for(submission, now)
        domain = self.settings.identity.message_id_domain
        message_id = self.ids()
        composed = compose(
            params,
            submission,
            message_id=message_id,
            now=now,
            conversation_id=submission.conversation_id or self.ids(),
            content_id_domain=domain,
            ack_default=self.settings.sending.ack_requested,
            duplicate_elimination_default=self.settings.sending.duplicate_elimination,
        )
        reliability = Reliability.from_parameters(
            params, ack_requested=composed.ack_requested, time_to_live=submission.time_to_live
        )
        state, actions = step(None, Submit(message_id, reliability), now)
        spool = tempfile.SpooledTemporaryFile(max_size=_KEEP_FOR_FIRST_SEND)  # noqa: SIM115 (closed by _Prepared.close)
        try:
            content_type = write_message(spool, composed.envelope, composed.attachments)  # type: ignore[arg-type]
            small = spool.tell() <= _KEEP_FOR_FIRST_SEND
            spool.seek(0)
            body: bytes | BinaryIO = spool.read() if small else spool  # type: ignore[assignment]
        except BaseException:
            spool.close()
            raise
        if small:
            spool.close()
        conversation_id = composed.envelope.message_header.conversation_id  # type: ignore[union-attr]

        def unit(tx: Transaction) -> _After:
            after = _After()
            if not isinstance(body, bytes):
                body.seek(0)  # streamed to the store (again, if a lost transaction runs this unit twice)
            blob = tx.put_blob(body)
            tx.insert_outbound(
                message_id=message_id,
                cpaid=params.cpaid,
                conversation_id=conversation_id,
                service=params.service,
                action=params.action,
                from_party=party_text(params.from_party_ids[0].value, params.from_party_ids[0].type),
                to_party=party_text(params.to_party_ids[0].value, params.to_party_ids[0].type),
                endpoint_url=params.endpoint_url,
                content_type=content_type,
                body_blob_id=blob,
                parameters=reliability_to_store(reliability),
                state=state_to_store(state),
            )
            tx.append_event(
                at=now,
                kind="submitted",
                message_id=message_id,
                direction=Direction.OUTBOUND,
                detail={"cpaid": params.cpaid, "action": params.action, "to": party_text(*submission.to_party)},
            )
            # A new message has no timer to replace.
            self._apply_sending_actions(
                tx, message_id, actions, now, after, queue_transmit=not self._running, fresh=True
            )
            return after

        return _Prepared(message_id, params, content_type, body, unit)

    def _submitted(self, prepared: _Prepared, after: _After) -> str:
        body = prepared.body
        if self._running and isinstance(body, bytes) and after.transmits:
            # The first transmission sends these bytes, identical to the stored ones, without reading them back.
            self._first_send[prepared.message_id] = (
                prepared.content_type,
                prepared.params.endpoint_url,
                body,
                prepared.params,
            )
        self.counters["submitted"] += 1
        self._after_commit(after)
        return prepared.message_id

    def status(self, message_id: str) -> OutboundMessage | None:
        """The stored state of a message we sent (None: no such MessageId)."""
        with self.store.transaction(readonly=True) as tx:
            return tx.get_outbound(message_id)

    def attempts(self, message_id: str, *, limit: int = 100) -> list[attempts_.Attempt]:
        """The transmissions of a message we sent (the newest ``limit``), each with why it failed (the
        transport error, the HTTP status) and the ErrorList errors the partner sent back; empty when
        nothing was transmitted yet (or no such MessageId)."""
        with self.store.transaction(readonly=True) as tx:
            events = tx.message_events(message_id, direction=Direction.OUTBOUND, limit=limit * 3)
        return attempts_.attempts(events)[-limit:]

    def inbox(self, state: InboxState | None = InboxState.NEW, *, limit: int = 100) -> list[InboxEntry]:
        """Received messages for the application (``state`` None: all), oldest first."""
        with self.store.transaction(readonly=True) as tx:
            return tx.inbox_list(state, limit=limit)

    def fetch(self, entry_id: int, *, mark_delivered: bool = True) -> ReceivedMessage:
        """The received message of inbox entry ``entry_id``, marked delivered-to-app (ack it when it is
        safe); with ``mark_delivered=False`` the entry is left as it is (a read, no store write)."""
        with self.store.transaction(readonly=True) as tx:
            entry = tx.inbox_entry(entry_id)
            record = tx.get_inbound(entry_id) if entry is not None else None
        if record is None or entry is None:
            raise store_api.UnknownMessage(entry_id, "inbox entry")
        # The stored body never changes: it is parsed outside the write transaction.
        with self.store.open_blob(record.body_blob_id) as blob:
            parsed = parse_message(blob, record.content_type, mode=ParseMode.LENIENT)
        if not mark_delivered:
            return ReceivedMessage(entry, parsed)
        try:
            now = self.clock()
            entry = self._writer.call(lambda tx: tx.inbox_mark_delivered(entry_id, now))
        except BaseException:
            parsed.close()
            raise
        return ReceivedMessage(entry, parsed)

    def ack(self, entry_id: int) -> InboxEntry:
        """The application holds inbox entry ``entry_id`` safely: it is not offered again."""
        now = self.clock()
        return self._writer.call(lambda tx: tx.inbox_ack(entry_id, now))

    def _resolve_for(self, submission: Submission, now: datetime) -> SendingParameters:
        common: dict[str, Any] = {
            "from_party": self.party,
            "from_role": submission.from_role,
            "to_party": submission.to_party,
            "to_role": submission.to_role,
            "service": submission.service,
            "action": submission.action,
            "service_type": submission.service_type,
            "now": now,
        }
        if submission.cpa_id is not None:
            return self.registry.resolve(submission.cpa_id, **common)
        found = self.registry.find(
            self.party, submission.to_party, submission.service, submission.action, submission.service_type, now=now
        )
        if len(found) != 1:
            what = "no agreement" if not found else f"{len(found)} agreements ({', '.join(c.cpaid for c in found)})"
            raise ConfigurationError(
                f"{what} in force let {self._party_label()} send {submission.service}/{submission.action} to "
                f"{submission.to_party[0]!r}: name the CPAId"
                + (" of the one to use" if found else ", or load the agreement that allows it")
            )
        return self.registry.resolve(found[0].cpaid, **common)

    # ------------------------------------------------------------------------------ sending machine

    def _apply_sending_actions(
        self,
        tx: store_api.Transaction,
        message_id: str,
        actions: Iterable[object],
        now: datetime,
        after: _After,
        *,
        queue_transmit: bool = False,
        fresh: bool = False,
    ) -> None:
        """Execute the sending machine's actions in ``tx`` (``fresh``: a new message, which has no timers)."""
        for action in actions:
            if isinstance(action, ScheduleTimer):
                tx.schedule_timer(message_id, TIMER_RETRY, action.due_at, replace_existing=not fresh)
            elif isinstance(action, CancelTimer):
                tx.cancel_timers(message_id)
            elif isinstance(action, Transmit):
                if queue_transmit:
                    # Another process serves this store: its timer loop transmits (DESIGN.md §5.1).
                    tx.schedule_timer(message_id, TIMER_TRANSMIT, now, replace_existing=not fresh)
                else:
                    after.transmits.append((action.message_id, action.attempt))
                if action.attempt > 1:
                    self.counters["resent"] += 1
                    tx.append_event(
                        at=now,
                        kind="resent",
                        message_id=message_id,
                        direction=Direction.OUTBOUND,
                        detail={"attempt": action.attempt},
                    )
            elif isinstance(action, NotifyDelivered):
                self.counters["acknowledged"] += 1
                tx.append_event(at=now, kind="delivered", message_id=message_id, direction=Direction.OUTBOUND)
                callback = self.on_delivered
                if callback is not None:
                    after.notices.append(functools.partial(callback, message_id))
            elif isinstance(action, NotifyFailed):
                self.counters["failed"] += 1
                issue = action.issue
                tx.append_event(
                    at=now,
                    kind="failed",
                    message_id=message_id,
                    direction=Direction.OUTBOUND,
                    detail={
                        "errorCode": issue.error_code.value,
                        "severity": issue.severity.value,
                        "description": issue.description,
                    },
                )
                log.warning("message %s failed: %s", message_id, issue)
                failed_cb = self.on_failed
                if failed_cb is not None:
                    after.notices.append(functools.partial(failed_cb, message_id, issue))

    def _step_outbound(
        self,
        tx: store_api.Transaction,
        message_id: str,
        event: Event,
        now: datetime,
        after: _After,
        stored: OutboundMessage | None = None,
    ) -> OutboundStatus | None:
        """One step of the sending machine of ``message_id``, committed with the caller's transaction
        (``stored``: its row, already read for update in this transaction)."""
        stored = stored or after.rows.get(message_id) or tx.get_outbound(message_id, for_update=True)
        if stored is None:
            raise UnknownMessage(f"no outbound message {message_id}")
        state = state_from_store(stored)
        if isinstance(event, ErrorReceived):
            # ebMS2 §4.2.4: the partner's ErrorList says why it refused the message: kept with the attempt.
            tx.append_event(
                at=now,
                kind=attempts_.ERROR_RECEIVED,
                message_id=message_id,
                direction=Direction.OUTBOUND,
                detail=attempts_.error_detail(state.attempts, event.error_list),
            )
            log.warning(
                "ErrorList about %s (after transmission %d): %s",
                message_id,
                state.attempts,
                "; ".join(str(e) for e in attempts_.received_errors(event.error_list)),
            )
        new, actions = step(state, event, now)
        if new != state:
            written = state_to_store(new)
            tx.update_outbound_state(message_id, written)
            stored = replace(stored, state=written)
        after.rows[message_id] = stored
        self._apply_sending_actions(tx, message_id, actions, now, after)
        return new.status

    def _route_to_outbound(
        self, tx: store_api.Transaction, routed: OutboundEvent, now: datetime, after: _After
    ) -> None:
        stored = after.rows.get(routed.message_id) or tx.get_outbound(routed.message_id, for_update=True)
        if stored is None:
            # ebMS2 §6.5.2: an Acknowledgment (or error) for a message we do not know is ignored.
            self.counters["unknown-signals"] += 1
            log.info("signal for unknown message %s ignored", routed.message_id)
            return
        reason = foreign_signal(routed, sent_to=stored.to_party, sent_under=stored.cpaid)
        if reason is not None:
            # DESIGN.md §7: only the party the message went to, under its agreement, may report on it.
            self.counters["foreign-signals"] += 1
            log.warning("signal about %s ignored: %s", routed.message_id, reason)
            return
        self._step_outbound(tx, routed.message_id, routed.event, now, after, stored)

    # ------------------------------------------------------------------------------ receiving

    def _stored_inbound(self, tx: store_api.Transaction, message_id: str) -> StoredInbound | None:
        record = tx.find_inbound(message_id)
        if record is None:
            return None
        entry = tx.inbox_entry(record.id)
        delivered = entry is not None and entry.state is not InboxState.NEW
        return StoredInbound(record.message_id, record.ack_envelope, delivered, record.content_digest)

    def _status_answer(self, tx: store_api.Transaction, envelope: Envelope) -> StatusAnswer | None:
        request = envelope.status_request
        if request is None:
            return None
        record = tx.find_inbound(request.ref_to_message_id)
        if record is None:
            return None
        # ebMS2 §7.3.3: Received - the message was received by this MSH.
        return StatusAnswer(MessageStatus.RECEIVED, record.received_at)

    def _check(self, message: EbxmlMessage, raw: BinaryIO | bytes, peer_certificate: bytes | None = None) -> _Inbound:
        """Check a parsed message against the agreements (no store access: done outside the writer), and
        the TLS client certificate it came with (DER) against the party it claims to come from."""
        now = self.clock()
        s = self.settings.agreements
        result = check(message.envelope, self.registry, now=now, reading=s.reading, msh_time_accuracy=s.time_accuracy)
        header = message.envelope.message_header
        if peer_certificate is not None and result.cpa is not None and header is not None:
            # DESIGN.md §7: the certificate presented must belong to the party the header claims.
            issue = client_certificate_issue(result.cpa, header.from_party, peer_certificate)
            if issue is not None:
                self.counters["certificate-mismatches"] += 1
                log.warning("message %s refused: %s", header.message_id, issue.description)
                result = replace(result, issues=(*result.issues, issue))
        # Computed here, off the store transaction: the unit of work only compares it (ebMS2 §6.5.6).
        digest = content_digest(message) if header is not None and header.service.value != SERVICE_MSH else None
        return _Inbound(message, raw, result, now, digest)

    def _receive_unit(
        self,
        inbound: _Inbound,
        *,
        sync_override: bool | None,
        then: Callable[[Transaction, _After], None] | None = None,
    ) -> Callable[[Transaction], tuple[InboundDecision, bytes | None, _After]]:
        """The unit of work that decides and commits one received message: it returns the decision, the
        synchronous reply bytes and the work for after the commit. ``then`` runs in the same unit, after
        the decision's store actions."""
        envelope = inbound.message.envelope
        header = envelope.message_header
        now = inbound.now

        def unit(tx: Transaction) -> tuple[InboundDecision, bytes | None, _After]:
            for _attempt in range(3):
                after = _After()
                try:
                    with tx.savepoint():
                        duplicate = None
                        if header is not None and header.service.value != SERVICE_MSH:
                            duplicate = self._stored_inbound(tx, header.message_id)
                        decision = receive(
                            envelope,
                            check_result=inbound.result,
                            duplicate=duplicate,
                            now=now,
                            new_message_id=self.ids(),
                            sync_reply_requested=sync_override,
                            message_status=self._status_answer(tx, envelope),
                            digest=inbound.digest,
                        )
                        sync = self._apply_inbound(tx, inbound.message, inbound.raw, decision, now, after)
                        if then is not None:
                            then(tx, after)
                    return decision, sync, after
                except _Retry:
                    continue  # another process stored this MessageId meanwhile: decide again, as a duplicate
            raise ConfigurationError("a received message kept losing the race for its MessageId; giving up on it")

        return unit

    def _apply_inbound(
        self,
        tx: store_api.Transaction,
        message: EbxmlMessage,
        raw: BinaryIO | bytes,
        decision: InboundDecision,
        now: datetime,
        after: _After,
    ) -> bytes | None:
        header = message.envelope.message_header
        serialised: dict[int, bytes] = {}

        def wire(stored: bytes | Envelope) -> bytes:
            if isinstance(stored, bytes):
                return stored
            key = id(stored)
            if key not in serialised:
                serialised[key] = serialise_envelope(stored)
            return serialised[key]

        sync_reply: bytes | None = None
        for action in decision.actions:
            if isinstance(action, StoreInbound):
                assert header is not None
                ack = wire(action.record_ack) if action.record_ack is not None else None
                if not isinstance(raw, bytes):
                    raw.seek(0)  # the body as received, streamed to the store (again after a _Retry)
                blob = tx.put_blob(raw)
                try:
                    record = tx.insert_inbound(
                        message_id=action.message_id,
                        from_party=_party_text(header.from_party),
                        to_party=_party_text(header.to_party),
                        cpaid=header.cpa_id,
                        conversation_id=header.conversation_id,
                        service=header.service.value,
                        action=header.action,
                        received_at=action.received_at or now,
                        content_type=message.content_type,
                        body_blob_id=blob,
                        ack_envelope=ack,
                        deliver=action.deliver,
                        duplicate_elimination=action.duplicate_elimination,
                        content_digest=action.digest,
                    )
                except DuplicateMessage:
                    raise _Retry() from None
                self.counters["received"] += 1
                if action.deliver:
                    self.counters["delivered-to-inbox"] += 1
                tx.append_event(
                    at=now,
                    kind="received",
                    message_id=action.message_id,
                    direction=Direction.INBOUND,
                    detail={
                        "cpaid": header.cpa_id,
                        "action": header.action,
                        "acknowledged": ack is not None,
                        "issues": [str(i) for i in decision.issues],
                    },
                )
                callback = self.on_message
                if callback is not None and action.deliver:
                    after.notices.append(functools.partial(callback, record.id, record.message_id))
            elif isinstance(action, RecordAcknowledgment):
                tx.record_acknowledgment(action.message_id, wire(action.acknowledgment))
            elif isinstance(action, ResendStoredAck):
                count = tx.increment_duplicate(action.message_id, now)
                self.counters["duplicates"] += 1
                tx.append_event(
                    at=now,
                    kind="duplicate",
                    message_id=action.message_id,
                    direction=Direction.INBOUND,
                    detail={"count": count},
                )
                if action.sync:
                    sync_reply = wire(action.acknowledgment)
                else:
                    after.async_replies.append((wire(action.acknowledgment), action.to_endpoint))
            elif isinstance(action, (ReplySync, SendAsync)):
                if isinstance(action, ReplySync):
                    sync_reply = wire(action.envelope)
                else:
                    after.async_replies.append((wire(action.envelope), action.to_endpoint))
            elif isinstance(action, Reject):
                self.counters["rejected"] += 1
                tx.append_event(
                    at=now,
                    kind="rejected",
                    message_id=action.message_id,
                    direction=Direction.INBOUND,
                    detail={"issues": [str(i) for i in decision.issues]},
                )
                log.info("message %s refused: %s", action.message_id, "; ".join(str(i) for i in decision.issues))
                if action.sync:
                    sync_reply = wire(action.error_message)
                elif action.to_endpoint is not None:
                    after.async_replies.append((wire(action.error_message), action.to_endpoint))
            elif isinstance(action, OutboundEvent):
                self._route_to_outbound(tx, action, now, after)
            elif isinstance(action, SignalReceived):
                self.counters[f"signal-{action.action}"] += 1
                tx.append_event(
                    at=now,
                    kind=f"signal-{action.action}",
                    message_id=action.ref_to_message_id,
                    direction=Direction.INBOUND,
                )
            elif isinstance(action, ConflictingDuplicate):
                self.counters["conflicting-duplicates"] += 1
                tx.append_event(
                    at=now,
                    kind="conflicting-duplicate",
                    message_id=action.message_id,
                    direction=Direction.INBOUND,
                    detail={"stored_digest": action.stored_digest, "received_digest": action.received_digest},
                )
                log.warning(
                    "message %s came again with other content (%s, stored %s): refused",
                    action.message_id,
                    action.received_digest,
                    action.stored_digest,
                )
            elif isinstance(action, Discard):
                if decision.duplicate:
                    self.counters["duplicates"] += 1
                    assert header is not None
                    tx.increment_duplicate(header.message_id, now)
                log.info("discarded: %s", action.reason)
        return sync_reply

    def receive_http(
        self, body: BinaryIO | bytes, content_type: str | None, *, peer_certificate: bytes | None = None
    ) -> tuple[HttpReply, _After]:
        """Process one POSTed message and commit it (blocking; :meth:`handle_http` is the endpoint's way):
        the reply and the work for after the commit.

        ``body`` is the request body, as bytes or a seekable stream (it is read twice: parsed, then
        stored as received); ``peer_certificate`` the TLS client certificate (DER) it came with."""
        parsed = self._parse_inbound(body, content_type, peer_certificate)
        if isinstance(parsed, HttpReply):
            return parsed, _After()
        try:
            return self._http_reply(*self._writer.call(self._receive_unit(parsed, sync_override=None)))
        finally:
            parsed.message.close()

    def _parse_inbound(
        self, body: BinaryIO | bytes, content_type: str | None, peer_certificate: bytes | None = None
    ) -> _Inbound | HttpReply:
        """Parse and check a POSTed message; an HttpReply when it cannot be read (nothing to commit)."""
        stream: BinaryIO = io.BytesIO(body) if isinstance(body, bytes) else body
        try:
            receiving = self.settings.receiving
            message = parse_message(
                stream,
                content_type,
                mode=receiving.parse_mode,
                allow_unterminated=receiving.accept_unterminated_packages,
            )
        except EnvelopeError as exc:
            self.counters["unreadable"] += 1
            log.info("unreadable message refused: %s", exc)
            return self._fault(exc)
        except EbmsError as exc:
            stream.seek(0)
            return self._parse_refusal(exc, stream.read(1 << 20), content_type, self.clock())
        try:
            if message.warnings:
                log.info("received with warnings: %s", "; ".join(str(w) for w in message.warnings))
            return self._check(message, stream, peer_certificate)
        except BaseException:
            message.close()
            raise

    @staticmethod
    def _http_reply(decision: InboundDecision, reply: bytes | None, after: _After) -> tuple[HttpReply, _After]:
        status = reply_status(decision, reply is not None)
        return HttpReply(status, SOAP_CONTENT_TYPE if reply is not None else None, reply or b""), after

    def _fault(self, exc: EbmsError, *, status: int = 500) -> HttpReply:
        # SOAP 1.1 §6.2: a SOAP Fault goes back with HTTP 500.
        return HttpReply(status, SOAP_CONTENT_TYPE, serialise_envelope(soap_fault(exc)))

    def _parse_refusal(self, exc: EbmsError, body: bytes, content_type: str | None, now: datetime) -> HttpReply:
        self.counters["rejected"] += 1
        log.info("unparseable message refused: %s", exc)
        media = content_type.split(";", 1)[0].strip().lower() if content_type is not None else None
        answer = refusal(
            exc,
            media_type=media,
            reply_to=_salvage_header(body),
            message_id=self.ids(),
            timestamp=now,
        )
        assert answer.envelope is not None
        return HttpReply(answer.status, SOAP_CONTENT_TYPE, serialise_envelope(answer.envelope))

    # ------------------------------------------------------------------------------ runtime

    @property
    def running(self) -> bool:
        return self._running

    async def start(self, *, timers: bool = True) -> None:
        """Start the runtime on the running event loop: transmissions, and the timer loop unless ``timers``
        is False (then :meth:`run_due_timers` is the caller's to call)."""
        if self._running:
            return
        self._loop = asyncio.get_running_loop()
        if self._offload:
            self._pool = ThreadPoolExecutor(max_workers=_POOL_THREADS, thread_name_prefix="msh-work")
        self._wake = asyncio.Event()
        self._running = True
        if timers:
            self._timer_task = asyncio.create_task(self._timer_loop(), name="msh-timers")

    async def stop(self) -> None:
        """Stop the timer loop, let transmissions in flight finish (bounded), close the client."""
        if not self._running:
            return
        self._running = False
        if self._timer_task is not None:
            self._timer_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer_task
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self.settings.sending.http_timeout.total_seconds() + 1)
        for task in list(self._tasks):
            task.cancel()
        await self.transport.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        w = self._writer.stats
        if w.batches:
            log.info(
                "store writer: %d transactions carried %d steps (%.1f per transaction), %.2f ms each of which "
                "%.2f ms commit",
                w.batches,
                w.units,
                w.mean_batch,
                w.busy_seconds / w.batches * 1000,
                w.commit_seconds / w.batches * 1000,
            )

    def close(self) -> None:
        """Commit what is queued, stop the store writer and close the store (when this object opened it)."""
        self._writer.close()
        if self._own_store:
            self.store.close()

    @property
    def writer(self) -> Writer:
        """The store writer (its ``stats`` show how many steps each commit carried)."""
        return self._writer

    async def _off_loop(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn`` on the work pool (parsing, checks, reads), not on the event loop."""
        if not self._offload:
            return fn(*args)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fn, *args)

    async def handle_http(
        self,
        body: BinaryIO | bytes,
        content_type: str | None,
        *,
        size: int | None = None,
        peer_certificate: bytes | None = None,
    ) -> HttpReply:
        """The endpoint: process a POSTed message, do the after-commit work, return the HTTP reply.

        ``size`` (the body's length, when known) lets a small message be parsed on the event loop; a
        large one is parsed on the work pool. ``peer_certificate`` is the TLS client certificate (DER)
        the message came with: it must belong to the party the header names as From."""
        if size is None and isinstance(body, bytes):
            size = len(body)
        try:
            if not self._offload or (size is not None and size <= _PARSE_ON_LOOP):
                parsed = self._parse_inbound(body, content_type, peer_certificate)
            else:
                parsed = await self._off_loop(self._parse_inbound, body, content_type, peer_certificate)
            if isinstance(parsed, HttpReply):
                return parsed
            try:
                reply, after = self._http_reply(*await self._writer.run(self._receive_unit(parsed, sync_override=None)))
            finally:
                parsed.message.close()
        except Exception as exc:  # the store failed: nothing was committed, the sender will resend
            log.exception("could not process a received message")
            return server_fault(f"the receiving MSH could not process the message: {exc}")
        self._after_commit(after)
        return reply

    def _after_commit(self, after: _After) -> None:
        for notice in after.notices:
            try:
                notice()
            except Exception:
                log.exception("an application callback raised")
        if not after.transmits and not after.async_replies:
            return
        loop = self._loop
        if loop is None or not self._running:
            return
        for message_id, attempt in after.transmits:
            self._spawn_threadsafe(loop, functools.partial(self._transmit, message_id, attempt))
        for body, ref in after.async_replies:
            self._spawn_threadsafe(loop, functools.partial(self._send_async_reply, body, ref))

    def _spawn_threadsafe(self, loop: asyncio.AbstractEventLoop, make: Callable[[], Awaitable[None]]) -> None:
        def spawn() -> None:
            task = asyncio.ensure_future(make())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            spawn()
        else:
            loop.call_soon_threadsafe(spawn)

    # -- transmitting

    def _load_for_send(self, message_id: str) -> tuple[OutboundMessage, bytes] | None:
        with self.store.transaction(readonly=True) as tx:
            stored = tx.get_outbound(message_id)
            if stored is None or stored.state.status.value in ("delivered", "failed"):
                return None
            with tx.open_blob(stored.body_blob_id) as blob:
                body = blob.read()
        return stored, body

    def _params_of(self, stored: OutboundMessage) -> SendingParameters | None:
        """The sending parameters of a stored message's route (resolved once per route, not per message)."""
        route = (stored.cpaid, stored.to_party, stored.service, stored.action)
        params = self._routes.get(route)
        if params is not None:
            return params
        cpa = self.registry.get(stored.cpaid)
        if cpa is None:
            return None
        to_keys = [k for info in cpa.party_infos for k in party_keys(info) if party_text(*k) == stored.to_party]
        if not to_keys:
            return None
        try:
            params = self.registry.resolve(
                stored.cpaid,
                from_party=self.party,
                to_party=to_keys[0],
                service=stored.service,
                action=stored.action,
                now=self.clock(),
            )
        except AgreementRefused:
            return None
        self._routes[route] = params
        return params

    async def _transmit(self, message_id: str, attempt: int) -> None:
        first = self._first_send.pop(message_id, None)
        params: SendingParameters | None
        if first is not None and attempt == 1:
            content_type, endpoint_url, body, params = first
        else:
            loaded = await self._off_loop(self._load_for_send, message_id)
            if loaded is None:
                return
            stored, body = loaded
            content_type, endpoint_url = stored.content_type, stored.endpoint_url
            params = self._params_of(stored)
        ssl_context = self._tls.for_parameters(params) if params is not None else self._tls.for_url(endpoint_url)
        self.counters["transmissions"] += 1
        try:
            response = await self.transport.send(Request(endpoint_url, content_type, body, ssl_context))
        except TransportFailure as failure:
            self.counters["transmit-failures"] += 1
            log.warning("transmission %d of %s failed: %s", attempt, message_id, failure.reason)
            record = attempts_.transmission_detail(attempt, endpoint_url, error=failure.reason)
            await self._step_async(message_id, TransmitFailed(failure.reason), record)
            return
        await self._outcome(message_id, attempt, endpoint_url, response.status, response.content_type, response.body)

    async def _step_async(self, message_id: str, event: Event, record: dict[str, object] | None = None) -> None:
        """One step of the sending machine in a unit of work of its own; ``record`` (the detail of a
        transmission's outcome) is journaled with it."""

        def unit(tx: Transaction) -> _After:
            after = _After()
            try:
                if record is not None:
                    self._record_transmission(tx, message_id, record)
                self._step_outbound(tx, message_id, event, self.clock(), after)
            except UnknownMessage:
                log.warning("no outbound message %s to apply %s to", message_id, type(event).__name__)
            return after

        self._after_commit(await self._writer.run(unit))

    def _record_transmission(self, tx: Transaction, message_id: str, detail: dict[str, object]) -> None:
        """Journal the outcome of one transmission (why it failed, what came back), in the transaction
        of the step it causes: no commit of its own."""
        tx.append_event(
            at=self.clock(),
            kind=attempts_.TRANSMISSION,
            message_id=message_id,
            direction=Direction.OUTBOUND,
            detail=detail,
        )

    async def _outcome(
        self, message_id: str, attempt: int, url: str, status: int, content_type: str | None, body: bytes
    ) -> None:
        if len(body) <= _PARSE_ON_LOOP:
            inbound, event = self._read_answer(message_id, status, content_type, body)
        else:
            inbound, event = await self._off_loop(self._read_answer, message_id, status, content_type, body)
        envelope = inbound.message.envelope if inbound is not None else None
        if envelope is None and isinstance(event, ErrorReceived):
            answer = "SOAP Fault"
        else:
            answer = attempts_.answer_kind(envelope, body)
        error = event.reason if isinstance(event, TransmitFailed) else None
        if error is not None:
            log.warning("transmission %d of %s failed: %s (answer: %s)", attempt, message_id, error, answer)
        record = attempts_.transmission_detail(attempt, url, http_status=status, error=error, answer=answer)

        if inbound is None:
            await self._step_async(message_id, event, record)
            return

        def outcome(tx: Transaction, after: _After) -> None:
            try:
                self._record_transmission(tx, message_id, record)
                self._step_outbound(tx, message_id, event, self.clock(), after)
            except UnknownMessage:
                log.warning("no outbound message %s for the outcome of its transmission", message_id)

        try:
            # The answer on the connection (acknowledgment, ErrorList) commits with the exchange's outcome.
            _decision, _reply, after = await self._writer.run(
                self._receive_unit(inbound, sync_override=False, then=outcome)
            )
        finally:
            inbound.message.close()
        self._after_commit(after)

    def _read_answer(
        self, message_id: str, status: int, content_type: str | None, body: bytes
    ) -> tuple[_Inbound | None, Event]:
        """What the answer to a transmission means: the ebXML message it carries (checked, for the
        receiving machine) and the sending machine's event for the transmission itself."""
        message: EbxmlMessage | None = None
        if body.strip():
            try:
                message = parse_message(body, content_type, mode=ParseMode.LENIENT)
            except EbmsError as exc:
                log.warning("answer to %s (HTTP %s) is not an ebXML message: %s", message_id, status, exc)
        try:
            fault = message.envelope.fault if message is not None else None
            event = transmission_outcome(status, fault)
            if message is None or message.envelope.fault is not None:
                if message is not None:
                    message.close()
                return None, event
            return self._check(message, body), event
        except BaseException:
            if message is not None:
                message.close()
            raise

    async def _send_async_reply(self, body: bytes, ref: EndpointRef) -> None:
        try:
            params = self.registry.resolve(
                ref.cpa_id,
                from_party=ref.from_party,
                to_party=ref.to_party,
                service=ref.service,
                action=ref.action,
                now=self.clock(),
            )
        except AgreementRefused as exc:
            # ebMS2 §4.2.4.2: no endpoint to report to: log it.
            log.warning("asynchronous %s not sent: %s", ref.action, exc)
            return
        request = Request(params.endpoint_url, SOAP_CONTENT_TYPE, body, self._tls.for_parameters(params))
        try:
            await self.transport.send(request)
            self.counters["async-replies"] += 1
        except TransportFailure as failure:
            # The sender resends its message and gets the stored acknowledgment again (ebMS2 §6.5.5).
            log.info("asynchronous %s to %s lost: %s", ref.action, params.endpoint_url, failure.reason)

    # -- timers

    def wake(self) -> None:
        """Look for due timers now (e.g. after another process queued work)."""
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def _timer_loop(self) -> None:
        assert self._wake is not None
        poll = self.settings.timers.poll_interval.total_seconds()
        while self._running:
            try:
                nearest = await self._run_due_timers()
            except Exception:
                log.exception("timer loop: store failure; trying again shortly")
                nearest = None
            wait = poll
            if nearest is not None:
                wait = max(0.0, min(poll, (nearest - self.clock()).total_seconds()))
            if wait > 0:
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)

    async def run_due_timers(self) -> datetime | None:
        """Fire the timers due now (claimed with a lease, so another process never fires them too), and
        return when the next one is due (None: no timer). The timer loop calls it; with ``start(timers=
        False)`` the caller does (the test network, after moving its clock)."""
        return await self._run_due_timers()

    async def _run_due_timers(self) -> datetime | None:
        lease = self.settings.timers.lease

        def claim(tx: Transaction) -> tuple[list[store_api.Timer], datetime | None]:
            timers = tx.claim_due_timers(self.clock(), self._owner, lease, limit=_GROUP_COMMIT)
            return timers, (tx.next_timer_due() if not timers else None)

        timers, nearest = await self._writer.run(claim)
        if timers:
            await asyncio.gather(*(self._fire(t) for t in timers))
            return self.clock()
        return nearest

    async def _fire(self, timer: store_api.Timer) -> None:
        def unit(tx: Transaction) -> _After:
            after = _After()
            if not tx.complete_timer(timer.id, self._owner):
                return after  # the lease was lost: another process does it
            if timer.kind == TIMER_TRANSMIT:
                stored = tx.get_outbound(timer.message_id)
                if stored is not None and stored.state.status.value not in ("delivered", "failed"):
                    after.transmits.append((timer.message_id, stored.state.attempts))
                return after
            try:
                self._step_outbound(tx, timer.message_id, TimerDue(), self.clock(), after)
            except UnknownMessage:
                log.warning("timer for unknown message %s dropped", timer.message_id)
            return after

        self._after_commit(await self._writer.run(unit))
