"""``msh report``: the delivery report of one or more journals, on Spark.

Reads the journal folders (:mod:`msh.analytics.columns`) together, computes the figures
(:mod:`msh.analytics.figures`), the cause underneath each DeliveryFailure (:mod:`msh.analytics.causes`)
and the reconciliation (:mod:`msh.analytics.reconcile`), and writes under the output folder one Parquet
table per figure (``traffic/``, ``failures/``, ``attempts/``, ``reconciliation/``, ``messages/``,
``failed/``: one row per failed message with its cause), ``summary.json`` (the totals and the series the
charts show) and ``report.html``, a self-contained page with inline SVG charts (:mod:`msh.analytics.html`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import partial
from pathlib import Path
from typing import Any, Final, TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from msh.analytics import causes, figures
from msh.analytics.dataset import check_journal_folders, journal_extent
from msh.analytics.generate import FAULT_CASES
from msh.analytics.html import render
from msh.analytics.reconcile import reconcile
from msh.errors import ConfigurationError

__all__ = ["ReportResult", "read_journals", "run_report", "side_by_side", "spark_schema"]

_T = TypeVar("_T")

TABLES = ("traffic", "failures", "attempts", "reconciliation", "messages", "failed")
LISTED: Final = 500
"""At most this many rows of a list (failed messages, reconciliation cases) in the summary and the page."""


@dataclass(frozen=True, slots=True)
class ReportResult:
    """Where the report went, and its summary (the figures the page shows)."""

    folder: Path
    html: Path
    summary: dict[str, Any]


def spark_schema() -> T.StructType:
    """The journal columns (:data:`msh.analytics.columns.SCHEMA`) as a Spark schema."""
    time = T.TimestampType()
    text = T.StringType()
    fields = [
        ("source", text, False),
        ("event_id", T.LongType(), False),
        ("at", time, False),
        ("kind", text, False),
        ("message_id", text, True),
        ("direction", text, True),
        ("role", text, True),
        ("cpa_id", text, True),
        ("from_party", text, True),
        ("to_party", text, True),
        ("service", text, True),
        ("action", text, True),
        ("conversation_id", text, True),
        ("size", T.LongType(), True),
        ("attempt", T.IntegerType(), True),
        ("severity", text, True),
        ("cause", text, True),
        ("deadline", time, True),
        ("detail", text, True),
    ]
    return T.StructType([T.StructField(name, kind, nullable) for name, kind, nullable in fields])


def read_journals(spark: SparkSession, folders: Sequence[Path]) -> DataFrame:
    """The events of every journal folder, as one DataFrame with the ``day`` of each (:class:`ConfigurationError`
    for a folder that holds no journal)."""
    check_journal_folders(list(folders))
    frames = []
    for folder in folders:
        # The day comes from the folder names (day=YYYY-MM-DD: the UTC day of ``at``), not computed per event.
        frame = spark.read.schema(spark_schema()).option("basePath", str(folder)).parquet(str(folder / "day=*"))
        frames.append(frame.select(*spark_schema().fieldNames(), F.col("day").cast(T.DateType()).alias("day")))
    journal = frames[0]
    for frame in frames[1:]:
        journal = journal.unionByName(frame)
    return journal


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [_plain(row.asDict()) for row in frame.collect()]


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, datetime):
            value = value.astimezone(UTC).isoformat() if value.tzinfo else value.replace(tzinfo=UTC).isoformat()
        elif isinstance(value, date):
            value = value.isoformat()
        out[key] = value
    return out


def _percentiles(frame: DataFrame, *keys: str) -> DataFrame:
    p = F.percentile(F.col("latency_s"), F.array(F.lit(0.5), F.lit(0.95), F.lit(0.99)))
    return (
        frame.groupBy(*keys)
        .agg(p.alias("p"))
        .select(
            *keys,
            F.col("p")[0].alias("latency_p50_s"),
            F.col("p")[1].alias("latency_p95_s"),
            F.col("p")[2].alias("latency_p99_s"),
        )
    )


_SUMS = (
    "sent",
    "received",
    "forwarded",
    "delivered",
    "unacknowledged",
    "failed_error",
    "failed_warning",
    "expired",
    "duplicates",
)


def summarise(
    traffic: DataFrame, sent: DataFrame, fails: DataFrame, tries: DataFrame, cases: DataFrame, failed: DataFrame
) -> dict[str, Any]:
    """The totals and series the page shows, computed on Spark and collected (they are small)."""
    sums = [F.sum(name).alias(name) for name in (*_SUMS, "pending", "overdue")]
    rate = F.when(F.col("sent") > 0, F.col("delivered") / F.col("sent")).alias("delivery_rate")
    by_source = traffic.groupBy("source").agg(*sums).join(_percentiles(sent, "source"), "source", "left")
    by_partner = (
        traffic.groupBy("source", "partner")
        .agg(*sums)
        .join(_percentiles(sent, "source", "partner"), ["source", "partner"], "left")
    )
    by_day = traffic.groupBy("day").agg(*sums)
    cause = fails.groupBy("severity", "cause").agg(F.sum("failures").alias("failures"))
    spread = tries.groupBy("attempts").agg(F.sum("messages").alias("messages"))
    counts = cases.groupBy("case").agg(F.count(F.lit(1)).alias("messages"))
    listed = cases.orderBy("case", "message_id")
    underneath = failed.groupBy("reason", "headline").agg(F.count(F.lit(1)).alias("messages"))
    frames = {
        "sources": by_source.select("*", rate).orderBy("source"),
        "partners": by_partner.select("*", rate).orderBy("source", F.desc("sent"), "partner"),
        "days": by_day.orderBy("day"),
        "failures": cause.orderBy(F.desc("failures"), "severity", "cause"),
        "attempts": spread.orderBy("attempts"),
        "counts": counts,
        "listed": listed.limit(LISTED),
        "causes": underneath.orderBy(F.desc("messages"), "headline"),
        "failed": failed.orderBy(F.desc("failed_at"), "message_id").limit(LISTED),
    }
    got = side_by_side({name: partial(_rows, frame) for name, frame in frames.items()})
    reconciliation = {
        "counts": {case: 0 for case in FAULT_CASES} | {r["case"]: r["messages"] for r in got.pop("counts")},
        "rows": got.pop("listed"),
    }
    return got | {"reconciliation": reconciliation}


def side_by_side(jobs: dict[str, Callable[[], _T]]) -> dict[str, _T]:
    """Run independent Spark jobs from threads of their own, so that the stages of one use the cores the
    few-task stages of another (a final merge, a single group's percentiles) leave idle; their results by
    name, in the order given (the first failure is raised)."""
    with ThreadPoolExecutor(max_workers=len(jobs) or 1, thread_name_prefix="spark-job") as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


def run_report(
    spark: SparkSession,
    folders: Sequence[Path],
    out: Path,
    *,
    as_of: datetime | None = None,
    stage: Callable[[str], None] | None = None,
    console_url: str | None = None,
) -> ReportResult:
    """Compute the report of the journals in ``folders`` and write it under ``out`` (module docs); with
    ``console_url`` (the web console's base URL) the page links each failed message to its history there."""
    say = stage or (lambda _note: None)
    if out.exists() and not out.is_dir():
        raise ConfigurationError(f"{out} is a file; give a folder for the report (--out)")
    say("reading the journals")
    count, latest = journal_extent(list(folders))
    if count == 0:
        raise ConfigurationError("the journals hold no events; export again after some traffic")
    journal = read_journals(spark, folders)
    events = figures.prepare(journal)
    if latest is None:  # files without statistics (not written by msh): computed instead
        latest = events.agg(F.max("at").alias("latest")).collect()[0]["latest"].replace(tzinfo=UTC)
    moment = as_of or latest
    say(f"computing the figures of {count:,} events")
    out.mkdir(parents=True, exist_ok=True)

    def written(name: str, frame: DataFrame, files: int = 1) -> DataFrame:
        # Each table is computed once, written, and read back by what builds on it (no in-memory cache:
        # building one costs more than reading the Parquet just written).
        frame.coalesce(files).write.mode("overwrite").parquet(str(out / name))
        return spark.read.parquet(str(out / name))

    say("writing messages")
    sent = written("messages", figures.messages(events), 4)
    # The other tables build on the messages only: computed side by side.
    say("writing traffic, failures and their causes, attempts and reconciliation")
    jobs: dict[str, Callable[[], DataFrame]] = {
        "traffic": partial(written, "traffic", figures.traffic(events, sent, moment)),
        "failures": partial(written, "failures", figures.failures(events)),
        "attempts": partial(written, "attempts", figures.attempts(sent)),
        "reconciliation": lambda: written("reconciliation", reconcile(events, sent)),
        "failed": lambda: written("failed", causes.failed_messages(journal, sent)),
    }
    tables = side_by_side(jobs)
    traffic, fails, tries, cases = (tables[name] for name in ("traffic", "failures", "attempts", "reconciliation"))
    say("summarising")
    summary = summarise(traffic, sent, fails, tries, cases, tables["failed"])
    summary["meta"] = {
        "journals": [str(f) for f in folders],
        "events": count,
        "as_of": moment.astimezone(UTC).isoformat(),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "console_url": console_url,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    html = out / "report.html"
    html.write_text(render(summary, console_url=console_url), encoding="utf-8")
    return ReportResult(out, html, summary)
