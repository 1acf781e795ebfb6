"""MessageOrder (ebMS2 §9), sans-IO: the SequenceNumber a sending MSH gives each message of a conversation,
and where a receiving MSH puts each message it receives with one.

Sending (:func:`assign`): per agreement and ConversationId the store keeps a :class:`SequenceCounter`; the
runtime assigns the number in the transaction that commits the message, so two messages never get the same
one and a message that is not committed takes none.

* §9.1.1: the first message of a conversation is 0 with status Reset; each next one is one more, status
  Continue; after 99999999 comes 0, status Continue ("In all other cases, including 3 above, the status
  attribute MUST be set to Continue").
* A sequence is *broken* once one of its messages failed (the To party can then present none of the later
  ones, §9: "all subsequent messages will also fail to be presented"). The next message starts a new
  sequence (0, Reset), but only once every message of the broken one is accounted for (§9.1.1: "A Sending
  MSH MUST wait before resetting the SequenceNumber of a conversation until it has received confirmation of
  all the messages previously sent for the conversation"); until then a new message is refused
  (:class:`SequenceNotReady`), saying how many are still under way.
* The message after a restart's 0 waits until that 0 is final (refused the same way meanwhile): a decision
  the specification leaves open, taken so that the receiver never sees a number of the new sequence before
  its Reset, which it could not tell from a number of the old one. (The first sequence of a conversation
  needs no such wait: its later numbers may come first and are held until 0 comes.)

Receiving (:func:`place`): per agreement, From party and ConversationId the store keeps an
:class:`OrderPosition`: the number the next message must have to be presented, how many wait for their
turn, whether the sequence broke.

* §9.1.1: "A MSH that receives a message with a SequenceNumber element MUST NOT pass the message to an
  application until all the messages with a lower SequenceNumber have been passed to the application": the
  expected number is delivered (and after it every held successor, :data:`Placement.DELIVER`); a later one
  is stored, acknowledged and held (:data:`Placement.HOLD`), visible to the operator, not to the
  application.
* Reset with SequenceNumber 0 starts a sequence (§9.1.1 case 1: the messages after it that came first are
  released after it) or starts it again (case 2: what the old sequence still held can never be presented
  and is abandoned, its sender told by a DeliveryFailure each); Reset with another number is Inconsistent.
  A conversation's first message without Reset is taken as its start when it is 0 (a sender that left out
  the attribute, whose default is Continue), else held until the lower numbers come.
* The inbox offers messages in the order they enter it (:func:`offer_time`): a message of a sequence never
  enters before the one before it, even when both are released at once or received within one clock tick.
* A number already passed (behind the expected one: a new MessageId reusing a used number; a copy of a
  received message is a duplicate and never gets here) is refused: Inconsistent at
  ``//Header/MessageOrder/SequenceNumber``.
* "Ahead" and "behind" are taken modulo 10^8 (the numbers wrap, §9.1.1): a number less than half the
  range ahead of the expected one is ahead.
* §9.1.1: "If the implementation defined limit for saved out-of-sequence messages is reached, then the
  Receiving MSH MUST indicate a delivery failure to the Sending MSH with errorCode set to DeliveryFailure
  and severity set to Error": the limit is a number of held messages per conversation (a setting) and a
  time: a gap that does not fill within the agreement's retry window (:func:`gap_window`: the time the
  sender's retries of the missing message take at most, ebMS2 §6.4.5) ends the sequence: the held messages
  are abandoned and the sender told, each by a DeliveryFailure of severity Error; the sequence is broken
  until the sender resets it, and a message that continues a broken sequence is refused the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

from cpa.duration import XsDuration
from cpa.model import CollaborationProtocolAgreement
from msh.ebms.model import MessageOrder, SequenceStatus
from msh.errors import ErrorCode, Issue, MshError, Severity

__all__ = [
    "LAST_SEQUENCE_NUMBER",
    "SEQUENCE_NUMBER",
    "OrderPosition",
    "Placed",
    "Placement",
    "SequenceCounter",
    "SequenceNotReady",
    "agreement_gap_window",
    "assign",
    "gap_expired",
    "gap_window",
    "missing_number",
    "offer_time",
    "place",
    "sequence_restarted",
    "successor",
]

LAST_SEQUENCE_NUMBER: Final = 99_999_999
"""ebMS2 §9.1.1: "The value of SequenceNumber consists of ASCII numerals in the range 0-99999999"."""
_MODULUS: Final = LAST_SEQUENCE_NUMBER + 1
_AHEAD: Final = _MODULUS // 2
_TICK: Final = timedelta(microseconds=1)
SEQUENCE_NUMBER: Final = "//Header/MessageOrder/SequenceNumber"


def successor(number: int) -> int:
    """The number after ``number`` (ebMS2 §9.1.1: "The next value after 99999999 in the increment is 0")."""
    return 0 if number == LAST_SEQUENCE_NUMBER else number + 1


# --- sending ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SequenceCounter:
    """The sender's record of a conversation: the next number to give, and whether its sequence broke."""

    next_number: int
    broken: bool = False
    restarted: bool = False
    """The sequence was started again after it broke and its 0 may still be under way."""


