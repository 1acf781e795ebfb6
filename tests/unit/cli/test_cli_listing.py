"""``msh messages``, ``msh history`` and ``msh --version``, and the one inbox vocabulary of ``msh inbox``, on
the sample configuration's stores (no server runs)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from msh.cli import main
from tests.support.json_keys import keys_off_convention
from tests.unit.cli.test_cli import PARTY_A_CONFIG, PARTY_B_CONFIG, SEND, _receive, one_line

B = ["--config", PARTY_B_CONFIG]


@pytest.fixture
def b_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """B's store holding two received messages, the first rejected by an application through REST."""
    from msh.api.inbox_ops import reject_unit
    from msh.store import open_store

    store = tmp_path / "b" / "party-b.sqlite"
    _receive(store, "one@party-a.example", b"<order n='1'/>")
    _receive(store, "two@party-a.example", b"<order n='2'/>")
    with open_store(str(store)) as opened, opened.transaction() as tx:
        entry = next(e for e in tx.inbox_list(None) if e.message_id == "one@party-a.example")
        reject_unit(entry.id, "billing", datetime.now(UTC), "unknown customer")(tx)  # what POST .../reject does
    monkeypatch.setenv("MSH_STORE_URL", str(store))
    return store


def test_a_message_rejected_through_rest_is_rejected_in_msh_inbox(
    b_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inbox", *B, "--all", "--json"]) == 0
    listed = {e["messageId"]: e["state"] for e in json.loads(capsys.readouterr().out)}
    assert listed == {"one@party-a.example": "rejected", "two@party-a.example": "available"}
    assert main(["inbox", *B, "--all"]) == 0
    out = capsys.readouterr().out
    assert "rejected" in out and "acknowledged-by-app" not in out


def test_messages_lists_newest_first_with_the_same_statuses(b_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["messages", *B, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert keys_off_convention(printed) == []
    rows = printed["messages"]
    assert [(r["messageId"], r["direction"], r["status"]) for r in rows] == [
        ("two@party-a.example", "in", "available"),
        ("one@party-a.example", "in", "rejected"),
    ]
    assert rows[1]["lastError"] == "unknown customer" and rows[1]["cpaId"] == "cpa-demo-a-b"
    assert rows[0]["size"] > 0 and rows[0]["partner"].endswith(":123456789")
    assert printed["nextCursor"] is None
    assert main(["messages", *B]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == [
        "CREATED",
        "DIR",
        "STATUS",
        "PARTNER",
        "CPA",
        "SERVICE",
        "/",
        "ACTION",
        "TRIES",
        "SIZE",
        "MESSAGE",
        "ID",
    ]
    assert "    last error: unknown customer" in out and "2 message(s), newest first" in out


def test_messages_pages_with_the_cursor_it_prints(b_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["messages", *B, "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "two@party-a.example" in out and "one@party-a.example" not in out
    cursor = out.strip().splitlines()[-1].removeprefix("more: the same command with --cursor ")
    assert main(["messages", *B, "--limit", "1", "--cursor", cursor, "--json"]) == 0
    page = json.loads(capsys.readouterr().out)
    assert [r["messageId"] for r in page["messages"]] == ["one@party-a.example"] and page["nextCursor"] is None


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--status", "rejected"], ["one@party-a.example"]),
        (["--direction", "out"], []),
        (["--direction", "in", "--action", "NewOrder"], ["two@party-a.example", "one@party-a.example"]),
        (["--cpa-id", "other"], []),
        (["--partner", "123456789", "--status", "available"], ["two@party-a.example"]),
        (["--since", "2999-01-01"], []),
        (["--until", "2999-01-01T00:00:00+02:00"], ["two@party-a.example", "one@party-a.example"]),
    ],
)
def test_messages_filters(
    b_store: Path, capsys: pytest.CaptureFixture[str], options: list[str], expected: list[str]
) -> None:
    assert main(["messages", *B, *options, "--json"]) == 0
    assert [r["messageId"] for r in json.loads(capsys.readouterr().out)["messages"]] == expected


def test_sent_messages_are_listed_with_their_attempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MSH_STORE_URL", str(tmp_path / "a.sqlite"))
    assert main([*SEND, "--action", "NewOrder"]) == 0
    message_id = capsys.readouterr().out.strip()
    assert main(["messages", "--config", PARTY_A_CONFIG, "--direction", "out", "--status", "pending", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["messages"]
    assert main(["status", "--config", PARTY_A_CONFIG, message_id, "--json"]) == 0
    (status,) = json.loads(capsys.readouterr().out)
    assert (row["messageId"], row["direction"], row["kind"]) == (message_id, "out", "own")
    # No msh serve ran: nothing went on the wire yet, as msh status's transmissions say too.
    assert row["attempts"] == len(status["transmissions"]) == 0 and row["status"] == status["status"] == "pending"
    assert row["partner"].endswith(":987654321") and row["action"] == "NewOrder"
    assert main(["history", "--config", PARTY_A_CONFIG, message_id]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{message_id}: ") and " out submitted" in " ".join(out.split())


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--status", "lost"], "msh messages: error: --status lost: no such status; a sent message is pending,"),
        (["--since", "yesterday"], "argument --since: 'yesterday' is not a time: write an ISO 8601 date"),
        (["--since", "2026-02-01", "--until", "2026-01-01"], "--since 2026-02-01T00:00:00Z is not before --until"),
        (["--cursor", "nonsense"], "--cursor: cursor 'nonsense' is not one this listing gave; start again"),
        (["--direction", "sideways"], "argument --direction: invalid choice: 'sideways'"),
    ],
)
def test_bad_options_are_one_line(
    b_store: Path, capsys: pytest.CaptureFixture[str], options: list[str], expected: str
) -> None:
    try:
        status = main(["messages", *B, *options])
    except SystemExit as exc:  # argparse's own checks end the parse
        status = int(str(exc.code))
    assert status == 2
    assert expected in one_line(capsys.readouterr().err)


def test_history_shows_every_event_in_order(b_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", *B, "one@party-a.example"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("one@party-a.example: ") and "event(s), under cpa-demo-a-b" in lines[0]
    kinds = [line.split()[2] for line in lines[1:] if not line.startswith("      ")]
    assert kinds[0] == "received" and kinds[-1] == "app-rejected"
    assert "      reason: unknown customer" in lines
    assert main(["history", *B, "one@party-a.example", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert keys_off_convention(printed) == []
    assert [e["kind"] for e in printed["events"]] == kinds
    assert printed["events"][-1]["detail"]["reason"] == "unknown customer"
    ids = [e["id"] for e in printed["events"]]
    assert ids == sorted(ids)


def test_history_of_an_unknown_message_exits_1(b_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", *B, "nobody@x"]) == 1
    assert "nobody@x: no journal event" in capsys.readouterr().out
    assert main(["history", *B, "nobody@x", "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == {"messageId": "nobody@x", "events": []}


def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"msh (pymsh) {version('pymsh')}"
