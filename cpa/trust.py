"""Trust in a certificate as an agreement gives it: chains to trust anchors, and the binding of a certificate
to a party (CPP/A 2.0 §8.4.33 Certificate, §8.4.35 SecurityDetails/TrustAnchors).

:func:`certificate_path` builds the chain from a certificate up to one of the anchors, through any number
of intermediate certificates, checking each issuer's signature and every certificate's validity at a given
instant; :class:`UntrustedCertificate` says why there is none. :func:`party_certificate_problem` binds a
certificate to the party a message claims to come from (docs/design.md §7): it must chain to a certificate that
party's ``PartyInfo`` names. The TLS client binding (:func:`msh.transport.tls.client_certificate_issue`)
and the signature check (:mod:`msh.security`) share it.

What depends only on the certificates (their DER encodings, whether one's key made another's signature, whether
one is a CA) is computed once and remembered, up to :data:`CACHE_LIMIT` entries each (a full cache forgets the
entry used least recently); what depends on the instant (each certificate's validity period) is checked at every call.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Generic, TypeVar

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import Encoding

from cpa.model import CollaborationProtocolAgreement
from cpa.resolve import PartyKey, party_keys

__all__ = [
    "MAX_PATH_LENGTH",
    "UntrustedCertificate",
    "agreement_certificates",
    "certificate_path",
    "describe",
    "load_certificate",
    "party_certificate_problem",
    "party_certificates",
    "validity_problem",
]

MAX_PATH_LENGTH = 8
"""The most certificates a chain may have (the certificate itself, intermediates and the anchor)."""


class UntrustedCertificate(ValueError):
    """A certificate does not chain to a trust anchor, or a certificate of its chain is not valid now."""


@functools.lru_cache(maxsize=512)
def load_certificate(der: bytes) -> x509.Certificate | None:
    """The certificate in ``der``, or None when the bytes are not one."""
    try:
        return x509.load_der_x509_certificate(der)
    except ValueError:
        return None


def describe(certificate: x509.Certificate) -> str:
    """How a certificate is named in messages: its subject (RFC 4514), else its serial number."""
    return certificate.subject.rfc4514_string() or f"serial {certificate.serial_number}"


_K = TypeVar("_K")
_V = TypeVar("_V")

CACHE_LIMIT = 1024
"""The most entries each of this module's caches holds; a full cache forgets the entry used least recently."""


class _Remembered(Generic[_K, _V]):
    """At most :data:`CACHE_LIMIT` entries; a new one in a full cache pushes out the entry used least recently,
    so the few certificates of the agreements in use stay while others come and go (a sender claiming ever new
    PartyIds, say). Safe to use from several threads (the event loop, the work pool, the store writer)."""

    __slots__ = ("_entries", "_lock")

    def __init__(self) -> None:
        self._entries: OrderedDict[_K, _V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _K) -> _V | None:
        """The value remembered for ``key`` (now the most recently used), or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def remember(self, key: _K, value: _V) -> _V:
        """Remember ``value`` for ``key`` and return it."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > CACHE_LIMIT:
                self._entries.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries


# Chains are checked for every signed message and every mutual-TLS request, against the same few certificates:
# their DER encodings, the issuer signatures between them and their basicConstraints, pure functions of the
# certificates, are computed once. Nothing that depends on the instant checked at (validity periods) is kept.
_ders: _Remembered[int, tuple[x509.Certificate, bytes]] = _Remembered()
_issuer_verdicts: _Remembered[tuple[bytes, bytes], bool] = _Remembered()
_ca_verdicts: _Remembered[bytes, bool] = _Remembered()


def _der(certificate: x509.Certificate) -> bytes:
    """The DER encoding of ``certificate``, kept by object identity (the entry holds the object, so its id is not
    reused while the entry lives)."""
    entry = _ders.get(id(certificate))
    if entry is not None and entry[0] is certificate:
        return entry[1]
    return _ders.remember(id(certificate), (certificate, certificate.public_bytes(Encoding.DER)))[1]


def validity_problem(certificate: x509.Certificate, at: datetime) -> str | None:
    """Why ``certificate`` is not valid at ``at`` (expired, or not yet valid), or None when it is."""
    # RFC 5280 §4.1.2.5: a certificate is valid from notBefore to notAfter, both included.
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    if at < certificate.not_valid_before_utc:
        return (
            f"certificate {describe(certificate)} is not valid before "
            f"{certificate.not_valid_before_utc.isoformat()} (checked at {at.isoformat()})"
        )
    if at > certificate.not_valid_after_utc:
        return (
            f"certificate {describe(certificate)} expired on {certificate.not_valid_after_utc.isoformat()} "
            f"(checked at {at.isoformat()})"
        )
    return None


