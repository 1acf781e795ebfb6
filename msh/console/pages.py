"""The console's read-only pages: the dashboard, the inbox, the agreements and routing table, the settings."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from starlette.requests import Request
from starlette.responses import Response

from msh.console.agreements import agreement_views
from msh.console.charts import PALETTE, Series, line_chart
from msh.console.overview import overview
from msh.console.partners import known_partners
from msh.console.settings_view import route_rows, setting_rows
from msh.console.traffic import Span, Traffic, traffic
from msh.console.web import Console
from msh.store.api import Transaction
from msh.store.app_records import AppInboxItem, InboxQuery, InboxView

__all__ = ["agreements_page", "dashboard", "inbox_page", "settings_page"]

_INBOX_LIMIT = 200


def _charts(figures: Traffic, labels: dict[str, str]) -> dict[str, object]:
    partners = [dataclasses.replace(p, name=labels.get(p.name, p.name)) for p in figures.partners]
    return {
        "traffic": line_chart(
            "Messages sent and received per partner",
            figures.starts,
            [Series(p.name, p.traffic) for p in partners],
        ),
        "failures": line_chart(
            "Failures per partner (DeliveryFailure told to the application, messages refused)",
            figures.starts,
            [Series(p.name, p.failed) for p in partners],
        ),
        "latency": line_chart(
            "Median time from submission to the partner's acknowledgment",
            figures.starts,
            [Series(p.name, p.median_latency) for p in partners],
            unit="s",
        ),
        "colours": [PALETTE[i % len(PALETTE)] for i in range(len(partners))],
    }


async def dashboard(request: Request) -> Response:
    console: Console = request.app.state.console
    try:
        span = Span(request.query_params.get("span", Span.DAY.value))
    except ValueError:
        span = Span.DAY
    now = console.now()

    def read(tx: Transaction) -> tuple[Traffic, object]:
        return traffic(tx, now, span), overview(tx, now)

    figures, counts = await console.read(read)
    labels = known_partners(console.msh.registry)
    return console.render(
        request,
        "dashboard.html",
        title="Dashboard",
        span=span,
        spans=list(Span),
        figures=figures,
        counts=counts,
        charts=_charts(figures, labels),
        labels=labels,
        now=now,
    )


async def inbox_page(request: Request) -> Response:
    console: Console = request.app.state.console
    try:
        view = InboxView(request.query_params.get("view", InboxView.AVAILABLE.value))
    except ValueError:
        view = InboxView.AVAILABLE
    now = console.now()

    def read(tx: Transaction) -> list[AppInboxItem]:
        return tx.app_inbox(InboxQuery(now=now, view=view, limit=_INBOX_LIMIT))

    items = await console.read(read)
    return console.render(
        request, "inbox.html", title="Inbox", view=view, views=list(InboxView), items=items, now=now, limit=_INBOX_LIMIT
    )


async def agreements_page(request: Request) -> Response:
    console: Console = request.app.state.console
    now: datetime = console.now()
    views = agreement_views(list(console.msh.registry), console.settings.identity.party_id, now)
    return console.render(
        request,
        "agreements.html",
        title="Agreements",
        agreements=views,
        routes=route_rows(console.settings),
        now=now,
    )


async def settings_page(request: Request) -> Response:
    console: Console = request.app.state.console
    rows = setting_rows(console.settings)
    sections: dict[str, list[object]] = {}
    for row in rows:
        sections.setdefault(row.section, []).append(row)
    return console.render(
        request,
        "settings.html",
        title="Settings",
        sections=sections,
        routes=route_rows(console.settings),
        source=console.settings.source,
    )
