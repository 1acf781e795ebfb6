"""A SQL store's transactions begin on the driver's connection (msh.store.sql.connect): what the database
answers there reaches the caller as the store's error, like any other statement's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from msh.store import StoreError
from msh.store.sql import SqlStore
from tests.support.store import add_outbound


def test_a_busy_database_at_begin_is_a_store_error_and_the_store_goes_on(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    holder, other = SqlStore.open(url), SqlStore.open(url)

    def short_wait(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA busy_timeout=50")  # not the store's 30 s: the test would wait them out

    event.listen(other.engine, "connect", short_wait)
    other.engine.dispose()  # connections made from now on wait 50 ms
    try:
        with holder.transaction() as tx:  # BEGIN IMMEDIATE: the write lock, until the commit
            add_outbound(tx, "held@x")
            with pytest.raises(StoreError, match="database is locked") as caught, other.transaction():
                pass
            assert f"the store at {other.url} failed" in str(caught.value)
        with other.transaction() as tx:  # the lock is free again: the same store works
            add_outbound(tx, "after@x")
        with other.transaction(readonly=True) as tx:  # a reader takes no write lock (BEGIN, not IMMEDIATE)
            assert tx.get_outbound("held@x") is not None and tx.get_outbound("after@x") is not None
    finally:
        holder.close()
        other.close()


def test_a_reader_begins_beside_a_writer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    writer, reader = SqlStore.open(url), SqlStore.open(url)
    try:
        with writer.transaction() as tx:
            add_outbound(tx, "m@x")
            with reader.transaction(readonly=True) as rtx:  # WAL: the reader sees the last commit, at once
                assert rtx.get_outbound("m@x") is None
        with reader.transaction(readonly=True) as rtx:
            assert rtx.get_outbound("m@x") is not None
    finally:
        writer.close()
        reader.close()
