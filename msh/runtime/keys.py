"""The MSH's own keys, read from its ``[security]`` settings (:mod:`msh.runtime.security` applies them).

The signing key and its certificate (and the chain above it, leaf first), and the key that decrypts the
payloads encrypted for us: the signing key unless another is named. Keys may be encrypted PEM: the
passphrase is read from the environment variable the settings name, and only for an encrypted key.
:func:`agreement_problems` says what an agreement asks of these keys that they cannot do (checked when the
agreements are loaded for use, never at the first message).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from cpa.model import CollaborationProtocolAgreement
from cpa.resolve import PartyKey, party_keys
from msh.errors import ConfigurationError
from msh.runtime.config.model import SecuritySettings
from msh.security import PrivateKey, load_certificates, load_private_key

__all__ = ["Keys", "agreement_problems", "load_keys"]


@dataclass(frozen=True, slots=True)
class Keys:
    """The MSH's own keys (``[security]`` settings): the signing key with its certificate (and chain above
    it, leaf first), and the key that decrypts payloads encrypted for us."""

    signing_key: PrivateKey | None
    certificate: x509.Certificate | None
    chain: tuple[x509.Certificate, ...]
    decryption_key: rsa.RSAPrivateKey | None


def load_keys(settings: SecuritySettings) -> Keys:
    """Read the keys the settings name; :class:`ConfigurationError` naming the setting when one cannot be
    used (unreadable, encrypted without its passphrase, not the certificate's key, not RSA for decryption)."""
    signing_key: PrivateKey | None = None
    certificate: x509.Certificate | None = None
    chain: tuple[x509.Certificate, ...] = ()
    if settings.signing_key is not None and settings.signing_certificate is not None:
        try:
            signing_key = load_private_key(
                settings.signing_key, passphrase_env=_passphrase_env(settings, settings.signing_key)
            )
            certificate, *rest = load_certificates(settings.signing_certificate)
        except ConfigurationError as exc:
            raise ConfigurationError(f"security.signing_key / signing_certificate: {exc}") from None
        chain = tuple(rest)
        if _spki(signing_key.public_key()) != _spki(certificate.public_key()):
            raise ConfigurationError(
                f"security.signing_key {settings.signing_key} is not the private key of security.signing_certificate "
                f"{settings.signing_certificate} (their public keys differ); give the two halves of one key pair"
            )
    decryption: Any = signing_key
    if settings.decryption_key is not None:
        try:
            decryption = load_private_key(
                settings.decryption_key, passphrase_env=_passphrase_env(settings, settings.decryption_key)
            )
        except ConfigurationError as exc:
            raise ConfigurationError(f"security.decryption_key: {exc}") from None
        if not isinstance(decryption, rsa.RSAPrivateKey):
            raise ConfigurationError(
                f"security.decryption_key {settings.decryption_key} is not an RSA key; XML Encryption key "
                "transport (RSA-OAEP) needs the RSA key of our encryption certificate"
            )
    return Keys(signing_key, certificate, chain, decryption if isinstance(decryption, rsa.RSAPrivateKey) else None)


def _passphrase_env(settings: SecuritySettings, path: Path) -> str | None:
    """The passphrase variable, for an encrypted key only (an unencrypted one needs none set)."""
    try:
        head = path.read_bytes()[:200]
    except OSError:
        return None  # load_private_key says what is wrong with the file
    return settings.key_passphrase_env if b"ENCRYPTED" in head else None


def _spki(public_key: Any) -> bytes:
    return bytes(public_key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo))


def agreement_problems(keys: Keys, cpa: CollaborationProtocolAgreement, party: PartyKey) -> list[str]:
    """What in ``cpa`` the settings' ``keys`` cannot do for our ``party`` (one line each, naming the setting):
    sign where a SenderNonRepudiation of ours asks (CPP/A 2.0 §8.4.40), with the certificate it names, and
    decrypt what a SenderDigitalEnvelope of the other party encrypts for us (§8.4.46)."""
    problems: list[str] = []
    for info in (i for i in cpa.party_infos if party in party_keys(i)):
        for channel in (*info.delivery_channels, info.default_msh_channel):
            sender = channel.doc_exchange.sender_binding
            nr = sender.non_repudiation if sender is not None else None
            where = f"agreement {cpa.cpaid}, {info.party_name}, DeliveryChannel {channel.channel_id}"
            if nr is not None and keys.signing_key is None:
                problems.append(
                    f"{where}: its SenderNonRepudiation has us sign what we send on it, and security.signing_key "
                    "and security.signing_certificate are not set; give our signing key pair (PEM files), "
                    "or remove the SenderNonRepudiation from the agreement"
                )
            elif nr is not None and nr.certificate is not None and keys.certificate is not None:
                named = nr.certificate.x509[:1]
                ours = keys.certificate.public_bytes(Encoding.DER)
                if named and named[0] != ours:
                    problems.append(
                        f"{where}: its SigningCertificateRef names certificate {nr.certificate.cert_id!r}, "
                        f"which is not security.signing_certificate ({keys.certificate.subject.rfc4514_string()}); "
                        "the partner would refuse our signatures: give the key pair of that certificate"
                    )
    for other in cpa.party_infos:
        if party in party_keys(other):
            continue
        for channel in other.delivery_channels:
            sender = channel.doc_exchange.sender_binding
            if sender is not None and sender.digital_envelope is not None and keys.decryption_key is None:
                problems.append(
                    f"agreement {cpa.cpaid}, {other.party_name}, DeliveryChannel {channel.channel_id}: its "
                    "SenderDigitalEnvelope encrypts payloads for us, and no RSA key is set to decrypt them: set "
                    "security.decryption_key (or security.signing_key, an RSA key)"
                )
                break
    return problems
