"""The timers this process has claimed and not finished (docs/cluster.md): claimed a few at a time, kept by a
heartbeat, given back on a clean stop.

Several processes may serve one database. A timer is claimed with a lease of ``timers.lease``
(:meth:`~msh.store.transaction.Transaction.claim_due_timers`) so that only one of them fires it; the
process that fires it removes it in the same unit of work as the work itself, and only while it still
holds it (``complete_timer``), so a lease that ran out costs at most some wasted work, never a second
firing. While this process works on its claims, a heartbeat renews their leases every
``timers.renew_interval``: the lease can then be short, and the timers of a process that died (which
renews nothing) are taken over by the others within one lease. A round claims at most
``timers.claim_limit`` timers, and no more than the transmission slots left free
(``sending.max_in_flight`` less the transmissions in flight, at least one), so a busy process leaves due work
to idle ones. :meth:`TimerClaims.stop` ends the heartbeat and releases every lease of this process: its
unfinished timers are due again at once, for any process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from msh.runtime.config import TimerSettings
from msh.store.api import Timer, Transaction
from msh.store.writer import Writer

__all__ = ["TimerClaims"]

log = logging.getLogger("msh.runtime")


class TimerClaims:
    """This process's claims on timers (see the module docs). ``owner`` names this process run in the
    store; ``free_slots`` says how many more transmissions could start now; ``sleep`` waits between two
    heartbeats (a test drives it with a fake clock)."""

    def __init__(
        self,
        writer: Writer,
        owner: str,
        clock: Callable[[], datetime],
        settings: TimerSettings,
        free_slots: Callable[[], int],
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.writer = writer
        self.owner = owner
        self.clock = clock
        self.settings = settings
        self._free_slots = free_slots
        self._sleep = sleep
        self._held: set[int] = set()
        self._heartbeat: asyncio.Task[None] | None = None
        self.full = False
        """The last round claimed as many timers as it could: more may be due."""
        self.renewals = 0
        """Heartbeats that renewed at least one lease."""

    @property
    def held(self) -> frozenset[int]:
        """The ids of the timers claimed and not finished yet."""
        return frozenset(self._held)

    def limit(self) -> int:
        """How many timers the next round may claim: ``timers.claim_limit``, fewer when fewer transmission
        slots are free, at least one (a round that fires nothing that sends still makes progress)."""
        return max(1, min(self.settings.claim_limit, self._free_slots()))

    def claim(self, tx: Transaction) -> list[Timer]:
        """Claim, in ``tx``, the due timers of one round (:meth:`limit` at most), leased to this process.
        Call :meth:`taken` with them once ``tx`` has committed."""
        limit = self.limit()
        timers = tx.claim_due_timers(self.clock(), self.owner, self.settings.lease, limit=limit)
        self.full = len(timers) >= limit
        return timers

    def taken(self, timers: list[Timer]) -> None:
        """``timers`` were claimed (committed): the heartbeat keeps them until :meth:`done`."""
        self._held.update(t.id for t in timers)

    def done(self, timer_id: int) -> None:
        """The work of timer ``timer_id`` has ended (committed, or failed: a failed one is left to run out
        its lease and be claimed again, a pause before the next try)."""
        self._held.discard(timer_id)

    async def renew(self) -> int:
        """Renew the leases of the timers held now (one heartbeat); how many this process still held."""
        held = frozenset(self._held)
        if not held:
            return 0
        now, lease, owner = self.clock(), self.settings.lease, self.owner

        def unit(tx: Transaction) -> int:
            return tx.renew_timer_leases(held, owner, now, lease)

        renewed = await self.writer.run(unit)
        if renewed:
            self.renewals += 1
        if renewed < len(held):
            # Completed meanwhile (their units committed while this one waited), or taken over by another
            # process after their lease ran out: that one fires them, and this one's complete_timer refuses.
            log.debug("timer loop: renewed %d of %d claimed timers; the others are no longer held", renewed, len(held))
        return renewed

    def start(self) -> None:
        """Start the heartbeat on the running event loop."""
        if self._heartbeat is None:
            self._heartbeat = asyncio.create_task(self._beat(), name="msh-timer-heartbeat")

    async def _beat(self) -> None:
        every = self.settings.renew_interval.total_seconds()
        while True:
            await self._sleep(every)
            try:
                await self.renew()
            except Exception:
                log.exception("timer loop: renewing the claimed timers' leases failed; trying again shortly")

    async def stop(self) -> int:
        """End the heartbeat and release every lease this process holds (its unfinished timers are due again
        at once, for any process); how many were released (0 when the store refused: they then run out)."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
        owner = self.owner

        def unit(tx: Transaction) -> int:
            return tx.release_timers(owner)

        try:
            released = await self.writer.run(unit)
        except Exception:
            log.exception("timer loop: releasing the claimed timers failed; they are taken over when their lease ends")
            return 0
        self._held.clear()
        if released:
            log.info("timer loop: released %d claimed timers for the other processes", released)
        return released
