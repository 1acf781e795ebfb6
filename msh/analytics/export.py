"""``msh export``: the store's journal as Parquet, by day, incrementally and idempotently.

Each run reads the journal in chunks of at most ``chunk`` events (never all of it in memory) in id order
and writes each chunk as one file per day (:func:`msh.analytics.dataset.write_days`), named after the
journal's source and the chunk's first and last event ids. What a run covered is kept in the output
folder (``_export/SOURCE.json``): the id range it read and the time window (``--since``/``--until``) it
kept. A later run skips what an earlier one covered, so it writes only what is new (incremental), and the
same range run again writes nothing twice (idempotent); a run cut short leaves files that the next run
writes again under the same names.

The chunks of an SQL store are read and written by worker processes side by side (``workers``), each
reading its id range through ADBC as Arrow columns (:mod:`msh.analytics.export_chunk`); the in-memory
store's are read through its port here.

On PostgreSQL several writers commit concurrently, so an event id can become visible after a higher one:
the events of the last minute are left to the next run (``settle``).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import text

from msh.analytics.export_chunk import Chunk, Window, export_sql_chunk, port_table, write_chunk
from msh.analytics.needs import require
from msh.errors import ConfigurationError
from msh.store.api import Store
from msh.store.sql import SqlStore

__all__ = ["CHUNK", "ExportResult", "Window", "default_workers", "export_journal"]

CHUNK = 100_000
"""Events per chunk read from the store (and per file written, at most)."""

_SETTLE_POSTGRES = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What a run wrote: events, files, and the id it read up to."""

    events: int
    files: int
    up_to_id: int
    folder: Path


def _slug(source: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", source).strip("_") or "msh"


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


def _state_file(out: Path, source: str) -> Path:
    return out / "_export" / f"{_slug(source)}.json"


def _load_windows(path: Path) -> list[Window]:
    if not path.exists():
        return []
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return [Window(**w) for w in raw["windows"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(
            f"{path}: the record of earlier exports cannot be read ({exc}); delete it to export everything again "
            "into a new folder"
        ) from None


def _merged(windows: Sequence[Window]) -> list[Window]:
    """Windows with unbounded time whose id ranges touch become one; the others are kept as they are."""
    open_ = sorted((w for w in windows if w.unbounded), key=lambda w: w.lo)
    merged: list[Window] = []
    for w in open_:
        if merged and w.lo <= merged[-1].hi:
            last = merged[-1]
            merged[-1] = Window(last.lo, max(last.hi, w.hi))
        else:
            merged.append(w)
    return merged + [w for w in windows if not w.unbounded]


def _save_windows(path: Path, windows: Sequence[Window]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"windows": [asdict(w) for w in windows]}, indent=1), encoding="utf-8")
    temporary.replace(path)


def default_workers() -> int:
    """Worker processes of an export when none is asked for: one per core, at most four."""
    return max(1, min(4, os.cpu_count() or 1))


def _url(store: Store) -> str:
    """The URL an export worker connects to ("" for a store that is not an SQL database)."""
    if not isinstance(store, SqlStore):
        return ""
    url = store.engine.url
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        return ""  # an SQLite database in memory is visible to this process only
    return url.render_as_string(hide_password=False)


def _port_chunks(store: Store, chunks: Sequence[Chunk]) -> Iterator[tuple[int, int]]:
    """The chunks read through the store's port, in this process (the in-memory store)."""
    for c in chunks:
        with store.transaction(readonly=True) as tx:
            rows, after = [], c.lo
            while batch := [e for e in tx.list_events(after, limit=10_000) if e.id <= c.hi]:
                rows += batch
                after = batch[-1].id
        yield write_chunk(port_table(rows), c)


def _run_chunks(store: Store, chunks: Sequence[Chunk], workers: int | None) -> Iterator[tuple[int, int]]:
    """(events, files) written for each chunk, in order: SQL stores by worker processes (the chunks are
    independent files, so they are read and written side by side), other stores here."""
    if not chunks:
        return
    if not chunks[0].url:
        yield from _port_chunks(store, chunks)
        return
    sqlite = chunks[0].url.startswith("sqlite")
    require("adbc_driver_sqlite" if sqlite else "adbc_driver_postgresql")
    count = min(workers or default_workers(), len(chunks))
    # "spawn": a fresh interpreter that has never opened the store (see msh.analytics.export_chunk).
    with ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(export_sql_chunk, c) for c in chunks]
        for c, future in zip(chunks, futures, strict=True):
            try:
                yield future.result()
            except Exception as exc:  # the driver's or pyarrow's own error, from the worker process
                pool.shutdown(cancel_futures=True)
                raise ConfigurationError(
                    f"exporting the events with ids {c.lo + 1} to {c.hi} failed: {type(exc).__name__}: {exc}; "
                    "fix the cause and run the export again: the files written so far stay, and the next run "
                    "writes this range again"
                ) from None