def _signed_by(certificate: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        certificate.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _issued_by(certificate: x509.Certificate, issuer: x509.Certificate) -> bool:
    """Whether ``issuer``'s key made ``certificate``'s signature (and names match), by their DER encodings: the
    answer depends on nothing else, so it is computed once per pair."""
    key = (_der(certificate), _der(issuer))
    verdict = _issuer_verdicts.get(key)
    if verdict is None:
        # RFC 5280 §6.1.3: the issuer's subject is the certificate's issuer name, and its key made the signature.
        verdict = _issuer_verdicts.remember(
            key, issuer.subject == certificate.issuer and _signed_by(certificate, issuer)
        )
    return verdict


def _may_issue(certificate: x509.Certificate) -> bool:
    der = _der(certificate)
    verdict = _ca_verdicts.get(der)
    if verdict is None:
        verdict = _ca_verdicts.remember(der, _is_ca(certificate))
    return verdict


def _is_ca(certificate: x509.Certificate) -> bool:
    # RFC 5280 §4.2.1.9: only a CA certificate (basicConstraints cA true) issues certificates.
    try:
        constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return False
    return constraints.ca


def _by_der(certificates: Iterable[x509.Certificate]) -> dict[bytes, x509.Certificate]:
    """Each of ``certificates`` once (the first of equal ones), by its DER encoding."""
    out: dict[bytes, x509.Certificate] = {}
    for certificate in certificates:
        out.setdefault(_der(certificate), certificate)
    return out


def certificate_path(
    certificate: x509.Certificate,
    anchors: Iterable[x509.Certificate],
    intermediates: Iterable[x509.Certificate] = (),
    *,
    at: datetime,
    max_length: int = MAX_PATH_LENGTH,
) -> tuple[x509.Certificate, ...]:
    """The chain from ``certificate`` to one of ``anchors`` (both included), through ``intermediates``
    (CA certificates, in any order; where they come from does not matter: each issuer's signature is
    checked, and the chain must end at an anchor); every certificate of it valid at ``at``.

    An anchor is trusted as it is (the agreement names it); it need not be a CA to be the certificate
    itself. Raises :class:`UntrustedCertificate` saying why there is no such chain.
    """
    anchor_ders = _by_der(anchors)
    anchor_list = list(anchor_ders.values())
    pool = [c for der, c in _by_der(intermediates).items() if der not in anchor_ders]
    invalid: list[str] = []

    def extend(path: tuple[x509.Certificate, ...]) -> tuple[x509.Certificate, ...] | None:
        current = path[-1]
        if _der(current) in anchor_ders:
            problems = [p for p in (validity_problem(c, at) for c in path) if p is not None]
            invalid.extend(problems)
            return None if problems else path
        if len(path) >= max_length:
            return None
        in_path = {_der(c) for c in path}
        for issuer in (*anchor_list, *pool):
            if _der(issuer) in in_path or not _issued_by(current, issuer):
                continue
            if _der(issuer) not in anchor_ders and not _may_issue(issuer):
                continue
            found = extend((*path, issuer))
            if found is not None:
                return found
        return None

    path = extend((certificate,))
    if path is not None:
        return path
    if invalid:
        raise UntrustedCertificate("; ".join(dict.fromkeys(invalid)))
    names = ", ".join(describe(a) for a in anchor_list) or "none"
    raise UntrustedCertificate(
        f"certificate {describe(certificate)} (issued by {certificate.issuer.rfc4514_string() or 'nobody named'}) "
        f"is not one of the trusted certificates, nor issued by one through a chain of at most {max_length} "
        f"certificates; trusted: {names}"
    )


# An agreement's certificates, all of them and each party's, read for every chain checked under it: kept by the
# agreement's CPAId with the agreement (the object: a reloaded agreement is another one, and replaces it).
_agreement_certificates: _Remembered[str, tuple[CollaborationProtocolAgreement, tuple[x509.Certificate, ...]]] = (
    _Remembered()
)
_party_certificates: _Remembered[
    tuple[str, tuple[PartyKey, ...]], tuple[CollaborationProtocolAgreement, tuple[x509.Certificate, ...]]
] = _Remembered()


def _readable(ders: Iterable[bytes]) -> tuple[x509.Certificate, ...]:
    return tuple(_by_der(c for c in (load_certificate(der) for der in ders) if c is not None).values())


def agreement_certificates(cpa: CollaborationProtocolAgreement) -> tuple[x509.Certificate, ...]:
    """Every certificate written in the agreement (both parties' Certificate elements), readable ones only."""
    entry = _agreement_certificates.get(cpa.cpaid)
    if entry is not None and entry[0] is cpa:
        return entry[1]
    found = _readable(der for info in cpa.party_infos for cert in info.certificates for der in cert.x509)
    return _agreement_certificates.remember(cpa.cpaid, (cpa, found))[1]


def party_certificates(
    cpa: CollaborationProtocolAgreement, claimed: Iterable[PartyKey]
) -> tuple[x509.Certificate, ...]:
    """The certificates the PartyInfo of the party with one of the ``claimed`` PartyIds names (CPP/A 2.0
    §8.4.33), readable ones only."""
    key = (cpa.cpaid, tuple(claimed))
    entry = _party_certificates.get(key)
    if entry is not None and entry[0] is cpa:
        return entry[1]
    wanted = set(key[1])
    infos = [info for info in cpa.party_infos if wanted & set(party_keys(info))]
    found = _readable(der for info in infos for cert in info.certificates for der in cert.x509)
    return _party_certificates.remember(key, (cpa, found))[1]


def party_certificate_problem(
    cpa: CollaborationProtocolAgreement,
    claimed: Sequence[PartyKey],
    presented: x509.Certificate,
    *,
    at: datetime,
    intermediates: Iterable[x509.Certificate] = (),
) -> str | None:
    """Why ``presented`` does not belong to the party with the ``claimed`` PartyIds under ``cpa``, or None
    when it does, or when the agreement gives no way to tell (the party is not in it, or names no
    certificate).

    docs/design.md §7: the certificate a partner presents must belong to the party the header claims. It
    belongs when it chains, through any number of CA certificates (``intermediates``, and every certificate
    written in the agreement), to a certificate that party's PartyInfo names, and every certificate of that
    chain is valid at ``at``: expired and not-yet-valid certificates are refused.
    """
    owned = party_certificates(cpa, claimed)
    if not owned:
        return None
    try:
        certificate_path(presented, owned, (*intermediates, *agreement_certificates(cpa)), at=at)
    except UntrustedCertificate as exc:
        return str(exc)
    return None
