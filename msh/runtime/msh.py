"""The running MSH: the application's Python API and the runtime behind ``msh serve`` (docs/design.md §2, §5).

:class:`Msh` wires the parts of the runtime around the sans-IO engine and offers the application API:

Application API (synchronous, thread-safe; each call is one store transaction)
    :meth:`Msh.submit` -> MessageId (:meth:`Msh.submit_async` on an event loop); :meth:`Msh.status`,
    :meth:`Msh.attempts`, :meth:`Msh.receipt`; :meth:`Msh.messages`, :meth:`Msh.history` (operators,
    :mod:`~msh.runtime.queries`); :meth:`Msh.inbox`, :meth:`Msh.fetch`, :meth:`Msh.ack`;
    ``await`` :meth:`Msh.ping` (ebMS2 §8) and :meth:`Msh.remote_status` (§7: the To party's word on one of
    our messages), with the runtime in this process or beside ``msh serve`` on the same store; callbacks
    ``on_delivered(message_id)``, ``on_sent(message_id)`` (no acknowledgment by design),
    ``on_failed(message_id, issue)`` and ``on_message(entry_id, message_id)``, called after the commit that
    decided them, on the runtime's event loop (keep them
    short; a callback that raises is logged, never retried). Only the runtime of this process calls them
    (after :meth:`Msh.start`, e.g. in :func:`msh.runtime.serving.serve`): an ``Msh`` used beside a separate
    ``msh serve`` never does, and polls :meth:`Msh.status` and :meth:`Msh.inbox` instead.

The runtime (asyncio, after :meth:`Msh.start`)
    :mod:`~msh.runtime.submission` commits a submitted message with its timer before its first
    transmission (§5.1); :mod:`~msh.runtime.sender` transmits the stored bytes unchanged through the
    transport and commits each outcome with the answer it brought; :mod:`~msh.runtime.inbound` parses,
    checks, decides and commits each received message (its duplicate-elimination record, inbox entry and
    acknowledgment together, before the acknowledgment leaves: §5.2, §5.3); :mod:`~msh.runtime.timerloop`
    fires due timers (resends, give-ups, transmissions queued by other processes); all through
    :mod:`~msh.runtime.executor`, which turns the engine's actions into store writes and after-commit work.

Store writes go through one writer: the :class:`~msh.store.writer.GroupCommitWriter` by default (the
steps of many messages share one transaction and one disk flush, each in a savepoint of its own, and
their results are acted on only after that commit). Parsing, agreement checks and reads run beside it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO, TypeVar

from cpa.model import CollaborationProtocolAgreement
from cpa.registry import CpaRegistry
from cpa.resolve import PartyKey
from msh.ebms.message import EbxmlMessage, ParseMode, parse_message
from msh.ebms.model import Envelope
from msh.engine.routing import Route
from msh.errors import ConfigurationError
from msh.runtime import attempts as attempts_
from msh.runtime.agreements import agreements_in_use, load_agreements
from msh.runtime.compose import Submission
from msh.runtime.config import Settings
from msh.runtime.core import (
    Callbacks,
    DeliveredCallback,
    FailedCallback,
    MessageCallback,
    SentCallback,
    wire,
)
from msh.runtime.executor import AfterCommit, Executor
from msh.runtime.inbound import InboundPipeline
from msh.runtime.operating import Operating
from msh.runtime.queries import MessageQueries
from msh.runtime.security import MessageSecurity
from msh.runtime.sender import Sender
from msh.runtime.services import DEFAULT_TIMEOUT, PingResult, RemoteStatus, Services
from msh.runtime.submission import Prepared, Submissions, is_large
from msh.runtime.timerloop import TimerLoop
from msh.store import api as store_api
from msh.store import open_store
from msh.store.api import Direction, EventKind, InboxEntry, InboxState, OutboundMessage, Store
from msh.store.writer import Writer
from msh.transport.port import HttpReply, Transport

__all__ = ["AlsoCommit", "HttpReply", "Msh", "PingResult", "ReceivedMessage", "RemoteStatus", "load_agreements"]

log = logging.getLogger("msh.runtime")
_T = TypeVar("_T")


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


AlsoCommit = Callable[[store_api.Transaction, str], None]
"""Work committed with a submission, in its transaction: ``also(tx, message_id)``."""


def _with(also: AlsoCommit | None, prepared: Prepared) -> Callable[[store_api.Transaction], AfterCommit]:
    """The submission's unit of work, preceded by ``also`` in the same transaction."""
    if also is None:
        return prepared.unit

    def unit(tx: store_api.Transaction) -> AfterCommit:
        also(tx, prepared.message_id)
        return prepared.unit(tx)

    return unit


