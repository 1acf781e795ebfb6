"""The end of the demos: both partners' journals exported and the delivery report run on them.

Each store's journal is exported as Parquet (:mod:`msh.analytics.export`), then the report
(:mod:`msh.analytics.report`) reads both journals together, so its reconciliation compares what the
sender and the receiver each recorded. Where Spark cannot run (no pyspark, pyarrow or Java) the demo says
so and goes on: the analytics are optional.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from msh.store.api import Store

__all__ = ["export_and_report"]


def export_and_report(
    journals: Sequence[tuple[str, Store]], out: Path, *, master: str = "local[2]", spark: Any = None
) -> Path | None:
    """Export each ``(party, store)`` journal under ``out`` and run the report on them (on ``spark``, else
    on a session of its own on ``master``); the HTML report's path, or None (with the reason printed)
    when Spark cannot run here."""
    from msh.analytics.needs import spark_missing

    missing = spark_missing()
    if missing is not None:
        print(f"\ndelivery analytics skipped: {missing}")
        return None
    from msh.analytics.export import export_journal
    from msh.analytics.report import run_report
    from msh.analytics.session import spark_session

    folders = []
    print("\ndelivery analytics (Spark):")
    for index, (party, store) in enumerate(journals):
        folder = out / f"journal-{index + 1}"
        result = export_journal(store, party, folder)
        print(f"  exported {result.events} events of {party}'s journal to {folder}")
        folders.append(folder)
    session = spark or spark_session(master, shuffle_partitions=2)
    try:
        report = run_report(session, folders, out / "report")
    finally:
        if spark is None:
            session.stop()
    counts = report.summary["reconciliation"]["counts"]
    disagreements = sum(counts.values())
    print(
        f"  report of {report.summary['meta']['events']} events; reconciliation of the journals: "
        + ("they agree" if disagreements == 0 else ", ".join(f"{c} {n}" for c, n in counts.items() if n))
    )
    print(f"  HTML report: {report.html}")
    return report.html
