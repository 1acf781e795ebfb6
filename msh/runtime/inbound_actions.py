"""What each action of a receiving decision (:func:`msh.engine.receive`, :func:`msh.engine.intermediary.forward`)
does inside a store transaction: one small handler per action, found by :data:`HANDLERS` (action type ->
handler), as the engine's transitions are found by its table. A type the table lacks is refused, and a test
holds the table against the engine's :data:`msh.engine.inbound.InboundAction` union.

The handlers write rows (the received message, its inbox entry, acknowledgments, the journal), hand
signals about our own messages to their sending machines, and set the reply that goes back on the
connection; they decide nothing about the protocol.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, BinaryIO, Final, Protocol

from msh.ebms.message import EbxmlMessage
from msh.ebms.model import Envelope, MessageHeader
from msh.engine import (
    ConflictingDuplicate,
    Discard,
    EndpointRef,
    InboundDecision,
    KeepOrder,
    OutboundEvent,
    RecordAcknowledgment,
    Reject,
    Reliability,
    ReplySync,
    ResendStoredAck,
    SendAsync,
    SignalReceived,
    StoredAck,
    StoreForward,
    StoreInbound,
)
from msh.engine.signals import party_text_of
from msh.errors import ErrorCode
from msh.runtime.aftercommit import AfterCommit
from msh.runtime.core import Core
from msh.runtime.questions import Question
from msh.runtime.security import ReceiptVerdict
from msh.runtime.sequences import Sequences, sequence_of_header
from msh.store.api import Direction, DuplicateMessage, OutboundKind, OutboundMessage, Transaction
from msh.store.events import EventKind
from msh.store.journal import MessageFacts

__all__ = ["HANDLERS", "Carrier", "InboundRun", "RaceLost", "apply"]

log = logging.getLogger("msh.runtime")


class RaceLost(Exception):
    """The unit lost a race (a concurrent copy of the same MessageId committed first): run it again."""


class Carrier(Protocol):
    """What the handlers use of the executor that runs them (:class:`msh.runtime.executor.Executor`): the
    store work shared with the sending side, named here so that this module does not import it back."""

    core: Core
    sequences: Sequences

    def signal_bytes(
        self, envelope: Envelope, message: EbxmlMessage, decision: InboundDecision, now: datetime
    ) -> bytes:
        """The bytes of a signal the decision sends, signed as the agreement and the decision ask."""

    def reply_async(
        self, tx: Transaction, stored: StoredAck, body: bytes, ref: EndpointRef, now: datetime, after: AfterCommit
    ) -> None:
        """Send a signal to ``ref`` after the commit."""

    def refused_facts(self, header: MessageHeader) -> MessageFacts:
        """The journal's facts of a refused message, from its header."""

    def route_to_outbound(
        self,
        tx: Transaction,
        routed: OutboundEvent,
        now: datetime,
        after: AfterCommit,
        receipt: ReceiptVerdict | None = None,
        *,
        attempt: int | None = None,
    ) -> None:
        """Hand a signal about one of our messages to its sending machine."""

    def record_signal(
        self, tx: Transaction, signal: SignalReceived, now: datetime, after: AfterCommit
    ) -> Question | None:
        """Journal a Pong or StatusResponse and claim the question it answers."""

    def start_job(
        self,
        tx: Transaction,
        kind: OutboundKind,
        header: MessageHeader,
        reliability: Reliability,
        body: BinaryIO | bytes,
        content_type: str,
        endpoint_url: str,
        now: datetime,
        after: AfterCommit,
    ) -> OutboundMessage | None:
        """Store a forward (or a routed signal of ours) and start its sending machine."""