def _last_id(store: Store, settle: timedelta | None) -> int:
    """The highest event id to export now (on PostgreSQL, of events older than ``settle``)."""
    if isinstance(store, SqlStore):
        with store.engine.connect() as conn:
            if settle is None:
                settle = _SETTLE_POSTGRES if store.engine.dialect.name == "postgresql" else timedelta(0)
            if settle > timedelta(0):
                cutoff = datetime.now(UTC) - settle
                found = conn.execute(text("SELECT MAX(id) FROM events WHERE at < :t"), {"t": cutoff}).scalar()
            else:
                found = conn.execute(text("SELECT MAX(id) FROM events")).scalar()
        return int(found or 0)
    last = 0
    with store.transaction(readonly=True) as tx:
        while batch := tx.list_events(last, limit=10_000):
            last = batch[-1].id
    return last


def _tag(since: datetime | None, until: datetime | None) -> str:
    """Part of a file name that tells runs with other time windows apart (``all``: no window)."""
    if since is None and until is None:
        return "all"
    return hashlib.sha256(f"{_iso(since)}|{_iso(until)}".encode()).hexdigest()[:10]


def export_journal(
    store: Store,
    source: str,
    out: Path,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    chunk: int = CHUNK,
    settle: timedelta | None = None,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
) -> ExportResult:
    """Export the journal of ``store`` (whose MSH is the party ``source``) into the folder ``out``: the
    events in [``since``, ``until``) that no earlier run wrote (see the module docs), ``chunk`` events
    at a time by ``workers`` processes (:func:`default_workers` when None)."""
    if workers is not None and workers < 1:
        raise ConfigurationError(f"the number of worker processes must be at least 1, not {workers}")
    if chunk < 1:
        raise ConfigurationError(f"the chunk size must be at least 1 event, not {chunk}")
    if since is not None and until is not None and since >= until:
        raise ConfigurationError(f"--since ({_iso(since)}) must be before --until ({_iso(until)})")
    if out.exists() and not out.is_dir():
        raise ConfigurationError(f"{out} is a file; give a folder for the journal files (--out)")
    out.mkdir(parents=True, exist_ok=True)
    state = _state_file(out, source)
    windows = _merged(_load_windows(state))
    start = max((w.hi for w in windows if w.unbounded and w.lo == 0), default=0)
    covered = [w for w in windows if w.hi > start]
    hi = _last_id(store, settle)
    template = Chunk(
        _url(store),
        start,
        hi,
        source,
        str(out),
        f"part-{_slug(source)}",
        _tag(since, until),
        _iso(since),
        _iso(until),
        tuple(covered),
    )
    chunks = [replace(template, lo=lo, hi=min(lo + chunk, hi)) for lo in range(start, hi, chunk)]
    events = files = 0
    for written, made in _run_chunks(store, chunks, workers):
        events, files = events + written, files + made
        if progress is not None:
            progress(events, hi)
    if hi > start:
        windows = _merged([*windows, Window(start, hi, _iso(since), _iso(until))])
        _save_windows(state, windows)
    return ExportResult(events, files, hi, out)
