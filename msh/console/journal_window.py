"""The journal events of a recent time window, read through the store port without scanning the journal.

Event ids increase in the order events are appended, and events are appended at the time they record, so
the first event of a window is found by a binary search over ids (each probe one ``list_events`` row); the
window is then read forward a page at a time. At most ``limit`` events are read: when the window holds more,
the newest ``limit`` are read and :attr:`Window.start` says from when the picture is complete.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from msh.store.api import Event, Transaction

__all__ = ["DEFAULT_LIMIT", "Window", "read_window"]

DEFAULT_LIMIT: Final = 100_000
_PAGE: Final = 5_000


@dataclass(frozen=True, slots=True)
class Window:
    """The events from ``start`` on (oldest first); ``truncated`` when older events of the window were left out."""

    start: datetime
    events: tuple[Event, ...]
    truncated: bool


def _first_after(tx: Transaction, after_id: int) -> Event | None:
    found = tx.list_events(after_id, limit=1)
    return found[0] if found else None


def _last_id(tx: Transaction) -> int:
    """The highest event id (0: an empty journal), by doubling then halving the probe."""
    if _first_after(tx, 0) is None:
        return 0
    low, high = 0, 1
    while _first_after(tx, high) is not None:
        low, high = high, high * 2
    # An event exists after ``low``, none after ``high``: the last id is in (low, high].
    while high - low > 1:
        middle = (low + high) // 2
        if _first_after(tx, middle) is None:
            high = middle
        else:
            low = middle
    return high


def _first_id_at(tx: Transaction, since: datetime, last: int) -> int:
    """The id after which the window's events start (the events after it are at or after ``since``)."""
    low, high = 0, last  # the answer is in [low, high]
    while low < high:
        middle = (low + high) // 2
        event = _first_after(tx, middle)
        if event is None or event.at >= since:
            high = middle
        else:
            low = event.id  # every id before this event's still finds it: none of them is the answer
    return low


def read_window(tx: Transaction, since: datetime, *, limit: int = DEFAULT_LIMIT) -> Window:
    """The journal events at or after ``since`` (at most the newest ``limit``), oldest first."""
    last = _last_id(tx)
    after = _first_id_at(tx, since, last)
    truncated = last - after > limit
    if truncated:
        after = last - limit
    events: list[Event] = []
    while True:
        page = tx.list_events(after, limit=_PAGE)
        events.extend(e for e in page if e.at >= since)
        if len(page) < _PAGE or len(events) >= limit:
            break
        after = page[-1].id
    start = events[0].at if truncated and events else since
    return Window(start, tuple(events[:limit]), truncated)
