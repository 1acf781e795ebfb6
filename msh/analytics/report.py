"""``msh report``: the delivery report of one or more journals, on Spark.

Reads the journal folders (:mod:`msh.analytics.columns`) together, computes the figures
(:mod:`msh.analytics.figures`) and the reconciliation (:mod:`msh.analytics.reconcile`), and writes under
the output folder one Parquet table per figure (``traffic/``, ``failures/``, ``attempts/``,
``reconciliation/``, ``messages/``), ``summary.json`` (the totals and the series the charts show) and
``report.html``, a self-contained page with inline SVG charts (:mod:`msh.analytics.html`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from msh.analytics import figures
from msh.analytics.dataset import check_journal_folders
from msh.analytics.generate import FAULT_CASES
from msh.analytics.html import render
from msh.analytics.reconcile import reconcile
from msh.errors import ConfigurationError

__all__ = ["ReportResult", "read_journals", "run_report", "spark_schema"]

TABLES = ("traffic", "failures", "attempts", "reconciliation", "messages")


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
    """The events of every journal folder, as one DataFrame (:class:`ConfigurationError` for a folder that
    holds no journal)."""
    check_journal_folders(list(folders))
    frames = []
    for folder in folders:
        frame = spark.read.schema(spark_schema()).parquet(str(folder / "day=*"))
        frames.append(frame.select(*spark_schema().fieldNames()))
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


_SUMS = ("sent", "received", "forwarded", "delivered", "failed_error", "failed_warning", "duplicates")


def summarise(
    traffic: DataFrame, sent: DataFrame, fails: DataFrame, tries: DataFrame, cases: DataFrame
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
    return {
        "sources": _rows(by_source.select("*", rate).orderBy("source")),
        "partners": _rows(by_partner.select("*", rate).orderBy("source", F.desc("sent"), "partner")),
        "days": _rows(by_day.orderBy("day")),
        "failures": _rows(cause.orderBy(F.desc("failures"), "severity", "cause")),
        "attempts": _rows(spread.orderBy("attempts")),
        "reconciliation": {
            "counts": {case: 0 for case in FAULT_CASES} | {r["case"]: r["messages"] for r in _rows(counts)},
            "rows": _rows(listed.limit(500)),
        },
    }


def run_report(
    spark: SparkSession,
    folders: Sequence[Path],
    out: Path,
    *,
    as_of: datetime | None = None,
    stage: Callable[[str], None] | None = None,
) -> ReportResult:
    """Compute the report of the journals in ``folders`` and write it under ``out`` (module docs)."""
    say = stage or (lambda _note: None)
    if out.exists() and not out.is_dir():
        raise ConfigurationError(f"{out} is a file; give a folder for the report (--out)")
    say("reading the journals")
    events = figures.prepare(read_journals(spark, folders))
    latest = events.agg(F.max("at").alias("latest"), F.count(F.lit(1)).alias("n")).collect()[0]
    if latest["n"] == 0:
        raise ConfigurationError("the journals hold no events; export again after some traffic")
    moment = as_of or latest["latest"].replace(tzinfo=UTC)
    say(f"computing the figures of {latest['n']:,} events")
    sent = figures.messages(events).cache()
    traffic = figures.traffic(events, sent, moment).cache()
    fails = figures.failures(events)
    tries = figures.attempts(sent)
    cases = reconcile(events, sent).cache()
    out.mkdir(parents=True, exist_ok=True)
    tables = {"traffic": traffic, "failures": fails, "attempts": tries, "reconciliation": cases, "messages": sent}
    for name, frame in tables.items():
        say(f"writing {name}")
        frame.coalesce(4 if name == "messages" else 1).write.mode("overwrite").parquet(str(out / name))
    say("summarising")
    summary = summarise(traffic, sent, fails, tries, cases)
    summary["meta"] = {
        "journals": [str(f) for f in folders],
        "events": latest["n"],
        "as_of": moment.astimezone(UTC).isoformat(),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    html = out / "report.html"
    html.write_text(render(summary), encoding="utf-8")
    for frame in (events, sent, traffic, cases):
        frame.unpersist()
    return ReportResult(out, html, summary)
