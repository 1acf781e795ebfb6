"""The sending state machine with ReliableMessagingMethod Transport: a queuing transport makes the message
reliable. Fake clock, never a sleep.

The rules come from the *Reliable Messaging* draft the ebMS 2.0 chapters grew from, "Reliable Messaging
Method" (``Transport``: "a commercial software product is used for reliable delivery of the message") and
its section "ebXML Reliable Messaging using Commercial Software Products / Queuing Transports", rule 1:
"Implementations should use the facilities of the Queuing Transport to determine if the message was
delivered"; and from ebMS2 B.4 "Communication Errors during Reliable Messaging": "the appropriate transport
recovery handler will execute a recovery sequence. Only if the error is unrecoverable, does Reliable
Messaging recovery take place".
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from cpa.duration import XsDuration
from cpa.resolve import resolve
from msh.ebms.model import MessageStatus
from msh.ebms.namespaces import ACTOR_NEXT_MSH
from msh.engine import timers
from msh.engine.outcomes import STATUSES
from msh.engine.resend import ResendFacts, ResendRefusal, resend_refusal
from msh.engine.sending import (
    TRANSITIONS,
    TRANSPORT_TRANSITIONS,
    AcknowledgmentReceived,
    AgreementWithdrawn,
    EngineError,
    ErrorReceived,
    Evidence,
    NotifyDelivered,
    NotifySent,
    OperatorResend,
    OutboundStatus,
    Reliability,
    ReliableMessagingMethod,
    ScheduleTimer,
    SendAgain,
    StatusReported,
    StatusUnavailable,
    Submit,
    TimerDue,
    Transmit,
    TransmitFailed,
    TransmitSucceeded,
    explain_state,
    state_diagram,
    step,
    transitions_for,
)
from msh.errors import ErrorCode, Severity
from tests.support.cpa_factory import NOW, make_cpa
from tests.unit.engine.test_sending import MID, MIN, ORDER, T0, Sender, peer_errors, rel

QUEUING = 'the Reliable Messaging draft, "Queuing Transports"'
HOUR = timedelta(hours=1)


def queued(**kw: object) -> Reliability:
    """:func:`rel` (Retries 3, RetryInterval 10 minutes, first resend after 5) sent by a queuing transport."""
    return replace(rel(**kw), method=ReliableMessagingMethod.TRANSPORT)  # type: ignore[arg-type]


def handed_over(r: Reliability) -> Sender:
    sender = Sender(r)
    sender.submit()
    sender.feed(TransmitSucceeded())
    return sender


# --- the method as data -----------------------------------------------------------------------------------


def test_the_methods_are_spelt_as_the_draft_spells_them_and_ebxml_is_the_default() -> None:
    # "Reliable Messaging Method": valid values are ebXML and Transport.
    assert [m.value for m in ReliableMessagingMethod] == ["ebXML", "Transport"]
    assert rel().method is ReliableMessagingMethod.EBXML and not rel().by_transport
    assert queued().by_transport


def test_only_the_applications_own_messages_go_by_transport() -> None:
    # ebMS2 §10.1: a forward or a signal sent hop by hop ends at the next MSH's acknowledgment (ebXML).
    with pytest.raises(ValueError, match="Transport is for the application's own messages"):
        replace(queued(), end_to_end=False)
    with pytest.raises(TypeError, match="method must be a ReliableMessagingMethod"):
        replace(rel(), method="Transport")


def test_the_channels_method_reaches_the_reliability_through_the_agreements_parameters() -> None:
    plain = resolve(make_cpa(), ORDER, now=NOW)
    assert plain.reliable_messaging_method is ReliableMessagingMethod.EBXML
    methods = {"A_channel": ReliableMessagingMethod.TRANSPORT}
    params = resolve(make_cpa(), ORDER, now=NOW, reliable_messaging_methods=methods)
    assert params.reliable_messaging_method is ReliableMessagingMethod.TRANSPORT
    r = Reliability.from_parameters(params, ack_requested=True, time_to_live=None)
    assert r.method is ReliableMessagingMethod.TRANSPORT and r.retries == 3
    other = resolve(make_cpa(), ORDER, now=NOW, reliable_messaging_methods={"B_channel": methods["A_channel"]})
    assert other.reliable_messaging_method is ReliableMessagingMethod.EBXML  # B's channel sends nothing of A's
    bare = resolve(make_cpa(retries=None), ORDER, now=NOW, reliable_messaging_methods=methods)
    # Without ReliableMessaging in the agreement the transport still carries it reliably.
    assert Reliability.from_parameters(bare, ack_requested=False, time_to_live=None).by_transport


# --- the deadline -----------------------------------------------------------------------------------------


def test_the_deadline_is_time_to_live_else_persist_duration_else_the_retry_schedules_end() -> None:
    # ebMS2 §3.1.6.4 TimeToLive; §6.4.6 PersistDuration; else as long as the ebXML schedule would have taken.
    assert timers.transport_deadline(queued(time_to_live=T0 + 50 * MIN), T0) == T0 + 50 * MIN
    assert timers.transport_deadline(queued(persist_duration=HOUR), T0) == T0 + HOUR
    both = queued(time_to_live=T0 + 2 * HOUR, persist_duration=HOUR)
    assert timers.transport_deadline(both, T0) == T0 + HOUR  # the earlier: a later hand-off could be a duplicate
    # Retries 3: first resend after 5 minutes, then every 10: the schedule gives up at 35 minutes.
    assert timers.transport_deadline(queued(), T0) == T0 + 35 * MIN == timers.end_to_end_deadline(queued(), T0)
    assert timers.handoff_due(queued(), sent_at=T0, first_sent_at=T0) == T0 + 10 * MIN  # RetryInterval
    assert timers.handoff_due(queued(), sent_at=T0 + 30 * MIN, first_sent_at=T0) == T0 + 35 * MIN  # capped


# --- the rows -------------------------------------------------------------------------------------------


def test_submit_hands_the_message_over_with_the_retry_timer_at_retry_interval() -> None:
    # ebMS2 §6.5.1: committed, then handed over; B.4: a refused hand-off is tried again a RetryInterval on.
    sender = Sender(queued())
    assert sender.submit() == (ScheduleTimer(MID, T0 + 10 * MIN), Transmit(MID, 1))
    assert (sender.s.status, sender.s.evidence, sender.s.attempts) == (OutboundStatus.PENDING, Evidence.SUBMITTED, 1)


def test_submit_past_time_to_live_sends_nothing() -> None:
    # ebMS2 §3.1.6.4.
    sender = Sender(queued(time_to_live=T0))
    assert sender.submit()[-1:] and not sender.transmissions
    assert (sender.s.status, sender.s.evidence) == (OutboundStatus.FAILED, Evidence.TIME_TO_LIVE)
    assert sender.failure.issue.severity is Severity.ERROR and sender.failure.expired


def test_accepted_by_the_transport_without_an_acknowledgment_requested_is_sent() -> None:
    # Queuing Transports rule 1: the transport's facilities say whether it was delivered; none was asked of the MSH.
    sender = handed_over(queued(ack_requested=False))
    assert (sender.s.status, sender.s.evidence) == (OutboundStatus.SENT, Evidence.ACCEPTED_BY_TRANSPORT)
    assert NotifySent(MID, Evidence.ACCEPTED_BY_TRANSPORT) in [a for _, a in sender.log]
    assert sender.timer is None
    assert explain_state(sender.s) == "the queuing transport accepted it; no acknowledgment by design"


def test_accepted_then_acknowledged_is_delivered_with_one_transmission() -> None:
    # ebMS2 §6.5.2: the To Party MSH's acknowledgment delivers it; nothing was resent meanwhile.
    sender = handed_over(queued(persist_duration=HOUR))
    assert (sender.s.status, sender.s.evidence) == (OutboundStatus.AWAITING_ACK, Evidence.ACCEPTED_BY_TRANSPORT)
    assert sender.timer == T0 + HOUR  # the deadline, not the retry timer
    sender.advance(50 * MIN)
    sender.feed(AcknowledgmentReceived(MID))
    assert (sender.s.status, sender.s.evidence) == (OutboundStatus.DELIVERED, Evidence.TO_PARTY_ACKNOWLEDGMENT)
    assert sender.transmissions == [(T0, 1)]
    assert isinstance(sender.log[-1][1], NotifyDelivered)


def test_accepted_but_never_acknowledged_fails_with_severity_warning_at_time_to_live_never_resent() -> None:
    # Queuing Transports rule 1: no ebMS resend; ebMS2 §3.1.6.4 ends it; §6.5.7: transmitted, so a Warning.
    sender = handed_over(queued(time_to_live=T0 + 50 * MIN, persist_duration=HOUR))
    sender.run_out()
    assert sender.transmissions == [(T0, 1)]
    assert (sender.s.status, sender.s.evidence) == (OutboundStatus.FAILED, Evidence.TIME_TO_LIVE)
    failure = sender.failure
    assert failure.issue.severity is Severity.WARNING and failure.expired
    assert failure.issue.error_code is ErrorCode.DELIVERY_FAILURE
    assert "the queuing transport accepted it" in failure.issue.description
    assert "may have been delivered" in failure.issue.description
    assert sender.log[-1][0] == T0 + 50 * MIN


def test_without_time_to_live_or_persist_duration_the_retry_window_ends_it() -> None:
    sender = handed_over(queued())
    sender.run_out()
    assert sender.transmissions == [(T0, 1)]
    assert (sender.s.status, sender.s.evidence) == (OutboundStatus.FAILED, Evidence.RETRY_WINDOW_ENDED)
    assert sender.failure.issue.severity is Severity.WARNING
    assert "Retries 3 do not apply" in sender.failure.issue.description
    assert sender.log[-1][0] == T0 + 35 * MIN
    assert explain_state(sender.s).startswith("may have been delivered: the agreement's retry window ended")


def test_refused_hand_offs_are_retried_every_retry_interval_past_retries_then_fail_with_severity_error() -> None:
    # ebMS2 B.4: the transport's recovery, as often as it takes until the deadline (PersistDuration, §6.4.6);
    # nothing ever left: Error (§6.5.7).
    sender = Sender(queued(persist_duration=HOUR))
    sender.submit()
    for _ in range(10):
        sender.feed(TransmitFailed("the broker refused the connection", transmitted=False))
        assert sender.s.status is OutboundStatus.AWAITING_ACK and sender.s.evidence is Evidence.TRANSMISSION
        sender.advance(10 * MIN)
        if sender.s.status.final:
            break
    assert sender.transmissions == [(T0 + n * 10 * MIN, n + 1) for n in range(6)]  # more than Retries 3 allows
    assert (sender.s.status, sender.s.evidence) == (OutboundStatus.FAILED, Evidence.PERSIST_DURATION)
    assert sender.failure.issue.severity is Severity.ERROR and not sender.s.transmitted
    assert "did not accept it in 6 hand-offs" in sender.failure.issue.description


def test_a_hand_off_lost_before_settlement_is_retried_and_fails_with_severity_warning() -> None:
    # ebMS2 B.4: retried too; it may have arrived (the receiving MSH's duplicate elimination, §6.4.1, keeps a
    # second copy from its application): a Warning at the deadline (§6.5.7).
    sender = Sender(queued(time_to_live=T0 + 25 * MIN))
    sender.submit()
    sender.feed(TransmitFailed("the link dropped before the broker settled it", transmitted=True))
    sender.advance(10 * MIN)
    sender.feed(TransmitFailed("the broker refused it", transmitted=False))
    sender.advance(10 * MIN)
    sender.feed(TransmitFailed("the broker refused it", transmitted=False))
    sender.run_out()
    assert [n for _, n in sender.transmissions] == [1, 2, 3]
    assert (sender.s.status, sender.s.evidence) == (OutboundStatus.FAILED, Evidence.TIME_TO_LIVE)
    assert sender.failure.issue.severity is Severity.WARNING and sender.s.transmitted


def test_a_hand_off_accepted_after_refusals_waits_for_the_acknowledgment_until_the_deadline() -> None:
    sender = Sender(queued(persist_duration=HOUR))
    sender.submit()
    sender.feed(TransmitFailed("refused", transmitted=False))
    sender.advance(10 * MIN)
    assert sender.feed(TransmitSucceeded()) == (ScheduleTimer(MID, T0 + HOUR),)
    assert sender.s.unreachable_since is None and sender.s.evidence is Evidence.ACCEPTED_BY_TRANSPORT
    # A late failure of an earlier hand-off changes nothing: the transport has the message.
    assert sender.feed(TransmitFailed("late", transmitted=False)) == ()
    assert sender.s.evidence is Evidence.ACCEPTED_BY_TRANSPORT
    sender.run_out()
    assert [n for _, n in sender.transmissions] == [1, 2]
    assert sender.failure.issue.severity is Severity.WARNING


def test_a_timer_while_the_hand_off_is_in_flight_waits_a_retry_interval_more() -> None:
    # ebMS2 §6.4.4: the last hand-off has not ended: nothing is handed over again yet.
    sender = Sender(queued(persist_duration=HOUR))
    sender.submit()
    sender.now = T0 + 10 * MIN
    assert sender.feed(TimerDue(in_flight=True)) == (ScheduleTimer(MID, T0 + 20 * MIN),)
    assert sender.s.attempts == 1


def test_an_early_timer_re_arms_itself() -> None:
    sender = handed_over(queued(persist_duration=HOUR))
    sender.now = T0 + 10 * MIN
    assert sender.feed(TimerDue()) == (ScheduleTimer(MID, T0 + HOUR),)


def test_the_status_question_never_stands_in_for_a_hand_off() -> None:
    # ebMS2 §7: the status question replaced a resend; the transport's recovery has no resend to replace.
    sender = Sender(queued(persist_duration=HOUR))
    sender.submit()
    sender.feed(TransmitFailed("refused", transmitted=True))
    sender.now = T0 + 10 * MIN
    actions = sender.feed(TimerDue(status_check_after=timedelta(0)))
    assert actions == (ScheduleTimer(MID, T0 + 20 * MIN), Transmit(MID, 2))


def test_an_intermediarys_acknowledgment_is_not_counted() -> None:
    # The transport carries the hop; ebMS2 §6.5.2: an unexpected acknowledgment is ignored.
    sender = handed_over(queued(persist_duration=HOUR))
    before = sender.s
    assert sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True)) == ()
    assert sender.s == before
    hop_only = handed_over(queued(persist_duration=HOUR, ack_actor=ACTOR_NEXT_MSH))
    hop_only.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH))  # a single hop: the To party acted as next MSH
    assert hop_only.s.status is OutboundStatus.DELIVERED
    with pytest.raises(EngineError, match="routed to message"):
        sender.feed(AcknowledgmentReceived("other@x"))


def test_an_acknowledgment_of_the_wrong_actor_or_unrequested_is_ignored() -> None:
    sender = handed_over(queued(persist_duration=HOUR))
    assert sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH)) == ()  # §10.1.3: not the To Party MSH's
    hop_only = handed_over(queued(persist_duration=HOUR, ack_actor=ACTOR_NEXT_MSH))
    assert hop_only.feed(AcknowledgmentReceived(MID)) == ()  # §6.5.2: the To Party MSH was not asked
    pending = Sender(queued(ack_requested=False))
    pending.submit()
    assert pending.feed(AcknowledgmentReceived(MID)) == ()


def test_an_error_message_fails_it() -> None:
    # ebMS2 §6.5.7, §4.2.3.2.4: an Error fails it, Warnings alone do not.
    sender = handed_over(queued(persist_duration=HOUR))
    assert sender.feed(ErrorReceived(peer_errors(("Inconsistent", Severity.WARNING)))) == ()
    sender.feed(ErrorReceived(peer_errors(("SecurityFailure", Severity.ERROR))))
    assert (sender.s.status, sender.s.evidence) == (OutboundStatus.FAILED, Evidence.ERROR_MESSAGE)
    assert sender.failure.issue.severity is Severity.ERROR


def test_a_status_response_received_delivers_and_any_other_changes_nothing() -> None:
    # ebMS2 §7.3.3: Received / Processed: the To party has it; NotRecognized sends nothing (no resend to replace).
    sender = handed_over(queued(persist_duration=HOUR))
    assert sender.feed(StatusReported(MessageStatus.NOT_RECOGNIZED, attempt=1)) == ()
    sender.feed(StatusReported(MessageStatus.RECEIVED))
    assert (sender.s.status, sender.s.evidence) == (OutboundStatus.DELIVERED, Evidence.STATUS_RESPONSE)


def test_a_withdrawn_agreement_fails_it() -> None:
    # ebMS2 §6.5.7: the application is told; the transport accepted it, so it may have arrived.
    sender = handed_over(queued(persist_duration=HOUR))
    sender.feed(AgreementWithdrawn(MID, "cpa-a-b"))
    assert (sender.s.status, sender.s.evidence) == (OutboundStatus.FAILED, Evidence.AGREEMENT_REMOVED)
    assert sender.failure.issue.severity is Severity.WARNING and sender.timer is None


def test_send_again_and_status_unavailable_are_refused() -> None:
    # Only forwards are sent again (ebMS2 §10.1); no StatusRequest stands in for a hand-off.
    sender = handed_over(queued(persist_duration=HOUR))
    with pytest.raises(EngineError, match="no transition from awaiting-ack on SendAgain"):
        sender.feed(SendAgain())
    with pytest.raises(EngineError, match="no transition from awaiting-ack on StatusUnavailable"):
        sender.feed(StatusUnavailable(1, "no answer", transmitted=True))


def test_after_a_warning_the_to_partys_acknowledgment_still_delivers() -> None:
    # ebMS2 §6.5.2: the DeliveryFailure said "may have been delivered".
    sender = handed_over(queued(time_to_live=T0 + 50 * MIN))
    sender.run_out()
    sender.feed(AcknowledgmentReceived(MID))
    assert sender.s.status is OutboundStatus.DELIVERED and sender.transmissions == [(T0, 1)]


def test_an_operator_resend_hands_it_over_again_before_the_deadline_only() -> None:
    # ebMS2 §6.4.1: the receiver eliminates the duplicate; §6.4.6, §3.1.6.4: not past the message's deadline.
    sender = handed_over(queued(persist_duration=2 * HOUR))
    sender.feed(ErrorReceived(peer_errors(("DeliveryFailure", Severity.ERROR))))
    sender.now = T0 + HOUR
    facts = ResendFacts(sender.s, own=True, duplicate_elimination=True, ordered=False)
    assert resend_refusal(facts, sender.now) is None
    assert sender.feed(OperatorResend()) == (ScheduleTimer(MID, T0 + 70 * MIN), Transmit(MID, 1))
    assert (sender.s.status, sender.s.evidence) == (OutboundStatus.PENDING, Evidence.OPERATOR_RESEND)
    late = handed_over(queued())
    late.run_out()  # failed at 35 minutes: the end of the retry window
    assert resend_refusal(ResendFacts(late.s, True, True, False), late.now) is ResendRefusal.EXPIRED
    before = late.s
    assert late.feed(OperatorResend()) == () and late.s == before


# --- the table ------------------------------------------------------------------------------------------


def test_the_transport_table_is_chosen_by_the_method_and_refuses_what_it_lacks() -> None:
    assert transitions_for(ReliableMessagingMethod.EBXML) is TRANSITIONS
    assert transitions_for(ReliableMessagingMethod.TRANSPORT) is TRANSPORT_TRANSITIONS
    live = (OutboundStatus.PENDING, OutboundStatus.AWAITING_ACK)
    assert not any(status is OutboundStatus.FORWARDED for status, _ in TRANSPORT_TRANSITIONS)
    assert not any(event in (SendAgain, StatusUnavailable) for s, event in TRANSPORT_TRANSITIONS if s in live)
    assert all(t.rule for t in TRANSPORT_TRANSITIONS.values())
    assert TRANSPORT_TRANSITIONS[(None, Submit)].rule == "ebMS2 §6.5.1 steps 3-4, §3.1.6.4"
    assert TRANSPORT_TRANSITIONS[(OutboundStatus.PENDING, TransmitSucceeded)].rule.startswith(QUEUING)
    assert TRANSPORT_TRANSITIONS[(OutboundStatus.AWAITING_ACK, TransmitFailed)].rule.startswith("ebMS2 B.4")
    assert "ebMS2 B.4" in TRANSPORT_TRANSITIONS[(OutboundStatus.AWAITING_ACK, TimerDue)].rule
    # A timer never delivers anything (msh.engine.outcomes).
    for (source, event), transition in TRANSPORT_TRANSITIONS.items():
        if event is TimerDue and source is not OutboundStatus.DELIVERED:
            assert OutboundStatus.DELIVERED not in transition.targets


def test_the_transports_evidence_is_allowed_where_it_is_used_and_nowhere_else() -> None:
    # step() refuses a status on evidence msh.engine.outcomes does not allow for it.
    allowed = {status for status, d in STATUSES.items() if Evidence.ACCEPTED_BY_TRANSPORT in d.evidence}
    assert allowed == {OutboundStatus.AWAITING_ACK, OutboundStatus.SENT}
    assert {status for status, d in STATUSES.items() if Evidence.RETRY_WINDOW_ENDED in d.evidence} == {
        OutboundStatus.FAILED
    }
    ebxml = Sender(rel())
    ebxml.submit()
    assert ebxml.s.reliability.method is ReliableMessagingMethod.EBXML
    assert step(ebxml.s, TimerDue(), T0 + 5 * MIN)[0].attempts == 2  # ebXML resends as before


def test_the_transport_state_diagram_is_drawn_from_its_table() -> None:
    diagram = state_diagram(ReliableMessagingMethod.TRANSPORT)
    assert diagram.startswith("stateDiagram-v2\n")
    assert "forwarded" not in diagram
    assert "    [*] --> pending : Submit" in diagram
    assert "    pending --> sent : TransmitSucceeded" in diagram
    assert "    awaiting_ack --> failed : ErrorReceived, TimerDue, AgreementWithdrawn" in diagram
    assert "    failed --> pending : OperatorResend" in diagram
    assert "SendAgain" not in diagram.split("delivered --> delivered", 1)[0]
    assert state_diagram() != diagram and "forwarded" in state_diagram()


def test_stored_durations_in_months_are_added_as_months() -> None:
    # XML Schema durations: a PersistDuration of one month from 31 January ends on the last day of February.
    first = datetime(2026, 1, 31, 12, 0, tzinfo=T0.tzinfo)
    r = replace(queued(), persist_duration=XsDuration.parse("P1M"))
    assert timers.transport_deadline(r, first) == datetime(2026, 2, 28, 12, 0, tzinfo=T0.tzinfo)
