"""The routing table of an MSH that forwards messages for other parties (ebMS2 §10, docs/design.md §3), sans-IO.

ebMS 2.0 has no routing header: where a message goes next is the intermediary's own configuration. A
:class:`Route` names the messages it takes (the To PartyId, and optionally the CPAId, Service and Action)
and the next hop (its endpoint URL, and optionally its PartyId when it is an intermediary too), with the
retry settings of that hop (ebMS2 §10.1: "the values of Retry and RetryInterval between Intermediate MSHs
remains implementation specific"). :func:`find_route` picks the first matching row of the table.

The table serves three purposes:

* an intermediary forwards a message not addressed to its own party along the first matching route;
* any MSH sends its own messages and signals (acknowledgments, errors, DeliveryFailures) to a party along
  a matching route instead of to the endpoint the agreement gives (the reverse path of a multi-hop
  exchange goes back through the intermediaries);
* the PartyId of a route's next hop names an intermediary whose hop acknowledgments and error messages
  about our messages count, though it is not the party the messages went to.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from cpa.duration import XsDuration

__all__ = ["DEFAULT_ROUTE_RETRIES", "DEFAULT_ROUTE_RETRY_INTERVAL", "Route", "find_route", "routes_via"]

DEFAULT_ROUTE_RETRIES: Final = 5
"""Resends on a hop when the route does not say (ebMS2 §10.1 leaves the value to the implementation)."""

DEFAULT_ROUTE_RETRY_INTERVAL: Final = XsDuration.from_timedelta(timedelta(seconds=30))
"""The wait between transmissions on a hop when the route does not say."""

PartyKey = tuple[str, str | None]


_NEXT_HOP_SCHEMES = ("http://", "https://", "mailto:", "amqp://", "amqps://")
"""The endpoints a route may lead to: one per binding the MSH has (docs/transports)."""


@dataclass(frozen=True, slots=True)
class Route:
    """One row of the routing table.

    A message matches when one of its To PartyIds has the value ``to_party_id`` (and the type
    ``to_party_id_type``; None matches any type, the untyped PartyId included) and, for each of
    ``cpa_id``, ``service`` and ``action`` that is set, its header has that value. It then goes to
    ``next_hop`` (an http or https URL). ``next_hop_party`` is the (value, type) PartyId of the next hop
    when that is an intermediary (None: the next hop is the To party itself). ``hop_ack``: ask the next hop
    for a hop acknowledgment (AckRequested aimed at nextMSH, ebMS2 §10.1.1) when forwarding a message that
    came with one. ``retries``, ``retry_interval`` and ``persist_duration`` govern the resends on this hop.
    ``trusted`` names the certificate files (PEM) that authenticate the next hop's TLS server (empty: the
    MSH's ``tls.trusted``). ``name`` identifies the row in logs and messages.
    """

    name: str
    to_party_id: str
    next_hop: str
    to_party_id_type: str | None = None
    cpa_id: str | None = None
    service: str | None = None
    action: str | None = None
    next_hop_party: PartyKey | None = None
    hop_ack: bool = True
    retries: int = DEFAULT_ROUTE_RETRIES
    retry_interval: XsDuration = DEFAULT_ROUTE_RETRY_INTERVAL
    persist_duration: XsDuration | None = None
    trusted: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.to_party_id:
            raise ValueError(f"route {self.name}: to_party_id must not be empty")
        # ebMS2 Appendix B: a hop goes over HTTP (B.2) or SMTP (B.3); a queuing transport (amqp) is the third binding.
        if not self.next_hop.lower().startswith(_NEXT_HOP_SCHEMES):
            raise ValueError(
                f"route {self.name}: next_hop must be an http(s)://, mailto: or amqp(s):// endpoint, "
                f"got {self.next_hop!r}"
            )
        if self.retries < 0:
            raise ValueError(f"route {self.name}: retries must be 0 or more, got {self.retries}")
        if self.retry_interval.is_negative:
            raise ValueError(f"route {self.name}: retry_interval must not be negative")

    def matches(self, to_party_ids: Iterable[PartyKey], cpa_id: str, service: str, action: str) -> bool:
        """Whether a message with these To PartyIds, CPAId, Service and Action takes this route."""
        if self.cpa_id is not None and cpa_id != self.cpa_id:
            return False
        if self.service is not None and service != self.service:
            return False
        if self.action is not None and action != self.action:
            return False
        return any(
            value == self.to_party_id and (self.to_party_id_type is None or type_ == self.to_party_id_type)
            for value, type_ in to_party_ids
        )

    def describe(self) -> str:
        """One line: what the route takes and where it sends it."""
        to = self.to_party_id + (f" (type {self.to_party_id_type})" if self.to_party_id_type else "")
        scope = ", ".join(
            f"{k} {v}" for k, v in (("CPA", self.cpa_id), ("service", self.service), ("action", self.action)) if v
        )
        via = f" (intermediary {self.next_hop_party[0]})" if self.next_hop_party is not None else ""
        label = self.name if self.name.startswith("route ") else f"route {self.name}"
        return f"{label}: To {to}{' with ' + scope if scope else ''} -> {self.next_hop}{via}"


def find_route(
    routes: Sequence[Route], to_party_ids: Iterable[PartyKey], cpa_id: str, service: str, action: str
) -> Route | None:
    """The first route of ``routes`` the message matches (docs/design.md §3: the first matching row wins)."""
    keys = tuple(to_party_ids)
    for route in routes:
        if route.matches(keys, cpa_id, service, action):
            return route
    return None


def routes_via(routes: Sequence[Route], party: PartyKey) -> tuple[Route, ...]:
    """The routes whose next hop is the intermediary ``party`` (value, type)."""
    return tuple(r for r in routes if r.next_hop_party == party)
