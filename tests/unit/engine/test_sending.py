"""The sending state machine with a fake clock: every timer rule of ebMS2 §6.4-§6.5.7, never a sleep."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from cpa.duration import XsDuration
from cpa.resolve import resolve
from msh.ebms.model import Description, Error, ErrorList
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH
from msh.engine import timers
from msh.engine.sending import (
    DEFAULT_ACK_WAIT,
    TRANSITIONS,
    AcknowledgmentReceived,
    Action,
    CancelTimer,
    EngineError,
    ErrorReceived,
    Event,
    NotifyDelivered,
    NotifyFailed,
    NotifyForwarded,
    OutboundState,
    OutboundStatus,
    Reliability,
    ScheduleTimer,
    SendAgain,
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
    # Timer row in the step's transaction first, then the transmission (DESIGN.md §5.1).
    assert actions == (ScheduleTimer(MID, T0 + 5 * MIN), Transmit(MID, 1))
    assert sender.s == OutboundState(MID, OutboundStatus.PENDING, rel(), 1, T0, False, T0 + 5 * MIN)


def test_a_transmission_outcome_moves_pending_to_awaiting_ack_without_new_actions() -> None:
    sender = Sender(rel())
    sender.submit()
    assert sender.feed(TransmitSucceeded()) == ()
    assert sender.s.status is OutboundStatus.AWAITING_ACK
    assert sender.s.reached_peer


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
    params = resolve(make_cpa(), from_party=A_ID, to_party=B_ID, service=SERVICE, action="NewOrder", now=NOW)
    r = Reliability.from_parameters(params, ack_requested=True, time_to_live=None)
    assert (r.retries, r.retry_interval, r.first_resend_timeout) == (3, xs(10 * MIN), xs(10 * MIN))
    assert r.persist_duration == xs(timedelta(hours=1))
    assert r.ack_actor == ACTOR_TO_PARTY_MSH
    quick = resolve(
        make_cpa(),
        from_party=A_ID,
        to_party=B_ID,
        service=SERVICE,
        action="NewOrder",
        now=NOW,
        first_resend_timeouts={"A_channel": 2 * MIN},
    )
    assert Reliability.from_parameters(quick, ack_requested=True, time_to_live=None).first_resend_timeout == xs(2 * MIN)
    at_once = resolve(
        make_cpa(),
        from_party=A_ID,
        to_party=B_ID,
        service=SERVICE,
        action="NewOrder",
        now=NOW,
        first_resend_timeouts={"A_channel": timedelta(0)},
    )
    # A zero timeout is a setting, not "unset".
    assert (
        Reliability.from_parameters(at_once, ack_requested=True, time_to_live=None).first_resend_timeout == XsDuration()
    )


def test_without_reliable_messaging_there_is_one_transmission_and_one_wait() -> None:
    params = resolve(
        make_cpa(retries=None), from_party=A_ID, to_party=B_ID, service=SERVICE, action="NewOrder", now=NOW
    )
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


def test_failure_is_an_error_when_no_attempt_reached_the_peer() -> None:
    sender = Sender(rel(retries=1))
    sender.submit()
    sender.feed(TransmitFailed("connection refused"))
    sender.advance(5 * MIN)
    sender.feed(TransmitFailed("connection refused"))
    sender.run_out()
    issue = sender.failure.issue
    assert (issue.error_code, issue.severity) == (ErrorCode.DELIVERY_FAILURE, Severity.ERROR)
    assert sender.s.failure == issue


def test_failure_is_a_warning_when_an_attempt_reached_the_peer() -> None:
    sender = Sender(rel(retries=1))
    sender.submit()
    sender.feed(TransmitFailed("connection refused"))
    sender.advance(5 * MIN)
    sender.feed(TransmitSucceeded())
    sender.run_out()
    issue = sender.failure.issue
    assert (issue.error_code, issue.severity) == (ErrorCode.DELIVERY_FAILURE, Severity.WARNING)


def test_an_answer_not_from_the_peer_does_not_count_as_reaching_it() -> None:
    sender = Sender(rel(retries=0))
    sender.submit()
    sender.feed(TransmitSucceeded(reached_peer=False))
    sender.run_out()
    assert sender.failure.issue.severity is Severity.ERROR


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


def test_an_acknowledgment_after_the_failure_is_ignored() -> None:
    sender = Sender(rel(retries=0))
    sender.submit()
    sender.run_out()
    before = sender.s
    assert sender.feed(AcknowledgmentReceived(MID)) == ()
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


def test_best_effort_is_delivered_when_the_peer_answers() -> None:
    sender = Sender(rel(ack_requested=False))
    sender.submit()
    assert sender.feed(TransmitSucceeded()) == (CancelTimer(MID), NotifyDelivered(MID))
    assert sender.s.status is OutboundStatus.DELIVERED


def test_best_effort_retries_transport_failures_and_fails_at_once_when_none_is_left() -> None:
    sender = Sender(rel(ack_requested=False, retries=1))
    sender.submit()
    sender.feed(TransmitFailed("connection refused"))
    assert sender.advance(5 * MIN) == (ScheduleTimer(MID, T0 + 15 * MIN), Transmit(MID, 2))
    actions = sender.feed(TransmitFailed("connection refused"))
    assert actions[0] == CancelTimer(MID)
    assert isinstance(actions[1], NotifyFailed)
    assert actions[1].issue.severity is Severity.ERROR
    assert "connection refused" in actions[1].issue.description


# --- late events and the table ------------------------------------------------------------------------


@pytest.mark.parametrize("final", [OutboundStatus.DELIVERED, OutboundStatus.FAILED])
@pytest.mark.parametrize(
    "event",
    [TransmitSucceeded(), TransmitFailed("reset"), TimerDue(), AcknowledgmentReceived(MID)],
    ids=lambda e: type(e).__name__,
)
def test_late_events_after_a_final_status_are_no_ops(final: OutboundStatus, event: Event) -> None:
    state = OutboundState(MID, final, rel(), 2, T0, True, None)
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
    events = (Submit, TransmitSucceeded, TransmitFailed, AcknowledgmentReceived, ErrorReceived, TimerDue, SendAgain)
    missing = {(s, e) for s in (None, *OutboundStatus) for e in events if (s, e) not in TRANSITIONS}
    assert missing == {(s, Submit) for s in OutboundStatus} | {(None, e) for e in events if e is not Submit}
    ignored = {key for key, t in TRANSITIONS.items() if t.ignored}
    final = (OutboundStatus.DELIVERED, OutboundStatus.FAILED)
    late = {(OutboundStatus.FORWARDED, e) for e in (TransmitSucceeded, TransmitFailed, SendAgain)}
    assert ignored == {(s, e) for s in final for e in events if e is not Submit} | late
    assert all(t.rule for t in TRANSITIONS.values())


def test_the_state_diagram_is_drawn_from_the_table() -> None:
    diagram = state_diagram()
    assert diagram.startswith("stateDiagram-v2\n")
    assert '    state "awaiting-ack" as awaiting_ack' in diagram
    assert "    [*] --> pending : Submit" in diagram
    assert "    pending --> delivered : TransmitSucceeded, AcknowledgmentReceived" in diagram
    assert "delivered --> delivered : AcknowledgmentReceived (ignored), ErrorReceived (ignored)" in diagram
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


def test_the_next_msh_acknowledgment_stops_the_resends_and_the_end_to_end_one_delivers() -> None:
    sender = Sender(both())
    sender.submit()
    sender.feed(TransmitSucceeded())
    actions = sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True))
    deadline = timers.end_to_end_deadline(both(), T0)
    assert sender.s.status is OutboundStatus.FORWARDED
    assert actions == (ScheduleTimer(MID, deadline), NotifyForwarded(MID))
    assert deadline == T0 + 5 * MIN + 3 * 10 * MIN  # when the schedule would have given up
    # No resend while forwarded; a second hop acknowledgment changes nothing.
    assert sender.advance(deadline - T0 - timedelta(seconds=1)) == ()
    assert sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True)) == ()
    assert sender.feed(TransmitSucceeded()) == () and sender.feed(TransmitFailed("late")) == ()
    actions = sender.feed(AcknowledgmentReceived(MID, ACTOR_TO_PARTY_MSH))
    assert sender.s.status is OutboundStatus.DELIVERED
    assert actions == (CancelTimer(MID), NotifyDelivered(MID))
    assert len(sender.transmissions) == 1


def test_a_forwarded_message_fails_with_warning_at_the_end_to_end_deadline() -> None:
    sender = Sender(both())
    sender.submit()
    sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True))
    sender.run_out()
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


def test_asking_only_the_next_msh_an_intermediarys_acknowledgment_forwards_until_the_deadline() -> None:
    # ebMS2 §6.6 rows 3 and 7: no end-to-end notification; a DeliveryFailure from the path may still come.
    sender = Sender(rel(ack_actor=ACTOR_NEXT_MSH))
    sender.submit()
    sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True))
    assert sender.s.status is OutboundStatus.FORWARDED
    sender.run_out()
    assert sender.s.status is OutboundStatus.DELIVERED
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
