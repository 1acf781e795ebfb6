"""The HTML report rendered in headless Chromium, offline: its charts are there with their bars and points,
and the figures it shows are the report's (checked against the plain-Python reference)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from lxml import html as lxml_html

from msh.analytics.generate import FAULT_CASES
from tests.support.journal_reference import compute, read_events

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no headless Chromium here (scripts/test installs the Debian package chromium)"
)


def _render(page: Path, tmp_path: Path) -> Any:
    """The DOM of ``page`` after Chromium loaded and laid it out, with every network request refused."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            # Any host name resolves to nothing: a page that fetched anything would show it broken.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<svg" in done.stdout
    return lxml_html.fromstring(done.stdout)


def test_the_report_page_renders_its_charts_and_figures(report: Any, journal: Path, tmp_path: Path) -> None:
    dom = _render(report.html, tmp_path)
    assert dom.xpath("//body/@data-report") == ["msh-delivery"]
    charts = {svg.get("data-chart"): svg for svg in dom.xpath("//svg[@data-chart]")}
    assert set(charts) == {
        *("daily-volume", "delivery-rate", "latency-p95", "failures", "failure-causes", "attempts", "reconciliation"),
    }
    reference = compute(read_events(journal))
    # The cards show the totals.
    for name, total in reference.totals.items():
        assert dom.xpath(f'//*[@data-figure="total-{name}"]/text()') == [f"{total:,}"], name
    # Daily volumes: one point per day and series; the points add up to the totals.
    points = charts["daily-volume"].xpath(".//circle")
    days = {p.get("data-x") for p in points}
    assert len(days) >= 4
    for series in ("sent", "received", "delivered", "forwarded"):
        values = [float(p.get("data-value")) for p in points if p.get("data-series") == series]
        assert len(values) == len(days)
        assert sum(values) == reference.totals[series], series
    # Reconciliation: one bar per case, its value the number of planted faults.
    bars = {r.get("data-label"): float(r.get("data-value")) for r in charts["reconciliation"].xpath(".//rect")}
    assert bars == {case: float(len(reference.cases[case])) for case in FAULT_CASES}
    # Transmissions per message: the bars are the distribution.
    spread: dict[int, int] = {}
    for key, n in reference.attempts.items():
        spread[key[-1]] = spread.get(key[-1], 0) + n
    bars = {r.get("data-label"): float(r.get("data-value")) for r in charts["attempts"].xpath(".//rect")}
    assert bars == {f"{k} transmission(s)": float(v) for k, v in spread.items()}
    # Every bar is drawn with a width that follows its value.
    for chart in ("delivery-rate", "latency-p95", "failures", "attempts"):
        rects = charts[chart].xpath(".//rect")
        assert rects, chart
        assert max(float(r.get("width")) for r in rects) > 100, chart
    # The reconciliation table lists the planted messages.
    listed = set(dom.xpath('//table[@data-table="reconciliation"]//td[@data-figure="message_id"]/text()'))
    assert listed == set().union(*reference.cases.values())


def test_the_page_needs_nothing_from_the_network(report: Any) -> None:
    page = report.html.read_text()
    dom = lxml_html.fromstring(page)
    assert not dom.xpath("//script | //link | //img | //iframe | //object")
    assert not [v for v in dom.xpath("//@src | //@href") if v]
    assert "default-src 'none'" in page
