"""The dashboard's counts: our sent messages by state, and the inbox's depth (waiting, leased, held, dead)
with the age of its oldest waiting message. Counted through the store port a page at a time, up to
:data:`CAP` per figure (shown as "10000+" beyond: a dashboard needs the order of magnitude, not a scan of
millions of rows on every load)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from msh.engine import OutboundStatus
from msh.store.api import OutboundKind, Transaction
from msh.store.app_records import InboxQuery, InboxView

__all__ = ["CAP", "Count", "Overview", "overview"]

CAP: Final = 10_000
_PAGE: Final = 1_000


@dataclass(frozen=True, slots=True)
class Count:
    """A figure, counted up to :data:`CAP` (``more``: there are more)."""

    label: str
    value: int
    more: bool = False

    def __str__(self) -> str:
        return f"{self.value}+" if self.more else str(self.value)


@dataclass(frozen=True, slots=True)
class Overview:
    sent: tuple[Count, ...]
    """Our application's sent messages, one count per :class:`OutboundStatus`."""
    forwarded: tuple[Count, ...]
    """Messages forwarded as an intermediary (ebMS2 §10), per status (empty when there are none)."""
    inbox: tuple[Count, ...]
    oldest_waiting: timedelta | None


def _count_outbound(tx: Transaction, kind: OutboundKind, status: OutboundStatus) -> Count:
    total, after = 0, None
    while total < CAP:
        page = tx.list_outbound(kind=kind, status=status, limit=_PAGE, after=after)
        total += len(page)
        if len(page) < _PAGE:
            return Count(status.value, total)
        after = page[-1].message_id
    return Count(status.value, CAP, more=True)


def _inbox(tx: Transaction, now: datetime, view: InboxView) -> tuple[Count, datetime | None]:
    items = tx.app_inbox(InboxQuery(now=now, view=view, limit=CAP + 1))
    oldest = min((i.entry.received_at for i in items), default=None)
    return Count(view.value, min(len(items), CAP), len(items) > CAP), oldest


def overview(tx: Transaction, now: datetime) -> Overview:
    """The counts at ``now``."""
    sent = tuple(_count_outbound(tx, OutboundKind.OWN, s) for s in OutboundStatus)
    forwarded = tuple(_count_outbound(tx, OutboundKind.FORWARD, s) for s in OutboundStatus)
    inbox, oldest = [], None
    for view in (InboxView.AVAILABLE, InboxView.LEASED, InboxView.HELD, InboxView.DEAD):
        count, first = _inbox(tx, now, view)
        inbox.append(count)
        if view is InboxView.AVAILABLE:
            oldest = first
    return Overview(
        sent,
        forwarded if any(c.value for c in forwarded) else (),
        tuple(inbox),
        None if oldest is None else now - oldest,
    )
