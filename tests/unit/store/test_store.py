"""The store port's behaviour, identical on SQLite, PostgreSQL and the in-memory twin."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import text

from cpa.duration import XsDuration
from msh.engine import OutboundStatus, Reliability
from msh.errors import ConfigurationError, ErrorCode, Issue, Severity
from msh.store import (
    Direction,
    DuplicateMessage,
    InboxState,
    MemoryStore,
    SqlStore,
    Store,
    StoreError,
    TimerKind,
    UnknownBlob,
    UnknownMessage,
    open_store,
)
from tests.support.store import RELIABILITY, T0, FakeClock, add_inbound, add_outbound, outbound_state

LEASE = timedelta(seconds=30)


class Boom(Exception):
    """Raised inside a transaction to make it roll back."""


# ---------------------------------------------------------------------------------------------- outbound


def test_outbound_message_reads_back_as_written(store: Store, clock: FakeClock) -> None:
    with store.transaction() as tx:
        written = add_outbound(tx, "m1@example.com", body=b"--b1\r\n<soap/>\r\n--b1--\r\n")
    with store.transaction() as tx:
        read = tx.get_outbound("m1@example.com")
        assert tx.get_outbound("nobody@example.com") is None
    assert read == written
    assert read.state == outbound_state("m1@example.com")  # pending, no attempt
    assert read.message_id == "m1@example.com"
    assert read.created_at == read.updated_at == clock.now
    assert read.state.reliability == RELIABILITY
    assert read.state.reliability.time_to_live is not None and read.state.reliability.time_to_live.tzinfo is UTC
    with store.open_blob(read.body_blob_id) as body:
        assert body.read() == b"--b1\r\n<soap/>\r\n--b1--\r\n"


@pytest.mark.parametrize(
    ("retry_interval", "first_resend_timeout", "persist_duration"),
    [
        ("P1M", "PT30S", "P180M"),  # months survive the trip: 180 months read back as P15Y, not seconds
        ("P1Y2M3DT4H5M6.789012S", "PT0S", None),
        ("PT0.000001S", "P1D", "P9000Y"),
    ],
)
def test_durations_read_back_exactly_as_xs_durations(
    store: Store, retry_interval: str, first_resend_timeout: str, persist_duration: str | None
) -> None:
    reliability = replace(
        RELIABILITY,
        retry_interval=XsDuration.parse(retry_interval),
        first_resend_timeout=XsDuration.parse(first_resend_timeout),
        persist_duration=None if persist_duration is None else XsDuration.parse(persist_duration),
    )
    with store.transaction() as tx:
        add_outbound(tx, "months@example.com", reliability=reliability)
    with store.transaction(readonly=True) as tx:
        read = tx.get_outbound("months@example.com")
    assert read is not None and read.state.reliability == reliability
    assert str(read.state.reliability.retry_interval) == str(XsDuration.parse(retry_interval))


def test_sql_stores_keep_durations_as_canonical_xs_duration_text(sql_store: SqlStore) -> None:
    reliability = replace(RELIABILITY, retry_interval=XsDuration.parse("P12M"), persist_duration=None)
    with sql_store.transaction() as tx:
        add_outbound(tx, "text@example.com", reliability=reliability)
    with sql_store.engine.connect() as conn:
        row = conn.execute(
            text("SELECT retry_interval, first_resend_timeout, persist_duration FROM outbound_messages")
        ).one()
    assert tuple(row) == ("P1Y", "PT1M", None)


def test_timestamps_are_stored_as_utc_and_read_back_aware(store: Store) -> None:
    paris = timezone(timedelta(hours=1))
    first_sent = datetime(2025, 3, 1, 13, 30, 0, 123456, tzinfo=paris)
    state = outbound_state(
        "tz@example.com",
        status=OutboundStatus.AWAITING_ACK,
        attempts=1,
        first_sent_at=first_sent,
        next_due_at=first_sent,
        reliability=replace(RELIABILITY, time_to_live=first_sent),
    )
    with store.transaction() as tx:
        add_outbound(tx, "tz@example.com", state=state)
    with store.transaction() as tx:
        read = tx.get_outbound("tz@example.com")
    assert read is not None
    assert read.state.first_sent_at == first_sent
    assert read.state.first_sent_at is not None and read.state.first_sent_at.utcoffset() == timedelta(0)
    assert read.state.first_sent_at.hour == 12 and read.state.first_sent_at.microsecond == 123456
    assert read.state == state
    assert all(
        moment is not None and moment.tzinfo is UTC
        for moment in (read.state.first_sent_at, read.state.next_due_at, read.state.reliability.time_to_live)
    )


def test_update_outbound_state_replaces_the_state(store: Store, clock: FakeClock) -> None:
    with store.transaction() as tx:
        add_outbound(tx, "m2@example.com")
    clock.advance(90)
    failed = outbound_state(
        "m2@example.com",
        status=OutboundStatus.FAILED,
        attempts=4,
        first_sent_at=T0,
        refused=0,
        next_due_at=None,
        failure=Issue(ErrorCode.DELIVERY_FAILURE, Severity.WARNING, "no Acknowledgment after 3 retries"),
    )
    with store.transaction() as tx:
        locked = tx.get_outbound("m2@example.com", for_update=True)
        assert locked is not None and locked.state.status is OutboundStatus.PENDING
        tx.update_outbound_state(failed)
    with store.transaction(readonly=True) as tx:
        assert tx.outbound_status("m2@example.com") == failed
        assert tx.outbound_status("nobody@example.com") is None
        record = tx.get_outbound("m2@example.com")
    assert record is not None
    assert record.state.failure is not None and record.state.failure.severity is Severity.WARNING
    assert record.state.failure.error_code is ErrorCode.DELIVERY_FAILURE
    assert record.updated_at == clock.now and record.created_at == T0


def test_update_of_an_unknown_outbound_message_is_refused(store: Store) -> None:
    with store.transaction() as tx, pytest.raises(UnknownMessage, match="nobody"):
        tx.update_outbound_state(outbound_state("nobody@example.com"))


def test_duplicate_outbound_message_id_leaves_the_transaction_usable(store: Store) -> None:
    with store.transaction() as tx:
        first = add_outbound(tx, "dup@example.com", body=b"first")
        with pytest.raises(DuplicateMessage) as caught:
            add_outbound(tx, "dup@example.com", body=b"second", service="other")
        assert caught.value.message_id == "dup@example.com"
        assert caught.value.direction is Direction.OUTBOUND
        add_outbound(tx, "after-dup@example.com")
    with store.transaction() as tx:
        assert tx.get_outbound("dup@example.com") == first
        assert tx.get_outbound("after-dup@example.com") is not None
    with store.open_blob(first.body_blob_id) as body:
        assert body.read() == b"first"


def test_an_outbound_message_needs_an_existing_body_blob(store: Store) -> None:
    with store.transaction() as tx, pytest.raises(UnknownBlob):
        add_outbound(tx, "noblob@example.com", body_blob_id=987654)


# ------------------------------------------------------------------------------------------ transactions


def test_a_transaction_that_raises_leaves_nothing_behind(store: Store) -> None:
    with store.transaction() as tx:
        add_outbound(tx, "kept@example.com")
        kept_in_id = add_inbound(tx, "kept-in@example.com").id
    blob_ids: list[int] = []
    with pytest.raises(Boom), store.transaction() as tx:
        blob_ids.append(tx.put_blob(b"lost body"))
        add_outbound(tx, "lost@example.com")
        add_inbound(tx, "lost-in@example.com")
        tx.update_outbound_state(outbound_state("kept@example.com", status=OutboundStatus.DELIVERED))
        tx.increment_duplicate("kept-in@example.com", T0)
        tx.inbox_ack(kept_in_id, T0)
        tx.record_acknowledgment("lost-in@example.com", b"<late/>")
        tx.schedule_timer("lost@example.com", TimerKind.RETRY, T0)
        tx.cancel_timers("kept@example.com")
        tx.append_event(at=T0, kind="submitted")
        raise Boom
    with store.transaction(readonly=True) as tx:
        assert tx.get_outbound("lost@example.com") is None
        assert tx.find_inbound("lost-in@example.com") is None
        assert tx.outbound_status("kept@example.com") == outbound_state("kept@example.com")
        kept_in = tx.find_inbound("kept-in@example.com")
        assert kept_in is not None and kept_in.duplicate_count == 0
        assert [e.message_id for e in tx.inbox_list()] == ["kept-in@example.com"]
        assert tx.inbox_list()[0].state is InboxState.NEW
        assert tx.next_timer_due() is None
        assert tx.list_events() == []
        with pytest.raises(UnknownBlob):
            tx.open_blob(blob_ids[0])
    with pytest.raises(UnknownBlob):
        store.open_blob(blob_ids[0])


def test_a_read_only_transaction_refuses_every_write(store: Store) -> None:
    with store.transaction() as tx:
        add_outbound(tx, "ro@example.com")
        ro_id = add_inbound(tx, "ro-in@example.com", ack=None).id
    writes: list[Callable[..., object]] = []
    with store.transaction(readonly=True) as tx:
        assert tx.readonly
        writes = [
            lambda: tx.put_blob(b"x"),
            lambda: add_outbound(tx, "other@example.com"),
            lambda: tx.update_outbound_state(outbound_state("ro@example.com")),
            lambda: tx.increment_duplicate("ro-in@example.com", T0),
            lambda: tx.record_acknowledgment("ro-in@example.com", b"<ack/>"),
            lambda: tx.inbox_mark_delivered(ro_id, T0),
            lambda: tx.inbox_ack(ro_id, T0),
            lambda: tx.schedule_timer("ro@example.com", TimerKind.RETRY, T0),
            lambda: tx.cancel_timers("ro@example.com"),
            lambda: tx.claim_due_timers(T0, "me", LEASE),
            lambda: tx.complete_timer(1, "me"),
            lambda: tx.append_event(at=T0, kind="submitted"),
        ]
        for write in writes:
            with pytest.raises(StoreError, match="read-only"):
                write()
        assert tx.get_outbound("ro@example.com", for_update=True) is not None
    assert len(writes) == 12


def test_a_second_transaction_on_the_same_thread_is_refused(store: Store) -> None:
    with store.transaction() as tx:
        add_outbound(tx, "outer@example.com")
        with pytest.raises(StoreError, match="already open"), store.transaction():
            pass
    with store.transaction() as tx:  # the thread is free again
        assert tx.get_outbound("outer@example.com") is not None


def test_a_transaction_cannot_be_used_after_it_ended(store: Store) -> None:
    with store.transaction() as tx:
        add_outbound(tx, "ended@example.com", body=b"abc")
        blob_id = tx.get_outbound("ended@example.com").body_blob_id  # type: ignore[union-attr]
        reader = tx.open_blob(blob_id)
    with pytest.raises(StoreError, match="ended"):
        tx.get_outbound("ended@example.com")
    with pytest.raises(StoreError, match="ended"):
        reader.read()
    reader.close()


def test_naive_datetimes_and_bad_arguments_are_refused(store: Store) -> None:
    naive = datetime(2025, 3, 1, 12, 0)
    with store.transaction() as tx:
        add_outbound(tx, "args@example.com")
        with pytest.raises(ValueError, match="due_at"):
            tx.schedule_timer("args@example.com", TimerKind.RETRY, naive)
        with pytest.raises(ValueError, match="now"):
            tx.claim_due_timers(naive, "me", LEASE)
        with pytest.raises(ValueError, match="lease"):
            tx.claim_due_timers(T0, "me", timedelta(0))
        with pytest.raises(ValueError, match="limit"):
            tx.claim_due_timers(T0, "me", LEASE, limit=0)
        with pytest.raises(ValueError, match="received_at"):
            add_inbound(tx, "naive@example.com", received_at=naive)
        with pytest.raises(ValueError, match="JSON"):
            tx.append_event(at=T0, kind="submitted", detail={"when": T0})
        # One list of event kinds (msh.store.events): a name outside it is a mistake, refused saying so.
        with pytest.raises(ValueError, match=r"journal event kind .*'started'"):
            tx.append_event(at=T0, kind="started")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="message_id"):
            add_outbound(tx, "")
        with pytest.raises(ValueError, match="kind"):
            tx.schedule_timer("args@example.com", "persist-expiry", T0)  # type: ignore[arg-type]
        # The engine's state of a sent message is checked where the store takes it.
        bad_states = [
            ("first_sent_at", outbound_state("args@example.com", first_sent_at=naive)),
            ("next_due_at", outbound_state("args@example.com", next_due_at=naive)),
            ("status", outbound_state("args@example.com", status="sent")),
            ("status", outbound_state("args@example.com", status="pending")),  # the enum, not its text
            ("attempts", outbound_state("args@example.com", attempts=-1)),
            ("retries", outbound_state("args@example.com", reliability=replace(RELIABILITY, retries=True))),
            ("failure", outbound_state("args@example.com", failure="DeliveryFailure")),
            ("reliability", outbound_state("args@example.com", reliability=None)),
            ("state must be an OutboundState", object()),
        ]
        for name, bad in bad_states:
            with pytest.raises(ValueError, match=name):
                tx.update_outbound_state(bad)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match=name):
                add_outbound(tx, "args2@example.com", state=bad)
        assert tx.outbound_status("args@example.com") == outbound_state("args@example.com")
        assert tx.get_outbound("args2@example.com") is None
    # The engine's Reliability refuses bad parameters when it is made.
    with pytest.raises(ValueError, match="retries"):
        Reliability(-1, XsDuration(), XsDuration(), None, None, False)
    with pytest.raises(ValueError, match="retry_interval must not be negative"):
        Reliability(3, XsDuration(months=-1), XsDuration(), None, None, False)
    with pytest.raises(TypeError, match="persist_duration must be an XsDuration"):
        Reliability(3, XsDuration(), XsDuration(), 30.0, None, False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="time_to_live must be timezone-aware"):
        Reliability(3, XsDuration(), XsDuration(), None, naive, False)


def test_a_closed_store_refuses_transactions(store: Store) -> None:
    store.close()
    with pytest.raises(StoreError, match="closed"), store.transaction():
        pass


# ----------------------------------------------------------------------------------------------- inbound


def test_inbound_message_and_its_inbox_entry_are_written_together(store: Store) -> None:
    with store.transaction() as tx:
        written = add_inbound(tx, "in1@example.com", ack=b"<eb:Acknowledgment/>")
        assert tx.find_inbound("in1@example.com") == written
    with store.transaction(readonly=True) as tx:
        found = tx.find_inbound("in1@example.com")
        assert tx.find_inbound("nobody@example.com") is None
        entries = tx.inbox_list()
    assert found == written
    assert found.ack_envelope == b"<eb:Acknowledgment/>" and found.duplicate_count == 0
    assert [(e.id, e.message_id, e.state, e.received_at, e.delivered_at) for e in entries] == [
        (written.id, "in1@example.com", InboxState.NEW, T0, None)
    ]
    assert found.duplicate_elimination is True


def test_each_stored_copy_is_found_by_its_id(store: Store) -> None:
    """Without DuplicateElimination every copy is stored; get_inbound names one copy (an inbox entry)."""
    with store.transaction() as tx:
        first = add_inbound(tx, "copies@example.com", body=b"one", duplicate_elimination=False)
        second = add_inbound(tx, "copies@example.com", body=b"two", duplicate_elimination=False)
    with store.transaction(readonly=True) as tx:
        assert tx.get_inbound(first.id) == first
        assert tx.get_inbound(second.id) == second
        assert tx.get_inbound(second.id + 1000) is None
        got = tx.get_inbound(second.id)
        assert got is not None
        with tx.open_blob(got.body_blob_id) as body:
            assert body.read() == b"two"


def test_a_duplicate_gets_the_stored_acknowledgment_and_no_second_delivery(store: Store) -> None:
    """docs/design.md §5.2/§5.3: the first copy is delivered once; a duplicate only counts and re-acks."""
    with store.transaction() as tx:
        add_inbound(tx, "in2@example.com", ack=b"<ack id='1'/>", body=b"first copy")
    for n in (1, 2):
        with store.transaction() as tx:
            with pytest.raises(DuplicateMessage) as caught:
                add_inbound(tx, "in2@example.com", ack=b"<ack id='2'/>", body=b"second copy")
            assert caught.value.direction is Direction.INBOUND
            stored = tx.find_inbound("in2@example.com")
            assert stored is not None and stored.ack_envelope == b"<ack id='1'/>"
            assert tx.increment_duplicate("in2@example.com", T0 + timedelta(minutes=n)) == n
    with store.transaction(readonly=True) as tx:
        stored = tx.find_inbound("in2@example.com")
        assert len(tx.inbox_list()) == 1
        assert stored is not None
        with tx.open_blob(stored.body_blob_id) as body:
            assert body.read() == b"first copy"
    assert stored.duplicate_count == 2 and stored.last_duplicate_at == T0 + timedelta(minutes=2)


def test_the_content_digest_is_kept_with_each_copy(store: Store) -> None:
    """ebMS2 §6.5.6: the digest stored with the first copy is what a later copy is compared with."""
    with store.transaction() as tx:
        first = add_inbound(tx, "digest@example.com", digest="sha256:" + "a" * 64)
        none = add_inbound(tx, "no-digest@example.com")
        with pytest.raises(DuplicateMessage):
            add_inbound(tx, "digest@example.com", digest="sha256:" + "b" * 64)
        copy = add_inbound(tx, "copies@example.com", duplicate_elimination=False, digest="sha256:" + "c" * 64)
    assert first.content_digest == "sha256:" + "a" * 64 and none.content_digest is None
    with store.transaction(readonly=True) as tx:
        assert tx.find_inbound("digest@example.com") == first
        assert tx.find_inbound("no-digest@example.com") == none
        assert tx.get_inbound(copy.id) == copy
        assert copy.content_digest == "sha256:" + "c" * 64


def test_a_message_not_for_the_application_gets_no_inbox_entry(store: Store) -> None:
    with store.transaction() as tx:
        add_inbound(tx, "signal@example.com", deliver=False, ack=None)
    with store.transaction(readonly=True) as tx:
        found = tx.find_inbound("signal@example.com")
        assert tx.inbox_list() == []
    assert found is not None and found.ack_envelope is None
    with store.transaction() as tx:
        assert tx.inbox_entry(found.id) is None
        with pytest.raises(UnknownMessage):
            tx.inbox_ack(found.id, T0)


def test_increment_duplicate_of_an_unknown_message_is_refused(store: Store) -> None:
    with store.transaction() as tx:
        with pytest.raises(UnknownMessage):
            tx.increment_duplicate("nobody@example.com", T0)
        with pytest.raises(UnknownMessage):
            tx.record_acknowledgment("nobody@example.com", b"<ack/>")


def test_without_duplicate_elimination_every_copy_is_stored_and_delivered(store: Store) -> None:
    """ebMS2 §6.6 rows 6 and 8: duplicates are possible, and each copy reaches the application."""
    with store.transaction() as tx:
        first = add_inbound(tx, "copies@example.com", duplicate_elimination=False, body=b"one", ack=b"<a1/>")
        second = add_inbound(tx, "copies@example.com", duplicate_elimination=False, body=b"two", ack=b"<a2/>")
    assert first.id != second.id and not first.duplicate_elimination
    with store.transaction() as tx:
        assert tx.find_inbound("copies@example.com") == first  # the first copy answers for the MessageId
        entries = tx.inbox_list()
        assert [(e.id, e.message_id) for e in entries] == [
            (first.id, "copies@example.com"),
            (second.id, "copies@example.com"),
        ]
        tx.inbox_ack(first.id, T0)
        assert tx.inbox_entry(second.id).state is InboxState.NEW  # type: ignore[union-attr]
        # A copy received under DuplicateElimination becomes the MessageId's duplicate-elimination record,
        # and from then on duplicates are refused.
        record = add_inbound(tx, "copies@example.com", duplicate_elimination=True, body=b"three")
        assert record.duplicate_elimination
        with pytest.raises(DuplicateMessage):
            add_inbound(tx, "copies@example.com", duplicate_elimination=True)
        add_inbound(tx, "copies@example.com", duplicate_elimination=False)
        assert len(tx.inbox_list()) == 4
        assert tx.increment_duplicate("copies@example.com", T0) == 1
        assert tx.find_inbound("copies@example.com").duplicate_count == 1  # type: ignore[union-attr]


def test_the_first_acknowledgment_is_recorded_once(store: Store) -> None:
    """ebMS2 §6.5.5 (2): an acknowledgment made for a stored message is its first response; later ones
    do not replace it."""
    with store.transaction() as tx:
        add_inbound(tx, "late-ack@example.com", ack=None)
    with store.transaction() as tx:
        assert tx.record_acknowledgment("late-ack@example.com", b"<first/>") is True
        assert tx.record_acknowledgment("late-ack@example.com", b"<second/>") is False
    with store.transaction(readonly=True) as tx:
        assert tx.find_inbound("late-ack@example.com").ack_envelope == b"<first/>"  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------------------- inbox


def test_inbox_states_go_forward_only(store: Store) -> None:
    with store.transaction() as tx:
        box = [add_inbound(tx, f"box{i}@example.com", received_at=T0 + timedelta(seconds=i)).id for i in range(3)]
    t1, t2, t3 = (T0 + timedelta(minutes=m) for m in (1, 2, 3))
    with store.transaction() as tx:
        delivered = tx.inbox_mark_delivered(box[0], t1)
        assert (delivered.state, delivered.delivered_at) == (InboxState.DELIVERED_TO_APP, t1)
        again = tx.inbox_mark_delivered(box[0], t2)
        assert again == delivered  # delivered once: the first time stands
        acked = tx.inbox_ack(box[0], t2)
        assert (acked.state, acked.delivered_at, acked.acknowledged_at) == (InboxState.ACKNOWLEDGED_BY_APP, t1, t2)
        assert tx.inbox_ack(box[0], t3) == acked  # idempotent
        assert tx.inbox_mark_delivered(box[0], t3) == acked  # never backwards
        assert tx.inbox_entry(box[0]) == acked
        direct = tx.inbox_ack(box[1], t3)  # acknowledged straight from new
        assert (direct.state, direct.delivered_at, direct.acknowledged_at) == (InboxState.ACKNOWLEDGED_BY_APP, t3, t3)
        with pytest.raises(UnknownMessage):
            tx.inbox_mark_delivered(987654, t1)
        with pytest.raises(UnknownMessage):
            tx.inbox_ack(987654, t1)
    with store.transaction(readonly=True) as tx:
        assert [e.message_id for e in tx.inbox_list(InboxState.NEW)] == ["box2@example.com"]
        assert [e.message_id for e in tx.inbox_list(InboxState.ACKNOWLEDGED_BY_APP)] == [
            "box0@example.com",
            "box1@example.com",
        ]
        assert tx.inbox_list(InboxState.DELIVERED_TO_APP) == []
        assert [e.message_id for e in tx.inbox_list(limit=2)] == ["box0@example.com", "box1@example.com"]


def test_inbox_lists_oldest_first_then_in_the_order_stored(store: Store) -> None:
    with store.transaction() as tx:
        add_inbound(tx, "c@example.com", received_at=T0)
        add_inbound(tx, "a@example.com", received_at=T0 + timedelta(seconds=5))
        add_inbound(tx, "b@example.com", received_at=T0)
    with store.transaction(readonly=True) as tx:
        assert [e.message_id for e in tx.inbox_list()] == ["c@example.com", "b@example.com", "a@example.com"]


# ------------------------------------------------------------------------------------------------ timers


def test_timers_are_claimed_when_due_leased_and_completed(store: Store) -> None:
    with store.transaction() as tx:
        late = tx.schedule_timer("t1@example.com", TimerKind.RETRY, T0 + timedelta(seconds=60))
        early = tx.schedule_timer("t2@example.com", TimerKind.RETRY, T0 + timedelta(seconds=10))
        assert tx.next_timer_due() == early.due_at
    with store.transaction() as tx:
        assert tx.claim_due_timers(T0 + timedelta(seconds=9), "p1", LEASE) == []
        now = T0 + timedelta(seconds=60)
        claimed = tx.claim_due_timers(now, "p1", LEASE)
    assert [t.id for t in claimed] == [early.id, late.id]  # earliest due first
    assert all(t.lease_owner == "p1" and t.lease_until == now + LEASE for t in claimed)
    with store.transaction() as tx:
        assert tx.claim_due_timers(now + LEASE - timedelta(microseconds=1), "p2", LEASE) == []
        assert tx.next_timer_due() == now + LEASE
        assert tx.complete_timer(early.id, "p2") is False  # not p2's
        assert tx.complete_timer(early.id, "p1") is True
        assert tx.complete_timer(early.id, "p1") is False  # gone
    with store.transaction() as tx:
        assert tx.next_timer_due() == now + LEASE
        assert tx.claim_due_timers(now + LEASE, "p2", LEASE) == [
            late.__class__(late.id, "t1@example.com", TimerKind.RETRY, late.due_at, "p2", now + 2 * LEASE)
        ]
    with store.transaction() as tx:
        assert tx.complete_timer(late.id, "p1") is False  # p1's lease expired and p2 took it over
        assert tx.complete_timer(late.id, "p2") is True
        assert tx.next_timer_due() is None


def test_claims_respect_the_limit_and_due_order(store: Store) -> None:
    with store.transaction() as tx:
        scheduled = [
            tx.schedule_timer(f"m{i}@example.com", TimerKind.RETRY, T0 - timedelta(seconds=i)) for i in range(5)
        ]
    with store.transaction() as tx:
        first = tx.claim_due_timers(T0, "p", LEASE, limit=2)
        rest = tx.claim_due_timers(T0, "p", LEASE, limit=10)
    assert [t.id for t in first] == [scheduled[4].id, scheduled[3].id]
    assert [t.id for t in rest] == [scheduled[2].id, scheduled[1].id, scheduled[0].id]


def test_renewed_leases_keep_their_timers_and_unrenewed_ones_are_taken_over(store: Store) -> None:
    """docs/cluster.md: a live process renews its claims (heartbeat); a dead one's run out after the lease."""
    short = timedelta(seconds=10)
    with store.transaction() as tx:
        kept, lost = (tx.schedule_timer(f"h{i}@example.com", TimerKind.RETRY, T0) for i in range(2))
    with store.transaction() as tx:
        assert [t.id for t in tx.claim_due_timers(T0, "alive", short)] == [kept.id, lost.id]
    for beat in range(1, 6):  # every 3 s, five times: 15 s, past the first lease's end
        with store.transaction() as tx:
            assert tx.renew_timer_leases([kept.id], "alive", T0 + beat * timedelta(seconds=3), short) == 1
    with store.transaction() as tx:
        # the unrenewed one is free at T0 + 10 s; the renewed one is held until 15 s + 10 s
        assert [t.id for t in tx.claim_due_timers(T0 + timedelta(seconds=16), "other", short)] == [lost.id]
        assert tx.claim_due_timers(T0 + timedelta(seconds=25) - timedelta(microseconds=1), "other", short) == []
        assert tx.renew_timer_leases([lost.id], "alive", T0 + timedelta(seconds=16), short) == 0  # not its own now
        assert tx.complete_timer(lost.id, "alive") is False
        assert tx.complete_timer(kept.id, "alive") is True
        assert tx.renew_timer_leases([kept.id], "alive", T0 + timedelta(seconds=16), short) == 0  # done: gone
        assert tx.renew_timer_leases([], "alive", T0, short) == 0
    with store.transaction() as tx, pytest.raises(ValueError, match="lease"):
        tx.renew_timer_leases([kept.id], "alive", T0, timedelta(0))


