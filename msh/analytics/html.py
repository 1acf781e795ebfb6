"""The delivery report as one self-contained HTML page: inline CSS and inline SVG charts, no script, no
link, no font or image to fetch, so it opens offline and shows the same everywhere.

Every figure the page shows carries its name in a ``data-figure`` attribute and every chart is an ``<svg>``
with ``data-chart`` whose bars and points carry ``data-value``: the test suite renders the page in headless
Chromium and reads them back. Party names are shown as short labels (:mod:`msh.analytics.labels`) with the
full name in a ``title`` (on hover). With the web console's URL, each failed message's MessageId links to
its history there (the only links the page may have: navigations, never fetches).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any, Final

from msh.analytics.labels import console_link, ellipsize, party_label

__all__ = ["render"]

_COLOURS: Final = ("#2b6cb0", "#38a169", "#d69e2e", "#e53e3e", "#805ad5", "#319795")
_CSS: Final = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em;color:#1a202c;max-width:1100px}
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #cbd5e0}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border:1px solid #e2e8f0;padding:3px 8px;text-align:right}th{background:#edf2f7}
td.t,th.t{text-align:left}.cards{display:flex;flex-wrap:wrap;gap:1em}
.card{border:1px solid #cbd5e0;border-radius:6px;padding:.6em 1em;min-width:9em}
.card b{display:block;font-size:1.4em}svg{background:#fff;border:1px solid #e2e8f0;margin:.5em 0}
.legend span{display:inline-block;margin-right:1em}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
.muted{color:#718096;font-size:.85em}
td.t{max-width:32em;overflow-wrap:anywhere}td[title]{cursor:help;white-space:nowrap}
"""


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return escape(str(value))


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.2f}%"


