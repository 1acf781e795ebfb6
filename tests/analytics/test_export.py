"""msh export: the journal of a store as Parquet by day, in bounded chunks, incremental and idempotent."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from msh.analytics.export import export_journal
from msh.errors import ConfigurationError
from msh.store import Direction, Store
from tests.support.store import T0, add_outbound


def _rows(folder: Path) -> list[dict[str, object]]:
    files = sorted(str(p) for p in folder.glob("day=*/*.parquet"))
    return ds.dataset(files, format="parquet").to_table().to_pylist() if files else []


def _append(store: Store, count: int, start: timedelta = timedelta(0), *, step: timedelta = timedelta(hours=5)) -> None:
    with store.transaction() as tx:
        if tx.get_outbound("m@x") is None:
            add_outbound(tx, "m@x", b"12345")
        for i in range(count):
            tx.append_event(
                at=T0 + start + step * i,
                kind="transmission",
                message_id="m@x",
                direction=Direction.OUTBOUND,
                detail={"attempt": i + 1, "error": "timeout"},
            )


def test_export_writes_every_event_once_by_day_in_bounded_chunks(store: Store, tmp_path: Path) -> None:
    _append(store, 10)
    seen: list[int] = []
    result = export_journal(store, "urn:a", tmp_path, chunk=3, progress=lambda done, _hi: seen.append(done))
    rows = _rows(tmp_path)
    assert result.events == len(rows) == 10
    assert seen == [3, 6, 9, 10]  # four chunks of at most three events
    assert sorted(r["event_id"] for r in rows) == list(range(1, 11))
    days = {p.parent.name for p in tmp_path.glob("day=*/*.parquet")}
    assert days == {f"day={(T0 + timedelta(hours=5) * i).date().isoformat()}" for i in range(10)}
    row = next(r for r in rows if r["event_id"] == 4)
    assert (row["source"], row["kind"], row["role"], row["cpa_id"], row["attempt"], row["cause"], row["size"]) == (
        "urn:a",
        "transmission",
        "sender",
        "cpa-1",
        4,
        "timeout",
        5,
    )
    assert row["at"] == T0 + timedelta(hours=15)
    assert json.loads(str(row["detail"])) == {"attempt": 4, "error": "timeout"}
    for path in tmp_path.glob("day=*/*.parquet"):  # every file holds one day only
        day = path.parent.name.removeprefix("day=")
        assert {r["at"].date().isoformat() for r in _rows_of(path)} == {day}


def _rows_of(path: Path) -> list[dict[str, object]]:
    return ds.dataset(str(path), format="parquet").to_table().to_pylist()  # type: ignore[no-any-return]


def test_a_second_run_exports_only_what_is_new(store: Store, tmp_path: Path) -> None:
    _append(store, 4)
    assert export_journal(store, "urn:a", tmp_path).events == 4
    assert export_journal(store, "urn:a", tmp_path).events == 0
    _append(store, 3, timedelta(days=3))
    assert export_journal(store, "urn:a", tmp_path).events == 3
    assert sorted(r["event_id"] for r in _rows(tmp_path)) == list(range(1, 8))


def test_windows_by_time_are_idempotent_and_the_rest_follows(store: Store, tmp_path: Path) -> None:
    _append(store, 10)  # every 5 hours from T0
    since, until = T0 + timedelta(hours=10), T0 + timedelta(hours=25)
    first = export_journal(store, "urn:a", tmp_path, since=since, until=until)
    assert first.events == 3  # hours 10, 15, 20
    assert export_journal(store, "urn:a", tmp_path, since=since, until=until).events == 0
    assert export_journal(store, "urn:a", tmp_path, since=T0 + timedelta(hours=20)).events == 5  # 25..45 (20 was)
    assert export_journal(store, "urn:a", tmp_path).events == 2  # hours 0 and 5
    ids = sorted(r["event_id"] for r in _rows(tmp_path))
    assert ids == list(range(1, 11))  # each exactly once


def test_bad_output_and_window_are_refused(store: Store, tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(ConfigurationError, match="is a file"):
        export_journal(store, "urn:a", target)
    with pytest.raises(ConfigurationError, match="must be before"):
        export_journal(store, "urn:a", tmp_path, since=T0, until=T0)
    (tmp_path / "_export").mkdir()
    (tmp_path / "_export" / "urn_a.json").write_text("{not json")
    with pytest.raises(ConfigurationError, match="cannot be read"):
        export_journal(store, "urn:a", tmp_path)


def test_export_of_the_sql_store_reads_the_database_itself(
    sqlite_url: str, open_store: Callable[..., Store], tmp_path: Path
) -> None:
    store = open_store(sqlite_url)
    _append(store, 5)
    assert export_journal(store, "urn:a", tmp_path / "a", chunk=2).events == 5
    memory = open_store("memory:")
    _append(memory, 5)
    export_journal(memory, "urn:a", tmp_path / "b", chunk=2)
    rows_a, rows_b = _rows(tmp_path / "a"), _rows(tmp_path / "b")
    for row in rows_a + rows_b:
        row["detail"] = json.loads(str(row["detail"]))
    assert rows_a == rows_b


def test_a_chunk_that_cannot_be_exported_is_one_clear_error_naming_its_ids(
    sqlite_url: str, open_store: Callable[..., Store], tmp_path: Path
) -> None:
    import sqlite3

    store = open_store(sqlite_url)
    _append(store, 5)
    with sqlite3.connect(sqlite_url) as conn:  # a value no journal column can hold (SQLite keeps it)
        conn.execute("UPDATE events SET size = 'not a number' WHERE id = 4")
    with pytest.raises(
        ConfigurationError,
        match=r"exporting the events with ids 3 to 4 failed: .*; fix the cause and run the export again",
    ):
        export_journal(store, "urn:a", tmp_path / "out", chunk=2, workers=1)
    # The chunk before it was written; nothing was recorded as covered, so the next run starts again.
    assert not (tmp_path / "out" / "_export" / "urn_a.json").exists()
