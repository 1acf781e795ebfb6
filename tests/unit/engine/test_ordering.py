"""MessageOrder (ebMS2 §9): the SequenceNumber the sender gives, where the receiver puts each message."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from cpa.check import check
from cpa.duration import XsDuration
from cpa.model import MessageOrderSemantics
from msh.ebms import model as m
from msh.ebms.model import SequenceStatus
from msh.engine.inbound import KeepOrder, Reject, ReplySync, SendAsync, SequenceState, StoreInbound
from msh.engine.ordering import (
    LAST_SEQUENCE_NUMBER,
    OrderPosition,
    Placement,
    SequenceCounter,
    SequenceNotReady,
    assign,
    gap_window,
    place,
    successor,
)
from msh.engine.receiving import receive
from msh.errors import ErrorCode, Severity
from tests.support.cpa_factory import NOW, channel, make_cpa, make_envelope

RESET, CONTINUE = SequenceStatus.RESET, SequenceStatus.CONTINUE
WINDOW = XsDuration.parse("PT40M")


def mo(n: int, status: SequenceStatus = CONTINUE) -> m.MessageOrder:
    return m.MessageOrder(n, status)


# --- the sender (§9.1.1) ----------------------------------------------------------------------------------


def test_the_first_message_of_a_conversation_is_zero_with_reset_then_one_more_each_with_continue() -> None:
    # ebMS2 §9.1.1: "It is set to zero on the first message from that MSH within a conversation and then
    # incremented by one for each subsequent message sent"; case 1 takes 0 and Reset, all others Continue.
    order, counter = assign(None, under_way=0, conversation_id="c")
    assert order == mo(0, RESET) and counter == SequenceCounter(1)
    numbers = []
    for _ in range(3):
        order, counter = assign(counter, under_way=0, conversation_id="c")
        numbers.append((order.sequence_number, order.status))
    assert numbers == [(1, CONTINUE), (2, CONTINUE), (3, CONTINUE)]


def test_after_99999999_comes_0_with_continue() -> None:
    # ebMS2 §9.1.1: "The next value after 99999999 in the increment is 0" and case 3 (wraparound): "In all other
    # cases, including 3 above, the status attribute MUST be set to Continue".
    order, counter = assign(SequenceCounter(LAST_SEQUENCE_NUMBER), under_way=5, conversation_id="c")
    assert order == mo(LAST_SEQUENCE_NUMBER)
    order, _ = assign(counter, under_way=5, conversation_id="c")
    assert order == mo(0, CONTINUE)
    assert successor(LAST_SEQUENCE_NUMBER) == 0


def test_a_broken_sequence_starts_again_only_when_everything_sent_is_accounted_for() -> None:
    # ebMS2 §9.1.1: "A Sending MSH MUST wait before resetting the SequenceNumber of a conversation until it has
    # received confirmation of all the messages previously sent for the conversation."
    broken = SequenceCounter(7, broken=True)
    with pytest.raises(SequenceNotReady, match="2 message"):
        assign(broken, under_way=2, conversation_id="c")
    order, counter = assign(broken, under_way=0, conversation_id="c")
    assert order == mo(0, RESET) and counter == SequenceCounter(1, restarted=True)


def test_after_a_restart_the_next_message_waits_for_the_reset_to_be_final() -> None:
    # A decision the specification leaves open (msh.engine.ordering): the receiver could not tell the new
    # sequence's 1 from the old one's numbers before the new Reset came, so 1 waits for 0 to be final.
    restarted = SequenceCounter(1, restarted=True)
    with pytest.raises(SequenceNotReady, match="not yet acknowledged"):
        assign(restarted, under_way=1, conversation_id="c")
    order, counter = assign(restarted, under_way=0, conversation_id="c")
    assert order == mo(1) and counter == SequenceCounter(2)


# --- the receiver (§9.1.1) --------------------------------------------------------------------------------


def test_the_expected_number_is_delivered_a_later_one_held_an_earlier_one_refused() -> None:
    # ebMS2 §9.1.1: "A MSH that receives a message with a SequenceNumber element MUST NOT pass the message to an
    # application until all the messages with a lower SequenceNumber have been passed to the application."
    first = place(None, mo(0, RESET), now=NOW, max_held=10)
    assert first.placement is Placement.DELIVER and first.position == OrderPosition(1, offered_at=NOW)
    ahead = place(first.position, mo(3), now=NOW, max_held=10)
    assert ahead.placement is Placement.HOLD
    assert ahead.position == OrderPosition(1, held=1, gap_since=NOW, offered_at=NOW)
    later = place(ahead.position, mo(2), now=NOW + timedelta(seconds=5), max_held=10)
    assert later.position.gap_since == NOW and later.position.held == 2  # the gap is as old as its first hold
    due = place(later.position, mo(1), now=NOW, max_held=10)
    assert due.placement is Placement.DELIVER and due.position.next_number == 2
    # Received within the clock tick of 0, 1 still enters the inbox after it (the inbox offers in that order).
    assert due.offered_at == NOW + timedelta(microseconds=1)
    used = place(OrderPosition(5), mo(3), now=NOW, max_held=10)
    assert used.placement is Placement.REFUSE and used.issue is not None
    assert (used.issue.error_code, used.issue.location) == (
        ErrorCode.INCONSISTENT,
        "//Header/MessageOrder/SequenceNumber",
    )


def test_ahead_and_behind_are_judged_across_the_wraparound() -> None:
    near_end = OrderPosition(LAST_SEQUENCE_NUMBER - 1)
    assert place(near_end, mo(1), now=NOW, max_held=10).placement is Placement.HOLD  # 3 ahead, past 99999999
    assert place(OrderPosition(2), mo(LAST_SEQUENCE_NUMBER), now=NOW, max_held=10).placement is Placement.REFUSE


def test_a_reset_starts_a_new_sequence_and_abandons_what_the_old_one_held() -> None:
    # ebMS2 §9.1.1 cases 1 and 2 take SequenceNumber 0 with Reset. Case 2, "First message after resetting":
    # the old sequence's held messages can never be presented.
    placed = place(OrderPosition(4, held=2, gap_since=NOW), mo(0, RESET), now=NOW, max_held=10)
    assert placed.placement is Placement.DELIVER and placed.abandon
    assert placed.position == OrderPosition(1, offered_at=NOW)
    # Case 1, "First message ... within the conversation": what came before it is its sequence's, held for it.
    early = place(None, mo(2), now=NOW, max_held=10)
    assert early.placement is Placement.HOLD
    first = place(early.position, mo(0, RESET), now=NOW, max_held=10)
    assert first.placement is Placement.DELIVER and not first.abandon
    assert first.position == OrderPosition(1, held=1, gap_since=NOW, offered_at=NOW)
    wrong = place(OrderPosition(4), mo(3, RESET), now=NOW, max_held=10)
    assert wrong.placement is Placement.REFUSE and wrong.issue is not None
    assert wrong.issue.error_code is ErrorCode.INCONSISTENT


def test_too_many_held_messages_are_a_delivery_failure_and_break_the_sequence() -> None:
    # ebMS2 §9.1.1: "If the implementation defined limit for saved out-of-sequence messages is reached, then the
    # Receiving MSH MUST indicate a delivery failure to the Sending MSH with errorCode set to DeliveryFailure
    # and severity set to Error."
    full = OrderPosition(1, held=3, gap_since=NOW)
    placed = place(full, mo(9), now=NOW, max_held=3)
    assert placed.placement is Placement.REFUSE and placed.position.broken and placed.issue is not None
    assert (placed.issue.error_code, placed.issue.severity) == (ErrorCode.DELIVERY_FAILURE, Severity.ERROR)
    # ebMS2 §9: "all subsequent messages will also fail to be presented" until the sequence starts again.
    after = place(placed.position, mo(2), now=NOW, max_held=3)
    assert after.placement is Placement.REFUSE and after.issue is not None
    assert after.issue.error_code is ErrorCode.DELIVERY_FAILURE
    assert place(placed.position, mo(0, RESET), now=NOW, max_held=3).placement is Placement.DELIVER


def test_the_gap_window_is_the_time_the_senders_retries_take_at_most() -> None:
    # ebMS2 §6.4.5: (Retries + 1) * RetryInterval; §6.4.6: no resend after PersistDuration.
    assert gap_window(3, XsDuration.parse("PT10M"), None) == XsDuration.parse("PT40M")
    assert gap_window(3, XsDuration.parse("PT10M"), XsDuration.parse("PT30M")) == XsDuration.parse("PT30M")


# --- receive() with a SequenceNumber ---------------------------------------------------------------------

ORDERED = make_cpa(
    a_channel=channel("A", message_order=MessageOrderSemantics.GUARANTEED),
    b_channel=channel("B", message_order=MessageOrderSemantics.GUARANTEED),
)


def ordered(n: int, status: SequenceStatus = CONTINUE, message_id: str | None = None) -> m.Envelope:
    env = make_envelope(message_order=True)
    assert env.message_header is not None
    header = env.message_header
    if message_id is not None:
        header = replace(header, message_data=replace(header.message_data, message_id=message_id))
    return replace(env, message_header=header, message_order=m.MessageOrder(n, status))


def decide(env: m.Envelope, position: OrderPosition | None) -> list[object]:
    result = check(env, ORDERED, now=NOW)
    assert result.errors == (), result.errors
    decision = receive(
        env,
        check_result=result,
        duplicate=None,
        now=NOW,
        new_message_id="r-1@b.example",
        ordered=SequenceState(position, max_held=10),
    )
    return list(decision.actions)


def test_a_message_whose_turn_has_come_is_delivered_and_releases_its_successors() -> None:
    store, keep, reply = decide(ordered(1), OrderPosition(1, held=2, gap_since=NOW))
    assert isinstance(store, StoreInbound) and store.deliver and not store.hold and store.sequence_number == 1
    # The gap window is the sender's retries: (Retries 3 + 1) x RetryInterval PT10M (ebMS2 §6.4.5).
    assert keep == KeepOrder(OrderPosition(2, held=2, gap_since=NOW, offered_at=NOW), release=True, gap_window=WINDOW)
    assert store.offered_at == NOW
    assert isinstance(reply, (ReplySync, SendAsync))  # acknowledged as usual


def test_a_message_ahead_of_its_turn_is_stored_acknowledged_and_held() -> None:
    # ebMS2 §6.5.3: the Acknowledgment once it is "safely stored"; §9.1.1: not passed to the application yet.
    store, keep, reply = decide(ordered(4), OrderPosition(1))
    assert isinstance(store, StoreInbound) and store.hold and not store.deliver and store.record_ack is not None
    assert keep == KeepOrder(OrderPosition(1, held=1, gap_since=NOW), gap_window=WINDOW)
    assert isinstance(reply, (ReplySync, SendAsync))


def test_a_refused_number_is_answered_with_an_error_and_never_stored() -> None:
    keep, reject = decide(ordered(0, message_id="reused@a.example"), OrderPosition(3))
    assert isinstance(keep, KeepOrder) and isinstance(reject, Reject)
    assert reject.error_message.error_list is not None
    [error] = reject.error_message.error_list.errors
    assert (error.code, error.location) == (ErrorCode.INCONSISTENT, "//Header/MessageOrder/SequenceNumber")
