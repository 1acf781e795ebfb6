"""Message security in the running MSH (ebMS2 §4.1): the keys of the settings, applied where the agreement
asks for them.

* :func:`~msh.runtime.keys.load_keys` reads ``[security]``: the signing key and certificate, the
  decryption key (the signing key unless another is named), encrypted PEM opened with the passphrase from
  the environment variable the settings name.
* :func:`~msh.runtime.keys.agreement_problems`: an agreement that has us sign (a SenderNonRepudiation on a
  channel of ours) or encrypts payloads for us (a SenderDigitalEnvelope towards a channel of ours) while
  the settings give no key for it, or names another signing certificate for us than ours, is refused when
  it is loaded (:class:`~msh.runtime.msh.Msh` construction), naming the agreement, the element and the
  setting: never at the first message.
* Outbound (:meth:`MessageSecurity.seal`): the composed SOAP part is signed (ebMS2 §4.1.3), then the
  payloads encrypted (§4.1.4.5: sign first), before the bytes are stored, so every resend sends the same
  signed bytes. Signals (:meth:`MessageSecurity.sign_signal`) are signed when the agreement's channel for
  them signs, or when a signed acknowledgment was asked for (§6.3.1.2).
* Inbound (:meth:`MessageSecurity.open`): after the agreement check, payloads are decrypted, then the
  signature verified with the From party's certificate from the agreement (:func:`verify_message`).
* Receipts (:meth:`MessageSecurity.receipt_verdict`): the sender's check of a signed acknowledgment
  against what it sent (§6.3.2.5).

Nothing here is done when the agreement asks for nothing: the policies are cached per channel pair, and
a message is parsed again only when it carries a signature or must.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from cryptography import x509

from cpa.check import CheckResult
from cpa.model import CollaborationProtocolAgreement, PerMessage
from cpa.registry import CpaRegistry
from cpa.resolve import AgreementRefused, Exchange, PartyKey, SendingParameters, party_keys
from msh.ebms.message import EbxmlMessage, ParseMode, parse_message
from msh.ebms.mime import AttachmentSpec, PartBody
from msh.ebms.mime.writer import write_package
from msh.ebms.model import Envelope
from msh.ebms.namespaces import ACTOR_NEXT_MSH, SERVICE_MSH, SOAP_ENV
from msh.ebms.namespaces import EB as _EB
from msh.engine.reliability import effective_actor
from msh.errors import ConfigurationError, ErrorCode, Issue, SecurityError, Severity
from msh.runtime.config.model import SecuritySettings
from msh.runtime.keys import Keys, agreement_problems, load_keys
from msh.security import (
    ENCRYPTED_CONTENT_TYPE,
    EncryptionPolicy,
    PrivateKey,
    SigningPolicy,
    VerificationPolicy,
    check_receipt,
    content_locations,
    decrypt_payload,
    encrypt_payload,
    encryption_policy,
    receipt_references,
    sign,
    signing_policy,
    verification_policy,
    verify_message,
)
from msh.security.algorithms import DigestAlgorithm, SignatureAlgorithm

__all__ = ["MessageSecurity", "Opened", "ReceiptVerdict"]

log = logging.getLogger("msh.runtime")

_SIGNATURE_MARK = b"Signature"
"""A SOAP part without these bytes carries no ds:Signature (checked before parsing it again)."""


@dataclass(frozen=True, slots=True)
class Opened:
    """A received message after :meth:`MessageSecurity.open`: the message (its payloads decrypted), the body
    to store (the received one, or a package rebuilt with the decrypted payloads: None when unchanged),
    whether a signature was verified, and the payload parts it does not cover."""

    message: EbxmlMessage
    body: tuple[bytes, str] | None
    verified: bool
    unsigned_payloads: tuple[str, ...] = ()
    """The Content-IDs of the payload parts a verified signature does not cover (ebMS2 §4.1.3)."""


@dataclass(frozen=True, slots=True)
class ReceiptVerdict:
    """The sender's check of an acknowledgment that was to be a signed receipt (ebMS2 §6.3.2.5):
    ``receipt`` the acknowledgment's bytes to keep as evidence when it holds, else ``issue`` says why not."""

    message_id: str
    receipt: bytes | None = None
    issue: Issue | None = None
    references: int = 0


