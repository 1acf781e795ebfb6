"""Bodies over 1 MiB on an SQLite store are files beside the database, out of its write-ahead log
(msh.store.blob_files): durable before the row naming them commits, removed when that row's transaction
rolls back or its deletion commits, swept when a crash left them orphaned, checked when read."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import func, select

from msh.store import SqlStore, Store
from msh.store.blob_files import FILE_THRESHOLD, SWEEP_GRACE, BlobFiles, folder_for
from msh.store.schema import blob_chunks, blobs
from tests.support.store import PatternStream

BIG = 3 * FILE_THRESHOLD + 12345


def _files(db: str) -> list[str]:
    folder = folder_for(Path(db).resolve())
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _age(db: str, seconds: float) -> None:
    """Make every file of the store's folder ``seconds`` old (a crash that long ago)."""
    then = time.time() - seconds
    for name in _files(db):
        os.utime(folder_for(Path(db).resolve()) / name, (then, then))


def _blob_rows(store: SqlStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(blobs)).scalar_one())


@pytest.fixture
def sqlite_store(sqlite_url: str, open_store: Callable[..., Store]) -> SqlStore:
    store = open_store(sqlite_url)
    assert isinstance(store, SqlStore)
    return store


def test_a_large_body_is_one_file_named_by_its_row_and_reads_back(sqlite_url: str, sqlite_store: SqlStore) -> None:
    source = PatternStream(BIG)
    with sqlite_store.transaction() as tx:
        blob_id = tx.put_blob(source)  # type: ignore[arg-type]
        assert tx.blob_size(blob_id) == BIG
        with tx.open_blob(blob_id) as reader:
            assert hashlib.sha256(reader.read()).hexdigest() == source.sha256.hexdigest()
    assert _files(sqlite_url) == [f"{_name(sqlite_store, blob_id)}"]
    with sqlite_store.engine.connect() as conn:
        chunks = conn.execute(select(func.count()).select_from(blob_chunks)).scalar_one()
    assert chunks == 0  # nothing of it in a table, so nothing of it in the WAL
    with sqlite_store.open_blob(blob_id) as reader:
        assert hashlib.sha256(reader.read()).hexdigest() == source.sha256.hexdigest()
    wal = Path(sqlite_url + "-wal")
    assert not wal.exists() or wal.stat().st_size < FILE_THRESHOLD


def test_a_body_of_the_threshold_or_less_stays_chunk_rows(sqlite_url: str, sqlite_store: SqlStore) -> None:
    with sqlite_store.transaction() as tx:
        small = tx.put_blob(bytes(FILE_THRESHOLD))
        streamed = tx.put_blob(PatternStream(FILE_THRESHOLD))  # type: ignore[arg-type]
    assert _files(sqlite_url) == []
    assert sqlite_store.open_blob(small).read() == bytes(FILE_THRESHOLD)
    assert len(sqlite_store.open_blob(streamed).read()) == FILE_THRESHOLD


def _name(store: SqlStore, blob_id: int) -> str:
    with store.engine.connect() as conn:
        return str(conn.execute(select(blobs.c.file).where(blobs.c.id == blob_id)).scalar_one())


def test_a_rolled_back_transaction_leaves_no_file(sqlite_url: str, sqlite_store: SqlStore) -> None:
    with pytest.raises(RuntimeError), sqlite_store.transaction() as tx:
        tx.put_blob(bytes(BIG))
        assert len(_files(sqlite_url)) == 1  # durable before the row commits
        raise RuntimeError("the unit failed")
    assert _files(sqlite_url) == []
    assert _blob_rows(sqlite_store) == 0


def test_a_rolled_back_savepoint_leaves_no_file(sqlite_url: str, sqlite_store: SqlStore) -> None:
    with sqlite_store.transaction() as tx:
        kept = tx.put_blob(bytes(BIG))
        with pytest.raises(RuntimeError), tx.savepoint():
            tx.put_blob(bytes(BIG))
            raise RuntimeError("one unit of a group commit failed")
    assert _files(sqlite_url) == [_name(sqlite_store, kept)]


def test_a_deleted_body_file_goes_once_the_deletion_commits(sqlite_url: str, sqlite_store: SqlStore) -> None:
    with sqlite_store.transaction() as tx:
        blob_id = tx.put_blob(bytes(BIG))
    with pytest.raises(RuntimeError), sqlite_store.transaction() as tx:
        assert tx._delete_unused_blob(blob_id)  # the step retention, purge and requeue_outbound use
        raise RuntimeError("rolled back: the row stays, so must the file")
    assert len(_files(sqlite_url)) == 1
    assert sqlite_store.open_blob(blob_id).read() == bytes(BIG)
    with sqlite_store.transaction() as tx:
        assert tx._delete_unused_blob(blob_id)
    assert _files(sqlite_url) == []


