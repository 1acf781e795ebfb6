"""Submissions: an application's message becomes a committed outbound message (docs/design.md §5.1).

:meth:`Submissions.prepare` resolves the agreement that lets this party send the message, composes its
envelope (:mod:`msh.runtime.compose`), serialises it once (the bytes every transmission will send) and
starts its sending machine; the unit of work it returns commits the message with its state and first timer
before anything is transmitted. The bytes stay in memory for the first transmission when they are small.

A message of a conversation whose agreement guarantees order (ebMS2 §9) gets its SequenceNumber in its unit
of work (:func:`msh.engine.ordering.assign` on the conversation's counter, read and written in the same
transaction), so it is composed, signed and serialised there; a new message of a sequence that broke is
refused with :class:`~msh.errors.ConfigurationError` until the earlier ones are final.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO, Final, TypeAlias

from cpa.check import time_to_live_floor
from cpa.resolve import Exchange, SendingParameters
from msh.ebms.envelope import serialise_envelope
from msh.ebms.message import write_message
from msh.ebms.model import MessageOrder
from msh.engine import Action, OutboundState, Reliability, Submit, step
from msh.engine.ordering import SequenceNotReady, assign
from msh.engine.signals import party_text
from msh.errors import ConfigurationError
from msh.runtime.compose import Composed, Submission, compose, is_ordered
from msh.runtime.core import Core
from msh.runtime.executor import AfterCommit, Executor
from msh.store.api import Direction, EventKind, Transaction

__all__ = ["KEEP_FOR_FIRST_SEND", "Prepared", "Submissions"]

log = logging.getLogger("msh.runtime")

KEEP_FOR_FIRST_SEND: Final = 1 << 20
"""Bytes: a submitted body this small is kept in memory until sent once (and composed on the event loop)."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """A submission composed and serialised, with the unit of work that commits it."""

    message_id: str
    params: SendingParameters
    content_type: str | None
    """None (and ``body`` None) for a message in order, written by its unit of work."""
    body: bytes | BinaryIO | None
    unit: Callable[[Transaction], AfterCommit]
    endpoint_url: str
    time_to_live: datetime | None = None
    """The message's TimeToLive (ebMS2 §6.4.5), which its first transmission carries too."""

    def close(self) -> None:
        if self.body is not None and not isinstance(self.body, bytes):
            self.body.close()


def is_large(submission: Submission) -> bool:
    """Whether composing ``submission`` reads or copies enough to be done off the event loop."""
    sizes = (len(p.content) if isinstance(p.content, bytes) else KEEP_FOR_FIRST_SEND + 1 for p in submission.payloads)
    return sum(sizes) > KEEP_FOR_FIRST_SEND


