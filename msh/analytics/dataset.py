"""Writing journal files: one Parquet file per day and chunk, written whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from msh.analytics.columns import SCHEMA, day_of
from msh.errors import ConfigurationError

__all__ = ["check_journal_folders", "journal_files", "write_days"]


def write_days(table: pa.Table, out: Path, name: str) -> int:
    """Write ``table`` (columns :data:`SCHEMA`) under ``out`` as ``day=YYYY-MM-DD/NAME.parquet``, one file
    per day it spans; each file is written beside and renamed into place, so a reader never sees half a
    file and writing the same ``name`` again replaces it (idempotent). Returns the number of files."""
    table = table.cast(SCHEMA)
    days = day_of(table)
    written = 0
    for day in pc.unique(days).to_pylist():
        part = table.filter(pc.equal(days, day))
        folder = out / f"day={day}"
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
