"""Element interactions an agreement makes impossible (ebMS2 §9.1, §10.1.1): refused when it is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpa.interactions import interaction_problems
from cpa.model import MessageOrderSemantics, PerMessage, SyncReplyMode
from msh.cli import main
from tests.support.agreement_files import demo_bytes
from tests.support.cpa_factory import channel, make_cpa
from tests.support.multihop import routed_cpa

GUARANTEED = MessageOrderSemantics.GUARANTEED


def test_an_ordinary_agreement_has_no_problem() -> None:
    assert interaction_problems(make_cpa()) == []
    assert interaction_problems(make_cpa(a_channel=channel("A", message_order=GUARANTEED))) == []
    assert interaction_problems(routed_cpa(de=True, e2e=True, hop=True)) == []
    sync_only = routed_cpa(de=True, e2e=True, hop=False, sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY)
    assert interaction_problems(sync_only) == []


def test_sync_reply_with_a_next_msh_acknowledgment_on_every_message_is_refused() -> None:
    # ebMS2 §10.1.1: "When the SyncReply element is present, an AckRequested element with SOAP actor of NextMSH
    # MUST NOT be present."
    cpa = routed_cpa(de=True, e2e=True, hop=True, sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY)
    [problem] = interaction_problems(cpa)
    assert "sending urn:example:services:ordering/NewOrder (channel A_channel)" in problem
    assert "ebMS2 §10.1.1" in problem and "set syncReplyMode none" in problem


@pytest.mark.parametrize(
    ("settings", "rule"),
    [
        ({"sync_reply_mode": SyncReplyMode.MSH_SIGNALS_ONLY}, '§9.1 "SyncReply MUST NOT be present"'),
        ({"duplicate_elimination": PerMessage.NEVER}, '§9.1 "DuplicateElimination MUST also be present"'),
        ({"ack_requested": PerMessage.NEVER}, '§9 "Reliable Messaging MUST be used'),
    ],
)
def test_message_order_without_its_preconditions_is_refused(settings: dict[str, object], rule: str) -> None:
    # ebMS2 §9.1: "When the MessageOrder element is present, DuplicateElimination MUST also be present and
    # SyncReply MUST NOT be present"; §9: "Reliable Messaging MUST be used when a MessageOrder element is present".
    cpa = make_cpa(a_channel=channel("A", message_order=GUARANTEED, **settings))  # type: ignore[arg-type]
    problems = interaction_problems(cpa)
    assert any(rule in p and "guarantees message order" in p for p in problems), problems


def test_cpa_validate_reports_them_as_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The demo agreement returns signals synchronously (mshSignalsOnly): guaranteeing order there is impossible.
    ordered = demo_bytes().replace(
        b"<tp:MessageOrderSemantics>NotGuaranteed</tp:MessageOrderSemantics>",
        b"<tp:MessageOrderSemantics>Guaranteed</tp:MessageOrderSemantics>",
    )
    path = tmp_path / "ordered-and-sync.xml"
    path.write_bytes(ordered)
    assert main(["cpa", "validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert 'ebMS2 §9.1 "SyncReply MUST NOT be present"' in out and ": ok" not in out
