"""The statuses of a sent message and the evidence each rests on: one definition (msh.engine.outcomes), drawn
into docs/statuses.md, and the phrase every interface shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from msh.engine.outcomes import STATUSES, Evidence, OutboundStatus, explain, status_table

DOCS = Path(__file__).resolve().parents[3] / "docs" / "statuses.md"


def test_the_documented_table_is_the_one_drawn_from_the_definitions() -> None:
    assert status_table() in DOCS.read_text(encoding="utf-8")


def test_every_status_is_defined_once_with_evidence_and_a_rule() -> None:
    assert list(STATUSES) == list(OutboundStatus)
    assert all(d.evidence and d.rule.startswith("ebMS2 §") and d.meaning and d.advice for d in STATUSES.values())
    assert {s for s in OutboundStatus if s.final} == {
        OutboundStatus.DELIVERED,
        OutboundStatus.SENT,
        OutboundStatus.FAILED,
    }


def test_nothing_but_the_to_partys_word_or_a_hop_acknowledgment_of_a_forward_delivers() -> None:
    # ebMS2 §6.5.2 (acknowledgment), §7.3.3 (StatusResponse Received / Processed), §10.1.3 (an intermediary's
    # forward is "delivered" by the next MSH's acknowledgment).
    assert STATUSES[OutboundStatus.DELIVERED].evidence == {
        Evidence.TO_PARTY_ACKNOWLEDGMENT,
        Evidence.STATUS_RESPONSE,
        Evidence.HOP_ACKNOWLEDGMENT,
    }
    timers = {Evidence.RETRIES_EXHAUSTED, Evidence.TIME_TO_LIVE, Evidence.PERSIST_DURATION}
    assert not timers & STATUSES[OutboundStatus.DELIVERED].evidence
    assert not timers & STATUSES[OutboundStatus.SENT].evidence


@pytest.mark.parametrize(
    ("severity", "phrase"),
    [("Error", "not delivered: no acknowledgment after every retry"), ("Warning", "may have been delivered")],
)
def test_a_failure_says_whether_the_message_may_have_arrived(severity: str, phrase: str) -> None:
    # ebMS2 §6.5.7: Error - could not transmit; Warning - transmitted, not acknowledged.
    said = explain(OutboundStatus.FAILED, Evidence.RETRIES_EXHAUSTED, severity=severity)
    assert said.startswith(phrase)


def test_the_phrases_name_the_evidence() -> None:
    assert explain(OutboundStatus.DELIVERED, Evidence.TO_PARTY_ACKNOWLEDGMENT) == "the To party acknowledged it"
    assert "receipt invalid: digest differs" in explain(
        OutboundStatus.DELIVERED, Evidence.TO_PARTY_ACKNOWLEDGMENT, receipt_problem="digest differs"
    )
    assert "no acknowledgment by design" in explain(OutboundStatus.SENT, Evidence.ACCEPTED_BY_NEXT_MSH)
    assert "no end-to-end notification" in explain(OutboundStatus.SENT, Evidence.HOP_ACKNOWLEDGMENT)
    assert "waiting for the To party" in explain(OutboundStatus.FORWARDED, Evidence.HOP_ACKNOWLEDGMENT)
    assert "no end-to-end notification comes" in explain(
        OutboundStatus.FORWARDED, Evidence.HOP_ACKNOWLEDGMENT, end_to_end_awaited=False
    )
    assert explain(OutboundStatus.DELIVERED, Evidence.HOP_ACKNOWLEDGMENT, end_to_end=False) == (
        "the next MSH acknowledged it"
    )
    # A row stored before evidence was recorded still reads.
    assert explain(OutboundStatus.DELIVERED, None).startswith("the To Party MSH has it")
