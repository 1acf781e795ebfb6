"""What an agreement says about message security, ready for signing, verifying and encrypting (CPP/A 2.0
§8.4.40 SenderNonRepudiation, §8.4.46 ReceiverNonRepudiation, §8.4.44/§8.4.50 Sender/ReceiverDigitalEnvelope).

* :func:`signing_policy`: how the sender signs on a route (algorithms, its signing certificate).
* :func:`verification_policy` and :func:`verify_message`: whether a received message must be signed, with
  which certificate (the From party's SigningCertificateRef: never whatever KeyInfo the message carries,
  unless that certificate chains to one the From party's PartyInfo names, :mod:`cpa.trust`), and to which
  trust anchors it must chain (the receiver's SigningSecurityDetailsRef).
* :func:`encryption_policy`: whether payloads are encrypted, with which algorithm, for which certificate.
* :func:`check_agreement_security`: an agreement asking for what the MSH does not implement (a digital
  envelope other than XMLENC, a non-repudiation protocol other than XML-DSig) is refused when it is loaded
  for use, naming the element, rather than at its first message.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from cryptography import x509

from cpa.model import Certificate, CollaborationProtocolAgreement, DeliveryChannel, DigitalEnvelope, NonRepudiation
from cpa.resolve import PartyKey, SendingParameters, party_keys
from cpa.trust import load_certificate, party_certificate_problem
from msh.errors import ConfigurationError
from msh.security.algorithms import (
    DigestAlgorithm,
    EncryptionAlgorithm,
    SignatureAlgorithm,
    digest_algorithm,
    encryption_algorithm,
    signature_algorithm,
)
from msh.security.library import Payload
from msh.security.profile import first_signature
from msh.security.verifying import Verification, keyinfo_certificates, verify

if TYPE_CHECKING:
    from lxml import etree

__all__ = [
    "XMLDSIG_PROTOCOL",
    "EncryptionPolicy",
    "SigningPolicy",
    "VerificationPolicy",
    "agreement_security_problems",
    "check_agreement_security",
    "encryption_policy",
    "signing_policy",
    "verification_policy",
    "verify_message",
]

XMLDSIG_PROTOCOL = "http://www.w3.org/2000/09/xmldsig#"
"""CPP/A 2.0 §8.4.41 NonRepudiationProtocol of XML-DSig, the one ebMS 2.0 signs with (ebMS2 §4.1.4.1)."""
_XMLENC_PROTOCOLS = frozenset({"xmlenc", "http://www.w3.org/2001/04/xmlenc#"})


def _certificates(certificate: Certificate | None) -> tuple[x509.Certificate, ...]:
    if certificate is None:
        return ()
    found = (load_certificate(der) for der in certificate.x509[:1])
    return tuple(c for c in found if c is not None)


def _all_certificates(certificates: Sequence[Certificate]) -> tuple[x509.Certificate, ...]:
    found = (load_certificate(der) for cert in certificates for der in cert.x509)
    return tuple(dict.fromkeys(c for c in found if c is not None))


def _channels(cpa: CollaborationProtocolAgreement) -> Iterator[tuple[str, DeliveryChannel]]:
    for info in cpa.party_infos:
        for channel in (*info.delivery_channels, info.default_msh_channel):
            yield info.party_name, channel


def _channel(cpa: CollaborationProtocolAgreement, channel_id: str | None) -> DeliveryChannel | None:
    return next((c for _, c in _channels(cpa) if c.channel_id == channel_id), None)


def _owner(cpa: CollaborationProtocolAgreement, channel_id: str | None) -> tuple[PartyKey, ...]:
    for info in cpa.party_infos:
        if any(c.channel_id == channel_id for c in (*info.delivery_channels, info.default_msh_channel)):
            return party_keys(info)
    return ()


def _sender_nr(channel: DeliveryChannel | None) -> NonRepudiation | None:
    binding = channel.doc_exchange.sender_binding if channel is not None else None
    return binding.non_repudiation if binding is not None else None


def _receiver_nr(channel: DeliveryChannel | None) -> NonRepudiation | None:
    binding = channel.doc_exchange.receiver_binding if channel is not None else None
    return binding.non_repudiation if binding is not None else None


# ---------------------------------------------------------------------------------------------- signing


@dataclass(frozen=True, slots=True)
class SigningPolicy:
    """How messages on a route are signed: the agreement's SignatureAlgorithm and HashFunction, and the
    signing certificate it names for the sender (None when it names none)."""

    signature_algorithm: SignatureAlgorithm
    digest_algorithm: DigestAlgorithm
    certificate: x509.Certificate | None


def signing_policy(params: SendingParameters) -> SigningPolicy | None:
    """The signing of messages sent under ``params`` (its sending channel's SenderNonRepudiation, CPP/A 2.0
    §8.4.40), or None when they are not signed."""
    nr = params.doc_exchange.signing
    if nr is None:
        return None
    certificates = _certificates(nr.certificate)
    return SigningPolicy(
        signature_algorithm(nr.signature_algorithm),
        digest_algorithm(nr.hash_function),
        certificates[0] if certificates else None,
    )


# ------------------------------------------------------------------------------------------- verifying


@dataclass(frozen=True, slots=True)
class VerificationPolicy:
    """What a received message's signature is checked against.

    ``required``: the sending channel's DocExchange has a SenderNonRepudiation (a missing signature is a
    SecurityFailure). ``certificates``: the From party's signing certificate(s) named in the agreement.
    ``anchors``: the trust anchors of the receiver's SigningSecurityDetailsRef (None: the certificates are
    trusted as the agreement names them, their validity still checked). The algorithm sets are the
    agreement's (None: any the MSH implements).
    """

    cpa: CollaborationProtocolAgreement
    from_party: tuple[PartyKey, ...]
    required: bool
    certificates: tuple[x509.Certificate, ...]
    anchors: tuple[x509.Certificate, ...] | None
    signature_algorithms: frozenset[str] | None
    digest_algorithms: frozenset[str] | None


def verification_policy(
    cpa: CollaborationProtocolAgreement, sending_channel_id: str | None, receiving_channel_id: str | None
) -> VerificationPolicy:
    """The policy for a message the agreement ``cpa`` carries from ``sending_channel_id`` (the From party's
    channel, as :func:`cpa.check.check` found it) to ``receiving_channel_id`` (ours)."""
    sending = _channel(cpa, sending_channel_id)
    nr = _sender_nr(sending)
    receiver_nr = _receiver_nr(_channel(cpa, receiving_channel_id))
    from_party = _owner(cpa, sending_channel_id)
    certificates = _certificates(nr.certificate) if nr is not None else ()
    if not certificates and from_party:
        # No SigningCertificateRef: any certificate the From party's PartyInfo names (CPP/A 2.0 §8.4.33).
        info = next(i for i in cpa.party_infos if party_keys(i) == from_party)
        certificates = _all_certificates(info.certificates)
    details = receiver_nr.security_details if receiver_nr is not None else None
    anchors = _all_certificates(details.trust_anchors) if details is not None and details.trust_anchors else None
    return VerificationPolicy(
        cpa,
        from_party,
        nr is not None,
        certificates,
        anchors,
        frozenset({nr.signature_algorithm}) if nr is not None else None,
        frozenset({nr.hash_function}) if nr is not None else None,
    )


def verify_message(
    soap: bytes,
    payloads: Mapping[str, Payload],
    policy: VerificationPolicy,
    *,
    at: datetime,
    locations: Mapping[str, str] | None = None,
    parsed: etree._Element | None = None,
) -> Verification | None:
    """Verify a received message under ``policy`` at ``at``; its payloads decrypted first if they were
    encrypted. None when the message is not signed and the agreement does not require it, or is signed on
    a route the agreement does not sign and names no certificate for; else the :class:`Verification`
    (which payload parts the signature covers: :attr:`~Verification.unsigned_payloads`). ``locations``: the
    Content-Location of each part that has one, by Content-ID (:func:`~msh.security.verifying.verify`).
    ``parsed``: ``soap`` as :func:`msh.safexml.parse_xml` parsed it on receipt (read only here; e.g.
    :attr:`msh.ebms.message.EbxmlMessage.root`), so that it is not parsed a second time.

    The certificates tried are the agreement's, and those of the message's KeyInfo that chain to a
    certificate the From party's PartyInfo names (:func:`cpa.trust.party_certificate_problem`). Raises
    :class:`~msh.errors.SecurityError` (SecurityFailure) when a required signature is missing, or a
    signature does not verify (see :func:`~msh.security.verifying.verify`).
    """
    from msh.safexml import XmlLimits, parse_xml

    root = (
        parsed
        if parsed is not None
        else parse_xml(soap, what="SOAP envelope", limits=XmlLimits(max_bytes=max(len(soap), 1)))
    )
    signature = first_signature(root)
    if signature is None and not policy.required:
        return None
    carried = keyinfo_certificates(signature) if signature is not None else ()
    bound = [
        c
        for c in carried
        if c not in policy.certificates
        and policy.from_party
        and party_certificate_problem(policy.cpa, policy.from_party, c, at=at, intermediates=carried) is None
    ]
    trusted = (*policy.certificates, *bound)
    if not trusted and not policy.required:
        return None
    return verify(
        soap,
        payloads,
        trusted,
        anchors=policy.anchors,
        intermediates=carried,
        at=at,
        signature_algorithms=policy.signature_algorithms,
        digest_algorithms=policy.digest_algorithms,
        locations=locations,
        parsed=root,
    )


# ------------------------------------------------------------------------------------------ encryption


@dataclass(frozen=True, slots=True)
class EncryptionPolicy:
    """Payload encryption on a route: the agreement's EncryptionAlgorithm and the receiver's encryption
    certificate (its ReceiverDigitalEnvelope's EncryptionCertificateRef; None when it names none)."""

    algorithm: EncryptionAlgorithm
    certificate: x509.Certificate | None


def _envelope(channel: DeliveryChannel | None, side: str) -> DigitalEnvelope | None:
    if channel is None:
        return None
    binding = channel.doc_exchange.sender_binding if side == "sender" else channel.doc_exchange.receiver_binding
    return binding.digital_envelope if binding is not None else None


def encryption_policy(
    cpa: CollaborationProtocolAgreement, sending_channel_id: str | None, receiving_channel_id: str | None
) -> EncryptionPolicy | None:
    """Whether payloads from ``sending_channel_id`` to ``receiving_channel_id`` are encrypted: when the
    sending channel's DocExchange has a SenderDigitalEnvelope (CPP/A 2.0 §8.4.44), with its algorithm, for
    the certificate of the receiving channel's ReceiverDigitalEnvelope (§8.4.50). None: not encrypted."""
    sender = _envelope(_channel(cpa, sending_channel_id), "sender")
    if sender is None:
        return None
    receiver = _envelope(_channel(cpa, receiving_channel_id), "receiver")
    certificates = _certificates(receiver.certificate) if receiver is not None else ()
    return EncryptionPolicy(
        encryption_algorithm(sender.encryption_algorithm), certificates[0] if certificates else None
    )


# ------------------------------------------------------------------------------------ agreement check


def agreement_security_problems(cpa: CollaborationProtocolAgreement) -> list[str]:
    """What in ``cpa`` asks for message security the MSH does not implement, one line per element."""
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for party, channel in _channels(cpa):
        exchange = channel.doc_exchange
        for side, binding in (("Sender", exchange.sender_binding), ("Receiver", exchange.receiver_binding)):
            if binding is None or (exchange.doc_exchange_id, side) in seen:
                continue
            seen.add((exchange.doc_exchange_id, side))
            where = f"agreement {cpa.cpaid}, {party}, DocExchange {exchange.doc_exchange_id}, ebXML{side}Binding"
            envelope = binding.digital_envelope
            if envelope is not None and envelope.protocol.strip().lower() not in _XMLENC_PROTOCOLS:
                version = f" version {envelope.protocol_version}" if envelope.protocol_version else ""
                problems.append(
                    f"{where}/{side}DigitalEnvelope/DigitalEnvelopeProtocol {envelope.protocol!r}{version} is not "
                    "implemented: the MSH encrypts payloads with XMLENC (XML Encryption) only; change the "
                    f"agreement to XMLENC or leave out the {side}DigitalEnvelope"
                )
            nr = binding.non_repudiation
            if nr is not None and nr.protocol.strip() != XMLDSIG_PROTOCOL:
                problems.append(
                    f"{where}/{side}NonRepudiation/NonRepudiationProtocol {nr.protocol!r} is not implemented: "
                    f"ebXML messages are signed with XML-DSig ({XMLDSIG_PROTOCOL}, ebMS2 §4.1.4.1)"
                )
    return problems


def check_agreement_security(cpa: CollaborationProtocolAgreement) -> None:
    """Refuse ``cpa`` for use when it asks for message security the MSH does not implement: a
    :class:`~msh.errors.ConfigurationError` naming each element (:func:`agreement_security_problems`)."""
    problems = agreement_security_problems(cpa)
    if problems:
        raise ConfigurationError("; ".join(problems))
