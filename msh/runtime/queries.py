"""The operator's queries on an :class:`~msh.runtime.msh.Msh`: its messages and one message's history.

A base of :class:`~msh.runtime.msh.Msh`, so the interfaces above the runtime (command line, console) ask the
MSH and never open its store themselves. Each call is one read-only store transaction; statuses are those
at the MSH's clock's now (:mod:`msh.store.listing` says what a row holds).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from msh.store.api import Event, InboxEntry, Store, Transaction
from msh.store.inbox_status import InboxStatus, inbox_status
from msh.store.listing import MessageFilter, MessagePage

__all__ = ["MessageQueries"]

_T = TypeVar("_T")


class MessageQueries(ABC):
    """``messages(filter)``, ``history(message_id)``, ``inbox_statuses(entries)`` and ``read(fn)`` of the MSH."""

    @property
    @abstractmethod
    def store(self) -> Store:
        """The MSH's store."""

    @property
    @abstractmethod
    def clock(self) -> Callable[[], datetime]:
        """The MSH's clock."""

    @abstractmethod
    async def off_loop(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` on the MSH's work pool."""

    async def read(self, fn: Callable[[Transaction], _T]) -> _T:
        """``fn`` in one read-only store transaction, on the MSH's work pool (off the event loop): how the
        interfaces above the runtime (REST, SOAP, console) read the store."""

        def run() -> _T:
            with self.store.transaction(readonly=True) as tx:
                return fn(tx)

        return await self.off_loop(run)

    def messages(self, query: MessageFilter | None = None) -> MessagePage:
        """A page of sent and received messages, newest first; ``page.next_cursor`` in a new filter's
        ``cursor`` asks for the next page. ``ValueError`` for a bad filter (an unknown status, a cursor this
        listing did not give, a naive time)."""
        with self.store.transaction(readonly=True) as tx:
            return tx.list_messages(query or MessageFilter(), self.clock())

    def history(self, message_id: str) -> list[Event]:
        """Every journal event of the MessageId (sent or received), in the order they happened; empty for a
        MessageId the MSH never saw."""
        with self.store.transaction(readonly=True) as tx:
            return tx.message_history(message_id)

    def inbox_statuses(self, entries: Sequence[InboxEntry]) -> list[InboxStatus]:
        """The status of each inbox entry in the one vocabulary of :mod:`msh.store.inbox_status` (available,
        leased, acknowledged, rejected, held, abandoned), with what the application interfaces did with it."""
        now = self.clock()
        with self.store.transaction(readonly=True) as tx:
            return [inbox_status(entry, tx.inbox_claim(entry.id), now) for entry in entries]
