"""What a certificate is and what it can be used for: ``msh keys show`` and ``msh keys import``.

:func:`inspect_certificate` reads a certificate at a given instant: subject, issuer, subjectAltName,
validity (expired, not yet valid, days left), fingerprints, key, CA flags, key usages, and whether it fits
each use the MSH has for a certificate, with the reason when it does not:

* TLS server (CPP/A 2.0 §8.4.31 ServerCertificateRef): keyUsage digitalSignature (TLS 1.3 and ECDHE
  handshakes sign, RFC 8446 §4.4.3) or keyEncipherment (RSA key exchange, RFC 5246 §7.4.2),
  extendedKeyUsage serverAuth, and a subjectAltName, since clients check the host of the URL against it
  and never against the CN (RFC 6125 §6.4.4, RFC 2818 §3.1);
* TLS client (§8.4.26 ClientCertificateRef): digitalSignature (CertificateVerify), clientAuth;
* signing (§8.4.40 SigningCertificateRef, ebMS2 §4.1.3): an RSA, EC or DSA key, keyUsage digitalSignature
  or contentCommitment;
* encryption, i.e. receiving encrypted payloads (§8.4.46 EncryptionCertificateRef, ebMS2 §4.1.4.5): an RSA
  key (the session key travels RSA-encrypted) and keyUsage keyEncipherment.

A certificate without a keyUsage or extendedKeyUsage extension is not restricted by it (RFC 5280 §4.2.1.3,
§4.2.1.12). Every use needs the certificate valid now.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from msh.security.dsa_keys import DSAPublicKey

__all__ = ["CertificateReport", "Fit", "Use", "inspect_certificate"]

_DAY: Final = timedelta(days=1)
_MIN_RSA_BITS: Final = 2048
"""OpenSSL's default security level (2) refuses RSA keys shorter than this in TLS."""

_KEY_USAGES: Final = (
    "digital_signature",
    "content_commitment",
    "key_encipherment",
    "data_encipherment",
    "key_agreement",
    "key_cert_sign",
    "crl_sign",
)
_EKU_NAMES: Final = {
    ExtendedKeyUsageOID.SERVER_AUTH: "serverAuth",
    ExtendedKeyUsageOID.CLIENT_AUTH: "clientAuth",
    ExtendedKeyUsageOID.CODE_SIGNING: "codeSigning",
    ExtendedKeyUsageOID.EMAIL_PROTECTION: "emailProtection",
    ExtendedKeyUsageOID.TIME_STAMPING: "timeStamping",
    ExtendedKeyUsageOID.OCSP_SIGNING: "OCSPSigning",
    ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE: "anyExtendedKeyUsage",
}


class Use(StrEnum):
    """The uses the MSH has for a certificate (the agreement's certificate references)."""

    TLS_SERVER = "tlsServer"
    TLS_CLIENT = "tlsClient"
    SIGNING = "signing"
    ENCRYPTION = "encryption"

    @property
    def label(self) -> str:
        return {"tlsServer": "TLS server", "tlsClient": "TLS client"}.get(self.value, self.value)


@dataclass(frozen=True, slots=True)
class Fit:
    """Whether the certificate fits ``use``; ``reasons`` say why not (empty when it fits)."""

    use: Use
    reasons: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.reasons


