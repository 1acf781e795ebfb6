"""The end of the demos: both partners' journals exported and the delivery report run on them.

Each store's journal is exported as Parquet (:mod:`msh.analytics.export`), then the report
(:mod:`msh.analytics.report`) reads both journals together, so its reconciliation compares what the
sender and the receiver each recorded. Where Spark cannot run (no pyspark, pyarrow or Java) the demo says
so and goes on: the analytics are optional.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msh.store.api import Store

if TYPE_CHECKING:
    from msh.analytics.report import ReportResult

__all__ = ["export_and_report", "report_on_demo"]


def export_and_report(
    journals: Sequence[tuple[str, Store]], out: Path, *, master: str = "local[2]", spark: Any = None
) -> ReportResult | None:
    """Export each ``(party, store)`` journal under ``out`` and run the report on them (on ``spark``, else
    on a session of its own on ``master``); the report (its HTML page's path printed), or None (with the
    reason printed) when Spark cannot run here."""
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
    return report


def report_on_demo(partners: Sequence[tuple[Path, Path]], *, env: dict[str, str] | None = None) -> ReportResult | None:
    """The end of a demo whose MSH processes have stopped: each ``(settings file, store file)`` journal
    exported and the report run on them all, in a folder of its own that outlives the demo's work folder;
    the report (None where Spark cannot run, said on the way)."""
    from msh.engine.signals import party_text
    from msh.runtime.config import load_settings
    from msh.store import open_store

    out = Path(tempfile.mkdtemp(prefix="msh-demo-report-"))
    stores: list[tuple[str, Store]] = []
    try:
        for config, path in partners:
            identity = load_settings(config, env=env).identity
            stores.append((party_text(identity.party_id, identity.party_id_type), open_store(str(path), migrate=False)))
        return export_and_report(stores, out)
    finally:
        for _party, store in stores:
            store.close()