def test_released_leases_make_the_timers_claimable_at_once(store: Store) -> None:
    """docs/cluster.md: a clean stop ends its leases, so another process takes the timers without waiting."""
    with store.transaction() as tx:
        mine = [
            tx.schedule_timer(f"r{i}@example.com", TimerKind.RETRY, T0 + timedelta(seconds=i + 1)) for i in range(3)
        ]
        theirs = tx.schedule_timer("r-other@example.com", TimerKind.RETRY, T0)
    with store.transaction() as tx:
        assert [t.id for t in tx.claim_due_timers(T0, "them", LEASE)] == [theirs.id]
        assert len(tx.claim_due_timers(T0 + timedelta(seconds=3), "stopping", LEASE)) == 3
    with store.transaction() as tx:
        assert tx.release_timers("stopping") == 3
        assert tx.release_timers("stopping") == 0
        assert tx.next_timer_due() == mine[0].due_at  # due again now, not at the end of a lease
        again = tx.claim_due_timers(T0 + timedelta(seconds=3), "successor", LEASE)
    assert [(t.id, t.due_at, t.lease_owner) for t in again] == [(t.id, t.due_at, "successor") for t in mine]
    with store.transaction() as tx:
        assert tx.complete_timer(theirs.id, "them") is True  # another owner's lease was left alone


