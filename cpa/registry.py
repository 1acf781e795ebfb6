"""The agreements an MSH holds, looked up by CPAId or by the parties and the message they exchange.

:class:`CpaRegistry` is the in-memory CPA port of docs/design.md §9. It is safe to use from many threads
without readers ever waiting: its whole state is one immutable :class:`_Index` (dicts that are never
changed once published); a writer takes a lock, builds the next index and publishes it with a single
attribute assignment, and a reader works on whichever index it read first.

``find`` answers an application that does not name the CPA: the agreements under which the From party
can send (CanSend) the service/action and the To party can receive (CanReceive) it. It is a dict get per
(From PartyId, To PartyId) pair on an index keyed by (From PartyId, To PartyId, Service, Action). PartyIds
match on value and type exactly (CPP/A 2.0 §8.4.2, ebMS2 §3.1.1.1).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeAlias

from cpa.model import CollaborationProtocolAgreement
from cpa.reliable_messaging_method import ReliableMessagingMethod
from cpa.resolve import (
    AgreementRefused,
    Exchange,
    PartyKey,
    PartyRef,
    RefusalReason,
    SendingParameters,
    in_force,
    party_keys,
    resolve,
    routes,
)

__all__ = ["CpaRegistry", "RouteKey"]

RouteKey: TypeAlias = tuple[PartyKey, PartyKey, str, str]
"""(From PartyId, To PartyId, Service, Action): the key of the ``find`` index."""

_Entry: TypeAlias = tuple[str | None, CollaborationProtocolAgreement]  # (service type, agreement)


@dataclass(frozen=True, slots=True)
class _Index:
    """One published state of the registry; never changed after publication."""

    by_id: dict[str, CollaborationProtocolAgreement] = field(default_factory=dict)
    by_route: dict[RouteKey, tuple[_Entry, ...]] = field(default_factory=dict)
    keys_of: dict[str, tuple[RouteKey, ...]] = field(default_factory=dict)


def _route_entries(cpa: CollaborationProtocolAgreement) -> dict[RouteKey, list[_Entry]]:
    out: dict[RouteKey, list[_Entry]] = {}
    for r in routes(cpa):
        entry = (r.service_type, cpa)
        for f in r.from_party.party_ids:
            for t in r.to_party.party_ids:
                entries = out.setdefault(((f.value, f.type), (t.value, t.type), r.service, r.action), [])
                if entry not in entries:
                    entries.append(entry)
    return out


class CpaRegistry:
    """Many agreements, by CPAId and by route; reads take no lock (see the module docs).

    ``first_resend_timeouts`` (sending channel id -> wait before the first resend, docs/design.md §3) and
    ``reliable_messaging_methods`` (sending channel id -> ReliableMessagingMethod, :mod:`cpa.reliable_messaging_method`)
    are passed to every :meth:`resolve`.
    """

    def __init__(
        self,
        agreements: Iterable[CollaborationProtocolAgreement] = (),
        *,
        first_resend_timeouts: Mapping[str, timedelta] | None = None,
        reliable_messaging_methods: Mapping[str, ReliableMessagingMethod] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._index = _Index()
        self.first_resend_timeouts: Mapping[str, timedelta] = dict(first_resend_timeouts or {})
        self.reliable_messaging_methods: Mapping[str, ReliableMessagingMethod] = dict(reliable_messaging_methods or {})
        self.add_all(agreements)

    # -- writers ---------------------------------------------------------------------------------

    def add(self, cpa: CollaborationProtocolAgreement) -> None:
        """Add ``cpa``, replacing the agreement with the same CPAId (ebMS2 §3.1.2: CPAId names one CPA)."""
        self.add_all((cpa,))

    def add_all(self, agreements: Iterable[CollaborationProtocolAgreement]) -> None:
        """Add several agreements and publish them at once (a later one replaces an earlier same CPAId)."""
        batch = {c.cpaid: c for c in agreements}
        if not batch:
            return
        prepared = {cpaid: _route_entries(c) for cpaid, c in batch.items()}  # outside the lock
        with self._lock:
            old = self._index
            by_id = dict(old.by_id)
            by_route = dict(old.by_route)
            keys_of = dict(old.keys_of)
            for cpaid in batch:
                if cpaid in by_id:
                    self._drop(cpaid, by_route, keys_of)
            for cpaid, cpa in batch.items():
                by_id[cpaid] = cpa
                entries = prepared[cpaid]
                for key, items in entries.items():
                    by_route[key] = by_route.get(key, ()) + tuple(items)
                keys_of[cpaid] = tuple(entries)
            self._index = _Index(by_id, by_route, keys_of)

    def replace_all(self, other: CpaRegistry) -> None:
        """Take the agreements, first-resend timeouts and reliable messaging methods of ``other`` in place of this
        registry's own, in one publication: a reader sees the old set or the new one, never a mix (a reload,
        msh.runtime.reload)."""
        with self._lock, other._lock:
            self.first_resend_timeouts = dict(other.first_resend_timeouts)
            self.reliable_messaging_methods = dict(other.reliable_messaging_methods)
            self._index = other._index

    def remove(self, cpaid: str) -> CollaborationProtocolAgreement | None:
        """Remove the agreement ``cpaid``; returns it, or None when there was none."""
        with self._lock:
            old = self._index
            cpa = old.by_id.get(cpaid)
            if cpa is None:
                return None
            by_id = dict(old.by_id)
            del by_id[cpaid]
            by_route = dict(old.by_route)
            keys_of = dict(old.keys_of)
            self._drop(cpaid, by_route, keys_of)
            self._index = _Index(by_id, by_route, keys_of)
            return cpa

    @staticmethod
    def _drop(
        cpaid: str, by_route: dict[RouteKey, tuple[_Entry, ...]], keys_of: dict[str, tuple[RouteKey, ...]]
    ) -> None:
        for key in keys_of.pop(cpaid, ()):
            kept = tuple(e for e in by_route.get(key, ()) if e[1].cpaid != cpaid)
            if kept:
                by_route[key] = kept
            else:
                by_route.pop(key, None)

    # -- readers (no lock) -----------------------------------------------------------------------

    def get(self, cpaid: str) -> CollaborationProtocolAgreement | None:
        """The agreement with CPAId ``cpaid``, or None."""
        return self._index.by_id.get(cpaid)

    def __contains__(self, cpaid: object) -> bool:
        return cpaid in self._index.by_id

    def __len__(self) -> int:
        return len(self._index.by_id)

    def __iter__(self) -> Iterator[CollaborationProtocolAgreement]:
        """The agreements (a snapshot: adding or removing while iterating is safe)."""
        return iter(tuple(self._index.by_id.values()))

    def find(
        self,
        from_party: PartyRef,
        to_party: PartyRef,
        service: str,
        action: str,
        service_type: str | None = None,
        *,
        now: datetime | None = None,
    ) -> tuple[CollaborationProtocolAgreement, ...]:
        """The agreements under which ``from_party`` can send ``service``/``action`` to ``to_party``.

        ``service_type`` None matches any service type. With ``now``, only agreements in force then
        (agreed or signed, Start <= now < End) are returned. Order: the order the agreements were added.
        """
        by_route = self._index.by_route
        found: list[CollaborationProtocolAgreement] = []
        for f in party_keys(from_party):
            for t in party_keys(to_party):
                for stype, cpa in by_route.get((f, t, service, action), ()):
                    if (service_type is None or stype == service_type) and not any(c is cpa for c in found):
                        found.append(cpa)
        if now is not None:
            found = [c for c in found if in_force(c, now)]
        return tuple(found)

    def resolve(self, cpaid: str, exchange: Exchange, *, now: datetime) -> SendingParameters:
        """:func:`cpa.resolve.resolve` of ``exchange`` on the agreement ``cpaid``; refuses when it is not
        registered."""
        cpa = self._index.by_id.get(cpaid)
        if cpa is None:
            raise AgreementRefused(
                f"no agreement with CPAId {cpaid!r} is registered ({len(self)} are); load it and add it to the "
                f"registry, or use find() to look agreements up by party, service and action",
                reason=RefusalReason.NOT_REGISTERED,
                cpaid=cpaid,
            )
        return resolve(
            cpa,
            exchange,
            now=now,
            first_resend_timeouts=self.first_resend_timeouts,
            reliable_messaging_methods=self.reliable_messaging_methods,
        )
