"""Crash safety on SQLite (docs/design.md §5.6): a process killed with SIGKILL mid-transaction loses no
committed transaction and leaves no part of an uncommitted one."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from msh.store import Store, open_store
from tests.support.store import T0

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 2000  # the child stops by itself after this many transactions
KILL_AFTER = 25  # the parent kills the child inside transaction number KILL_AFTER, its body written

CHILD = textwrap.dedent(
    """
    import hashlib, io, sys
    from datetime import UTC, datetime, timedelta
    from dataclasses import replace
    from cpa.duration import XsDuration
    from msh.engine import OutboundState, OutboundStatus, Reliability
    from msh.store import TimerKind, open_store

    T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
    store = open_store(sys.argv[1], blob_chunk_size=4096)
    reliability = Reliability(3, XsDuration.parse("PT30S"), XsDuration.parse("PT1M"), None, None, False)

    def pending(message_id):
        return OutboundState(message_id, OutboundStatus.PENDING, reliability, 0, None, 0, None)

    def body(i):
        block = hashlib.sha256(str(i).encode()).digest()
        return block * (2048 + i)  # 64 KiB and more: 16+ chunk rows per transaction

    for i in range(int(sys.argv[2])):
        with store.transaction() as tx:
            blob_id = tx.put_blob(io.BytesIO(body(i)))
            print(f"writing {i}", flush=True)
            tx.insert_outbound(
                state=pending(f"m{i}"), cpaid="cpa", conversation_id=f"c{i}", service="s", action="a",
                to_party="p", endpoint_url="https://p.example/", content_type="text/xml",
                body_blob_id=blob_id,
            )
            tx.schedule_timer(f"m{i}", TimerKind.RETRY, T0 + timedelta(seconds=i))
            tx.append_event(at=T0, kind="submitted", message_id=f"m{i}", detail={"i": i})
            if i > 0:
                tx.update_outbound_state(replace(pending(f"m{i - 1}"), attempts=1))
        print(f"commit {i}", flush=True)
    """
)


def _body(i: int) -> bytes:
    return hashlib.sha256(str(i).encode()).digest() * (2048 + i)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_sigkill_mid_transaction_keeps_every_commit_and_no_partial_one(tmp_path: Path) -> None:
    url = str(tmp_path / "crash.db")
    open_store(url).close()  # migrate first, so that the child's time goes to the loop
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, url, str(ROUNDS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert child.stdout is not None
    committed: list[int] = []
    killed = False
    try:
        for line in child.stdout:  # ends at the child's exit: the loop is bounded
            word, number = line.split()
            if word == "commit":
                committed.append(int(number))
            elif word == "writing" and int(number) == KILL_AFTER:
                child.send_signal(signal.SIGKILL)  # inside transaction KILL_AFTER (rarely just after it)
                killed = True
                break
    finally:
        if not killed:
            child.kill()
        child.wait(timeout=30)
    stderr = child.stderr.read() if child.stderr else ""
    assert killed, f"the child ended before transaction {KILL_AFTER}: {stderr}"
    assert child.returncode == -signal.SIGKILL
    assert committed == list(range(KILL_AFTER))

    with open_store(url) as store:
        assert isinstance(store, Store)
        with store.transaction(readonly=True) as tx:
            present = [i for i in range(KILL_AFTER + 2) if tx.get_outbound(f"m{i}") is not None]
            # Every committed transaction is there; at most the one being killed may have made it too.
            assert present in (list(range(KILL_AFTER)), list(range(KILL_AFTER + 1)))
            claimed = {t.message_id for t in tx.list_events(limit=10_000) if t.kind == "submitted"}
            assert claimed == {f"m{i}" for i in present}
            for i in present:
                record = tx.get_outbound(f"m{i}")
                assert record is not None
                with tx.open_blob(record.body_blob_id) as reader:
                    assert reader.read() == _body(i), f"body of m{i} damaged"
                expected_attempts = 1 if i + 1 in present else 0
                assert record.state.attempts == expected_attempts
        with store.transaction() as tx:
            due = tx.claim_due_timers(T0 + timedelta(days=1), "restarted", timedelta(minutes=1), limit=1000)
            assert sorted(t.message_id for t in due) == sorted(f"m{i}" for i in present)
            blobs_count = tx._conn.exec_driver_sql("SELECT count(*) FROM blobs").scalar()  # type: ignore[attr-defined]
            assert blobs_count == len(present)  # no blob of the killed transaction remains
            check = tx._conn.exec_driver_sql("PRAGMA integrity_check").scalar()  # type: ignore[attr-defined]
            assert check == "ok"
