"""Typed, immutable model of a CPP/CPA 2.0 agreement (OASIS ebXML CPP/A 2.0, the ``tp:`` namespace).

Only what the MSH acts on is modelled, in the specification's words; every IDREF is already resolved by
the loader, so a :class:`DeliveryChannel` holds its :class:`Transport` and :class:`DocExchange` objects,
not their ids. Durations are :class:`~cpa.duration.XsDuration` as written (months and years included: a
month has no fixed length, so an instant is computed by adding the duration to the instant it starts
from, :meth:`~cpa.duration.XsDuration.add_to`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from cpa.duration import XsDuration
from cpa.errors import CpaProblem

__all__ = [
    "AccessAuthentication",
    "ActionBinding",
    "Certificate",
    "CollaborationProtocolAgreement",
    "CollaborationRole",
    "CompositePart",
    "ConversationConstraints",
    "DeliveryChannel",
    "DigitalEnvelope",
    "DocExchange",
    "EbxmlBinding",
    "Endpoint",
    "EndpointType",
    "MessageOrderSemantics",
    "MessagingCharacteristics",
    "NonRepudiation",
    "PartyId",
    "PartyInfo",
    "Packaging",
    "PerMessage",
    "ReliableMessaging",
    "SecurityDetails",
    "ServiceBinding",
    "SimplePart",
    "Status",
    "SyncReplyMode",
    "Transport",
    "TransportReceiver",
    "TransportSecurity",
    "TransportSender",
]

CPPA_NS = "http://www.oasis-open.org/committees/ebxml-cppa/schema/cpp-cpa-2_0.xsd"


class Status(StrEnum):
    """CPP/A 2.0 §9.4.1: Status@value of an agreement."""

    AGREED = "agreed"
    SIGNED = "signed"
    PROPOSED = "proposed"


class SyncReplyMode(StrEnum):
    """CPP/A 2.0 §8.4.8.1: MessagingCharacteristics@syncReplyMode."""

    MSH_SIGNALS_ONLY = "mshSignalsOnly"
    SIGNALS_ONLY = "signalsOnly"
    SIGNALS_AND_RESPONSE = "signalsAndResponse"
    RESPONSE_ONLY = "responseOnly"
    NONE = "none"


class PerMessage(StrEnum):
    """CPP/A 2.0 §8.4.8: the perMessageCharacteristics.type of ackRequested, ackSignatureRequested and
    duplicateElimination: ``always`` and ``never`` bind the header, ``perMessage`` lets it decide."""

    ALWAYS = "always"
    NEVER = "never"
    PER_MESSAGE = "perMessage"


class MessageOrderSemantics(StrEnum):
    """CPP/A 2.0 §8.4.38: ReliableMessaging/MessageOrderSemantics."""

    GUARANTEED = "Guaranteed"
    NOT_GUARANTEED = "NotGuaranteed"


class EndpointType(StrEnum):
    """CPP/A 2.0 §8.4.29: Endpoint@type."""

    ALL_PURPOSE = "allPurpose"
    REQUEST = "request"
    RESPONSE = "response"
    ERROR = "error"
    LOGIN = "login"


@dataclass(frozen=True, slots=True)
class PartyId:
    """CPP/A 2.0 §8.4.2: a PartyId with its optional type (matches ebMS2 §3.1.1.1 PartyId)."""

    value: str
    type: str | None = None


@dataclass(frozen=True, slots=True)
class Certificate:
    """CPP/A 2.0 §8.4.33: a named certificate; ``x509`` holds the DER bytes of each ds:X509Certificate in
    its ds:KeyInfo (the first is the party's own)."""

    cert_id: str
    x509: tuple[bytes, ...] = ()


@dataclass(frozen=True, slots=True)
class SecurityDetails:
    """CPP/A 2.0 §8.4.35: trust anchors (certificates) a party accepts, and its security policy."""

    security_id: str
    trust_anchors: tuple[Certificate, ...] = ()


@dataclass(frozen=True, slots=True)
class TransportSecurity:
    """CPP/A 2.0 §8.4.26/§8.4.31: TLS of a TransportSender (client side) or TransportReceiver (server
    side): protocol and version, our certificate, and the security details the peer's must chain to."""

    protocol: str
    protocol_version: str | None
    certificate: Certificate | None
    peer_security: SecurityDetails | None


@dataclass(frozen=True, slots=True)
class AccessAuthentication:
    """CPP/A 2.0 §8.4.25: basic or digest HTTP authentication required by the receiver."""

    schemes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """CPP/A 2.0 §8.4.29: where the receiver takes messages of ``type``."""

    uri: str
    type: EndpointType = EndpointType.ALL_PURPOSE


@dataclass(frozen=True, slots=True)
class TransportSender:
    """CPP/A 2.0 §8.4.24."""

    protocol: str
    protocol_version: str | None = None
    access_authentication: AccessAuthentication | None = None
    client_security: TransportSecurity | None = None


@dataclass(frozen=True, slots=True)
class TransportReceiver:
    """CPP/A 2.0 §8.4.28."""

    protocol: str
    protocol_version: str | None = None
    endpoints: tuple[Endpoint, ...] = ()
    access_authentication: AccessAuthentication | None = None
    server_security: TransportSecurity | None = None

    def endpoint(self, kind: EndpointType = EndpointType.REQUEST) -> Endpoint | None:
        """The endpoint for ``kind``, else the allPurpose one (CPP/A 2.0 §8.4.29)."""
        for e in self.endpoints:
            if e.type is kind:
                return e
        for e in self.endpoints:
            if e.type is EndpointType.ALL_PURPOSE:
                return e
        return None


@dataclass(frozen=True, slots=True)
class Transport:
    """CPP/A 2.0 §8.4.23."""

    transport_id: str
    sender: TransportSender | None = None
    receiver: TransportReceiver | None = None


@dataclass(frozen=True, slots=True)
class ReliableMessaging:
    """CPP/A 2.0 §8.4.37: Retries, RetryInterval (never negative) and MessageOrderSemantics."""

    retries: int
    retry_interval: XsDuration
    message_order_semantics: MessageOrderSemantics = MessageOrderSemantics.NOT_GUARANTEED


@dataclass(frozen=True, slots=True)
class NonRepudiation:
    """CPP/A 2.0 §8.4.40/§8.4.46: how messages are signed: protocol, hash and signature algorithm URIs,
    and the signing certificate (sender side) or the security details it must chain to (receiver side)."""

    protocol: str
    hash_function: str
    signature_algorithm: str
    signature_algorithm_oid: str | None = None
    certificate: Certificate | None = None
    security_details: SecurityDetails | None = None


@dataclass(frozen=True, slots=True)
class DigitalEnvelope:
    """CPP/A 2.0 §8.4.44/§8.4.50: payload encryption: protocol, algorithm, and key."""

    protocol: str
    protocol_version: str | None
    encryption_algorithm: str
    certificate: Certificate | None = None
    security_details: SecurityDetails | None = None


@dataclass(frozen=True, slots=True)
class EbxmlBinding:
    """CPP/A 2.0 §8.4.36/§8.4.45: ebXMLSenderBinding or ebXMLReceiverBinding (PersistDuration never
    negative)."""

    version: str
    reliable_messaging: ReliableMessaging | None = None
    persist_duration: XsDuration | None = None
    non_repudiation: NonRepudiation | None = None
    digital_envelope: DigitalEnvelope | None = None
    namespaces_supported: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DocExchange:
    """CPP/A 2.0 §8.4.35."""

    doc_exchange_id: str
    sender_binding: EbxmlBinding | None = None
    receiver_binding: EbxmlBinding | None = None


@dataclass(frozen=True, slots=True)
class MessagingCharacteristics:
    """CPP/A 2.0 §8.4.8: how messages on a channel behave (defaults are the schema's)."""

    sync_reply_mode: SyncReplyMode = SyncReplyMode.NONE
    ack_requested: PerMessage = PerMessage.PER_MESSAGE
    ack_signature_requested: PerMessage = PerMessage.PER_MESSAGE
    duplicate_elimination: PerMessage = PerMessage.PER_MESSAGE
    actor: str | None = None


@dataclass(frozen=True, slots=True)
class DeliveryChannel:
    """CPP/A 2.0 §8.4.7: a Transport and a DocExchange with their MessagingCharacteristics."""

    channel_id: str
    transport: Transport
    doc_exchange: DocExchange
    messaging_characteristics: MessagingCharacteristics = field(default_factory=MessagingCharacteristics)


@dataclass(frozen=True, slots=True)
class ActionBinding:
    """CPP/A 2.0 §8.4.15: ThisPartyActionBinding under CanSend or CanReceive.

    ``business_transaction_characteristics`` are the BusinessTransactionCharacteristics attributes as
    written (local name, value): the MSH does not act on them, so their durations (``timeToPerform``...)
    are kept as text, any legal xs:duration (months included).
    """

    id: str
    action: str
    package_id: str
    channels: tuple[DeliveryChannel, ...]
    business_transaction_characteristics: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ServiceBinding:
    """CPP/A 2.0 §8.4.11: a Service with the actions this party can send and receive."""

    service: str
    service_type: str | None
    can_send: tuple[ActionBinding, ...] = ()
    can_receive: tuple[ActionBinding, ...] = ()


@dataclass(frozen=True, slots=True)
class CollaborationRole:
    """CPP/A 2.0 §8.4.4: a role in a business process, with its service binding."""

    process_specification: str
    process_specification_version: str | None
    role: str
    service_binding: ServiceBinding
    role_href: str | None = None


@dataclass(frozen=True, slots=True)
class PartyInfo:
    """CPP/A 2.0 §8.4.1: one party of the agreement."""

    party_name: str
    party_ids: tuple[PartyId, ...]
    collaboration_roles: tuple[CollaborationRole, ...]
    certificates: tuple[Certificate, ...]
    security_details: tuple[SecurityDetails, ...]
    delivery_channels: tuple[DeliveryChannel, ...]
    default_msh_channel: DeliveryChannel
    default_msh_package_id: str


@dataclass(frozen=True, slots=True)
class SimplePart:
    """CPP/A 2.0 §8.5.3: one MIME part of a package (e.g. the SOAP header container or a payload)."""

    id: str
    mime_type: str
    mime_parameters: str | None = None
    namespaces_supported: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CompositePart:
    """CPP/A 2.0 §8.5.4: a Composite (e.g. multipart/related) or an Encapsulation of parts, by id."""

    id: str
    mime_type: str
    constituents: tuple[str, ...]
    encapsulation: bool = False


@dataclass(frozen=True, slots=True)
class Packaging:
    """CPP/A 2.0 §8.5: how messages of an action are packaged: ProcessingCapabilities and CompositeList
    (referenced by ThisPartyActionBinding@packageId and defaultMshPackageId); the constituents name the
    agreement's SimpleParts (or other composites) by id."""

    id: str
    parse: bool
    generate: bool
    composites: tuple[CompositePart, ...] = ()


@dataclass(frozen=True, slots=True)
class ConversationConstraints:
    """CPP/A 2.0 §9.4.4."""

    invocation_limit: int | None = None
    concurrent_conversations: int | None = None


@dataclass(frozen=True, slots=True)
class CollaborationProtocolAgreement:
    """CPP/A 2.0 §9.4: an agreement between exactly two parties.

    ``signed`` tells whether the document carried its own ds:Signature (which the loader verified).
    ``warnings`` are what the loader found worth telling but not worth refusing the agreement for (each a
    :class:`~cpa.errors.CpaProblem` of severity Warning), e.g. a ds:Signature left as an unfilled template,
    which makes the agreement load as unsigned.
    """

    cpaid: str
    version: str | None
    status: Status
    start: datetime
    end: datetime
    party_infos: tuple[PartyInfo, PartyInfo]
    conversation_constraints: ConversationConstraints | None = None
    signed: bool = False
    source: str = ""
    simple_parts: tuple[SimplePart, ...] = ()
    packagings: tuple[Packaging, ...] = ()
    warnings: tuple[CpaProblem, ...] = ()

    def packaging(self, package_id: str) -> Packaging | None:
        """The Packaging with ``package_id`` (an ActionBinding's or a party's defaultMshPackageId)."""
        return next((p for p in self.packagings if p.id == package_id), None)

    def is_valid_at(self, now: datetime) -> bool:
        """CPP/A 2.0 §9.4.2/§9.4.3: Start <= now < End."""
        return self.start <= now < self.end