class SequenceNotReady(MshError):
    """A new message of a broken sequence while earlier ones are still under way (see the module docs)."""


def assign(
    counter: SequenceCounter | None, *, under_way: int, conversation_id: str
) -> tuple[MessageOrder, SequenceCounter]:
    """The MessageOrder of the next message of a conversation and the counter to keep; ``counter`` is None for
    a conversation that has none yet, ``under_way`` how many of its messages are not final (needed only when
    the counter is broken or restarted)."""
    if counter is None:
        # ebMS2 §9.1.1 case 1: "First message from the Sending MSH within the conversation": 0, Reset.
        return MessageOrder(0, SequenceStatus.RESET), SequenceCounter(successor(0))
    if counter.broken:
        if under_way:
            # ebMS2 §9.1.1: wait to reset until "all the sent Messages are accounted for".
            raise SequenceNotReady(
                f"conversation {conversation_id!r}: a message of its sequence failed, so the To party can present "
                f"none after it (ebMS2 §9); the sequence can start again (SequenceNumber 0, Reset) once the "
                f"{under_way} message(s) still under way are final (ebMS2 §9.1.1): submit it then, or in a new "
                "conversation"
            )
        # ebMS2 §9.1.1 case 2: "First message after resetting SequenceNumber information".
        return MessageOrder(0, SequenceStatus.RESET), SequenceCounter(successor(0), restarted=True)
    if counter.restarted and under_way:
        # The restart's 0 first (see the module docs): the receiver cannot tell a new number from an old one.
        raise SequenceNotReady(
            f"conversation {conversation_id!r}: its sequence is starting again and its first message "
            "(SequenceNumber 0, Reset) is not yet acknowledged; submit this one once it is, or in a new conversation"
        )
    number = counter.next_number
    # ebMS2 §9.1.1: every other message (after a wraparound too) is Continue.
    return MessageOrder(number, SequenceStatus.CONTINUE), SequenceCounter(successor(number))


# --- receiving ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OrderPosition:
    """The receiver's record of a sequence: the number the next message must have (None: none received yet),
    how many messages are held waiting for their turn and since when the oldest gap has been open, whether
    the sequence broke (a gap that never filled), and when its last message entered the inbox (the next
    enters after it: :func:`offer_time`)."""

    next_number: int | None = None
    held: int = 0
    gap_since: datetime | None = None
    broken: bool = False
    offered_at: datetime | None = None


def offer_time(position: OrderPosition, now: datetime) -> datetime:
    """When the sequence's next message enters the inbox, which offers messages by this time: ``now``, but
    never at or before the sequence's last one (messages released together, or received within one tick of
    the clock, keep their sequence order)."""
    last = position.offered_at
    return now if last is None or now > last else last + _TICK