_CRASHING_WRITER = textwrap.dedent(
    """
    import os, sys
    from msh.store import open_store
    store = open_store(sys.argv[1])
    with store.transaction() as tx:
        tx.put_blob(bytes(int(sys.argv[2])))
        os._exit(9)  # killed between the file's write and the row's commit
    """
)


def test_a_crash_before_the_commit_leaves_no_row_and_the_orphan_is_swept(
    sqlite_url: str, open_store: Callable[..., Store]
) -> None:
    open_store(sqlite_url).close()  # migrated
    repo = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", _CRASHING_WRITER, sqlite_url, str(BIG)],
        env={**os.environ, "PYTHONPATH": str(repo)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 9
    assert len(_files(sqlite_url)) == 1  # the orphan: written and synced, its row never committed
    fresh = open_store(sqlite_url)
    assert isinstance(fresh, SqlStore)
    assert _blob_rows(fresh) == 0  # no row names a file that is not there, nor one that is
    assert len(_files(sqlite_url)) == 1  # younger than the grace: another process might still be writing it
    _age(sqlite_url, SWEEP_GRACE + 5)
    again = open_store(sqlite_url)
    assert isinstance(again, SqlStore)
    assert _files(sqlite_url) == []


def test_the_sweep_leaves_a_file_whose_transaction_is_under_way(sqlite_url: str, sqlite_store: SqlStore) -> None:
    files = sqlite_store.files
    assert files is not None
    with sqlite_store.transaction() as tx:
        tx.put_blob(bytes(BIG))
        _age(sqlite_url, SWEEP_GRACE + 5)
        assert files.sweep(lambda names: set()) == []  # locked by this transaction: not an orphan
    assert len(_files(sqlite_url)) == 1
    assert files.sweep(sqlite_store._named_files, now=time.time()) == []  # committed and named: kept


def test_a_damaged_truncated_or_missing_file_fails_the_read(sqlite_url: str, sqlite_store: SqlStore) -> None:
    with sqlite_store.transaction() as tx:
        blob_id = tx.put_blob(bytes(BIG))
    path = folder_for(Path(sqlite_url).resolve()) / _name(sqlite_store, blob_id)
    with path.open("r+b") as f:
        f.seek(BIG // 2)
        f.write(b"\x01")
    with sqlite_store.open_blob(blob_id) as reader, pytest.raises(OSError, match="SHA-256"):
        reader.read()
    os.truncate(path, BIG - 1)
    with (
        sqlite_store.transaction(readonly=True) as tx,
        tx.open_blob(blob_id) as reader,
        pytest.raises(OSError, match=f"{BIG - 1} bytes read, {BIG} recorded"),
    ):
        reader.read()
    path.unlink()
    with pytest.raises(OSError, match="missing"):
        sqlite_store.open_blob(blob_id)


def test_postgresql_keeps_large_bodies_as_chunk_rows(pg_url: str, open_store: Callable[..., Store]) -> None:
    store = open_store(pg_url)
    assert isinstance(store, SqlStore)
    assert store.files is None  # nodes of one PostgreSQL store may share no file system
    with store.transaction() as tx:
        blob_id = tx.put_blob(bytes(BIG))
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(blob_chunks)).scalar_one() == 4
    assert store.open_blob(blob_id).read() == bytes(BIG)


def test_a_name_from_the_row_cannot_leave_the_folder(tmp_path: Path) -> None:
    files = BlobFiles(tmp_path / "x.blobs")
    with pytest.raises(OSError, match="not one this store writes"):
        files.open("../store.db", 1, "0" * 64)


def test_a_reader_whose_file_would_not_open_closes_without_an_error(tmp_path: Path) -> None:
    """The finaliser of an I/O object calls close(), also on a reader whose file never opened (Python 3.13
    reports what close() raises there)."""
    from msh.store.blob_files import _CheckedFile

    with pytest.raises(FileNotFoundError):
        _CheckedFile(tmp_path / "missing", 3, hashlib.sha256(b"abc").hexdigest())
    half_made = _CheckedFile.__new__(_CheckedFile)  # what the finaliser meets after __init__ raised
    half_made.close()
    assert half_made.closed
