"""Group commit (msh.store.writer): many callers' units in one transaction, each in its own savepoint."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from msh.store import MemoryStore, Store, StoreError, Transaction
from msh.store.api import TransactionLost
from msh.store.writer import GroupCommitWriter
from tests.support.store import T0, add_outbound

WAIT = 10.0  # seconds: a bound on waiting for the writer thread, never reached when things work


class Boom(Exception):
    """A unit's own failure."""


@pytest.fixture
def writer(store: Store) -> Iterator[GroupCommitWriter]:
    w = GroupCommitWriter(store)
    yield w
    w.close(timeout=WAIT)


def _outbound_ids(store: Store) -> set[str]:
    with store.transaction(readonly=True) as tx:
        return {mid for mid in ("a@x", "b@x", "c@x", "d@x", "e@x", "f@x") if tx.get_outbound(mid) is not None} | {
            f"m{i}@x" for i in range(100) if tx.get_outbound(f"m{i}@x") is not None
        }


def _hold(writer: GroupCommitWriter) -> threading.Event:
    """Occupy the writer thread until the returned event is set (so the next units queue up)."""
    started, release = threading.Event(), threading.Event()

    def blocker(tx: Transaction) -> None:
        started.set()
        assert release.wait(WAIT)

    writer.submit(blocker)
    assert started.wait(WAIT)
    return release


def test_units_queued_during_a_commit_share_the_next_transaction(store: Store, writer: GroupCommitWriter) -> None:
    release = _hold(writer)
    futures = [writer.submit(lambda tx, i=i: add_outbound(tx, f"m{i}@x").message_id) for i in range(20)]
    release.set()
    assert [f.result(WAIT) for f in futures] == [f"m{i}@x" for i in range(20)]
    assert writer.stats.batches == 2  # the blocker's, then all twenty together
    assert writer.stats.largest_batch == 20
    assert writer.stats.mean_batch == pytest.approx(21 / 2)
    assert _outbound_ids(store) == {f"m{i}@x" for i in range(20)}


def test_max_batch_bounds_a_transaction(store: Store) -> None:
    writer = GroupCommitWriter(store, max_batch=4)
    try:
        release = _hold(writer)
        futures = [writer.submit(lambda tx, i=i: add_outbound(tx, f"m{i}@x")) for i in range(10)]
        release.set()
        for f in futures:
            f.result(WAIT)
        assert writer.stats.largest_batch == 4
        assert writer.stats.batches == 1 + 3  # 4 + 4 + 2
    finally:
        writer.close(timeout=WAIT)


def test_a_failing_unit_leaves_nothing_and_the_others_commit(store: Store, writer: GroupCommitWriter) -> None:
    def failing(tx: Transaction) -> None:
        add_outbound(tx, "b@x")
        tx.append_event(at=T0, kind="submitted")
        raise Boom("the unit's own failure")

    release = _hold(writer)
    first = writer.submit(lambda tx: add_outbound(tx, "a@x"))
    bad = writer.submit(failing)
    last = writer.submit(lambda tx: add_outbound(tx, "c@x"))
    release.set()
    first.result(WAIT)
    last.result(WAIT)
    with pytest.raises(Boom, match="own failure"):
        bad.result(WAIT)
    assert writer.stats.batches == 2 and writer.stats.failed_units == 1
    assert _outbound_ids(store) == {"a@x", "c@x"}
    with store.transaction(readonly=True) as tx:
        assert [e.kind for e in tx.list_events()] == []


def test_results_are_handed_back_only_after_the_commit(store: Store, writer: GroupCommitWriter) -> None:
    seen: list[bool] = []
    called = threading.Event()

    def unit(tx: Transaction) -> str:
        add_outbound(tx, "a@x")
        return "a@x"

    def on_done(_future: object) -> None:
        seen.append("a@x" in _outbound_ids(store))
        called.set()

    future = writer.submit(unit)
    future.add_done_callback(on_done)
    assert future.result(WAIT) == "a@x"
    assert called.wait(WAIT)
    assert seen == [True]  # when the caller learns the result, another reader already sees the row


