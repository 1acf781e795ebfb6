"""What follows a failed step, by whose message it was (msh.engine.failures.after_step; ebMS2 §6.5.7, §9.1.1).
Pure decisions on real states of the sending machine; no store, no clock reads."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from cpa.duration import XsDuration
from msh.ebms.model import Error, ErrorList
from msh.ebms.namespaces import ACTOR_TO_PARTY_MSH
from msh.engine import (
    DeliveryFailureLost,
    OutboundKind,
    OutboundState,
    OutboundStatus,
    Reliability,
    ReportDeliveryFailure,
    RestartSequence,
    after_step,
)
from msh.engine.sending import AcknowledgmentReceived, ErrorReceived, Submit, TimerDue, step
from msh.errors import ErrorCode, Severity

T0 = datetime(2026, 6, 1, tzinfo=UTC)
R = Reliability(
    retries=0,
    retry_interval=XsDuration.from_timedelta(timedelta(seconds=10)),
    first_resend_timeout=XsDuration.from_timedelta(timedelta(seconds=10)),
    persist_duration=None,
    time_to_live=None,
    ack_requested=True,
    ack_actor=ACTOR_TO_PARTY_MSH,
)


def _given_up() -> tuple[OutboundState, OutboundState, TimerDue]:
    """A message whose only transmission got no acknowledgment: its timer ends it (Retries 0)."""
    sent, _ = step(None, Submit("m@x", R), T0)
    due = TimerDue()
    failed, _ = step(sent, due, T0 + timedelta(seconds=10))
    assert failed.status is OutboundStatus.FAILED and failed.failure is not None
    return sent, failed, due


def _errors(code: ErrorCode, severity: Severity) -> ErrorReceived:
    return ErrorReceived(ErrorList((Error(code.value, severity),), severity))


def test_a_forward_given_up_is_reported_to_its_from_party() -> None:
    # ebMS2 §6.5.7: the routing intermediary "SHALL send a delivery failure notification to the From Party".
    before, after, event = _given_up()
    assert after_step(OutboundKind.FORWARD, before, after, event) == (ReportDeliveryFailure(after.failure),)  # type: ignore[arg-type]
    # Given up already: nothing more; our own message's failure is the application's (no report to ourselves).
    assert after_step(OutboundKind.FORWARD, after, after, event) == ()
    assert after_step(OutboundKind.OWN, before, after, event) == ()


def test_a_forward_that_failed_on_the_next_hops_own_error_message_is_not_reported_twice() -> None:
    # The next hop's error message is relayed to the From party: it already tells it (ebMS2 §6.5.7).
    before, after, _ = _given_up()
    relayed = _errors(ErrorCode.DELIVERY_FAILURE, Severity.ERROR)
    assert after_step(OutboundKind.FORWARD, before, after, relayed) == ()
    # A SOAP Fault is no error message: nobody else reports it.
    assert after_step(OutboundKind.FORWARD, before, after, replace(relayed, fault=True)) != ()


def test_a_delivery_failure_of_ours_that_failed_is_for_the_operator() -> None:
    # ebMS2 §6.5.7: the From party "MUST be informed of the problem by other means".
    before, after, event = _given_up()
    follow = after_step(OutboundKind.SIGNAL, before, after, event, message_error=True)
    assert follow == (DeliveryFailureLost(after.failure),)
    assert after_step(OutboundKind.SIGNAL, before, after, event, message_error=False) == ()  # an acknowledgment


@pytest.mark.parametrize(("severity", "restart"), [(Severity.ERROR, True), (Severity.WARNING, False)])
def test_a_delivered_ordered_message_the_to_party_could_not_present_restarts_the_sequence(
    severity: Severity, restart: bool
) -> None:
    # ebMS2 §9.1.1: acknowledged (stored and held), then the To party's DeliveryFailure (Error) says it could
    # not present it: it presents no later message of the sequence, so the next one starts it again. The
    # message stays delivered (ebMS2 §6.5.7 note); nothing was given up.
    sent, _ = step(None, Submit("m@x", R), T0)
    delivered, _ = step(sent, AcknowledgmentReceived("m@x"), T0)
    event = _errors(ErrorCode.DELIVERY_FAILURE, severity)
    after, _ = step(delivered, event, T0)
    assert after.status is OutboundStatus.DELIVERED
    expected = (RestartSequence(gave_up=False),) if restart else ()
    assert after_step(OutboundKind.OWN, delivered, after, event, ordered=True) == expected
    assert after_step(OutboundKind.OWN, delivered, after, event, ordered=False) == ()


def test_an_ordered_message_that_failed_restarts_the_sequence() -> None:
    before, after, event = _given_up()
    assert after_step(OutboundKind.OWN, before, after, event, ordered=True) == (RestartSequence(gave_up=True),)
