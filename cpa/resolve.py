"""Sending parameters from an agreement: what a sending MSH needs to know to send one message.

:func:`resolve` answers, for an :class:`Exchange` (a From party, a To party, a Service and an Action,
with the roles and the service type when they are named), which delivery channels the agreement binds
(the From party's CanSend binding and the To party's CanReceive binding), where to send (the receiving
channel's endpoint), how (transport, TLS, signing, encryption) and with which reliability (retries,
intervals, persistence, ack/duplicate-elimination/sync-reply choices): a :class:`SendingParameters`, one
record per part of the agreement the values come from. It refuses, with :class:`AgreementRefused` saying
why and what to do, when the agreement does not allow the message.

The answer depends only on the agreement and the question, except for the validity window, which is
checked against ``now`` on every call; so results are cached per (agreement, exchange) and a lookup costs
a dict get plus the date check. The engine never reads a clock: ``now`` is a parameter.

Decisions where the specifications leave room (see also the module docs of :mod:`cpa.check`):

* Status ``agreed`` and ``signed`` are both in force; ``proposed`` is refused. CPP/A 2.0 §9.4.1: a signed
  CPA is an agreed one that the parties also signed; ebMS2 §3.1.2 needs the governing CPA to be agreed.
* An exchange's ``service_type=None`` means "whichever type the agreement uses": when the agreement binds
  the service under several types (the Digikoppeling compliance agreements do) the call is refused as
  ambiguous.
* Several matching bindings (roles) give the first in document order unless roles are named.
* MSH signals (Service ``urn:oasis:names:tc:ebxml-msg:service``) use each party's defaultMshChannel
  (CPP/A 2.0 §8.4.1), not a CanSend/CanReceive binding; roles are not looked at for them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Final, Protocol, TypeAlias

from cpa.duration import XsDuration
from cpa.memo import AgreementMemo
from cpa.model import (
    AccessAuthentication,
    ActionBinding,
    Certificate,
    CollaborationProtocolAgreement,
    ConversationConstraints,
    DeliveryChannel,
    DigitalEnvelope,
    Endpoint,
    EndpointType,
    MessageOrderSemantics,
    NonRepudiation,
    PartyId,
    PartyInfo,
    PerMessage,
    SecurityDetails,
    Status,
    SyncReplyMode,
    TransportReceiver,
)
from cpa.reliable_messaging_method import ReliableMessagingMethod
from msh.ebms.namespaces import ACTOR_NEXT_MSH, SERVICE_MSH
from msh.errors import ConfigurationError

if TYPE_CHECKING:
    from msh.ebms.model import MessageHeader

__all__ = [
    "IN_FORCE",
    "MSH_SIGNAL_ACTIONS",
    "AgreementRefused",
    "DocExchangeParameters",
    "Exchange",
    "HasPartyIds",
    "MessagingParameters",
    "PartyIdLike",
    "PartyKey",
    "PartyParameters",
    "PartyRef",
    "RefusalReason",
    "ReliableMessagingParameters",
    "AgreementRoute",
    "SendingParameters",
    "TransportParameters",
    "clear_cache",
    "in_force",
    "action_bindings",
    "at_least_retry_interval",
    "is_msh_signal",
    "matching_parties",
    "next_msh_channel",
    "party_keys",
    "resolve",
    "routes",
]

# ebMS2 §3.1.2 and CPP/A 2.0 §9.4.1: the statuses under which an agreement governs messages.
IN_FORCE: Final = frozenset({Status.AGREED, Status.SIGNED})

# ebMS2 §6.3.2.2, §4.2.4.1, §8.1, §7.1: the Actions of the MSH service (Service SERVICE_MSH).
MSH_SIGNAL_ACTIONS: Final = frozenset(
    {"Acknowledgment", "MessageError", "Ping", "Pong", "StatusRequest", "StatusResponse"}
)

# CPP/A 2.0 §8.4.29: the Endpoint@type a signal goes to (falling back to allPurpose).
_SIGNAL_ENDPOINT: Final = {
    "MessageError": EndpointType.ERROR,
    "Acknowledgment": EndpointType.RESPONSE,
    "Pong": EndpointType.RESPONSE,
    "StatusResponse": EndpointType.RESPONSE,
    "Ping": EndpointType.REQUEST,
    "StatusRequest": EndpointType.REQUEST,
}


class PartyIdLike(Protocol):
    """Anything with a PartyId's ``value`` and ``type`` (the CPA's or the ebMS header's PartyId)."""

    @property
    def value(self) -> str: ...

    @property
    def type(self) -> str | None: ...


