"""The ``msh`` command line and the demo, on the project's own samples."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from msh.cli import main
from msh.demo import run_demo

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "messages"


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "message" in out and "demo" in out
    with pytest.raises(SystemExit):
        main(["message", "inspect", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "verdict" in out and "a header dump: header lines without a request line" in out


def test_console_script_runs() -> None:
    done = subprocess.run([sys.executable, "-m", "msh.cli", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "usage: msh" in done.stdout


def test_inspect_valid_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["message", "inspect", str(SAMPLES / "order-request.http")]) == 0
    out = capsys.readouterr().out
    assert "verdict: valid" in out
    assert "action: NewOrder" in out
    assert "payload: <scan@a.example> application/octet-stream 4096 bytes" in out
    assert "AckRequested(urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH, signed=false)" in out


def test_inspect_quirky_message_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["message", "inspect", "--json", str(SAMPLES / "quirky-ping.http")]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "accepted-with-warnings"
    assert result["message_header"]["action"] == "Ping"
    assert {w["errorCode"] for w in result["warnings"]} == {"MimeProblem", "OtherXml"}
    assert result["strict_errors"][0]["errorCode"] == "MimeProblem"


def test_inspect_hostile_and_missing_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["message", "inspect", "--json", str(SAMPLES / "hostile-xxe.xml"), str(tmp_path / "nope")]) == 1
    results = json.loads(capsys.readouterr().out)
    assert results[0]["verdict"] == "rejected"
    assert results[0]["errors"][0]["errorCode"] == "OtherXml"
    assert "DTD" in results[0]["errors"][0]["description"]
    assert results[1]["verdict"] == "unreadable"


def test_demo_round_trips_every_sample(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_demo() == 0
    out = capsys.readouterr().out
    assert "0 failed" in out and "1 rejected cleanly" in out
    assert out.count("round trip: ok") == 5


def test_demo_without_samples_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_demo(str(tmp_path)) == 1
    assert "no sample messages" in capsys.readouterr().out


def test_inspect_reads_a_header_dump(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # The sample capture saved the way other tools save them: headers with no request line, no space after
    # the colon, the first MIME boundary right after the last header line.
    raw = (SAMPLES / "order-request.http").read_bytes()
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = [line.replace(b": ", b":", 1) for line in head.split(b"\r\n")[1:]]
    assert body.startswith(b"--") and any(line.lower().startswith(b"content-type:multipart/related") for line in lines)
    dump = tmp_path / "order-request.txt"
    dump.write_bytes(b"\r\n".join(lines) + b"\r\n" + body)
    assert main(["message", "inspect", str(dump), str(SAMPLES / "order-request.http")]) == 0
    dumped, original = capsys.readouterr().out.split("\n\n")
    assert "verdict: valid" in dumped and "action: NewOrder" in dumped
    assert "payload: <scan@a.example> application/octet-stream 4096 bytes" in dumped
    assert dumped.splitlines()[1:] == original.splitlines()[1:]  # the same message, read the same way
