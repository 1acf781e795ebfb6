"""What a run of real MSH processes left in their stores, for the demos and the crash tests.

:func:`submit_orders` submits numbered orders with payloads to a sender's store (its ``msh serve`` sends
them) and remembers each payload's SHA-256; :func:`wait_final` waits, with a deadline, until each message
is delivered or failed (:func:`wait_states`: until each is in a state of the caller's choosing);
:func:`journal` reads a store's journal (:class:`EventCounts` counts it) and :func:`inbox_census` the
receiving application's inbox: how often each message arrived and whether its payload is intact. The
verdicts of :mod:`msh.demos.exchange`, :mod:`msh.demos.multihop` and the crash tests are computed from these.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from msh.engine import OutboundState, OutboundStatus
    from msh.runtime.msh import Msh
    from msh.store.api import Event
    from msh.store.events import EventKind

__all__ = [
    "EventCounts",
    "InboxCensus",
    "inbox_census",
    "journal",
    "order_payload",
    "submit_orders",
    "wait_final",
    "wait_states",
]


def order_payload(i: int) -> bytes:
    """Order number ``i``: an XML document of about 2 KB."""
    line = f"<line n='{i}'><item>demo item</item><quantity>{i % 7 + 1}</quantity></line>"
    body = line * (2048 // len(line))
    return f"<?xml version='1.0'?><order id='{i}'>{body}</order>".encode()


def submit_orders(
    sender: Msh,
    to_party: tuple[str, str],
    numbers: Iterable[int],
    *,
    payload: Callable[[int], bytes] = order_payload,
    pace: float = 0.02,
    before: Callable[[int], None] | None = None,
    into: dict[str, str] | None = None,
) -> dict[str, str]:
    """Submit one NewOrder to ``to_party`` per number (``before(i)`` is called first, ``pace`` seconds
    between them); returns MessageId → SHA-256 of its payload, in ``into`` when given (filled as they go)."""
    from msh.faults.pair import ACTION, SERVICE
    from msh.runtime.compose import Payload, Submission

    sent: dict[str, str] = {} if into is None else into
    for i in numbers:
        if before is not None:
            before(i)
        body = payload(i)
        submission = Submission(to_party, SERVICE, ACTION, (Payload(body, "application/xml"),))
        sent[sender.submit(submission)] = hashlib.sha256(body).hexdigest()
        if pace:
            time.sleep(pace)
    return sent


def wait_states(
    sender: Msh, message_ids: Iterable[str], done: Callable[[OutboundState], bool], timeout: float
) -> dict[str, OutboundState]:
    """Wait up to ``timeout`` seconds until the state of every message in the sender's store is ``done``;
    returns the state of each that got there."""
    waiting = list(message_ids)
    reached: dict[str, OutboundState] = {}
    deadline = time.monotonic() + timeout
    while True:
        with sender.store.transaction(readonly=True) as tx:
            for message_id in waiting:
                state = tx.outbound_status(message_id)
                if state is not None and done(state):
                    reached[message_id] = state
        waiting = [m for m in waiting if m not in reached]
        if not waiting or time.monotonic() >= deadline:
            return reached
        time.sleep(0.25)


def wait_final(sender: Msh, message_ids: Iterable[str], timeout: float) -> dict[str, OutboundStatus]:
    """Wait up to ``timeout`` seconds until every message is final (delivered or failed) in the sender's
    store; returns the final status of each that got there."""
    final = wait_states(sender, message_ids, lambda state: state.status.final, timeout)
    return {message_id: state.status for message_id, state in final.items()}


def journal(store_path: Path) -> list[Event]:
    """Every event of the journal of the SQLite store at ``store_path``, oldest first."""
    from msh.store import open_store

    events: list[Event] = []
    with open_store(str(store_path), migrate=False) as store:
        while True:
            with store.transaction(readonly=True) as tx:
                batch = tx.list_events(events[-1].id if events else 0, limit=5000)
            if not batch:
                return events
            events.extend(batch)


@dataclass(frozen=True, slots=True)
class EventCounts:
    """The events of one MSH's journal counted by kind: those about the messages sent (``ours``), the others
    (``others``: the MSH signals about them, acknowledgments and error messages), and the messages sent
    with at least one event of each kind."""

    ours: Counter[str]
    others: Counter[str]
    messages_with: Mapping[str, frozenset[str]]

    @classmethod
    def of(cls, events: Iterable[Event], sent: Collection[str]) -> EventCounts:
        """Count ``events`` (one MSH's journal); ``sent`` are the MessageIds of the messages sent."""
        ours: Counter[str] = Counter()
        others: Counter[str] = Counter()
        kinds: dict[str, set[str]] = {}
        for event in events:
            if event.message_id is not None and event.message_id in sent:
                ours[event.kind] += 1
                kinds.setdefault(event.kind, set()).add(event.message_id)
            else:
                others[event.kind] += 1
        return cls(ours, others, {k: frozenset(v) for k, v in kinds.items()})

    def with_kind(self, kind: EventKind) -> frozenset[str]:
        """The messages sent with at least one event of ``kind``."""
        return self.messages_with.get(kind, frozenset())

    def count(self, kind: EventKind) -> int:
        """How many of the messages sent have at least one event of ``kind``."""
        return len(self.with_kind(kind))


@dataclass(frozen=True, slots=True)
class InboxCensus:
    """The receiving application's inbox against what was sent: ``seen`` counts the inbox entries of each
    MessageId; ``intact`` how many sent messages arrived (first copy) with their payload byte for byte."""

    sent: Mapping[str, str]
    seen: Counter[str]
    intact: int

    @property
    def once(self) -> int:
        """Sent messages in the inbox exactly once."""
        return sum(1 for m in self.sent if self.seen[m] == 1)

    @property
    def twice_or_more(self) -> int:
        """Sent messages in the inbox more than once."""
        return sum(1 for m in self.sent if self.seen[m] > 1)

    @property
    def missing(self) -> int:
        """Sent messages not in the inbox."""
        return sum(1 for m in self.sent if self.seen[m] == 0)

    @property
    def unexpected(self) -> int:
        """Inbox MessageIds that were not sent."""
        return sum(1 for m in self.seen if m not in self.sent)

    @property
    def extra(self) -> int:
        """Deliveries beyond one per sent message: second copies and messages never sent."""
        return sum(c - 1 for m, c in self.seen.items() if m in self.sent and c > 1) + self.unexpected


def inbox_census(store_path: Path, sent: Mapping[str, str]) -> InboxCensus:
    """Read the inbox of the SQLite store at ``store_path`` against ``sent`` (MessageId → payload SHA-256)."""
    from msh.ebms.message import ParseMode, parse_message
    from msh.store import open_store

    seen: Counter[str] = Counter()
    intact = 0
    with open_store(str(store_path), migrate=False) as store, store.transaction(readonly=True) as tx:
        for entry in tx.inbox_list(None, limit=len(sent) * 10 + 10):
            seen[entry.message_id] += 1
            record = tx.get_inbound(entry.id)
            if record is None or entry.message_id not in sent or seen[entry.message_id] > 1:
                continue
            with tx.open_blob(record.body_blob_id) as blob:
                parsed = parse_message(blob, record.content_type, mode=ParseMode.LENIENT)
            try:
                data = parsed.payloads[0].body.read_bytes() if parsed.payloads else b""
            finally:
                parsed.close()
            intact += hashlib.sha256(data).hexdigest() == sent[entry.message_id]
    return InboxCensus(sent, seen, intact)