class HasPartyIds(Protocol):
    """Anything listing a party's PartyIds (an ebMS From/To :class:`~msh.ebms.model.Party`, a PartyInfo)."""

    @property
    def party_ids(self) -> Iterable[PartyIdLike]: ...


PartyKey: TypeAlias = tuple[str, str | None]
"""A PartyId as (value, type): the form PartyIds are compared in (exactly, CPP/A 2.0 §8.4.2)."""

PartyRef: TypeAlias = "PartyIdLike | PartyKey | HasPartyIds | Iterable[PartyIdLike | PartyKey]"
"""One PartyId (object or (value, type) pair) or several naming the same party (ebMS2 §3.1.1)."""


def _key(p: PartyIdLike | PartyKey) -> PartyKey:
    if isinstance(p, tuple):
        return (p[0], p[1])
    return (p.value, p.type)


def party_keys(party: PartyRef) -> tuple[PartyKey, ...]:
    """The (value, type) keys of ``party``: a PartyId, a (value, type) pair, or an iterable of them
    (an ebMS :class:`~msh.ebms.model.Party` is read through its ``party_ids``)."""
    if isinstance(party, tuple) and len(party) == 2 and isinstance(party[0], str):
        second = party[1]
        if second is None or isinstance(second, str):
            return ((party[0], second),)
    if isinstance(party, str):
        raise TypeError(f"a PartyId needs a type or must be given as (value, None); got the bare string {party!r}")
    value = getattr(party, "value", None)
    if isinstance(value, str):
        return ((value, getattr(party, "type", None)),)
    ids = getattr(party, "party_ids", None)
    items: Iterable[PartyIdLike | PartyKey] = ids if ids is not None else party  # type: ignore[assignment]
    keys = tuple(_key(p) for p in items)
    if not keys:
        raise ValueError("a party needs at least one PartyId (ebMS2 §3.1.1)")
    return keys


@dataclass(frozen=True, slots=True, init=False)
class Exchange:
    """The question :func:`resolve` answers: may the From party send this Service/Action to the To party,
    and how. The parties are held as their PartyId keys (:func:`party_keys`, ebMS2 §3.1.1), so equal
    questions are equal values, whatever form the parties were given in (the resolution cache's key).

    ``from_role``/``to_role`` None: any role the agreement gives the party (ebMS2 §3.1.1.2).
    ``service_type`` None: whichever type the agreement binds the service under (ebMS2 §3.1.4.1).
    """

    from_party: tuple[PartyKey, ...]
    from_role: str | None
    to_party: tuple[PartyKey, ...]
    to_role: str | None
    service: str
    service_type: str | None
    action: str

    def __init__(
        self,
        from_party: PartyRef,
        to_party: PartyRef,
        service: str,
        action: str,
        *,
        service_type: str | None = None,
        from_role: str | None = None,
        to_role: str | None = None,
    ) -> None:
        init = object.__setattr__  # the class is frozen
        init(self, "from_party", party_keys(from_party))
        init(self, "from_role", from_role)
        init(self, "to_party", party_keys(to_party))
        init(self, "to_role", to_role)
        init(self, "service", service)
        init(self, "service_type", service_type)
        init(self, "action", action)

    @classmethod
    def of_header(cls, header: MessageHeader) -> Exchange:
        """The exchange a MessageHeader names: its From and To (PartyIds and Roles), Service (with its type)
        and Action (ebMS2 §3.1)."""
        return cls(
            header.from_party,
            header.to_party,
            header.service.value,
            header.action,
            service_type=header.service.type,
            from_role=header.from_party.role,
            to_role=header.to_party.role,
        )