def test_schedule_timer_can_replace_the_messages_timer(store: Store) -> None:
    with store.transaction() as tx:
        old = tx.schedule_timer("rt@example.com", TimerKind.RETRY, T0)
        other_kind = tx.schedule_timer("rt@example.com", TimerKind.TRANSMIT, T0 + timedelta(hours=1))
        other_message = tx.schedule_timer("rt2@example.com", TimerKind.RETRY, T0 + timedelta(hours=2))
    with store.transaction() as tx:
        new = tx.schedule_timer("rt@example.com", TimerKind.RETRY, T0 + timedelta(seconds=30), replace_existing=True)
        claimed = tx.claim_due_timers(T0 + timedelta(days=1), "p", LEASE)
    assert new.id != old.id
    assert [t.id for t in claimed] == [new.id, other_kind.id, other_message.id]


def test_cancel_timers_removes_a_messages_timers(store: Store) -> None:
    with store.transaction() as tx:
        tx.schedule_timer("c1@example.com", TimerKind.RETRY, T0)
        tx.schedule_timer("c1@example.com", TimerKind.RETRY, T0 + timedelta(seconds=1))
        tx.schedule_timer("c1@example.com", TimerKind.TRANSMIT, T0 + timedelta(hours=1))
        other = tx.schedule_timer("c2@example.com", TimerKind.RETRY, T0 + timedelta(seconds=2))
    with store.transaction() as tx:
        assert tx.cancel_timers("c1@example.com", TimerKind.RETRY) == 2
        assert tx.cancel_timers("c1@example.com", TimerKind.RETRY) == 0
        assert tx.next_timer_due() == other.due_at
        assert tx.cancel_timers("c1@example.com") == 1
        assert tx.cancel_timers("nobody@example.com") == 0
        assert [t.id for t in tx.claim_due_timers(T0 + timedelta(days=1), "p", LEASE)] == [other.id]


