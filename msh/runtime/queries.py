"""The operator's queries on an :class:`~msh.runtime.msh.Msh`: its messages and one message's history.

A base of :class:`~msh.runtime.msh.Msh`, so the interfaces above the runtime (command line, console) ask the
MSH and never open its store themselves. Each call is one read-only store transaction; statuses are those
at the MSH's clock's now (:mod:`msh.store.listing` says what a row holds).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import datetime

from msh.store.api import Event, Store
from msh.store.listing import MessageFilter, MessagePage

__all__ = ["MessageQueries"]


class MessageQueries(ABC):
    """``messages(filter)`` and ``history(message_id)`` of the MSH."""

    @property
    @abstractmethod
    def store(self) -> Store:
        """The MSH's store."""

    @property
    @abstractmethod
    def clock(self) -> Callable[[], datetime]:
        """The MSH's clock."""

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
