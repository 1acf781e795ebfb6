"""``msh message inspect`` of messages it rejects or reads only leniently: what it could read, and why not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from msh.cli import main
from tests.unit.codec.test_message import dechunked_capture

SAMPLE = Path(__file__).resolve().parents[3] / "samples" / "messages" / "order-request.http"


def changed_sample(tmp_path: Path, name: str, old: bytes, new: bytes) -> Path:
    data = SAMPLE.read_bytes()
    assert old in data
    path = tmp_path / name
    path.write_bytes(data.replace(old, new, 1))
    return path


def test_a_rejected_message_shows_everything_that_could_be_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = changed_sample(tmp_path, "bad-time.http", b"2026-11-01T09:30:00Z", b"yesterday")
    assert main(["message", "inspect", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (
        "  verdict: rejected (the errors below say why; what follows is what could be read of it, not accepted)"
    )
    assert lines[2:6] == [
        "  read:",
        '    file: HTTP capture with 4 headers, Content-Type multipart/related; type="text/xml"; '
        'boundary="MSH-demo-boundary-1"; start="<soap@a.example>"',
        "    MIME package: 3 parts, the SOAP part <soap@a.example> and 2 payloads",
        "    ebXML header: refused at //Header/MessageHeader/MessageData/Timestamp ('yesterday' is not an "
        "xsd:dateTime (expected e.g. 2002-02-21T12:00:00Z)); what follows was read field by field, as written",
    ]
    # The header as the valid sample shows it, but for the Timestamp, as written.
    assert main(["message", "inspect", str(SAMPLE)]) == 0
    valid = capsys.readouterr().out.splitlines()
    assert lines[6:-2] == [
        line.replace("timestamp: 2026-11-01T09:30:00Z", "timestamp: yesterday") for line in valid[2:]
    ]
    assert "  message id: order-0001@a.example   timestamp: yesterday" in lines
    assert lines[-2:] == [
        "  errors:",
        "    Error OtherXml at //Header/MessageHeader/MessageData/Timestamp: 'yesterday' is not an xsd:dateTime "
        "(expected e.g. 2002-02-21T12:00:00Z)",
    ]

    assert main(["message", "inspect", "--json", str(path)]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "rejected"
    assert [e["location"] for e in result["errors"]] == ["//Header/MessageHeader/MessageData/Timestamp"]
    header = result["messageHeader"]
    assert (header["cpaId"], header["action"], header["timestamp"]) == ("cpa-demo-a-b", "NewOrder", "yesterday")
    assert header["from"]["partyIds"][0]["value"] == "123456789" and header["duplicateElimination"] is True
    assert result["ackRequested"] == [{"actor": "urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH", "signed": False}]
    assert [p["contentId"] for p in result["payloads"]] == ["order@a.example", "scan@a.example"]
    assert len(result["reading"]) == 3


def test_an_envelope_that_is_not_xml_says_how_far_it_got(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = changed_sample(tmp_path, "broken.http", b"</eb:Action>", b"</eb:Acton>")
    assert main(["message", "inspect", str(path)]) == 1
    out = capsys.readouterr().out
    assert "    MIME package: 3 parts, the SOAP part <soap@a.example> and 2 payloads\n" in out
    assert "    SOAP envelope: not well-formed XML at line 2, column " in out and "(line 13 of the file)" in out
    assert "  payload: <scan@a.example> application/octet-stream 4096 bytes" in out
    assert "from:" not in out and "kind:" not in out  # nothing of the envelope could be read


def test_a_capture_saved_de_chunked_is_accepted_with_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nav.http"
    path.write_bytes(dechunked_capture()[0])
    assert main(["message", "inspect", "--json", str(path)]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "accepted-with-warnings"
    assert result["warnings"][0]["errorCode"] == "MimeProblem"
    assert "read as already de-chunked" in result["warnings"][0]["description"]
    assert "read it in lenient mode" in result["strictErrors"][0]["description"]
    assert result["payloads"][0]["contentId"] == "a@x"
