"""The ``msh`` command line and the demo, on the project's own samples."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from msh.cli import main
from msh.demos.codec import run_demo
from msh.errors import ConfigurationError
from tests.support.json_keys import keys_off_convention

SAMPLES = Path(__file__).resolve().parents[3] / "samples" / "messages"


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
    assert result["messageHeader"]["action"] == "Ping"
    assert {w["errorCode"] for w in result["warnings"]} == {"MimeProblem", "OtherXml"}
    assert result["strictErrors"][0]["errorCode"] == "MimeProblem"


def test_inspect_hostile_and_missing_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["message", "inspect", "--json", str(SAMPLES / "hostile-xxe.xml")]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "rejected"
    assert result["errors"][0]["errorCode"] == "OtherXml"
    assert "DTD" in result["errors"][0]["description"]
    # A file that is not there is a usage error, said in one line before any report.
    assert main(["message", "inspect", "--json", str(SAMPLES / "hostile-xxe.xml"), str(tmp_path / "nope")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"msh message inspect: error: {tmp_path / 'nope'}: no such file; check the path\n"


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


# ------------------------------------------------------------------------------------ bad input: one line

CONFIG = Path(__file__).resolve().parents[3] / "samples" / "config"
PARTY_A_CONFIG = str(CONFIG / "party-a.toml")
PARTY_B_CONFIG = str(CONFIG / "party-b.toml")
SEND = ["send", "--config", PARTY_A_CONFIG, "--to", "987654321", "--service", "urn:example:services:ordering"]


def one_line(err: str) -> str:
    """The single line on stderr (no traceback)."""
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def store_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each command's store is a fresh SQLite file in tmp_path (MSH_STORE_URL)."""
    store = tmp_path / "store.sqlite"
    monkeypatch.setenv("MSH_STORE_URL", str(store))
    return store


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["inbox", "--config", PARTY_B_CONFIG, "--limit", "0"], "msh inbox: error: argument --limit: 0 is too small"),
        (["inbox", "--limit", "-2"], "argument --limit: -2 is too small; give a whole number of at least 1"),
        (["inbox", "--limit", "ten"], "argument --limit: 'ten' is not a whole number"),
        ([*SEND, "--action", "NewOrder", "--wait", "-1"], "argument --wait: -1 is not a number of seconds"),
        ([*SEND, "--action", " "], "msh send: error: argument --action: must not be empty"),
        (["demo", "--messages", "0"], "msh demo: error: argument --messages: 0 is too small"),
        (["demo", "--loss", "1"], "argument --loss: 1 is not a rate from 0 up to 1"),
        (["frobnicate"], "msh: error: argument COMMAND: invalid choice: 'frobnicate'"),
        ([], "msh: error: the following arguments are required: COMMAND"),
        (["status", "--config", PARTY_A_CONFIG], "msh status: error: the following arguments are required"),
    ],
)
def test_usage_errors_are_one_line_with_status_2(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    line = one_line(capsys.readouterr().err)
    assert expected in line and line.endswith("--help)")


@pytest.mark.usefixtures("store_env")
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([*SEND, "--action", "NewOrder", "--ttl", "tomorrow"], "--ttl tomorrow: not a date and time; give a date"),
        ([*SEND, "--action", "NewOrder", "--ttl", "2030-01-01T12:00:00"], "the time zone is missing (Z for UTC"),
        ([*SEND, "--action", "NewOrder", "--ttl", "2001-01-01T12:00:00Z"], "that time has passed"),
        ([*SEND, "--action", "NewOrder", "--ttl=-P1M"], "--ttl -P1M: the duration must be positive"),
        ([*SEND, "--action", "NewOrder", "--ttl", "P1X"], "--ttl P1X: not a usable duration"),
        (["message", "inspect", "/no/such/capture.http"], "/no/such/capture.http: no such file; check the path"),
        (["message", "inspect", str(CONFIG)], "is a folder; give the message files in it"),
        ([*SEND, "--action", "NewOrder", "--payload", "/no/such/file"], "--payload /no/such/file: /no/such/file does"),
        ([*SEND, "--action", "NewOrder", "--payload", f"{PARTY_A_CONFIG}=xml"], "'xml' is not a MIME type"),
        ([*SEND, "--action", "NewOrder", "--cpa-id", "nope"], "--cpa-id nope: no such agreement is loaded; the agr"),
        (
            [*SEND, "--action", "Refund"],
            "what this party can send to it: cpa-demo-a-b: --service urn:example:services:ordering --action NewOrder",
        ),
        (
            ["send", "--config", PARTY_A_CONFIG, "--to", "555", "--service", "s", "--action", "a"],
            "--to 555: no partner of the loaded agreements has that PartyId; the partners are: 987654321",
        ),
        (["status", "--config", "/no/such.toml", "m@x"], "the configuration file '/no/such.toml' does not exist"),
        (["cpa", "list", "--config", str(CONFIG)], "cannot be read"),
        (["demo", "--transport", "smtp", "--multihop"], "--transport smtp runs the two-partner demo over that"),
        (
            ["demo", "--transport", "amqp", "--amqp-url", "amqp://127.0.0.1:1"],
            "msh demo --transport amqp: no broker answers at 127.0.0.1:1",
        ),
    ],
)
def test_user_errors_are_one_line_with_status_2(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and expected in err, err
    assert err.startswith(f"msh {argv[0]}") and ": error: " in err


def test_a_store_in_a_missing_folder_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MSH_STORE_URL", "/no/such/folder/store.sqlite")
    assert main(["inbox", "--config", PARTY_B_CONFIG]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "the folder '/no/such/folder' does not exist; create it" in err


def test_take_onto_a_file_is_one_line(store_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "taken"
    file.write_text("the user's file")
    assert main(["inbox", "--config", PARTY_B_CONFIG, "--take", str(file)]) == 2
    line = one_line(capsys.readouterr().err)
    assert line == f"msh inbox: error: --take {file}: that is a file, not a folder; give a folder (created if missing)"
    assert file.read_text() == "the user's file"


def test_debug_adds_the_traceback(store_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "taken"
    file.write_text("x")
    for argv in (["--debug", "inbox", "--take", str(file)], ["inbox", "--take", str(file), "--debug"]):
        assert main([*argv, "--config", PARTY_B_CONFIG]) == 2
        err = capsys.readouterr().err
        assert err.startswith("Traceback") and "ConfigurationError" in err
        assert err.strip().splitlines()[-1].startswith("msh inbox: error: --take")


def test_a_bug_is_one_line_with_status_70_and_ctrl_c_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from msh.cli import agreements

    def bug(args: object) -> int:
        raise RuntimeError("something impossible")

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(agreements, "_list", bug)
    assert main(["cpa", "list"]) == 70
    line = one_line(capsys.readouterr().err)
    assert line.startswith(
        "msh cpa list: internal error: RuntimeError: something impossible; run it again with --debug"
    )
    monkeypatch.setattr(agreements, "_list", interrupted)
    assert main(["cpa", "list"]) == 130
    assert one_line(capsys.readouterr().err) == "msh cpa list: interrupted"


def test_the_demo_refuses_busy_ports_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["demo", "--messages", "1", "--ports", f"{port},{port + 1},{port + 2}"]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("msh demo: error: the demo needs ports") and f"and {port} is in use" in line
    assert "--ports A,B,PROXY, or leave --ports out for free ones" in line


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["demo", "--ports", "8081,8082"], "argument --ports: '8081,8082' is not three ports A,B,PROXY"),
        (["demo", "--ports", "1,2,99999"], "is not three ports A,B,PROXY"),
        (["demo", "--ports", "9001,9001,9002"], "--ports 9001,9001,9002: give three different ports (A,B,PROXY)"),
        (["demo", "--multihop", "--ports", "1,2,3"], "--ports is for the two-partner demo"),
    ],
)
def test_bad_demo_ports_are_one_line(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    with contextlib.suppress(SystemExit):
        assert main(argv) == 2
    assert expected in one_line(capsys.readouterr().err)


def test_the_demo_picks_free_ports_when_8081_is_taken() -> None:
    """The demo's default ports are free ones, whatever holds the sample ports (8081, 8082, 18082)."""
    import socket

    from msh.demos.exchange import check_ports_free, choose_ports

    with contextlib.ExitStack() as stack:
        for sample in (8081, 8082, 18082):
            holder = stack.enter_context(socket.socket())
            with contextlib.suppress(OSError):  # already taken by something else: just as good
                holder.bind(("127.0.0.1", sample))
                holder.listen()
        chosen = choose_ports()
        ports = (chosen.a, chosen.b, chosen.proxy)
        assert len(set(ports)) == 3 and not {8081, 8082, 18082} & set(ports)
        check_ports_free(ports)  # each can be bound now
        with pytest.raises(ConfigurationError, match="8081"):
            choose_ports((8081, ports[1], ports[2]))


def test_serve_on_a_busy_port_is_one_line(
    store_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        monkeypatch.setenv("MSH_SERVER_PORT", str(port))
        assert main(["serve", "--config", PARTY_A_CONFIG, "--log-level", "error"]) == 2
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use; stop what uses that port" in line
    assert "msh: stopped" not in captured.out  # it never started
    assert not store_env.exists()  # the port is checked before the store is opened


def test_send_wait_without_a_running_msh_says_nothing_was_transmitted(
    store_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*SEND, "--action", "NewOrder", "--wait", "0.3"]) == 3
    captured = capsys.readouterr()
    message_id = captured.out.strip()
    line = one_line(captured.err)
    assert line.startswith(f"{message_id}: not transmitted within 0.3 s: is msh serve running on this store")


# --------------------------------------------------------------------------------------- inbox --take


def _receive(store: Path, message_id: str, payload: bytes) -> None:
    """Store a message from A in B's store ``store`` (as B's endpoint would)."""
    from msh.runtime.msh import Msh
    from tests.support.endpoint import party_b_settings, valid_message

    msh = Msh(party_b_settings(store.parent), store=None)
    try:
        content_type, body = valid_message(msh, message_id, payload=payload)
        reply, _ = msh.receive_http(body, content_type)
        assert reply.status == 200
    finally:
        msh.close()


def test_two_stores_taking_into_one_folder_never_overwrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from msh.runtime.take import METADATA
    from msh.store import InboxState, open_store

    out = tmp_path / "taken"
    first, second, rebuilt = (tmp_path / name / "party-b.sqlite" for name in ("first", "second", "rebuilt"))
    _receive(first, "one@party-a.example", b"<order n='1'/>")
    _receive(second, "two@party-a.example", b"<order n='2'/>")
    # A rebuilt store received a message under a MessageId already taken, with other content.
    _receive(rebuilt, "one@party-a.example", b"<order n='1' changed='yes'/>")
    for store in (first, second):
        monkeypatch.setenv("MSH_STORE_URL", str(store))
        assert main(["inbox", "--config", PARTY_B_CONFIG, "--take", str(out)]) == 0
    capsys.readouterr()
    monkeypatch.setenv("MSH_STORE_URL", str(rebuilt))
    assert main(["inbox", "--config", PARTY_B_CONFIG, "--take", str(out)]) == 1
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert line.startswith(f"msh inbox: one@party-a.example not taken, not acknowledged: {out / 'one@party-a.example'}")
    assert "0 message(s) taken" in captured.out and "1 refused" in captured.out

    assert sorted(p.name for p in out.iterdir()) == ["one@party-a.example", "two@party-a.example"]
    for name, payload in (("one@party-a.example", b"<order n='1'/>"), ("two@party-a.example", b"<order n='2'/>")):
        meta = json.loads((out / name / METADATA).read_text())
        assert meta["messageId"] == name
        assert (out / name / meta["payloads"][0]["file"]).read_bytes() == payload
    for store, state in (
        (first, InboxState.ACKNOWLEDGED_BY_APP),
        (second, InboxState.ACKNOWLEDGED_BY_APP),
        (rebuilt, InboxState.NEW),
    ):
        with open_store(str(store), migrate=False) as opened, opened.transaction(readonly=True) as tx:
            assert [e.state for e in tx.inbox_list(None)] == [state]


def test_inbox_lists_what_waits_for_the_application_and_take_reports_in_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from msh.runtime.config import load_settings
    from msh.runtime.msh import Msh

    store = tmp_path / "b" / "party-b.sqlite"
    _receive(store, "fetched@party-a.example", b"<order n='1'/>")
    _receive(store, "new@party-a.example", b"<order n='2'/>")
    monkeypatch.setenv("MSH_STORE_URL", str(store))
    msh = Msh(load_settings(PARTY_B_CONFIG))
    try:
        first = msh.inbox()[0]
        msh.fetch(first.id).close()  # an application fetched it and died before acknowledging
    finally:
        msh.close()
    assert main(["inbox", "--config", PARTY_B_CONFIG, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert keys_off_convention(listed) == []
    # one vocabulary with the REST interface: both wait for the application; the fetched one says when
    assert [(e["messageId"], e["state"], e["deliveredAt"] is not None) for e in listed] == [
        ("fetched@party-a.example", "available", True),
        ("new@party-a.example", "available", False),
    ]
    out = tmp_path / "taken"
    assert main(["inbox", "--config", PARTY_B_CONFIG, "--take", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert keys_off_convention(report) == []
    assert keys_off_convention(json.loads((out / "new@party-a.example" / "message.json").read_text())) == []
    assert [(r["messageId"], r["outcome"], r["folder"]) for r in report] == [
        ("fetched@party-a.example", "taken", str(out / "fetched@party-a.example")),
        ("new@party-a.example", "taken", str(out / "new@party-a.example")),
    ]
    assert main(["inbox", "--config", PARTY_B_CONFIG]) == 0
    assert capsys.readouterr().out.strip() == "0 message(s)"


def test_inbox_says_how_many_are_held_for_their_turn_and_held_lists_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # ebMS2 §9.1.1: a message held for its turn is not passed to the application (not listed as waiting, never
    # taken), but the operator sees it.
    from msh.store import open_store
    from tests.support.store import add_inbound

    store = tmp_path / "b" / "party-b.sqlite"
    _receive(store, "new@party-a.example", b"<order n='1'/>")
    with open_store(str(store)) as opened, opened.transaction() as tx:
        add_inbound(tx, "held@party-a.example", deliver=False, hold=True, sequence_number=5)
        gone = add_inbound(tx, "gone@party-a.example", deliver=False, hold=True, sequence_number=6)
        tx.abandon_held(gone.id)
    monkeypatch.setenv("MSH_STORE_URL", str(store))
    assert main(["inbox", "--config", PARTY_B_CONFIG]) == 0
    out = capsys.readouterr().out
    assert "new@party-a.example" in out and "held@party-a.example" not in out
    assert "1 more held for their turn" in out and "msh inbox --held" in out
    assert main(["inbox", "--config", PARTY_B_CONFIG, "--held", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted((e["messageId"], e["state"]) for e in listed) == [
        ("gone@party-a.example", "abandoned"),
        ("held@party-a.example", "held"),
    ]
    taken = tmp_path / "taken"
    assert main(["inbox", "--config", PARTY_B_CONFIG, "--take", str(taken)]) == 0
    assert sorted(p.name for p in taken.iterdir()) == ["new@party-a.example"]