@dataclass(slots=True)
class InboundRun:
    """Where the actions of one receiving decision are carried out, and what they leave for the caller.

    ``raw`` is the message's body as received; ``forwarded`` the body to forward and its Content-Type (for a
    :class:`StoreForward`); ``verified``: its signature was verified; ``receipts``: the checks of the signed
    acknowledgments it carries. ``sync_reply`` is what goes back on the connection (None: nothing)."""

    executor: Carrier
    tx: Transaction
    message: EbxmlMessage
    raw: BinaryIO | bytes
    decision: InboundDecision
    now: datetime
    after: AfterCommit
    forwarded: tuple[BinaryIO | bytes, str] | None = None
    verified: bool = False
    receipts: Mapping[str, ReceiptVerdict] = field(default_factory=dict)
    sync_reply: bytes | None = None
    asked: dict[str | None, Question] = field(default_factory=dict)
    _wire: dict[int, bytes] = field(default_factory=dict)

    @property
    def header(self) -> MessageHeader:
        header = self.message.envelope.message_header
        if header is None:  # the engine decides these actions only for a message with a MessageHeader
            raise ValueError("this action needs the message's MessageHeader")
        return header

    def wire(self, stored: bytes | Envelope) -> bytes:
        """The bytes of a signal the decision sends (each envelope serialised and signed once)."""
        if isinstance(stored, bytes):
            return stored
        key = id(stored)
        if key not in self._wire:
            self._wire[key] = self.executor.signal_bytes(stored, self.message, self.decision, self.now)
        return self._wire[key]

    def journal(self, kind: EventKind, message_id: str | None, detail: Mapping[str, object], **kw: Any) -> None:
        self.tx.append_event(
            at=self.now, kind=kind, message_id=message_id, direction=Direction.INBOUND, detail=detail, **kw
        )

    def reply(self, envelope: StoredAck, sync: bool, to_endpoint: EndpointRef | None) -> None:
        """Answer on the connection, or send asynchronously to ``to_endpoint`` after the commit (with neither,
        the signal is not even made)."""
        if sync:
            self.sync_reply = self.wire(envelope)
        elif to_endpoint is not None:
            self.executor.reply_async(self.tx, envelope, self.wire(envelope), to_endpoint, self.now, self.after)


def store_inbound(run: InboundRun, action: StoreInbound) -> None:
    header, counters = run.header, run.executor.core.counters
    ack = run.wire(action.record_ack) if action.record_ack is not None else None
    if not isinstance(run.raw, bytes):
        run.raw.seek(0)  # the body as received, streamed to the store (again after a lost race)
    blob = run.tx.put_blob(run.raw)
    try:
        record = run.tx.insert_inbound(
            message_id=action.message_id,
            from_party=party_text_of(header.from_party),
            to_party=party_text_of(header.to_party),
            cpaid=header.cpa_id,
            conversation_id=header.conversation_id,
            service=header.service.value,
            action=header.action,
            received_at=action.received_at or run.now,
            content_type=run.message.content_type,
            body_blob_id=blob,
            ack_envelope=ack,
            deliver=action.deliver,
            duplicate_elimination=action.duplicate_elimination,
            content_digest=action.digest,
            hold=action.hold,
            sequence_number=action.sequence_number,
            offered_at=action.offered_at,
        )
    except DuplicateMessage:
        raise RaceLost() from None
    counters["received"] += 1
    if action.deliver:
        counters["delivered-to-inbox"] += 1
    if action.hold:
        counters["held"] += 1
    received: dict[str, object] = {
        "cpaid": header.cpa_id,
        "action": header.action,
        "acknowledged": ack is not None,
        "signed": run.verified,
        "issues": [str(i) for i in run.decision.issues],
    }
    if action.sequence_number is not None:
        # ebMS2 §9.1.1: its place in its sequence, and whether it waits for a lower number.
        received |= {"sequenceNumber": action.sequence_number, "held": action.hold}
    run.journal(EventKind.RECEIVED, action.message_id, received)
    on_message = run.executor.core.callbacks.message_given()
    if on_message is not None and action.deliver:
        run.after.notices.append(functools.partial(on_message, record.id, record.message_id))


def keep_order(run: InboundRun, action: KeepOrder) -> None:
    # ebMS2 §9.1.1: the sequence's record, and the held messages whose turn has come.
    run.executor.sequences.keep(run.tx, sequence_of_header(run.header), action, run.now, run.after)


def record_acknowledgment(run: InboundRun, action: RecordAcknowledgment) -> None:
    run.tx.record_acknowledgment(action.message_id, run.wire(action.acknowledgment))


def resend_stored_ack(run: InboundRun, action: ResendStoredAck) -> None:
    count = run.tx.increment_duplicate(action.message_id, run.now)
    run.executor.core.counters["duplicates"] += 1
    run.journal(EventKind.DUPLICATE, action.message_id, {"count": count})
    run.reply(action.acknowledgment, action.sync, action.to_endpoint)


def reply_sync(run: InboundRun, action: ReplySync) -> None:
    run.sync_reply = run.wire(action.envelope)


def send_async(run: InboundRun, action: SendAsync) -> None:
    run.reply(action.envelope, False, action.to_endpoint)


