"""``Transaction.backlog``: the timers due and not taken, and the inbox by state, on every kind of store (the
gauges of the admin port's /metrics)."""

from __future__ import annotations

from datetime import timedelta

from msh.store import Store
from msh.store.api import InboxState, TimerKind
from tests.support.store import T0, add_inbound

LEASE = timedelta(seconds=30)


def test_backlog_counts_due_timers_and_the_inbox(store: Store) -> None:
    with store.transaction(readonly=True) as tx:
        empty = tx.backlog(T0)
    assert (empty.timers_due, empty.oldest_due, dict(empty.inbox), empty.oldest_waiting) == (0, None, {}, None)
    with store.transaction() as tx:
        tx.schedule_timer("late@example.com", TimerKind.RETRY, T0 + timedelta(seconds=60))
        tx.schedule_timer("due1@example.com", TimerKind.RETRY, T0 - timedelta(seconds=20))
        tx.schedule_timer("due2@example.com", TimerKind.RETRY, T0 - timedelta(seconds=5))
        taken = tx.schedule_timer("taken@example.com", TimerKind.RETRY, T0 - timedelta(seconds=90))
        add_inbound(tx, "old@example.com", received_at=T0 - timedelta(minutes=10))
        add_inbound(tx, "new@example.com", received_at=T0 - timedelta(minutes=1))
        settled = add_inbound(tx, "settled@example.com", received_at=T0 - timedelta(hours=1))
    with store.transaction() as tx:
        [claimed] = tx.claim_due_timers(T0 - timedelta(seconds=60), "p", LEASE)  # only 'taken' was due then
        assert claimed.id == taken.id
        tx.inbox_ack(settled.id, T0)
    with store.transaction(readonly=True) as tx:
        found = tx.backlog(T0)
    # 'taken' is leased until T0-30s: due again, claimable by anyone; 'late' is not due yet.
    assert found.timers_due == 3
    assert found.oldest_due == T0 - timedelta(seconds=90)
    assert dict(found.inbox) == {InboxState.NEW: 2, InboxState.ACKNOWLEDGED_BY_APP: 1}
    assert found.oldest_waiting == T0 - timedelta(minutes=10)  # the settled one does not wait
    with store.transaction(readonly=True) as tx:
        assert tx.backlog(T0 - timedelta(seconds=35)).timers_due == 0  # 'taken' leased until T0-30s, none due
        assert tx.backlog(T0 - timedelta(seconds=25)).timers_due == 1  # its lease ran out: due again
