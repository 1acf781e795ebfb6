"""``scripts/prefill_store.py`` (the benchmark's bulk load) writes rows the store reads back as its own, and a
store it loaded goes on taking new messages: the ids continue after the loaded ones (docs/benchmarks.md)."""

from __future__ import annotations

from collections.abc import Callable

from msh.engine import OutboundStatus
from msh.store import InboxState, Store
from msh.store.events import EventKind
from msh.store.records import Direction
from tests.support.scripts import load_script
from tests.support.store import T0, add_inbound, add_outbound


def test_a_senders_past_messages_read_back_and_new_ones_follow(
    store_url: str, open_store: Callable[..., Store]
) -> None:
    load_script("prefill_store").prefill(store_url, 25, "sender")
    store = open_store(store_url)
    with store.transaction() as tx:
        past = tx.get_outbound("prefill-7@bench.invalid")
        assert past is not None and past.state.status is OutboundStatus.DELIVERED
        assert tx.open_blob(past.body_blob_id).read().startswith(b"<prefilled/>")
        kinds = [e.kind for e in tx.message_events("prefill-7@bench.invalid")]
        assert sorted(kinds) == sorted([EventKind.SUBMITTED, EventKind.TRANSMISSION, EventKind.DELIVERED])
        new = add_outbound(tx, "new@example.com")
        tx.append_event(at=T0, kind=EventKind.SUBMITTED, message_id="new@example.com")
    assert new.body_blob_id > 25 and tx.appended[-1].id > 75
    with store.transaction(readonly=True) as tx:
        assert len(tx.list_events(limit=1000)) == 76


def test_a_receivers_past_messages_are_duplicate_elimination_records(
    store_url: str, open_store: Callable[..., Store]
) -> None:
    load_script("prefill_store").prefill(store_url, 25, "receiver")
    store = open_store(store_url)
    with store.transaction() as tx:
        past = tx.find_inbound("prefill-12@bench.invalid")
        assert past is not None and past.duplicate_elimination and past.ack_envelope
        entry = tx.inbox_entry(past.id)
        assert entry is not None and entry.state is InboxState.ACKNOWLEDGED_BY_APP
        assert tx.increment_duplicate("prefill-12@bench.invalid", T0) == 1
        new = add_inbound(tx, "new@example.com")
        tx.append_event(at=T0, kind=EventKind.RECEIVED, message_id=new.message_id, direction=Direction.INBOUND)
    assert new.id > 25
