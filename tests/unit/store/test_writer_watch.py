"""The store writers tell their watchers of each commit: the journal events of the units that committed (a
unit that raised leaves none), in order, and how long the commit took."""

from __future__ import annotations

import threading

import pytest

from msh.store import Store
from msh.store.api import EventKind, Transaction
from msh.store.inline import InlineWriter
from msh.store.writer import Committed, GroupCommitWriter
from tests.support.store import T0


def journal(kind: EventKind, message_id: str) -> object:
    def unit(tx: Transaction) -> None:
        tx.append_event(at=T0, kind=kind, message_id=message_id)

    return unit


def stored_ids(store: Store) -> list[int]:
    """The ids of the journal as committed."""
    with store.transaction(readonly=True) as tx:
        return [event.id for event in tx.list_events()]


def failing(tx: Transaction) -> None:
    tx.append_event(at=T0, kind=EventKind.FAILED, message_id="lost@example.com")
    raise ValueError("this unit fails")


def test_group_commit_tells_the_events_of_the_units_that_committed(store: Store) -> None:
    seen: list[Committed] = []
    writer = GroupCommitWriter(store, max_batch=8)
    writer.watch(seen.append)
    gate = threading.Event()
    blocker = writer.submit(lambda tx: gate.wait(10))  # the next units queue up and share one transaction
    futures = [writer.submit(journal(EventKind.SUBMITTED, "a@example.com")), writer.submit(failing)]
    futures.append(writer.submit(journal(EventKind.DELIVERED, "a@example.com")))
    gate.set()
    blocker.result(10)
    futures[0].result(10), futures[2].result(10)
    with pytest.raises(ValueError):
        futures[1].result(10)
    writer.close()
    events = [e for commit in seen for e in commit.events]
    # Each event with the id it was committed with; the failed unit's event neither stored nor told.
    ids = stored_ids(store)
    assert len(ids) == 2
    assert [(e.id, e.kind, e.message_id) for e in events] == [
        (ids[0], EventKind.SUBMITTED, "a@example.com"),
        (ids[1], EventKind.DELIVERED, "a@example.com"),
    ]
    assert all(c.commit_seconds >= 0 for c in seen)
    assert sum(c.units for c in seen) == writer.stats.units
    assert not writer.busy


def test_the_inline_writer_tells_each_commit_and_a_watcher_that_fails_is_ignored(store: Store) -> None:
    seen: list[Committed] = []
    writer = InlineWriter(store)

    def broken(commit: Committed) -> None:
        raise RuntimeError("a broken watcher")

    writer.watch(broken)
    writer.watch(seen.append)
    writer.call(journal(EventKind.RECEIVED, "b@example.com"))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        writer.call(failing)
    assert [[e.kind for e in c.events] for c in seen] == [[EventKind.RECEIVED]]
    assert [e.id for e in seen[0].events] == stored_ids(store)
    assert seen[0].units == 1
