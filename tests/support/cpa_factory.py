"""Build small CPA model objects for unit tests, without the loader.

:func:`make_cpa` makes a two-party agreement: party A (``Buyer``) can send ``NewOrder`` of the ordering
service and receive ``OrderResponse``; party B (``Seller``) the reverse. Each party has one business
channel and one default MSH channel; every value the decision code reads is a keyword argument.
:func:`make_envelope` builds a received message header addressed from A to B.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from cpa.duration import XsDuration
from cpa.model import (
    ActionBinding,
    Certificate,
    CollaborationProtocolAgreement,
    CollaborationRole,
    ConversationConstraints,
    DeliveryChannel,
    DigitalEnvelope,
    DocExchange,
    EbxmlBinding,
    Endpoint,
    EndpointType,
    MessageOrderSemantics,
    MessagingCharacteristics,
    NonRepudiation,
    PartyId,
    PartyInfo,
    PerMessage,
    ReliableMessaging,
    SecurityDetails,
    ServiceBinding,
    Status,
    SyncReplyMode,
    Transport,
    TransportReceiver,
    TransportSecurity,
    TransportSender,
)
from msh.ebms import model as m
from msh.ebms.namespaces import ACTOR_TO_PARTY_MSH

A_ID = PartyId("123456789", "urn:duns")
B_ID = PartyId("987654321", "urn:duns")
SERVICE = "urn:example:services:ordering"
START = datetime(2025, 1, 1, tzinfo=UTC)
END = datetime(2027, 1, 1, tzinfo=UTC)
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
RSA_SHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
SHA256 = "http://www.w3.org/2001/04/xmlenc#sha256"
AES128 = "http://www.w3.org/2001/04/xmlenc#aes128-cbc"


def xs(value: timedelta | XsDuration) -> XsDuration:
    """``value`` as an xs:duration (a timedelta is a fixed length; an XsDuration may count months)."""
    return value if isinstance(value, XsDuration) else XsDuration.from_timedelta(value)


def cert(name: str) -> Certificate:
    """A named certificate with placeholder DER bytes (nothing here parses them)."""
    return Certificate(name, (name.encode(),))


def channel(
    prefix: str,
    *,
    channel_id: str | None = None,
    endpoint: str | None = None,
    endpoint_type: EndpointType = EndpointType.ALL_PURPOSE,
    endpoints: tuple[Endpoint, ...] | None = None,
    https: bool = False,
    sync_reply_mode: SyncReplyMode = SyncReplyMode.NONE,
    ack_requested: PerMessage = PerMessage.ALWAYS,
    ack_signature_requested: PerMessage = PerMessage.NEVER,
    duplicate_elimination: PerMessage = PerMessage.ALWAYS,
    actor: str | None = ACTOR_TO_PARTY_MSH,
    retries: int | None = 3,
    retry_interval: timedelta | XsDuration = timedelta(minutes=10),
    message_order: MessageOrderSemantics = MessageOrderSemantics.NOT_GUARANTEED,
    persist_duration: timedelta | XsDuration | None = timedelta(hours=1),
    sender_persist_duration: timedelta | XsDuration | None = None,
    signing: bool = False,
    receiver_encryption: bool = False,
    sender_encryption: bool = False,
) -> DeliveryChannel:
    """One party's DeliveryChannel with its Transport and DocExchange (``retries=None``: no RM).

    Durations are timedeltas (fixed lengths) or XsDurations (which may count months)."""
    host = prefix.lower()
    scheme = "https" if https else "http"
    uri = endpoint or f"{scheme}://{host}.example:8443/msh"
    trust = SecurityDetails(f"{prefix}_TLS", (cert(f"{prefix}_Server"), cert(f"{prefix}_Client")))
    client = TransportSecurity("TLS", "1.2", cert(f"{prefix}_Client"), trust) if https else None
    server = TransportSecurity("TLS", "1.2", cert(f"{prefix}_Server"), trust) if https else None
    transport = Transport(
        f"{prefix}_transport",
        TransportSender("HTTP", "1.1", client_security=client),
        TransportReceiver("HTTP", "1.1", endpoints or (Endpoint(uri, endpoint_type),), server_security=server),
    )
    rm = ReliableMessaging(retries, xs(retry_interval), message_order) if retries is not None else None
    signer = NonRepudiation(
        "http://www.w3.org/2000/09/xmldsig#", SHA256, RSA_SHA256, certificate=cert(f"{prefix}_Sign")
    )
    sender = EbxmlBinding(
        "2.0",
        reliable_messaging=rm,
        persist_duration=None if sender_persist_duration is None else xs(sender_persist_duration),
        non_repudiation=signer if signing else None,
        digital_envelope=(
            DigitalEnvelope("XMLENC", "1.0", AES128, security_details=SecurityDetails(f"{prefix}_Enc"))
            if sender_encryption
            else None
        ),
    )
    receiver = EbxmlBinding(
        "2.0",
        reliable_messaging=rm,
        persist_duration=None if persist_duration is None else xs(persist_duration),
        digital_envelope=(
            DigitalEnvelope("XMLENC", "1.0", AES128, certificate=cert(f"{prefix}_Encrypt"))
            if receiver_encryption
            else None
        ),
    )
    return DeliveryChannel(
        channel_id or f"{prefix}_channel",
        transport,
        DocExchange(f"{prefix}_docex", sender, receiver),
        MessagingCharacteristics(sync_reply_mode, ack_requested, ack_signature_requested, duplicate_elimination, actor),
    )


def party(
    prefix: str,
    *,
    name: str,
    ids: tuple[PartyId, ...],
    role: str,
    sends: tuple[str, ...],
    receives: tuple[str, ...],
    business: DeliveryChannel,
    default_msh: DeliveryChannel,
    service: str = SERVICE,
    service_type: str | None = None,
    extra_roles: tuple[CollaborationRole, ...] = (),
) -> PartyInfo:
    """One PartyInfo with one CollaborationRole binding ``service`` to ``business``."""
    binding = ServiceBinding(
        service,
        service_type,
        can_send=tuple(ActionBinding(f"{prefix}_S_{a}", a, "pkg", (business,)) for a in sends),
        can_receive=tuple(ActionBinding(f"{prefix}_R_{a}", a, "pkg", (business,)) for a in receives),
    )
    return PartyInfo(
        name,
        ids,
        (CollaborationRole("urn:example:process", "1.0", role, binding), *extra_roles),
        (),
        (),
        (business, default_msh),
        default_msh,
        "MshSignalPackage",
    )


def make_cpa(
    *,
    cpaid: str = "cpa-a-b",
    status: Status = Status.AGREED,
    start: datetime = START,
    end: datetime = END,
    a_ids: tuple[PartyId, ...] = (A_ID,),
    b_ids: tuple[PartyId, ...] = (B_ID,),
    a_role: str = "Buyer",
    b_role: str = "Seller",
    service: str = SERVICE,
    service_type: str | None = None,
    a_sends: tuple[str, ...] = ("NewOrder",),
    b_sends: tuple[str, ...] = ("OrderResponse",),
    a_receives: tuple[str, ...] | None = None,
    b_receives: tuple[str, ...] | None = None,
    a_channel: DeliveryChannel | None = None,
    b_channel: DeliveryChannel | None = None,
    a_msh: DeliveryChannel | None = None,
    b_msh: DeliveryChannel | None = None,
    a_extra_roles: tuple[CollaborationRole, ...] = (),
    b_extra_roles: tuple[CollaborationRole, ...] = (),
    conversation_constraints: ConversationConstraints | None = None,
    **channel_options: object,
) -> CollaborationProtocolAgreement:
    """A two-party agreement; ``channel_options`` go to :func:`channel` for both business channels."""
    a_business = a_channel or channel("A", **channel_options)  # type: ignore[arg-type]
    b_business = b_channel or channel("B", **channel_options)  # type: ignore[arg-type]
    best_effort = {"retries": None, "ack_requested": PerMessage.NEVER, "duplicate_elimination": PerMessage.NEVER}
    a_default = a_msh or channel("A", channel_id="A_msh", **best_effort)  # type: ignore[arg-type]
    b_default = b_msh or channel("B", channel_id="B_msh", **best_effort)  # type: ignore[arg-type]
    a = party(
        "A",
        name="Alpha",
        ids=a_ids,
        role=a_role,
        sends=a_sends,
        receives=b_sends if a_receives is None else a_receives,
        business=a_business,
        default_msh=a_default,
        service=service,
        service_type=service_type,
        extra_roles=a_extra_roles,
    )
    b = party(
        "B",
        name="Beta",
        ids=b_ids,
        role=b_role,
        sends=b_sends,
        receives=a_sends if b_receives is None else b_receives,
        business=b_business,
        default_msh=b_default,
        service=service,
        service_type=service_type,
        extra_roles=b_extra_roles,
    )
    return CollaborationProtocolAgreement(cpaid, "1", status, start, end, (a, b), conversation_constraints)


def make_envelope(
    *,
    cpaid: str = "cpa-a-b",
    from_ids: tuple[m.PartyId, ...] = (m.PartyId(A_ID.value, A_ID.type),),
    to_ids: tuple[m.PartyId, ...] = (m.PartyId(B_ID.value, B_ID.type),),
    from_role: str | None = "Buyer",
    to_role: str | None = "Seller",
    service: str = SERVICE,
    service_type: str | None = None,
    action: str = "NewOrder",
    timestamp: datetime = NOW,
    time_to_live: datetime | None = None,
    duplicate_elimination: bool = True,
    ack_requested: bool = True,
    ack_signed: bool = False,
    ack_actor: str | None = ACTOR_TO_PARTY_MSH,
    sync_reply: bool = False,
    message_order: bool = False,
) -> m.Envelope:
    """A received message from A to B; the defaults match :func:`make_cpa`'s defaults (no issue)."""
    header = m.MessageHeader(
        from_party=m.Party(from_ids, from_role),
        to_party=m.Party(to_ids, to_role),
        cpa_id=cpaid,
        conversation_id="conv-1",
        service=m.Service(service, service_type),
        action=action,
        message_data=m.MessageData("msg-1@a.example", timestamp, time_to_live=time_to_live),
        duplicate_elimination=duplicate_elimination,
    )
    return m.Envelope(
        message_header=header,
        ack_requested=(m.AckRequested(signed=ack_signed, actor=ack_actor),) if ack_requested else (),
        sync_reply=m.SyncReply() if sync_reply else None,
        message_order=m.MessageOrder(0, m.SequenceStatus.RESET) if message_order else None,
    )


def with_status(cpa: CollaborationProtocolAgreement, status: Status) -> CollaborationProtocolAgreement:
    """``cpa`` with another Status."""
    return replace(cpa, status=status)
