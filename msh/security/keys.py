"""Keys and certificates: making a trial key pair, reading keys (encrypted PEM included) and certificates,
and the agreement's ``Certificate`` element for a certificate (CPP/A 2.0 §8.4.33).

A private key file may be an encrypted PEM: its passphrase is taken from an environment variable whose
*name* the settings or the command line give (``passphrase_env``), never from a file or an argument
value, so that it appears neither in the configuration nor in the process list.
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeAlias

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from lxml import etree

from msh.errors import ConfigurationError
from msh.safexml import xml_safe

__all__ = [
    "CPPA",
    "KeyPair",
    "PrivateKey",
    "certificate_element",
    "generate_key_pair",
    "load_certificates",
    "load_private_key",
    "passphrase_from_env",
    "write_key_pair",
]

CPPA = "http://www.oasis-open.org/committees/ebxml-cppa/schema/cpp-cpa-2_0.xsd"
_DSIG = "http://www.w3.org/2000/09/xmldsig#"

PrivateKey: TypeAlias = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | dsa.DSAPrivateKey
"""The private keys that sign (RSA, EC, DSA) and decrypt (RSA)."""


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A private key and its certificate."""

    key: PrivateKey
    certificate: x509.Certificate


def generate_key_pair(party: str, *, days: int = 365, now: datetime | None = None, key_size: int = 2048) -> KeyPair:
    """A new RSA key and a self-signed certificate for ``party`` (its subject's CN), valid ``days`` days from
    ``now``: for trials; in production a CA issues the certificate. Usable to sign (digitalSignature) and
    to receive encrypted payloads (keyEncipherment), and for TLS (serverAuth, clientAuth)."""
    if days < 1:
        raise ConfigurationError(f"a certificate must be valid for at least one day, not {days}")
    now = now or datetime.now(UTC)
    key = rsa.generate_private_key(public_exponent=65537, key_size=key_size)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, party)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=True,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=False,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(key, certificate)


def passphrase_from_env(variable: str) -> bytes:
    """The passphrase in the environment variable ``variable``; :class:`ConfigurationError` when it is
    unset or empty."""
    value = os.environ.get(variable)
    if not value:
        raise ConfigurationError(
            f"environment variable {variable} holds no passphrase; set it to the private key's passphrase"
        )
    return value.encode("utf-8")


def write_key_pair(pair: KeyPair, folder: Path, stem: str, *, passphrase: bytes | None = None) -> tuple[Path, Path]:
    """Write ``pair`` as ``folder/stem.key.pem`` (mode 0600, encrypted with ``passphrase`` when given) and
    ``folder/stem.cert.pem``; refuses to overwrite. Returns both paths."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._") or "party"
    key_path, cert_path = folder / f"{stem}.key.pem", folder / f"{stem}.cert.pem"
    for path in (key_path, cert_path):
        if path.exists():
            raise ConfigurationError(f"{path} exists; move it away or choose another folder with --out")
    folder.mkdir(parents=True, exist_ok=True)
    protection: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    )
    pem = pair.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, protection)
    descriptor = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(pem)
    cert_path.write_bytes(pair.certificate.public_bytes(serialization.Encoding.PEM))
    return key_path, cert_path


def load_private_key(
    path: str | os.PathLike[str], *, passphrase: bytes | None = None, passphrase_env: str | None = None
) -> PrivateKey:
    """The private key in the PEM (or DER) file ``path``; an encrypted one is opened with ``passphrase``,
    or with the value of the environment variable named ``passphrase_env``.

    Raises :class:`ConfigurationError` saying what to fix: no such file, not a key, encrypted but no
    passphrase given, a wrong passphrase, a kind of key that cannot sign.
    """
    if passphrase is None and passphrase_env:
        passphrase = passphrase_from_env(passphrase_env)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"private key {path}: {exc.strerror or exc}; check the path") from None
    encrypted = b"ENCRYPTED" in data[:200]
    if encrypted and passphrase is None:
        raise ConfigurationError(
            f"private key {path} is encrypted; give its passphrase in the environment variable the settings "
            "name (e.g. --passphrase-env PYMSH_KEY_PASSPHRASE)"
        )
    loader = serialization.load_pem_private_key if b"-----BEGIN" in data else serialization.load_der_private_key
    try:
        key = loader(data, password=passphrase if encrypted or passphrase else None)
    except TypeError:
        # The key is not encrypted but a passphrase was given: read it without one.
        key = loader(data, password=None)
    except ValueError as exc:
        hint = "the passphrase is wrong, or " if encrypted else ""
        raise ConfigurationError(
            f"private key {path} cannot be read: {hint}it is not a PEM or DER private key ({exc})"
        ) from None
    if not isinstance(key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, dsa.DSAPrivateKey)):
        raise ConfigurationError(f"private key {path} is a {type(key).__name__} key; use an RSA (or EC) key")
    return key


def load_certificates(path: str | os.PathLike[str]) -> tuple[x509.Certificate, ...]:
    """The certificates in the PEM file ``path`` (one or more, leaf first) or DER file; at least one."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"certificate file {path}: {exc.strerror or exc}; check the path") from None
    try:
        if b"-----BEGIN CERTIFICATE-----" in data:
            return tuple(x509.load_pem_x509_certificates(data))
        return (x509.load_der_x509_certificate(data),)
    except ValueError as exc:
        raise ConfigurationError(f"certificate file {path} holds no readable X.509 certificate ({exc})") from None


def certificate_element(certificate: x509.Certificate, cert_id: str, *, prefix: str = "tp") -> str:
    """The CPP/A 2.0 §8.4.33 ``Certificate`` element for ``certificate`` (id ``cert_id``), to paste into the
    party's PartyInfo: a ``ds:KeyInfo`` with its KeyName (the subject) and X509Data (the certificate)."""
    nsmap = {prefix: CPPA, "ds": _DSIG}
    element = etree.Element(f"{{{CPPA}}}Certificate", nsmap=nsmap)
    element.set(f"{{{CPPA}}}certId", xml_safe(cert_id))
    key_info = etree.SubElement(element, f"{{{_DSIG}}}KeyInfo")
    etree.SubElement(key_info, f"{{{_DSIG}}}KeyName").text = certificate.subject.rfc4514_string()
    data = etree.SubElement(etree.SubElement(key_info, f"{{{_DSIG}}}X509Data"), f"{{{_DSIG}}}X509Certificate")
    der = base64.b64encode(certificate.public_bytes(serialization.Encoding.DER)).decode("ascii")
    data.text = "\n" + "\n".join(der[i : i + 64] for i in range(0, len(der), 64)) + "\n"
    etree.indent(element, space="  ")
    return etree.tostring(element, encoding="unicode")
