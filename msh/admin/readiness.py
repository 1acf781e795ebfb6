"""``/ready``: whether this MSH can do its work now, each check with its reason when it cannot.

The checks, in order:

``store``
    the store writer is open and a read-only transaction on the store answers;
``agreements``
    at least one agreement is in force, or the routing table has routes (a pure intermediary);
``writer``
    the store writer is not stalled: while it is busy (a transaction runs or units wait for one), it has
    committed (or failed) a transaction within ``admin.stall_after``;
``timers``
    the runtime runs, its timer loop runs, and the loop has finished a round within ``admin.stall_after``.

A stall is seen by looking twice: :class:`Watch` remembers what it saw (how far the writer or the loop had
got) and when, so the second look ``admin.stall_after`` later finds that nothing moved. Time is the MSH's
clock (a fake one in tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from msh.runtime.msh import Msh

__all__ = ["Check", "Readiness", "Watch"]


@dataclass(frozen=True, slots=True)
class Check:
    """One readiness check: its ``name``, whether it passed, and why not (``reason``)."""

    name: str
    ok: bool
    reason: str | None = None

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "ok": self.ok, "reason": self.reason}


@dataclass
class Watch:
    """Whether something that should move on has stood still (see the module docs)."""

    seen: int | None = None
    since: datetime | None = None

    def look(self, progress: int, busy: bool, now: datetime) -> timedelta:
        """How long ``progress`` has stood still while ``busy`` (zero when it moved, or is idle)."""
        if not busy or progress != self.seen or self.since is None:
            self.seen, self.since = progress, now if busy else None
            return timedelta(0)
        return now - self.since


def _seconds(span: timedelta) -> str:
    return f"{span.total_seconds():.0f} s"


class Readiness:
    """The readiness checks of ``msh`` (see the module docs); :meth:`checks` runs them (it reads the store:
    call it off the event loop)."""

    def __init__(self, msh: Msh, stall_after: timedelta) -> None:
        self.msh = msh
        self.stall_after = stall_after
        self.writer = Watch()
        self.timers = Watch()

    def checks(self) -> list[Check]:
        now = self.msh.clock()
        return [self._store(), self._agreements(), self._writer(now), self._timers(now)]

    def _store(self) -> Check:
        msh = self.msh
        if getattr(msh.writer, "closed", False):
            return Check("store", False, "the store writer is closed (the MSH is stopping or has stopped)")
        try:
            with msh.store.transaction(readonly=True) as tx:
                tx.next_timer_due()
        except Exception as exc:
            return Check("store", False, f"the store at {msh.store.url} does not answer: {exc}")
        return Check("store", True)

    def _agreements(self) -> Check:
        if len(self.msh.registry) or self.msh.core.routes:
            return Check("agreements", True)
        return Check("agreements", False, "no agreement is in force and there are no routes: nothing to do")

    def _writer(self, now: datetime) -> Check:
        writer = self.msh.writer
        stats = writer.stats
        still = self.writer.look(stats.batches + stats.failed_batches, writer.busy, now)
        if still >= self.stall_after:
            return Check(
                "writer",
                False,
                f"the store writer has work waiting and has not finished a transaction for {_seconds(still)} "
                f"(admin.stall_after {_seconds(self.stall_after)})",
            )
        return Check("writer", True)

    def _timers(self, now: datetime) -> Check:
        msh = self.msh
        if not msh.running:
            return Check("timers", False, "the runtime is not running (not started yet, or stopping)")
        if not msh.timers.looping:
            return Check("timers", False, "the timer loop is not running: resends and give-ups are not done")
        still = self.timers.look(msh.timers.rounds, True, now)
        if still >= self.stall_after:
            return Check(
                "timers",
                False,
                f"the timer loop has not finished a round for {_seconds(still)} "
                f"(admin.stall_after {_seconds(self.stall_after)})",
            )
        return Check("timers", True)