@dataclass(frozen=True, slots=True)
class CertificateReport:
    """A certificate as :func:`inspect_certificate` read it at ``at``."""

    subject: str
    issuer: str
    self_signed: bool
    serial: str
    alt_names: tuple[str, ...]
    not_before: datetime
    not_after: datetime
    at: datetime
    sha256: str
    sha1: str
    key: str
    ca: bool | None
    """basicConstraints cA (None: no basicConstraints extension)."""
    key_usage: tuple[str, ...] | None
    """None: no keyUsage extension (any use)."""
    extended_key_usage: tuple[str, ...] | None
    fits: tuple[Fit, ...]

    @property
    def expired(self) -> bool:
        return self.at > self.not_after

    @property
    def not_yet_valid(self) -> bool:
        return self.at < self.not_before

    @property
    def days_left(self) -> float:
        return (self.not_after - self.at) / _DAY

    def validity(self) -> str:
        """``valid now, 364 days left``, ``EXPIRED on ...``, ``NOT YET VALID (from ...)``."""
        if self.expired:
            return f"EXPIRED on {self.not_after:%Y-%m-%d %H:%M} UTC ({-self.days_left:.0f} days ago)"
        if self.not_yet_valid:
            return f"NOT YET VALID (valid from {self.not_before:%Y-%m-%d %H:%M} UTC)"
        return f"valid now, {self.days_left:.0f} days left"

    def lines(self) -> list[str]:
        """The report as ``msh keys show`` prints it, one fact a line."""
        constraint = {None: "no basicConstraints (not a CA)", True: "yes (basicConstraints cA true)"}.get(
            self.ca, "no (basicConstraints cA false)"
        )
        out = [
            f"subject: {self.subject or '(empty)'}",
            f"issuer: {self.issuer or '(empty)'}{' (self-signed)' if self.self_signed else ''}",
            f"subject alternative names: {', '.join(self.alt_names) or 'none'}",
            f"valid: {self.not_before:%Y-%m-%d %H:%M} UTC to {self.not_after:%Y-%m-%d %H:%M} UTC ({self.validity()})",
            f"serial: {self.serial}",
            f"key: {self.key}",
            f"CA: {constraint}",
            f"key usage: {_listed(self.key_usage)}",
            f"extended key usage: {_listed(self.extended_key_usage)}",
            f"SHA-256 fingerprint: {self.sha256}",
            f"SHA-1 fingerprint: {self.sha1}",
        ]
        for fit in self.fits:
            out.append(f"{fit.use.label}: {'yes' if fit.ok else 'no: ' + '; '.join(fit.reasons)}")
        return out

    def to_json(self) -> dict[str, object]:
        """The report with camelCase keys, as ``msh keys show --json`` prints it."""
        return {
            "subject": self.subject,
            "issuer": self.issuer,
            "selfSigned": self.self_signed,
            "serial": self.serial,
            "subjectAltNames": list(self.alt_names),
            "notBefore": self.not_before.isoformat(),
            "notAfter": self.not_after.isoformat(),
            "expired": self.expired,
            "notYetValid": self.not_yet_valid,
            "daysLeft": round(self.days_left, 1),
            "sha256": self.sha256,
            "sha1": self.sha1,
            "key": self.key,
            "ca": self.ca,
            "keyUsage": None if self.key_usage is None else list(self.key_usage),
            "extendedKeyUsage": None if self.extended_key_usage is None else list(self.extended_key_usage),
            "fits": {fit.use.value: {"ok": fit.ok, "reasons": list(fit.reasons)} for fit in self.fits},
        }


def _listed(values: tuple[str, ...] | None) -> str:
    if values is None:
        return "not restricted (no extension)"
    return ", ".join(values) or "none"


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.title() for part in rest)


def _fingerprint(certificate: x509.Certificate, algorithm: hashes.HashAlgorithm) -> str:
    return certificate.fingerprint(algorithm).hex(":").upper()


def _extension(certificate: x509.Certificate, kind: type[x509.ExtensionType]) -> x509.ExtensionType | None:
    try:
        return certificate.extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
        return None


def _key_usage(certificate: x509.Certificate) -> tuple[str, ...] | None:
    usage = _extension(certificate, x509.KeyUsage)
    if not isinstance(usage, x509.KeyUsage):
        return None
    return tuple(_camel(name) for name in _KEY_USAGES if getattr(usage, name))


def _extended_key_usage(certificate: x509.Certificate) -> tuple[str, ...] | None:
    usage = _extension(certificate, x509.ExtendedKeyUsage)
    if not isinstance(usage, x509.ExtendedKeyUsage):
        return None
    return tuple(_EKU_NAMES.get(oid, oid.dotted_string) for oid in usage)


def _alt_names(certificate: x509.Certificate) -> tuple[str, ...]:
    names = _extension(certificate, x509.SubjectAlternativeName)
    if not isinstance(names, x509.SubjectAlternativeName):
        return ()
    out = [f"DNS:{n}" for n in names.get_values_for_type(x509.DNSName)]
    out += [f"IP:{n}" for n in names.get_values_for_type(x509.IPAddress)]
    out += [f"URI:{n}" for n in names.get_values_for_type(x509.UniformResourceIdentifier)]
    out += [f"email:{n}" for n in names.get_values_for_type(x509.RFC822Name)]
    return tuple(out)


