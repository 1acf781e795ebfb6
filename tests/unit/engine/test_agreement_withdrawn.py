"""The sending machine when the agreement of a message in flight is removed from the running MSH
(:class:`AgreementWithdrawn`, a reload): ebMS2 §6.5.7, the application is told a DeliveryFailure."""

from __future__ import annotations

from datetime import timedelta

import pytest

from msh.engine.sending import (
    AgreementWithdrawn,
    CancelTimer,
    Evidence,
    NotifyFailed,
    OutboundStatus,
    TransmitFailed,
    TransmitSucceeded,
)
from msh.errors import ErrorCode, Severity
from tests.unit.engine.test_sending import MID, Sender, rel


def test_a_message_that_never_left_fails_with_severity_error() -> None:
    # ebMS2 §6.5.7: Error when the message could not be transmitted.
    s = Sender(rel())
    s.submit()
    s.feed(TransmitFailed("connection refused", transmitted=False))
    actions = s.feed(AgreementWithdrawn(MID, "cpa-1"))
    assert s.state is not None and s.state.status is OutboundStatus.FAILED
    assert s.state.evidence is Evidence.AGREEMENT_REMOVED and s.state.next_due_at is None
    assert actions[0] == CancelTimer(MID)
    told = actions[1]
    assert isinstance(told, NotifyFailed) and told.evidence is Evidence.AGREEMENT_REMOVED
    assert told.issue.error_code is ErrorCode.DELIVERY_FAILURE and told.issue.severity is Severity.ERROR
    assert "agreement cpa-1 was removed" in told.issue.description


def test_a_transmitted_message_fails_with_severity_warning() -> None:
    # ebMS2 §6.5.7: Warning when it was transmitted: it may have been delivered.
    s = Sender(rel())
    s.submit()
    s.feed(TransmitSucceeded())
    (_cancel, told) = s.feed(AgreementWithdrawn(MID, "cpa-1"))
    assert isinstance(told, NotifyFailed) and told.issue.severity is Severity.WARNING
    assert "may have been delivered" in told.issue.description
    assert s.advance(timedelta(days=1)) == ()  # no resend after it


@pytest.mark.parametrize("final", ["delivered", "failed"])
def test_a_final_message_is_not_changed(final: str) -> None:
    s = Sender(rel(retries=0, ack_requested=False) if final == "delivered" else rel(retries=0))
    s.submit()
    if final == "delivered":
        s.feed(TransmitSucceeded())  # no acknowledgment asked: sent
    else:
        s.feed(TransmitFailed("connection refused", transmitted=False))
        s.advance(timedelta(hours=1))
    before = s.state
    assert before is not None and before.status.final
    assert s.feed(AgreementWithdrawn(MID, "cpa-1")) == ()
    assert s.state == before
