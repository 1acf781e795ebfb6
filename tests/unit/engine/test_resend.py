"""The operator's resend of a failed message: its row in the sending table and the refusal rules, with a fake
clock (ebMS2 §6.4.1 DuplicateElimination, §6.4.6 PersistDuration, §3.1.6.4 TimeToLive, §9.1.1, §10.1)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from msh.engine.outcomes import STATUSES
from msh.engine.resend import ResendFacts, ResendRefusal, resend_refusal
from msh.engine.sending import (
    TRANSITIONS,
    AcknowledgmentReceived,
    EngineError,
    Evidence,
    NotifyFailed,
    OperatorResend,
    OutboundStatus,
    ScheduleTimer,
    Transmit,
    TransmitFailed,
    state_diagram,
    step,
)
from tests.unit.engine.test_sending import MID, MIN, T0, Sender, rel


def failed_sender(**kw: object) -> Sender:
    """A message that failed after its Retries (3 resends, 10 minutes apart, the first after 5)."""
    sender = Sender(rel(**kw))  # type: ignore[arg-type]
    sender.submit()
    sender.feed(TransmitFailed("connection refused", transmitted=False))
    sender.advance(timedelta(hours=1))
    assert sender.s.status is OutboundStatus.FAILED
    return sender


def test_the_row_takes_failed_to_pending_on_operator_resend_evidence() -> None:
    # ebMS2 §6.4.1, §6.4.6: the row exists for failed only, and cites its rule.
    row = TRANSITIONS[(OutboundStatus.FAILED, OperatorResend)]
    assert row.targets == (OutboundStatus.PENDING, OutboundStatus.FAILED)
    assert "§6.4.1" in row.rule and "§6.4.6" in row.rule
    assert Evidence.OPERATOR_RESEND in STATUSES[OutboundStatus.PENDING].evidence
    assert "failed --> pending : OperatorResend" in state_diagram()


def test_a_resend_is_a_new_attempt_series_with_the_same_message_id() -> None:
    sender = failed_sender(persist_duration=timedelta(days=1))
    before = sender.s
    first = before.first_sent_at
    sender.now += 10 * MIN
    actions = sender.feed(OperatorResend())
    s = sender.s
    assert s.message_id == MID and s.status is OutboundStatus.PENDING
    assert s.evidence is Evidence.OPERATOR_RESEND
    assert (s.attempts, s.refused, s.failure, s.unreachable_since) == (1, 0, None, None)
    # ebMS2 §6.4.6: PersistDuration still counts from the message's first transmission.
    assert s.first_sent_at == first
    assert actions == (ScheduleTimer(MID, sender.now + 5 * MIN), Transmit(MID, 1))


def test_the_new_series_gets_its_retries_afresh_and_fails_again_with_a_new_delivery_failure() -> None:
    sender = failed_sender(persist_duration=timedelta(days=1))
    sender.now += MIN
    sender.feed(OperatorResend())
    start = sender.now
    sender.advance(timedelta(hours=1))
    # ebMS2 §6.5.4: 1 + Retries transmissions in the new series, then a DeliveryFailure (§6.5.7).
    again = [a for t, a in sender.transmissions if t >= start]
    assert again == [1, 2, 3, 4]
    failures = [a for _, a in sender.log if isinstance(a, NotifyFailed)]
    assert len(failures) == 2 and sender.s.status is OutboundStatus.FAILED


def test_the_to_partys_acknowledgment_delivers_the_resent_message() -> None:
    sender = failed_sender()
    sender.feed(OperatorResend())
    sender.feed(AcknowledgmentReceived(MID))
    assert sender.s.status is OutboundStatus.DELIVERED


def test_past_persist_duration_the_engine_transmits_nothing() -> None:
    # ebMS2 §6.4.6: "If the PersistDuration has passed since the message was first sent, a Sending MSH SHOULD
    # NOT resend a message with the same MessageId."
    sender = failed_sender(persist_duration=timedelta(hours=2))
    sender.now = T0 + timedelta(hours=2)
    state = sender.s
    new, actions = step(state, OperatorResend(), sender.now)
    assert new is state and actions == ()


def test_past_time_to_live_the_engine_transmits_nothing() -> None:
    # ebMS2 §3.1.6.4: the receiver would refuse it.
    sender = failed_sender(time_to_live=T0 + timedelta(hours=3))
    new, actions = step(sender.s, OperatorResend(), T0 + timedelta(hours=3))
    assert new.status is OutboundStatus.FAILED and actions == ()


@pytest.mark.parametrize("status", [s for s in OutboundStatus if s is not OutboundStatus.FAILED])
def test_operator_resend_of_a_message_that_is_not_failed_is_not_in_the_table(status: OutboundStatus) -> None:
    state = replace(failed_sender().s, status=status, failure=None, evidence=None)
    with pytest.raises(EngineError, match="no transition"):
        step(state, OperatorResend(), T0)


def facts(state_status: OutboundStatus = OutboundStatus.FAILED, **kw: object) -> ResendFacts:
    state = replace(failed_sender(persist_duration=timedelta(days=1)).s, status=state_status)
    values: dict[str, object] = {"own": True, "duplicate_elimination": True, "ordered": False, **kw}
    return ResendFacts(state, **values)  # type: ignore[arg-type]


NOW = T0 + timedelta(hours=2)


def test_a_failed_own_message_with_duplicate_elimination_may_be_resent() -> None:
    assert resend_refusal(facts(), NOW) is None


@pytest.mark.parametrize("status", [s for s in OutboundStatus if s is not OutboundStatus.FAILED])
def test_only_a_failed_message_is_resent(status: OutboundStatus) -> None:
    assert resend_refusal(facts(status), NOW, force=True) is ResendRefusal.NOT_FAILED


def test_without_duplicate_elimination_only_a_forced_resend_goes() -> None:
    # ebMS2 §6.4.1: without DuplicateElimination "duplicate messages might be delivered to an application".
    refusal = resend_refusal(facts(duplicate_elimination=False), NOW)
    assert refusal is ResendRefusal.NO_DUPLICATE_ELIMINATION and refusal.forceable
    assert resend_refusal(facts(duplicate_elimination=False), NOW, force=True) is None


def test_forwards_ordered_messages_and_expired_ones_are_refused_even_when_forced() -> None:
    assert resend_refusal(facts(own=False), NOW, force=True) is ResendRefusal.NOT_OWN  # ebMS2 §10.1
    assert resend_refusal(facts(ordered=True), NOW, force=True) is ResendRefusal.ORDERED  # ebMS2 §9.1.1
    late = T0 + timedelta(days=1)
    assert resend_refusal(facts(), late, force=True) is ResendRefusal.EXPIRED  # ebMS2 §6.4.6
    assert not any(r.forceable for r in ResendRefusal if r is not ResendRefusal.NO_DUPLICATE_ELIMINATION)


def test_now_must_be_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        resend_refusal(facts(), datetime(2026, 6, 1, 12))


@given(st.integers(min_value=0, max_value=48 * 60))
def test_refusal_and_engine_agree_on_the_deadline(minutes: int) -> None:
    # The refusal says EXPIRED exactly when the engine would transmit nothing (one rule, ebMS2 §6.4.6).
    f = facts()
    now = T0 + timedelta(minutes=minutes)
    refused = resend_refusal(f, now) is ResendRefusal.EXPIRED
    _new, actions = step(f.state, OperatorResend(), now)
    assert refused == (actions == ())
    assert now.tzinfo is UTC