class Submissions:
    """Turns submissions into units of work (see the module docs)."""

    def __init__(self, core: Core, executor: Executor) -> None:
        self.core = core
        self.executor = executor
        self.forwarding = executor.forwarding

    def resolve(self, submission: Submission, now: datetime) -> SendingParameters:
        """The sending parameters of the one agreement in force that lets us send ``submission``."""
        core = self.core
        exchange = Exchange(
            core.party,
            submission.to_party,
            submission.service,
            submission.action,
            service_type=submission.service_type,
            from_role=submission.from_role,
            to_role=submission.to_role,
        )
        if submission.cpa_id is not None:
            return core.registry.resolve(submission.cpa_id, exchange, now=now)
        found = core.registry.find(
            core.party, submission.to_party, submission.service, submission.action, submission.service_type, now=now
        )
        if len(found) != 1:
            what = "no agreement" if not found else f"{len(found)} agreements ({', '.join(c.cpaid for c in found)})"
            raise ConfigurationError(
                f"{what} in force let {core.party_label()} send {submission.service}/{submission.action} to "
                f"{submission.to_party[0]!r}: name the CPAId"
                + (" of the one to use" if found else ", or load the agreement that allows it")
            )
        return core.registry.resolve(found[0].cpaid, exchange, now=now)

    def prepare(self, submission: Submission) -> Prepared:
        """Resolve, compose and serialise a submission; its unit of work commits it (docs/design.md §5.1). A
        message of a conversation in order (ebMS2 §9) is composed, signed and serialised in its unit of work,
        which gives it its SequenceNumber."""
        core = self.core
        now = core.clock()
        params = self.resolve(submission, now)
        sending = core.settings.sending
        draft = _Draft(
            submission,
            params,
            core.ids(),
            submission.conversation_id or core.ids(),
            now,
            core.settings.identity.message_id_domain,
            sending.ack_requested,
            sending.duplicate_elimination,
        )
        # Composed now to check it (also for a message in order, whose number comes in its unit of work).
        composed = draft.composed(MessageOrder(0) if draft.ordered else None)
        _check_time_to_live(params, composed, submission.time_to_live, now)
        reliability = Reliability.from_parameters(
            params, ack_requested=composed.ack_requested, time_to_live=submission.time_to_live, hop_ack=composed.hop_ack
        )
        state, actions = step(None, Submit(draft.message_id, reliability), now)
        # ebMS2 §10: a route to the To party (through an intermediary) wins over the agreement's endpoint.
        to_party = composed.envelope.message_header.to_party  # type: ignore[union-attr]
        route = self.forwarding.route(to_party, params.cpaid, params.service, params.action)
        endpoint_url = route.next_hop if route is not None else params.transport.endpoint_url
        written = None if draft.ordered else self._write(params, composed)
        unit = self._unit(draft, written, state, actions, endpoint_url)
        if written is None:
            return Prepared(draft.message_id, params, None, None, unit, endpoint_url, submission.time_to_live)
        return Prepared(draft.message_id, params, written[0], written[1], unit, endpoint_url, submission.time_to_live)

    def _unit(
        self,
        draft: _Draft,
        written: _Written | None,
        state: OutboundState,
        actions: tuple[Action, ...],
        endpoint_url: str,
    ) -> Callable[[Transaction], AfterCommit]:
        """The unit of work committing ``draft``: its bytes (``written``, or composed there with its
        SequenceNumber), its state and first timer, its ``submitted`` journal entry."""
        core, params, message_id, now = self.core, draft.params, draft.message_id, draft.now

        def unit(tx: Transaction) -> AfterCommit:
            after = AfterCommit()
            number: int | None = None
            if written is None:
                order = _next_in_order(tx, params.cpaid, draft.conversation_id)
                number = order.sequence_number
                content_type, body, signed, encrypted = self._write(params, draft.composed(order))
            else:
                content_type, body, signed, encrypted = written
            try:
                self._commit(tx, body, state, params, draft.conversation_id, endpoint_url, content_type, number)
            finally:
                if written is None and not isinstance(body, bytes):
                    body.close()
            detail: dict[str, object] = {
                "cpaid": params.cpaid,
                "action": params.action,
                "to": party_text(*draft.submission.to_party),
                "signed": signed,
                "encrypted": encrypted,
            }
            if number is not None:
                detail["sequenceNumber"] = number
            tx.append_event(
                at=now, kind=EventKind.SUBMITTED, message_id=message_id, direction=Direction.OUTBOUND, detail=detail
            )
            # A new message has no timer to replace; with no runtime here, the serving process transmits it.
            self.executor.apply_sending_actions(
                tx, message_id, actions, now, after, queue_transmit=not core.running, fresh=True
            )
            return after

        return unit

    def _write(self, params: SendingParameters, composed: Composed) -> _Written:
        """The message's Content-Type and bytes (in memory when small, else a spooled file the caller closes),
        and whether it was signed and encrypted."""
        # ebMS2 §4.1.3, §4.1.4.5: signed (then encrypted) as the agreement says, before the bytes are stored,
        # so that every transmission sends the same signed message (docs/design.md §5.1).
        soap, attachments, signed, encrypted = self.core.security.seal(
            params, serialise_envelope(composed.envelope), composed.attachments
        )
        spool = tempfile.SpooledTemporaryFile(max_size=KEEP_FOR_FIRST_SEND)  # noqa: SIM115 (closed by the caller)
        try:
            content_type = write_message(
                spool,  # type: ignore[arg-type]
                composed.envelope,
                attachments,
                soap=soap,
            )
            small = spool.tell() <= KEEP_FOR_FIRST_SEND
            spool.seek(0)
            body: bytes | BinaryIO = spool.read() if small else spool  # type: ignore[assignment]
        except BaseException:
            spool.close()
            raise
        if small:
            spool.close()
        return content_type, body, signed, encrypted

    def _commit(
        self,
        tx: Transaction,
        body: bytes | BinaryIO,
        state: OutboundState,
        params: SendingParameters,
        conversation_id: str,
        endpoint_url: str,
        content_type: str,
        sequence_number: int | None,
    ) -> None:
        if not isinstance(body, bytes):
            body.seek(0)  # streamed to the store (again, if a lost transaction runs this unit twice)
        blob = tx.put_blob(body)
        tx.insert_outbound(
            state=state,
            cpaid=params.cpaid,
            conversation_id=conversation_id,
            service=params.service,
            action=params.action,
            from_party=party_text(params.from_party.ids[0].value, params.from_party.ids[0].type),
            to_party=party_text(params.to_party.ids[0].value, params.to_party.ids[0].type),
            endpoint_url=endpoint_url,
            content_type=content_type,
            body_blob_id=blob,
            sequence_number=sequence_number,
        )