# ------------------------------------------------------------------------------------------------ events


def test_events_are_an_append_only_journal(store: Store) -> None:
    with store.transaction() as tx:
        for i in range(3):
            tx.append_event(
                at=T0 + timedelta(seconds=i),
                kind="sent",
                message_id=f"e{i}@example.com",
                direction=Direction.OUTBOUND,
                detail={"attempt": i, "peer": ("a", "b"), "ok": True, "nested": {"x": None}},
            )
        tx.append_event(at=T0, kind="submitted")
    # Each has its id once committed, increasing in the order appended.
    ids = [event.id for event in tx.appended]
    assert [event.kind for event in tx.appended] == ["sent", "sent", "sent", "submitted"]
    assert ids == sorted(ids) and len(set(ids)) == 4 and ids[0] > 0
    with store.transaction(readonly=True) as tx:
        events = tx.list_events()
        assert [e.id for e in tx.list_events(after_id=ids[1])] == ids[2:]
        assert [e.id for e in tx.list_events(limit=2)] == ids[:2]
    first = events[0]
    assert (first.at, first.kind, first.message_id, first.direction) == (
        T0,
        "sent",
        "e0@example.com",
        Direction.OUTBOUND,
    )
    assert first.detail == {"attempt": 0, "peer": ["a", "b"], "ok": True, "nested": {"x": None}}
    assert (events[3].message_id, events[3].direction, events[3].detail) == (None, None, {})
    events[0].detail["attempt"] = 99  # a returned record is the caller's copy
    with store.transaction(readonly=True) as tx:
        assert tx.list_events(limit=1)[0].detail["attempt"] == 0


