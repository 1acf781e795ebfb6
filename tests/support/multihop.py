"""A multi-hop test network: party A sends to party C through intermediaries (ebMS2 §10).

:func:`routed_cpa` builds the A-C agreement for one row of ebMS2 §6.6 (DuplicateElimination, AckRequested
aimed at the To Party MSH, AckRequested aimed at the next MSH): C's endpoint in it is the first
intermediary's. :func:`multihop` puts A, the intermediaries and C on a :class:`~msh.testing.network.TestNetwork`
with the routing tables that make the path: A sends to the intermediary the agreement names (and trusts
it as its next hop), each intermediary routes to the next one and finally to C, and back to A; C sends
its signals to A through the last intermediary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from cpa.duration import XsDuration
from cpa.model import CollaborationProtocolAgreement, PartyId, PerMessage, SyncReplyMode
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH
from msh.engine.routing import Route
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.msh import Msh
from msh.testing.network import TestNetwork
from tests.support.cpa_factory import A_ID, B_ID, SERVICE, channel, make_cpa

__all__ = ["A", "C", "CPAID", "Path3", "intermediary_id", "multihop", "order", "routed_cpa", "settings_for"]

A = A_ID
C = B_ID
CPAID = "cpa-a-c-routed"
A_URL = "http://a.example/msh"
C_URL = "http://c.example/msh"


def intermediary_id(n: int) -> PartyId:
    return PartyId(f"55500011{n}", "urn:duns")


def intermediary_url(n: int) -> str:
    return f"http://i{n}.example/msh"


def routed_cpa(
    *,
    de: bool,
    e2e: bool,
    hop: bool,
    retries: int = 5,
    retry_interval: timedelta = timedelta(minutes=1),
    persist_duration: timedelta = timedelta(hours=1),
    first_hop: str = intermediary_url(1),
    sync_reply_mode: SyncReplyMode = SyncReplyMode.NONE,
) -> CollaborationProtocolAgreement:
    """The A-C agreement for one row of ebMS2 §6.6; C's endpoint is ``first_hop`` (an intermediary);
    ``sync_reply_mode`` on both parties' channels."""
    always, never = PerMessage.ALWAYS, PerMessage.NEVER
    common: dict[str, Any] = {
        "duplicate_elimination": always if de else never,
        "retries": retries,
        "retry_interval": retry_interval,
        "persist_duration": persist_duration,
        "sync_reply_mode": sync_reply_mode,
    }
    first_actor = ACTOR_TO_PARTY_MSH if e2e or not hop else ACTOR_NEXT_MSH
    ack = always if e2e or hop else never
    a_business = channel("A", endpoint=A_URL, ack_requested=ack, actor=first_actor, **common)
    c_business = channel("B", endpoint=first_hop, ack_requested=ack, actor=first_actor, **common)
    cpa = make_cpa(cpaid=CPAID, b_ids=(C,), a_channel=a_business, b_channel=c_business)
    if not (e2e and hop):
        return cpa
    # CPP/A 2.0 §8.4.15: a second channel of the binding, aimed at nextMSH, asks the intermediary too.
    a_hop = channel("A", channel_id="A_next", endpoint=A_URL, ack_requested=always, actor=ACTOR_NEXT_MSH, **common)
    a, b = cpa.party_infos
    role = a.collaboration_roles[0]
    sends = tuple(
        replace(ab, channels=(*ab.channels, a_hop)) if ab.action == "NewOrder" else ab
        for ab in role.service_binding.can_send
    )
    role = replace(role, service_binding=replace(role.service_binding, can_send=sends))
    a = replace(
        a, collaboration_roles=(role, *a.collaboration_roles[1:]), delivery_channels=(*a.delivery_channels, a_hop)
    )
    return replace(cpa, party_infos=(a, b))


def _route_table(route: Route) -> dict[str, Any]:
    table: dict[str, Any] = {
        "name": route.name,
        "to_party_id": route.to_party_id,
        "next_hop": route.next_hop,
        "hop_ack": route.hop_ack,
        "retries": route.retries,
        "retry_interval": str(route.retry_interval),
    }
    if route.to_party_id_type is not None:
        table["to_party_id_type"] = route.to_party_id_type
    if route.next_hop_party is not None:
        table["next_hop_party_id"] = route.next_hop_party[0]
        if route.next_hop_party[1] is not None:
            table["next_hop_party_id_type"] = route.next_hop_party[1]
    for key in ("cpa_id", "service", "action"):
        if getattr(route, key) is not None:
            table[key] = getattr(route, key)
    return table