def is_msh_signal(service: str, action: str) -> bool:
    """True for a message of the MSH service (ebMS2 §3.1.4 reserves its namespace) with a known Action."""
    return service == SERVICE_MSH and action in MSH_SIGNAL_ACTIONS


def in_force(cpa: CollaborationProtocolAgreement, now: datetime) -> bool:
    """True when ``cpa`` governs messages at ``now``: agreed or signed, and Start <= now < End."""
    # ebMS2 §3.1.2, CPP/A 2.0 §9.4.1-§9.4.3.
    return cpa.status in IN_FORCE and cpa.start <= now < cpa.end


class RefusalReason(StrEnum):
    """Why :func:`resolve` refused: one value per rule, so callers and tests can tell them apart."""

    NOT_REGISTERED = "not-registered"
    NOT_AGREED = "not-agreed"
    NOT_YET_VALID = "not-yet-valid"
    EXPIRED = "expired"
    UNKNOWN_PARTY = "unknown-party"
    UNKNOWN_ROLE = "unknown-role"
    CANNOT_SEND = "cannot-send"
    CANNOT_RECEIVE = "cannot-receive"
    AMBIGUOUS = "ambiguous"
    NO_ENDPOINT = "no-endpoint"


class AgreementRefused(ConfigurationError):
    """The agreement does not allow this message; the message says why and what to change."""

    def __init__(self, message: str, *, reason: RefusalReason, cpaid: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.cpaid = cpaid


@dataclass(frozen=True, slots=True)
class AgreementRoute:
    """One way a message can travel under an agreement (not to be confused with a row of the routing table,
    :class:`msh.engine.routing.Route`): From CanSend and To CanReceive the same
    (service, service type, action), with the channel each binding names first (CPP/A 2.0 §8.4.15)."""

    from_party: PartyInfo
    to_party: PartyInfo
    from_role: str | None
    to_role: str | None
    service: str
    service_type: str | None
    action: str
    sending: DeliveryChannel
    receiving: DeliveryChannel
    send_binding: ActionBinding | None = None
    receive_binding: ActionBinding | None = None


def action_bindings(
    info: PartyInfo, *, receive: bool, role: str | None = None
) -> dict[tuple[str, str | None, str], list[tuple[str, ActionBinding]]]:
    """(service, type, action) -> [(role name, binding)] of ``info``'s CanSend (or CanReceive) bindings."""
    out: dict[tuple[str, str | None, str], list[tuple[str, ActionBinding]]] = {}
    for cr in info.collaboration_roles:
        if role is not None and cr.role != role:
            continue
        sb = cr.service_binding
        for ab in sb.can_receive if receive else sb.can_send:
            if ab.channels:
                out.setdefault((sb.service, sb.service_type, ab.action), []).append((cr.role, ab))
    return out


def routes(cpa: CollaborationProtocolAgreement) -> tuple[AgreementRoute, ...]:
    """Every business route of ``cpa``: the first party's CanSend bindings, then the second's, each in
    document order (MSH signals, which use the default MSH channels, are not routes)."""
    out: list[AgreementRoute] = []
    a, b = cpa.party_infos
    for sender, receiver in ((a, b), (b, a)):
        receives = action_bindings(receiver, receive=True)
        for key, sends in action_bindings(sender, receive=False).items():
            for from_role, sab in sends:
                for to_role, rab in receives.get(key, ()):
                    out.append(
                        AgreementRoute(
                            sender,
                            receiver,
                            from_role,
                            to_role,
                            key[0],
                            key[1],
                            key[2],
                            sab.channels[0],
                            rab.channels[0],
                            sab,
                            rab,
                        )
                    )
    return tuple(out)


@dataclass(frozen=True, slots=True)
class PartyParameters:
    """A party of the message as the agreement's PartyInfo names it (CPP/A 2.0 §8.4.2): its partyName, its
    PartyIds (all of them, for the header's From or To, ebMS2 §3.1.1) and the role it plays (ebMS2
    §3.1.1.2; None for MSH signals, which name no role)."""

    name: str
    ids: tuple[PartyId, ...]
    role: str | None


@dataclass(frozen=True, slots=True)
class TransportParameters:
    """How the message reaches the To party: the channels' Transport (CPP/A 2.0 §8.4.23), that is the
    receiving side's TransportReceiver (§8.4.28: its Endpoint §8.4.29, protocol and AccessAuthentication
    §8.4.25) and the TLS (§8.4.26/§8.4.31: the receiver's TransportServerSecurity, else the sending side's
    TransportClientSecurity, for the protocol and its version).

    ``tls_client_certificate`` and ``tls_server_trust`` are the sending side's TransportClientSecurity
    (the certificate we present, the SecurityDetails the server must chain to);
    ``tls_server_certificate`` is the receiving side's TransportServerSecurity certificate."""

    endpoint_url: str
    protocol: str
    protocol_version: str | None
    access_authentication: AccessAuthentication | None
    tls_protocol: str | None
    tls_protocol_version: str | None
    tls_client_certificate: Certificate | None
    tls_server_trust: SecurityDetails | None
    tls_server_certificate: Certificate | None

    @property
    def uses_tls(self) -> bool:
        """True when the endpoint is reached over TLS (an https URL or a TransportServerSecurity)."""
        return self.endpoint_url.lower().startswith("https:") or self.tls_protocol is not None


@dataclass(frozen=True, slots=True)
class ReliableMessagingParameters:
    """The sending channel's ReliableMessaging (its ebXMLSenderBinding's, CPP/A 2.0 §8.4.36/§8.4.37, with
    MessageOrderSemantics §8.4.38; ebMS2 §6.4).

    ``first_resend_timeout`` is the MSH setting per channel (docs/design.md §3), defaulting to RetryInterval and
    never shorter (:func:`at_least_retry_interval`). Durations are :class:`~cpa.duration.XsDuration` as the
    agreement wrote them (months included)."""

    retries: int
    retry_interval: XsDuration
    first_resend_timeout: XsDuration
    message_order_semantics: MessageOrderSemantics

    def time_to_live_floor(self, timestamp: datetime) -> datetime:
        """The time a reliable message's TimeToLive must be later than (ebMS2 §6.4.5):
        Timestamp + (Retries + 1) * RetryInterval.

        The product is a duration ((Retries + 1) times the months and the seconds of RetryInterval) added to
        the Timestamp as XML Schema Part 2 Appendix E adds durations (months first); past the year 9999 it
        is the latest representable instant."""
        # ebMS2 §6.4.5: TimeToLive > Timestamp + (Retries + 1) * RetryInterval.
        return ((self.retries + 1) * self.retry_interval).add_to_or_latest(timestamp)


@dataclass(frozen=True, slots=True)
class DocExchangeParameters:
    """The channels' DocExchange (CPP/A 2.0 §8.4.35) beyond ReliableMessaging: the PersistDuration (the
    receiving side's ebXMLReceiverBinding §8.4.45, else the sending side's ebXMLSenderBinding §8.4.36),
    the sender's NonRepudiation the message is signed with (§8.4.40) and the DigitalEnvelope its payloads
    are encrypted with (the receiver's, else the sender's; §8.4.44/§8.4.50)."""

    persist_duration: XsDuration | None
    signing: NonRepudiation | None
    encryption: DigitalEnvelope | None


@dataclass(frozen=True, slots=True)
class MessagingParameters:
    """The sending channel's MessagingCharacteristics (CPP/A 2.0 §8.4.8): :mod:`cpa.precedence` tells how
    ``ack_requested``, ``ack_signature_requested``, ``duplicate_elimination`` and ``sync_reply_mode`` bind
    the header; ``actor`` is the AckRequested actor.

    ``next_msh_ack_requested`` and ``next_msh_ack_signature_requested`` are those of a further channel of
    the same CanSend binding whose actor is nextMSH, when the first channel's actor is toPartyMSH: the
    message then asks for both acknowledgments, the intermediary's and the To party's (ebMS2 §10.1.3,
    §6.6 rows 1 and 5); ``never`` otherwise."""

    sync_reply_mode: SyncReplyMode
    ack_requested: PerMessage
    ack_signature_requested: PerMessage
    duplicate_elimination: PerMessage
    actor: str | None
    next_msh_ack_requested: PerMessage = PerMessage.NEVER
    next_msh_ack_signature_requested: PerMessage = PerMessage.NEVER


@dataclass(frozen=True, slots=True)
class SendingParameters:
    """Everything the agreement says about sending one kind of message (ebMS2 §6.4, CPP/A 2.0 §8.4), in one
    record per part of the agreement it comes from.

    Parties, service (with its type) and action are the agreement's, ready for the header.
    ``reliable_messaging`` is None when the sending channel has no ReliableMessaging (then nothing is
    resent). ``msh_signal``: the message is an MSH signal, sent on the default MSH channels (CPP/A 2.0
    §8.4.1). ``reliable_messaging_method``: ``Transport`` when the MSH's ``sending.reliable_messaging_method``
    names the sending channel (a queuing transport makes the message reliable, :mod:`cpa.reliable_messaging_method`),
    else ``ebXML``.
    """

    cpaid: str
    from_party: PartyParameters
    to_party: PartyParameters
    service: str
    service_type: str | None
    action: str
    conversation_constraints: ConversationConstraints | None
    transport: TransportParameters
    reliable_messaging: ReliableMessagingParameters | None
    doc_exchange: DocExchangeParameters
    messaging: MessagingParameters
    sending_channel_id: str
    receiving_channel_id: str
    msh_signal: bool = False
    reliable_messaging_method: ReliableMessagingMethod = ReliableMessagingMethod.EBXML

    def time_to_live_floor(self, timestamp: datetime) -> datetime:
        """The time a reliable message's TimeToLive must be later than (ebMS2 §6.4.5,
        :meth:`ReliableMessagingParameters.time_to_live_floor`); ``timestamp`` itself without reliable
        messaging."""
        if self.reliable_messaging is None:
            return timestamp
        return self.reliable_messaging.time_to_live_floor(timestamp)


def _parameters(
    cpa: CollaborationProtocolAgreement, route: AgreementRoute, signal: bool
) -> SendingParameters | _Refusal:
    receiving = route.receiving
    receiver = receiving.transport.receiver
    kind = _SIGNAL_ENDPOINT[route.action] if signal else EndpointType.REQUEST
    endpoint = receiver.endpoint(kind) if receiver is not None else None
    if receiver is None or endpoint is None:
        return _Refusal(
            RefusalReason.NO_ENDPOINT,
            f"agreement {cpa.cpaid}: the receiving channel {receiving.channel_id} of {route.to_party.party_name} "
            f"(transport {receiving.transport.transport_id}) has no TransportReceiver Endpoint of type "
            f"{kind.value} or allPurpose (CPP/A 2.0 §8.4.29); add one to the agreement",
        )
    sender_binding = route.sending.doc_exchange.sender_binding
    rm = sender_binding.reliable_messaging if sender_binding is not None else None
    return SendingParameters(
        cpaid=cpa.cpaid,
        from_party=PartyParameters(route.from_party.party_name, route.from_party.party_ids, route.from_role),
        to_party=PartyParameters(route.to_party.party_name, route.to_party.party_ids, route.to_role),
        service=route.service,
        service_type=route.service_type,
        action=route.action,
        conversation_constraints=cpa.conversation_constraints,
        transport=_transport(route.sending, receiver, endpoint),
        reliable_messaging=(
            # ebMS2 §6.4.4: the first resend waits RetryInterval, unless the MSH's setting is longer (resolve).
            ReliableMessagingParameters(rm.retries, rm.retry_interval, rm.retry_interval, rm.message_order_semantics)
            if rm is not None
            else None
        ),
        doc_exchange=_doc_exchange(route.sending, receiving),
        messaging=_messaging(route),
        sending_channel_id=route.sending.channel_id,
        receiving_channel_id=receiving.channel_id,
        msh_signal=signal,
    )


def _transport(sending: DeliveryChannel, receiver: TransportReceiver, endpoint: Endpoint) -> TransportParameters:
    sender_transport = sending.transport.sender
    client = sender_transport.client_security if sender_transport is not None else None
    server = receiver.server_security
    # CPP/A 2.0 §8.4.26/§8.4.31: the receiver's TransportServerSecurity says the TLS version, else the sender's
    # TransportClientSecurity does.
    tls = server if server is not None else client
    return TransportParameters(
        endpoint_url=endpoint.uri,
        protocol=receiver.protocol,
        protocol_version=receiver.protocol_version,
        access_authentication=receiver.access_authentication,
        tls_protocol=tls.protocol if tls is not None else None,
        tls_protocol_version=tls.protocol_version if tls is not None else None,
        tls_client_certificate=client.certificate if client is not None else None,
        tls_server_trust=client.peer_security if client is not None else None,
        tls_server_certificate=server.certificate if server is not None else None,
    )


def _doc_exchange(sending: DeliveryChannel, receiving: DeliveryChannel) -> DocExchangeParameters:
    sender_binding = sending.doc_exchange.sender_binding
    receiver_binding = receiving.doc_exchange.receiver_binding
    # CPP/A 2.0 §8.4.45/§8.4.36: the receiver's PersistDuration and DigitalEnvelope, else the sender's.
    persist = receiver_binding.persist_duration if receiver_binding is not None else None
    if persist is None and sender_binding is not None:
        persist = sender_binding.persist_duration
    encryption = receiver_binding.digital_envelope if receiver_binding is not None else None
    if encryption is None and sender_binding is not None:
        encryption = sender_binding.digital_envelope
    signing = sender_binding.non_repudiation if sender_binding is not None else None
    return DocExchangeParameters(persist, signing, encryption)


def _messaging(route: AgreementRoute) -> MessagingParameters:
    mc = route.sending.messaging_characteristics
    hop = next_msh_channel(route) if mc.actor != ACTOR_NEXT_MSH else None
    hop_mc = hop.messaging_characteristics if hop is not None else None
    return MessagingParameters(
        sync_reply_mode=mc.sync_reply_mode,
        ack_requested=mc.ack_requested,
        ack_signature_requested=mc.ack_signature_requested,
        duplicate_elimination=mc.duplicate_elimination,
        actor=mc.actor,
        next_msh_ack_requested=hop_mc.ack_requested if hop_mc is not None else PerMessage.NEVER,
        next_msh_ack_signature_requested=hop_mc.ack_signature_requested if hop_mc is not None else PerMessage.NEVER,
    )


def next_msh_channel(route: AgreementRoute) -> DeliveryChannel | None:
    # CPP/A 2.0 §8.4.8: a binding may name several channels; one whose actor is nextMSH asks the next MSH
    # for an acknowledgment too (ebMS2 §10.1.3).
    if route.send_binding is None:
        return None
    for channel in route.send_binding.channels[1:]:
        if channel.messaging_characteristics.actor == ACTOR_NEXT_MSH:
            return channel
    return None


@dataclass(frozen=True, slots=True)
class _Refusal:
    reason: RefusalReason
    message: str


def _ids(info: PartyInfo) -> str:
    return ", ".join(f"{p.value!r} (type {p.type!r})" for p in info.party_ids)


def _keys_text(keys: tuple[PartyKey, ...]) -> str:
    return ", ".join(f"{v!r} (type {t!r})" for v, t in keys)


def matching_parties(cpa: CollaborationProtocolAgreement, keys: tuple[PartyKey, ...]) -> list[PartyInfo]:
    """The parties of ``cpa`` that list at least one of ``keys`` among their PartyIds (ebMS2 §3.1.1)."""
    wanted = set(keys)
    return [info for info in cpa.party_infos if any((p.value, p.type) in wanted for p in info.party_ids)]


def _compute(cpa: CollaborationProtocolAgreement, exchange: Exchange) -> SendingParameters | _Refusal:
    """The time-independent part of :func:`resolve` (cached)."""
    from_keys, to_keys = exchange.from_party, exchange.to_party
    from_role, to_role = exchange.from_role, exchange.to_role
    service, service_type, action = exchange.service, exchange.service_type, exchange.action
    a, b = cpa.party_infos
    parties = f"{a.party_name} [{_ids(a)}] and {b.party_name} [{_ids(b)}]"
    senders, receivers = matching_parties(cpa, from_keys), matching_parties(cpa, to_keys)
    pairs = [(f, t) for f in senders for t in receivers if f is not t]
    if not pairs:
        if not senders or not receivers:
            which, keys = ("From", from_keys) if not senders else ("To", to_keys)
            text = f"the {which} party {_keys_text(keys)} is not a party of agreement {cpa.cpaid}"
        else:
            text = f"From {_keys_text(from_keys)} and To {_keys_text(to_keys)} name the same party of {cpa.cpaid}"
        return _Refusal(
            RefusalReason.UNKNOWN_PARTY,
            f"{text}; its parties are {parties}: use their PartyIds, value and type exactly (CPP/A 2.0 §8.4.2)",
        )
    sender, receiver = pairs[0]
    # CPP/A 2.0 §8.4.1: MSH signals travel on the parties' default MSH channels.
    if is_msh_signal(service, action):
        route = AgreementRoute(
            sender,
            receiver,
            None,
            None,
            service,
            service_type,
            action,
            sender.default_msh_channel,
            receiver.default_msh_channel,
        )
        return _parameters(cpa, route, signal=True)
    for info, role in ((sender, from_role), (receiver, to_role)):
        names = [cr.role for cr in info.collaboration_roles]
        if role is not None and role not in names:
            return _Refusal(
                RefusalReason.UNKNOWN_ROLE,
                f"{role!r} is not a role of {info.party_name} in agreement {cpa.cpaid} (its roles: "
                f"{', '.join(dict.fromkeys(names))}); name one of those or leave the role out (ebMS2 §3.1.1.2)",
            )
    # CPP/A 2.0 §8.4.11-§8.4.15: the From party must be able to send it (CanSend) ...
    sends = [
        (k, v)
        for k, v in action_bindings(sender, receive=False, role=from_role).items()
        if k[0] == service and k[2] == action and (service_type is None or k[1] == service_type)
    ]
    what = f"service {service!r}" + (f" (type {service_type!r})" if service_type is not None else "")
    what += f" action {action!r}"
    role_text = f" as {from_role!r}" if from_role is not None else ""
    if not sends:
        can = sorted({f"{k[0]}/{k[2]}" for k in action_bindings(sender, receive=False)})
        return _Refusal(
            RefusalReason.CANNOT_SEND,
            f"{sender.party_name}{role_text} has no CanSend binding for {what} in agreement {cpa.cpaid} "
            f"(it can send: {', '.join(can) or 'nothing'}); check the service, its type and the action",
        )
    # ... and the To party must be able to receive it (CanReceive), under the same service type.
    receives = action_bindings(receiver, receive=True, role=to_role)
    matched = [(k, s, r) for k, s in sends for r in receives.get(k, ())]
    if not matched:
        to_text = f" as {to_role!r}" if to_role is not None else ""
        return _Refusal(
            RefusalReason.CANNOT_RECEIVE,
            f"{receiver.party_name}{to_text} has no CanReceive binding for {what} in agreement {cpa.cpaid}; "
            f"the agreement lets {sender.party_name} send it but not {receiver.party_name} receive it",
        )
    types = list(dict.fromkeys(k[1] for k, _, _ in matched))
    if len(types) > 1:
        return _Refusal(
            RefusalReason.AMBIGUOUS,
            f"agreement {cpa.cpaid} binds service {service!r} action {action!r} under several service types "
            f"({', '.join(repr(t) for t in types)}); pass service_type= to choose one",
        )
    key, (send_role, sab), (recv_role, rab) = matched[0][0], matched[0][1][0], matched[0][2]
    route = AgreementRoute(
        sender, receiver, send_role, recv_role, key[0], key[1], key[2], sab.channels[0], rab.channels[0], sab, rab
    )
    return _parameters(cpa, route, signal=False)


# A resolution depends only on the agreement and the exchange: remembered per agreement object (cpa.memo).
_cache: Final[AgreementMemo[Exchange, SendingParameters | _Refusal]] = AgreementMemo(
    per_agreement=10_000, agreements=20_000
)


def clear_cache() -> None:
    """Forget every cached resolution (see :mod:`cpa.memo` for what is kept, and for how long)."""
    _cache.clear()


def _refuse(cpa: CollaborationProtocolAgreement, now: datetime) -> None:
    if cpa.status not in IN_FORCE:
        # ebMS2 §3.1.2, CPP/A 2.0 §9.4.1: only an agreed (or signed) CPA governs messages.
        raise AgreementRefused(
            f"agreement {cpa.cpaid} has Status {cpa.status.value!r}; only an agreed or signed agreement governs "
            f"messages (ebMS2 §3.1.2): load the version both parties agreed",
            reason=RefusalReason.NOT_AGREED,
            cpaid=cpa.cpaid,
        )
    if now.tzinfo is None:
        raise ValueError(f"now must be timezone-aware (UTC), got {now!r}")
    # CPP/A 2.0 §9.4.2/§9.4.3: in force from Start (inclusive) to End (exclusive).
    if now < cpa.start:
        raise AgreementRefused(
            f"agreement {cpa.cpaid} starts at {cpa.start.isoformat()}, after now ({now.isoformat()}): wait until "
            f"then or load an agreement already in force",
            reason=RefusalReason.NOT_YET_VALID,
            cpaid=cpa.cpaid,
        )
    if now >= cpa.end:
        raise AgreementRefused(
            f"agreement {cpa.cpaid} ended at {cpa.end.isoformat()} (now is {now.isoformat()}): load the renewed "
            f"agreement",
            reason=RefusalReason.EXPIRED,
            cpaid=cpa.cpaid,
        )


def resolve(
    cpa: CollaborationProtocolAgreement,
    exchange: Exchange,
    *,
    now: datetime,
    first_resend_timeouts: Mapping[str, timedelta] | None = None,
    reliable_messaging_methods: Mapping[str, ReliableMessagingMethod] | None = None,
) -> SendingParameters:
    """The parameters for sending ``exchange`` (its Service/Action, from its From to its To party) under
    ``cpa``.

    ``first_resend_timeouts`` maps a sending channel id to the MSH's wait before the first resend
    (docs/design.md §3; an MSH setting, so of fixed length), never shorter than the channel's RetryInterval
    (:func:`at_least_retry_interval`); channels not in it wait RetryInterval. ``reliable_messaging_methods``
    maps a sending channel id to its ReliableMessagingMethod (an MSH setting: neither the CPA nor the header
    has one); channels not in it use ``ebXML``. Raises
    :class:`AgreementRefused` when the agreement is not in force at ``now`` or does not let From send it
    to To.
    """
    _refuse(cpa, now)
    result = _cache.get(cpa, exchange)
    if result is None:
        result = _compute(cpa, exchange)
        _cache.put(cpa, exchange, result)
    if isinstance(result, _Refusal):
        raise AgreementRefused(result.message, reason=result.reason, cpaid=cpa.cpaid)
    if reliable_messaging_methods:
        method = reliable_messaging_methods.get(result.sending_channel_id)
        if method is not None and method is not result.reliable_messaging_method:
            result = dataclasses.replace(result, reliable_messaging_method=method)
    rm = result.reliable_messaging
    if first_resend_timeouts and rm is not None:
        override = first_resend_timeouts.get(result.sending_channel_id)
        if override is not None:
            wait = at_least_retry_interval(XsDuration.from_timedelta(override), rm.retry_interval)
            if wait != rm.first_resend_timeout:
                rm = dataclasses.replace(rm, first_resend_timeout=wait)
                return dataclasses.replace(result, reliable_messaging=rm)
    return result


def at_least_retry_interval(wait: XsDuration, retry_interval: XsDuration | None) -> XsDuration:
    """The MSH's wait before the first resend, never shorter than the agreement's RetryInterval: ebMS2 §6.4.4
    "RetryInterval applies to the time between sending of the original message and the first retry as well
    as the time between retries" (the minimum a Sending MSH SHOULD wait)."""
    if retry_interval is None:
        return wait
    # A RetryInterval in months is longer than any wait the MSH setting (seconds) can give.
    if not retry_interval.is_fixed_length:
        return retry_interval
    return wait if wait.to_timedelta() >= retry_interval.to_timedelta() else retry_interval
