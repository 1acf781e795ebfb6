"""Whom a Ping or StatusRequest of ours goes to, where and how (ebMS2 §7, §8): the agreement in force with the
partner (or the caller's choice among several), the To party's MSH-signal endpoint or the route's next hop,
the TLS context, SyncReply; and, for a stored message of ours, the sending parameters and TLS it went under.
Used by the services (:mod:`msh.runtime.services`) and the transmissions (:mod:`msh.runtime.sender`).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO, Final

from cpa.model import CollaborationProtocolAgreement, SyncReplyMode
from cpa.resolve import (
    AgreementRefused,
    Exchange,
    PartyKey,
    RefusalReason,
    SendingParameters,
    in_force,
    matching_parties,
    party_keys,
)
from msh.ebms.message import ParseMode, parse_message
from msh.ebms.model import Party, PartyId
from msh.ebms.namespaces import SERVICE_MSH
from msh.engine.replies import ACTION_PING, ACTION_STATUS_REQUEST
from msh.engine.signals import party_text
from msh.errors import ConfigurationError, EbmsError
from msh.runtime.core import Core
from msh.runtime.forwarding import Forwarding
from msh.store.api import OutboundKind, OutboundMessage, StoreError

__all__ = [
    "AgreementChoice",
    "Target",
    "client_context",
    "partner_agreements",
    "ping_target",
    "sent_parameters",
    "status_target",
    "stored_party_key",
]

# CPP/A 2.0 §8.4.8.1: the syncReplyMode values under which MSH signals come back on the connection.
_SIGNALS_ON_CONNECTION: Final = frozenset(
    {SyncReplyMode.MSH_SIGNALS_ONLY, SyncReplyMode.SIGNALS_ONLY, SyncReplyMode.SIGNALS_AND_RESPONSE}
)


class AgreementChoice(ConfigurationError):
    """The partner is a party of several agreements in force with us: the caller must name one
    (``candidates``: their CPAIds)."""

    def __init__(self, message: str, candidates: tuple[str, ...]) -> None:
        super().__init__(message)
        self.candidates = candidates


@dataclass(frozen=True, slots=True)
class Target:
    """Where a request goes and how: the header's parties and agreement, the URL and TLS context,
    whether it carries SyncReply, and whether the answer is expected on the connection."""

    cpa_id: str
    from_party: Party
    to_party: Party
    partner: str
    url: str
    tls: ssl.SSLContext | None
    mode: SyncReplyMode

    @property
    def sync_reply(self) -> bool:
        # ebMS2 §6.4.7: a syncReplyMode other than none requires SyncReply in the message.
        return self.mode is not SyncReplyMode.NONE

    @property
    def on_connection(self) -> bool:
        return self.mode in _SIGNALS_ON_CONNECTION


def sent_parameters(
    core: Core, stored: OutboundMessage, body: Callable[[], bytes | BinaryIO]
) -> tuple[SendingParameters | None, bool]:
    """The sending parameters a stored message of ours went under (its agreement's channel, endpoint and
    TLS), and whether they depend on the message itself (then they are not the same for every message of
    its route); (None, False) when the agreement no longer allows it.

    The row keeps the Service, not its type: when the agreement binds the service and action under several
    service types (ebMS2 §3.1.4.1, CPP/A 2.0 §8.4.11-§8.4.15: the Service's type tells those bindings
    apart), the type is read from the stored message's header (``body`` gives its bytes, or a stream this
    closes) and the binding it
    was sent under is resolved, not a refusal that would leave the transmission without the agreement's TLS
    trust."""
    cpa = core.registry.get(stored.cpaid)
    to_party = None if cpa is None else stored_party_key(cpa, stored.to_party)
    if to_party is None:
        return None, False
    now = core.clock()

    def under(service_type: str | None) -> SendingParameters:
        exchange = Exchange(core.party, to_party, stored.service, stored.action, service_type=service_type)
        return core.registry.resolve(stored.cpaid, exchange, now=now)

    try:
        return under(None), False
    except AgreementRefused as exc:
        if exc.reason is not RefusalReason.AMBIGUOUS:
            return None, False
    try:
        source = body()
        try:
            message = parse_message(source, stored.content_type, mode=ParseMode.LENIENT)
        finally:
            if not isinstance(source, bytes):
                source.close()
    except (EbmsError, OSError, StoreError):
        return None, False
    message.close()
    header = message.envelope.message_header
    if header is None:
        return None, False
    try:
        params = under(header.service.type)
    except AgreementRefused:
        return None, False
    return params, True


def client_context(
    core: Core, forwarding: Forwarding, url: str, params: SendingParameters | None
) -> ssl.SSLContext | None:
    """The TLS client context for a transmission to ``url``: the route's trust when it is a route's next hop
    (ebMS2 §10), else the agreement's (``params``), else the settings' trust anchors (docs/design.md §7)."""
    route = forwarding.route_for_url(url)
    if route is not None:
        return core.tls.for_route(route)
    if params is not None:
        return core.tls.for_parameters(params)
    return core.tls.for_url(url)


def header_party(ids: tuple[object, ...]) -> Party:
    return Party(tuple(PartyId(str(getattr(p, "value")), getattr(p, "type", None)) for p in ids))  # noqa: B009


def party_label(key: PartyKey) -> str:
    value, type_ = key
    return f"{value} (type {type_})" if type_ else value


def stored_party_key(cpa: CollaborationProtocolAgreement, text: str) -> PartyKey | None:
    """The (value, type) PartyId of ``cpa`` that a stored message names as ``text`` (its :func:`party_text`),
    or None when the agreement does not name it."""
    for info in cpa.party_infos:
        for key in party_keys(info):
            if party_text(*key) == text:
                return key
    return None


def partner_agreements(core: Core, partner: PartyKey | str, now: datetime) -> tuple[list[tuple[str, PartyKey]], str]:
    """The agreements in force between us and ``partner`` (a (value, type) pair, or a PartyId value
    whose type the agreements give), as (CPAId, the partner's PartyId); and the partners there are,
    in words (for a refusal)."""
    value, type_ = (partner, None) if isinstance(partner, str) else partner
    found: list[tuple[str, PartyKey]] = []
    known: dict[PartyKey, list[str]] = {}
    for cpa in core.registry:
        if not matching_parties(cpa, (core.party,)):
            continue
        live = in_force(cpa, now)
        for info in cpa.party_infos:
            keys = party_keys(info)
            if core.party in keys:
                continue
            for key in keys:
                known.setdefault(key, []).append(cpa.cpaid if live else f"{cpa.cpaid} (not in force)")
                if live and key[0] == value and (type_ is None or key[1] == type_):
                    found.append((cpa.cpaid, key))
    described = "; ".join(f"{party_label(k)} in {', '.join(c)}" for k, c in sorted(known.items(), key=str))
    return found, described or "none"


def ping_target(core: Core, forwarding: Forwarding, partner: PartyKey | str, cpa_id: str | None = None) -> Target:
    """Where a Ping to ``partner`` goes, under ``cpa_id`` or the only agreement in force between us."""
    now = core.clock()
    found, known = partner_agreements(core, partner, now)
    name = partner if isinstance(partner, str) else party_label(partner)
    if cpa_id is not None:
        found = [f for f in found if f[0] == cpa_id]
        if not found:
            raise ConfigurationError(
                f"partner {name}: agreement {cpa_id} is not one in force between us and that partner; the "
                f"agreements loaded here know: {known}"
            )
    if not found:
        raise ConfigurationError(
            f"partner {name}: no agreement in force between us and a party with that PartyId; the partners "
            f"are: {known} (agreements.paths names the agreements)"
        )
    types = sorted({key[1] or "" for _, key in found})
    if len(types) > 1:
        raise ConfigurationError(
            f"partner {name}: the agreements know it with several PartyId types ({', '.join(types)}); name the type"
        )
    cpaids = tuple(dict.fromkeys(c for c, _ in found))
    if len(cpaids) > 1:
        raise AgreementChoice(
            f"partner {name} is a party of {len(cpaids)} agreements in force with us: {', '.join(cpaids)}; "
            "name the one to ping under (msh ping --cpa-id, cpaId, cpa_id=)",
            cpaids,
        )
    cpaid, key = found[0]
    # ebMS2 §8.1: "The message is then sent to the To Party": to its MSH signals' endpoint (CPP/A 2.0 §8.4.1).
    params = core.registry.resolve(cpaid, Exchange(core.party, key, SERVICE_MSH, ACTION_PING), now=now)
    to_party = header_party(params.to_party.ids)
    route = forwarding.route(to_party, cpaid, SERVICE_MSH, ACTION_PING)
    url = route.next_hop if route is not None else params.transport.endpoint_url
    return Target(
        cpaid,
        header_party(params.from_party.ids),
        to_party,
        party_text(*key),
        url,
        client_context(core, forwarding, url, params),
        params.messaging.sync_reply_mode,
    )


def status_target(core: Core, forwarding: Forwarding, stored: OutboundMessage, body: Callable[[], bytes]) -> Target:
    """Where a StatusRequest about ``stored`` goes: the message's own endpoint, with its TLS; the
    header as the agreement's MSH channels give it (ebMS2 §7.1.1: "sent to the To Party")."""
    now = core.clock()
    cpa = core.registry.get(stored.cpaid)
    if cpa is None:
        raise ConfigurationError(
            f"message {stored.message_id} went under agreement {stored.cpaid}, which is not loaded here; "
            "load it (agreements.paths) to ask its To party"
        )
    to_party = stored_party_key(cpa, stored.to_party)
    if to_party is None:
        raise ConfigurationError(
            f"message {stored.message_id} went to {stored.to_party}, which agreement {stored.cpaid} does not name"
        )
    params = core.registry.resolve(
        stored.cpaid, Exchange(core.party, to_party, SERVICE_MSH, ACTION_STATUS_REQUEST), now=now
    )
    sent_under, _ = sent_parameters(core, stored, body)
    url = stored.endpoint_url
    return Target(
        stored.cpaid,
        header_party(params.from_party.ids),
        header_party(params.to_party.ids),
        stored.to_party,
        url,
        client_context(core, forwarding, url, sent_under),
        params.messaging.sync_reply_mode,
    )


def stored_body(core: Core, stored: OutboundMessage) -> bytes:
    """The stored bytes of ``stored`` as they were transmitted."""
    with core.store.transaction(readonly=True) as tx, tx.open_blob(stored.body_blob_id) as blob:
        return blob.read()


def own_message(core: Core, message_id: str) -> OutboundMessage:
    """Our sent message ``message_id``; refused when the store has none or it is a forward or signal of ours
    (ebMS2 §7.1.1: only a message's sender asks its To party about it)."""
    with core.store.transaction(readonly=True) as tx:
        stored = tx.get_outbound(message_id)
    if stored is None:
        raise ConfigurationError(f"{message_id}: no message sent from this store ({core.store.url}) has that MessageId")
    if stored.kind is not OutboundKind.OWN:
        raise ConfigurationError(
            f"{message_id} is a {stored.kind.value} of this MSH, not a message of ours: only its sender asks "
            "its To party about it (ebMS2 §7.1.1)"
        )
    return stored
