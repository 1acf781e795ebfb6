"""Every key of the JSON the command line prints is camelCase, as the README and the REST API spell them:
``msh message inspect --json`` and ``msh message verify --json`` over valid, warned and rejected files,
``msh status --json``, ``msh ping --json`` and ``msh status --remote --json``. (``msh inbox --json`` is
walked in test_cli.py, a status with transmissions in tests/unit/runtime/test_attempts.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from msh.cli import main
from msh.ebms.errorlist import soap_fault
from msh.ebms.message import build_message
from msh.errors import EnvelopeError
from tests.support.json_keys import count_keys, keys_off_convention
from tests.support.security import certificate, demo_agreement_bytes, signed_sample_capture
from tests.unit.codec.test_message import dechunked_capture

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples" / "messages"
PARTY_A_CONFIG = str(ROOT / "samples" / "config" / "party-a.toml")


def test_the_walk_finds_keys_off_the_convention() -> None:
    printed = {"file": "x", "message_header": {"cpaid": "c", "partyIds": [{"Value": 1}]}, "fault": {"faultcode": 1}}
    assert keys_off_convention(printed) == [
        "$.message_header",
        "$.message_header.cpaid",
        "$.message_header.partyIds[0].Value",
        "$.fault.faultcode",
    ]
    assert keys_off_convention({"cpaId": 1, "refToMessageId": [{"sha256": 2}], "contentType": None}) == []


@pytest.fixture
def message_files(tmp_path: Path) -> list[Path]:
    """The sample messages (valid, accepted with warnings, rejected) and more: rejected in each way inspect
    tells apart, a capture saved de-chunked, a SOAP Fault, a signed message."""
    sample = (SAMPLES / "order-request.http").read_bytes()
    made = {
        "bad-time.http": sample.replace(b"2026-11-01T09:30:00Z", b"yesterday", 1),
        "not-xml.http": sample.replace(b"</eb:Action>", b"</eb:Acton>", 1),
        "soap-part-png.http": sample.replace(b'Content-Type: text/xml; charset="UTF-8"', b"Content-Type: image/png"),
        "no-scan-part.http": sample.replace(b"cid:order@a.example", b"cid:missing@a.example", 1),
        "nav.http": dechunked_capture()[0],
        "fault.xml": build_message(soap_fault(EnvelopeError("the envelope is not XML", location="/")))[1],
        "signed.http": signed_sample_capture("party A", certificate("party A")),
    }
    for name, data in made.items():
        (tmp_path / name).write_bytes(data)
    samples = sorted(p for p in SAMPLES.iterdir() if p.suffix != ".py")  # not the data package's __init__.py
    return samples + [tmp_path / name for name in made]


def test_inspect_prints_camel_case_keys_for_every_verdict(
    message_files: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["message", "inspect", "--json", *map(str, message_files)]) == 1
    results = json.loads(capsys.readouterr().out)
    assert {r["verdict"] for r in results} == {"valid", "accepted-with-warnings", "rejected"}
    assert sum(1 for r in results if r["verdict"] == "rejected" and "messageHeader" in r) >= 2
    assert any("fault" in r for r in results) and any(r.get("strictErrors") for r in results)
    assert count_keys(results) > 500
    assert keys_off_convention(results) == []
    for path in message_files:  # one file: one object, not a list
        main(["message", "inspect", "--json", str(path)])
        assert keys_off_convention(json.loads(capsys.readouterr().out)) == []


def test_verify_prints_camel_case_keys(
    message_files: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["message", "verify", "--keyinfo", "--json", *map(str, message_files)]) == 1
    results = json.loads(capsys.readouterr().out)
    assert [r["verified"] for r in results].count(True) == 1  # the signed one
    assert keys_off_convention(results) == []
    cpa = tmp_path / "cpa.xml"
    cpa.write_bytes(demo_agreement_bytes({"A_Cert": certificate("party A")}))
    assert main(["message", "verify", "--cpa", str(cpa), "--json", *map(str, message_files)]) == 1
    results = json.loads(capsys.readouterr().out)
    assert any(r["verified"] for r in results) and any("messageHeader" in r and not r["verified"] for r in results)
    assert keys_off_convention(results) == []


def test_status_prints_camel_case_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MSH_STORE_URL", str(tmp_path / "a.sqlite"))
    send = ["send", "--config", PARTY_A_CONFIG, "--to", "987654321", "--service", "urn:example:services:ordering"]
    assert main([*send, "--action", "NewOrder"]) == 0
    message_id = capsys.readouterr().out.strip()
    assert main(["status", "--config", PARTY_A_CONFIG, "--json", message_id]) == 0
    [shown] = json.loads(capsys.readouterr().out)
    assert (shown["messageId"], shown["cpaId"]) == (message_id, "cpa-demo-a-b")
    assert keys_off_convention(shown) == []


def test_ping_and_status_remote_print_camel_case_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from msh.faults.pair import make_pair

    pair = make_pair(tmp_path / "pair", proxy=False)  # nobody listens at B's endpoint
    config = str(pair.a.config)
    assert main(["ping", "--config", config, "987654321", "--json", "--count", "2", "--interval", "0"]) == 1
    pings = json.loads(capsys.readouterr().out)
    assert [p["ping"] for p in pings] == [1, 2] and not any(p["pong"] for p in pings)
    assert {"messageId", "cpaId", "roundTripMs", "onConnection", "pongMessageId", "httpStatus", "problem"} <= set(
        pings[0]
    )
    assert keys_off_convention(pings) == []
    send = ["send", "--config", config, "--to", "987654321", "--service", "urn:example:services:ordering"]
    assert main([*send, "--action", "NewOrder"]) == 0
    message_id = capsys.readouterr().out.strip()
    assert main(["status", "--config", config, "--remote", "--json", message_id]) == 1
    [remote] = json.loads(capsys.readouterr().out)
    assert (remote["messageId"], remote["messageStatus"], remote["ours"]["status"]) == (message_id, None, "pending")
    assert "connection refused" in remote["problem"]
    assert keys_off_convention(remote) == []
