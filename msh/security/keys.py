"""Keys and certificates: making a trial key pair, reading keys (encrypted PEM included) and certificates,
and the agreement's ``Certificate`` element for a certificate (CPP/A 2.0 §8.4.33).

A private key file may be an encrypted PEM: its passphrase is taken from an environment variable whose
*name* the settings or the command line give (``passphrase_env``), never from a file or an argument
value, so that it appears neither in the configuration nor in the process list.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeAlias

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from lxml import etree

from msh.errors import ConfigurationError
from msh.safexml import xml_safe
from msh.security.dsa_keys import DSAPrivateKey

__all__ = [
    "CPPA",
    "KeyPair",
    "DEFAULT_HOSTS",
    "PrivateKey",
    "certificate_element",
    "generate_key_pair",
    "load_certificates",
    "load_private_key",
    "passphrase_from_env",
    "subject_alternative_names",
    "write_key_pair",
]

CPPA = "http://www.oasis-open.org/committees/ebxml-cppa/schema/cpp-cpa-2_0.xsd"
_DSIG = "http://www.w3.org/2000/09/xmldsig#"

PrivateKey: TypeAlias = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | DSAPrivateKey
"""The private keys that sign (RSA, EC, DSA) and decrypt (RSA)."""


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A private key and its certificate."""

    key: PrivateKey
    certificate: x509.Certificate


DEFAULT_HOSTS = ("localhost", "127.0.0.1")
"""The names a generated certificate holds when none are given: this machine only."""

_DNS_LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
_DNS_NAME = re.compile(rf"^(\*\.)?{_DNS_LABEL}(\.{_DNS_LABEL})*\.?$")


def subject_alternative_names(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    """The subjectAltName extension naming each of ``hosts``: an IP address entry for an IPv4 or IPv6
    address (``[::1]`` too), a DNS entry for a host name (``*.example.com`` allowed). TLS clients check the
    host of the URL against these entries only, never the subject's CN (RFC 6125 §6.4.4, RFC 2818 §3.1).

    Raises :class:`ConfigurationError` for an entry that is neither, naming it."""
    if not hosts:
        raise ConfigurationError("a certificate for TLS needs at least one host name or IP address (--host)")
    names: list[x509.GeneralName] = []
    for host in hosts:
        bare = host.strip().removeprefix("[").removesuffix("]")
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(bare)))
            continue
        except ValueError:
            pass
        if len(bare) > 253 or not _DNS_NAME.match(bare) or bare.replace(".", "").isdigit():
            raise ConfigurationError(
                f"--host {host!r} is neither a host name nor an IP address; give the name or address partners "
                "reach this MSH at, e.g. --host msh.example.com or --host 192.0.2.10 (no scheme, port or path; "
                "an internationalised name in its xn-- form)"
            )
        names.append(x509.DNSName(bare.rstrip(".").lower()))
    return x509.SubjectAlternativeName(list(dict.fromkeys(names)))


def generate_key_pair(
    party: str,
    *,
    days: int = 365,
    now: datetime | None = None,
    key_size: int = 2048,
    hosts: Sequence[str] = DEFAULT_HOSTS,
) -> KeyPair:
    """A new RSA key and a self-signed certificate for ``party`` (its subject's CN), valid ``days`` days from
    ``now``, naming ``hosts`` (host names or IP addresses) in its subjectAltName: for trials, or for
    partners who agree to trust each other's self-signed certificates; else a CA issues the certificate.

    One certificate serves every use the MSH has for it: TLS server and TLS client (extendedKeyUsage
    serverAuth, clientAuth; keyUsage digitalSignature and keyEncipherment, RFC 5246 §7.4.2), signing
    messages (digitalSignature, contentCommitment) and receiving encrypted payloads (keyEncipherment, the
    RSA key transport of ebMS2 §4.1.4.5). It is a leaf (basicConstraints cA false, RFC 5280 §4.2.1.9) with
    subject and authority key identifiers, so it can stand alone as a trust anchor (the agreement names it)
    or be replaced later by a CA-issued one without other changes."""
    if days < 1:
        raise ConfigurationError(f"a certificate must be valid for at least one day, not {days}")
    names = subject_alternative_names(hosts)
    now = now or datetime.now(UTC)
    key = rsa.generate_private_key(public_exponent=65537, key_size=key_size)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, party)])
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=True,
        key_encipherment=True,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage, critical=True)  # RFC 5280 §4.2.1.3: SHOULD be critical
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(names, critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
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
    if not isinstance(key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, DSAPrivateKey)):
        raise ConfigurationError(f"private key {path} is a {type(key).__name__} key; use an RSA (or EC) key")
    return key


