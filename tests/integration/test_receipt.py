"""Signed receipts between two real MSH processes (ebMS2 §6.3.2.5): partners A and B run ``msh serve`` over
HTTPS with mutual TLS under the sample agreement with signed acknowledgments asked for; a message submitted
to A's store is acknowledged with a signed receipt, which ``msh status MESSAGE_ID --receipt FILE`` writes out.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from lxml import etree

from msh.cli import main
from msh.engine import OutboundStatus
from msh.faults.pair import ACTION, PARTY_B, SERVICE, make_pair
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import load_settings
from msh.runtime.msh import Msh

DS = "http://www.w3.org/2000/09/xmldsig#"
EB = "http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd"


def test_msh_status_writes_the_signed_receipt_and_says_when_there_is_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = make_pair(tmp_path / "pair", proxy=False)
    text = pair.cpa.read_text(encoding="utf-8")
    old = 'tp:ackRequested="always" tp:ackSignatureRequested="never"'
    assert old in text
    pair.cpa.write_text(text.replace(old, 'tp:ackRequested="always" tp:ackSignatureRequested="always"'), "utf-8")
    config = str(pair.a.config)
    try:
        pair.b.start()
        pair.a.start()
        msh = Msh(load_settings(pair.a.config, env={}))
        try:
            submission = Submission(PARTY_B, SERVICE, ACTION, (Payload(b"<order id='r1'/>", "application/xml"),))
            message_id = msh.submit(submission)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                stored = msh.status(message_id)
                if stored is not None and stored.state.status.final:
                    break
                time.sleep(0.1)
            assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        finally:
            msh.close()
    finally:
        pair.stop()

    receipt = tmp_path / "receipt.xml"
    assert main(["status", "--config", config, "--receipt", str(receipt), message_id]) == 0
    assert f"{message_id}: signed receipt (" in capsys.readouterr().out
    root = etree.fromstring(receipt.read_bytes())
    assert root.find(f".//{{{DS}}}Signature") is not None
    acknowledgment = root.find(f".//{{{EB}}}Acknowledgment")
    assert acknowledgment is not None
    assert acknowledgment.findtext(f"{{{EB}}}RefToMessageId") == message_id
    assert len(acknowledgment.findall(f"{{{DS}}}Reference")) == 2  # the envelope and the payload

    # Never over an existing file; one MESSAGE_ID only; a clear error where no receipt is kept.
    assert main(["status", "--config", config, "--receipt", str(receipt), message_id]) == 2
    assert "File exists" in capsys.readouterr().err
    assert main(["status", "--config", config, "--receipt", str(tmp_path / "x.xml"), message_id, "other"]) == 2
    assert "--receipt FILE takes one MESSAGE_ID" in capsys.readouterr().err
    assert main(["status", "--config", config, "--receipt", str(tmp_path / "y.xml"), "nope@x"]) == 1
    err = capsys.readouterr().err
    assert "nope@x: unknown" in err and "nothing written" in err
    assert not (tmp_path / "y.xml").exists()
