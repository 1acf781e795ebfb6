"""The in-memory twin's storage steps of retention (:mod:`msh.store.retention_port`), the same rules as the
SQL store's (:mod:`msh.store.sql.retention_steps`): the whole transaction holds the store's lock, so the
check and the removal are one step."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, Protocol

from msh.store import app_records, records
from msh.store.retention_port import InboundPosition, OutboundPosition, PurgeCandidate

__all__ = ["MemoryRetentionSteps"]

_SETTLED: Final = frozenset({records.InboxState.ACKNOWLEDGED_BY_APP, records.InboxState.ABANDONED})


class _Tables(Protocol):
    """What the steps read of the in-memory store (:class:`msh.store.memory.MemoryStore`)."""

    outbound: dict[str, records.OutboundMessage]
    inbound: dict[int, records.InboundMessage]
    first_copy: dict[str, int]
    de_records: dict[str, int]
    inbox: dict[int, records.InboxEntry]
    claims: dict[int, app_records.InboxClaim]
    timers: dict[int, records.Timer]


class MemoryRetentionSteps:
    """A mixin of the in-memory transaction (which gives ``_store``, ``_set``, ``_remove``, ``_blob_info``)."""

    _store: _Tables

    def _set(self, table: dict[Any, Any], key: object, value: object) -> None:
        raise NotImplementedError  # pragma: no cover - the transaction's own

    def _remove(self, table: dict[Any, Any], key: object) -> None:
        raise NotImplementedError  # pragma: no cover - the transaction's own

    def _blob_info(self, blob_id: int) -> tuple[int, int] | None:
        raise NotImplementedError  # pragma: no cover - the transaction's own

    def _size(self, blob_id: int) -> int:
        info = self._blob_info(blob_id)
        return 0 if info is None else info[1]

    def _final_out(self, record: records.OutboundMessage) -> bool:
        no_timer = all(t.message_id != record.message_id for t in self._store.timers.values())
        return record.state.status.final and no_timer

    def _settled_in(self, record: records.InboundMessage) -> bool:
        entry = self._store.inbox.get(record.id)
        if entry is not None and entry.state not in _SETTLED:
            return False
        sending = self._store.outbound.get(record.message_id)
        return sending is None or sending.state.status.final

    def _outbound_candidates(
        self, before: datetime, after: OutboundPosition | None, limit: int
    ) -> list[PurgeCandidate]:
        found = [
            r
            for r in self._store.outbound.values()
            if self._final_out(r) and r.updated_at < before and (after is None or (r.updated_at, r.message_id) > after)
        ]
        found.sort(key=lambda r: (r.updated_at, r.message_id))
        return [
            PurgeCandidate(
                r.message_id,
                None,
                r.cpaid,
                r.kind.value,
                r.state.status.value,
                False,
                r.state.first_sent_at or r.created_at,
                r.updated_at,
                r.state.reliability.persist_duration,
                self._size(r.body_blob_id),
            )
            for r in found[:limit]
        ]

    def _inbound_candidates(self, before: datetime, after: InboundPosition | None, limit: int) -> list[PurgeCandidate]:
        found = []
        for r in self._store.inbound.values():
            if not self._settled_in(r):
                continue
            entry = self._store.inbox.get(r.id)
            settled = (entry.acknowledged_at if entry is not None else None) or r.received_at
            if settled < before and (after is None or (settled, r.id) > after):
                found.append((settled, r, entry))
        found.sort(key=lambda f: (f[0], f[1].id))
        return [
            PurgeCandidate(
                r.message_id,
                r.id,
                r.cpaid,
                "received",
                "none" if entry is None else entry.state.value,
                r.duplicate_elimination,
                r.received_at,
                settled,
                None,
                self._size(r.body_blob_id),
            )
            for settled, r, entry in found[:limit]
        ]

    def _delete_final_outbound(self, message_id: str) -> int | None:
        record = self._store.outbound.get(message_id)
        if record is None or not self._final_out(record):
            return None
        self._remove(self._store.outbound, message_id)
        return record.body_blob_id

    def _settled_inbound(self, inbound_id: int) -> tuple[str, int] | None:
        record = self._store.inbound.get(inbound_id)
        if record is None or not self._settled_in(record):
            return None
        return record.message_id, record.body_blob_id

    def _delete_settled_inbound(self, inbound_id: int) -> bool:
        store = self._store
        record = store.inbound.get(inbound_id)
        if record is None or not self._settled_in(record):
            return False
        self._remove(store.inbound, inbound_id)
        for table in (store.inbox, store.claims):
            if inbound_id in table:
                self._remove(table, inbound_id)
        message_id = record.message_id
        if store.de_records.get(message_id) == inbound_id:
            self._remove(store.de_records, message_id)
        if store.first_copy.get(message_id) == inbound_id:
            # The next stored copy of the MessageId becomes its first (the SQL store finds it by the lowest id).
            rest = sorted(i for i, r in store.inbound.items() if r.message_id == message_id)
            if rest:
                self._set(store.first_copy, message_id, rest[0])
            else:
                self._remove(store.first_copy, message_id)
        return True