class Msh(MessageQueries, Operating):
    """One MSH: agreements, store, and (after :meth:`start`) its runtime (see the module docs); the operator's
    :meth:`messages` and :meth:`history` come from :class:`~msh.runtime.queries.MessageQueries`, :meth:`resend`
    and :meth:`purge` from :class:`~msh.runtime.operating.Operating`."""

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
        on_sent: SentCallback | None = None,
        transport: Transport | None = None,
        writer: Writer | None = None,
        ids: Callable[[], str] | None = None,
        offload: bool = True,
        routes: Iterable[Route] | None = None,
        keys: bool = True,
    ) -> None:
        """``store``, ``agreements``, ``transport`` and ``writer`` default to what ``settings`` say (the
        store at ``store.url``, the agreement files, HTTP(S), a group-commit writer); ``clock`` and ``ids``
        (the source of new MessageIds) to the real ones; ``offload`` False parses and reads on the event
        loop, never on a thread (the deterministic test network, :mod:`msh.testing.network`); ``routes``
        (the routing table, :mod:`msh.engine.routing`) to the settings' ``routing.routes``.

        Raises :class:`ConfigurationError` when an agreement asks for message security the MSH does not
        implement, or for keys the ``[security]`` settings do not give (:mod:`msh.runtime.security`).
        ``keys`` False leaves the keys unread and unchecked (commands that only read the store: no
        passphrase needed); such an MSH signs nothing and cannot :meth:`start`."""
        party: PartyKey = (settings.identity.party_id, settings.identity.party_id_type)
        registry = agreements_in_use(settings, agreements, party)
        security = MessageSecurity(settings.security, registry, party, with_keys=keys)
        if keys:
            # The keys the agreements need are there (refused at load, never at the first message).
            security.check_agreements(registry)
        opened = store if store is not None else open_store(settings.store.url)
        self._own_store = store is None
        self.core = wire(
            settings,
            party=party,
            registry=registry,
            security=security,
            store=opened,
            clock=clock,
            ids=ids,
            transport=transport,
            writer=writer,
            callbacks=Callbacks(on_delivered, on_failed, on_message, on_sent),
            offload=offload,
            routes=routes,
        )
        self.executor = Executor(self.core)
        self.inbound = InboundPipeline(self.core, self.executor)
        self.services = Services(self.core, self.executor, self.inbound)
        self.sender = Sender(self.core, self.executor, self.inbound, self.services)
        self.timers = TimerLoop(self.core, self.executor, self.sender)
        self.submissions = Submissions(self.core, self.executor)

    # -- what the application and the commands read

    @property
    def settings(self) -> Settings:
        return self.core.settings

    @property
    def registry(self) -> CpaRegistry:
        return self.core.registry

    @property
    def store(self) -> Store:
        return self.core.store

    @property
    def party(self) -> PartyKey:
        return self.core.party

    @property
    def clock(self) -> Callable[[], datetime]:
        return self.core.clock

    @property
    def counters(self) -> Counter[str]:
        return self.core.counters

    @property
    def transport(self) -> Transport:
        return self.core.transport

    @property
    def writer(self) -> Writer:
        """The store writer (its ``stats`` show how many steps each commit carried)."""
        return self.core.writer

    @property
    def running(self) -> bool:
        return self.core.running

    async def off_loop(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` on the MSH's work pool (reads of the store, parsing), not on the event loop: how the
        application interfaces do blocking work without reaching into the runtime's parts."""
        return await self.core.off_loop(fn, *args)

    on_delivered = property(
        lambda self: self.core.callbacks.on_delivered,
        lambda self, value: setattr(self.core.callbacks, "on_delivered", value),
    )
    on_failed = property(
        lambda self: self.core.callbacks.on_failed,
        lambda self, value: setattr(self.core.callbacks, "on_failed", value),
    )
    on_message = property(
        lambda self: self.core.callbacks.on_message,
        lambda self, value: setattr(self.core.callbacks, "on_message", value),
    )

    def listen_for_messages(self, listener: MessageCallback) -> None:
        """Have ``listener(entry_id, message_id)`` called, besides the application's ``on_message``, after
        each commit that gives a message to the application (the application interfaces wake their
        long-polling readers with it)."""
        self.core.callbacks.arrivals.append(listener)

    on_sent = property(
        lambda self: self.core.callbacks.on_sent,
        lambda self, value: setattr(self.core.callbacks, "on_sent", value),
    )

    # -- application API

    def submit(self, submission: Submission, *, also: AlsoCommit | None = None) -> str:
        """Commit a message for sending and return its MessageId; it is transmitted at once when the
        runtime runs in this process, else by the timer loop of the process that serves this store.
        ``also(tx, message_id)`` runs first in the same transaction (e.g. recording the application's
        request, :mod:`msh.api`): when it raises, nothing of the submission is committed.

        Raises :class:`~cpa.resolve.AgreementRefused` (a :class:`ConfigurationError`) when no agreement
        in force lets us send it, :class:`ConfigurationError` for a choice the agreement forbids.
        Blocks until the commit; on an event loop, ``await`` :meth:`submit_async` instead.
        """
        prepared = self.submissions.prepare(submission)
        try:
            after = self.core.writer.call(_with(also, prepared))
        finally:
            prepared.close()
        return self._submitted(prepared, after)

    async def submit_async(self, submission: Submission, *, also: AlsoCommit | None = None) -> str:
        """:meth:`submit` for asyncio applications: the commit is awaited, not waited for, so many
        submissions share a commit (group commit) and the event loop goes on meanwhile."""
        prepare = self.submissions.prepare
        # Large payloads and signing (libxmlsec releases the GIL) are done beside the event loop.
        offload = is_large(submission) or self.core.security.in_use
        prepared = await self.core.off_loop(prepare, submission) if offload else prepare(submission)
        try:
            after = await self.core.writer.run(_with(also, prepared))
        finally:
            prepared.close()
        return self._submitted(prepared, after)

    def _submitted(self, prepared: Prepared, after: AfterCommit) -> str:
        if self.core.running and isinstance(prepared.body, bytes) and prepared.content_type and after.transmits:
            self.sender.keep_for_first_send(
                prepared.message_id,
                prepared.content_type,
                prepared.body,
                prepared.params,
                endpoint_url=prepared.endpoint_url,
                time_to_live=prepared.time_to_live,
            )
        self.core.counters["submitted"] += 1
        self.sender.after_commit(after)
        return prepared.message_id

    def status(self, message_id: str) -> OutboundMessage | None:
        """The stored state of a message we sent (None: no such MessageId)."""
        with self.core.store.transaction(readonly=True) as tx:
            return tx.get_outbound(message_id)

    def attempts(self, message_id: str, *, limit: int = 100) -> list[attempts_.Attempt]:
        """The transmissions of a message we sent (the newest ``limit``), each with why it failed (the
        transport error, the HTTP status) and the ErrorList errors the partner sent back; empty when
        nothing was transmitted yet (or no such MessageId)."""
        with self.core.store.transaction(readonly=True) as tx:
            events = tx.message_events(message_id, direction=Direction.OUTBOUND, limit=limit * 3)
        return attempts_.attempts(events)[-limit:]

    def receipt(self, message_id: str) -> bytes | None:
        """The signed receipt kept for a message we sent: the signed Acknowledgment message whose
        ds:References matched what was sent (ebMS2 §6.3.2.5), as received; None when none was kept (no
        such message, no signed acknowledgment asked for, or none received yet)."""
        with self.core.store.transaction(readonly=True) as tx:
            events = tx.message_events(message_id, direction=Direction.OUTBOUND)
        kept = [e for e in events if e.kind == EventKind.RECEIPT and isinstance(e.detail.get("blob"), int)]
        if not kept:
            return None
        blob_id = kept[-1].detail["blob"]
        assert isinstance(blob_id, int)
        with self.core.store.open_blob(blob_id) as blob:
            return blob.read()

    def inbox(self, state: InboxState | None = InboxState.NEW, *, limit: int = 100) -> list[InboxEntry]:
        """Received messages for the application (``state`` None: all), oldest first."""
        with self.core.store.transaction(readonly=True) as tx:
            return tx.inbox_list(state, limit=limit)

    def fetch(self, entry_id: int, *, mark_delivered: bool = True) -> ReceivedMessage:
        """The received message of inbox entry ``entry_id``, marked delivered-to-app (ack it when it is
        safe); with ``mark_delivered=False`` the entry is left as it is (a read, no store write)."""
        core = self.core
        with core.store.transaction(readonly=True) as tx:
            entry = tx.inbox_entry(entry_id)
            record = tx.get_inbound(entry_id) if entry is not None else None
        if record is None or entry is None:
            raise store_api.UnknownMessage(entry_id, "inbox entry")
        # The stored body never changes: it is parsed outside the write transaction.
        with core.store.open_blob(record.body_blob_id) as blob:
            parsed = parse_message(blob, record.content_type, mode=ParseMode.LENIENT)
        if not mark_delivered:
            return ReceivedMessage(entry, parsed)
        try:
            now = core.clock()
            entry = core.writer.call(lambda tx: tx.inbox_mark_delivered(entry_id, now))
        except BaseException:
            parsed.close()
            raise
        return ReceivedMessage(entry, parsed)

    def ack(self, entry_id: int) -> InboxEntry:
        """The application holds inbox entry ``entry_id`` safely: it is not offered again."""
        now = self.core.clock()
        return self.core.writer.call(lambda tx: tx.inbox_ack(entry_id, now))

    # -- the MSH services (ebMS2 §7, §8)

    async def ping(
        self, partner: PartyKey | str, *, cpa_id: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> PingResult:
        """Send an MSH Ping (ebMS2 §8.1) to ``partner`` (its (PartyId, type), or a PartyId value whose
        type the agreements give) and wait up to ``timeout`` seconds for its Pong (§8.2).

        The Ping goes under ``cpa_id``, or the only agreement in force between us and the partner, to the
        endpoint it gives the partner's MSH signals (or along our routing table), with its TLS, signed as
        our signals are. The Pong may come back on the connection, or later to our endpoint (when the
        agreement's MSH channel is asynchronous): it is then received by the runtime of this process, or
        by ``msh serve`` on the same store (this waits for it in the store's journal). The result says
        the round-trip time, or what went wrong (connection refused, TLS failure, HTTP status, an error
        message such as NotSupported, no Pong in time). Raises :class:`~msh.errors.ConfigurationError`
        when no agreement in force names the partner, and
        :class:`~msh.runtime.services.AgreementChoice` when several do and ``cpa_id`` is not given."""
        return await self.services.ping(partner, self.sender.after_commit, cpa_id=cpa_id, timeout=timeout)

    async def remote_status(self, message_id: str, *, timeout: float = DEFAULT_TIMEOUT) -> RemoteStatus:
        """Ask the To party of our message ``message_id`` for its status (a StatusRequest, ebMS2 §7.1.1) and
        wait up to ``timeout`` seconds for the StatusResponse (§7.1.2, §7.3).

        The request goes where the message went (same URL and TLS); the answer is waited for as with
        :meth:`ping`. What the partner says is also handed to the message's sending state machine when it
        comes from that party under the message's agreement: Received or Processed make the message
        ``delivered`` (evidence ``status-response``), also after it failed with severity Warning. Raises
        :class:`~msh.errors.ConfigurationError` for a MessageId that is not one of our sent messages."""
        return await self.services.remote_status(message_id, self.sender.after_commit, timeout=timeout)

    # -- the endpoint

    async def handle_http(
        self,
        body: BinaryIO | bytes,
        content_type: str | None,
        *,
        size: int | None = None,
        peer_certificate: bytes | None = None,
    ) -> HttpReply:
        """The endpoint: process a POSTed message, do the after-commit work, return the HTTP reply
        (:meth:`msh.runtime.inbound.InboundPipeline.handle_http`)."""
        return await self.inbound.handle_http(
            body, content_type, done=self.sender.after_commit, size=size, peer_certificate=peer_certificate
        )

    def receive_http(
        self, body: BinaryIO | bytes, content_type: str | None, *, peer_certificate: bytes | None = None
    ) -> tuple[HttpReply, AfterCommit]:
        """Process one POSTed message and commit it, blocking: the reply and the work for after the commit."""
        return self.inbound.receive_http(body, content_type, peer_certificate=peer_certificate)

    # -- the runtime

    async def start(self, *, timers: bool = True) -> None:
        """Start the runtime on the running event loop: transmissions, and the timer loop unless ``timers``
        is False (then :meth:`run_due_timers` is the caller's to call)."""
        if self.core.running:
            return
        if not self.core.security.with_keys:
            raise ConfigurationError("this MSH was opened without its keys (Msh(keys=False)); it cannot run")
        self.core.life.begin()
        if timers:
            self.timers.start()

    async def run_due_timers(self) -> datetime | None:
        """Fire the timers due now (claimed with a lease, so another process never fires them too), and
        return when the next one is due (None: no timer)."""
        return await self.timers.run_all_due()

    def wake(self) -> None:
        """Look for due timers now (e.g. after another process queued work)."""
        self.timers.wake()

    async def stop(self) -> None:
        """Stop the timer loop (releasing the timers it claimed and did not fire: another process serving the
        store takes them at once), let transmissions in flight finish (bounded), close the transport."""
        core = self.core
        if not core.running:
            return
        core.life.stop()
        core.questions.wake_all()  # those waiting for a Pong or StatusResponse give up now
        await self.timers.stop()
        if core.tasks:
            await asyncio.wait(set(core.tasks), timeout=core.settings.sending.http_timeout.total_seconds() + 1)
        for task in list(core.tasks):
            task.cancel()
        await core.transport.close()
        core.life.end()
        w = core.writer.stats
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
        self.core.writer.close()
        if self._own_store:
            self.core.store.close()