def test_a_savepoint_rolled_back_takes_its_events_and_keeps_those_before_it(store: Store) -> None:
    # The SQL store writes a transaction's events together; a read of the journal writes them earlier, so
    # this one is read inside the savepoint that is then rolled back.
    with store.transaction() as tx:
        tx.append_event(at=T0, kind="submitted", message_id="kept@example.com")
        with pytest.raises(ValueError), tx.savepoint():
            tx.append_event(at=T0, kind="failed", message_id="undone@example.com")
            assert [e.message_id for e in tx.list_events()] == ["kept@example.com", "undone@example.com"]
            raise ValueError("the unit fails")
        tx.append_event(at=T0, kind="delivered", message_id="kept@example.com")
    with store.transaction(readonly=True) as reader:
        stored = reader.list_events()
    assert [(e.kind, e.message_id) for e in stored] == [
        ("submitted", "kept@example.com"),
        ("delivered", "kept@example.com"),
    ]
    assert [(e.id, e.kind) for e in tx.appended] == [(e.id, e.kind) for e in stored]


def test_a_nul_in_an_events_detail_is_kept_as_a_replacement_character(store: Store) -> None:
    # PostgreSQL's text and jsonb hold no U+0000: refused at the commit it would fail the whole group commit.
    with store.transaction() as tx:
        tx.append_event(at=T0, kind="failed", detail={"cause": "a\x00b"})
        tx.append_event(at=T0, kind="failed", detail={"errors": [{"description": "c\x00"}], "k\x00": 1})
    with store.transaction(readonly=True) as tx:
        first, second = tx.list_events()
    assert first.detail == {"cause": "a\ufffdb"}
    assert second.detail == {"errors": [{"description": "c\ufffd"}], "k\ufffd": 1}


