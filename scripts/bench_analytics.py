"""Benchmark of the delivery analytics: a synthetic journal of N events (10 million by default) in an SQLite
store, exported to Parquet (``msh export``) and reported on Spark (``msh report``), wall time and events/s
from the start of the export to the end of the report, Spark start-up included; then the report alone
with ``local[1]`` and ``local[2]``, to show how it scales with cores.

Usage: .venv/bin/python scripts/bench_analytics.py [--events N] [--work DIR] [--repeat R] [--keep] [--reuse]
       [--postgres URL]

Set-up (not timed in the figure): ``msh journal generate`` writes the journal, which is then loaded into
the ``events`` table of a fresh SQLite store (one store holds the events of every generated MSH: the
export labels them all with the store's party, the report's figures are the same kind of work). Each
report runs as its own ``msh report`` process, so each pays for its own Spark start-up. Prints one line
per step and the medians over ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from msh.analytics.export_chunk import libpq_url  # noqa: E402
from msh.analytics.generate import generate_journal  # noqa: E402
from msh.store import open_store  # noqa: E402

_COLUMNS = (
    "at",
    "message_id",
    "direction",
    "kind",
    "detail",
    "role",
    "cpa_id",
    "from_party",
    "to_party",
    "service",
    "action",
    "conversation_id",
    "size",
    "attempt",
    "severity",
    "cause",
    "deadline",
)


def _sqlite_time(value: object) -> str | None:
    if value is None:
        return None
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")  # type: ignore[attr-defined]


def load_store(journal: Path, db: Path) -> int:
    """Load the generated journal into the events table of a new SQLite store; the number of events."""
    import pyarrow.dataset as ds

    open_store(str(db)).close()  # creates the schema (newest revision)
    files = sorted(str(p) for p in journal.glob("day=*/*.parquet"))
    dataset = ds.dataset(files, format="parquet")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    placeholders = ", ".join("?" for _ in _COLUMNS)
    statement = f"INSERT INTO events ({', '.join(_COLUMNS)}) VALUES ({placeholders})"
    total = 0
    # In time order, as an MSH appends them.
    table = dataset.to_table().sort_by([("at", "ascending")])
    for batch in table.to_batches(max_chunksize=200_000):
        cols = batch.to_pydict()
        rows = zip(
            [_sqlite_time(v) for v in cols["at"]],
            cols["message_id"],
            cols["direction"],
            cols["kind"],
            cols["detail"],
            cols["role"],
            cols["cpa_id"],
            cols["from_party"],
            cols["to_party"],
            cols["service"],
            cols["action"],
            cols["conversation_id"],
            cols["size"],
            cols["attempt"],
            cols["severity"],
            cols["cause"],
            [_sqlite_time(v) for v in cols["deadline"]],
            strict=True,
        )
        conn.executemany(statement, rows)
        conn.commit()
        total += batch.num_rows
    conn.close()
    return total


def load_postgres(journal: Path, url: str) -> int:
    """Load the generated journal into the events table of a new store at ``url`` (a PostgreSQL schema of
    its own): bulk-loaded by ADBC into a staging table, then inserted in time order with SQL casts."""
    import adbc_driver_postgresql.dbapi as adbc
    import pyarrow.dataset as ds

    open_store(url).close()  # creates the schema's tables (newest revision)
    files = sorted(str(p) for p in journal.glob("day=*/*.parquet"))
    table = ds.dataset(files, format="parquet").to_table(columns=list(_COLUMNS))
    with adbc.connect(libpq_url(url)) as conn, conn.cursor() as cursor:
        cursor.adbc_ingest("bench_staging", table, mode="replace")
        names = ", ".join(_COLUMNS)
        values = ", ".join("CAST(detail AS JSONB)" if c == "detail" else c for c in _COLUMNS)
        cursor.execute(f"INSERT INTO events ({names}) SELECT {values} FROM bench_staging ORDER BY at")
        cursor.execute("DROP TABLE bench_staging")
        conn.commit()
    return table.num_rows


def _postgres_schema(url: str) -> tuple[str, str]:
    """A new schema in the database at ``url``: its name and the URL whose connections use it."""
    import uuid

    import psycopg

    schema = f"msh_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in url else "?"
    return schema, f"{url}{separator}options=-csearch_path%3D{schema}"


def _drop_postgres_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _config(work: Path, db: Path | str) -> Path:
    config = work / "bench.toml"
    config.write_text(
        f'[identity]\nparty_id = "urn:msh:bench"\n\n[agreements]\npaths = ["{ROOT / "samples/cpas/demo-a-b.xml"}"]\n\n'
        f'[server]\ntls = false\n\n[store]\nurl = "{db}"\n',
        encoding="utf-8",
    )
    return config


def _run(args: list[str]) -> float:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "msh.cli", *args], capture_output=True, text=True)
    took = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"msh {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000, help="events in the journal (default 10 million)")
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each timed step (default 1)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument(
        "--postgres", metavar="URL", help="load and export a PostgreSQL store (a new schema of URL) instead of SQLite"
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="use the store a kept --work folder holds (skips the set-up; --events ignored)",
    )
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="msh-bench-analytics-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        db: Path | str = work / "store.db"
        schema = None
        if args.postgres:
            if args.reuse:
                raise SystemExit("--reuse is for the SQLite store of a kept --work folder, not --postgres")
            schema, db = _postgres_schema(args.postgres)
            t = time.monotonic()
            generated = generate_journal(args.events, work / "generated")
            print(f"set-up: generated {generated.events:,} events in {time.monotonic() - t:.1f} s", flush=True)
            t = time.monotonic()
            loaded = load_postgres(work / "generated", db)
            print(f"set-up: loaded {loaded:,} events into PostgreSQL schema {schema} in {time.monotonic() - t:.1f} s")
        elif args.reuse and isinstance(db, Path) and db.exists():
            with sqlite3.connect(db) as conn:
                loaded = int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])
            print(f"set-up: reusing {loaded:,} events in {db}", flush=True)
        else:
            t = time.monotonic()
            generated = generate_journal(args.events, work / "generated")
            print(f"set-up: generated {generated.events:,} events in {time.monotonic() - t:.1f} s", flush=True)
            t = time.monotonic()
            loaded = load_store(work / "generated", db)
            print(f"set-up: loaded {loaded:,} events into {db} in {time.monotonic() - t:.1f} s", flush=True)
        config = _config(work, db)
        totals: list[float] = []
        exports: list[float] = []
        reports: dict[str, list[float]] = {"local[1]": [], "local[2]": []}
        for run in range(args.repeat):
            out = work / f"export-{run}"
            for old in (out, work / f"report-{run}", work / f"report1-{run}"):
                shutil.rmtree(old, ignore_errors=True)  # a reused folder's earlier runs
            exported = _run(["export", "--config", str(config), "--out", str(out)])
            reported = _run(["report", str(out), "--out", str(work / f"report-{run}"), "--master", "local[2]"])
            exports.append(exported)
            reports["local[2]"].append(reported)
            totals.append(exported + reported)
            print(
                f"run {run + 1}: export {exported:.1f} s, report local[2] {reported:.1f} s, "
                f"export-to-report {exported + reported:.1f} s = {loaded / (exported + reported):,.0f} events/s",
                flush=True,
            )
            one = _run(["report", str(out), "--out", str(work / f"report1-{run}"), "--master", "local[1]"])
            reports["local[1]"].append(one)
            print(f"run {run + 1}: report local[1] {one:.1f} s", flush=True)
        total = statistics.median(totals)
        print(
            f"median export: {statistics.median(exports):.1f} s ({loaded / statistics.median(exports):,.0f} events/s)"
        )
        for master, times in reports.items():
            median = statistics.median(times)
            print(f"median report {master} (Spark start-up included): {median:.1f} s ({loaded / median:,.0f} events/s)")
        rate = loaded / total
        print(f"median export-to-report (local[2]): {total:.1f} s = {rate:,.0f} events/s")
        if loaded >= 10_000_000:
            print(f"target 100,000 events/s: {'met' if rate >= 100_000 else 'NOT met'} ({rate / 100_000:.2f}x)")
        else:  # Spark's start-up and each job's fixed cost weigh more on a smaller journal
            print(f"(the target of 100,000 events/s is for 10 million events; this run had {loaded:,})")
    finally:
        if args.postgres and schema is not None:
            _drop_postgres_schema(args.postgres, schema)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
