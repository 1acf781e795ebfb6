"""``msh export``: the store's journal as Parquet, by day, incrementally and idempotently.

Each run reads the journal in chunks of at most ``chunk`` events (never all of it in memory) in id order
and writes each chunk as one file per day (:func:`msh.analytics.dataset.write_days`), named after the
journal's source and the chunk's first and last event ids. What a run covered is kept in the output
folder (``_export/SOURCE.json``): the id range it read and the time window (``--since``/``--until``) it
kept. A later run skips what an earlier one covered, so it writes only what is new (incremental), and the
same range run again writes nothing twice (idempotent); a run cut short leaves files that the next run
writes again under the same names.

On PostgreSQL several writers commit concurrently, so an event id can become visible after a higher one:
the events of the last minute are left to the next run (``settle``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import text

from msh.analytics.columns import SCHEMA
from msh.analytics.dataset import write_days
from msh.errors import ConfigurationError
from msh.store.api import Event, Store
from msh.store.sql import SqlStore
from msh.store.sql.statements import EVENT_KEYS

__all__ = ["CHUNK", "ExportResult", "Window", "export_journal"]

CHUNK = 100_000
"""Events per chunk read from the store (and per file written, at most)."""

_SETTLE_POSTGRES = timedelta(minutes=1)
# The journal's columns as the store writes them, the detail read apart (as text).
_READ_COLUMNS = ("id", *(key for key in EVENT_KEYS if key != "detail"))


@dataclass(frozen=True, slots=True)
class Window:
    """What one run covered: the events with an id in (``lo``, ``hi``] and a time in [``since``, ``until``)
    (an open end where None)."""

    lo: int
    hi: int
    since: str | None = None
    until: str | None = None

    @property
    def unbounded(self) -> bool:
        """True when the run kept every event of its id range."""
        return self.since is None and self.until is None


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


def _time_array(values: Sequence[object]) -> pa.Array:
    """Times as read back (UTC wall-time text on SQLite, aware datetimes on PostgreSQL) as UTC timestamps."""
    sample = next((v for v in values if v is not None), None)
    if isinstance(sample, str):
        naive = pa.array(values, pa.string()).cast(pa.timestamp("us"))
        return naive.cast(pa.timestamp("us", tz="UTC"))
    return pa.array(values, pa.timestamp("us", tz="UTC"))


def _table(source: str, columns: dict[str, list[Any]], details: list[Any]) -> pa.Table:
    n = len(columns["id"])
    arrays: dict[str, pa.Array] = {
        "source": pa.array([source] * n, pa.string()),
        "event_id": pa.array(columns["id"], pa.int64()),
        "at": _time_array(columns["at"]),
    }
    for name in _READ_COLUMNS[2:]:
        if name == "deadline":
            arrays[name] = _time_array(columns[name])
        elif name == "size":
            arrays[name] = pa.array(columns[name], pa.int64())
        elif name == "attempt":
            arrays[name] = pa.array(columns[name], pa.int32())
        else:
            arrays[name] = pa.array(columns[name], pa.string())
    arrays["detail"] = pa.array([d if isinstance(d, str) or d is None else json.dumps(d) for d in details], pa.string())
    return pa.table([arrays[f.name] for f in SCHEMA], schema=SCHEMA)


def _sql_chunks(store: Store, start: int, hi: int, chunk: int) -> Iterator[tuple[dict[str, list[Any]], list[Any]]]:
    """The events with an id in (start, hi], ``chunk`` at a time, as raw columns (no per-row objects: the
    driver's own cursor, read-only, one statement per chunk)."""
    assert isinstance(store, SqlStore)
    engine = store.engine
    marker = "?" if engine.dialect.paramstyle == "qmark" else "%s"
    query = (
        f"SELECT {', '.join(_READ_COLUMNS)}, CAST(detail AS TEXT) AS detail FROM events"
        f" WHERE id > {marker} AND id <= {marker} ORDER BY id LIMIT {marker}"
    )
    after = start
    connection = engine.raw_connection()
    try:
        cursor = connection.cursor()
        while after < hi:
            cursor.execute(query, (after, hi, chunk))
            rows = cursor.fetchall()
            if not rows:
                break
            cols = list(zip(*rows, strict=True))
            yield {name: list(cols[i]) for i, name in enumerate(_READ_COLUMNS)}, list(cols[-1])
            after = int(rows[-1][0])
        cursor.close()
    finally:
        connection.rollback()
        connection.close()


def _port_chunks(store: Store, start: int, hi: int, chunk: int) -> Iterator[tuple[dict[str, list[Any]], list[Any]]]:
    """The same through the store's port (the in-memory twin)."""
    after = start
    while after < hi:
        with store.transaction(readonly=True) as tx:
            events: list[Event] = [e for e in tx.list_events(after, limit=chunk) if e.id <= hi]
        if not events:
            return
        columns: dict[str, list[Any]] = {name: [] for name in _READ_COLUMNS}
        for e in events:
            for name in _READ_COLUMNS:
                value = getattr(e, name)
                columns[name].append(value.value if name == "direction" and value is not None else value)
        yield columns, [e.detail for e in events]
        after = events[-1].id


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


def _keep(table: pa.Table, since: datetime | None, until: datetime | None, covered: Sequence[Window]) -> pa.Table:
    """The rows of ``table`` within [since, until) that no earlier window covered."""
    ids, at = table.column("event_id"), table.column("at")
    conditions: list[Any] = []
    if since is not None:
        conditions.append(pc.greater_equal(at, pa.scalar(since, SCHEMA.field("at").type)))
    if until is not None:
        conditions.append(pc.less(at, pa.scalar(until, SCHEMA.field("at").type)))
    for w in covered:
        inside = pc.and_(pc.greater(ids, w.lo), pc.less_equal(ids, w.hi))
        if w.since is not None:
            inside = pc.and_(inside, pc.greater_equal(at, pa.scalar(datetime.fromisoformat(w.since), at.type)))
        if w.until is not None:
            inside = pc.and_(inside, pc.less(at, pa.scalar(datetime.fromisoformat(w.until), at.type)))
        conditions.append(pc.invert(inside))
    if not conditions:
        return table
    mask = conditions[0]
    for condition in conditions[1:]:
        mask = pc.and_(mask, condition)
    return table.filter(mask)


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
) -> ExportResult:
    """Export the journal of ``store`` (whose MSH is the party ``source``) into the folder ``out``: the
    events in [``since``, ``until``) that no earlier run wrote (see the module docs)."""
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
    reader = _sql_chunks if isinstance(store, SqlStore) else _port_chunks
    events = files = 0
    slug = _slug(source)
    # One chunk is converted and written while the next is read (pyarrow works outside the GIL).
    with ThreadPoolExecutor(max_workers=1) as writer:
        pending: Future[int] | None = None
        for columns, details in reader(store, start, hi, chunk):
            table = _keep(_table(source, columns, details), since, until, covered)
            if pending is not None:
                files += pending.result()
                pending = None
            if table.num_rows:
                first, last = columns["id"][0], columns["id"][-1]
                name = f"part-{slug}-{first:012d}-{last:012d}-{_tag(since, until)}"
                pending = writer.submit(write_days, table, out, name)
                events += table.num_rows
            if progress is not None:
                progress(events, hi)
        if pending is not None:
            files += pending.result()
    if hi > start:
        windows = _merged([*windows, Window(start, hi, _iso(since), _iso(until))])
        _save_windows(state, windows)
    return ExportResult(events, files, hi, out)
