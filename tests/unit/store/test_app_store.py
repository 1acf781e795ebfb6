"""The store's records for the application interfaces (msh.store.app_port), on every store kind."""

from __future__ import annotations

from datetime import timedelta

import pytest

from msh.store import Store, UnknownMessage
from msh.store.app_records import AppRequest, InboxBatch, InboxClaim, InboxQuery, InboxView, PriorityRule
from msh.store.errors import DuplicateKey
from tests.support.store import T0, add_inbound


def _request(message_id: str = "urn:uuid:1", application: str = "billing") -> AppRequest:
    return AppRequest(message_id, application, T0, "sha256:abc", 201, b'{"messageId": "m1"}', T0)


def test_a_request_is_recorded_once_and_read_back(store: Store) -> None:
    with store.transaction() as tx:
        tx.record_app_request(_request())
        with pytest.raises(DuplicateKey):
            tx.record_app_request(_request(application="other"))
        # the transaction stays usable after the duplicate
        tx.record_app_request(_request("urn:uuid:2"))
    with store.transaction(readonly=True) as tx:
        assert tx.app_request("urn:uuid:1") == _request()
        assert tx.app_request("urn:uuid:3") is None


def test_a_rolled_back_request_is_not_kept(store: Store) -> None:
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.record_app_request(_request())
        raise RuntimeError
    with store.transaction(readonly=True) as tx:
        assert tx.app_request("urn:uuid:1") is None


def test_old_requests_are_purged(store: Store) -> None:
    with store.transaction() as tx:
        tx.record_app_request(_request())
        later = AppRequest("urn:uuid:2", "billing", T0, "f", 201, b"{}", T0 + timedelta(days=2))
        tx.record_app_request(later)
        assert tx.purge_app_requests(T0 + timedelta(days=1)) == 1
        assert tx.app_request("urn:uuid:1") is None
        assert tx.app_request("urn:uuid:2") == later


def _fill(store: Store) -> list[int]:
    ids = []
    with store.transaction() as tx:
        for n in range(4):
            ids.append(add_inbound(tx, f"m{n}@x", received_at=T0 + timedelta(seconds=n)).id)
    return ids


def test_views_follow_leases_and_rejections(store: Store) -> None:
    a, b, c, d = _fill(store)
    now = T0 + timedelta(minutes=1)
    with store.transaction() as tx:
        tx.put_inbox_claim(InboxClaim(a, "billing", now + timedelta(seconds=30), None, None, None, 1))
        tx.put_inbox_claim(InboxClaim(b, "billing", now - timedelta(seconds=1), None, None, None, 1))  # expired
        tx.put_inbox_claim(InboxClaim(c, "billing", None, None, now, "bad order", 1))
        tx.inbox_ack(d, now)

    def ids(view: InboxView, at: object = now) -> list[int]:
        with store.transaction(readonly=True) as tx:
            return [i.entry.id for i in tx.app_inbox(InboxQuery(now=at, view=view))]  # type: ignore[arg-type]

    assert ids(InboxView.AVAILABLE) == [b]
    assert ids(InboxView.LEASED) == [a]
    assert ids(InboxView.DEAD) == [c]
    assert ids(InboxView.ALL) == [a, b, c, d]
    # once its lease ends, a is back in the inbox
    assert ids(InboxView.AVAILABLE, now + timedelta(seconds=31)) == [a, b]
    with store.transaction(readonly=True) as tx:
        assert tx.inbox_claim(c) == InboxClaim(c, "billing", None, None, now, "bad order", 1)
        assert tx.inbox_claim(d) is None


def test_filters_priorities_and_received_before(store: Store) -> None:
    a, b, c, _ = _fill(store)
    query = InboxQuery(now=T0, priorities=(PriorityRule("cpa-1", None, "OrderAck", 5),), limit=2)
    with store.transaction(readonly=True) as tx:
        items = tx.app_inbox(query)
        assert [i.entry.id for i in items] == [a, b]
        assert {i.priority for i in items} == {5}
        assert items[0].service == "urn:services:Orders" and items[0].from_party == "urn:duns:456"
        assert tx.app_inbox(InboxQuery(now=T0, action="Other")) == []
        assert [i.entry.id for i in tx.app_inbox(InboxQuery(now=T0, conversation_id="conv-9", limit=1))] == [a]
        before = T0 + timedelta(seconds=2)
        assert [i.entry.id for i in tx.app_inbox(InboxQuery(now=T0, received_before=before))] == [a, b]
    # a claim on c with a higher-priority rule does not matter: priority comes from the rules
    assert c


def test_a_claim_needs_its_entry(store: Store) -> None:
    with pytest.raises(UnknownMessage), store.transaction() as tx:
        tx.put_inbox_claim(InboxClaim(999, "billing", T0, None, None, None, 1))


def test_batches_are_recorded_and_confirmed_once(store: Store) -> None:
    a, b, _, _ = _fill(store)
    batch = InboxBatch("b-1", "billing", (a, b), T0, T0 + timedelta(minutes=5), None)
    with store.transaction() as tx:
        tx.add_inbox_batch(batch)
        with pytest.raises(DuplicateKey):
            tx.add_inbox_batch(batch)
    with store.transaction() as tx:
        confirmed = tx.confirm_inbox_batch("b-1", T0 + timedelta(seconds=5))
        assert confirmed.confirmed_at == T0 + timedelta(seconds=5)
        again = tx.confirm_inbox_batch("b-1", T0 + timedelta(seconds=9))
        assert again.confirmed_at == T0 + timedelta(seconds=5)
        with pytest.raises(UnknownMessage):
            tx.confirm_inbox_batch("b-2", T0)
    with store.transaction(readonly=True) as tx:
        stored = tx.inbox_batch("b-1")
        assert stored is not None and stored.entry_ids == (a, b) and stored.confirmed_at == T0 + timedelta(seconds=5)
        assert tx.inbox_batch("nope") is None


def test_cursors_start_at_zero_and_move_with_their_transaction(store: Store) -> None:
    with store.transaction() as tx:
        assert tx.app_cursor("webhook:erp") == 0
        tx.set_app_cursor("webhook:erp", 41)
        tx.set_app_cursor("webhook:erp", 42)
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.set_app_cursor("webhook:erp", 99)
        raise RuntimeError
    with store.transaction(readonly=True) as tx:
        assert tx.app_cursor("webhook:erp") == 42
        assert tx.app_cursor("webhook:crm") == 0
    with pytest.raises(ValueError), store.transaction() as tx:
        tx.set_app_cursor("webhook:erp", -1)