def load_certificates(path: str | os.PathLike[str]) -> tuple[x509.Certificate, ...]:
    """The certificates in the PEM file ``path`` (one or more, leaf first) or DER file; at least one. A
    PKCS#7 bundle (``.p7b``, PEM or DER, as CAs often deliver a chain) is read too, its certificates put
    leaf first (a PKCS#7 set has no order).

    Raises :class:`ConfigurationError` in one line for a file that holds none (a private key, a
    certificate request, anything else), saying which file to give instead."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"certificate file {path}: {exc.strerror or exc}; check the path") from None
    kind = _pem_kind(data)
    if kind is not None and kind != "CERTIFICATE" and kind != "PKCS7":
        raise ConfigurationError(
            f"certificate file {path} holds no readable X.509 certificate but a {kind.lower()}; give the "
            "certificate file (PEM '-----BEGIN CERTIFICATE-----' or DER)"
        )
    try:
        if kind == "CERTIFICATE":
            return tuple(x509.load_pem_x509_certificates(data))
        if kind == "PKCS7":
            return _leaf_first(pkcs7.load_pem_pkcs7_certificates(data))
        try:
            return (x509.load_der_x509_certificate(data),)
        except ValueError:
            return _leaf_first(pkcs7.load_der_pkcs7_certificates(data))
    except ValueError:
        raise ConfigurationError(
            f"certificate file {path} holds no readable X.509 certificate (PEM, DER or PKCS#7); give the "
            "certificate file"
        ) from None


def _leaf_first(certificates: Sequence[x509.Certificate]) -> tuple[x509.Certificate, ...]:
    """``certificates`` (an unordered PKCS#7 set) as a chain: the one that issued none of the others first,
    then each one's issuer (by name) when the set holds it; the rest after, as given."""
    if not certificates:
        raise ValueError("the PKCS#7 bundle holds no certificate")
    issuers = {c.issuer for c in certificates if c.issuer != c.subject}
    leaves = [c for c in certificates if c.subject not in issuers]
    chain = [leaves[0] if leaves else certificates[0]]
    while True:
        current = chain[-1]
        issuer = next((c for c in certificates if c.subject == current.issuer and c not in chain), None)
        if issuer is None or current.issuer == current.subject:
            break
        chain.append(issuer)
    return (*chain, *(c for c in certificates if c not in chain))


def _pem_kind(data: bytes) -> str | None:
    """The label of the first PEM block in ``data`` (``CERTIFICATE``, ``PRIVATE KEY``, ...), None if none."""
    if b"-----BEGIN CERTIFICATE-----" in data:
        return "CERTIFICATE"
    found = re.search(rb"-----BEGIN ([A-Z0-9 ]+)-----", data)
    return found.group(1).decode("ascii") if found else None


def certificate_element(
    certificate: x509.Certificate, cert_id: str, *, prefix: str = "tp", chain: Sequence[x509.Certificate] = ()
) -> str:
    """The CPP/A 2.0 §8.4.33 ``Certificate`` element for ``certificate`` (id ``cert_id``), to paste into the
    party's PartyInfo: a ``ds:KeyInfo`` with its KeyName (the subject) and one X509Data holding the
    certificate, then each of ``chain`` (its issuers, in order: XML-DSig §4.4.4 allows several
    X509Certificate elements in one X509Data)."""
    nsmap = {prefix: CPPA, "ds": _DSIG}
    element = etree.Element(f"{{{CPPA}}}Certificate", nsmap=nsmap)
    element.set(f"{{{CPPA}}}certId", xml_safe(cert_id))
    key_info = etree.SubElement(element, f"{{{_DSIG}}}KeyInfo")
    etree.SubElement(key_info, f"{{{_DSIG}}}KeyName").text = certificate.subject.rfc4514_string()
    x509_data = etree.SubElement(key_info, f"{{{_DSIG}}}X509Data")
    for each in (certificate, *chain):
        der = base64.b64encode(each.public_bytes(serialization.Encoding.DER)).decode("ascii")
        node = etree.SubElement(x509_data, f"{{{_DSIG}}}X509Certificate")
        node.text = "\n" + "\n".join(der[i : i + 64] for i in range(0, len(der), 64)) + "\n"
    etree.indent(element, space="  ")
    return etree.tostring(element, encoding="unicode")