class Placement(StrEnum):
    """What to do with a received message that carries a SequenceNumber."""

    DELIVER = "deliver"
    HOLD = "hold"
    REFUSE = "refuse"


@dataclass(frozen=True, slots=True)
class Placed:
    """:func:`place`'s answer: the ``placement``, the ``position`` to keep, the ``issue`` of a refusal, and
    ``abandon``: a Reset ends the sequence before it, whose messages still held are abandoned."""

    placement: Placement
    position: OrderPosition
    issue: Issue | None = None
    abandon: bool = False

    @property
    def offered_at(self) -> datetime | None:
        """When a delivered message enters the inbox (None: it is not delivered now)."""
        return self.position.offered_at if self.placement is Placement.DELIVER else None


def _refusal(code: ErrorCode, text: str) -> Issue:
    return Issue(code, Severity.ERROR, text, SEQUENCE_NUMBER)


def missing_number(position: OrderPosition) -> int:
    """The number a gap waits for (the expected one)."""
    return position.next_number if position.next_number is not None else 0


def place(position: OrderPosition | None, order: MessageOrder, *, now: datetime, max_held: int) -> Placed:
    """Where a received message with ``order`` goes, given its sequence's ``position`` (see the module docs)."""
    current = position or OrderPosition()
    number = order.sequence_number
    if order.status is SequenceStatus.RESET:
        if number != 0:
            # ebMS2 §9.1.1: Reset goes with SequenceNumber 0 ("When the SequenceNumber is set to 0 because of 1
            # or 2 above, the Sending MSH MUST set the status attribute of the message to Reset").
            return Placed(
                Placement.REFUSE,
                current,
                _refusal(
                    ErrorCode.INCONSISTENT,
                    f"SequenceNumber {number} has status Reset; a sequence starts again at 0 (ebMS2 §9.1.1)",
                ),
            )
        offered = offer_time(current, now)
        if current.next_number is None:
            # ebMS2 §9.1.1 case 1: the sequence starts; the messages after 0 that came first follow it.
            return Placed(Placement.DELIVER, replace(current, next_number=successor(0), offered_at=offered))
        # ebMS2 §9.1.1 case 2: the sequence starts again; what the old one still held cannot follow.
        return Placed(Placement.DELIVER, OrderPosition(successor(0), offered_at=offered), abandon=current.held > 0)
    if current.broken:
        # ebMS2 §9: "If a sequence is sent and one message fails to arrive ... all subsequent messages will also
        # fail to be presented"; §9.1.1: a DeliveryFailure, severity Error.
        return Placed(
            Placement.REFUSE,
            current,
            _refusal(
                ErrorCode.DELIVERY_FAILURE,
                f"the sequence is broken: SequenceNumber {missing_number(current)} never arrived, so SequenceNumber "
                f"{number} cannot be presented in order (ebMS2 §9); start the sequence again (SequenceNumber 0, "
                "status Reset)",
            ),
        )
    expected = missing_number(current)
    if number == expected:
        # ebMS2 §9.1.1: every lower number has been passed to the application: this one may be.
        return Placed(
            Placement.DELIVER,
            replace(current, next_number=successor(number), offered_at=offer_time(current, now)),
        )
    if (number - expected) % _MODULUS < _AHEAD:
        if current.held >= max_held:
            # ebMS2 §9.1.1: the limit for saved out-of-sequence messages is reached: DeliveryFailure, Error.
            return Placed(
                Placement.REFUSE,
                replace(current, broken=True),
                _refusal(
                    ErrorCode.DELIVERY_FAILURE,
                    f"{current.held} messages already wait for SequenceNumber {expected}, the most this MSH keeps "
                    f"for a conversation; SequenceNumber {number} is refused and the sequence is broken (ebMS2 "
                    "§9.1.1)",
                ),
            )
        # ebMS2 §9.1.1: "MUST NOT pass the message to an application until all the messages with a lower
        # SequenceNumber have been passed": kept, and held.
        gap_since = current.gap_since if current.held else now
        return Placed(Placement.HOLD, replace(current, held=current.held + 1, gap_since=gap_since))
    # A number the sequence already passed, under a new MessageId: refused (it cannot be presented in order).
    return Placed(
        Placement.REFUSE,
        current,
        _refusal(
            ErrorCode.INCONSISTENT,
            f"SequenceNumber {number} was already used in this conversation (the next one is {expected}); "
            "ebMS2 §9.1.1: the SequenceNumber is unique within the ConversationId",
        ),
    )


