"""The Python API with the runtime in this process: callbacks reach the application after the commit."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cpa.duration import XsDuration
from msh.engine import OutboundState, OutboundStatus, Reliability
from msh.errors import ErrorCode, Issue, Severity
from msh.faults.pair import ACTION, PARTY_B, SERVICE, make_pair
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import load_settings
from msh.runtime.msh import Msh
from msh.runtime.serving import bind, serve
from msh.store import InboxState, open_store
from tests.store import add_outbound


@contextmanager
def running(msh: Msh) -> Iterator[None]:
    """``serve`` on a loop in a thread, stopped at the end (bounded)."""
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    up = threading.Event()
    sock = bind("127.0.0.1", msh.settings.server.port)

    def run() -> None:
        loop.run_until_complete(serve(msh.settings, msh, sock=sock, ready=lambda _port: up.set(), stop=stop))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert up.wait(20), "the MSH did not start"
    try:
        yield
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(20)
        loop.close()


def wait_for(predicate: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():  # type: ignore[operator]
        time.sleep(0.05)


def submission(n: int = 0) -> Submission:
    return Submission(PARTY_B, SERVICE, ACTION, (Payload(f"<o n='{n}'/>".encode(), "application/xml"),))


def test_on_delivered_and_on_message_fire_once_per_message(tmp_path: Path) -> None:
    pair = make_pair(tmp_path / "pair", proxy=False)
    delivered: list[str] = []
    failed: list[tuple[str, Issue]] = []
    pair.b.start()
    try:
        msh = Msh(
            load_settings(pair.a.config, env={}),
            on_delivered=delivered.append,
            on_failed=lambda m, i: failed.append((m, i)),
        )
        with running(msh):
            ids = [msh.submit(submission(i)) for i in range(5)]
            wait_for(lambda: len(delivered) == 5, 30)
        msh.close()
    finally:
        pair.stop()
    assert sorted(delivered) == sorted(ids) and failed == []


def test_a_delivery_failure_reaches_the_sending_application(tmp_path: Path) -> None:
    pair = make_pair(
        tmp_path / "pair", retries=1, retry_interval="PT0.3S", first_resend="PT0.3S", http_timeout="PT0.2S", proxy=False
    )
    failed: list[tuple[str, Issue]] = []
    msh = Msh(load_settings(pair.a.config, env={}), on_failed=lambda m, i: failed.append((m, i)))
    with running(msh):  # B never runs
        message_id = msh.submit(submission())
        wait_for(lambda: failed, 20)
    stored = msh.status(message_id)
    msh.close()
    assert [m for m, _ in failed] == [message_id]
    issue = failed[0][1]
    # ebMS2 §6.5.7: no attempt reached the peer -> severity Error.
    assert (issue.error_code, issue.severity) == (ErrorCode.DELIVERY_FAILURE, Severity.ERROR)
    assert stored is not None and stored.state.status is OutboundStatus.FAILED and stored.state.attempts == 2


def test_an_agreement_counting_months_schedules_resends_a_calendar_month_apart(tmp_path: Path) -> None:
    # RetryInterval P1M, PersistDuration P2M: after the first resend (first_resend_timeout PT0.3S) the next
    # one is a month later, from the instant of that resend; the SQLite store keeps P1M as written.
    pair = make_pair(
        tmp_path / "pair", retries=3, retry_interval="P1M", first_resend="PT0.3S", http_timeout="PT0.2S", proxy=False
    )
    pair.cpa.write_text(pair.cpa.read_text().replace(">P1D</tp:PersistDuration>", ">P2M</tp:PersistDuration>"))
    msh = Msh(load_settings(pair.a.config, env={}))
    with running(msh):  # B never runs: every transmission fails
        message_id = msh.submit(submission())
        wait_for(lambda: (s := msh.status(message_id)) is not None and s.state.attempts == 2, 20)
    stored = msh.status(message_id)
    msh.close()
    assert stored is not None and stored.state.attempts == 2 and stored.state.status is OutboundStatus.AWAITING_ACK
    assert (stored.state.reliability.retry_interval, stored.state.reliability.persist_duration) == (
        XsDuration(months=1),
        XsDuration(months=2),
    )
    assert stored.state.first_sent_at is not None and stored.state.next_due_at is not None
    second = stored.state.next_due_at
    # The second transmission happened 0.3 s (or a little more) after the first; the timer is P1M after it.
    assert XsDuration(months=1).add_to(stored.state.first_sent_at) < second
    assert second < XsDuration(months=1).add_to(stored.state.first_sent_at + timedelta(seconds=20))
    with sqlite3.connect(pair.a.store) as db:
        assert db.execute("SELECT retry_interval, persist_duration FROM outbound_messages").fetchall() == [
            ("P1M", "P2M")
        ]


def test_the_inbox_hands_a_message_over_until_the_application_acknowledges_it(tmp_path: Path) -> None:
    pair = make_pair(tmp_path / "pair", proxy=False)
    pair.a.start()
    try:
        received: list[tuple[int, str]] = []
        b = Msh(load_settings(pair.b.config, env={}), on_message=lambda i, m: received.append((i, m)))
        sender = Msh(load_settings(pair.a.config, env={}))
        with running(b):
            message_id = sender.submit(submission(7))
            wait_for(lambda: received, 30)
        sender.close()
        [entry] = b.inbox()
        assert received == [(entry.id, message_id)]
        got = b.fetch(entry.id)
        try:
            assert got.envelope.message_id == message_id
            assert got.message.payloads[0].body.read_bytes() == b"<o n='7'/>"
        finally:
            got.close()
        assert [e.state for e in b.inbox(None)] == [InboxState.DELIVERED_TO_APP]
        assert b.inbox() == []  # no longer new
        assert b.ack(entry.id).state is InboxState.ACKNOWLEDGED_BY_APP
        b.close()
    finally:
        pair.stop()


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_engine_state_survives_the_trip_through_the_store(tmp_path: Path, kind: str) -> None:
    t0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    r = Reliability(
        3,
        XsDuration.parse("PT5S"),
        XsDuration.parse("PT2S"),
        XsDuration.parse("P1M"),  # months survive the trip
        t0 + timedelta(hours=1),
        True,
        "urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH",
    )
    issue = Issue(ErrorCode.DELIVERY_FAILURE, Severity.WARNING, "no Acknowledgment after 4 transmissions")
    state = OutboundState("m@x", OutboundStatus.FAILED, r, 4, t0, True, None, issue)
    with open_store("memory:" if kind == "memory" else str(tmp_path / "s.sqlite")) as store:
        with store.transaction() as tx:
            add_outbound(tx, "m@x", state=state)
        with store.transaction(readonly=True) as tx:
            stored = tx.get_outbound("m@x")
    assert stored is not None
    assert stored.state == state
