"""The dashboard's figures: traffic, failures and acknowledgment latency over time, per partner, from the journal.

A window (the last hour, day or week) is cut into equal buckets; each journal event of the window
(:mod:`msh.console.journal_window`) is counted in its bucket under its partner: the To party of a message we
send, the From party of one we receive. Sent counts ``submitted`` events (our application's messages),
received counts ``received``, failures count ``failed`` (a DeliveryFailure told to the application, ebMS2
§6.5.7) and ``rejected`` (a message we refused with an ErrorList); the latency of a delivered message is the
time from its submission to its ``delivered`` event (the To party's Acknowledgment, ebMS2 §6.3.2).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

from msh.console.journal_window import read_window
from msh.store.api import Direction, Event, EventKind, Transaction

__all__ = ["BUCKETS", "Partner", "Span", "Traffic", "traffic"]

BUCKETS: Final = 24
_TOP: Final = 6
OTHERS: Final = "others"
_LOOKUPS: Final = 500


class Span(StrEnum):
    """The windows the dashboard offers."""

    HOUR = "1h"
    DAY = "24h"
    WEEK = "7d"

    @property
    def length(self) -> timedelta:
        return {Span.HOUR: timedelta(hours=1), Span.DAY: timedelta(days=1), Span.WEEK: timedelta(days=7)}[self]


@dataclass(frozen=True, slots=True)
class Partner:
    """One partner's figures: counts per bucket, and the latency (seconds) of each bucket's deliveries."""

    name: str
    sent: tuple[int, ...]
    delivered: tuple[int, ...]
    failed: tuple[int, ...]
    received: tuple[int, ...]
    latency: tuple[tuple[float, ...], ...]

    @property
    def traffic(self) -> tuple[int, ...]:
        return tuple(s + r for s, r in zip(self.sent, self.received, strict=True))

    @property
    def median_latency(self) -> tuple[float | None, ...]:
        return tuple(statistics.median(b) if b else None for b in self.latency)

    @property
    def all_latencies(self) -> list[float]:
        return sorted(x for b in self.latency for x in b)

    def percentile(self, p: float) -> float | None:
        values = self.all_latencies
        if not values:
            return None
        return values[min(len(values) - 1, int(p * len(values)))]


@dataclass(frozen=True, slots=True)
class Traffic:
    """The window, its bucket starts, and the partners (the busiest first, the rest as ``others``)."""

    start: datetime
    end: datetime
    bucket: timedelta
    starts: tuple[datetime, ...]
    partners: tuple[Partner, ...]
    truncated: bool
    events: int


@dataclass
class _Tally:
    sent: list[int]
    delivered: list[int]
    failed: list[int]
    received: list[int]
    latency: list[list[float]]

    @classmethod
    def empty(cls) -> _Tally:
        return cls([0] * BUCKETS, [0] * BUCKETS, [0] * BUCKETS, [0] * BUCKETS, [[] for _ in range(BUCKETS)])

    def total(self) -> int:
        return sum(self.sent) + sum(self.received) + sum(self.failed)

    def merge(self, other: _Tally) -> None:
        for i in range(BUCKETS):
            self.sent[i] += other.sent[i]
            self.delivered[i] += other.delivered[i]
            self.failed[i] += other.failed[i]
            self.received[i] += other.received[i]
            self.latency[i].extend(other.latency[i])

    def partner(self, name: str) -> Partner:
        return Partner(
            name,
            tuple(self.sent),
            tuple(self.delivered),
            tuple(self.failed),
            tuple(self.received),
            tuple(tuple(b) for b in self.latency),
        )


def _partner_of(event: Event) -> str | None:
    if event.direction is Direction.INBOUND or event.kind in (EventKind.RECEIVED, EventKind.REJECTED):
        return event.from_party
    return event.to_party


def _count(
    events: Iterable[Event], start: datetime, bucket: timedelta, submitted_at: dict[str, datetime]
) -> dict[str, _Tally]:
    tallies: dict[str, _Tally] = defaultdict(_Tally.empty)
    for event in events:
        index = min(BUCKETS - 1, int((event.at - start) / bucket))
        partner = _partner_of(event) or "(unknown)"
        tally = tallies[partner]
        if event.kind == EventKind.SUBMITTED:
            tally.sent[index] += 1
        elif event.kind == EventKind.RECEIVED:
            tally.received[index] += 1
        elif event.kind in (EventKind.FAILED, EventKind.REJECTED):
            tally.failed[index] += 1
        elif event.kind == EventKind.DELIVERED and event.message_id is not None:
            tally.delivered[index] += 1
            began = submitted_at.get(event.message_id)
            if began is not None:
                tally.latency[index].append(max(0.0, (event.at - began).total_seconds()))
    return tallies


def _submissions(tx: Transaction, events: Iterable[Event]) -> dict[str, datetime]:
    """When each delivered message of the window was submitted (its row's time when that was before the window)."""
    found = {e.message_id: e.at for e in events if e.kind == EventKind.SUBMITTED and e.message_id is not None}
    missing = [
        e.message_id for e in events if e.kind == EventKind.DELIVERED and e.message_id and e.message_id not in found
    ]
    for message_id in missing[:_LOOKUPS]:
        row = tx.get_outbound(message_id)
        if row is not None:
            found[message_id] = row.created_at
    return found


def traffic(tx: Transaction, now: datetime, span: Span) -> Traffic:
    """The figures of the window of ``span`` ending ``now``."""
    bucket = span.length / BUCKETS
    start = now - span.length
    window = read_window(tx, start)
    tallies = _count(window.events, start, bucket, _submissions(tx, window.events))
    ranked = sorted(tallies.items(), key=lambda item: (-item[1].total(), item[0]))
    partners = [tally.partner(name) for name, tally in ranked[:_TOP]]
    if len(ranked) > _TOP:
        rest = _Tally.empty()
        for _, tally in ranked[_TOP:]:
            rest.merge(tally)
        partners.append(rest.partner(f"{OTHERS} ({len(ranked) - _TOP})"))
    starts = tuple(start + bucket * i for i in range(BUCKETS))
    return Traffic(start, now, bucket, starts, tuple(partners), window.truncated, len(window.events))
