"""The journal's typed columns (msh.store.journal): filled from the message's row in the transaction of the
change, read from the detail for attempt, severity and cause; revision 0005 brings older events forward."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Engine, create_engine, text

from msh.engine.timers import end_to_end_deadline
from msh.store import Direction, Store, migrations
from msh.store.journal import MessageFacts, Role, cause_of, severity_of
from msh.store.records import Event
from msh.store.sql import resolve_url
from tests.support.store import RELIABILITY, T0, add_outbound


def _events(store: Store, message_id: str) -> dict[str, Event]:
    with store.transaction(readonly=True) as tx:
        return {e.kind: e for e in tx.message_events(message_id)}


def test_events_of_a_sent_message_carry_its_facts(store: Store) -> None:
    with store.transaction() as tx:
        add_outbound(tx, "m1@x", b"0123456789")
        tx.append_event(at=T0, kind="submitted", message_id="m1@x", direction=Direction.OUTBOUND)
    with store.transaction() as tx:  # another transaction: the facts are read from the stored row
        tx.append_event(
            at=T0 + timedelta(seconds=1),
            kind="transmission",
            message_id="m1@x",
            direction=Direction.OUTBOUND,
            detail={"attempt": 2, "url": "https://p/", "error": "connection refused"},
        )
        tx.append_event(
            at=T0 + timedelta(seconds=2),
            kind="failed",
            message_id="m1@x",
            direction=Direction.OUTBOUND,
            detail={"errorCode": "DeliveryFailure", "severity": "Warning", "description": "no ack"},
        )
    events = _events(store, "m1@x")
    submitted = events["submitted"]
    assert (submitted.role, submitted.cpa_id, submitted.from_party, submitted.to_party) == (
        "sender",
        "cpa-1",
        "urn:duns:123",
        "urn:duns:456",
    )
    assert (submitted.service, submitted.action, submitted.conversation_id, submitted.size) == (
        "urn:services:Orders",
        "NewOrder",
        "conv-1",
        10,
    )
    # PT1M first resend, then 3 retries of PT30S (tests.support.store.RELIABILITY).
    assert submitted.deadline == end_to_end_deadline(RELIABILITY, T0) == T0 + timedelta(minutes=2, seconds=30)
    transmission = events["transmission"]
    assert (transmission.attempt, transmission.cause, transmission.size) == (2, "connection refused", 10)
    assert transmission.deadline is None
    failed = events["failed"]
    assert (failed.severity, failed.cause, failed.role) == ("Warning", "DeliveryFailure", "sender")


def test_received_messages_and_the_applications_side_are_journaled(store: Store) -> None:
    with store.transaction() as tx:
        blob = tx.put_blob(b"abc")
        record = tx.insert_inbound(
            message_id="r1@x",
            from_party="urn:duns:456",
            to_party="urn:duns:123",
            cpaid="cpa-2",
            conversation_id="c9",
            service="s",
            action="a",
            received_at=T0,
            content_type="text/xml",
            body_blob_id=blob,
            ack_envelope=None,
            deliver=True,
        )
        tx.append_event(at=T0, kind="received", message_id="r1@x", direction=Direction.INBOUND)
    with store.transaction() as tx:
        tx.inbox_ack(record.id, T0 + timedelta(seconds=5))  # taken while new: delivered and taken at once
    events = _events(store, "r1@x")
    assert set(events) == {"received", "app-delivered", "app-taken"}
    for event in events.values():
        assert (event.role, event.cpa_id, event.from_party, event.size) == ("receiver", "cpa-2", "urn:duns:456", 3)


def test_given_facts_win_and_unknown_messages_have_none(store: Store) -> None:
    with store.transaction() as tx:
        tx.append_event(
            at=T0, kind="forward", message_id="nobody@x", facts=MessageFacts(role=Role.INTERMEDIARY, cpa_id="c")
        )
        tx.append_event(at=T0, kind="received", message_id="other@x")
    assert _events(store, "nobody@x")["forward"].role == "intermediary"
    other = _events(store, "other@x")["received"]
    assert (other.role, other.cpa_id, other.size) == (None, None, None)


def test_detail_readings() -> None:
    received = {
        "errors": [{"errorCode": "Inconsistent", "severity": "Warning"}, {"errorCode": "OtherXml", "severity": "Error"}]
    }
    assert (severity_of(received), cause_of(received)) == ("Error", "OtherXml")
    refused = {"issues": ["Error ValueNotRecognized at //Header/MessageHeader/CPAId: unknown CPA"]}
    assert (severity_of(refused), cause_of(refused)) == ("Error", "ValueNotRecognized")
    assert (severity_of({}), cause_of({})) == (None, None)


# ---------------------------------------------------------------------------- revision 0005 brings events forward


@pytest.fixture
def raw_engine(store_url: str) -> Iterator[Engine]:
    engine = create_engine(resolve_url(store_url))
    yield engine
    engine.dispose()


def test_revision_0005_fills_the_typed_columns_of_older_events(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    migrations.upgrade(raw_engine, "0004")
    with raw_engine.begin() as conn:
        blob = conn.execute(
            text(
                "INSERT INTO blobs (size, chunk_count, created_at) "
                "VALUES (42, 0, '2025-03-01 12:00:00.000000') RETURNING id"
            )
            if raw_engine.dialect.name == "sqlite"
            else text("INSERT INTO blobs (size, chunk_count, created_at) VALUES (42, 0, now()) RETURNING id")
        ).scalar_one()
        created = "'2025-03-01 12:00:00.000000'" if raw_engine.dialect.name == "sqlite" else "'2025-03-01T12:00:00Z'"
        conn.execute(
            text(
                "INSERT INTO outbound_messages (message_id, cpaid, conversation_id, service, action, from_party, "
                "to_party, endpoint_url, content_type, body_blob_id, retries, retry_interval, first_resend_timeout, "
                "ack_requested, status, attempts, reached_peer, created_at, updated_at, kind) VALUES "
                f"('old@x', 'cpa-old', 'c1', 'svc', 'act', 'A', 'B', 'https://b/', 'text/xml', :blob, 3, 'PT30S', "
                f"'PT1M', true, 'failed', 4, false, {created}, {created}, 'own')"
            ),
            {"blob": blob},
        )
        for kind, detail in (
            ("submitted", "{}"),
            ("transmission", '{"attempt": 3, "error": "timeout"}'),
            ("failed", '{"errorCode": "DeliveryFailure", "severity": "Error"}'),
        ):
            conn.execute(
                text(
                    "INSERT INTO events (at, message_id, direction, kind, detail) "
                    f"VALUES ({created}, 'old@x', 'outbound', :kind, :detail)"
                ),
                {"kind": kind, "detail": detail},
            )
    store = open_store(store_url)  # upgrades to the newest revision
    events = _events(store, "old@x")
    assert {k: (e.role, e.cpa_id, e.to_party, e.size) for k, e in events.items()} == {
        k: ("sender", "cpa-old", "B", 42) for k in ("submitted", "transmission", "failed")
    }
    assert events["transmission"].attempt == 3 and events["transmission"].cause == "timeout"
    assert events["failed"].severity == "Error"
    assert events["submitted"].deadline == T0 + timedelta(minutes=2, seconds=30)
    store.close()
    migrations.downgrade(raw_engine, "0004")
    with raw_engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM events")).scalar_one() == 3


def test_an_event_numbered_by_the_journal_keeps_every_other_field() -> None:
    values: dict[str, object] = {}
    for i, f in enumerate(dataclasses.fields(Event)):
        values[f.name] = T0 + timedelta(seconds=i) if f.name in ("at", "deadline") else f"value-{i}"
    values["id"] = 0
    event = Event(**values)  # type: ignore[arg-type]
    numbered = event.with_id(42)
    assert numbered == dataclasses.replace(event, id=42)
    assert numbered.id == 42 and event.id == 0
