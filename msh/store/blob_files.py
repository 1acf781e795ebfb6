"""Large bodies as files beside an SQLite store, so that they never pass through its write-ahead log.

SQLite writes every page of a transaction to its WAL first and copies it into the database at a checkpoint;
a 1 GiB body stored as chunk rows makes the WAL 1 GiB until the next full checkpoint (on a busy store, a
clean stop). A body over :data:`FILE_THRESHOLD` is stored instead as one file in the folder beside the
database (``<database>.blobs/``), and its ``blobs`` row names the file, its size and its SHA-256
(docs/design.md §8). The order keeps what a crash may lose unchanged (docs/design.md §5.6):

1. the body is written to ``<name>.part``, locked (``flock``) by the writing transaction, then ``fsync``\\ ed;
2. it is renamed to ``<name>.blob`` and the folder is ``fsync``\\ ed: the file is durable under its name;
3. the row naming it is inserted and the transaction commits (or not);
4. after the transaction ends the writer removes its files that no committed row names (a rolled-back
   transaction or savepoint), then lets the lock go.

A row therefore never names a file that is not durable. A crash between 1 and 4 leaves a file no row names:
:meth:`BlobFiles.sweep` (run when the store opens) removes such orphans. It takes each file's lock first
and checks the rows afterwards, so it never removes the file of a transaction still under way in another
process (``msh send`` beside ``msh serve``): that file stays locked until its transaction has ended, and
a file younger than :data:`SWEEP_GRACE` (just created, not locked yet) is left alone.

A file is removed after the transaction that deleted its row has committed (retention, purge, a forward's
body replaced); a crash in between leaves an orphan for the next sweep. Reading checks the size and the
SHA-256 at the end of the file: a damaged or truncated file fails the read with ``OSError``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Final

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["FILE_THRESHOLD", "SWEEP_GRACE", "BlobFiles", "WrittenFile", "folder_for"]

FILE_THRESHOLD: Final = 1024 * 1024
"""A body larger than this (1 MiB, one chunk) is stored as a file when the store has a folder for files."""

SWEEP_GRACE: Final = 60.0
"""Seconds: a file younger than this is never taken for an orphan (its writer may not hold its lock yet)."""

_SUFFIX: Final = ".blob"
_PART: Final = ".part"
_COPY: Final = 1024 * 1024


def folder_for(database: Path) -> Path:
    """The folder of the files of the SQLite database at ``database``."""
    return database.with_name(database.name + ".blobs")


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """A body written as a file by a transaction: its name (relative to the folder), size and SHA-256
    (hex), and the open descriptor holding its lock until the transaction has ended."""

    name: str
    size: int
    sha256: str
    lock_fd: int


class _CheckedFile(io.RawIOBase):
    """A file read to its end, checked against its recorded size and SHA-256 at the end."""

    def __init__(self, path: Path, size: int, sha256: str) -> None:
        super().__init__()
        self._file = path.open("rb", buffering=0)
        self._path = path
        self._size = size
        self._sha256 = sha256
        self._digest = hashlib.sha256()
        self._read = 0
        self._checked = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        if self.closed:
            raise ValueError("I/O operation on a closed blob reader")
        view = memoryview(buffer).cast("B")
        n = self._file.readinto(view)
        if n is None:
            return 0
        if n:
            self._digest.update(view[:n])
            self._read += n
            if self._read > self._size:
                raise OSError(f"blob file {self._path} is damaged: longer than the {self._size} bytes recorded")
            return n
        if not self._checked:
            if self._read != self._size:
                raise OSError(f"blob file {self._path} is damaged: {self._read} bytes read, {self._size} recorded")
            if self._digest.hexdigest() != self._sha256:
                raise OSError(f"blob file {self._path} is damaged: its SHA-256 is not the one recorded")
            self._checked = True
        return 0

    def close(self) -> None:
        file = getattr(self, "_file", None)  # None when opening it failed: the finaliser closes such a reader too
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()
        super().close()


class BlobFiles:
    """The folder of body files of one SQLite store (see the module docs)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _ensure(self) -> None:
        if not self.folder.is_dir():
            self.folder.mkdir(parents=True, exist_ok=True)
            _fsync_dir(self.folder.parent)

    def path(self, name: str) -> Path:
        if "/" in name or not name.endswith(_SUFFIX):
            raise OSError(f"blob file name {name!r} is not one this store writes")
        return self.folder / name

    def write(self, head: bytes, rest: BinaryIO | None) -> WrittenFile:
        """Write ``head`` then the rest of ``rest`` (read to its end) as a new file, durable under its name
        when this returns (steps 1 and 2 of the module docs); its lock is held until :meth:`release`."""
        self._ensure()
        stem = uuid.uuid4().hex
        part = self.folder / (stem + _PART)
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            digest = hashlib.sha256(head)
            size = _write_all(fd, head)
            if rest is not None:
                while piece := rest.read(_COPY):
                    digest.update(piece)
                    size += _write_all(fd, piece)
            os.fsync(fd)
            name = stem + _SUFFIX
            os.rename(part, self.folder / name)
            _fsync_dir(self.folder)
        except BaseException:
            with contextlib.suppress(OSError):
                part.unlink()
            os.close(fd)
            raise
        return WrittenFile(name, size, digest.hexdigest(), fd)

    def open(self, name: str, size: int, sha256: str) -> BinaryIO:
        """A reader of the file ``name``, checked against ``size`` and ``sha256`` at its end."""
        path = self.path(name)
        try:
            raw = _CheckedFile(path, size, sha256)
        except FileNotFoundError:
            raise OSError(f"blob file {path} is missing") from None
        return io.BufferedReader(raw, _COPY)

    def remove(self, name: str) -> None:
        """Remove the file ``name`` (no error if it is gone already)."""
        with contextlib.suppress(FileNotFoundError):
            self.path(name).unlink()

    @staticmethod
    def release(written: WrittenFile) -> None:
        """Let the lock of a written file go (step 4, once the transaction has ended)."""
        with contextlib.suppress(OSError):
            os.close(written.lock_fd)

    def sweep(self, named: Callable[[Iterable[str]], set[str]], *, now: float | None = None) -> list[str]:
        """Remove the orphans: files no committed row names, whose lock is free and that are older than
        :data:`SWEEP_GRACE`; ``named(names)`` gives those of ``names`` that a committed row names. Returns
        the names removed."""
        if not self.folder.is_dir():
            return []
        now = time.time() if now is None else now
        present = sorted(p.name for p in self.folder.iterdir() if p.name.endswith((_SUFFIX, _PART)) and p.is_file())
        # One look at the rows for all of them first; each candidate is checked again under its lock.
        named_now = _named_in_batches(named, [n for n in present if n.endswith(_SUFFIX)])
        removed: list[str] = []
        for name in present:
            if name in named_now:
                continue
            path = self.folder / name
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                if now - os.fstat(fd).st_mtime < SWEEP_GRACE:
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a transaction under way holds it
                # The lock is ours, so the transaction that wrote the file has ended: the rows now say it all.
                if name.endswith(_PART) or not named([name]):
                    path.unlink()
                    removed.append(name)
            finally:
                os.close(fd)
        if removed:
            _fsync_dir(self.folder)
        return removed


def _named_in_batches(named: Callable[[Iterable[str]], set[str]], names: list[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(names), 500):
        found |= named(names[start : start + 500])
    return found


def _write_all(fd: int, data: bytes) -> int:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    return len(data)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
