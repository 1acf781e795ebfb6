"""The metrics the docs speak of are the ones ``/metrics`` exposes: docs/operating.md's table is drawn from
:data:`msh.admin.metrics.METRICS`, which is exactly what a scrape holds, and the sample alert rules and the
Grafana dashboard use no metric name that a scrape does not expose."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from msh.admin.metrics import METRICS, metrics_table
from tests.unit.admin.conftest import AUTH, Admins, on_admins, order

DOCS = Path(__file__).resolve().parents[3] / "docs"
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
_NAME = re.compile(r"\bmsh_[a-z0-9_]+")


async def exposed(client: httpx.AsyncClient) -> tuple[dict[str, str], set[str]]:
    """The families of a scrape (name as in METRICS -> type) and every sample name a query may use."""
    r = await client.get("/metrics", headers=AUTH)
    families: dict[str, str] = {}
    names: set[str] = set()
    for family in text_string_to_metric_families(r.text):
        name = family.name + ("_total" if family.type == "counter" else "")
        families[name] = family.type
        names.update(family.name + suffix for suffix in _SUFFIXES[family.type])
    return families, names


def used_in_alerts() -> set[str]:
    text = (DOCS / "prometheus-alerts.yml").read_text(encoding="utf-8")
    expressions = [line.split("expr:", 1)[1] for line in text.splitlines() if line.strip().startswith("expr:")]
    assert len(expressions) >= 8
    return {name for expr in expressions for name in _NAME.findall(expr)}


def used_in_dashboard() -> set[str]:
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text(encoding="utf-8"))
    expressions = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    expressions += [v["definition"] for v in dashboard["templating"]["list"]]
    assert len(dashboard["panels"]) >= 10
    return {name for expr in expressions for name in _NAME.findall(expr)}


def test_alerts_and_dashboard_use_only_metrics_that_exist() -> None:
    async def scenario(s: Admins) -> None:
        await s.a.submit_async(order(0))
        await s.net.settle()
        families, names = await exposed(s.admin_a)
        assert families == {m.name: m.type for m in METRICS}
        alerts, dashboard = used_in_alerts(), used_in_dashboard()
        assert alerts - names == set()
        assert dashboard - names == set()
        # They watch what matters: failures, latency, backlog, inbox, store, certificates.
        for name in ("msh_messages_failed_total", "msh_timer_lag_seconds", "msh_certificate_expiry_days"):
            assert name in alerts
        assert "msh_acknowledgment_latency_seconds_bucket" in alerts & dashboard

    on_admins(scenario)


def test_the_operating_page_lists_every_metric() -> None:
    page = (DOCS / "operating.md").read_text(encoding="utf-8")
    assert page.startswith("# Operating the MSH\n")
    for heading in ("## Health and readiness", "## Metrics", "## Logs"):
        assert f"\n{heading}\n" in page
    assert "\n\n" + metrics_table() + "\n" in page
