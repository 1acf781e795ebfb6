"""Payload bodies as numbered chunks: cut a stream into chunks, read chunks back as a stream.

A blob (a message body: the SOAP part and every payload with their MIME framing, exactly as sent or
received) is stored as rows of at most ``chunk_size`` bytes (``blob_chunks``: blob id, sequence number,
data). Writing reads the source stream one chunk at a time; reading fetches one chunk at a time, so
neither side ever holds more than one chunk (plus the reader's small buffer) in memory, whatever the size
of the blob. Both store implementations (SQL and in-memory) use these two helpers.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, BinaryIO, Final

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["DEFAULT_CHUNK_SIZE", "MAX_CHUNK_SIZE", "ChunkReader", "iter_chunks", "open_chunks"]

MAX_CHUNK_SIZE: Final = 1024 * 1024
"""The largest chunk a store writes (1 MiB): one chunk is the unit of memory use when streaming."""

DEFAULT_CHUNK_SIZE: Final = MAX_CHUNK_SIZE

_READ_BUFFER: Final = 64 * 1024


def iter_chunks(source: BinaryIO | bytes, chunk_size: int) -> Iterator[bytes]:
    """The content of ``source`` as chunks of exactly ``chunk_size`` bytes (the last one may be shorter).

    A stream is read as it goes (short reads are gathered into full chunks); an empty source gives no
    chunk at all.
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        for start in range(0, len(data), chunk_size):
            yield data[start : start + chunk_size]
        return
    while True:
        parts: list[bytes] = []
        have = 0
        while have < chunk_size:
            piece = source.read(chunk_size - have)
            if not piece:
                break
            parts.append(piece)
            have += len(piece)
        if have == 0:
            return
        yield parts[0] if len(parts) == 1 else b"".join(parts)
        if have < chunk_size:
            return


class ChunkReader(io.RawIOBase):
    """A sequential reader over ``chunk_count`` chunks fetched one at a time by ``fetch(seq)``.

    ``fetch`` returns the chunk's bytes, or ``None`` when the chunk is missing (the reader then raises
    ``OSError``: the blob is damaged or was removed while being read). The total must come to ``size``.
    """

    def __init__(self, fetch: Callable[[int], bytes | None], chunk_count: int, size: int) -> None:
        super().__init__()
        self._fetch = fetch
        self._count = chunk_count
        self._size = size
        self._seq = 0
        self._chunk = b""
        self._offset = 0
        self._delivered = 0

    @property
    def size(self) -> int:
        """The blob's length in bytes."""
        return self._size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        if self.closed:
            raise ValueError("I/O operation on a closed blob reader")
        view = memoryview(buffer).cast("B")
        while self._offset >= len(self._chunk):
            if self._seq >= self._count:
                if self._delivered != self._size:
                    raise OSError(f"blob is damaged: {self._delivered} bytes read, {self._size} recorded")
                return 0
            chunk = self._fetch(self._seq)
            if chunk is None:
                raise OSError(f"blob is damaged: chunk {self._seq} of {self._count} is missing")
            self._chunk, self._offset, self._seq = chunk, 0, self._seq + 1
        n = min(len(view), len(self._chunk) - self._offset)
        view[:n] = self._chunk[self._offset : self._offset + n]
        self._offset += n
        self._delivered += n
        if self._offset >= len(self._chunk):
            self._chunk, self._offset = b"", 0  # let the chunk go as soon as it is used up
        return n

    def close(self) -> None:
        self._chunk = b""
        super().close()


def open_chunks(fetch: Callable[[int], bytes | None], chunk_count: int, size: int) -> BinaryIO:
    """A buffered binary reader over a :class:`ChunkReader`."""
    return io.BufferedReader(ChunkReader(fetch, chunk_count, size), _READ_BUFFER)
