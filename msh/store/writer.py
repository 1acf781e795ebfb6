"""Group commit: the write work of many callers in shared transactions, one commit (one fsync) for all.

A durable commit costs a disk flush, and SQLite has one writer at a time: an MSH that commits every step of
every message on its own spends its time waiting for the write lock and the disk. :class:`GroupCommitWriter`
owns one thread that takes every queued *unit* (a function of a :class:`~msh.store.api.Transaction`), runs
as many as are waiting (up to ``max_batch``) in one transaction, each in a savepoint of its own, and
commits once. While one batch commits the next one queues up, so the batches grow with the load and the
cost of a commit is shared.

Rules (what a caller can rely on)
    * A unit's result (or its exception) is handed back only after the transaction it ran in has
      committed (or failed): nothing is decided on a change that could still be lost (docs/design.md §5).
    * A unit that raises leaves nothing behind: its savepoint is rolled back, its exception goes to its
      caller, and the other units of the batch commit as if it had never run.
    * A failed commit fails every unit of the batch with the store's error: none of them committed, as
      with a transaction of their own. If the database ends the whole transaction while a unit runs
      (:class:`~msh.store.api.TransactionLost`), the units that ran in it fail with that error and those
      not yet run go into the next batch.
    * Units run one at a time, in the order they were queued, on the writer's thread: a unit must not
      wait for the writer itself (:meth:`call` from a unit raises :class:`~msh.store.api.StoreError`).

Watching
    :meth:`GroupCommitWriter.watch` has ``listener(Committed)`` called after each commit, on the writer's
    thread, with the journal events the committed units appended and the time the commit took (the
    metrics of :mod:`msh.admin` count what happened from it, without a bookkeeping of their own). A listener
    must be quick and must not raise (what it raises is logged and ignored).

Read-only work does not need the writer: ``store.transaction(readonly=True)`` on any thread runs beside it
(SQLite in WAL mode; PostgreSQL).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from msh.store.api import Event, Store, StoreError, Transaction, TransactionLost
from msh.threadnames import name_os_thread

__all__ = ["Committed", "CommitWatchers", "GroupCommitWriter", "Unit", "Writer", "WriterStats"]

log = logging.getLogger("msh.store.writer")

_T = TypeVar("_T")

Unit = Callable[[Transaction], _T]
"""A unit of write work: runs inside a shared transaction, in a savepoint of its own."""


@dataclass
class WriterStats:
    """What the writer has done: committed transactions, units run in them, units that raised, and the
    time spent: in transactions (``busy_seconds``, from BEGIN to the end of COMMIT) and in their commits
    alone (``commit_seconds``, the disk flush)."""

    batches: int = 0
    units: int = 0
    failed_units: int = 0
    failed_batches: int = 0
    largest_batch: int = 0
    busy_seconds: float = 0.0
    commit_seconds: float = 0.0

    @property
    def mean_batch(self) -> float:
        """Units per committed transaction (the group-commit factor)."""
        return self.units / self.batches if self.batches else 0.0


@dataclass(frozen=True, slots=True)
class Committed:
    """What one commit made durable: the journal events its units appended (in order), its units, and the
    seconds the commit itself took (the disk flush)."""

    events: tuple[Event, ...]
    units: int
    commit_seconds: float


@dataclass
class CommitWatchers:
    """The listeners told of each commit (:meth:`Writer.watch`)."""

    listeners: list[Callable[[Committed], None]] = field(default_factory=list)

    def tell(self, events: Sequence[Event], units: int, commit_seconds: float) -> None:
        if not self.listeners:
            return
        committed = Committed(tuple(events), units, commit_seconds)
        for listener in self.listeners:
            try:
                listener(committed)
            except Exception:  # a watcher's failure never fails the commit it watches
                log.exception("a watcher of the store writer failed")


class Writer(Protocol):
    """What a caller of a store writer relies on (:class:`GroupCommitWriter`, or its in-process twin
    :class:`msh.store.inline.InlineWriter`): a unit's result only after its commit."""

    stats: WriterStats

    def call(self, unit: Unit[_T]) -> _T: ...

    async def run(self, unit: Unit[_T]) -> _T: ...

    def close(self, timeout: float | None = None) -> None: ...

    def watch(self, listener: Callable[[Committed], None]) -> None: ...

    @property
    def busy(self) -> bool: ...


@dataclass(eq=False)
class _Job(Generic[_T]):
    """A queued unit and who waits for it: a thread (``future``) or a coroutine (``waiter``, a future of the
    event loop ``loop``, told on that loop: one wake-up per loop and commit, not one per unit)."""

    unit: Unit[_T]
    future: Future[_T] | None = None
    loop: asyncio.AbstractEventLoop | None = None
    waiter: asyncio.Future[_T] | None = None

    def start(self) -> bool:
        """False if its caller gave up (cancelled) before it ran: it is not run."""
        if self.future is not None:
            return self.future.set_running_or_notify_cancel()
        assert self.waiter is not None
        return not self.waiter.cancelled()

    @property
    def done(self) -> bool:
        return self.future.done() if self.future is not None else self.waiter is not None and self.waiter.done()


def _settle(outcomes: list[tuple[asyncio.Future[object], bool, object]]) -> None:
    """On the event loop: hand each waiting coroutine its unit's result or exception."""
    for waiter, ok, value in outcomes:
        if waiter.done():  # cancelled meanwhile
            continue
        if ok:
            waiter.set_result(value)
        else:
            assert isinstance(value, BaseException)
            waiter.set_exception(value)


