"""Part bodies and spooling: the decoded content of a MIME part (:class:`PartBody`), kept in memory within the
limits, else in one unnamed temporary file shared by the parts of a package (:class:`Spooler`, :class:`Sink`).
"""

from __future__ import annotations

import abc
import io
import os
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, BinaryIO, Self

from msh.ebms.mime.limits import CHUNK, MimeLimits
from msh.ebms.mime.report import fail

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

    from msh.ebms.mime.transfer_encoding import Coding

__all__ = ["Closing", "PartBody", "Sink", "Spooler"]


class Closing(abc.ABC):
    """What holds temporary storage until closed; as a context manager, closed at the end of the block."""

    __slots__ = ()

    @abc.abstractmethod
    def close(self) -> None:
        """Release the storage; idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _Spool:
    """One unnamed temporary file shared by the spilled parts of a package, closed with its last user."""

    __slots__ = ("_file", "_lock", "_users")

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._lock = threading.Lock()
        self._users = 1  # the parser holding it

    def acquire(self) -> None:
        with self._lock:
            self._users += 1

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users > 0 or self._file is None:
                return
            f, self._file = self._file, None
        f.close()

    def append(self, data: ReadableBuffer) -> int:
        """Write ``data`` at the end of the file; return the offset it was written at."""
        with self._lock:
            if self._file is None:
                # An unnamed file: deleted by the OS when closed, even if this process dies.
                self._file = tempfile.TemporaryFile(prefix="msh-mime-")  # noqa: SIM115 - closed in release()
            f = self._file
            offset = f.seek(0, os.SEEK_END)
            f.write(data)
            return offset

    def read_into(self, buffer: memoryview, offset: int) -> int:
        with self._lock:
            if self._file is None:
                raise ValueError("the part body's temporary file is closed")
            self._file.seek(offset)
            got = self._file.readinto(buffer)  # type: ignore[attr-defined]
            return int(got or 0)


class _SpoolReader(io.RawIOBase):
    """A reader of one part's stretch of the spool file, with a position of its own.

    It keeps the spool file open until it is closed itself, even if its body is closed first.
    """

    def __init__(self, spool: _Spool, offset: int, size: int) -> None:
        super().__init__()
        spool.acquire()
        self._spool = spool
        self._start = offset
        self._size = size
        self._pos = 0

    def close(self) -> None:
        if not self.closed:
            self._spool.release()
        super().close()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        n = min(len(view), self._size - self._pos)
        if n <= 0:
            return 0
        got = self._spool.read_into(view[:n], self._start + self._pos)
        self._pos += got
        return got

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos


class PartBody(Closing):
    """The decoded content of one MIME part, in memory, in the package's temporary file, or in a file.

    Build one with :meth:`from_bytes` or :meth:`from_path`; :func:`parse_package` builds the others.
    :meth:`open` gives a fresh reader from the start each time (readers are independent and may be used
    from several threads); :meth:`close` frees the temporary storage, after which the body cannot be read.
    """

    __slots__ = ("_closed", "_data", "_offset", "_path", "_size", "_spool")

    def __init__(self, data: bytes = b"") -> None:
        self._data: bytes | None = bytes(data)
        self._path: Path | None = None
        self._spool: _Spool | None = None
        self._offset = 0
        self._size = len(self._data)
        self._closed = False

    @classmethod
    def from_bytes(cls, data: bytes) -> PartBody:
        """A body holding ``data`` in memory."""
        return cls(data)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> PartBody:
        """A body read from the file at ``path`` whenever it is opened (never loaded whole).

        The size is taken now; the file is not owned: :meth:`close` leaves it in place.
        """
        body = cls()
        body._data = None
        body._path = Path(path)
        body._size = body._path.stat().st_size
        return body

    @classmethod
    def _from_spool(cls, spool: _Spool, offset: int, size: int) -> PartBody:
        body = cls()
        body._data = None
        spool.acquire()
        body._spool = spool
        body._offset = offset
        body._size = size
        return body

    @property
    def size(self) -> int:
        """Length of the decoded content in bytes."""
        return self._size

    @property
    def in_memory(self) -> bool:
        """True when the content is held in memory (not in a file)."""
        return self._data is not None

    def open(self) -> BinaryIO:
        """A new binary reader positioned at the start of the content."""
        if self._closed:
            raise ValueError("the part body is closed")
        if self._data is not None:
            return io.BytesIO(self._data)
        if self._path is not None:
            return open(self._path, "rb")
        assert self._spool is not None
        return io.BufferedReader(_SpoolReader(self._spool, self._offset, self._size), CHUNK)

    def read_bytes(self) -> bytes:
        """The whole content as bytes (loads it into memory)."""
        if self._data is not None and not self._closed:
            return self._data
        with self.open() as reader:
            return reader.read()

    def copy_to(self, out: BinaryIO, chunk_size: int = CHUNK) -> int:
        """Copy the content to ``out`` in chunks; return the number of bytes copied."""
        copied = 0
        with self.open() as reader:
            while chunk := reader.read(chunk_size):
                out.write(chunk)
                copied += len(chunk)
        return copied

    def close(self) -> None:
        """Release the content (the temporary storage is freed); idempotent."""
        if self._closed:
            return
        self._closed = True
        self._data = None
        if self._spool is not None:
            spool, self._spool = self._spool, None
            spool.release()

    def __repr__(self) -> str:
        where = "closed" if self._closed else "memory" if self._data is not None else "file"
        return f"PartBody(size={self._size}, {where})"


class Spooler:
    """Keeps part contents in memory within the limits, else in the package's shared temporary file."""

    __slots__ = ("budget", "memory_used", "spool", "threshold")

    def __init__(self, limits: MimeLimits) -> None:
        self.spool = _Spool()
        self.threshold = limits.spool_threshold
        self.budget = limits.max_memory_bytes
        self.memory_used = 0


class Sink:
    """Collects one part's decoded content: decodes what the scanner finds, then keeps or spills it."""

    __slots__ = ("_decoder", "_limit", "_location", "_mem", "_offset", "_spilled", "_spooler", "size")

    def __init__(self, spooler: Spooler, decoder: Coding, limit: int | None, location: str) -> None:
        self._spooler = spooler
        self._decoder = decoder
        self._limit = limit
        self._location = location
        self._mem = bytearray()
        self._spilled = False
        self._offset = -1
        self.size = 0

    def take(self, data: bytes) -> None:
        """Raw (transfer-encoded) content from the scanner."""
        self._write(self._decoder.feed(data))

    def _write(self, data: bytes) -> None:
        if not data:
            return
        self.size += len(data)
        if self._limit is not None and self.size > self._limit:
            fail(f"the SOAP part is larger than {self._limit} bytes", self._location)
        sp = self._spooler
        if self._spilled:
            sp.spool.append(data)
        elif len(self._mem) + len(data) <= sp.threshold and sp.memory_used + len(data) <= sp.budget:
            self._mem += data
            sp.memory_used += len(data)
        else:
            self._spilled = True
            sp.memory_used -= len(self._mem)
            self._offset = sp.spool.append(bytes(self._mem) + data if self._mem else data)
            self._mem = bytearray()

    def finish(self) -> PartBody:
        """The part's content, once the scanner reached its end."""
        self._write(self._decoder.finish())
        if not self._spilled:
            return PartBody(bytes(self._mem))
        return PartBody._from_spool(self._spooler.spool, self._offset, self.size)
