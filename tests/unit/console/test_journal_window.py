"""The journal window and the dashboard's figures, read from a store's journal (the in-memory twin)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from msh.console.journal_window import read_window
from msh.console.traffic import BUCKETS, Span, traffic
from msh.store.api import Direction, EventKind
from msh.store.journal import MessageFacts
from msh.store.memory import MemoryStore

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
B = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088:987654321"
C = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088:555"


def _store(events: list[tuple[timedelta, EventKind, str, Direction, str]]) -> MemoryStore:
    store = MemoryStore()
    with store.transaction() as tx:
        for offset, kind, message_id, direction, partner in events:
            facts = (
                MessageFacts(to_party=partner, from_party="us")
                if direction is Direction.OUTBOUND
                else MessageFacts(from_party=partner, to_party="us")
            )
            tx.append_event(at=T0 + offset, kind=kind, message_id=message_id, direction=direction, facts=facts)
    return store


def test_the_window_starts_at_the_first_event_at_or_after_since() -> None:
    minutes = [timedelta(minutes=m) for m in range(0, 300, 7)]
    store = _store([(m, EventKind.SUBMITTED, f"m{i}", Direction.OUTBOUND, B) for i, m in enumerate(minutes)])
    with store.transaction(readonly=True) as tx:
        for since in (
            T0 - timedelta(hours=1),
            T0 + timedelta(minutes=100),
            T0 + timedelta(minutes=294),
            T0 + timedelta(hours=9),
        ):
            window = read_window(tx, since)
            expected = [T0 + m for m in minutes if T0 + m >= since]
            assert [e.at for e in window.events] == expected
            assert not window.truncated and window.start == since


def test_a_window_with_more_events_than_the_limit_keeps_the_newest() -> None:
    store = _store([(timedelta(seconds=s), EventKind.RECEIVED, f"m{s}", Direction.INBOUND, B) for s in range(50)])
    with store.transaction(readonly=True) as tx:
        window = read_window(tx, T0, limit=20)
    assert window.truncated
    assert [e.message_id for e in window.events] == [f"m{s}" for s in range(30, 50)]
    assert window.start == T0 + timedelta(seconds=30)


def test_an_empty_journal_gives_an_empty_window() -> None:
    with MemoryStore().transaction(readonly=True) as tx:
        assert read_window(tx, T0).events == ()


def test_traffic_counts_per_partner_and_bucket_with_the_acknowledgment_latency() -> None:
    hour = timedelta(hours=1)
    store = _store(
        [
            (hour, EventKind.SUBMITTED, "a1", Direction.OUTBOUND, B),
            (hour + timedelta(seconds=2), EventKind.DELIVERED, "a1", Direction.OUTBOUND, B),
            (2 * hour, EventKind.SUBMITTED, "a2", Direction.OUTBOUND, B),
            (2 * hour + timedelta(seconds=4), EventKind.DELIVERED, "a2", Direction.OUTBOUND, B),
            (3 * hour, EventKind.SUBMITTED, "a3", Direction.OUTBOUND, B),
            (3 * hour + timedelta(minutes=1), EventKind.FAILED, "a3", Direction.OUTBOUND, B),
            (4 * hour, EventKind.RECEIVED, "c1", Direction.INBOUND, C),
        ]
    )
    now = T0 + 5 * hour
    with store.transaction(readonly=True) as tx:
        figures = traffic(tx, now, Span.DAY)
    assert figures.start == now - timedelta(days=1) and len(figures.starts) == BUCKETS
    by_name = {p.name: p for p in figures.partners}
    assert [p.name for p in figures.partners] == [B, C]  # the busiest first
    b, c = by_name[B], by_name[C]
    assert sum(b.sent) == 3 and sum(b.delivered) == 2 and sum(b.failed) == 1 and sum(b.received) == 0
    assert sum(c.received) == 1 and sum(c.sent) == 0
    assert b.all_latencies == [2.0, 4.0]
    assert b.percentile(0.5) == 4.0 and c.percentile(0.5) is None
    # The delivery of a1 (at T0 + 1 h) is in the bucket of that hour: the window's last five buckets are T0 .. T0 + 5 h.
    index = int((T0 + hour - figures.start) / figures.bucket)
    assert b.median_latency[index] == 2.0


def test_a_delivery_whose_submission_is_before_the_window_takes_the_stored_submission_time() -> None:
    store = _store([(timedelta(hours=30), EventKind.DELIVERED, "old", Direction.OUTBOUND, B)])
    with store.transaction(readonly=True) as tx:
        figures = traffic(tx, T0 + timedelta(hours=31), Span.DAY)
    (b,) = figures.partners
    assert sum(b.delivered) == 1 and b.all_latencies == []  # no stored row: no latency rather than a wrong one
