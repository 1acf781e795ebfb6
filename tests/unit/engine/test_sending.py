"""The sending state machine with a fake clock: every timer rule of ebMS2 §6.4-§6.5.7, never a sleep."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import pytest

from cpa.duration import XsDuration
from cpa.resolve import Exchange, resolve
from msh.ebms.model import Description, Error, ErrorList, MessageStatus
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH
from msh.engine import sending, timers
from msh.engine.outcomes import STATUSES
from msh.engine.sending import (
    DEFAULT_ACK_WAIT,
    TRANSITIONS,
    AcknowledgmentReceived,
    Action,
    AgreementWithdrawn,
    CancelTimer,
    EngineError,
    ErrorReceived,
    Event,
    Evidence,
    NotifyDelivered,
    NotifyFailed,
    NotifyForwarded,
    NotifySent,
    OutboundState,
    OutboundStatus,
    Reliability,
    RequestStatus,
    ScheduleTimer,
    SendAgain,
    StatusReported,
    StatusUnavailable,
    Submit,
    TimerDue,
    Transmit,
    TransmitFailed,
    TransmitSucceeded,
    UnknownMessage,
    state_diagram,
    step,
)
from msh.errors import ErrorCode, Severity
from tests.support.cpa_factory import A_ID, B_ID, NOW, SERVICE, make_cpa

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
MID = "m1@a.example"
ORDER = Exchange(A_ID, B_ID, SERVICE, "NewOrder")


def xs(value: timedelta) -> XsDuration:
    return XsDuration.from_timedelta(value)


def rel(
    *,
    retries: int = 3,
    retry_interval: timedelta = 10 * MIN,
    first_resend_timeout: timedelta = 5 * MIN,
    persist_duration: timedelta | None = None,
    time_to_live: datetime | None = None,
    ack_requested: bool = True,
    ack_actor: str | None = ACTOR_TO_PARTY_MSH,
) -> Reliability:
    """A Reliability with fixed-length durations given as timedeltas (month durations: test_month_durations)."""
    return Reliability(
        retries,
        xs(retry_interval),
        xs(first_resend_timeout),
        None if persist_duration is None else xs(persist_duration),
        time_to_live,
        ack_requested,
        ack_actor,
    )


@dataclass
class Sender:
    """One outbound message driven through step() by a fake clock; timers fire only when advanced to."""

    reliability: Reliability
    now: datetime = T0
    state: OutboundState | None = None
    timer: datetime | None = None
    log: list[tuple[datetime, Action]] = field(default_factory=list)

    def feed(self, event: Event) -> tuple[Action, ...]:
        self.state, actions = step(self.state, event, self.now)
        for action in actions:
            self.log.append((self.now, action))
            if isinstance(action, ScheduleTimer):
                self.timer = action.due_at
            elif isinstance(action, CancelTimer):
                self.timer = None
        return actions

    def submit(self) -> tuple[Action, ...]:
        return self.feed(Submit(MID, self.reliability))

    def advance(self, delta: timedelta) -> tuple[Action, ...]:
        """Move the clock; fire the timer (as the runtime does) each time it comes due on the way."""
        end = self.now + delta
        out: list[Action] = []
        while self.timer is not None and self.timer <= end:
            self.now, self.timer = self.timer, None
            out += self.feed(TimerDue())
        self.now = end
        return tuple(out)

    def run_out(self) -> None:
        self.advance(timedelta(days=365))

    @property
    def transmissions(self) -> list[tuple[datetime, int]]:
        return [(t, a.attempt) for t, a in self.log if isinstance(a, Transmit)]

    @property
    def failure(self) -> NotifyFailed:
        failed = [a for _, a in self.log if isinstance(a, NotifyFailed)]
        assert len(failed) == 1, self.log
        return failed[0]

    @property
    def s(self) -> OutboundState:
        assert self.state is not None
        return self.state


def peer_errors(*errors: tuple[str, Severity]) -> ErrorList:
    built = tuple(Error(code, sev, "//Header/MessageHeader", Description(f"{code} here")) for code, sev in errors)
    highest = Severity.ERROR if any(sev is Severity.ERROR for _, sev in errors) else Severity.WARNING
    return ErrorList(built, highest)


# --- submit ---------------------------------------------------------------------------------------------


def test_submit_commits_then_transmits_and_arms_the_first_resend_timer() -> None:
    sender = Sender(rel())
    actions = sender.submit()
    # Timer row in the step's transaction first, then the transmission (docs/design.md §5.1).
    assert actions == (ScheduleTimer(MID, T0 + 5 * MIN), Transmit(MID, 1))
    expected = OutboundState(MID, OutboundStatus.PENDING, rel(), 1, T0, 0, T0 + 5 * MIN, evidence=Evidence.SUBMITTED)
    assert sender.s == expected


def test_a_transmission_outcome_moves_pending_to_awaiting_ack_without_new_actions() -> None:
    sender = Sender(rel())
    sender.submit()
    assert sender.feed(TransmitSucceeded()) == ()
    assert sender.s.status is OutboundStatus.AWAITING_ACK
    assert sender.s.transmitted and sender.s.evidence is Evidence.TRANSMISSION


# --- timer rules --------------------------------------------------------------------------------------


def test_first_resend_comes_at_the_first_resend_timeout() -> None:
    sender = Sender(rel())
    sender.submit()
    sender.feed(TransmitSucceeded())
    assert sender.advance(5 * MIN - timedelta(microseconds=1)) == ()
    assert sender.advance(timedelta(microseconds=1)) == (ScheduleTimer(MID, T0 + 15 * MIN), Transmit(MID, 2))
    assert sender.s.attempts == 2


def test_later_resends_come_every_retry_interval_and_stop_at_retries() -> None:
    sender = Sender(rel(retries=3))
    sender.submit()
    sender.run_out()
    assert sender.transmissions == [(T0, 1), (T0 + 5 * MIN, 2), (T0 + 15 * MIN, 3), (T0 + 25 * MIN, 4)]
    assert sender.s.status is OutboundStatus.FAILED
    failed_at = [t for t, a in sender.log if isinstance(a, NotifyFailed)]
    assert failed_at == [T0 + 35 * MIN]
    assert "after 4 transmissions (Retries 3)" in sender.failure.issue.description


def test_nominal_schedule_matches_the_machine() -> None:
    r = rel(retries=3)
    sends, fail_at, reason = timers.nominal_schedule(r, T0)
    assert sends == (T0, T0 + 5 * MIN, T0 + 15 * MIN, T0 + 25 * MIN)
    assert (fail_at, reason) == (T0 + 35 * MIN, timers.GiveUp.RETRIES)


def test_the_first_resend_timeout_defaults_to_retry_interval_via_the_agreement() -> None:
    params = resolve(make_cpa(), ORDER, now=NOW)
    r = Reliability.from_parameters(params, ack_requested=True, time_to_live=None)
    assert (r.retries, r.retry_interval, r.first_resend_timeout) == (3, xs(10 * MIN), xs(10 * MIN))
    assert r.persist_duration == xs(timedelta(hours=1))
    assert r.ack_actor == ACTOR_TO_PARTY_MSH
    quick = resolve(make_cpa(), ORDER, now=NOW, first_resend_timeouts={"A_channel": 2 * MIN})
    # ebMS2 §6.4.4: RetryInterval "applies to the time between sending of the original message and the first
    # retry as well": a setting never shortens it.
    quick_wait = Reliability.from_parameters(quick, ack_requested=True, time_to_live=None).first_resend_timeout
    assert quick_wait == xs(10 * MIN)
    slow = resolve(make_cpa(), ORDER, now=NOW, first_resend_timeouts={"A_channel": 25 * MIN})
    assert Reliability.from_parameters(slow, ack_requested=True, time_to_live=None).first_resend_timeout == xs(25 * MIN)
    at_once = resolve(make_cpa(), ORDER, now=NOW, first_resend_timeouts={"A_channel": timedelta(0)})
    # A zero timeout is a setting, not "unset", and the RetryInterval still comes first.
    at_once_wait = Reliability.from_parameters(at_once, ack_requested=True, time_to_live=None).first_resend_timeout
    assert at_once_wait == xs(10 * MIN)


def test_without_reliable_messaging_there_is_one_transmission_and_one_wait() -> None:
    params = resolve(make_cpa(retries=None), ORDER, now=NOW)
    r = Reliability.from_parameters(params, ack_requested=True, time_to_live=None)
    assert (r.retries, r.retry_interval, r.first_resend_timeout) == (0, DEFAULT_ACK_WAIT, DEFAULT_ACK_WAIT)
    sender = Sender(r)
    sender.submit()
    sender.run_out()
    assert sender.transmissions == [(T0, 1)]
    assert [t for t, a in sender.log if isinstance(a, NotifyFailed)] == [DEFAULT_ACK_WAIT.add_to(T0)]


def test_a_late_timer_measures_the_next_interval_from_the_actual_resend() -> None:
    sender = Sender(rel())
    sender.submit()
    sender.now = T0 + 7 * MIN  # the timer loop was two minutes late
    sender.timer = None
    actions = sender.feed(TimerDue())
    # ebMS2 §6.4.4: at least RetryInterval between two transmissions.
    assert actions == (ScheduleTimer(MID, T0 + 17 * MIN), Transmit(MID, 2))


def test_an_early_timer_re_arms_itself() -> None:
    sender = Sender(rel())
    sender.submit()
    sender.now = T0 + MIN
    assert sender.feed(TimerDue()) == (ScheduleTimer(MID, T0 + 5 * MIN),)
    assert sender.s.attempts == 1


def test_a_transmission_still_under_way_is_waited_for_not_counted_again() -> None:
    # ebMS2 §6.4.4: "RetryInterval ... the minimum time the MSH waits between retries"; §6.5.4: a message is
    # resent while "it has been resent less than the number of times specified in Retries". A transmission
    # that has not ended (it waits for a connection, or for its answer) is not followed by another, and the
    # retries are not used up meanwhile.
    sender = Sender(rel(retries=1))
    sender.submit()
    sender.now = T0 + 5 * MIN
    assert sender.feed(TimerDue(in_flight=True)) == (ScheduleTimer(MID, T0 + 10 * MIN),)
    assert sender.s.attempts == 1 and sender.s.status is OutboundStatus.PENDING
    sender.now = T0 + 10 * MIN
    assert sender.feed(TimerDue()) == (ScheduleTimer(MID, T0 + 20 * MIN), Transmit(MID, 2))
    # The last retry still under way: not given up for want of retries until it has ended.
    sender.now = T0 + 20 * MIN
    assert sender.feed(TimerDue(in_flight=True)) == (ScheduleTimer(MID, T0 + 30 * MIN),)
    sender.feed(TransmitFailed("the answer never came"))
    sender.now = T0 + 30 * MIN
    sender.feed(TimerDue())
    assert sender.s.status is OutboundStatus.FAILED and sender.failure.issue.severity is Severity.WARNING


def test_a_transmission_under_way_does_not_hold_off_time_to_live() -> None:
    # ebMS2 §3.1.6.4: past its TimeToLive the message is not delivered any more: given up even then.
    sender = Sender(rel(time_to_live=T0 + 7 * MIN))
    sender.submit()
    sender.now = T0 + 7 * MIN
    sender.feed(TimerDue(in_flight=True))
    assert sender.s.status is OutboundStatus.FAILED


def test_retries_zero_means_one_transmission() -> None:
    sender = Sender(rel(retries=0))
    sender.submit()
    sender.run_out()
    assert sender.transmissions == [(T0, 1)]
    assert sender.s.status is OutboundStatus.FAILED


def test_persist_duration_caps_the_retries() -> None:
    sender = Sender(rel(retries=10, persist_duration=30 * MIN))
    sender.submit()
    sender.feed(TransmitSucceeded())
    sender.run_out()
    # ebMS2 §6.4.6: nothing is sent once PersistDuration has passed since the first transmission.
    assert sender.transmissions == [(T0, 1), (T0 + 5 * MIN, 2), (T0 + 15 * MIN, 3), (T0 + 25 * MIN, 4)]
    assert [t for t, a in sender.log if isinstance(a, NotifyFailed)] == [T0 + 30 * MIN]
    assert "PersistDuration" in sender.failure.issue.description
    assert max(a.due_at for _, a in sender.log if isinstance(a, ScheduleTimer)) == T0 + 30 * MIN


def test_time_to_live_caps_the_retries() -> None:
    sender = Sender(rel(retries=10, time_to_live=T0 + 20 * MIN))
    sender.submit()
    sender.run_out()
    assert sender.transmissions == [(T0, 1), (T0 + 5 * MIN, 2), (T0 + 15 * MIN, 3)]
    assert [t for t, a in sender.log if isinstance(a, NotifyFailed)] == [T0 + 20 * MIN]
    assert "TimeToLive" in sender.failure.issue.description
    assert sender.failure.expired  # ebMS2 §3.1.6.4: the journal records it as expired


def test_the_earliest_deadline_wins() -> None:
    sender = Sender(rel(retries=10, persist_duration=12 * MIN, time_to_live=T0 + 40 * MIN))
    sender.submit()
    sender.run_out()
    assert sender.transmissions == [(T0, 1), (T0 + 5 * MIN, 2)]
    assert "PersistDuration" in sender.failure.issue.description
    assert not sender.failure.expired


def test_a_message_submitted_past_its_time_to_live_is_never_sent() -> None:
    sender = Sender(rel(time_to_live=T0))
    actions = sender.submit()
    assert sender.transmissions == []
    assert sender.s.status is OutboundStatus.FAILED
    assert sender.s.first_sent_at is None
    assert len(actions) == 1 and isinstance(actions[0], NotifyFailed)
    assert actions[0].issue.severity is Severity.ERROR
    assert actions[0].expired


def test_a_transport_failure_counts_as_a_lost_message() -> None:
    sender = Sender(rel(retries=2))
    sender.submit()
    # ebMS2 §6.5.4: no immediate resend; the timer resends after the same wait as a lost message.
    assert sender.feed(TransmitFailed("connection refused")) == ()
    assert sender.advance(5 * MIN) == (ScheduleTimer(MID, T0 + 15 * MIN), Transmit(MID, 2))
    sender.feed(TransmitFailed("connection reset"))
    sender.advance(10 * MIN)
    sender.feed(TransmitFailed("timed out"))
    sender.run_out()
    assert [a for _, a in sender.transmissions] == [1, 2, 3]
    assert sender.s.attempts == 3


def test_failure_is_an_error_when_no_attempt_could_be_transmitted() -> None:
    # ebMS2 §6.5.7: "Error if the party who detected the problem could not transmit the message (e.g. the
    # communications transport was not available)".
    sender = Sender(rel(retries=1))
    sender.submit()
    sender.feed(TransmitFailed("connection refused", transmitted=False))
    sender.advance(5 * MIN)
    sender.feed(TransmitFailed("connection refused", transmitted=False))
    sender.run_out()
    issue = sender.failure.issue
    assert (issue.error_code, issue.severity) == (ErrorCode.DELIVERY_FAILURE, Severity.ERROR)
    assert sender.s.failure == issue and sender.s.evidence is Evidence.RETRIES_EXHAUSTED
    assert "may have been delivered" not in issue.description


def test_failure_is_a_warning_when_an_attempt_got_an_answer() -> None:
    # ebMS2 §6.5.7: "Warning if the message was transmitted, but an Acknowledgment Message was not received.
    # This means the message probably was not delivered."
    sender = Sender(rel(retries=1))
    sender.submit()
    sender.feed(TransmitFailed("connection refused", transmitted=False))
    sender.advance(5 * MIN)
    sender.feed(TransmitSucceeded())
    sender.run_out()
    issue = sender.failure.issue
    assert (issue.error_code, issue.severity) == (ErrorCode.DELIVERY_FAILURE, Severity.WARNING)
    assert "may have been delivered" in issue.description


def test_failure_is_a_warning_when_an_attempt_may_have_arrived_without_an_answer() -> None:
    # ebMS2 §6.5.7: no answer does not mean "could not transmit": a request that timed out waiting for its
    # answer (or whose connection was reset after it left) was transmitted, and may have been delivered.
    sender = Sender(rel(retries=1))
    sender.submit()
    sender.feed(TransmitFailed("no answer within 30 s", transmitted=True))
    sender.advance(5 * MIN)
    sender.feed(TransmitFailed("connection refused", transmitted=False))
    sender.run_out()
    assert sender.failure.issue.severity is Severity.WARNING


# --- acknowledgments and errors -----------------------------------------------------------------------


def test_an_acknowledgment_marks_the_message_delivered_and_cancels_the_timer() -> None:
    sender = Sender(rel())
    sender.submit()
    sender.feed(TransmitSucceeded())
    sender.advance(5 * MIN)
    actions = sender.feed(AcknowledgmentReceived(MID))
    assert actions == (CancelTimer(MID), NotifyDelivered(MID))
    assert sender.s.status is OutboundStatus.DELIVERED
    assert sender.s.next_due_at is None
    sender.run_out()
    assert len(sender.transmissions) == 2


def test_a_synchronous_acknowledgment_may_come_before_the_transmission_outcome() -> None:
    sender = Sender(rel())
    sender.submit()
    assert sender.feed(AcknowledgmentReceived(MID)) == (CancelTimer(MID), NotifyDelivered(MID))
    # The HTTP exchange's own outcome arrives afterwards and changes nothing.
    assert sender.feed(TransmitSucceeded()) == ()
    assert sender.s.status is OutboundStatus.DELIVERED


def test_the_to_partys_acknowledgment_after_a_failure_records_the_delivery() -> None:
    # ebMS2 §6.5.7: a Warning DeliveryFailure "means the message probably was not delivered"; when the To
    # party's Acknowledgment comes after all, §6.5.2 marks the message delivered: the status says what happened.
    sender = Sender(rel(retries=0))
    sender.submit()
    sender.feed(TransmitFailed("no answer within 30 s"))
    sender.run_out()
    assert sender.s.status is OutboundStatus.FAILED
    actions = sender.feed(AcknowledgmentReceived(MID))
    assert actions == (CancelTimer(MID), NotifyDelivered(MID, Evidence.TO_PARTY_ACKNOWLEDGMENT))
    assert sender.s.status is OutboundStatus.DELIVERED and sender.s.evidence is Evidence.TO_PARTY_ACKNOWLEDGMENT
    assert sender.transmissions == [(T0, 1)]  # nothing is sent again


def test_an_intermediarys_acknowledgment_after_a_failure_changes_nothing() -> None:
    # ebMS2 §10.1.3: the next MSH's acknowledgment is not the To party's: no proof of delivery.
    sender = Sender(rel(retries=0))
    sender.submit()
    sender.run_out()
    before = sender.s
    assert sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True)) == ()
    assert sender.s == before


def test_a_late_error_after_the_acknowledgment_is_ignored() -> None:
    sender = Sender(rel())
    sender.submit()
    sender.feed(AcknowledgmentReceived(MID))
    before = sender.s
    # ebMS2 §6.5.7 note: after an Acknowledgment, ignore DeliveryFailure and other Acknowledgments.
    assert sender.feed(ErrorReceived(peer_errors(("DeliveryFailure", Severity.ERROR)))) == ()
    assert sender.feed(AcknowledgmentReceived(MID)) == ()
    assert sender.s == before


def test_an_error_from_the_peer_before_the_acknowledgment_fails_the_message() -> None:
    sender = Sender(rel())
    sender.submit()
    sender.feed(TransmitSucceeded())
    actions = sender.feed(ErrorReceived(peer_errors(("Inconsistent", Severity.ERROR))))
    assert actions[0] == CancelTimer(MID)
    assert isinstance(actions[1], NotifyFailed)
    issue = actions[1].issue
    assert (issue.error_code, issue.severity) == (ErrorCode.DELIVERY_FAILURE, Severity.ERROR)
    assert "Inconsistent at //Header/MessageHeader: Inconsistent here" in issue.description
    assert sender.s.status is OutboundStatus.FAILED
    sender.run_out()
    assert len(sender.transmissions) == 1


def test_warnings_from_the_peer_change_nothing() -> None:
    sender = Sender(rel())
    sender.submit()
    before = sender.s
    assert sender.feed(ErrorReceived(peer_errors(("Inconsistent", Severity.WARNING)))) == ()
    assert sender.s == before


def test_a_delivery_failure_warning_fails_the_message_with_a_warning() -> None:
    sender = Sender(rel())
    sender.submit()
    actions = sender.feed(ErrorReceived(peer_errors(("DeliveryFailure", Severity.WARNING))))
    assert isinstance(actions[-1], NotifyFailed)
    assert actions[-1].issue.severity is Severity.WARNING


def test_an_unexpected_acknowledgment_is_ignored() -> None:
    best_effort = Sender(rel(ack_requested=False))
    best_effort.submit()
    before = best_effort.s
    # ebMS2 §6.5.2: "If an Acknowledgment Message is received unexpectedly, it should be ignored."
    assert best_effort.feed(AcknowledgmentReceived(MID)) == ()
    assert best_effort.s == before
    # An intermediate (nextMSH) acknowledgment does not answer an end-to-end request.
    end_to_end = Sender(rel())
    end_to_end.submit()
    assert end_to_end.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH)) == ()
    assert end_to_end.s.status is OutboundStatus.PENDING
    # A nextMSH request is answered by a nextMSH acknowledgment (single hop: the To Party MSH).
    next_hop = Sender(rel(ack_actor=ACTOR_NEXT_MSH))
    next_hop.submit()
    assert next_hop.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH)) == (CancelTimer(MID), NotifyDelivered(MID))


@pytest.mark.parametrize("actor", [None, ACTOR_TO_PARTY_MSH, ACTOR_NEXT_MSH])
def test_without_a_recorded_actor_either_acknowledgment_is_accepted(actor: str | None) -> None:
    sender = Sender(rel(ack_actor=None))
    sender.submit()
    assert sender.feed(AcknowledgmentReceived(MID, actor)) == (CancelTimer(MID), NotifyDelivered(MID))


def test_an_absent_actor_means_the_to_party_msh() -> None:
    sender = Sender(rel())
    sender.submit()
    assert sender.feed(AcknowledgmentReceived(MID, None)) == (CancelTimer(MID), NotifyDelivered(MID))


def test_an_acknowledgment_routed_to_the_wrong_message_is_a_bug() -> None:
    sender = Sender(rel())
    sender.submit()
    with pytest.raises(EngineError, match=r"other@a\.example"):
        sender.feed(AcknowledgmentReceived("other@a.example"))


# --- best effort --------------------------------------------------------------------------------------


def test_best_effort_is_sent_not_delivered_when_the_next_msh_answers() -> None:
    # ebMS2 §6.6 row 8 (Best Effort) and B.2.3: a 2xx says the next MSH received it; no acknowledgment was
    # asked, so nothing says the To party got it: sent, by design.
    sender = Sender(rel(ack_requested=False))
    sender.submit()
    assert sender.feed(TransmitSucceeded()) == (CancelTimer(MID), NotifySent(MID, Evidence.ACCEPTED_BY_NEXT_MSH))
    assert sender.s.status is OutboundStatus.SENT and sender.s.status.final


def test_an_error_message_after_sent_fails_the_message() -> None:
    # ebMS2 §4.2.4: the receiving side reports an error about it: it refused the message after all.
    sender = Sender(rel(ack_requested=False))
    sender.submit()
    sender.feed(TransmitSucceeded())
    actions = sender.feed(ErrorReceived(peer_errors(("Inconsistent", Severity.ERROR))))
    assert sender.s.status is OutboundStatus.FAILED and sender.s.evidence is Evidence.ERROR_MESSAGE
    assert len(actions) == 1 and isinstance(actions[0], NotifyFailed)


def test_best_effort_retries_transport_failures_and_fails_at_once_when_none_is_left() -> None:
    sender = Sender(rel(ack_requested=False, retries=1))
    sender.submit()
    sender.feed(TransmitFailed("connection refused", transmitted=False))
    assert sender.advance(5 * MIN) == (ScheduleTimer(MID, T0 + 15 * MIN), Transmit(MID, 2))
    actions = sender.feed(TransmitFailed("connection refused", transmitted=False))
    assert actions[0] == CancelTimer(MID)
    assert isinstance(actions[1], NotifyFailed)
    assert actions[1].issue.severity is Severity.ERROR
    assert "connection refused" in actions[1].issue.description


# --- late events and the table ------------------------------------------------------------------------


@pytest.mark.parametrize("final", [OutboundStatus.DELIVERED, OutboundStatus.SENT, OutboundStatus.FAILED])
@pytest.mark.parametrize(
    "event",
    [TransmitSucceeded(), TransmitFailed("reset"), TimerDue(), SendAgain(), StatusUnavailable(2, "x", True)],
    ids=lambda e: type(e).__name__,
)
def test_late_events_after_a_final_status_are_no_ops(final: OutboundStatus, event: Event) -> None:
    state = OutboundState(MID, final, rel(), 2, T0, 0, None)
    assert step(state, event, T0 + 2 * MIN) == (state, ())


@pytest.mark.parametrize(
    "event",
    [
        AcknowledgmentReceived(MID),
        ErrorReceived(peer_errors(("DeliveryFailure", Severity.ERROR))),
        StatusReported(MessageStatus.NOT_RECOGNIZED),
    ],
    ids=lambda e: type(e).__name__,
)
def test_everything_after_delivered_is_ignored(event: Event) -> None:
    # ebMS2 §6.3.2.5: after the end-to-end Acknowledgment the MSH "SHOULD ignore subsequent Error or
    # Acknowledgment Messages with the same RefToMessageId value".
    state = OutboundState(MID, OutboundStatus.DELIVERED, rel(), 2, T0, 0, None)
    assert step(state, event, T0 + 2 * MIN) == (state, ())


def test_a_second_submit_is_an_unknown_pair() -> None:
    sender = Sender(rel())
    sender.submit()
    with pytest.raises(EngineError, match="no transition from pending on Submit"):
        sender.submit()


@pytest.mark.parametrize(
    "event", [TimerDue(), TransmitSucceeded(), AcknowledgmentReceived(MID)], ids=lambda e: type(e).__name__
)
def test_events_for_a_message_with_no_state_raise_unknown_message(event: Event) -> None:
    with pytest.raises(UnknownMessage):
        step(None, event, T0)


def test_the_table_covers_every_pair_but_submit_on_an_existing_message() -> None:
    events = (
        Submit,
        TransmitSucceeded,
        TransmitFailed,
        AcknowledgmentReceived,
        ErrorReceived,
        TimerDue,
        SendAgain,
        StatusReported,
        StatusUnavailable,
        AgreementWithdrawn,
    )
    missing = {(s, e) for s in (None, *OutboundStatus) for e in events if (s, e) not in TRANSITIONS}
    assert missing == {(s, Submit) for s in OutboundStatus} | {(None, e) for e in events if e is not Submit}
    ignored = {key for key, t in TRANSITIONS.items() if t.ignored}
    after = (TransmitSucceeded, TransmitFailed, TimerDue, SendAgain, StatusUnavailable, AgreementWithdrawn)
    expected = {(OutboundStatus.DELIVERED, e) for e in events if e is not Submit}
    expected |= {(s, e) for s in (OutboundStatus.SENT, OutboundStatus.FAILED) for e in after}
    expected |= {(OutboundStatus.FAILED, ErrorReceived), (OutboundStatus.FORWARDED, SendAgain)}
    assert ignored == expected
    assert all(t.rule for t in TRANSITIONS.values())


def test_every_final_status_is_reached_only_on_evidence_the_outcomes_allow() -> None:
    # A status is what happened: delivered rests on the To party's word, never on a timer.
    assert STATUSES[OutboundStatus.DELIVERED].evidence == {
        Evidence.TO_PARTY_ACKNOWLEDGMENT,
        Evidence.STATUS_RESPONSE,
        Evidence.HOP_ACKNOWLEDGMENT,  # only for a forward, whose promise ends at the next MSH (§10.1.3)
    }
    assert all(d.evidence for d in STATUSES.values()) and set(STATUSES) == set(OutboundStatus)
    for (source, event), transition in TRANSITIONS.items():
        if event is TimerDue and source is not OutboundStatus.DELIVERED:
            assert OutboundStatus.DELIVERED not in transition.targets, (source, transition.rule)


def test_a_handler_that_lands_outside_its_row_is_a_bug() -> None:
    # The table is what the state diagram of docs/concepts/reliability.md shows: a handler may not take the
    # message anywhere else.
    state = OutboundState(MID, OutboundStatus.FORWARDED, rel(), 1, T0, 0, T0 + MIN)
    bad = replace(TRANSITIONS[(OutboundStatus.FORWARDED, TimerDue)], targets=(OutboundStatus.FORWARDED,))
    table = dict(TRANSITIONS)
    table[(OutboundStatus.FORWARDED, TimerDue)] = bad
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sending, "TRANSITIONS", table)
        with pytest.raises(EngineError, match="does not list"):
            step(state, TimerDue(), T0 + 2 * MIN)


def test_the_state_diagram_is_drawn_from_the_table() -> None:
    diagram = state_diagram()
    assert diagram.startswith("stateDiagram-v2\n")
    assert '    state "awaiting-ack" as awaiting_ack' in diagram
    assert "    [*] --> pending : Submit" in diagram
    assert "    pending --> sent : TransmitSucceeded" in diagram
    assert "    pending --> delivered : AcknowledgmentReceived, StatusReported" in diagram
    assert "    forwarded --> sent : TimerDue" in diagram
    assert "delivered --> delivered : TransmitSucceeded (ignored), TransmitFailed (ignored)" in diagram
    for (_, event), _t in TRANSITIONS.items():
        assert event.__name__ in diagram


def test_now_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        step(None, Submit(MID, rel()), datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("kw", "text"),
    [
        ({"retries": -1}, "retries"),
        ({"retry_interval": -MIN}, "retry_interval"),
        ({"first_resend_timeout": -MIN}, "first_resend_timeout"),
        ({"persist_duration": -MIN}, "persist_duration"),
        ({"time_to_live": datetime(2026, 1, 1)}, "time_to_live"),
    ],
)
def test_reliability_is_validated(kw: dict[str, object], text: str) -> None:
    with pytest.raises(ValueError, match=text):
        rel(**kw)  # type: ignore[arg-type]


def test_submit_needs_a_message_id() -> None:
    with pytest.raises(ValueError, match="MessageId"):
        Submit(" ", rel())


def test_month_durations_are_added_to_the_instant_they_start_from() -> None:
    # XML Schema Part 2 Appendix E: P1M from January 31 ends on the last day of February, and the next P1M
    # starts from there; PersistDuration P2M from the first transmission caps the schedule at March 31.
    start = datetime(2026, 1, 31, 9, 0, tzinfo=UTC)
    r = Reliability(2, XsDuration(months=1), XsDuration(months=1), XsDuration.parse("P2M"), None, True)
    sends, fail_at, reason = timers.nominal_schedule(r, start)
    assert sends == (start, datetime(2026, 2, 28, 9, tzinfo=UTC), datetime(2026, 3, 28, 9, tzinfo=UTC))
    assert (fail_at, reason) == (datetime(2026, 3, 31, 9, tzinfo=UTC), timers.GiveUp.RETRIES)
    # The machine does what the schedule says, driven by a fake clock.
    sender = Sender(r, now=start)
    sender.submit()
    sender.run_out()
    transmitted = [t for t, a in sender.log if isinstance(a, Transmit)]
    assert tuple(transmitted) == sends
    assert [t for t, a in sender.log if isinstance(a, NotifyFailed)] == [fail_at]


def test_a_persist_duration_in_months_ends_the_retries() -> None:
    # ebMS2 §6.4.6 with PersistDuration P1M: no transmission at or after January 31 + P1M = February 28.
    start = datetime(2027, 1, 31, 23, 30, tzinfo=UTC)
    r = Reliability(10, XsDuration.parse("P10D"), XsDuration.parse("P10D"), XsDuration(months=1), None, True)
    assert timers.deadline(r, start) == datetime(2027, 2, 28, 23, 30, tzinfo=UTC)
    sends, fail_at, reason = timers.nominal_schedule(r, start)
    assert sends == (start, start + timedelta(days=10), start + timedelta(days=20))
    assert (fail_at, reason) == (datetime(2027, 2, 28, 23, 30, tzinfo=UTC), timers.GiveUp.PERSIST_DURATION)


def test_a_wait_past_the_year_9999_never_comes() -> None:
    # An instant beyond what datetime holds is the latest one: the timer is armed and simply never fires.
    r = Reliability(1, XsDuration.parse("P9000Y"), XsDuration.parse("P9000Y"), None, None, True)
    state, actions = step(None, Submit(MID, r), T0)
    assert state.next_due_at == datetime.max.replace(tzinfo=UTC)
    assert actions == (ScheduleTimer(MID, datetime.max.replace(tzinfo=UTC)), Transmit(MID, 1))


# --- multi-hop: the next MSH's acknowledgment (ebMS2 §10.1.3) --------------------------------------------


def both(**kw: object) -> Reliability:
    """A Reliability asking the To Party MSH and, besides, the next MSH (ebMS2 §6.6 rows 1 and 5)."""
    from dataclasses import replace as _replace

    return _replace(rel(**kw), hop_ack=True)  # type: ignore[arg-type]


def test_hop_ack_without_an_end_to_end_request_is_refused() -> None:
    with pytest.raises(ValueError, match="hop_ack"):
        Reliability(3, xs(MIN), xs(MIN), None, None, True, ACTOR_NEXT_MSH, True)
    with pytest.raises(ValueError, match="hop_ack"):
        Reliability(3, xs(MIN), xs(MIN), None, None, False, ACTOR_TO_PARTY_MSH, True)


def test_the_next_msh_acknowledgment_forwards_and_the_end_to_end_resends_go_on_until_the_to_party_answers() -> None:
    # ebMS2 §6.5.4: "The Sending MSH MUST resend the original message if an Acknowledgment Message has been
    # requested but has not been received" (the To Party MSH's is requested); §10.1.3: "A MSH supporting
    # Multi-hop MUST differentiate, based upon the actor, which Acknowledgment is being returned".
    sender = Sender(both())
    sender.submit()
    sender.feed(TransmitSucceeded())
    timer = sender.timer
    actions = sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True))
    assert sender.s.status is OutboundStatus.FORWARDED and sender.s.evidence is Evidence.HOP_ACKNOWLEDGMENT
    assert actions == (NotifyForwarded(MID),) and sender.timer == timer
    # The resends go on, on the message's own schedule, and it stays forwarded.
    assert sender.advance(5 * MIN) == (ScheduleTimer(MID, T0 + 15 * MIN), Transmit(MID, 2))
    assert sender.s.status is OutboundStatus.FORWARDED
    assert sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True)) == ()
    assert sender.feed(TransmitSucceeded()) == () and sender.feed(TransmitFailed("late")) == ()
    actions = sender.feed(AcknowledgmentReceived(MID, ACTOR_TO_PARTY_MSH))
    assert sender.s.status is OutboundStatus.DELIVERED
    assert actions == (CancelTimer(MID), NotifyDelivered(MID, Evidence.TO_PARTY_ACKNOWLEDGMENT))
    assert [a for _, a in sender.transmissions] == [1, 2]


def test_a_forwarded_message_fails_with_warning_when_its_retries_end_without_the_to_partys_acknowledgment() -> None:
    # ebMS2 §6.5.4: "If the Sending MSH does not receive an Acknowledgment Message after the maximum number of
    # retries, the Sending MSH SHALL notify the application"; §6.5.7: transmitted, not acknowledged: Warning.
    sender = Sender(both())
    sender.submit()
    sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True))
    sender.run_out()
    assert [a for _, a in sender.transmissions] == [1, 2, 3, 4]  # Retries 3, end to end
    assert sender.s.status is OutboundStatus.FAILED
    assert sender.failure.issue.severity is Severity.WARNING
    assert "no end-to-end Acknowledgment" in sender.failure.issue.description


@pytest.mark.parametrize("severity", [Severity.ERROR, Severity.WARNING])
def test_a_delivery_failure_from_the_path_fails_a_forwarded_message_with_its_severity(severity: Severity) -> None:
    sender = Sender(both())
    sender.submit()
    sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True))
    sender.feed(ErrorReceived(peer_errors(("DeliveryFailure", severity))))
    assert sender.s.status is OutboundStatus.FAILED
    assert sender.failure.issue.severity is severity


def test_a_delivery_failure_after_the_end_to_end_acknowledgment_is_ignored() -> None:
    sender = Sender(both())
    sender.submit()
    sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True))
    sender.feed(AcknowledgmentReceived(MID, ACTOR_TO_PARTY_MSH))
    assert sender.feed(ErrorReceived(peer_errors(("DeliveryFailure", Severity.ERROR)))) == ()
    assert sender.s.status is OutboundStatus.DELIVERED


def test_the_end_to_end_acknowledgment_before_the_hop_one_delivers_and_the_hop_one_is_ignored() -> None:
    sender = Sender(both())
    sender.submit()
    sender.feed(AcknowledgmentReceived(MID, ACTOR_TO_PARTY_MSH))
    assert sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True)) == ()
    assert sender.s.status is OutboundStatus.DELIVERED


def test_asking_only_the_next_msh_the_to_partys_own_hop_acknowledgment_delivers_at_once() -> None:
    sender = Sender(rel(ack_actor=ACTOR_NEXT_MSH))
    sender.submit()
    sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH))
    assert sender.s.status is OutboundStatus.DELIVERED


def test_asking_only_the_next_msh_an_intermediarys_acknowledgment_forwards_then_sent_never_delivered() -> None:
    # ebMS2 §6.6 rows 3 and 7: "No End-to-End notification": the hop is done (no resend); a DeliveryFailure
    # from the path may still come; at the deadline nothing says the To party got it: sent, not delivered.
    sender = Sender(rel(ack_actor=ACTOR_NEXT_MSH))
    sender.submit()
    actions = sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True))
    deadline = timers.end_to_end_deadline(rel(ack_actor=ACTOR_NEXT_MSH), T0)
    assert actions == (ScheduleTimer(MID, deadline), NotifyForwarded(MID))
    assert sender.s.status is OutboundStatus.FORWARDED
    sender.run_out()
    assert sender.transmissions == [(T0, 1)]
    assert sender.s.status is OutboundStatus.SENT and sender.s.evidence is Evidence.HOP_ACKNOWLEDGMENT
    late = Sender(rel(ack_actor=ACTOR_NEXT_MSH))
    late.submit()
    late.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True))
    late.feed(ErrorReceived(peer_errors(("DeliveryFailure", Severity.WARNING))))
    assert late.s.status is OutboundStatus.FAILED and late.failure.issue.severity is Severity.WARNING


def test_without_hop_ack_a_next_msh_acknowledgment_of_an_end_to_end_request_is_ignored() -> None:
    sender = Sender(rel())
    sender.submit()
    assert sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True)) == ()
    assert sender.s.status is OutboundStatus.PENDING


def test_another_copy_of_a_forward_is_sent_again_within_the_same_budget() -> None:
    sender = Sender(rel(ack_actor=ACTOR_NEXT_MSH, retries=2))
    sender.submit()
    timer = sender.timer
    assert sender.feed(SendAgain()) == (Transmit(MID, 2),)
    assert sender.timer == timer and sender.s.attempts == 2
    sender.run_out()
    # Budget: 3 transmissions in all; the copy's counted.
    assert [a for _, a in sender.transmissions] == [1, 2, 3]
    assert sender.s.status is OutboundStatus.FAILED


# --- evidence: receipts, forwards (ebMS2 §6.3.2.5, §10.1.3) ----------------------------------------------


def test_a_receipt_that_does_not_match_still_delivers_and_says_why() -> None:
    # ebMS2 §6.3.2.5: "Receipt of an Acknowledgment Message, indicates the original message reached its
    # destination"; the digests only say whether it "arrived intact": proof missing, delivery not in doubt.
    sender = Sender(rel())
    sender.submit()
    problem = "SecurityFailure: the receipt's Reference for cid:p1 does not match what was sent"
    actions = sender.feed(AcknowledgmentReceived(MID, receipt_problem=problem))
    assert actions == (CancelTimer(MID), NotifyDelivered(MID, Evidence.TO_PARTY_ACKNOWLEDGMENT, problem))
    assert sender.s.status is OutboundStatus.DELIVERED and sender.s.receipt_problem == problem


def test_a_forward_is_delivered_by_the_next_msh_acknowledgment() -> None:
    # ebMS2 §10.1.3: at the intermediary, "If a message is found in persistent storage then mark the persisted
    # message as delivered" on the next MSH's Acknowledgment: its promise ends at the next hop.
    forward = Sender(replace(rel(ack_actor=ACTOR_NEXT_MSH), end_to_end=False))
    forward.submit()
    actions = forward.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH))
    assert actions == (CancelTimer(MID), NotifyDelivered(MID, Evidence.HOP_ACKNOWLEDGMENT))
    assert forward.s.evidence is Evidence.HOP_ACKNOWLEDGMENT


def test_a_signal_sent_hop_by_hop_is_sent_when_the_next_msh_takes_it() -> None:
    # ebMS2 §6.3.1.4: a signal asks for no acknowledgment; the next MSH's 2xx is all there will be.
    signal = Sender(replace(rel(ack_requested=False), end_to_end=False))
    signal.submit()
    assert signal.feed(TransmitSucceeded()) == (CancelTimer(MID), NotifySent(MID, Evidence.ACCEPTED_BY_NEXT_MSH))


# --- status before resend (ebMS2 §7; the REPORT idea of HTTPR) ------------------------------------------

OUTAGE = timedelta(minutes=20)


def _after_outage(*, minutes_down: int) -> Sender:
    """A message transmitted once (it may have arrived), then unreachable for ``minutes_down`` minutes."""
    sender = Sender(rel(retries=10, first_resend_timeout=10 * MIN))
    sender.submit()
    sender.feed(TransmitFailed("no answer within 30 s", transmitted=True))
    sender.advance(10 * MIN)  # resend 2
    sender.feed(TransmitFailed("connection refused", transmitted=False))
    sender.now = T0 + (10 + minutes_down) * MIN
    return sender


def test_after_an_outage_the_partner_is_asked_before_the_body_is_sent_again() -> None:
    sender = _after_outage(minutes_down=20)
    actions = sender.feed(TimerDue(status_check_after=OUTAGE))
    # In place of resend 3: the same retry budget, the same next timer.
    assert actions == (ScheduleTimer(MID, sender.now + 10 * MIN), RequestStatus(MID, 3))
    assert sender.s.attempts == 3 and sender.transmissions == [(T0, 1), (T0 + 10 * MIN, 2)]


@pytest.mark.parametrize("answer", [MessageStatus.RECEIVED, MessageStatus.PROCESSED])
def test_a_partner_that_has_the_message_makes_it_delivered_without_a_resend(answer: MessageStatus) -> None:
    # ebMS2 §7.3.3: Received - "has been received by the MSH"; Processed - "has been processed by the MSH".
    sender = _after_outage(minutes_down=20)
    sender.feed(TimerDue(status_check_after=OUTAGE))
    actions = sender.feed(StatusReported(answer, attempt=3))
    assert actions == (CancelTimer(MID), NotifyDelivered(MID, Evidence.STATUS_RESPONSE))
    assert sender.s.status is OutboundStatus.DELIVERED and sender.s.evidence is Evidence.STATUS_RESPONSE
    assert [a for _, a in sender.transmissions] == [1, 2]


@pytest.mark.parametrize("answer", [MessageStatus.NOT_RECOGNIZED, MessageStatus.UN_AUTHORIZED])
def test_a_partner_that_does_not_have_it_gets_the_resend_the_question_stood_in_for(answer: MessageStatus) -> None:
    # ebMS2 §7.3.3: NotRecognized - "the message ... is not recognized"; §6.5.4: resend it.
    sender = _after_outage(minutes_down=20)
    sender.feed(TimerDue(status_check_after=OUTAGE))
    assert sender.feed(StatusReported(answer, attempt=3)) == (Transmit(MID, 3),)
    assert sender.s.attempts == 3


def test_no_status_answer_sends_the_resend_and_a_partner_still_down_counts_as_a_failed_resend() -> None:
    sender = _after_outage(minutes_down=20)
    sender.feed(TimerDue(status_check_after=OUTAGE))
    assert sender.feed(StatusUnavailable(3, "HTTP 202, no StatusResponse", transmitted=True)) == (Transmit(MID, 3),)
    down = _after_outage(minutes_down=20)
    down.feed(TimerDue(status_check_after=OUTAGE))
    assert down.feed(StatusUnavailable(3, "connection refused", transmitted=False)) == ()
    assert down.s.unreachable_since == T0 + 10 * MIN and down.s.attempts == 3
    # A stale answer (a later attempt is under way) changes nothing.
    assert down.feed(StatusUnavailable(2, "connection refused", transmitted=True)) == ()


def test_no_question_before_the_outage_is_long_enough_or_when_the_partner_cannot_have_it() -> None:
    short = _after_outage(minutes_down=10)  # the timer is due, the partner has been down 10 minutes only
    assert short.feed(TimerDue(status_check_after=OUTAGE)) == (
        ScheduleTimer(MID, short.now + 10 * MIN),
        Transmit(MID, 3),
    )
    off = _after_outage(minutes_down=20)
    assert isinstance(off.feed(TimerDue())[-1], Transmit)  # the setting is off: resend as ebMS2 §6.5.4 says
    never = Sender(rel(retries=10, first_resend_timeout=10 * MIN))
    never.submit()
    never.feed(TransmitFailed("connection refused", transmitted=False))
    never.now = T0 + 40 * MIN
    # Nothing ever left: the partner cannot have it; just send it.
    assert isinstance(never.feed(TimerDue(status_check_after=OUTAGE))[-1], Transmit)


def test_an_answer_that_reaches_the_partner_ends_the_outage() -> None:
    sender = _after_outage(minutes_down=20)
    sender.feed(TimerDue(status_check_after=OUTAGE))
    sender.feed(StatusReported(MessageStatus.NOT_RECOGNIZED, attempt=3))
    sender.feed(TransmitSucceeded())
    assert sender.s.unreachable_since is None