class _FailingCommitStore(MemoryStore):
    """The in-memory twin whose commits fail while ``fail`` is set (a full disk, a lost server)."""

    fail = False

    @contextmanager
    def transaction(self, *, readonly: bool = False) -> Iterator[Transaction]:  # type: ignore[override]
        with super().transaction(readonly=readonly) as tx:
            yield tx
            if self.fail and not readonly:
                raise StoreError("disk I/O error at commit")


def test_a_failed_commit_fails_every_unit_of_the_batch_and_commits_nothing() -> None:
    store = _FailingCommitStore()
    writer = GroupCommitWriter(store)
    try:
        release = _hold(writer)
        futures = [writer.submit(lambda tx, i=i: add_outbound(tx, f"m{i}@x")) for i in range(3)]
        store.fail = True
        release.set()
        for f in futures:
            with pytest.raises(StoreError, match="disk I/O error"):
                f.result(WAIT)
        store.fail = False
        assert _outbound_ids(store) == set()
        writer.call(lambda tx: add_outbound(tx, "a@x"))  # the writer carries on
        assert _outbound_ids(store) == {"a@x"}
        assert writer.stats.failed_batches == 2  # the blocker's commit failed too
    finally:
        writer.close(timeout=WAIT)


def test_a_lost_transaction_fails_what_ran_in_it_and_reruns_the_rest(store: Store, writer: GroupCommitWriter) -> None:
    def lose(tx: Transaction) -> None:
        raise TransactionLost("the database rolled the transaction back")

    release = _hold(writer)
    before = writer.submit(lambda tx: add_outbound(tx, "a@x"))
    losing = writer.submit(lose)
    after = [writer.submit(lambda tx, m=m: add_outbound(tx, m).message_id) for m in ("b@x", "c@x")]
    release.set()
    with pytest.raises(TransactionLost):
        before.result(WAIT)  # it ran in the lost transaction: its work is gone, its caller is told
    with pytest.raises(TransactionLost):
        losing.result(WAIT)
    assert [f.result(WAIT) for f in after] == ["b@x", "c@x"]  # not run yet: they went into the next batch
    assert _outbound_ids(store) == {"b@x", "c@x"}


def test_a_unit_cannot_wait_for_its_own_writer(writer: GroupCommitWriter) -> None:
    def nested(tx: Transaction) -> None:
        writer.call(lambda inner: None)

    with pytest.raises(StoreError, match="cannot wait for the writer it runs on"):
        writer.call(nested)


def test_a_unit_cancelled_before_it_runs_is_skipped(store: Store, writer: GroupCommitWriter) -> None:
    release = _hold(writer)
    cancelled = writer.submit(lambda tx: add_outbound(tx, "a@x"))
    kept = writer.submit(lambda tx: add_outbound(tx, "b@x"))
    assert cancelled.cancel()
    release.set()
    kept.result(WAIT)
    assert _outbound_ids(store) == {"b@x"}


def test_close_commits_what_is_queued_then_refuses_more(store: Store) -> None:
    writer = GroupCommitWriter(store)
    release = _hold(writer)
    queued = [writer.submit(lambda tx, i=i: add_outbound(tx, f"m{i}@x")) for i in range(5)]
    closer = threading.Thread(target=writer.close, kwargs={"timeout": WAIT})
    closer.start()
    release.set()
    closer.join(WAIT)
    assert not closer.is_alive()
    assert all(f.done() and f.exception() is None for f in queued)
    assert _outbound_ids(store) == {f"m{i}@x" for i in range(5)}
    with pytest.raises(StoreError, match="closed"):
        writer.submit(lambda tx: None)
    writer.close()  # a second close does nothing


def test_run_awaits_the_commit_on_an_event_loop(store: Store, writer: GroupCommitWriter) -> None:
    async def main() -> list[str]:
        return list(await asyncio.gather(*(writer.run(lambda tx, m=m: add_outbound(tx, m).message_id) for m in "abc")))

    assert asyncio.run(main()) == ["a", "b", "c"]


def test_max_batch_must_be_positive(store: Store) -> None:
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="max_batch"):
            GroupCommitWriter(store, max_batch=bad)  # type: ignore[arg-type]
