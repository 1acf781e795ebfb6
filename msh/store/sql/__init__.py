"""The SQL store: SQLite (one file, the embedded default) or PostgreSQL (shared by several MSH processes).

SQLAlchemy Core over the tables of :mod:`msh.store.schema`; the rules every store follows are in
:mod:`msh.store.api` (applied for both stores by :mod:`msh.store.transaction`). By concern:

- :mod:`msh.store.sql.connect`: store URLs, the engine and each dialect's set-up (SQLite WAL, durable
  commits, ``BEGIN IMMEDIATE``; PostgreSQL timeouts), the schema check and upgrade on opening;
- :mod:`msh.store.sql.store`: :class:`SqlStore`, its transactions and committed-blob reads;
- :mod:`msh.store.sql.transaction`: the storage steps of a transaction (duplicates by ``ON CONFLICT DO
  NOTHING``, timer claims by ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, savepoints, chunked blobs);
- :mod:`msh.store.sql.statements`: the statements of every message step, compiled once per store;
- :mod:`msh.store.sql.rows`: records (the engine's types) to columns and back.
"""

from __future__ import annotations

from msh.store.sql.connect import resolve_url
from msh.store.sql.store import SqlStore

__all__ = ["SqlStore", "resolve_url"]
