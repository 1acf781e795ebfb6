"""What :func:`~msh.engine.receiving.receive` is given and what it returns (ebMS2 §6.5, §7, §8).

The inputs the runtime reads from its store (:class:`StoredInbound`, :class:`QueriedMessage`), the answer
the engine decides for a StatusRequest (:class:`StatusAnswer`), the actions a
decision lists for the runtime to carry out, in order (:data:`InboundAction`: store rows, replies on the
connection or sent asynchronously, events for the sending state machine, signals for the application,
discards), and :class:`InboundDecision`, which holds them. Plain frozen data: nothing here decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final, TypeAlias

from cpa.duration import XsDuration
from msh.ebms.model import Envelope, MessageStatus, Party
from msh.engine.ordering import OrderPosition
from msh.engine.reliability import Reliability, effective_actor
from msh.engine.routing import Route
from msh.engine.sending import AcknowledgmentReceived, ErrorReceived, StatusReported
from msh.errors import Issue

__all__ = [
    "ConflictingDuplicate",
    "Discard",
    "EndpointRef",
    "Held",
    "InboundAction",
    "InboundDecision",
    "KeepOrder",
    "NO_SEQUENCE",
    "OutboundEvent",
    "QueriedMessage",
    "RecordAcknowledgment",
    "Reject",
    "ReplySync",
    "ResendStoredAck",
    "SendAsync",
    "SequenceState",
    "SignalReceived",
    "StatusAnswer",
    "StoreForward",
    "StoreInbound",
    "StoredAck",
    "StoredInbound",
]

StoredAck: TypeAlias = bytes | Envelope
"""An acknowledgment as the store keeps it: its exact bytes (as sent, signed) or its envelope."""


# --- inputs -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredInbound:
    """What the store holds for a MessageId already received (ebMS2 §6.1): the acknowledgment sent for it
    (its first response, §6.5.6; None when none was sent) and whether the application has taken it."""

    message_id: str
    acknowledgment: StoredAck | None
    delivered: bool
    digest: str | None = None
    """The content digest stored with the first copy (:func:`msh.ebms.digest.content_digest`); None for a
    copy stored before digests were kept (then nothing is compared)."""


@dataclass(frozen=True, slots=True)
class SequenceState:
    """What the store holds for the sequence of a received message with a SequenceNumber (ebMS2 §9): its
    ``position`` (None: none of it received yet) and ``max_held``, the most messages the MSH keeps waiting
    for their turn in one conversation (§9.1.1: "the implementation defined limit for saved out-of-sequence
    messages")."""

    position: OrderPosition | None = None
    max_held: int = 1000


NO_SEQUENCE: Final = SequenceState()


class Held(StrEnum):
    """How this MSH holds a message a StatusRequest asks about (ebMS2 §6.1: its persistent storage)."""

    RECEIVED = "received"
    """Received as its To Party MSH and stored."""
    FORWARDED = "forwarded"
    """Received for another party and forwarded as an intermediary (ebMS2 §10)."""


@dataclass(frozen=True, slots=True)
class QueriedMessage:
    """What the store holds of the message a StatusRequest asks about (ebMS2 §7.1.1, §6.1): facts only;
    the answer is the engine's (:func:`msh.engine.replies.status_answer`).

    ``received_at`` is when it was received (ebMS2 §6.1: kept "so the information can be used to generate
    the response to a Message Status Request"); ``from_party`` and ``to_party`` its From and To PartyIds as
    stored (``type:value`` or the bare value, :func:`msh.engine.signals.party_text`);
    ``delivered_to_app`` whether the application has been given it (its inbox entry is delivered-to-app or
    acknowledged-by-app); ``agreement_parties`` every PartyId of every party of the agreement it came under
    (its CPAId), None when that agreement is not loaded here."""

    message_id: str
    held: Held
    received_at: datetime
    from_party: str | None
    to_party: str | None
    delivered_to_app: bool = False
    agreement_parties: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class StatusAnswer:
    """The answer to a StatusRequest (ebMS2 §7.3.3), and the time the message asked about was received
    (§7.3.2; omitted for NotRecognized and UnAuthorized)."""

    message_status: MessageStatus
    received_at: datetime | None = None


# --- actions ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EndpointRef:
    """Where an asynchronous reply goes, for the runtime to resolve to a URL through the agreement
    (``resolve(cpa, Exchange(from_party, to_party, service, action), now=...)``, ebMS2 §4.2.4.2)."""

    cpa_id: str
    from_party: Party
    to_party: Party
    service: str
    action: str

    @classmethod
    def of(cls, envelope: Envelope) -> EndpointRef:
        """The endpoint named by the MessageHeader of ``envelope`` (a reply this module built)."""
        h = envelope.message_header
        if h is None:
            raise ValueError("an asynchronous reply needs a MessageHeader")
        return cls(h.cpa_id, h.from_party, h.to_party, h.service.value, h.action)


@dataclass(frozen=True, slots=True)
class StoreInbound:
    """Commit the received message, its duplicate-elimination record (when ``duplicate_elimination``), its
    inbox row (when ``deliver``) and ``record_ack``, the acknowledgment about to be sent, all in one
    transaction (docs/design.md §5.2, §5.3; ebMS2 §6.5.3: the acknowledgment is persisted too), with the
    message's content ``digest`` (to tell a later copy's content from this one's, §6.5.6). Without
    duplicate elimination the same MessageId may be stored again."""

    message_id: str
    record_ack: Envelope | None
    deliver: bool
    duplicate_elimination: bool = True
    received_at: datetime | None = None
    digest: str | None = None
    hold: bool = False
    """Kept for the application but not yet offered: its turn in the sequence has not come (ebMS2 §9.1.1)."""
    sequence_number: int | None = None
    offered_at: datetime | None = None
    """When a message of a sequence enters the inbox (after the sequence's last one; None: when received)."""


@dataclass(frozen=True, slots=True)
class KeepOrder:
    """Keep ``position`` as the record of the received message's sequence (ebMS2 §9), in the transaction that
    stores it; ``release``: the messages held for the numbers now due follow it to the application, in order;
    ``abandon``: the sequence started again (Reset) and what the old one still held is abandoned."""

    position: OrderPosition
    release: bool = False
    abandon: bool = False
    gap_window: XsDuration | None = None
    """How long a gap in the sequence may stay open (:func:`msh.engine.ordering.gap_window` of the agreement);
    None: no limit in time (the sending channel has no ReliableMessaging)."""


@dataclass(frozen=True, slots=True)
class RecordAcknowledgment:
    """Store ``acknowledgment`` as the first response to a message already stored (ebMS2 §6.5.5 (2))."""

    message_id: str
    acknowledgment: Envelope


@dataclass(frozen=True, slots=True)
class ReplySync:
    """Put ``envelope`` on the HTTP response of the exchange that brought the message (ebMS2 §4.3)."""

    envelope: Envelope

    @property
    def message(self) -> StoredAck:
        return self.envelope

    @property
    def sync(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class SendAsync:
    """Queue ``envelope`` as an outbound signal to ``to_endpoint``."""

    envelope: Envelope
    to_endpoint: EndpointRef

    @property
    def message(self) -> StoredAck:
        return self.envelope

    @property
    def sync(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class ResendStoredAck:
    """Send the stored acknowledgment of duplicate ``message_id`` again, unchanged (ebMS2 §6.5.5, §6.5.6 2):
    on the HTTP response when ``sync``, else to ``to_endpoint``. Never a second delivery."""

    message_id: str
    acknowledgment: StoredAck
    sync: bool
    to_endpoint: EndpointRef

    @property
    def message(self) -> StoredAck:
        return self.acknowledgment


@dataclass(frozen=True, slots=True)
class Reject:
    """The message is refused (not stored, not delivered); ``error_message`` goes back to its sender, on the
    HTTP response when ``sync``, else to ``to_endpoint`` (ebMS2 §4.2.4). ``message_id`` is None when the
    message could not be read far enough (then ``error_message`` is a SOAP Fault and ``sync`` is True)."""

    message_id: str | None
    error_message: Envelope
    sync: bool
    to_endpoint: EndpointRef | None

    @property
    def message(self) -> StoredAck:
        return self.error_message


@dataclass(frozen=True, slots=True)
class OutboundEvent:
    """An event for the sending state machine of our message ``message_id`` (ebMS2 §6.5.2: acknowledgment;
    §4.2.4: error; §7.3.3: a StatusResponse about it). ``from_party`` and ``cpa_id`` are those of the message
    that carried it: the runtime checks them against the outbound message's To party and agreement before
    stepping. ``relay``: it came from an intermediary on the message's path, which the runtime trusts to
    speak for that hop (:func:`msh.engine.signals.foreign_signal`). ``in_reply_to``: the MessageId of our
    request it answers (a StatusResponse's MessageData/RefToMessageId names our StatusRequest, ebMS2
    §7.3.1), for the runtime to tell which question it answers."""

    message_id: str
    event: AcknowledgmentReceived | ErrorReceived | StatusReported
    from_party: Party | None = None
    cpa_id: str | None = None
    relay: bool = False
    in_reply_to: str | None = None


@dataclass(frozen=True, slots=True)
class SignalReceived:
    """A Pong or StatusResponse (ebMS2 §8.2, §7.1.2) for the application or the runtime that asked."""

    action: str
    ref_to_message_id: str | None
    envelope: Envelope


@dataclass(frozen=True, slots=True)
class Discard:
    """Nothing is done with (this part of) the message; ``reason`` says why, for the log."""

    reason: str


@dataclass(frozen=True, slots=True)
class StoreForward:
    """Store the received message as it came and start (or, for a resent copy, restart) its forward along
    ``route``: a sending machine with ``reliability``, sending the message with the next-MSH elements
    replaced by ``insert`` (complete XML elements). ``signal``: the message is an MSH signal.
    ``sync_relay``: the previous hop waits on its connection (SyncReply, ebMS2 §4.3): the answer to the
    forward's first transmission goes back on that connection."""

    message_id: str
    route: Route
    reliability: Reliability
    insert: tuple[str, ...]
    signal: bool
    received_at: datetime
    sync_relay: bool = False


@dataclass(frozen=True, slots=True)
class ConflictingDuplicate:
    """MessageId ``message_id``, already stored with content digest ``stored_digest``, came again with
    ``received_digest``: a duplicate (ebMS2 §6.5.6: the same MessageId) whose business content differs,
    probably another message reusing the MessageId. Record it (journal, counter, warning) for the operator;
    it is answered as the first copy was and not delivered. The stored message is left as it is."""

    message_id: str
    stored_digest: str
    received_digest: str


InboundAction: TypeAlias = (
    StoreInbound
    | KeepOrder
    | RecordAcknowledgment
    | ReplySync
    | SendAsync
    | ResendStoredAck
    | Reject
    | OutboundEvent
    | SignalReceived
    | Discard
    | ConflictingDuplicate
    | StoreForward
)


@dataclass(frozen=True, slots=True)
class InboundDecision:
    """What to do with one inbound message: ``actions`` in order, the check's ``issues`` (for the journal),
    whether it was a ``duplicate`` (a MessageId already stored, under DuplicateElimination), the actors
    whose Acknowledgment must be signed (``signed_actors``: each as its own AckRequested asks, ebMS2
    §6.3.1.2; a reply carrying one of them is signed) and whether their ds:Reference elements must be
    derived from the message by the signing adapter (``derive_references``)."""

    actions: tuple[InboundAction, ...]
    issues: tuple[Issue, ...] = ()
    duplicate: bool = False
    signed_actors: frozenset[str] = frozenset()
    derive_references: bool = False

    @property
    def sign_reply(self) -> bool:
        """True when some acknowledgment this decision sends must be signed (ebMS2 §6.3.1.2)."""
        return bool(self.signed_actors)

    def signs(self, reply: Envelope) -> bool:
        """Whether ``reply`` is a signed acknowledgment: it carries an Acknowledgment for an actor whose
        AckRequested asked for a signed one (ebMS2 §6.3.1.2)."""
        return any(effective_actor(a.actor) in self.signed_actors for a in reply.acknowledgments)

    @property
    def delivers(self) -> bool:
        """True when the message goes to the application's inbox."""
        return any(isinstance(a, StoreInbound) and a.deliver for a in self.actions)

    @property
    def stored_acknowledgment(self) -> Envelope | None:
        """The new acknowledgment message this decision stores (None if it stores none)."""
        for a in self.actions:
            if isinstance(a, StoreInbound) and a.record_ack is not None:
                return a.record_ack
            if isinstance(a, RecordAcknowledgment):
                return a.acknowledgment
        return None

    @property
    def sync_reply(self) -> StoredAck | None:
        """What goes on the HTTP response (None: an empty response)."""
        for a in self.actions:
            if isinstance(a, (ReplySync, ResendStoredAck, Reject)) and a.sync:
                return a.message
        return None

    @property
    def async_replies(self) -> tuple[tuple[StoredAck, EndpointRef], ...]:
        """What is queued to go back asynchronously, with where to."""
        out: list[tuple[StoredAck, EndpointRef]] = []
        for a in self.actions:
            if isinstance(a, SendAsync):
                out.append((a.envelope, a.to_endpoint))
            elif isinstance(a, (ResendStoredAck, Reject)) and not a.sync and a.to_endpoint is not None:
                out.append((a.message, a.to_endpoint))
        return tuple(out)
