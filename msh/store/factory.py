"""Opening a store by its URL: the SQL store for a path or a database URL, the in-memory twin for ``memory:``."""

from __future__ import annotations

from msh.store.api import Store
from msh.store.memory import MemoryStore
from msh.store.records import Clock
from msh.store.sql import SqlStore

__all__ = ["MEMORY_URLS", "open_store"]

MEMORY_URLS = ("memory:", "memory://")
"""The URLs of the in-memory twin (any case)."""


def open_store(
    url: str,
    *,
    clock: Clock | None = None,
    migrate: bool = True,
    blob_chunk_size: int | None = None,
) -> Store:
    """Open the store at ``url``: a path or an SQLAlchemy URL (:mod:`msh.store.sql.connect`), or
    ``memory:``.

    A SQL store is upgraded to the newest schema revision unless ``migrate`` is False (then a store that
    is not up to date is a :class:`~msh.errors.ConfigurationError`). ``blob_chunk_size`` (bytes, at most
    1 MiB, the default) is the size of the chunks payloads are stored in.
    """
    if isinstance(url, str) and url.strip().lower() in MEMORY_URLS:
        return MemoryStore(clock=clock, blob_chunk_size=blob_chunk_size)
    return SqlStore.open(url, clock=clock, migrate=migrate, blob_chunk_size=blob_chunk_size)