def _bars(
    name: str,
    title: str,
    labels: Sequence[str],
    values: Sequence[float | None],
    unit: str = "",
    *,
    percent: bool = False,
    shown: Sequence[str] | None = None,
) -> str:
    """A horizontal bar chart; ``shown``: the labels written beside the bars (default: ``labels``, their
    last 40 characters), the full label on hover."""
    width, row, left = 760, 22, 260
    height = row * len(labels) + 30
    top = max((v for v in values if v is not None), default=0.0) or 1.0
    parts = [
        f'<svg data-chart="{escape(name)}" role="img" aria-label="{escape(title)}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = 10 + i * row
        length = 0.0 if value is None else (width - left - 90) * float(value) / top
        amount = _pct(value) if percent else _num(value) + unit
        written = shown[i] if shown is not None else label[-40:]
        parts.append(
            f'<text x="{left - 6}" y="{y + 14}" font-size="12" text-anchor="end">{escape(written)}'
            f"<title>{escape(label)}</title></text>"
            f'<rect x="{left}" y="{y + 2}" width="{length:.1f}" height="{row - 6}" fill="{_COLOURS[0]}" '
            f'data-label="{escape(label)}" data-value="{"" if value is None else value}">'
            f"<title>{escape(label)}: {amount}</title></rect>"
            f'<text x="{left + length + 4:.1f}" y="{y + 14}" font-size="11">{amount}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _lines(name: str, title: str, xs: Sequence[str], series: dict[str, Sequence[float]]) -> str:
    """A line chart of several series over the same x labels (days)."""
    width, height, left, bottom = 1000, 280, 60, 40
    top = max((v for values in series.values() for v in values), default=0.0) or 1.0
    step = (width - left - 20) / max(len(xs) - 1, 1)
    parts = [
        f'<svg data-chart="{escape(name)}" role="img" aria-label="{escape(title)}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#a0aec0"/>',
        f'<text x="4" y="16" font-size="11">{_num(top)}</text>',
    ]
    for i, x in enumerate(xs):
        if len(xs) <= 12 or i % max(1, len(xs) // 10) == 0:
            px = left + i * step
            parts.append(f'<text x="{px:.1f}" y="{height - bottom + 16}" font-size="10">{escape(x)}</text>')
    legend = []
    for n, (label, values) in enumerate(series.items()):
        colour = _COLOURS[n % len(_COLOURS)]
        points = []
        for i, value in enumerate(values):
            px = left + i * step
            py = height - bottom - (height - bottom - 20) * float(value) / top
            points.append(f"{px:.1f},{py:.1f}")
            parts.append(
                f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2" fill="{colour}" data-series="{escape(label)}" '
                f'data-x="{escape(xs[i])}" data-value="{value}"><title>{escape(label)} {escape(xs[i])}: '
                f"{_num(value)}</title></circle>"
            )
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{" ".join(points)}"/>')
        legend.append(f'<span><i style="background:{colour}"></i>{escape(label)}</span>')
    parts.append("</svg>")
    return f'<div class="legend">{"".join(legend)}</div>' + "".join(parts)


def _cell(key: str, value: Any, console_url: str | None) -> str:
    css = "t" if key in _TEXT else ""
    if key in _PARTIES and value is not None:
        # A party's short label, its full name on hover.
        full = escape(str(value))
        return f'<td class="{css}" data-figure="{key}" title="{full}">{escape(party_label(str(value)))}</td>'
    if key == "cpa_id" and value is not None:
        full = escape(str(value))
        return f'<td class="{css}" data-figure="{key}" title="{full}">{escape(ellipsize(str(value), 32))}</td>'
    if key == "message_id" and value is not None and console_url:
        href = escape(console_link(console_url, str(value)))
        return f'<td class="{css}" data-figure="{key}"><a href="{href}">{escape(str(value))}</a></td>'
    shown = _pct(value) if key == "delivery_rate" else _num(value)
    return f'<td class="{css}" data-figure="{key}">{shown}</td>'


def _table(
    columns: Sequence[tuple[str, str]], rows: Sequence[dict[str, Any]], name: str, console_url: str | None = None
) -> str:
    head = "".join(f'<th class="{"t" if k in _TEXT else ""}">{escape(title)}</th>' for k, title in columns)
    body = ["<tr>" + "".join(_cell(key, row.get(key), console_url) for key, _ in columns) + "</tr>" for row in rows]
    return f'<table data-table="{escape(name)}"><tr>{head}</tr>{"".join(body)}</table>'


_PARTIES: Final = {"source", "partner", "from_party", "to_party", "sender_journal", "receiver_journal"}
_TEXT: Final = {
    *("source", "partner", "case", "message_id", "from_party", "to_party", "severity", "cause", "day"),
    *("cpa_id", "service_action", "failed_at", "explanation", "receiver_says", "sender_outcome", "forwarded_by"),
}
_TOTALS: Final = (
    ("sent", "sent"),
    ("received", "received"),
    ("forwarded", "forwarded"),
    ("delivered", "acknowledged end to end"),
    ("unacknowledged", "sent, no acknowledgment by design"),
    ("failed_error", "DeliveryFailures (Error)"),
    ("failed_warning", "DeliveryFailures (Warning)"),
    ("expired", "expired (TimeToLive)"),
    ("duplicates", "duplicates eliminated"),
    ("pending", "pending"),
    ("overdue", "overdue"),
)


def _cards(summary: dict[str, Any]) -> str:
    sources = summary["sources"]
    cards = []
    for key, title in _TOTALS:
        total = sum(int(s.get(key) or 0) for s in sources)
        cards.append(f'<div class="card">{escape(title)}<b data-figure="total-{key}">{total:,}</b></div>')
    return f'<div class="cards">{"".join(cards)}</div>'


_PARTNER_COLUMNS: Final = (
    ("source", "journal"),
    ("partner", "partner"),
    ("sent", "sent"),
    ("received", "received"),
    ("forwarded", "forwarded"),
    ("delivered", "delivered"),
    ("delivery_rate", "delivery rate"),
    ("unacknowledged", "sent, unacknowledged"),
    ("failed_error", "failed (Error)"),
    ("failed_warning", "failed (Warning)"),
    ("expired", "expired"),
    ("duplicates", "duplicates"),
    ("latency_p50_s", "p50 s"),
    ("latency_p95_s", "p95 s"),
    ("latency_p99_s", "p99 s"),
    ("pending", "pending"),
    ("overdue", "overdue"),
)


def _pair(p: dict[str, Any]) -> str:
    return f"{party_label(p['source'], 16)} → {party_label(p['partner'], 16)}"


_FAILED_COLUMNS: Final = (
    ("message_id", "MessageId"),
    ("partner", "partner"),
    ("cpa_id", "agreement"),
    ("service_action", "service / action"),
    ("failed_at", "failed at"),
    ("severity", "severity"),
    ("explanation", "cause"),
)


def _failure_sections(summary: dict[str, Any], console_url: str | None) -> list[str]:
    """The DeliveryFailures by severity, the causes underneath them, and the failed messages' table."""
    if not summary["failures"]:
        return ["<h2>DeliveryFailures</h2>", "<p data-figure='no-failures'>No DeliveryFailure.</p>"]
    causes = summary.get("causes", [])
    failed = [
        row
        | {
            "service_action": f"{row.get('service') or '-'} / {row.get('action') or '-'}",
            "failed_at": f"{str(row['failed_at'])[:19].replace('T', ' ')} UTC",  # ISO 8601, to the second
        }
        for row in summary.get("failed", [])
    ]
    total = sum(int(c["messages"]) for c in causes)
    listed = f"the newest {len(failed):,} of {total:,}" if len(failed) < total else f"all {total:,}"
    hint = "" if console_url else " (with msh report --console-url, each MessageId links to its history)"
    return [
        "<h2>DeliveryFailures by severity and error code</h2>",
        _bars(
            "failures",
            "DeliveryFailures by cause",
            [f"{f['severity']} {f['cause']}" for f in summary["failures"]],
            [f["failures"] for f in summary["failures"]],
        ),
        "<h2>Why: the causes underneath the DeliveryFailures</h2>",
        _bars(
            "failure-causes",
            "failed messages by cause",
            [c["headline"] for c in causes],
            [c["messages"] for c in causes],
            shown=[ellipsize(c["headline"], 34) for c in causes],
        ),
        f"<h2>Failed messages</h2><p class='muted'>{listed} failed message(s), newest first{escape(hint)}</p>",
        _table(_FAILED_COLUMNS, failed, "failed", console_url),
    ]


_CASE_COLUMNS: Final = (
    ("case", "case"),
    ("message_id", "MessageId"),
    ("from_party", "from"),
    ("to_party", "to"),
    ("sender_outcome", "at the sender"),
    ("received_copies", "copies received"),
    ("receiver_says", "the receiver says"),
    ("forwarded_by", "forwarded by"),
)


def _reconciliation_section(reconciliation: dict[str, Any], console_url: str | None) -> list[str]:
    rows = [
        row | {"receiver_says": f"refused by the receiver ({row.get('refused_with') or 'no errorCode'})"}
        if row["case"] == "refused_by_receiver"
        else row
        for row in reconciliation["rows"]
    ]
    return [
        "<h2>Reconciliation between the journals</h2>",
        _bars(
            "reconciliation",
            "messages per reconciliation case",
            list(reconciliation["counts"]),
            list(reconciliation["counts"].values()),
        ),
        _table(_CASE_COLUMNS, rows, "reconciliation", console_url),
    ]


def render(summary: dict[str, Any], *, console_url: str | None = None) -> str:
    """The page of a report summary (:func:`msh.analytics.report.summarise` plus its ``meta``); with
    ``console_url``, MessageIds link to their history in the web console."""
    meta = summary["meta"]
    days = summary["days"]
    partners = summary["partners"]
    top = sorted((p for p in partners if (p.get("sent") or 0) > 0), key=lambda p: -int(p["sent"]))[:20]
    pairs = [f"{p['source']} → {p['partner']}" for p in top]
    sections = [
        f"<h1>Delivery report</h1><p class='muted'>{_num(meta['events'])} events from "
        f"{escape(', '.join(meta['journals']))}; pending and overdue as of {escape(meta['as_of'])}; "
        f"made {escape(meta['generated_at'])}</p>",
        _cards(summary),
        "<h2>Per journal</h2>",
        _table(_PARTNER_COLUMNS[:1] + _PARTNER_COLUMNS[2:], summary["sources"], "sources"),
        "<h2>Volumes per day</h2>",
        _lines(
            "daily-volume",
            "messages per day",
            [d["day"] for d in days],
            {k: [float(d.get(k) or 0) for d in days] for k in ("sent", "received", "delivered", "forwarded")},
        ),
        "<h2>Delivery rate per partner (busiest 20 by messages sent)</h2>",
        _bars(
            "delivery-rate",
            "delivery rate per partner",
            pairs,
            [p.get("delivery_rate") for p in top],
            percent=True,
            shown=[_pair(p) for p in top],
        ),
        "<h2>Latency from submission to end-to-end acknowledgment, p95 (busiest 20)</h2>",
        _bars(
            "latency-p95",
            "p95 latency per partner",
            pairs,
            [p.get("latency_p95_s") for p in top],
            " s",
            shown=[_pair(p) for p in top],
        ),
        *_failure_sections(summary, console_url),
        "<h2>Transmissions per message</h2>",
        _bars(
            "attempts",
            "messages by number of transmissions",
            [f"{a['attempts']} transmission(s)" for a in summary["attempts"]],
            [a["messages"] for a in summary["attempts"]],
        ),
        *_reconciliation_section(summary["reconciliation"], console_url),
        "<h2>Per partner</h2>",
        _table(_PARTNER_COLUMNS, partners, "partners"),
    ]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>Delivery report</title><style>{_CSS}</style></head>"
        f'<body data-report="msh-delivery">{"".join(sections)}</body></html>\n'
    )