def test_an_events_detail_is_kept_as_it_reads_back(store: Store) -> None:
    """What an event's detail holds is what the journal reads back, whichever way it was made storable."""
    issues = ["MimeProblem at cid:x: a warning", "Inconsistent"]
    details: list[dict[str, object]] = [
        {"cpaid": "c", "acknowledged": True, "signed": False, "issues": issues, "held": None, "n": 1},  # the usual
        {"issues": ["a\x00b", 2, True, None]},  # a NUL in a list: made storable
        {"pair": ("a", 1), "nested": [["x"]], "errors": [{"description": "d"}]},  # read back as JSON reads it
    ]
    with store.transaction() as tx:
        for detail in details:
            tx.append_event(at=T0, kind="received", detail=detail)
        kept = [event.detail for event in tx.appended]
    issues.append("changed after")  # the caller's list is not the event's
    with store.transaction(readonly=True) as tx:
        stored = [event.detail for event in tx.list_events()]
    expected = [
        {"cpaid": "c", "acknowledged": True, "signed": False, "issues": issues[:2], "held": None, "n": 1},
        {"issues": ["a\ufffdb", 2, True, None]},
        {"pair": ["a", 1], "nested": [["x"]], "errors": [{"description": "d"}]},
    ]
    assert kept == stored == expected


