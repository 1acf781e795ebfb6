"""The store's retention port (msh.store.retention_port): what may be purged, and purging it, identical on
SQLite, PostgreSQL (skipped with its reason when none is reachable) and the in-memory twin. A message in
flight (being retried, awaiting an acknowledgment, waiting in the inbox) is never removed (ebMS2 §6.4.6:
kept; issue 22: "a message still being retried or still in the inbox is never purged")."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msh.engine import OutboundStatus
from msh.errors import ErrorCode, Issue, Severity
from msh.store import OutboundKind, Store, StoreError, TimerKind, UnknownBlob
from msh.store.api import Direction, EventKind, InboxState
from tests.support.store import T0, FakeClock, add_inbound, add_outbound, outbound_state

FAILURE = Issue(ErrorCode.DELIVERY_FAILURE, Severity.ERROR, "not delivered")
LATER = T0 + timedelta(days=1)
DETAIL = {"status": "test"}


def final(message_id: str, status: OutboundStatus = OutboundStatus.DELIVERED) -> object:
    failure = FAILURE if status is OutboundStatus.FAILED else None
    return outbound_state(message_id, status=status, attempts=1, first_sent_at=T0, failure=failure)


def sent(store: Store, message_id: str, status: OutboundStatus, body: bytes = b"<soap/>") -> int:
    """A sent message in ``status`` (a timer with it while it is not final, as the engine leaves it)."""
    with store.transaction() as tx:
        row = add_outbound(tx, message_id, body)
        if status.final:
            tx.update_outbound_state(final(message_id, status))  # type: ignore[arg-type]
        else:
            tx.update_outbound_state(replace(row.state, status=status, attempts=1, first_sent_at=T0))
            tx.schedule_timer(message_id, TimerKind.RETRY, T0 + timedelta(minutes=1))
    return row.body_blob_id


def candidates(store: Store) -> tuple[list[str], list[str]]:
    with store.transaction(readonly=True) as tx:
        out = tx.outbound_purge_candidates(settled_before=LATER)
        inn = tx.inbound_purge_candidates(settled_before=LATER)
    return [c.message_id for c in out], [c.message_id for c in inn]


def test_only_final_sent_messages_without_timers_are_candidates(store: Store) -> None:
    for status in OutboundStatus:
        sent(store, f"{status.value}@a", status, body=b"x" * 100)
    out, _ = candidates(store)
    assert sorted(out) == ["delivered@a", "failed@a", "sent@a"]
    with store.transaction(readonly=True) as tx:
        (first,) = tx.outbound_purge_candidates(settled_before=LATER, limit=1)
    assert first.size == 100 and first.inbound_id is None and first.direction is Direction.OUTBOUND
    assert first.persist_duration is not None and first.started_at == T0


def test_a_final_message_with_a_timer_left_is_not_a_candidate_nor_removed(store: Store) -> None:
    sent(store, "m@a", OutboundStatus.FAILED)
    with store.transaction() as tx:
        tx.schedule_timer("m@a", TimerKind.TRANSMIT, T0)  # e.g. a resend queued for msh serve
    assert candidates(store) == ([], [])
    with store.transaction() as tx:
        assert tx.purge_outbound("m@a", at=LATER, detail=DETAIL) is None
        assert tx.get_outbound("m@a") is not None


def test_purging_a_sent_message_removes_its_row_and_body_and_journals_it(store: Store, clock: FakeClock) -> None:
    blob = sent(store, "m@a", OutboundStatus.DELIVERED, body=b"y" * 1234)
    with store.transaction() as tx:
        assert tx.purge_outbound("m@a", at=LATER, detail=DETAIL) == 1234
    with store.transaction(readonly=True) as tx:
        assert tx.get_outbound("m@a") is None
        with pytest.raises(UnknownBlob):
            tx.blob_size(blob)
        events = tx.message_events("m@a")
    purged = events[-1]
    assert purged.kind == EventKind.PURGED and purged.direction is Direction.OUTBOUND
    assert purged.detail == {"status": "test", "bytes": 1234}
    assert purged.cpa_id == "cpa-1" and purged.to_party == "urn:duns:456"  # the facts outlive the row


@pytest.mark.parametrize("status", [OutboundStatus.PENDING, OutboundStatus.AWAITING_ACK, OutboundStatus.FORWARDED])
def test_a_message_in_flight_is_never_removed(store: Store, status: OutboundStatus) -> None:
    sent(store, "m@a", status)
    with store.transaction() as tx:
        assert tx.purge_outbound("m@a", at=LATER, detail=DETAIL) is None
    with store.transaction(readonly=True) as tx:
        assert tx.get_outbound("m@a") is not None
        assert tx.message_events("m@a") == []


def test_received_messages_are_candidates_once_settled_by_the_application(store: Store) -> None:
    with store.transaction() as tx:
        new = add_inbound(tx, "new@b")
        taken = add_inbound(tx, "taken@b")
        acked = add_inbound(tx, "acked@b")
        held = add_inbound(tx, "held@b", deliver=False, hold=True, sequence_number=2)
        no_entry = add_inbound(tx, "none@b", deliver=False, duplicate_elimination=False)
        tx.inbox_mark_delivered(taken.id, T0)
        tx.inbox_ack(acked.id, T0 + timedelta(minutes=5))
    _, inn = candidates(store)
    assert inn == ["none@b", "acked@b"]  # oldest settled first
    with store.transaction() as tx:
        for record in (new, taken, held):
            assert tx.purge_inbound(record.id, at=LATER, detail=DETAIL) is None
        assert tx.purge_inbound(acked.id, at=LATER, detail=DETAIL) == len(b"<soap/>")
        assert tx.purge_inbound(no_entry.id, at=LATER, detail=DETAIL) == len(b"<soap/>")
    with store.transaction(readonly=True) as tx:
        assert tx.inbox_entry(acked.id) is None and tx.find_inbound("acked@b") is None
        assert sorted(e.state for e in tx.inbox_list(None)) == sorted(
            [InboxState.NEW, InboxState.DELIVERED_TO_APP, InboxState.HELD]
        )
        purged = tx.message_events("acked@b", direction=Direction.INBOUND)[-1]
    assert purged.kind == EventKind.PURGED and purged.detail["copy"] == acked.id


def test_once_purged_the_message_id_is_new_again(store: Store) -> None:
    # ebMS2 §6.4.6: the duplicate-elimination record lives as long as the message is kept; retention decides when.
    with store.transaction() as tx:
        first = add_inbound(tx, "again@b")
        tx.inbox_ack(first.id, T0)
    with store.transaction() as tx:
        assert tx.purge_inbound(first.id, at=LATER, detail=DETAIL) is not None
    with store.transaction() as tx:
        second = add_inbound(tx, "again@b")
        assert tx.find_inbound("again@b") == second


def test_without_duplicate_elimination_the_next_copy_becomes_the_first(store: Store) -> None:
    with store.transaction() as tx:
        one = add_inbound(tx, "dup@b", duplicate_elimination=False)
        two = add_inbound(tx, "dup@b", duplicate_elimination=False)
        tx.inbox_ack(one.id, T0)
    with store.transaction() as tx:
        assert tx.purge_inbound(one.id, at=LATER, detail=DETAIL) is not None
    with store.transaction(readonly=True) as tx:
        found = tx.find_inbound("dup@b")
    assert found is not None and found.id == two.id


def test_a_received_copy_whose_forward_is_under_way_stays(store: Store) -> None:
    with store.transaction() as tx:
        record = add_inbound(tx, "fw@b", deliver=False, duplicate_elimination=False)
        add_outbound(tx, "fw@b", kind=OutboundKind.FORWARD)
        tx.schedule_timer("fw@b", TimerKind.RETRY, T0)
    assert candidates(store) == ([], [])
    with store.transaction() as tx:
        assert tx.purge_inbound(record.id, at=LATER, detail=DETAIL) is None


def test_a_body_another_row_names_stays(store: Store) -> None:
    with store.transaction() as tx:
        row = add_outbound(tx, "one@a")
        add_outbound(tx, "two@a", body_blob_id=row.body_blob_id)
        tx.update_outbound_state(final("one@a"))  # type: ignore[arg-type]
    with store.transaction() as tx:
        assert tx.purge_outbound("one@a", at=LATER, detail=DETAIL) == 0  # removed; its shared body stays
        assert tx.blob_size(row.body_blob_id) == len(b"<soap/>")


def test_listing_pages_and_cutoff(store: Store, clock: FakeClock) -> None:
    for n in range(5):
        sent(store, f"m{n}@a", OutboundStatus.SENT)
        clock.advance(60)
    with store.transaction(readonly=True) as tx:
        page = tx.outbound_purge_candidates(settled_before=LATER, limit=2)
        rest = tx.outbound_purge_candidates(
            settled_before=LATER, after=(page[-1].settled_at, page[-1].message_id), limit=10
        )
        early = tx.outbound_purge_candidates(settled_before=T0 + timedelta(seconds=90))
    assert [c.message_id for c in page + rest] == [f"m{n}@a" for n in range(5)]
    assert [c.message_id for c in early] == ["m0@a", "m1@a"]


def test_arguments_are_checked_and_readonly_refuses(store: Store) -> None:
    with store.transaction(readonly=True) as tx:
        with pytest.raises(ValueError, match="limit"):
            tx.outbound_purge_candidates(settled_before=LATER, limit=0)
        with pytest.raises(ValueError, match="settled_before"):
            tx.inbound_purge_candidates(settled_before=LATER.replace(tzinfo=None))
        with pytest.raises(StoreError, match="read-only"):
            tx.purge_outbound("m@a", at=LATER, detail=DETAIL)


def test_a_purge_rolled_back_removes_nothing(store: Store) -> None:
    sent(store, "m@a", OutboundStatus.FAILED)

    class Boom(Exception):
        pass

    with pytest.raises(Boom), store.transaction() as tx:
        tx.purge_outbound("m@a", at=LATER, detail=DETAIL)
        raise Boom
    with store.transaction(readonly=True) as tx:
        assert tx.get_outbound("m@a") is not None


RUNS = itertools.count()
STATES = st.sampled_from(list(OutboundStatus))
INBOX = st.sampled_from(["new", "taken", "acked", "held"])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(out=st.lists(STATES, max_size=6), inn=st.lists(INBOX, max_size=6))
def test_whatever_the_mix_only_what_is_settled_goes(
    make_store: object, out: list[OutboundStatus], inn: list[str]
) -> None:
    store = make_store()  # type: ignore[operator]
    run = next(RUNS)  # an SQL kind opens the same database for every example: names of its own
    for n, status in enumerate(out):
        sent(store, f"o{n}.{run}@a", status)
    ids = {}
    with store.transaction() as tx:
        for n, state in enumerate(inn):
            record = add_inbound(
                tx, f"i{n}.{run}@b", deliver=state != "held", hold=state == "held", sequence_number=n + 1
            )
            ids[record.id] = state
            if state == "taken":
                tx.inbox_mark_delivered(record.id, T0)
            elif state == "acked":
                tx.inbox_ack(record.id, T0)
    with store.transaction() as tx:
        gone_out = {
            n for n in range(len(out)) if tx.purge_outbound(f"o{n}.{run}@a", at=LATER, detail=DETAIL) is not None
        }
        gone_in = {i for i in ids if tx.purge_inbound(i, at=LATER, detail=DETAIL) is not None}
    assert gone_out == {n for n, s in enumerate(out) if s.final}
    assert gone_in == {i for i, state in ids.items() if state == "acked"}
