"""The timer loop: timers are rows with a due time (docs/design.md §2), fired here when they come due.

A timer is claimed with a lease, a few at a time, and kept by a heartbeat while it is worked on
(:mod:`msh.runtime.claims`: two processes on one PostgreSQL database never fire it both, the timers of a
process that died are taken over when their leases run out, and a clean stop gives them back at once), then
fired in a unit of work of its own: a ``retry`` timer feeds :class:`~msh.engine.TimerDue` to the sending
machine (resend, ask the partner for the message's status first after an outage when
``sending.status_before_resend`` is set, or give up), a ``transmit`` timer starts the first transmission of
a message another process submitted (``msh send`` while ``msh serve`` runs), an ``order-gap`` timer ends a
received sequence's gap that stayed open too long (:meth:`msh.runtime.sequences.Sequences.close_gap`, ebMS2
§9.1.1). The loop wakes at the next due time, and at least every ``timers.poll_interval`` to see what other
processes wrote; after a restart it simply finds what is due.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime

from msh.engine import TimerDue, TransmitFailed, UnknownMessage
from msh.runtime.claims import TimerClaims
from msh.runtime.core import Core
from msh.runtime.executor import AfterCommit, Executor
from msh.runtime.logfields import fields
from msh.runtime.sender import Sender
from msh.store.api import OutboundKind, Timer, TimerKind, Transaction
from msh.store.order_port import sequence_of

__all__ = ["TimerLoop"]

log = logging.getLogger("msh.runtime")


class TimerLoop:
    """Fires due timers (see the module docs)."""

    def __init__(self, core: Core, executor: Executor, sender: Sender) -> None:
        self.core = core
        self.executor = executor
        self.sender = sender
        self.claims = TimerClaims(
            core.writer,
            core.owner,
            core.clock,
            core.settings.timers,
            lambda: core.settings.sending.max_in_flight - sender.transmissions_in_flight,
        )
        """The timers claimed and not finished: the heartbeat that keeps them, the release on stop."""
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self.rounds = 0
        """Rounds the loop has finished (the readiness check watches it move on, :mod:`msh.admin`)."""

    @property
    def looping(self) -> bool:
        """True while the loop's task runs (False before :meth:`start`, after :meth:`stop`, or if it died)."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Run the loop on the running event loop."""
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="msh-timers")
        self.claims.start()

    async def stop(self) -> None:
        """Stop the loop and release the timers it claimed and did not finish (another process takes them)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.claims.stop()

    def wake(self) -> None:
        """Look for due timers now (e.g. after another process queued work)."""
        loop, wake = self.core.loop, self._wake
        if loop is not None and wake is not None:
            loop.call_soon_threadsafe(wake.set)

    async def _loop(self) -> None:
        assert self._wake is not None
        poll = self.core.settings.timers.poll_interval.total_seconds()
        while self.core.running:
            try:
                nearest = await self.run_due()
            except Exception:
                log.exception("timer loop: store failure; trying again shortly")
                nearest = None
            self.rounds += 1
            wait = poll
            if nearest is not None:
                wait = max(0.0, min(poll, (nearest - self.core.clock()).total_seconds()))
            if wait > 0:
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)

    async def run_due(self) -> datetime | None:
        """Fire the timers due now and return when the next one is due (None: no timer)."""
        core = self.core
        core.questions.expire(core.clock())  # the waits for Pongs and StatusResponses that have run out

        def claim(tx: Transaction) -> tuple[list[Timer], datetime | None]:
            timers = self.claims.claim(tx)
            return timers, (tx.next_timer_due() if not timers else None)

        timers, nearest = await core.writer.run(claim)
        if timers:
            self.claims.taken(timers)
            await asyncio.gather(*(self._fire(t) for t in timers))
            return core.clock()
        return nearest

    async def run_all_due(self, *, rounds: int = 10_000) -> datetime | None:
        """:meth:`run_due` again while a round claimed as many timers as it could (at most ``rounds``
        rounds): every timer due now is fired; returns when the next one is due (None: no timer)."""
        nearest = await self.run_due()
        for _ in range(rounds - 1):
            if not self.claims.full:
                break
            nearest = await self.run_due()
        return nearest

    async def _fire(self, timer: Timer) -> None:
        try:
            await self._fire_claimed(timer)
        finally:
            self.claims.done(timer.id)

    async def _fire_claimed(self, timer: Timer) -> None:
        core = self.core

        def unit(tx: Transaction) -> AfterCommit:
            after = AfterCommit()
            if not tx.complete_timer(timer.id, core.owner):
                return after  # the lease was lost: another process does it
            if timer.kind is TimerKind.TRANSMIT:
                stored = tx.get_outbound(timer.message_id)
                if stored is None or stored.state.status.final:
                    return after
                ttl = stored.state.reliability.time_to_live
                if ttl is not None and core.clock() >= ttl:
                    # ebMS2 §3.1.6.4: it waited past its TimeToLive (no server ran): not sent (that attempt never
                    # left, §6.5.7); its retry timer, due at the TimeToLive at the latest, gives it up.
                    extra = fields(message_id=timer.message_id, event="expired", cpa_id=stored.cpaid)
                    log.warning(
                        "message %s not transmitted: its TimeToLive %s has passed", timer.message_id, ttl, extra=extra
                    )
                    reason = f"not sent: its TimeToLive {ttl.isoformat()} passed before it could be"
                    self.executor.step_outbound(
                        tx, timer.message_id, TransmitFailed(reason, transmitted=False), core.clock(), after, stored
                    )
                    return after
                after.transmits.append((timer.message_id, stored.state.attempts))
                return after
            if timer.kind is TimerKind.ORDER_GAP:
                key = sequence_of(timer.message_id)
                if key is not None:
                    # ebMS2 §9.1.1: a received sequence's gap stayed open too long.
                    self.executor.sequences.close_gap(tx, key, core.clock(), after)
                return after
            stored = tx.get_outbound(timer.message_id, for_update=True)
            if stored is None:
                log.warning("timer for unknown message %s dropped", timer.message_id)
                return after
            # ebMS2 §7 (off by default): ask before resending our own messages after an outage (services.py).
            ask = core.settings.sending.status_before_resend if stored.kind is OutboundKind.OWN else None
            try:
                # ebMS2 §6.4.4: a transmission still under way here is waited for, not counted again.
                due = TimerDue(ask, in_flight=self.sender.in_flight(timer.message_id))
                self.executor.step_outbound(tx, timer.message_id, due, core.clock(), after, stored)
            except UnknownMessage:
                log.warning("timer for unknown message %s dropped", timer.message_id)
            return after

        self.sender.after_commit(await core.writer.run(unit))