def _tell(jobs: list[tuple[_Job[object], bool, object]]) -> None:
    """Hand the outcomes of ``jobs`` (job, ok, result or exception) to their callers: thread futures at
    once, coroutines with one call on each loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[object], bool, object]]] = {}
    for job, ok, value in jobs:
        if job.future is not None:
            if job.future.done():
                continue
            if ok:
                job.future.set_result(value)
            else:
                assert isinstance(value, BaseException)
                job.future.set_exception(value)
        elif job.loop is not None and job.waiter is not None:
            by_loop.setdefault(job.loop, []).append((job.waiter, ok, value))
    for loop, outcomes in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, outcomes)
        except RuntimeError:  # the loop was closed: nobody is waiting any more
            log.debug("the event loop of %d unit(s) was closed before their results", len(outcomes))


_STOP = object()


class GroupCommitWriter:
    """One writer thread for ``store``: :meth:`submit` / :meth:`call` / :meth:`run` a unit, get its result
    after the commit. Start is lazy (the first unit starts the thread); :meth:`close` drains and stops."""

    def __init__(self, store: Store, *, max_batch: int = 64, name: str = "msh-writer") -> None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError("max_batch must be a positive number of units")
        self.store = store
        self.max_batch = max_batch
        self.name = name
        self.stats = WriterStats()
        self._queue: queue.SimpleQueue[_Job[object] | object] = queue.SimpleQueue()
        self._carry: list[_Job[object]] = []
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._watchers = CommitWatchers()
        self._in_batch = False

    # ------------------------------------------------------------------------------------------ callers

    @property
    def queued(self) -> int:
        """Units of work waiting for the writer (not yet taken into a transaction)."""
        return self._queue.qsize()

    def submit(self, unit: Unit[_T]) -> Future[_T]:
        """Queue ``unit``; the future holds its result once its transaction has committed."""
        future: Future[_T] = Future()
        self._put(_Job(unit, future))
        return future

    def _put(self, job: _Job[_T]) -> None:
        with self._lock:
            if self._closed:
                raise StoreError("the store writer is closed; no more work can be committed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._queue.put(job)

    def call(self, unit: Unit[_T]) -> _T:
        """Run ``unit`` and wait for its commit (from any thread but the writer's own)."""
        if threading.current_thread() is self._thread:
            raise StoreError("a unit of work cannot wait for the writer it runs on; do the work in the same unit")
        return self.submit(unit).result()

    async def run(self, unit: Unit[_T]) -> _T:
        """Run ``unit`` and await its commit without blocking the event loop (cancelled before it runs, it
        does not run)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[_T] = loop.create_future()
        self._put(_Job(unit, loop=loop, waiter=waiter))
        return await waiter

    def close(self, timeout: float | None = None) -> None:
        """Commit what is queued, then stop the thread (waiting at most ``timeout`` seconds for it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            self._queue.put(_STOP)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def busy(self) -> bool:
        """True while a transaction runs or units wait for one (a stalled writer stays busy)."""
        return self._in_batch or not self._queue.empty()

    def watch(self, listener: Callable[[Committed], None]) -> None:
        """Have ``listener`` told of each commit (see the module docs)."""
        self._watchers.listeners.append(listener)

    # ------------------------------------------------------------------------------------------- thread

    def _run(self) -> None:
        name_os_thread()  # its Python name, also for top -H and /proc (docs/operating.md, "Threads")
        stopping = False
        while not stopping or self._carry:
            batch: list[_Job[object]] = self._carry
            self._carry = []
            if not batch:
                first = self._queue.get()
                if first is _STOP:
                    stopping = True
                    continue
                batch.append(first)  # type: ignore[arg-type]
            while len(batch) < self.max_batch:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    stopping = True
                    break
                batch.append(more)  # type: ignore[arg-type]
            self._in_batch = True
            try:
                self._commit(batch)
            finally:
                self._in_batch = False

    def _commit(self, batch: list[_Job[object]]) -> None:
        ran: list[tuple[_Job[object], bool, object]] = []  # (job, ok, result or exception)
        journaled: list[Event] = []  # the events of the units that did not raise, with their ids once committed
        carry: list[_Job[object]] = []
        lost: TransactionLost | None = None
        began = ran_at = time.perf_counter()
        try:
            with self.store.transaction() as tx:
                for index, job in enumerate(batch):
                    if not job.start():
                        continue  # the caller cancelled it before it ran
                    try:
                        with tx.savepoint():
                            result = job.unit(tx)
                    except TransactionLost as exc:
                        # The database dropped the transaction: what ran in it is lost; the rest goes next.
                        lost = exc
                        ran.append((job, False, exc))
                        carry = batch[index + 1 :]
                        break
                    except BaseException as exc:  # the unit's own failure: only its savepoint was undone
                        ran.append((job, False, exc))
                    else:
                        ran.append((job, True, result))
                if lost is not None:
                    raise lost
                tx.write_events()  # the journal of every unit, one statement (before the commit is timed)
                ran_at = time.perf_counter()
            journaled = tx.appended  # a unit that raised took its events with its savepoint
        except BaseException as exc:  # BEGIN or COMMIT failed, or the transaction was lost: nothing committed
            failure = lost if lost is not None else exc
            self.stats.failed_batches += 1
            log.warning("a group commit of %d unit(s) failed: %s", len(ran), failure)
            waiting = {id(job) for job in carry}
            _tell([(job, False, failure) for job in batch if id(job) not in waiting and not job.done])
            self._carry = carry
            return
        done_at = time.perf_counter()
        self.stats.busy_seconds += done_at - began
        self.stats.commit_seconds += done_at - ran_at
        self.stats.batches += 1
        self.stats.units += len(ran)
        self.stats.largest_batch = max(self.stats.largest_batch, len(ran))
        self._watchers.tell(journaled, len(ran), done_at - ran_at)
        self.stats.failed_units += sum(1 for _job, ok, _value in ran if not ok)
        _tell(ran)
