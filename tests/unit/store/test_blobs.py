"""Payload bodies are streamed to and from the store in chunks, never held whole in memory."""

from __future__ import annotations

import gc
import hashlib
import io
import tracemalloc
from collections.abc import Callable

import pytest
from sqlalchemy import delete, func, select

from msh.store import SqlStore, Store, StoreError, UnknownBlob
from msh.store.blobs import MAX_CHUNK_SIZE, ChunkReader, iter_chunks
from msh.store.schema import blob_chunks
from tests.support.store import PatternStream

SMALL_CHUNK = 1000


class Trickle(io.RawIOBase):
    """A stream that returns at most ``step`` bytes per read (as sockets and pipes do)."""

    def __init__(self, data: bytes, step: int) -> None:
        super().__init__()
        self._data = data
        self._pos = 0
        self._step = step

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self._step, len(self._data) - self._pos)
        buffer[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


# ------------------------------------------------------------------------------------------- chunking


@pytest.mark.parametrize("size", [0, 1, 999, 1000, 1001, 3005])
def test_iter_chunks_cuts_full_chunks_whatever_the_reads(size: int) -> None:
    data = bytes(i % 251 for i in range(size))
    for source in (data, io.BytesIO(data), Trickle(data, 7)):
        chunks = list(iter_chunks(source, SMALL_CHUNK))  # type: ignore[arg-type]
        assert b"".join(chunks) == data
        assert all(len(c) == SMALL_CHUNK for c in chunks[:-1])
        assert all(0 < len(c) <= SMALL_CHUNK for c in chunks)


def test_iter_chunks_refuses_a_zero_chunk_size() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        list(iter_chunks(b"x", 0))


def test_a_reader_notices_a_missing_chunk_or_a_wrong_size() -> None:
    chunks = [b"abc", b"def"]
    with pytest.raises(OSError, match="chunk 1 of 2 is missing"):
        io.BufferedReader(ChunkReader(lambda seq: chunks[0] if seq == 0 else None, 2, 6)).read()
    with pytest.raises(OSError, match="5 bytes read, 6 recorded"):
        io.BufferedReader(ChunkReader(lambda seq: [b"abc", b"de"][seq], 2, 6)).read()


# ------------------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("size", [0, 1, SMALL_CHUNK - 1, SMALL_CHUNK, SMALL_CHUNK + 1, 3 * SMALL_CHUNK + 5])
def test_blobs_read_back_byte_for_byte(size: int, make_store: Callable[..., Store]) -> None:
    small = make_store(blob_chunk_size=SMALL_CHUNK)
    data = bytes((i * 7) % 256 for i in range(size))
    with small.transaction() as tx:
        blob_id = tx.put_blob(Trickle(data, 333))  # type: ignore[arg-type]
        assert tx.blob_size(blob_id) == size
        with tx.open_blob(blob_id) as reader:  # inside the writing transaction
            assert reader.read() == data
    with small.transaction(readonly=True) as tx, tx.open_blob(blob_id) as reader:
        got = b""
        while piece := reader.read(97):  # small reads across chunk edges
            got += piece
        assert got == data
    with small.open_blob(blob_id) as reader:  # outside any transaction
        assert reader.read() == data


def test_blob_rows_are_chunks_of_the_configured_size(store_url: str, open_store: Callable[..., Store]) -> None:
    store = open_store(store_url, blob_chunk_size=SMALL_CHUNK)
    assert isinstance(store, SqlStore)
    with store.transaction() as tx:
        blob_id = tx.put_blob(bytes(3 * SMALL_CHUNK + 5))
    with store.engine.connect() as conn:
        sizes = conn.execute(
            select(func.length(blob_chunks.c.data)).where(blob_chunks.c.blob_id == blob_id).order_by(blob_chunks.c.seq)
        ).scalars()
        assert list(sizes) == [SMALL_CHUNK, SMALL_CHUNK, SMALL_CHUNK, 5]


def test_a_damaged_blob_is_an_error_not_a_short_read(store_url: str, open_store: Callable[..., Store]) -> None:
    store = open_store(store_url, blob_chunk_size=SMALL_CHUNK)
    assert isinstance(store, SqlStore)
    with store.transaction() as tx:
        blob_id = tx.put_blob(bytes(2500))
    with store.engine.begin() as conn:
        conn.execute(delete(blob_chunks).where(blob_chunks.c.blob_id == blob_id, blob_chunks.c.seq == 1))
    with store.open_blob(blob_id) as reader, pytest.raises(OSError, match="chunk 1 of 3 is missing"):
        reader.read()


def test_an_unknown_blob_is_refused(store: Store) -> None:
    with pytest.raises(UnknownBlob):
        store.open_blob(424242)
    with store.transaction() as tx:
        with pytest.raises(UnknownBlob):
            tx.open_blob(424242)
        with pytest.raises(UnknownBlob):
            tx.blob_size(424242)


def test_a_store_reader_stops_when_the_store_closes(store: Store) -> None:
    with store.transaction() as tx:
        blob_id = tx.put_blob(bytes(10))
    reader = store.open_blob(blob_id)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        reader.read()


# ------------------------------------------------------------------------------------------- memory


def test_a_50_mb_body_is_stored_and_read_back_in_bounded_memory(sql_store: SqlStore) -> None:
    size = 50 * 1024 * 1024
    source = PatternStream(size)
    gc.collect()
    tracemalloc.start()
    try:
        with sql_store.transaction() as tx:
            blob_id = tx.put_blob(source)  # type: ignore[arg-type]
        _, write_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        digest = hashlib.sha256()
        read = 0
        with sql_store.open_blob(blob_id) as reader:
            while chunk := reader.read(256 * 1024):
                digest.update(chunk)
                read += len(chunk)
        _, read_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert source.remaining == 0
    assert read == size
    assert digest.hexdigest() == source.sha256.hexdigest()
    limit = 10 * 1024 * 1024
    print(f"50 MB: write peak {write_peak / 2**20:.2f} MiB, read peak {read_peak / 2**20:.2f} MiB")
    assert write_peak < limit, f"writing 50 MB peaked at {write_peak / 2**20:.1f} MiB of traced memory"
    assert read_peak < limit, f"reading 50 MB peaked at {read_peak / 2**20:.1f} MiB of traced memory"
    assert limit > MAX_CHUNK_SIZE * 2


def test_memory_measurement_would_see_a_whole_body(sql_store: SqlStore) -> None:
    """The measurement above can fail: holding the body whole shows up in the traced peak."""
    with sql_store.transaction() as tx:
        blob_id = tx.put_blob(PatternStream(12 * 1024 * 1024))  # type: ignore[arg-type]
    gc.collect()
    tracemalloc.start()
    try:
        with sql_store.open_blob(blob_id) as reader:
            whole = reader.read()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(whole) == 12 * 1024 * 1024
    assert peak >= 12 * 1024 * 1024
