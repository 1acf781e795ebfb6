"""Every figure of the Spark report against the plain-Python reference (tests.support.journal_reference),
over a small generated journal with planted faults; and the reconciliation finds exactly the planted ones."""

from __future__ import annotations

import json
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from lxml import html as lxml_html

from msh.analytics.generate import FAULT_CASES
from tests.support.journal_reference import compute, read_events


def _table(folder: Path) -> list[dict[str, Any]]:
    rows = ds.dataset(str(folder), format="parquet").to_table().to_pylist()
    for row in rows:
        for name, value in row.items():
            if isinstance(value, date) and not isinstance(value, datetime):
                row[name] = value.isoformat()
    return rows


_KEY = ("source", "cpa_id", "partner", "service", "action", "day")


@pytest.fixture(scope="module")
def reference(journal: Path) -> Any:
    return compute(read_events(journal))


def test_traffic_figures_match_the_plain_python_computation(report: Any, reference: Any) -> None:
    spark_rows = {tuple(r[k] for k in _KEY): r for r in _table(report.folder / "traffic")}
    assert set(spark_rows) == set(reference.traffic)
    assert len(spark_rows) > 50  # many keys: partners x services x actions x days x journals
    for key, expected in reference.traffic.items():
        got = spark_rows[key]
        for name, value in expected.items():
            if value is None or isinstance(value, float):
                assert got[name] == pytest.approx(value, abs=1e-9), (key, name)
            else:
                assert got[name] == value, (key, name)


def test_the_journal_has_what_the_figures_are_about(reference: Any) -> None:
    # The generated journal exercises every figure (else the comparison above would prove little).
    totals = reference.totals
    assert min(totals.values()) > 0, totals
    assert any(row["latency_p99_s"] != row["latency_p50_s"] for row in reference.traffic.values())


def test_failures_by_severity_and_cause(report: Any, reference: Any) -> None:
    got = {
        (*(r[k] for k in _KEY), r["severity"], r["cause"]): r["failures"] for r in _table(report.folder / "failures")
    }
    assert got == dict(reference.failures)
    assert {k[-2] for k in got} == {"Error", "Warning"}


def test_distribution_of_attempts(report: Any, reference: Any) -> None:
    got = {(*(r[k] for k in _KEY), r["attempts"]): r["messages"] for r in _table(report.folder / "attempts")}
    assert got == dict(reference.attempts)
    assert {k[-1] for k in got} >= {1, 2, 3, 4}


def test_reconciliation_finds_each_planted_fault_and_nothing_else(report: Any, reference: Any, journal: Path) -> None:
    planted = json.loads((journal / "faults.json").read_text())["faults"]
    rows = _table(report.folder / "reconciliation")
    got: dict[str, set[str]] = {case: set() for case in FAULT_CASES}
    for row in rows:
        got[row["case"]].add(row["message_id"])
    assert got == {case: set(planted[case]) for case in FAULT_CASES}
    assert got == {case: reference.cases.get(case, set()) for case in FAULT_CASES}
    assert all(len(ids) == 3 for ids in got.values())
    # The messages to partners behind the intermediary name it.
    assert {r["message_id"]: r["forwarded_by"] for r in rows if r["forwarded_by"]} == reference.forwarded_by
    assert reference.forwarded_by  # some planted faults are on relayed messages
    assert report.summary["reconciliation"]["counts"] == {case: 3 for case in FAULT_CASES}


def test_reconciliation_judges_only_partners_whose_journal_is_read(spark: Any, journal: Path, tmp_path: Path) -> None:
    """With the hub's journal alone, nothing sent by the hub can be judged missing at the partners."""
    from msh.analytics.report import run_report

    hub_only = tmp_path / "hub"
    table = ds.dataset(sorted(str(p) for p in journal.glob("day=*/*.parquet")), format="parquet").to_table()
    table = table.filter(pc.equal(table.column("source"), "urn:msh:hub"))
    (hub_only / "day=2026-10-01").mkdir(parents=True)
    pq.write_table(table, hub_only / "day=2026-10-01" / "part.parquet")
    result = run_report(spark, [hub_only], tmp_path / "out")
    expected = compute(read_events(hub_only))
    got: dict[str, set[str]] = {}
    for row in _table(tmp_path / "out" / "reconciliation"):
        got.setdefault(row["case"], set()).add(row["message_id"])
    assert got == {case: ids for case, ids in expected.cases.items() if ids}
    assert "sent_not_received" not in got and "acked_not_delivered" not in got
    assert result.summary["meta"]["events"] == table.num_rows


def test_summary_totals_and_the_html_page(report: Any, reference: Any) -> None:
    sources = report.summary["sources"]
    for name, total in reference.totals.items():
        assert sum(int(s[name] or 0) for s in sources) == total, name
    page = report.html.read_text()
    for name, total in reference.totals.items():
        assert f'data-figure="total-{name}">{total:,}<' in page
    # No attribute that makes a browser fetch or go anywhere (the failed messages' endpoint URLs are text).
    dom = lxml_html.fromstring(page)
    assert not dom.xpath("//@src | //@href | //@action | //@data | //@srcset | //@poster | //@background")
    assert "url(" not in page and "@import" not in page
    assert "<script" not in page and "<link" not in page


def test_a_broken_journal_file_is_one_clear_error(spark: Any, tmp_path: Path) -> None:
    from msh.analytics.report import run_report
    from msh.cli.analytics import _spark_failures
    from msh.errors import ConfigurationError

    broken = tmp_path / "j" / "day=2026-01-01"
    broken.mkdir(parents=True)
    (broken / "part.parquet").write_bytes(b"garbage")
    expected = r"day=2026-01-01/part\.parquet is not a Parquet file \(.*\); move it out of the journal folder"
    with pytest.raises(ConfigurationError, match=expected), _spark_failures("the report"):
        run_report(spark, [tmp_path / "j"], tmp_path / "out")
