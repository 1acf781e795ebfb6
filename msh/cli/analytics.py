"""The delivery analytics commands (:mod:`msh.analytics`): ``msh export``, ``msh report`` and
``msh journal generate``. Each shows its progress on a terminal; pyarrow and pyspark come with the
``analytics`` extra, and a missing one is said in one line."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from msh.cli.common import Subcommands, add_command, positive_int
from msh.errors import ConfigurationError

__all__ = ["add_analytics_commands", "add_revalidate_command", "console_url", "moment"]

LOG_LEVELS = ("fatal", "error", "warn", "info", "debug")
"""Spark's log levels for ``msh report --log-level`` (:data:`msh.analytics.session.LOG_LEVELS`; not
imported from there: the command line loads pyspark only when a Spark command runs)."""


def console_url(text: str) -> str:
    """The web console's base URL: http or https, with a host; no query or fragment."""
    parsed = urlsplit(text.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.query or parsed.fragment:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not the console's base URL: write http(s)://HOST:PORT[/PATH], e.g. http://127.0.0.1:8090"
        )
    return text.strip().rstrip("/")


def moment(text: str) -> datetime:
    """An ISO 8601 date or date-time (``2026-11-01``, ``2026-11-01T12:00:00Z``); UTC when no offset."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: write an ISO 8601 date or date-time, e.g. 2026-11-01 or 2026-11-01T12:00:00Z"
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _export(args: argparse.Namespace) -> int:
    from msh.analytics.needs import require

    require("pyarrow")
    from msh.analytics.export import export_journal
    from msh.analytics.progress import Progress
    from msh.engine.signals import party_text
    from msh.runtime.config import load_settings
    from msh.store import open_store

    settings = load_settings(args.config)
    source = party_text(settings.identity.party_id, settings.identity.party_id_type)
    progress = Progress("exporting events")
    store = open_store(settings.store.url)
    try:
        result = export_journal(
            store,
            source,
            Path(args.out),
            since=args.since,
            until=args.until,
            chunk=args.chunk,
            workers=args.workers,
            progress=lambda done, _last: progress.update(done),
        )
    finally:
        store.close()
        progress.done()
    print(
        f"exported {result.events:,} new event(s) of {source} into {result.files} file(s) under {result.folder} "
        f"(journal read up to event {result.up_to_id})"
    )
    return 0


def _report(args: argparse.Namespace) -> int:
    from msh.analytics.needs import spark_missing

    missing = spark_missing()
    if missing is not None:
        raise ConfigurationError(f"the report runs on Spark, which cannot run here: {missing}")
    from msh.analytics.dataset import check_journal_folders
    from msh.analytics.progress import Progress
    from msh.analytics.report import run_report
    from msh.analytics.session import spark_session

    check_journal_folders([Path(p) for p in args.journals])
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise ConfigurationError(f"{args.out} is a file; give a folder for the report (--out)")
    progress = Progress("report")
    progress.stage(f"starting Spark ({args.master})")
    level = args.log_level or ("warn" if getattr(args, "debug", False) else "fatal")
    spark = spark_session(args.master, shuffle_partitions=args.shuffle_partitions, log_level=level)
    try:
        with _spark_failures("the report"):
            result = run_report(
                spark,
                [Path(p) for p in args.journals],
                Path(args.out),
                as_of=args.as_of,
                stage=progress.stage,
                console_url=args.console_url,
            )
    finally:
        progress.done()
        spark.stop()
    counts = result.summary["reconciliation"]["counts"]
    found = ", ".join(f"{case} {n}" for case, n in counts.items())
    causes = result.summary["causes"]
    print(f"report of {result.summary['meta']['events']:,} events written under {result.folder}")
    if causes:
        failed = sum(int(c["messages"]) for c in causes)
        print(f"failed messages: {failed:,}; " + ", ".join(f"{c['headline']} {c['messages']:,}" for c in causes))
    print(f"reconciliation: {found}")
    print(f"HTML report: {result.html}")
    return 0


def _generate(args: argparse.Namespace) -> int:
    from msh.analytics.needs import require

    require("pyarrow")
    from msh.analytics.generate import generate_journal
    from msh.analytics.progress import Progress

    progress = Progress("generating events")
    try:
        result = generate_journal(
            args.events,
            Path(args.out),
            seed=args.seed,
            partners=args.partners,
            days=args.days,
            faults_per_case=args.faults,
            progress=lambda done, total: progress.update(done, total),
        )
    finally:
        progress.done()
    planted = ", ".join(f"{case} {len(ids)}" for case, ids in result.faults.items())
    print(
        f"generated {result.events:,} events of {result.messages:,} messages in {result.files} file(s) under {args.out}"
    )
    print(f"planted faults (listed in {Path(args.out) / 'faults.json'}): {planted}")
    return 0


def add_analytics_commands(sub: Subcommands) -> None:
    """Add ``msh export``, ``msh report`` and ``msh journal generate``."""
    export = add_command(
        sub,
        "export",
        _export,
        config=True,
        help="write the store's journal as Parquet files, by day",
        description=(
            "Write the journal of the MSH's store (every lifecycle event of every message) as Parquet files "
            "under DIR, one folder per day (day=YYYY-MM-DD). Incremental: a second run writes only the events "
            "that are new; idempotent: running the same range again writes nothing twice (what was covered is "
            "kept in DIR/_export). The store is read in bounded chunks, several side by side by worker "
            "processes (--workers). Needs the analytics extra (pyarrow and the ADBC drivers)."
        ),
    )
    export.add_argument("--out", required=True, metavar="DIR", help="folder of the journal files (made if absent)")
    export.add_argument("--since", type=moment, metavar="TIME", help="only events at or after TIME (ISO 8601)")
    export.add_argument("--until", type=moment, metavar="TIME", help="only events before TIME (ISO 8601)")
    export.add_argument(
        "--chunk", type=positive_int, default=100_000, metavar="N", help="events read per chunk (default 100000)"
    )
    export.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="worker processes reading and writing chunks side by side (default: one per core, at most 4)",
    )

    report = add_command(
        sub,
        "report",
        _report,
        help="the delivery report of journals, on Spark",
        description=(
            "Read one or more journal folders (msh export, msh journal generate) and compute on Spark, per "
            "agreement, partner, service, action and day: volumes, delivery rate, DeliveryFailures by severity "
            "and cause, transmissions per message, duplicates eliminated, latency to the end-to-end "
            "acknowledgment (p50/p95/p99), pending and overdue messages; and, across the journals of both "
            "partners (or sender, intermediary and receiver), the reconciliation cases (a message the receiver "
            "refused is said to be refused by the receiver). Each failed message's cause underneath its "
            "DeliveryFailure (refused by the partner with its errorCode, SecurityFailure, partner unreachable "
            "at its URL, TimeToLive expired, never acknowledged) is listed with its MessageId, partner, "
            "agreement, service and action. Writes Parquet tables, summary.json and report.html (self-contained, "
            "opens offline) under DIR. Spark prints nothing but fatal errors unless --log-level says otherwise. "
            "Needs Java 17 and the analytics extra."
        ),
    )
    report.add_argument("journals", nargs="+", metavar="JOURNAL_DIR", help="journal folders read together")
    report.add_argument("--out", required=True, metavar="DIR", help="folder of the report (made if absent)")
    report.add_argument(
        "--master",
        default="local[2]",
        metavar="URL",
        help="Spark master: local[N] (default local[2]), spark://HOST:PORT, yarn",
    )
    report.add_argument(
        "--as-of",
        type=moment,
        default=None,
        metavar="TIME",
        help="when pending and overdue are judged (default: the latest event)",
    )
    report.add_argument(
        "--shuffle-partitions", type=positive_int, default=8, metavar="N", help="Spark shuffle partitions (default 8)"
    )
    report.add_argument(
        "--console-url",
        type=console_url,
        metavar="URL",
        help="the MSH web console's base URL (e.g. http://127.0.0.1:8090): each failed message's MessageId "
        "links to URL/messages/MESSAGEID, its history there (default: no links)",
    )
    report.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=None,
        help="Spark's log level (default fatal: nothing but the command's own lines; --debug means warn); "
        "above fatal, the JVM's start-up lines are shown too",
    )

    journal = sub.add_parser(
        "journal", help="synthetic journals for tests and benchmarks", description="Work with journal files."
    )
    journal_sub = journal.add_subparsers(dest="journal_command", metavar="COMMAND", required=True)
    generate = add_command(
        journal_sub,
        "generate",
        _generate,
        help="write a realistic synthetic journal with planted faults",
        description=(
            "Write the journals of a hub MSH, its partners (skewed volumes) and an intermediary as one journal "
            "folder: retries, DeliveryFailures, duplicates, pending and overdue messages, and reconciliation "
            "faults planted at known messages, listed in DIR/faults.json. The same --seed gives the same journal."
        ),
    )
    generate.add_argument("--events", type=positive_int, required=True, metavar="N", help="about how many events")
    generate.add_argument("--out", required=True, metavar="DIR", help="folder of the journal (new or empty)")
    generate.add_argument("--seed", type=int, default=14, help="random seed (default 14)")
    generate.add_argument("--partners", type=positive_int, default=40, metavar="N", help="partners (default 40)")
    generate.add_argument("--days", type=positive_int, default=30, metavar="N", help="days spanned (default 30)")
    generate.add_argument(
        "--faults", type=positive_int, default=5, metavar="N", help="planted faults per reconciliation case (default 5)"
    )
    add_revalidate_command(sub)


@contextlib.contextmanager
def _spark_failures(what: str) -> Iterator[None]:
    """A Spark job that fails on its input (an unreadable Parquet file, a folder that is not a journal)
    becomes one line saying so."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    try:
        yield
    except (PySparkException, Py4JJavaError) as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        causes = [line for line in lines if line.startswith("Caused by:")]
        first = (causes[-1].removeprefix("Caused by:").strip() if causes else None) or next(
            (line.lstrip(": ") for line in lines if "Exception:" in line), lines[0] if lines else type(exc).__name__
        )
        raise ConfigurationError(
            f"{what} failed on Spark: {first[:400]}; check that the input folders hold files written by msh "
            "(msh export, msh journal generate); --debug shows the traceback"
        ) from None