def settings_for(
    party: PartyId, domain: str, routes: tuple[Route, ...] = (), keys: tuple[Path, Path] | None = None
) -> Settings:
    """Settings of one node: memory store, plain HTTP, the routing table written as the settings file
    would have it (the agreements are handed to the network); ``keys``: its signing key and certificate."""
    data: dict[str, Any] = {
        "identity": {"party_id": party.value, "party_id_type": party.type, "message_id_domain": domain},
        "agreements": {"paths": []},
        "store": {"url": "memory:"},
        "server": {"tls": False},
        "routing": {"routes": [_route_table(r) for r in routes]},
    }
    if keys is not None:
        data["security"] = {"signing_key": str(keys[0]), "signing_certificate": str(keys[1])}
    settings = settings_from_mapping(data, base_dir=Path.cwd(), source=f"<{domain}>", env={})
    assert settings.routing.routes == routes
    return settings


def order(n: int) -> Submission:
    return Submission(
        (C.value, C.type), SERVICE, "NewOrder", (Payload(f"<order n='{n}'/>".encode(), "application/xml"),)
    )


def _route(name: str, to: PartyId, url: str, via: PartyId | None, hop_retries: int, interval: timedelta) -> Route:
    return Route(
        name,
        to.value,
        url,
        to_party_id_type=to.type,
        next_hop_party=(via.value, via.type) if via is not None else None,
        retries=hop_retries,
        retry_interval=XsDuration.from_timedelta(interval),
    )


@dataclass
class Path3:
    """The nodes of a multi-hop network: A, the intermediaries in path order, C."""

    net: TestNetwork
    a: Msh
    hops: list[Msh]
    c: Msh


def multihop(
    net: TestNetwork,
    cpa: CollaborationProtocolAgreement,
    *,
    intermediaries: int = 1,
    hop_retries: int = 5,
    hop_interval: timedelta = timedelta(seconds=20),
    intermediary_routes: dict[int, tuple[Route, ...]] | None = None,
    keys: dict[str, tuple[Path, Path]] | None = None,
    adjust: Callable[[str, Settings], Settings] | None = None,
) -> Path3:
    """A, ``intermediaries`` intermediaries and C on ``net`` (see the module docs); ``intermediary_routes``
    replaces the routing table of intermediary n (1-based); ``keys`` maps a node's name (``a``, ``i1``,
    ``c``) to its signing key and certificate; ``adjust`` changes a node's settings (given its name)."""
    keys = keys or {}

    def settings(name: str, made: Settings) -> Settings:
        return made if adjust is None else adjust(name, made)

    first = intermediary_id(1)
    last = intermediary_id(intermediaries)
    a = net.add(
        "a",
        settings(
            "a",
            settings_for(
                A,
                "a.example",
                (_route("a-to-c", C, intermediary_url(1), first, hop_retries, hop_interval),),
                keys.get("a"),
            ),
        ),
        agreements=(cpa,),
        urls=(A_URL,),
    )
    hops: list[Msh] = []
    for n in range(1, intermediaries + 1):
        nxt = intermediary_url(n + 1) if n < intermediaries else C_URL
        via = intermediary_id(n + 1) if n < intermediaries else None
        back = intermediary_url(n - 1) if n > 1 else A_URL
        back_via = intermediary_id(n - 1) if n > 1 else None
        routes = (
            _route(f"i{n}-to-c", C, nxt, via, hop_retries, hop_interval),
            _route(f"i{n}-to-a", A, back, back_via, hop_retries, hop_interval),
        )
        if intermediary_routes is not None and n in intermediary_routes:
            routes = intermediary_routes[n]
        hops.append(
            net.add(
                f"i{n}",
                settings(f"i{n}", settings_for(intermediary_id(n), f"i{n}.example", routes, keys.get(f"i{n}"))),
                agreements=(),
                urls=(intermediary_url(n),),
            )
        )
    back_route = _route("c-to-a", A, intermediary_url(intermediaries), last, hop_retries, hop_interval)
    made = settings("c", settings_for(C, "c.example", (back_route,), keys.get("c")))
    c = net.add("c", made, agreements=(cpa,), urls=(C_URL,))
    return Path3(net, a, hops, c)