def test_a_detail_of_text_numbers_flags_and_lists_of_them_is_not_converted_to_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store's JSON column converts a detail when it is written; a detail that reads back from JSON as it
    is (a received message's: its issues a list of text) is not converted to JSON and back before that."""
    from msh.store import rules

    def refused(*_args: object, **_kwargs: object) -> str:
        raise AssertionError("converted to JSON")

    detail: dict[str, object] = {"cpaid": "c", "acknowledged": True, "n": 3, "held": None, "issues": ["x", 1, False]}
    with monkeypatch.context() as patch:
        patch.setattr(rules.json, "dumps", refused)
        assert rules.detail(detail) == detail
    for converted in ({"issues": ("x",)}, {"issues": [1.5]}, {"errors": [{"a": 1}]}, {"issues": ["\x00"]}):
        with monkeypatch.context() as patch, pytest.raises(AssertionError, match="converted to JSON"):
            patch.setattr(rules.json, "dumps", refused)
            rules.detail(converted)


def test_the_events_of_one_message_read_back_in_order_newest_kept_by_the_limit(store: Store) -> None:
    with store.transaction() as tx:
        for i in range(5):
            tx.append_event(
                at=T0 + timedelta(seconds=i),
                kind="transmission",
                message_id="m1@example.com",
                direction=Direction.OUTBOUND,
                detail={"attempt": i + 1},
            )
            tx.append_event(at=T0, kind="received", message_id="m2@example.com", direction=Direction.INBOUND)
        tx.append_event(at=T0, kind="signal-Pong", message_id="m1@example.com", direction=Direction.INBOUND)
    with store.transaction(readonly=True) as tx:
        mine = tx.message_events("m1@example.com")
        assert [e.kind for e in mine] == ["transmission"] * 5 + ["signal-Pong"]
        outbound = tx.message_events("m1@example.com", direction=Direction.OUTBOUND)
        assert [e.detail["attempt"] for e in outbound] == [1, 2, 3, 4, 5]
        newest = tx.message_events("m1@example.com", direction=Direction.OUTBOUND, limit=2)
        assert [e.detail["attempt"] for e in newest] == [4, 5]
        assert tx.message_events("nobody@example.com") == []
        with pytest.raises(ValueError, match="limit"):
            tx.message_events("m1@example.com", limit=0)
    mine[0].detail["attempt"] = 99  # a returned record is the caller's copy
    with store.transaction(readonly=True) as tx:
        assert tx.message_events("m1@example.com", limit=6)[0].detail["attempt"] == 1


# ------------------------------------------------------------------------------------------ SQL particular


def test_committed_rows_and_due_timers_survive_a_restart(store_url: str, clock: FakeClock) -> None:
    """A restarted process finds everything committed, and executes the due timers exactly as before."""
    with open_store(store_url, clock=clock) as first:
        with first.transaction() as tx:
            add_outbound(tx, "r1@example.com", body=b"identical bytes")
            add_inbound(tx, "r2@example.com")
            timer = tx.schedule_timer("r1@example.com", TimerKind.RETRY, T0 + timedelta(seconds=30))
            tx.append_event(at=T0, kind="submitted", message_id="r1@example.com")
        with first.transaction() as tx:
            leased = tx.claim_due_timers(T0 + timedelta(seconds=30), "dead-process", LEASE)
        assert [t.id for t in leased] == [timer.id]
    with open_store(store_url, clock=clock) as second, second.transaction() as tx:
        outbound = tx.get_outbound("r1@example.com")
        assert outbound is not None
        with tx.open_blob(outbound.body_blob_id) as body:
            assert body.read() == b"identical bytes"
        assert tx.find_inbound("r2@example.com") is not None
        assert [e.kind for e in tx.list_events()] == ["submitted"]
        # The dead process's lease runs out; the new process then claims the timer.
        assert tx.claim_due_timers(T0 + timedelta(seconds=59), "new-process", LEASE) == []
        again = tx.claim_due_timers(T0 + timedelta(seconds=60), "new-process", LEASE)
        assert [(t.id, t.message_id, t.kind, t.due_at) for t in again] == [
            (timer.id, "r1@example.com", TimerKind.RETRY, T0 + timedelta(seconds=30))
        ]


def test_sqlite_connections_are_durable_wal_with_foreign_keys(sqlite_url: str) -> None:
    with open_store(sqlite_url) as store:
        assert isinstance(store, SqlStore)
        with store.engine.connect() as conn:
            pragmas = {
                name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
                for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
            }
    assert pragmas == {"journal_mode": "wal", "synchronous": 2, "foreign_keys": 1, "busy_timeout": 30000}
    assert Path(sqlite_url).is_file()


def test_a_plain_path_and_a_sqlite_url_name_the_same_store(sqlite_url: str) -> None:
    with open_store(sqlite_url) as by_path, by_path.transaction() as tx:
        add_outbound(tx, "same@example.com")
    with open_store(f"sqlite:///{sqlite_url}") as by_url, by_url.transaction() as tx:
        assert tx.get_outbound("same@example.com") is not None


def test_memory_url_opens_the_in_memory_twin() -> None:
    with open_store("memory:") as store:
        assert isinstance(store, MemoryStore) and store.url == "memory:"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "store URL is empty"),
        ("   ", "store URL is empty"),
        ("mysql://u@localhost/db", "'mysql' is not supported"),
        ("sqlite://", "names no database file"),
        ("sqlite:///:memory:", "names no database file"),
        ("postgresql+psycopg2://u@localhost/db", "use postgresql\\+psycopg://"),
        ("postgresql+asyncpg://u@localhost/db", "use postgresql\\+psycopg://"),
        ("http://[bad", "database .http. is not supported"),
        ("postgresql://u@host:notaport/db", "cannot be read"),
        ("://x", "cannot be read"),
    ],
)
def test_bad_store_urls_are_configuration_errors(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        open_store(url)


def test_a_missing_folder_or_a_folder_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist; create it"):
        open_store(str(tmp_path / "missing" / "store.db"))
    with pytest.raises(ConfigurationError, match="is a folder"):
        open_store(str(tmp_path))


def test_an_unreachable_database_is_a_configuration_error() -> None:
    # Port 1 on the loopback: nothing listens there, the connection is refused at once.
    with pytest.raises(ConfigurationError, match=r"cannot use the store at .*check that the database server runs"):
        open_store("postgresql://nobody:secret@127.0.0.1:1/none?connect_timeout=2")


def test_the_password_never_shows() -> None:
    with pytest.raises(ConfigurationError) as caught:
        open_store("postgresql://nobody:s3cr3t@127.0.0.1:1/none?connect_timeout=2")
    assert "s3cr3t" not in str(caught.value)


@pytest.mark.parametrize("size", [0, 1024 * 1024 + 1, True])
def test_a_bad_chunk_size_is_a_configuration_error(size: int) -> None:
    with pytest.raises(ConfigurationError, match="blob_chunk_size"):
        open_store("memory:", blob_chunk_size=size)
    with pytest.raises(ConfigurationError, match="blob_chunk_size"):
        SqlStore.open("/nonexistent-but-never-opened/x.db", blob_chunk_size=size)


# ------------------------------------------------------------------------------ sharing one database


def test_two_processes_never_claim_the_same_timer(store_url: str, open_store: Callable[..., Store]) -> None:
    """docs/design.md §8: concurrent claimers on separate connections (PostgreSQL: FOR UPDATE SKIP LOCKED;
    SQLite: one writer at a time)."""
    store = open_store(store_url)
    with store.transaction() as tx:
        scheduled = {
            tx.schedule_timer(f"c{i}@example.com", TimerKind.RETRY, T0 - timedelta(seconds=i)).id for i in range(300)
        }
    barrier = threading.Barrier(2)
    claims: dict[str, list[int]] = {"p1": [], "p2": []}
    errors: list[BaseException] = []

    def claimer(owner: str) -> None:
        try:
            barrier.wait(timeout=10)
            while True:
                with store.transaction() as tx:
                    got = tx.claim_due_timers(T0, owner, timedelta(minutes=5), limit=7)
                if not got:
                    return
                claims[owner].extend(t.id for t in got)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(owner,)) for owner in claims]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads)
    all_claims = claims["p1"] + claims["p2"]
    assert sorted(all_claims) == sorted(scheduled)  # every timer claimed, none twice
    assert not set(claims["p1"]) & set(claims["p2"])
    with store.transaction(readonly=True) as tx:
        assert tx.next_timer_due() == T0 + timedelta(minutes=5)


