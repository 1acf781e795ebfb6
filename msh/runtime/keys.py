"""The MSH's own keys, read from its ``[security]`` settings (:mod:`msh.runtime.security` applies them).

The signing key and its certificate (and the chain above it, leaf first), and the key that decrypts the
payloads encrypted for us: the signing key unless another is named. Keys may be encrypted PEM: the
passphrase is read from the environment variable the settings name, and only for an encrypted key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from msh.errors import ConfigurationError
from msh.runtime.config.model import SecuritySettings
from msh.security import PrivateKey, load_certificates, load_private_key

__all__ = ["Keys", "load_keys"]


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