def _security_issue(description: str, location: str) -> Issue:
    return Issue(ErrorCode.SECURITY_FAILURE, Severity.ERROR, description, location)


def _asks_security(cpa: CollaborationProtocolAgreement) -> bool:
    """Whether ``cpa`` signs or encrypts anything (CPP/A 2.0 §8.4.40-§8.4.50): a channel's SenderNonRepudiation
    (its messages are signed, and verified on receipt) or a DigitalEnvelope on either side. A
    ReceiverNonRepudiation alone asks for no key work: it names the trust anchors for verifying what the
    other side signs, which that side's SenderNonRepudiation asks for. A partner that signs although the
    agreement does not say so is still verified, on the event loop when its message is small (a decision of
    ours: docs/design.md §8)."""
    for info in cpa.party_infos:
        for channel in (*info.delivery_channels, info.default_msh_channel):
            sender, receiver = channel.doc_exchange.sender_binding, channel.doc_exchange.receiver_binding
            if sender is not None and (sender.non_repudiation or sender.digital_envelope):
                return True
            if receiver is not None and receiver.digital_envelope:
                return True
    return False


class MessageSecurity:
    """The MSH's keys applied as the agreements say (see the module docs)."""

    def __init__(
        self, settings: SecuritySettings, registry: CpaRegistry, party: PartyKey, *, with_keys: bool = True
    ) -> None:
        """``with_keys`` False leaves the keys unread (a command that only reads the store needs no
        passphrase): nothing can then be signed or decrypted."""
        self.with_keys = with_keys
        self.keys = load_keys(settings) if with_keys else Keys(None, None, (), None)
        self.registry = registry
        self.party = party
        self._signing: dict[tuple[str, str], tuple[object, SigningPolicy | None]] = {}
        self._verifying: dict[tuple[str, str | None, str | None], tuple[object, VerificationPolicy]] = {}
        self._encrypting: dict[tuple[str, str | None, str | None], tuple[object, EncryptionPolicy | None]] = {}
        self._signed_acks: dict[str, tuple[object, bool]] = {}
        self.in_use = any(_asks_security(cpa) for cpa in registry)
        """Some agreement signs or encrypts: the runtime then does the work of messages off the event loop
        (libxmlsec releases the GIL, so signing and verifying run beside the loop on the work pool)."""

    # -- the agreements, when loaded

    def agreements_changed(self) -> None:
        """The registry's agreements were replaced (a reload): see again whether any signs or encrypts (the
        policy caches check the agreement they were made from, so they need no clearing)."""
        self.in_use = any(_asks_security(cpa) for cpa in self.registry)

    def check_agreements(self, agreements: Iterable[CollaborationProtocolAgreement]) -> None:
        """:class:`ConfigurationError` listing what in ``agreements`` our keys cannot do
        (:func:`~msh.runtime.keys.agreement_problems`)."""
        problems = list(dict.fromkeys(p for cpa in agreements for p in agreement_problems(self.keys, cpa, self.party)))
        if problems:
            raise ConfigurationError("; ".join(problems))

    # -- outbound

    def _signing_policy(self, params: SendingParameters) -> SigningPolicy | None:
        key = (params.cpaid, params.sending_channel_id)
        hit = self._signing.get(key)
        if hit is not None and hit[0] is params.doc_exchange.signing:
            return hit[1]
        policy = signing_policy(params)
        self._signing[key] = (params.doc_exchange.signing, policy)
        return policy

    def _encryption_policy(self, params: SendingParameters) -> EncryptionPolicy | None:
        if params.doc_exchange.encryption is None:
            return None
        cpa = self.registry.get(params.cpaid)
        if cpa is None:
            return None
        return _per_channels(
            self._encrypting, cpa, params.sending_channel_id, params.receiving_channel_id, encryption_policy
        )

    def _signer(self, what: str) -> tuple[PrivateKey, x509.Certificate]:
        keys = self.keys
        if not self.with_keys:
            raise ConfigurationError(
                f"{what} must be signed and this MSH was opened without its keys (for a command that only reads "
                "the store); open it with its keys"
            )
        if keys.signing_key is None or keys.certificate is None:
            raise ConfigurationError(
                f"{what} must be signed and security.signing_key / security.signing_certificate are not set; "
                "give our signing key pair"
            )
        return keys.signing_key, keys.certificate

    def seal(
        self, params: SendingParameters, soap: bytes, attachments: Sequence[AttachmentSpec]
    ) -> tuple[bytes, tuple[AttachmentSpec, ...], bool, bool]:
        """``soap`` signed and ``attachments`` encrypted as the agreement of ``params`` says (sign first,
        ebMS2 §4.1.4.5); returns them with whether each was done."""
        policy = self._signing_policy(params)
        signed = policy is not None
        if policy is not None:
            key, certificate = self._signer(f"agreement {params.cpaid} says {params.action}")
            payloads = {a.content_id: a.body for a in attachments}
            soap = sign(
                soap,
                payloads,
                key,
                certificate,
                policy.signature_algorithm,
                policy.digest_algorithm,
                chain=self.keys.chain,
            )
        encryption = self._encryption_policy(params)
        if encryption is None or not attachments:
            return soap, tuple(attachments), signed, False
        if encryption.certificate is None:
            raise ConfigurationError(
                f"agreement {params.cpaid} encrypts payloads of {params.action} but names no EncryptionCertificateRef "
                f"in {params.to_party.name}'s ReceiverDigitalEnvelope: name the certificate to encrypt for"
            )
        sealed = []
        for attachment in attachments:
            with attachment.body.open() as reader:
                content = reader.read()
            document = encrypt_payload(
                content, encryption.certificate, encryption.algorithm, content_type=attachment.content_type
            )
            sealed.append(AttachmentSpec(attachment.content_id, ENCRYPTED_CONTENT_TYPE, PartBody.from_bytes(document)))
        return soap, tuple(sealed), signed, True

    def _signal_policy(self, envelope: Envelope, now: datetime) -> SigningPolicy | None:
        header = envelope.message_header
        if header is None or header.cpa_id not in self.registry:
            return None
        try:
            exchange = Exchange(self.party, header.to_party, SERVICE_MSH, header.action)
            params = self.registry.resolve(header.cpa_id, exchange, now=now)
        except AgreementRefused:
            return None
        return self._signing_policy(params)

    def sign_signal(self, envelope: Envelope, body: bytes, *, receipt: bool, now: datetime) -> bytes:
        """The bytes of the signal ``envelope`` (serialised as ``body``) signed when the agreement's channel
        for our signals signs (CPP/A 2.0 §8.4.1 default MSH channel), or ``receipt``: a signed
        acknowledgment was asked for (ebMS2 §6.3.1.2); else ``body``. An Acknowledgment aimed only at the
        next MSH is signed over the whole envelope, without the XPath filter (ebMS2 §10.1.4)."""
        policy = self._signal_policy(envelope, now)
        if policy is None and not receipt:
            return body
        if self.keys.signing_key is None:
            # Refused at the agreement check when the agreement asks; a signed receipt is refused on receipt.
            return body
        key, certificate = self._signer("the signal")
        acks = envelope.acknowledgments
        hop_only = bool(acks) and all(a.actor == ACTOR_NEXT_MSH for a in acks)
        return sign(
            body,
            {},
            key,
            certificate,
            policy.signature_algorithm if policy is not None else SignatureAlgorithm.RSA_SHA256,
            policy.digest_algorithm if policy is not None else DigestAlgorithm.SHA256,
            chain=self.keys.chain,
            xpath_filter=not hop_only,
        )

    # -- inbound

    def _verification_policy(self, result: CheckResult) -> VerificationPolicy | None:
        cpa = result.cpa
        if cpa is None:
            return None
        return _per_channels(
            self._verifying, cpa, result.sending_channel_id, result.receiving_channel_id, verification_policy
        )

    def _inbound_encryption(self, result: CheckResult) -> EncryptionPolicy | None:
        cpa = result.cpa
        if cpa is None:
            return None
        return _per_channels(
            self._encrypting, cpa, result.sending_channel_id, result.receiving_channel_id, encryption_policy
        )

    @property
    def can_sign(self) -> bool:
        """Whether this MSH can produce a signed Acknowledgment Message: the settings give its signing key and
        certificate (ebMS2 §6.3.1.2; when it cannot, the engine reports a Warning and acknowledges unsigned)."""
        return self.with_keys and self.keys.signing_key is not None and self.keys.certificate is not None

    def open(self, message: EbxmlMessage, result: CheckResult, *, at: datetime) -> Opened:
        """Decrypt the payloads (when the agreement encrypts them), then verify the signature (when the
        agreement signs the route, or the message is signed): :class:`SecurityError` when either fails or a
        required signature is missing (ebMS2 §4.1.3, §4.1.4.5)."""
        opened, body = message, None
        encryption = self._inbound_encryption(result) if message.payloads else None
        if encryption is not None:
            opened, body = self._decrypt(message, encryption)
        policy = self._verification_policy(result)
        if policy is None or (not policy.required and _SIGNATURE_MARK not in opened.soap):
            return Opened(opened, body, False)
        payloads = {p.content_id or "": p.body for p in opened.payloads}
        # The received parts' Content-Locations (a package rebuilt after decryption has none of its own).
        locations = content_locations(message.payloads)
        try:
            verification = verify_message(opened.soap, payloads, policy, at=at, locations=locations, parsed=opened.root)
        except BaseException:
            if opened is not message:
                opened.close()
            raise
        if verification is None:
            return Opened(opened, body, False)
        header = message.envelope.message_header
        for warning in verification.warnings:
            # ebMS2 §4.1.3: payloads not "requiring signing", a whole-envelope signature: accepted, and said.
            log.warning(
                "message %s, signature accepted with a warning at %s: %s",
                header.message_id if header is not None else "(no MessageHeader)",
                warning.location,
                warning.description,
            )
        return Opened(opened, body, True, verification.unsigned_payloads)

    def _decrypt(self, message: EbxmlMessage, policy: EncryptionPolicy) -> tuple[EbxmlMessage, tuple[bytes, str]]:
        key = self.keys.decryption_key
        if key is None:
            raise SecurityError(
                "the payloads are encrypted for this MSH and it has no decryption key (security.decryption_key)",
                location="cid:" + (message.payloads[0].content_id or ""),
            )
        attachments = []
        for part in message.payloads:
            cid = part.content_id or ""
            decrypted = decrypt_payload(
                part.body.read_bytes(), key, content_id=cid, algorithms={policy.algorithm.value}
            )
            attachments.append(
                AttachmentSpec(
                    cid, decrypted.content_type or "application/octet-stream", PartBody.from_bytes(decrypted.content)
                )
            )
        out = io.BytesIO()
        content_type = write_package(out, message.soap, attachments, start_id="ebxml-envelope@msh")
        body = out.getvalue()
        return parse_message(body, content_type, mode=ParseMode.LENIENT), (body, content_type)

    # -- receipts

    def _asks_signed_acks(self, cpa: CollaborationProtocolAgreement) -> bool:
        hit = self._signed_acks.get(cpa.cpaid)
        if hit is not None and hit[0] is cpa:
            return hit[1]
        asks = any(
            channel.messaging_characteristics.ack_signature_requested is not PerMessage.NEVER
            for info in cpa.party_infos
            if self.party in party_keys(info)
            for channel in info.delivery_channels
        )
        self._signed_acks[cpa.cpaid] = (cpa, asks)
        return asks

    def may_carry_receipts(self, envelope: Envelope) -> bool:
        """Whether an acknowledgment in ``envelope`` may be a receipt we asked for (cheap: the agreement
        lets our channels ask for signed acknowledgments, or the acknowledgment carries References)."""
        if not envelope.acknowledgments:
            return False
        if any(a.references for a in envelope.acknowledgments):
            return True
        header = envelope.message_header
        cpa = self.registry.get(header.cpa_id) if header is not None else None
        return cpa is not None and self._asks_signed_acks(cpa)

    def receipt_verdict(
        self, envelope: Envelope, ack_soap: bytes, verified: bool, sent_soap: bytes, sent_payloads: Mapping[str, Any]
    ) -> ReceiptVerdict | None:
        """The check of the acknowledgment in ``envelope`` (SOAP part ``ack_soap``, its signature
        ``verified`` or not) against the message we sent (``sent_soap`` as stored, ``sent_payloads``); None
        when that message asked the acknowledgment's actor for no signed acknowledgment (nothing to check)."""
        from msh.safexml import XmlLimits, parse_xml

        root = parse_xml(sent_soap, what="SOAP envelope sent", limits=XmlLimits(max_bytes=max(len(sent_soap), 1)))
        # ebMS2 §6.3.1.1, §6.3.2.1: each AckRequested is answered by the Acknowledgment of its actor.
        signed_actors = {
            effective_actor(el.get(f"{{{SOAP_ENV}}}actor"))
            for el in root.iter(f"{{{_EB}}}AckRequested")
            if el.get(f"{{{_EB}}}signed", el.get("signed", "false")).strip() in ("true", "1")
        }
        acks = [a for a in envelope.acknowledgments if effective_actor(a.actor) in signed_actors]
        if not acks:
            return None
        ack = acks[0]
        if not verified:
            return ReceiptVerdict(
                ack.ref_to_message_id,
                issue=_security_issue(
                    "a signed Acknowledgment was requested and the Acknowledgment is not signed (ebMS2 §6.3.1.2)",
                    "//Header/Acknowledgment",
                ),
            )
        try:
            checked = check_receipt(ack.references, sent_soap, sent_payloads)
        except SecurityError as exc:
            return ReceiptVerdict(ack.ref_to_message_id, issue=exc.issues[0])
        return ReceiptVerdict(ack.ref_to_message_id, receipt=ack_soap, references=len(checked))

    @staticmethod
    def derived_references(message: EbxmlMessage, digest: str | DigestAlgorithm) -> tuple[str, ...]:
        """The ds:Reference elements an acknowledgment of the unsigned ``message`` carries (ebMS2 §6.3.2.5)."""
        payloads = {p.content_id or "": p.body for p in message.payloads}
        return receipt_references(message.soap, payloads, digest=digest)


_P = TypeVar("_P")


def _per_channels(
    cache: dict[tuple[str, str | None, str | None], tuple[object, _P]],
    cpa: CollaborationProtocolAgreement,
    sending: str | None,
    receiving: str | None,
    make: Callable[[CollaborationProtocolAgreement, str | None, str | None], _P],
) -> _P:
    """``make(cpa, sending, receiving)``, kept per agreement and channel pair until the agreement object is
    replaced (a reloaded agreement is read again)."""
    key = (cpa.cpaid, sending, receiving)
    hit = cache.get(key)
    if hit is not None and hit[0] is cpa:
        return hit[1]
    value = make(cpa, sending, receiving)
    cache[key] = (cpa, value)
    return value