def gap_window(retries: int, retry_interval: XsDuration, persist_duration: XsDuration | None) -> XsDuration:
    """How long a gap may stay open: the time the sender's resends of the missing message take at most
    (ebMS2 §6.4.5: (Retries + 1) x RetryInterval), never longer than PersistDuration (§6.4.6: no resend
    after it). (MessageOrder needs reliable messaging, §9: there is always a RetryInterval.)"""
    window = (retries + 1) * retry_interval
    shorter = (
        persist_duration is not None
        and persist_duration.is_fixed_length
        and window.is_fixed_length
        and persist_duration.to_timedelta() < window.to_timedelta()
    )
    return persist_duration if shorter and persist_duration is not None else window


def agreement_gap_window(
    cpa: CollaborationProtocolAgreement | None, sending_channel_id: str | None, receiving_channel_id: str | None
) -> XsDuration | None:
    """:func:`gap_window` of the agreement's channels a message was judged by (the sender's ReliableMessaging,
    the PersistDuration of the receiving side, else the sending side, as :mod:`cpa.resolve` reads them);
    None when the sending channel has no ReliableMessaging (then only the number held limits a gap)."""
    if cpa is None:
        return None
    channels = {c.channel_id: c for party in cpa.party_infos for c in party.delivery_channels}
    sending = channels.get(sending_channel_id or "")
    receiving = channels.get(receiving_channel_id or "")
    sender_binding = sending.doc_exchange.sender_binding if sending is not None else None
    rm = sender_binding.reliable_messaging if sender_binding is not None else None
    if rm is None:
        return None
    receiver_binding = receiving.doc_exchange.receiver_binding if receiving is not None else None
    persist = receiver_binding.persist_duration if receiver_binding is not None else None
    if persist is None and sender_binding is not None:
        persist = sender_binding.persist_duration
    return gap_window(rm.retries, rm.retry_interval, persist)


def gap_expired(position: OrderPosition) -> tuple[OrderPosition, Issue]:
    """The sequence whose gap stayed open too long, and the DeliveryFailure (severity Error) each of its held
    messages gets (ebMS2 §9.1.1: the limit for saved out-of-sequence messages is reached): nothing is held any
    more, and the sequence is broken until the sender starts it again."""
    missing = missing_number(position)
    since = f" since {position.gap_since.isoformat()}" if position.gap_since is not None else ""
    issue = _refusal(
        ErrorCode.DELIVERY_FAILURE,
        f"SequenceNumber {missing} has not arrived{since}, longer than the sender's retries of it take (ebMS2 "
        "§6.4.5), so this message cannot be presented in order and is abandoned; the sequence is broken (ebMS2 "
        "§9.1.1): start it again (SequenceNumber 0, status Reset)",
    )
    return replace(position, held=0, gap_since=None, broken=True), issue


def sequence_restarted() -> Issue:
    """The DeliveryFailure (severity Error) of a held message abandoned because its sender started the sequence
    again (ebMS2 §9.1.1 case 2) before the messages it waited for came: it can never be presented in order."""
    return _refusal(
        ErrorCode.DELIVERY_FAILURE,
        "the sender started the sequence again (SequenceNumber 0, status Reset) before the messages before this "
        "one arrived, so this message cannot be presented in order and is abandoned (ebMS2 §9.1.1)",
    )
