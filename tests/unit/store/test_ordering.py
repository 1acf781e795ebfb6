"""The store's MessageOrder records (ebMS2 §9): sequence counters, received sequences' positions, held inbox
entries; identical on SQLite, PostgreSQL and the in-memory twin."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from msh.engine import OutboundStatus
from msh.engine.ordering import OrderPosition, SequenceCounter, assign
from msh.store import Store
from msh.store.api import InboxState
from msh.store.app_records import InboxQuery, InboxView
from msh.store.order_port import sequence_key, sequence_of
from tests.support.store import T0, add_inbound, add_outbound, outbound_state

KEY = ("cpa-1", "urn:duns:456", "conv-9")


def test_a_counter_is_kept_per_agreement_and_conversation(store: Store) -> None:
    with store.transaction() as tx:
        assert tx.sequence_counter("cpa-1", "conv-1") is None
        tx.set_sequence_counter("cpa-1", "conv-1", SequenceCounter(1))
        tx.set_sequence_counter("cpa-1", "conv-2", SequenceCounter(7))
    with store.transaction() as tx:
        assert tx.sequence_counter("cpa-1", "conv-1") == SequenceCounter(1)
        tx.set_sequence_counter("cpa-1", "conv-1", SequenceCounter(2))
        tx.break_sequence("cpa-1", "conv-2")
        tx.break_sequence("cpa-1", "conv-none")  # no counter: nothing to break
    with store.transaction(readonly=True) as tx:
        assert tx.sequence_counter("cpa-1", "conv-1") == SequenceCounter(2)
        assert tx.sequence_counter("cpa-1", "conv-2") == SequenceCounter(7, broken=True)
        assert tx.sequence_counter("cpa-1", "conv-none") is None
    with store.transaction() as tx, pytest.raises(ValueError, match="SequenceNumber"):
        tx.set_sequence_counter("cpa-1", "x", SequenceCounter(100_000_000))


def test_messages_under_way_are_counted_by_their_conversation_and_status(store: Store) -> None:
    with store.transaction() as tx:
        add_outbound(tx, "a@x", conversation_id="conv-1", sequence_number=0)
        add_outbound(tx, "b@x", conversation_id="conv-1", sequence_number=1)
        add_outbound(tx, "c@x", conversation_id="conv-1")  # no MessageOrder
        add_outbound(tx, "d@x", conversation_id="conv-2", sequence_number=0)
        done = outbound_state("e@x", status=OutboundStatus.FAILED, attempts=1)
        add_outbound(tx, "e@x", conversation_id="conv-1", sequence_number=2, state=done)
    with store.transaction(readonly=True) as tx:
        assert tx.ordered_under_way("cpa-1", "conv-1") == 2
        assert tx.get_outbound("b@x").sequence_number == 1  # type: ignore[union-attr]


def test_a_received_sequence_keeps_its_position_and_its_held_entries(store: Store) -> None:
    with store.transaction() as tx:
        assert tx.order_position(KEY) is None
        add_inbound(tx, "m0@x", sequence_number=0)
        held_2 = add_inbound(tx, "m2@x", deliver=False, hold=True, sequence_number=2)
        held_1 = add_inbound(tx, "m1@x", deliver=False, hold=True, sequence_number=1, received_at=T0 + timedelta(1))
        tx.set_order_position(KEY, OrderPosition(1, held=2, gap_since=T0))
    with store.transaction() as tx:
        assert tx.order_position(KEY) == OrderPosition(1, held=2, gap_since=T0)
        assert [(n, e.message_id, e.state) for n, e in tx.held_entries(KEY)] == [
            (2, "m2@x", InboxState.HELD),
            (1, "m1@x", InboxState.HELD),
        ]
        # Held entries are never offered: not in the inbox's new entries, not available to applications.
        assert [e.message_id for e in tx.inbox_list(InboxState.NEW)] == ["m0@x"]
        available = tx.app_inbox(InboxQuery(now=T0, view=InboxView.AVAILABLE))
        assert [i.entry.message_id for i in available] == ["m0@x"]
        held = tx.app_inbox(InboxQuery(now=T0, view=InboxView.HELD))
        assert sorted(i.entry.message_id for i in held) == ["m1@x", "m2@x"]
        with pytest.raises(ValueError, match="is held: its turn"):
            tx.inbox_ack(held_1.id, T0)
        released = tx.release_held(held_1.id, T0 + timedelta(days=2))
        abandoned = tx.abandon_held(held_2.id)
        assert (released.state, abandoned.state) == (InboxState.NEW, InboxState.ABANDONED)
        # A released entry enters the inbox when its turn came: offered after what was offered before it.
        assert released.received_at == T0 + timedelta(days=2)
        with pytest.raises(ValueError, match="not held"):
            tx.release_held(held_1.id, T0)
        tx.set_order_position(KEY, OrderPosition(3, broken=True))
    with store.transaction(readonly=True) as tx:
        assert tx.held_entries(KEY) == []
        assert tx.order_position(KEY) == OrderPosition(3, broken=True)
        assert [e.message_id for e in tx.inbox_list(InboxState.NEW)] == ["m0@x", "m1@x"]
        assert tx.inbox_entry(held_1.id).received_at == T0 + timedelta(days=2)  # type: ignore[union-attr]
        assert tx.find_inbound("m1@x").received_at < T0 + timedelta(days=2)  # type: ignore[union-attr]
        assert tx.find_inbound("m2@x").sequence_number == 2  # type: ignore[union-attr]


def test_a_message_is_delivered_or_held_never_both(store: Store) -> None:
    with store.transaction() as tx, pytest.raises(ValueError, match="not both"):
        add_inbound(tx, "both@x", deliver=True, hold=True, sequence_number=1)


def test_the_gap_timer_key_names_the_sequence() -> None:
    assert sequence_of(sequence_key(KEY)) == KEY
    assert sequence_of("m1@x") is None and sequence_of("order-gap:not json") is None


def test_two_processes_never_give_one_sequence_number_twice(store_url: str, open_store: Callable[..., Store]) -> None:
    """Two stores on one database (two processes) number a new conversation's messages at once: each number
    is given once (ebMS2 §9.1.1: "the SequenceNumber ... MUST be unique within the ConversationId"), also for
    the first, when there is no record yet to lock."""
    stores = [open_store(store_url), open_store(store_url)]
    barrier = threading.Barrier(2)
    given: list[int] = []
    errors: list[BaseException] = []

    def number(store: Store) -> None:
        try:
            barrier.wait(timeout=10)
            for _ in range(25):
                with store.transaction() as tx:
                    counter = tx.sequence_counter("cpa-1", "conv-race")
                    order, kept = assign(counter, under_way=0, conversation_id="conv-race")
                    tx.set_sequence_counter("cpa-1", "conv-race", kept)
                given.append(order.sequence_number)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=number, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads)
    assert sorted(given) == list(range(50))
