"""``scripts/driver_floor.py`` (``bench_store_steps.py --driver-floor``): the calls of the chosen threads are
recorded in order, by thread, and run again on a fresh store through the driver alone."""

from __future__ import annotations

import sqlite3
import sqlite3.dbapi2
import threading
from pathlib import Path

from msh.store.sql import SqlStore
from msh.store.writer import GroupCommitWriter
from tests.support.scripts import load_script


def _schema(path: Path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, note TEXT)")
    connection.close()


def test_only_the_chosen_threads_calls_are_recorded_in_order_and_the_driver_is_put_back(tmp_path: Path) -> None:
    floor = load_script("driver_floor")
    real = sqlite3.dbapi2.connect
    path = tmp_path / "a.db"
    _schema(path)
    with floor.recording(lambda thread: thread == "chosen") as record:
        connection = sqlite3.dbapi2.connect(str(path), isolation_level=None, check_same_thread=False)

        def work() -> None:
            connection.execute("BEGIN IMMEDIATE")
            connection.cursor().execute("INSERT INTO t VALUES (?, ?)", (1, memoryview(b"x")))
            connection.cursor().executemany("INSERT INTO t VALUES (?, ?)", iter([(2, "b"), (3, "c")]))
            connection.commit()

        worker = threading.Thread(target=work, name="chosen")
        worker.start()
        worker.join()
        connection.execute("SELECT count(*) FROM t").fetchone()  # another thread's: not recorded
        connection.close()
    assert sqlite3.dbapi2.connect is real
    assert list(record.calls) == ["chosen"]
    assert [(kind, sql) for kind, sql, _params in record.calls["chosen"]] == [
        ("execute", "BEGIN IMMEDIATE"),
        ("execute", "INSERT INTO t VALUES (?, ?)"),
        ("executemany", "INSERT INTO t VALUES (?, ?)"),
        ("commit", ""),
    ]
    assert record.calls["chosen"][1][2] == (1, b"x")  # a memoryview is kept as the bytes it showed
    assert record.calls["chosen"][2][2] == [(2, "b"), (3, "c")]  # the rows were kept, not an exhausted iterator

    replayed = floor.replay(record.calls["chosen"], _schema)
    assert (replayed.calls, replayed.failed) == (4, 0)  # on a fresh table: the same keys go in again


def test_a_call_that_fails_in_the_replay_is_counted_and_passed_over() -> None:
    floor = load_script("driver_floor")
    calls = [
        ("execute", "INSERT INTO t VALUES (?, ?)", (1, "a")),
        ("execute", "INSERT INTO t VALUES (?, ?)", (1, "again")),  # the same key: refused
        ("execute", "INSERT INTO missing VALUES (1)", ()),
        ("execute", "SELECT count(*) FROM t", ()),
    ]
    replayed = floor.replay(calls, _schema)
    assert (replayed.calls, replayed.failed) == (4, 2)


def test_a_store_writers_transactions_replay_without_a_failure(tmp_path: Path) -> None:
    """Recorded through the store as the benchmark records it (SQLAlchemy opens the connections), the writer's
    BEGIN, savepoints, statements, journal and COMMIT run again on a fresh store of the same schema."""
    floor = load_script("driver_floor")
    from datetime import UTC, datetime

    from msh.store.events import EventKind

    with floor.recording(lambda thread: thread == "writer-a") as record:
        store = SqlStore.open(str(tmp_path / "store.db"))
        writer = GroupCommitWriter(store, name="writer-a")
        try:
            for n in range(3):
                writer.call(
                    lambda tx, n=n: tx.append_event(
                        at=datetime(2026, 1, 1, tzinfo=UTC), kind=EventKind.SUBMITTED, message_id=f"m{n}"
                    )
                )
        finally:
            writer.close()
            store.close()
    (calls,) = record.calls.values()
    kinds = [kind for kind, _sql, _params in calls]
    assert kinds.count("commit") == 3 and "executemany" in kinds
    replayed = floor.replay(calls, lambda path: SqlStore.open(str(path)).close())
    assert replayed.failed == 0 and replayed.calls == len(calls)
