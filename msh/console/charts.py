"""Charts as inline SVG, drawn on the server: nothing to load, nothing from the internet, readable without
JavaScript. A chart scales to the width of its box (``viewBox``); each point has a ``<title>`` (its value on
hover or long press) and the chart an ``aria-label`` describing it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from markupsafe import Markup, escape

__all__ = ["PALETTE", "Series", "line_chart", "nice_max"]

PALETTE: Final = ("#2563eb", "#d97706", "#059669", "#dc2626", "#7c3aed", "#0891b2", "#6b7280")
_W: Final = 420
_H: Final = 210
_LEFT: Final = 44
_RIGHT: Final = 12
_TOP: Final = 12
_BOTTOM: Final = 28


@dataclass(frozen=True, slots=True)
class Series:
    """A named line: one value per bucket (None: nothing to show there)."""

    name: str
    values: Sequence[float | None]


def nice_max(value: float, *, whole: bool = False) -> float:
    """A round upper bound for an axis of four steps at or above ``value``: each step 1, 2, 2.5 or 5 times a power
    of ten (``whole``: a whole number, for counts)."""
    if value <= 0:
        return 4.0 if whole else 1.0
    quarter = value / 4
    power = 10 ** math.floor(math.log10(quarter))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if quarter <= m * power)
    if whole:
        step = max(1.0, math.ceil(step))
    return float(step * 4)


def _number(value: float, unit: str) -> str:
    if unit == "s":
        if value >= 100:
            return f"{value:.0f} s"
        return f"{value:.2g} s" if value < 10 else f"{value:.1f} s"
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def _label(moment: datetime, spans_days: bool) -> str:
    return moment.strftime("%d %b %H:%M" if spans_days else "%H:%M")


def line_chart(title: str, starts: Sequence[datetime], series: Sequence[Series], *, unit: str = "") -> Markup:
    """An SVG line chart of ``series`` over the buckets beginning at ``starts`` (times in UTC)."""
    top = nice_max(max((v for s in series for v in s.values if v is not None), default=0.0), whole=unit == "")
    count = len(starts)
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def x(i: int) -> float:
        return _LEFT + (width * i / max(1, count - 1))

    def y(v: float) -> float:
        return _TOP + height - height * v / top

    parts = [
        f'<svg class="chart" viewBox="0 0 {_W} {_H}" role="img" aria-label="{escape(title)}" '
        'preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg">'
    ]
    for k in range(5):  # horizontal grid lines with their values
        value = top * k / 4
        parts.append(f'<line class="grid" x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}"/>')
        parts.append(
            f'<text class="tick" x="{_LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{_number(value, unit)}</text>'
        )
    spans_days = count > 1 and (starts[-1] - starts[0]).days >= 1
    for i in range(0, count, max(1, count // 6)):
        label = _label(starts[i], spans_days)
        parts.append(f'<text class="tick" x="{x(i):.1f}" y="{_H - 8}" text-anchor="middle">{label}</text>')
    for n, s in enumerate(series):
        colour = PALETTE[n % len(PALETTE)]
        points = [(x(i), y(v), v, i) for i, v in enumerate(s.values) if v is not None]
        if len(points) > 1:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in points)
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        for px, py, v, i in points:
            tip = f"{s.name}, {_label(starts[i], True)} UTC: {_number(v, unit)}"
            parts.append(
                f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"><title>{escape(tip)}</title></circle>'
            )
    if not any(v is not None for s in series for v in s.values):
        parts.append(
            f'<text class="empty" x="{_W / 2}" y="{_H / 2}" text-anchor="middle">no data in this window</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