def _revalidate(args: argparse.Namespace) -> int:
    from msh.analytics.needs import spark_missing

    missing = spark_missing()
    if missing is not None:
        raise ConfigurationError(f"revalidation runs on Spark, which cannot run here: {missing}")
    from msh.analytics.progress import Progress
    from msh.analytics.revalidate import list_items, revalidate
    from msh.analytics.session import spark_session

    list_items(args.archives)  # a missing archive is said before Spark starts
    progress = Progress("revalidate")
    progress.stage(f"starting Spark ({args.master})")
    spark = spark_session(args.master)
    try:
        progress.stage("checking the stored messages")
        with _spark_failures("the revalidation"):
            result = revalidate(spark, args.archives, args.cpa, Path(args.out))
    finally:
        progress.done()
        spark.stop()
    print(f"checked {result.messages:,} message(s): {result.violations:,} violation(s)")
    print(f"violations: {result.parquet} (Parquet), {result.csv} (CSV)")
    return 1 if result.violations else 0


def add_revalidate_command(sub: Subcommands) -> None:
    """Add ``msh revalidate``."""
    command = add_command(
        sub,
        "revalidate",
        _revalidate,
        help="check stored messages again (schema, agreement, signature), on Spark",
        description=(
            "Check every message of the archives again, in parallel on Spark: its envelope and MIME package "
            "against the ebMS schemas, its header against the agreements given with --cpa, and its signature "
            "as the agreement asks. An ARCHIVE is a store (SQLite file or store URL: every message it received, "
            "sent or forwarded), a folder of message files, or one message file. Writes one row per violation "
            "as Parquet and CSV under --out. Exit status 0 when nothing is wrong, 1 when a violation was found."
        ),
    )
    command.add_argument("archives", nargs="+", metavar="ARCHIVE", help="stores, folders or files of messages")
    command.add_argument("--cpa", action="append", required=True, metavar="FILE", help="an agreement (repeat)")
    command.add_argument("--out", required=True, metavar="DIR", help="folder of the violation tables")
    command.add_argument(
        "--master", default="local[2]", metavar="URL", help="Spark master (default local[2]), e.g. spark://HOST:PORT"
    )
