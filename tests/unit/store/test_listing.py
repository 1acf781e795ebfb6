"""The operator's queries (msh.store.listing): messages newest first and paged, and a message's history, on
SQLite, PostgreSQL and the in-memory twin alike."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from msh.engine import OutboundStatus
from msh.errors import ErrorCode, Issue, Severity
from msh.store import Direction, Store
from msh.store.app_records import InboxClaim
from msh.store.events import EventKind
from msh.store.listing import MessageFilter, MessageRow
from tests.support.store import T0, FakeClock, add_inbound, add_outbound, outbound_state

NOW = T0 + timedelta(hours=1)


def _list(store: Store, **fields: object) -> tuple[list[MessageRow], str | None]:
    with store.transaction(readonly=True) as tx:
        page = tx.list_messages(MessageFilter(**fields), NOW)  # type: ignore[arg-type]
    return list(page.rows), page.next_cursor


def _ids(rows: list[MessageRow]) -> list[str]:
    return [r.message_id for r in rows]


def _traffic(store: Store, clock: FakeClock) -> None:
    """Three sent messages (one failed, one to another partner) and three received (one rejected, one
    leased), one second apart: s1 (T0), r1, s2, r2, s3, r3 (T0+5s)."""
    failure = Issue(ErrorCode.DELIVERY_FAILURE, Severity.ERROR, "no acknowledgment after 3 retries")
    for n in range(3):
        with store.transaction() as tx:
            clock.now = T0 + timedelta(seconds=2 * n)
            state = outbound_state(f"s{n + 1}@x")
            if n == 1:
                state = replace(state, status=OutboundStatus.FAILED, attempts=4, failure=failure)
            add_outbound(tx, f"s{n + 1}@x", body=b"x" * (10 + n), state=state, to_party="urn:duns:456" if n else "P2")
            received = add_inbound(tx, f"r{n + 1}@x", received_at=T0 + timedelta(seconds=2 * n + 1), body=b"y" * 7)
            if n == 1:
                tx.inbox_ack(received.id, NOW - timedelta(minutes=1))
                tx.put_inbox_claim(InboxClaim(received.id, "app", None, None, NOW - timedelta(minutes=1), "bad", 1))
            if n == 2:
                tx.put_inbox_claim(InboxClaim(received.id, "app", NOW + timedelta(minutes=5), None, None, None, 1))


def test_messages_are_listed_newest_first_in_both_directions(store: Store, clock: FakeClock) -> None:
    _traffic(store, clock)
    rows, cursor = _list(store)
    assert _ids(rows) == ["r3@x", "s3@x", "r2@x", "s2@x", "r1@x", "s1@x"]
    assert cursor is None
    by_id = {r.message_id: r for r in rows}
    sent, failed, received = by_id["s1@x"], by_id["s2@x"], by_id["r1@x"]
    assert (sent.direction, sent.status, sent.partner, sent.size, sent.attempts) == (
        Direction.OUTBOUND,
        "pending",
        "P2",
        10,
        0,
    )
    assert (sent.cpa_id, sent.service, sent.action, sent.conversation_id) == (
        "cpa-1",
        "urn:services:Orders",
        "NewOrder",
        "conv-1",
    )
    assert failed.status == "failed" and failed.attempts == 0  # no transmission journaled in this traffic
    assert failed.last_error == "DeliveryFailure: no acknowledgment after 3 retries"
    assert (received.direction, received.status, received.partner, received.size) == (
        Direction.INBOUND,
        "available",
        "urn:duns:456",
        7,
    )
    assert received.created_at == T0 + timedelta(seconds=1) and received.duplicates == 0
    # one vocabulary: a rejected message is "rejected" (its stored inbox state says acknowledged-by-app)
    assert by_id["r2@x"].status == "rejected" and by_id["r2@x"].last_error == "bad"
    assert by_id["r2@x"].updated_at == NOW - timedelta(minutes=1)
    assert by_id["r3@x"].status == "leased"


def test_pages_follow_each_other_without_gaps_or_repeats(store: Store, clock: FakeClock) -> None:
    _traffic(store, clock)
    with store.transaction() as tx:  # a sent and a received message at the very same instant
        clock.now = T0 + timedelta(seconds=5)
        add_outbound(tx, "s4@x")
        add_inbound(tx, "r4@x", received_at=T0 + timedelta(seconds=5))
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        rows, cursor = _list(store, limit=3, cursor=cursor)
        assert len(rows) <= 3
        seen += _ids(rows)
        if cursor is None:
            break
    assert seen == ["s4@x", "r4@x", "r3@x", "s3@x", "r2@x", "s2@x", "r1@x", "s1@x"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"direction": Direction.OUTBOUND}, ["s3@x", "s2@x", "s1@x"]),
        ({"direction": Direction.INBOUND, "limit": 2}, ["r3@x", "r2@x"]),
        ({"status": "failed"}, ["s2@x"]),
        ({"status": "rejected"}, ["r2@x"]),
        ({"status": "leased"}, ["r3@x"]),
        ({"status": "available"}, ["r1@x"]),
        ({"status": "available", "direction": Direction.OUTBOUND}, []),
        ({"partner": "P2"}, ["s1@x"]),
        ({"partner": "456"}, ["r3@x", "s3@x", "r2@x", "s2@x", "r1@x"]),  # the value alone: urn:duns:456
        ({"partner": "duns:456", "direction": Direction.INBOUND}, ["r3@x", "r2@x", "r1@x"]),
        ({"partner": "56"}, []),  # a value is whole, not a tail of one
        ({"partner": "URN:DUNS:456"}, []),  # case counts
        ({"partner": "urn:duns:456", "direction": Direction.OUTBOUND}, ["s3@x", "s2@x"]),
        ({"cpa_id": "cpa-9"}, []),
        ({"service": "urn:services:Orders", "action": "OrderAck"}, ["r3@x", "r2@x", "r1@x"]),
        ({"since": T0 + timedelta(seconds=2), "until": T0 + timedelta(seconds=4)}, ["r2@x", "s2@x"]),
    ],
)
def test_filters(store: Store, clock: FakeClock, fields: dict[str, object], expected: list[str]) -> None:
    _traffic(store, clock)
    assert _ids(_list(store, **fields)[0]) == expected


def test_the_last_error_of_a_message_still_retrying_comes_from_its_journal(store: Store) -> None:
    with store.transaction() as tx:
        add_outbound(tx, "s1@x")
        for attempt, error in ((1, "connection refused"), (2, "HTTP 503")):
            tx.append_event(
                at=T0,
                kind=EventKind.TRANSMISSION,
                message_id="s1@x",
                direction=Direction.OUTBOUND,
                detail={"attempt": attempt, "outcome": "failed", "error": error},
            )
    rows, _ = _list(store)
    assert rows[0].last_error == "HTTP 503"
    assert rows[0].attempts == 2  # the transmissions the journal holds: what happened on the wire


def test_bad_queries_are_refused_naming_what_is_wrong(store: Store) -> None:
    with store.transaction(readonly=True) as tx:
        with pytest.raises(ValueError, match="status 'lost' is not one of pending"):
            tx.list_messages(MessageFilter(status="lost"), NOW)
        with pytest.raises(ValueError, match="is not one this listing gave"):
            tx.list_messages(MessageFilter(cursor="garbage"), NOW)
        with pytest.raises(ValueError, match="since"):
            tx.list_messages(MessageFilter(since=T0.replace(tzinfo=None)), NOW)
        with pytest.raises(ValueError, match="limit"):
            tx.list_messages(MessageFilter(limit=0), NOW)


def test_history_holds_every_event_of_a_message_in_order(store: Store) -> None:
    with store.transaction() as tx:
        add_outbound(tx, "m@x")
        tx.append_event(at=T0, kind=EventKind.SUBMITTED, message_id="m@x", direction=Direction.OUTBOUND)
        for n in range(1, 1101):  # more than one read of the journal's steps
            tx.append_event(
                at=T0 + timedelta(seconds=n),
                kind=EventKind.TRANSMISSION,
                message_id="m@x",
                direction=Direction.OUTBOUND,
                detail={"attempt": n},
            )
        tx.append_event(at=T0, kind=EventKind.DELIVERED, message_id="other@x", direction=Direction.OUTBOUND)
    with store.transaction(readonly=True) as tx:
        history = tx.message_history("m@x")
        assert tx.message_history("nobody@x") == []
    assert len(history) == 1101
    assert history[0].kind == EventKind.SUBMITTED and history[0].cpa_id == "cpa-1"
    assert [e.attempt for e in history[1:]] == list(range(1, 1101))
