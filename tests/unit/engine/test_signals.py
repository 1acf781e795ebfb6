"""Signals about our messages count only from the party and agreement the message went to (docs/design.md §7)."""

from __future__ import annotations

from msh.ebms.errorlist import error_list
from msh.ebms.model import Party, PartyId
from msh.engine import AcknowledgmentReceived, ErrorReceived
from msh.engine.receiving import OutboundEvent
from msh.engine.signals import foreign_signal, party_text
from msh.errors import ErrorCode, Issue, Severity

B_TYPE = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
B = Party((PartyId("987654321", B_TYPE),))
C = Party((PartyId("555", B_TYPE),))
SENT_TO = party_text("987654321", B_TYPE)


def ack(party: Party | None, cpa: str | None) -> OutboundEvent:
    return OutboundEvent("m@a", AcknowledgmentReceived("m@a"), party, cpa)


def test_a_signal_from_the_party_and_agreement_the_message_went_to_counts() -> None:
    assert foreign_signal(ack(B, "cpa-ab"), sent_to=SENT_TO, sent_under="cpa-ab") is None
    assert foreign_signal(ack(None, None), sent_to=SENT_TO, sent_under="cpa-ab") is None  # nothing to compare


def test_a_signal_from_another_party_does_not_count() -> None:
    reason = foreign_signal(ack(C, "cpa-ab"), sent_to=SENT_TO, sent_under="cpa-ab")
    assert reason is not None and "555" in reason and "987654321" in reason


def test_a_signal_under_another_agreement_does_not_count() -> None:
    errors = error_list(Issue(ErrorCode.DELIVERY_FAILURE, Severity.ERROR, "gave up"))
    error = OutboundEvent("m@a", ErrorReceived(errors), B, "cpa-cb")
    reason = foreign_signal(error, sent_to=SENT_TO, sent_under="cpa-ab")
    assert reason is not None and "cpa-cb" in reason


def test_party_text_is_the_ebcore_combined_form() -> None:
    assert party_text("123", "urn:x") == "urn:x:123"
    assert party_text("123", None) == "123"
