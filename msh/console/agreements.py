"""What the agreements page shows of each CPA: its validity window and status, each party's delivery channels
(endpoints, transport, reliability, signing) and certificates (subject, expiry), read from the CPA model."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from cryptography import x509

from cpa.model import CollaborationProtocolAgreement, DeliveryChannel, PartyInfo, Status

__all__ = ["AgreementView", "CertificateView", "ChannelView", "PartyView", "agreement_views"]


@dataclass(frozen=True, slots=True)
class CertificateView:
    """A certificate the agreement names: its subject and when it expires (``days`` left at ``now``)."""

    cert_id: str
    subject: str
    not_after: datetime | None
    days: int | None

    @property
    def warning(self) -> bool:
        return self.days is not None and self.days < 30


@dataclass(frozen=True, slots=True)
class ChannelView:
    """A delivery channel: where and how messages go (CPP/A 2.0 §8.4.7)."""

    channel_id: str
    endpoints: tuple[str, ...]
    transport: str
    reliability: str
    signing: str
    characteristics: str


@dataclass(frozen=True, slots=True)
class PartyView:
    name: str
    party_ids: tuple[str, ...]
    ours: bool
    channels: tuple[ChannelView, ...]
    certificates: tuple[CertificateView, ...]


@dataclass(frozen=True, slots=True)
class AgreementView:
    cpaid: str
    status: str
    start: datetime
    end: datetime
    state: str
    """in force, not yet in force, expired, or not agreed (CPP/A 2.0 §9.4.1, §9.4.2)."""
    source: str
    signed: bool
    parties: tuple[PartyView, ...]
    warnings: tuple[str, ...]


def _certificate(cert_id: str, der: bytes | None, now: datetime) -> CertificateView:
    if der is None:
        return CertificateView(cert_id, "(no X.509 certificate in the CPA)", None, None)
    try:
        cert = x509.load_der_x509_certificate(der)
    except ValueError as exc:
        return CertificateView(cert_id, f"(unreadable: {exc})", None, None)
    not_after = cert.not_valid_after_utc
    return CertificateView(cert_id, cert.subject.rfc4514_string(), not_after, (not_after - now).days)


def _short(uri: str) -> str:
    """An algorithm URI by its fragment (``...xmldsig-more#rsa-sha256`` -> ``rsa-sha256``)."""
    return uri.rsplit("#", 1)[-1] if "#" in uri else uri


def _channel(channel: DeliveryChannel) -> ChannelView:
    transport = channel.transport
    receiver, sender = transport.receiver, transport.sender
    endpoints = tuple(f"{e.uri} ({e.type.value})" for e in receiver.endpoints) if receiver else ()
    protocols = []
    if receiver is not None:
        tls = " over TLS" if receiver.server_security is not None else ""
        protocols.append(f"receives {receiver.protocol} {receiver.protocol_version or ''}".rstrip() + tls)
    if sender is not None:
        client = ", client certificate" if sender.client_security and sender.client_security.certificate else ""
        protocols.append(f"sends {sender.protocol} {sender.protocol_version or ''}".rstrip() + client)
    binding = channel.doc_exchange.receiver_binding or channel.doc_exchange.sender_binding
    rm = binding.reliable_messaging if binding else None
    reliability = "best effort (no ReliableMessaging)"
    if rm is not None:  # CPP/A 2.0 §8.4.38
        reliability = f"{rm.retries} retries every {rm.retry_interval}, order {rm.message_order_semantics.value}"
        if binding is not None and binding.persist_duration is not None:
            reliability += f", persist {binding.persist_duration}"
    nr = channel.doc_exchange.sender_binding.non_repudiation if channel.doc_exchange.sender_binding else None
    signing = "not signed" if nr is None else f"signed: {_short(nr.signature_algorithm)} ({_short(nr.hash_function)})"
    mc = channel.messaging_characteristics  # CPP/A 2.0 §8.4.8
    characteristics = (
        f"ackRequested {mc.ack_requested.value}, ackSignatureRequested {mc.ack_signature_requested.value}, "
        f"duplicateElimination {mc.duplicate_elimination.value}, syncReplyMode {mc.sync_reply_mode.value}"
    )
    return ChannelView(
        channel.channel_id, endpoints, "; ".join(protocols) or "—", reliability, signing, characteristics
    )


def _party(info: PartyInfo, ours: set[str], now: datetime) -> PartyView:
    ids = tuple(f"{p.value} ({p.type})" if p.type else p.value for p in info.party_ids)
    certificates = tuple(_certificate(c.cert_id, c.x509[0] if c.x509 else None, now) for c in info.certificates)
    return PartyView(
        info.party_name,
        ids,
        any(p.value in ours for p in info.party_ids),
        tuple(_channel(c) for c in info.delivery_channels),
        certificates,
    )


def _state(cpa: CollaborationProtocolAgreement, now: datetime) -> str:
    if cpa.status is not Status.AGREED and cpa.status is not Status.SIGNED:
        return f"not agreed ({cpa.status.value})"  # CPP/A 2.0 §9.4.1
    if now < cpa.start:
        return "not yet in force"  # CPP/A 2.0 §9.4.2: Start
    if now > cpa.end:
        return "expired"  # CPP/A 2.0 §9.4.2: End
    return "in force"


def agreement_views(
    agreements: list[CollaborationProtocolAgreement], our_party: str, now: datetime
) -> list[AgreementView]:
    """The agreements, sorted by CPAId, as the page shows them at ``now``."""
    ours = {our_party}
    return [
        AgreementView(
            cpa.cpaid,
            cpa.status.value,
            cpa.start,
            cpa.end,
            _state(cpa, now),
            cpa.source,
            cpa.signed,
            tuple(_party(p, ours, now) for p in cpa.party_infos),
            tuple(str(w) for w in cpa.warnings),
        )
        for cpa in sorted(agreements, key=lambda c: c.cpaid)
    ]
