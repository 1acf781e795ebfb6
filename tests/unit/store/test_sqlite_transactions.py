"""On SQLite the store spares its transactions work that changes nothing for their callers: write transactions
run on one connection it keeps out of its pool (msh.store.sql.store; docs/design.md §8), and a savepoint that
begins where the enclosing one began runs no statement (msh.store.sql.transaction)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from msh.store import StoreError, Transaction
from msh.store.sql import SqlStore
from tests.support.store import add_outbound


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    opened = SqlStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        yield opened
    finally:
        opened.close()


def driver_connection(tx: Transaction) -> Any:
    """The sqlite3 connection a transaction of the SQL store runs on."""
    return tx._conn.connection.driver_connection  # type: ignore[attr-defined]


def test_write_transactions_share_one_connection_and_readers_never_take_it(store: SqlStore) -> None:
    with store.transaction() as tx:
        add_outbound(tx, "first@x")
        held = driver_connection(tx)
    with store.transaction() as tx:
        add_outbound(tx, "second@x")
        assert driver_connection(tx) is held
    with store.transaction(readonly=True) as tx:
        assert driver_connection(tx) is not held  # a reader takes a connection of the pool, beside the writer
        assert tx.get_outbound("first@x") is not None and tx.get_outbound("second@x") is not None


def test_a_transaction_that_raises_leaves_nothing_and_the_next_one_begins_clean(store: SqlStore) -> None:
    with store.transaction():
        assert store._held is not None  # taken by the first write transaction
    with pytest.raises(RuntimeError, match="the caller's own failure"), store.transaction() as tx:
        add_outbound(tx, "undone@x")
        raise RuntimeError("the caller's own failure")
    assert store._held is None  # given back to the pool, which rolls it back and resets it
    with store.transaction() as tx:  # BEGIN IMMEDIATE again: no transaction was left open anywhere
        assert tx.get_outbound("undone@x") is None
        add_outbound(tx, "after@x")
    with store.transaction(readonly=True) as tx:
        assert tx.get_outbound("after@x") is not None


def test_a_write_transaction_while_the_held_connection_is_taken_uses_the_pool(store: SqlStore) -> None:
    with store.transaction() as tx:
        held = driver_connection(tx)
    with store._held_lock:  # as while another thread's write transaction runs on it
        with store.transaction() as tx:
            add_outbound(tx, "beside@x")
            assert driver_connection(tx) is not held
        assert store._held is not None and store._held.connection.driver_connection is held
    with store.transaction(readonly=True) as tx:
        assert tx.get_outbound("beside@x") is not None


def test_closing_the_store_while_a_write_transaction_runs_does_not_wait_for_it(tmp_path: Path) -> None:
    store = SqlStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    inside, finish = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def write() -> None:
        try:
            with store.transaction() as tx:
                add_outbound(tx, "last@x")
                inside.set()
                assert finish.wait(10)
        except BaseException as exc:  # handed to the test's thread
            failures.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    assert inside.wait(10)
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(10)
    assert not closer.is_alive(), "close() waited for the write transaction"
    finish.set()
    writer.join(10)
    assert not writer.is_alive() and failures == []
    assert store._held is None  # the transaction gave it back when it ended, as the store was closed
    reopened = SqlStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        with reopened.transaction(readonly=True) as tx:
            assert tx.get_outbound("last@x") is not None  # it committed
    finally:
        reopened.close()


def test_a_savepoint_opened_where_the_enclosing_one_began_runs_no_statement(store: SqlStore) -> None:
    statements: list[str] = []
    with store.transaction() as tx:
        driver_connection(tx).set_trace_callback(statements.append)
        with tx.savepoint(), tx.savepoint():  # the second begins where the first did: no rows changed between
            add_outbound(tx, "first@x")
        with tx.savepoint():
            add_outbound(tx, "second@x")
            with tx.savepoint():  # a row changed since the enclosing one began: a savepoint of its own
                add_outbound(tx, "third@x")
        driver_connection(tx).set_trace_callback(None)
    savepoints = [s for s in statements if "SAVEPOINT" in s]
    assert savepoints == [
        "SAVEPOINT msh_sp1",
        "RELEASE SAVEPOINT msh_sp1",
        "SAVEPOINT msh_sp2",
        "SAVEPOINT msh_sp3",
        "RELEASE SAVEPOINT msh_sp3",
        "RELEASE SAVEPOINT msh_sp2",
    ]


def test_a_connection_that_will_not_open_is_a_store_error_and_the_next_transaction_opens_one(store: SqlStore) -> None:
    def refuse(_dbapi_connection: Any, _record: Any) -> None:
        raise sqlite3.OperationalError("disk I/O error (made up by the test)")

    event.listen(store.engine, "connect", refuse)
    store.engine.dispose()  # no connection is held or pooled yet: the next ones are opened anew
    try:
        for readonly in (False, True):
            with pytest.raises(StoreError, match="made up by the test"), store.transaction(readonly=readonly):
                pass
    finally:
        event.remove(store.engine, "connect", refuse)
    with store.transaction() as tx:  # the held connection's place was given back after the failure
        add_outbound(tx, "after@x")
    assert store._held is not None