def reject(run: InboundRun, action: Reject) -> None:
    run.executor.core.counters["rejected"] += 1
    issues = run.decision.issues
    # The refused message is not stored: its facts for the journal come from its header.
    header = run.message.envelope.message_header
    refused: MessageFacts | None = None if header is None else run.executor.refused_facts(header)
    run.journal(EventKind.REJECTED, action.message_id, {"issues": [str(i) for i in issues]}, facts=refused)
    expired = [i for i in issues if i.error_code is ErrorCode.TIME_TO_LIVE_EXPIRED]
    if expired:
        # ebMS2 §3.1.6.4: refused because its TimeToLive had passed: journaled as such too.
        detail = {"errorCode": expired[0].error_code.value, "severity": expired[0].severity.value}
        run.journal(EventKind.EXPIRED, action.message_id, detail, facts=refused)
    # The one line of a refusal (a security failure or a certificate that is not the party's included).
    log.warning("message %s refused: %s", action.message_id, "; ".join(str(i) for i in issues))
    run.reply(action.error_message, action.sync, action.to_endpoint)


def outbound_event(run: InboundRun, action: OutboundEvent) -> None:
    question = run.asked.get(action.in_reply_to) if action.in_reply_to is not None else None
    attempt = question.attempt if question is not None else None
    receipt = run.receipts.get(action.message_id)
    run.executor.route_to_outbound(run.tx, action, run.now, run.after, receipt, attempt=attempt)


def signal_received(run: InboundRun, action: SignalReceived) -> None:
    run.executor.core.counters[f"signal-{action.action}"] += 1
    question = run.executor.record_signal(run.tx, action, run.now, run.after)
    if question is not None:
        run.asked[action.ref_to_message_id] = question


def conflicting_duplicate(run: InboundRun, action: ConflictingDuplicate) -> None:
    run.executor.core.counters["conflicting-duplicates"] += 1
    detail = {"storedDigest": action.stored_digest, "receivedDigest": action.received_digest}
    run.journal(EventKind.CONFLICTING_DUPLICATE, action.message_id, detail)
    log.warning(
        "message %s came again with other content (other payloads or addressing: %s, first copy %s): a duplicate "
        "by its MessageId, not delivered; the sender may have reused the MessageId for another message",
        action.message_id,
        action.received_digest,
        action.stored_digest,
    )


def store_forward(run: InboundRun, action: StoreForward) -> None:
    header = run.header
    if run.forwarded is None:
        raise ValueError("a decision to forward needs the forwarded body (apply_inbound(forwarded=))")
    body, content_type = run.forwarded
    route = action.route
    job = run.executor.start_job(
        run.tx, OutboundKind.FORWARD, header, action.reliability, body, content_type, route.next_hop, run.now, run.after
    )
    if job is None:
        return
    run.executor.core.counters["forwards"] += 1
    detail = {
        "route": route.name,
        "next_hop": route.next_hop,
        "from": party_text_of(header.from_party),
        "to": party_text_of(header.to_party),
        "cpaid": header.cpa_id,
        "action": header.action,
        "hop_ack": action.reliability.ack_requested,
    }
    run.journal(EventKind.FORWARD, action.message_id, detail)


def discard(run: InboundRun, action: Discard) -> None:
    if run.decision.duplicate:
        run.executor.core.counters["duplicates"] += 1
        run.tx.increment_duplicate(run.header.message_id, run.now)
    log.info("discarded: %s", action.reason)


Handler = Callable[[InboundRun, Any], None]

HANDLERS: Final[Mapping[type, Handler]] = MappingProxyType(
    {
        StoreInbound: store_inbound,
        KeepOrder: keep_order,
        RecordAcknowledgment: record_acknowledgment,
        ResendStoredAck: resend_stored_ack,
        ReplySync: reply_sync,
        SendAsync: send_async,
        Reject: reject,
        OutboundEvent: outbound_event,
        SignalReceived: signal_received,
        ConflictingDuplicate: conflicting_duplicate,
        StoreForward: store_forward,
        Discard: discard,
    }
)
"""Action type of a receiving decision -> its handler."""


def apply(run: InboundRun, actions: Iterable[object]) -> bytes | None:
    """Carry out ``actions`` in order; return the reply for the connection. An action the table does not know
    is a bug, refused."""
    for action in actions:
        handler = HANDLERS.get(type(action))
        if handler is None:
            raise TypeError(f"no handler for the receiving action {type(action).__name__}")
        handler(run, action)
    return run.sync_reply
