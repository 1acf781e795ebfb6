"""The store writer's in-process twin: each unit in a transaction of its own, at once, on the caller's thread.

:class:`InlineWriter` keeps :class:`~msh.store.writer.GroupCommitWriter`'s contract for a caller (a unit's
result or exception is handed back only after its transaction committed or rolled back; a unit that raises
leaves nothing behind) without a thread or a queue: it is the writer of the test network
(:mod:`msh.testing.network`), where many MSHs step deterministically on one event loop, and of embedded
uses that want no background thread. It commits once per unit, so it shares no fsync.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from msh.store.api import Store
from msh.store.writer import Committed, CommitWatchers, Unit, WriterStats

__all__ = ["InlineWriter"]

_T = TypeVar("_T")


class InlineWriter:
    """Runs each unit in its own transaction of ``store``, on the calling thread, when called."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.stats = WriterStats()
        self._closed = False
        self._watchers = CommitWatchers()

    def call(self, unit: Unit[_T]) -> _T:
        """Run ``unit`` in a transaction and return its result once committed."""
        if self._closed:
            raise RuntimeError("the writer is closed")
        began = time.perf_counter()
        try:
            with self.store.transaction() as tx:
                result = unit(tx)
                ran_at = time.perf_counter()
            events = list(tx.appended)  # with their ids: written when it committed
        except BaseException:
            self.stats.failed_units += 1
            raise
        self.stats.batches += 1
        self.stats.units += 1
        self.stats.largest_batch = 1
        done_at = time.perf_counter()
        self.stats.busy_seconds += done_at - began
        self.stats.commit_seconds += done_at - ran_at
        self._watchers.tell(events, 1, done_at - ran_at)
        return result

    async def run(self, unit: Unit[_T]) -> _T:
        """:meth:`call`, awaitable; it does not give way to the event loop (the unit runs at once)."""
        return self.call(unit)

    def close(self, timeout: float | None = None) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def busy(self) -> bool:
        """Never: each unit runs on its caller's thread, at once."""
        return False

    def watch(self, listener: Callable[[Committed], None]) -> None:
        """Have ``listener`` told of each commit (:class:`~msh.store.writer.Committed`)."""
        self._watchers.listeners.append(listener)
