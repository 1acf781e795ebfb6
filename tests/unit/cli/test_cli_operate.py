"""``msh resend`` and ``msh purge`` on an SQLite store, without a running server (as an operator runs them beside
``msh serve``): what they print, their exit status, and what they leave in the store and its journal."""

from __future__ import annotations

import getpass
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from msh.cli import main
from msh.engine import Evidence, OutboundStatus
from msh.errors import ErrorCode, Issue, Severity
from msh.store import open_store
from msh.store.api import EventKind, TimerKind
from tests.support.json_keys import keys_off_convention
from tests.unit.cli.test_cli import PARTY_A_CONFIG, SEND, one_line

LONG_AGO = datetime.now(UTC) - timedelta(days=60)


@pytest.fixture
def store_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    store = tmp_path / "store.sqlite"
    monkeypatch.setenv("MSH_STORE_URL", str(store))
    return store


def submitted(capsys: pytest.CaptureFixture[str]) -> str:
    assert main([*SEND, "--action", "NewOrder"]) == 0
    return capsys.readouterr().out.strip()


def fail(store: Path, message_id: str) -> None:
    """Make the stored message failed, as its retries ending would (its timers gone, its DeliveryFailure told)."""
    with open_store(str(store)) as opened, opened.transaction() as tx:
        row = tx.get_outbound(message_id)
        assert row is not None
        issue = Issue(ErrorCode.DELIVERY_FAILURE, Severity.ERROR, f"message {message_id}: partner unreachable")
        tx.update_outbound_state(
            replace(
                row.state,
                status=OutboundStatus.FAILED,
                next_due_at=None,
                failure=issue,
                evidence=Evidence.RETRIES_EXHAUSTED,
                attempts=6,
                refused=6,
                first_sent_at=datetime.now(UTC),
            )
        )
        tx.cancel_timers(message_id)


def test_resend_queues_a_failed_message_for_the_server_and_journals_who_asked(
    store_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message_id = submitted(capsys)
    fail(store_env, message_id)
    assert main(["resend", message_id, "--reason", "partner back", "--config", PARTY_A_CONFIG]) == 0
    assert capsys.readouterr().out.strip() == f"{message_id}: resent: sent again as a new attempt series"
    with open_store(str(store_env)) as opened, opened.transaction(readonly=True) as tx:
        row = tx.get_outbound(message_id)
        events = tx.message_events(message_id)
        due = tx.next_timer_due()
    assert row is not None and row.state.status is OutboundStatus.PENDING and row.state.attempts == 1
    assert due is not None  # the queued transmission msh serve's timer loop picks up
    asked = [e for e in events if e.kind == EventKind.RESEND_REQUESTED]
    assert [(e.detail["requestedBy"], e.detail["reason"]) for e in asked] == [(getpass.getuser(), "partner back")]
    # Asked again: it is pending now, not failed: refused with its state, exit status 1.
    assert main(["resend", message_id, "--config", PARTY_A_CONFIG]) == 1
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"{message_id}: refused: it is pending, not failed")


def test_resend_queues_a_transmit_timer(store_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    message_id = submitted(capsys)
    fail(store_env, message_id)
    assert main(["resend", message_id, "--config", PARTY_A_CONFIG]) == 0
    with open_store(str(store_env)) as opened, opened.transaction() as tx:
        claimed = tx.claim_due_timers(datetime.now(UTC) + timedelta(days=1), "test", timedelta(minutes=1))
    assert sorted(t.kind for t in claimed) == sorted([TimerKind.RETRY, TimerKind.TRANSMIT])


def test_resend_json_and_unknown_messages(store_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    message_id = submitted(capsys)
    assert main(["resend", message_id, "nobody@nowhere", "--json", "--config", PARTY_A_CONFIG]) == 1
    results = json.loads(capsys.readouterr().out)
    assert keys_off_convention(results) == []
    assert [(r["messageId"], r["outcome"], r["status"], r["refusal"]) for r in results] == [
        (message_id, "refused", "pending", "not-failed"),
        ("nobody@nowhere", "unknown", None, None),
    ]


def test_resend_needs_a_message_id(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["resend", "--config", PARTY_A_CONFIG])
    assert exc.value.code == 2
    assert "the following arguments are required: MESSAGE_ID" in one_line(capsys.readouterr().err)


def old_delivered(store: Path, message_id: str) -> None:
    """A message delivered two months ago (its PersistDuration, P1D, long passed)."""
    with open_store(str(store), clock=lambda: LONG_AGO) as opened, opened.transaction() as tx:
        row = tx.get_outbound(message_id)
        assert row is not None
        tx.update_outbound_state(
            replace(
                row.state,
                status=OutboundStatus.DELIVERED,
                next_due_at=None,
                attempts=1,
                first_sent_at=LONG_AGO,
                evidence=Evidence.TO_PARTY_ACKNOWLEDGMENT,
            )
        )
        tx.cancel_timers(message_id)


def test_purge_removes_what_has_ended_and_says_how_much_came_back(
    store_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = submitted(capsys)
    waiting = submitted(capsys)  # queued, never transmitted: in flight, never purged
    old_delivered(store_env, done)
    assert main(["purge", "--dry-run", "--config", PARTY_A_CONFIG]) == 0
    out = capsys.readouterr().out
    assert out.startswith("would remove 1 sent and 0 received messages settled before ")
    assert "would come back" in out
    assert main(["purge", "--json", "--config", PARTY_A_CONFIG]) == 0
    report = json.loads(capsys.readouterr().out)
    assert keys_off_convention(report) == []
    assert report["removed"] == {"outbound": 1, "inbound": 0} and report["bytesFreed"] > 0
    assert report["messages"] == [{"direction": "outbound", "messageId": done}]
    with open_store(str(store_env)) as opened, opened.transaction(readonly=True) as tx:
        assert tx.get_outbound(done) is None and tx.get_outbound(waiting) is not None
        assert tx.message_events(done)[-1].kind == EventKind.PURGED  # the journal is kept
    now = datetime.now(UTC).isoformat()
    assert main(["purge", "--before", now, "--config", PARTY_A_CONFIG]) == 0
    assert capsys.readouterr().out.startswith("removed 0 sent and 0 received messages")


def test_purge_refuses_a_time_to_come_and_a_bad_date(store_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert main(["purge", "--before", later, "--config", PARTY_A_CONFIG]) == 2
    assert "that is in the future" in one_line(capsys.readouterr().err)
    with pytest.raises(SystemExit) as exc:
        main(["purge", "--before", "soon", "--config", PARTY_A_CONFIG])
    assert exc.value.code == 2
    assert "'soon' is not a date" in one_line(capsys.readouterr().err)
    with pytest.raises(SystemExit):
        main(["purge", "--before", "2026-01-01T00:00:00", "--config", PARTY_A_CONFIG])
    assert "has no time zone" in one_line(capsys.readouterr().err)