def _key(certificate: x509.Certificate) -> tuple[str, str | None]:
    """A description of the public key (``RSA 2048 bits``) and its kind (RSA, EC, DSA; None for others)."""
    key = certificate.public_key()
    if isinstance(key, rsa.RSAPublicKey):
        return f"RSA {key.key_size} bits", "RSA"
    if isinstance(key, ec.EllipticCurvePublicKey):
        return f"EC {key.curve.name} ({key.key_size} bits)", "EC"
    if isinstance(key, DSAPublicKey):
        return f"DSA {key.key_size} bits", "DSA"
    if isinstance(key, (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey)):
        return type(key).__name__.removesuffix("PublicKey"), None
    return type(key).__name__, None


def _self_signed(certificate: x509.Certificate) -> bool:
    if certificate.issuer != certificate.subject:
        return False
    try:
        certificate.verify_directly_issued_by(certificate)
    except Exception:  # any failure means: not signed by its own key
        return False
    return True


def _fits(
    certificate: x509.Certificate, at: datetime, kind: str | None, key: str, alt_names: tuple[str, ...]
) -> tuple[Fit, ...]:
    usage, extended = _key_usage(certificate), _extended_key_usage(certificate)
    common: list[str] = []
    if at > certificate.not_valid_after_utc:
        common.append(f"it expired on {certificate.not_valid_after_utc:%Y-%m-%d %H:%M} UTC")
    elif at < certificate.not_valid_before_utc:
        common.append(f"it is not valid before {certificate.not_valid_before_utc:%Y-%m-%d %H:%M} UTC")

    def lacks_usage(*names: str) -> list[str]:
        if usage is None or any(n in usage for n in names):
            return []
        return [f"keyUsage has not {' nor '.join(names)}"]

    def lacks_purpose(name: str) -> list[str]:
        if extended is None or name in extended or "anyExtendedKeyUsage" in extended:
            return []
        return [f"extendedKeyUsage has not {name}"]

    tls_key: list[str] = []
    if kind == "DSA":
        tls_key.append("a DSA key: TLS 1.2 and 1.3 peers no longer accept one; use RSA or EC")
    elif (
        kind == "RSA" and isinstance(pub := certificate.public_key(), rsa.RSAPublicKey) and pub.key_size < _MIN_RSA_BITS
    ):
        tls_key.append(f"{key}: OpenSSL refuses RSA keys under {_MIN_RSA_BITS} bits for TLS")
    server = [*common, *tls_key, *lacks_usage("digitalSignature", "keyEncipherment"), *lacks_purpose("serverAuth")]
    if not alt_names:
        server.append(
            "no subjectAltName: clients check the host of the URL against it, never the CN (RFC 6125); "
            "make one with --host"
        )
    client = [*common, *tls_key, *lacks_usage("digitalSignature"), *lacks_purpose("clientAuth")]
    signing = [*common, *lacks_usage("digitalSignature", "contentCommitment")]
    if kind is None:
        signing.append(f"{key}: the signature algorithms of ebMS (XML-DSig) take RSA, EC or DSA keys")
    encryption = [*common, *lacks_usage("keyEncipherment")]
    if kind != "RSA":
        encryption.append(f"{key}: payloads are encrypted for an RSA key (XML Encryption key transport)")
    return (
        Fit(Use.TLS_SERVER, tuple(server)),
        Fit(Use.TLS_CLIENT, tuple(client)),
        Fit(Use.SIGNING, tuple(signing)),
        Fit(Use.ENCRYPTION, tuple(encryption)),
    )


def inspect_certificate(certificate: x509.Certificate, at: datetime) -> CertificateReport:
    """``certificate`` read at ``at`` (an aware datetime): see the module docs."""
    key, kind = _key(certificate)
    alt_names = _alt_names(certificate)
    constraints = _extension(certificate, x509.BasicConstraints)
    return CertificateReport(
        subject=certificate.subject.rfc4514_string(),
        issuer=certificate.issuer.rfc4514_string(),
        self_signed=_self_signed(certificate),
        serial=format(certificate.serial_number, "x"),
        alt_names=alt_names,
        not_before=certificate.not_valid_before_utc,
        not_after=certificate.not_valid_after_utc,
        at=at,
        sha256=_fingerprint(certificate, hashes.SHA256()),
        sha1=_fingerprint(certificate, hashes.SHA1()),  # a fingerprint to compare, as other tools print it
        key=key,
        ca=constraints.ca if isinstance(constraints, x509.BasicConstraints) else None,
        key_usage=_key_usage(certificate),
        extended_key_usage=_extended_key_usage(certificate),
        fits=_fits(certificate, at, kind, key, alt_names),
    )
