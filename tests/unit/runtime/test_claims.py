"""Timer claims of several processes on one store (docs/cluster.md): a heartbeat keeps a live process's claims,
a process that stops renewing loses them after the lease, a clean stop gives them back at once, and a round
claims a few timers, no more than the free transmission slots. Fake clock, no sleeps; on the memory store,
SQLite and PostgreSQL alike (``make_store``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from msh.runtime.claims import TimerClaims
from msh.runtime.config import TimerSettings
from msh.store import Store, Timer, TimerKind, Transaction
from msh.store.inline import InlineWriter
from tests.support.store import T0, FakeClock

SETTINGS = TimerSettings(lease=timedelta(seconds=10), renew_interval=timedelta(seconds=3), claim_limit=8)


def _node(store: Store, owner: str, clock: FakeClock, *, free: Callable[[], int] = lambda: 32) -> TimerClaims:
    async def fake_sleep(seconds: float) -> None:  # the heartbeat's wait: the clock moves, nothing sleeps
        clock.advance(seconds)
        await asyncio.sleep(0)  # gives way to the test, as a real wait would

    return TimerClaims(InlineWriter(store), owner, clock, SETTINGS, free, sleep=fake_sleep)


def _schedule(store: Store, count: int) -> list[int]:
    with store.transaction() as tx:
        return [tx.schedule_timer(f"t{i}@example.com", TimerKind.RETRY, T0).id for i in range(count)]


async def _claim(node: TimerClaims) -> list[Timer]:
    timers = await node.writer.run(node.claim)
    node.taken(timers)
    return timers


async def _complete(node: TimerClaims, timer_id: int) -> bool:
    def unit(tx: Transaction) -> bool:
        return tx.complete_timer(timer_id, node.owner)

    done = await node.writer.run(unit)
    node.done(timer_id)
    return done


def test_a_live_process_keeps_its_claims_across_many_leases(make_store: Callable[..., Store]) -> None:
    clock = FakeClock()
    store = make_store(clock=clock)
    ids = _schedule(store, 3)

    async def main() -> None:
        alive, other = _node(store, "alive", clock), _node(store, "other", clock)
        assert sorted(t.id for t in await _claim(alive)) == sorted(ids)
        alive.start()
        # The heartbeat's fake sleep moves the clock 3 s a beat: ten beats are 30 s, three leases.
        for _ in range(1000):
            if alive.renewals >= 10:
                break
            await asyncio.sleep(0)
        assert alive.renewals == 10 and clock() >= T0 + timedelta(seconds=30)
        assert await other.writer.run(other.claim) == []  # still held: renewed within every lease
        assert [await _complete(alive, i) for i in ids] == [True, True, True]
        assert alive.held == frozenset()
        assert await alive.stop() == 0  # nothing left to give back

    asyncio.run(main())


def test_a_process_that_stops_renewing_loses_its_claims_after_the_lease(make_store: Callable[..., Store]) -> None:
    clock = FakeClock()
    store = make_store(clock=clock)
    ids = _schedule(store, 2)

    async def main() -> None:
        dead, other = _node(store, "dead", clock), _node(store, "other", clock)
        await _claim(dead)  # ... and dies: no heartbeat, no stop
        clock.advance(SETTINGS.lease.total_seconds() - 0.001)
        assert await other.writer.run(other.claim) == []
        clock.advance(0.001)
        assert sorted(t.id for t in await _claim(other)) == sorted(ids)  # taken over at the end of the lease
        assert await dead.renew() == 0  # a late heartbeat gets nothing back
        assert await _complete(dead, ids[0]) is False  # nor can it fire them
        assert [await _complete(other, i) for i in ids] == [True, True]

    asyncio.run(main())


def test_a_clean_stop_releases_the_claims_for_the_others_at_once(make_store: Callable[..., Store]) -> None:
    clock = FakeClock()
    store = make_store(clock=clock)
    ids = _schedule(store, 3)

    async def main() -> None:
        stopping, other = _node(store, "stopping", clock), _node(store, "other", clock)
        await _claim(stopping)
        stopping.start()
        assert await stopping.stop() == 3
        assert stopping.held == frozenset()
        assert sorted(t.id for t in await _claim(other)) == sorted(ids)  # at the same instant, not a lease later
        assert await _complete(stopping, ids[0]) is False

    asyncio.run(main())


def test_a_round_claims_a_few_timers_and_no_more_than_the_free_sending_slots(
    make_store: Callable[..., Store],
) -> None:
    clock = FakeClock()
    store = make_store(clock=clock)
    _schedule(store, 19)
    free = [32]

    async def main() -> None:
        node = _node(store, "node", clock, free=lambda: free[0])
        assert (len(await _claim(node)), node.full) == (SETTINGS.claim_limit, True)
        free[0] = 3
        assert (len(await _claim(node)), node.full) == (3, True)
        free[0] = -4  # more transmissions queued than slots: still one, so the timers move on
        assert (len(await _claim(node)), node.full) == (1, True)
        free[0] = 32
        assert (len(await _claim(node)), node.full) == (7, False)  # the last 7 of 19: fewer than it could
        assert len(node.held) == 19

    asyncio.run(main())