def test_concurrent_copies_of_a_message_are_stored_once(store_url: str, open_store: Callable[..., Store]) -> None:
    """Copies of one MessageId received at once on separate connections: one is stored, the others are
    duplicates (on PostgreSQL the later inserts wait for the first transaction, then see the duplicate)."""
    store = open_store(store_url)
    barrier = threading.Barrier(4)
    outcomes: list[str] = []
    lock = threading.Lock()

    def receive(copy: int) -> None:
        barrier.wait(timeout=10)
        try:
            with store.transaction() as tx:
                add_inbound(tx, "race@example.com", body=f"copy {copy}".encode())
            outcome = "stored"
        except DuplicateMessage:
            outcome = "duplicate"
        except BaseException as exc:
            outcome = repr(exc)
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=receive, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["duplicate", "duplicate", "duplicate", "stored"]
    with store.transaction(readonly=True) as tx:
        assert len(tx.inbox_list()) == 1


def test_postgres_read_only_transactions_are_read_only_in_the_database(
    pg_url: str, open_store: Callable[..., Store]
) -> None:
    store = open_store(pg_url)
    assert isinstance(store, SqlStore)
    with store.transaction(readonly=True) as tx:
        conn = tx._conn  # type: ignore[attr-defined]
        assert conn.execute(text("SHOW transaction_read_only")).scalar() == "on"


# ---------------------------------------------------------------------------------------------- savepoints


def test_a_savepoint_that_raises_undoes_only_its_own_changes(store: Store) -> None:
    with store.transaction() as tx:
        add_outbound(tx, "kept@example.com", body=b"kept")
        with pytest.raises(Boom), tx.savepoint():
            add_outbound(tx, "undone@example.com", body=b"undone")
            tx.schedule_timer("kept@example.com", TimerKind.RETRY, T0)
            tx.append_event(at=T0, kind="rejected")
            tx.update_outbound_state(outbound_state("kept@example.com", status=OutboundStatus.FAILED))
            assert tx.get_outbound("undone@example.com") is not None
            raise Boom
        assert tx.get_outbound("undone@example.com") is None
        with tx.savepoint():
            add_inbound(tx, "after@example.com")
    with store.transaction(readonly=True) as tx:
        kept = tx.get_outbound("kept@example.com")
        assert kept is not None and kept.state.status is OutboundStatus.PENDING
        assert tx.get_outbound("undone@example.com") is None
        assert tx.find_inbound("after@example.com") is not None
        assert [e.kind for e in tx.list_events()] == []
        assert tx.next_timer_due() is None
    with store.open_blob(kept.body_blob_id) as body:
        assert body.read() == b"kept"


def test_savepoints_nest_and_a_duplicate_inside_one_leaves_the_rest(store: Store) -> None:
    with store.transaction() as tx:
        add_inbound(tx, "dup@example.com", body=b"first")
        with tx.savepoint():
            add_outbound(tx, "outer@example.com")
            with pytest.raises(DuplicateMessage), tx.savepoint():
                add_inbound(tx, "dup@example.com", body=b"second")
            with tx.savepoint():
                add_outbound(tx, "inner@example.com")
    with store.transaction(readonly=True) as tx:
        assert tx.get_outbound("outer@example.com") is not None
        assert tx.get_outbound("inner@example.com") is not None
        first = tx.find_inbound("dup@example.com")
        assert first is not None
        assert len(tx.inbox_list(None)) == 1
    with store.open_blob(first.body_blob_id) as body:
        assert body.read() == b"first"


def test_a_savepoint_opened_at_once_inside_another_undoes_its_own_changes_and_only_those(store: Store) -> None:
    # The SQL store opens no savepoint of its own for a block that begins where the enclosing one began
    # (nothing changed in between): these are the rules of nested savepoints that must hold all the same.
    with store.transaction() as tx:
        add_outbound(tx, "before@example.com")
        with tx.savepoint():
            with pytest.raises(Boom), tx.savepoint():
                with tx.savepoint():  # a third level, opened at once too
                    add_outbound(tx, "innermost@example.com")
                add_outbound(tx, "undone@example.com")
                raise Boom
            assert tx.get_outbound("innermost@example.com") is None
            assert tx.get_outbound("before@example.com") is not None
            add_outbound(tx, "after@example.com")  # the enclosing block goes on
            with pytest.raises(Boom), tx.savepoint():  # opened after a change: undoes only its own
                add_outbound(tx, "late@example.com")
                raise Boom
        with pytest.raises(Boom), tx.savepoint():
            with tx.savepoint():  # released at once...
                add_outbound(tx, "released@example.com")
            raise Boom  # ...and undone with the block around it
        assert tx.get_outbound("released@example.com") is None
    with store.transaction(readonly=True) as tx:
        kept = {m.state.message_id for m in tx.list_outbound()}
        assert kept == {"before@example.com", "after@example.com"}


def test_changes_of_a_released_savepoint_roll_back_with_the_transaction(store: Store) -> None:
    with pytest.raises(Boom), store.transaction() as tx:
        with tx.savepoint():
            add_outbound(tx, "gone@example.com")
        raise Boom
    with store.transaction(readonly=True) as tx:
        assert tx.get_outbound("gone@example.com") is None


def test_a_read_only_transaction_refuses_a_savepoint(store: Store) -> None:
    with store.transaction(readonly=True) as tx, pytest.raises(StoreError, match="read-only"), tx.savepoint():
        pass
