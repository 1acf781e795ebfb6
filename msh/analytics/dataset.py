"""Writing journal files: one Parquet file per day and chunk, written whole or not at all."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from msh.analytics.columns import SCHEMA, day_of
from msh.errors import ConfigurationError

__all__ = ["check_journal_folders", "journal_extent", "journal_files", "write_days"]


def write_days(table: pa.Table, out: Path, name: str) -> int:
    """Write ``table`` (columns :data:`SCHEMA`) under ``out`` as ``day=YYYY-MM-DD/NAME.parquet``, one file
    per day it spans; each file is written beside and renamed into place, so a reader never sees half a
    file and writing the same ``name`` again replaces it (idempotent). Returns the number of files."""
    table = table.cast(SCHEMA)
    days = day_of(table)
    written = 0
    for day in pc.unique(days).to_pylist():
        part = table.filter(pc.equal(days, day))
        folder = out / f"day={day.isoformat()}"
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"{name}.parquet"
        temporary = folder / f".{name}.parquet.tmp"
        pq.write_table(part, temporary, compression="zstd")
        os.replace(temporary, final)
        written += 1
    return written


def journal_files(folder: Path) -> list[Path]:
    """The Parquet files of a journal folder (``day=…/*.parquet``), in name order."""
    return sorted(p for p in folder.glob("day=*/*.parquet") if not p.name.startswith("."))


def check_journal_folders(folders: list[Path]) -> None:
    """:class:`ConfigurationError` for the first folder that is not a journal (before any work starts)."""
    if not folders:
        raise ConfigurationError("give at least one journal folder (made by msh export or msh journal generate)")
    for folder in folders:
        if not folder.is_dir():
            raise ConfigurationError(f"{folder}: no such folder; give a journal folder made by msh export")
        if not journal_files(folder):
            raise ConfigurationError(
                f"{folder}: no journal files in it (day=YYYY-MM-DD/*.parquet); export one with "
                "'msh export --config FILE --out DIR' or make one with 'msh journal generate'"
            )


def journal_extent(folders: list[Path]) -> tuple[int, datetime | None]:
    """The number of events in the journal folders and the time of the latest, read from the Parquet
    files' footers (row counts and column statistics) without reading the events; the time is None when
    a file carries no statistics for ``at`` (then it has to be computed)."""
    events, latest, known = 0, None, True
    for folder in folders:
        for path in journal_files(folder):
            try:
                meta = pq.ParquetFile(path).metadata
            except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
                raise ConfigurationError(
                    f"{path} is not a Parquet file ({exc}); move it out of the journal folder or export again"
                ) from None
            events += meta.num_rows
            at = meta.schema.to_arrow_schema().get_field_index("at")
            for i in range(meta.num_row_groups):
                group = meta.row_group(i)
                if group.num_rows == 0:
                    continue
                stats = group.column(at).statistics if at >= 0 else None
                if stats is None or not stats.has_min_max:
                    known = False
                    continue
                top = stats.max if stats.max.tzinfo else stats.max.replace(tzinfo=UTC)
                latest = top if latest is None or top > latest else latest
    return events, latest if known else None