_Written: TypeAlias = tuple[str, bytes | BinaryIO, bool, bool]
"""A message's Content-Type, its bytes (in memory when small, else a spooled file), signed, encrypted."""


@dataclass(frozen=True, slots=True)
class _Draft:
    """A submission with what its message is composed from: the agreement's parameters, its MessageId,
    ConversationId and Timestamp, and the MSH's defaults for the agreement's ``perMessage`` choices."""

    submission: Submission
    params: SendingParameters
    message_id: str
    conversation_id: str
    now: datetime
    content_id_domain: str
    ack_default: bool
    duplicate_elimination_default: bool

    @property
    def ordered(self) -> bool:
        return is_ordered(self.params)

    def composed(self, order: MessageOrder | None) -> Composed:
        return compose(
            self.params,
            self.submission,
            message_id=self.message_id,
            now=self.now,
            conversation_id=self.conversation_id,
            content_id_domain=self.content_id_domain,
            ack_default=self.ack_default,
            duplicate_elimination_default=self.duplicate_elimination_default,
            message_order=order,
        )


def _check_time_to_live(params: SendingParameters, composed: Composed, ttl: datetime | None, now: datetime) -> None:
    """Refuse a TimeToLive too early for a reliably sent message."""
    rm = params.reliable_messaging
    if ttl is None or not composed.ack_requested or rm is None:
        return
    # ebMS2 §6.4.5: "For a reliably delivered message, TimeToLive MUST conform to: TimeToLive >
    # Timestamp + ((Retries + 1) * RetryInterval)".
    floor = time_to_live_floor(rm.retries, rm.retry_interval, now)
    if ttl <= floor:
        raise ConfigurationError(
            f"TimeToLive {ttl.isoformat()} is too early for a reliably sent message under agreement "
            f"{params.cpaid}: it must be after Timestamp + (Retries + 1) x RetryInterval = {floor.isoformat()} "
            f"(Retries {rm.retries}, RetryInterval {rm.retry_interval}; ebMS2 §6.4.5); give a later "
            "TimeToLive, or none"
        )


def _next_in_order(tx: Transaction, cpaid: str, conversation_id: str) -> MessageOrder:
    """The next SequenceNumber of the conversation, taken in ``tx``; refused while the sequence is broken."""
    # ebMS2 §9.1.1: given in the transaction that commits the message (a message not committed takes none).
    counter = tx.sequence_counter(cpaid, conversation_id)
    waits = counter is not None and (counter.broken or counter.restarted)
    under_way = tx.ordered_under_way(cpaid, conversation_id) if waits else 0
    try:
        order, counter = assign(counter, under_way=under_way, conversation_id=conversation_id)
    except SequenceNotReady as exc:
        raise ConfigurationError(str(exc)) from None
    tx.set_sequence_counter(cpaid, conversation_id, counter)
    return order
