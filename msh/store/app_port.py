"""The store port's part for the application interfaces (:mod:`msh.api`; records in :mod:`.app_records`).

:class:`AppPort` is a base of :class:`~msh.store.transaction.Transaction`: its public methods check their
arguments and call the storage steps (the abstract ``_``-methods) each store implements.

Exactly-once requests (SOA-Rity for HTTP)
    ``record_app_request`` inserts the pair's record; a Message-ID already recorded raises
    :class:`DuplicateKey` and writes nothing (the transaction stays usable), so two requests racing
    with one Message-ID never both do their work. ``purge_app_requests(before)`` forgets records created
    before a moment (outside the time window a repeat is refused anyway).
Claims and batches
    ``inbox_claim`` / ``put_inbox_claim`` read and write an entry's claim (one per entry; the entry must
    exist: :class:`UnknownMessage`); ``add_inbox_batch``, ``inbox_batch``, ``confirm_inbox_batch``.
Cursors
    ``app_cursor(name)`` / ``set_app_cursor(name, position)``: how far a reader of the journal (a
    webhook, :mod:`msh.api.webhooks`) has got, committed with what it did.
Listing
    ``app_inbox(query)`` lists entries as :class:`~msh.store.app_records.InboxQuery` says.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime

from msh.store import app_records, rules
from msh.store.errors import DuplicateKey, UnknownMessage

__all__ = ["AppPort"]


class AppPort(ABC):
    """The application interfaces' methods of a transaction (see the module docs)."""

    @abstractmethod
    def _live(self) -> None: ...

    @abstractmethod
    def _writable(self) -> None: ...

    # -- exactly-once requests

    def app_request(self, message_id: str) -> app_records.AppRequest | None:
        """The recorded request with this Message-ID, or None."""
        self._live()
        return self._app_request(rules.text("message_id", message_id))

    def record_app_request(self, request: app_records.AppRequest) -> None:
        """Record an answered request; :class:`DuplicateKey` (nothing written) if its Message-ID is known."""
        self._writable()
        rules.text("message_id", request.message_id)
        rules.text("application", request.application)
        rules.required_aware("msg_create", request.msg_create)
        rules.required_aware("created_at", request.created_at)
        if not self._add_app_request(request):
            raise DuplicateKey(request.message_id, "request")

    def purge_app_requests(self, before: datetime) -> int:
        """Forget the requests recorded before ``before``; how many were forgotten."""
        self._writable()
        return self._purge_app_requests(rules.required_aware("before", before))

    # -- claims

    def inbox_claim(self, entry_id: int) -> app_records.InboxClaim | None:
        """The claim on inbox entry ``entry_id``, or None (never taken, never rejected)."""
        self._live()
        return self._inbox_claim(entry_id)

    def put_inbox_claim(self, claim: app_records.InboxClaim) -> None:
        """Write the claim of its entry (replacing the one before); :class:`UnknownMessage` if no such entry."""
        self._writable()
        rules.aware("lease_until", claim.lease_until)
        rules.aware("rejected_at", claim.rejected_at)
        if not self._put_inbox_claim(claim):
            raise UnknownMessage(claim.entry_id, "inbox entry")

    # -- batches

    def add_inbox_batch(self, batch: app_records.InboxBatch) -> None:
        """Record a fetched batch; :class:`DuplicateKey` if its id is taken."""
        self._writable()
        rules.required_aware("lease_until", batch.lease_until)
        if not self._add_inbox_batch(batch):
            raise DuplicateKey(batch.batch_id, "inbox batch")

    def inbox_batch(self, batch_id: str) -> app_records.InboxBatch | None:
        """The batch with this id, or None."""
        self._live()
        return self._inbox_batch(batch_id)

    def confirm_inbox_batch(self, batch_id: str, at: datetime) -> app_records.InboxBatch:
        """Mark the batch confirmed at ``at`` (kept as it is when already confirmed)."""
        self._writable()
        moment = rules.required_aware("at", at)
        batch = self._inbox_batch(batch_id)
        if batch is None:
            raise UnknownMessage(batch_id, "inbox batch")
        if batch.confirmed_at is not None:
            return batch
        self._confirm_inbox_batch(batch_id, moment)
        return app_records.InboxBatch(
            batch.batch_id, batch.application, batch.entry_ids, batch.created_at, batch.lease_until, moment
        )

    # -- cursors (how far a reader of the journal has got, e.g. a webhook)

    def app_cursor(self, name: str) -> int:
        """The last journal event id reader ``name`` has handled (0: none)."""
        self._live()
        return self._app_cursor(rules.text("name", name))

    def set_app_cursor(self, name: str, position: int) -> None:
        """Reader ``name`` has handled the journal up to event ``position``."""
        self._writable()
        if position < 0:
            raise ValueError(f"position must be 0 or more, not {position}")
        self._set_app_cursor(rules.text("name", name), position)

    # -- listing

    def app_inbox(self, query: app_records.InboxQuery) -> list[app_records.AppInboxItem]:
        """The entries ``query`` asks for (see :class:`~msh.store.app_records.InboxQuery`)."""
        self._live()
        rules.limit(query.limit)
        rules.required_aware("now", query.now)
        rules.aware("received_before", query.received_before)
        return self._app_inbox(query)

    # -- storage steps

    @abstractmethod
    def _app_request(self, message_id: str) -> app_records.AppRequest | None: ...

    @abstractmethod
    def _add_app_request(self, request: app_records.AppRequest) -> bool:
        """Insert; False (nothing written) if the Message-ID is taken."""

    @abstractmethod
    def _purge_app_requests(self, before: datetime) -> int: ...

    @abstractmethod
    def _inbox_claim(self, entry_id: int) -> app_records.InboxClaim | None: ...

    @abstractmethod
    def _put_inbox_claim(self, claim: app_records.InboxClaim) -> bool:
        """Upsert; False if the entry does not exist."""

    @abstractmethod
    def _add_inbox_batch(self, batch: app_records.InboxBatch) -> bool: ...

    @abstractmethod
    def _inbox_batch(self, batch_id: str) -> app_records.InboxBatch | None: ...

    @abstractmethod
    def _confirm_inbox_batch(self, batch_id: str, at: datetime) -> None: ...

    @abstractmethod
    def _app_cursor(self, name: str) -> int: ...

    @abstractmethod
    def _set_app_cursor(self, name: str, position: int) -> None: ...

    @abstractmethod
    def _app_inbox(self, query: app_records.InboxQuery) -> list[app_records.AppInboxItem]: ...
