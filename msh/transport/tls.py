"""TLS for the endpoint and the client, from the settings and the agreements (CPP/A 2.0 §8.4.26-§8.4.31).

The server presents our certificate and, with ``tls.require_client_certificate``, asks every client for
one that chains to a trust anchor: the certificates the agreements name as ``ClientSecurityDetails`` of our
``TransportReceiver`` (or, lacking those, the other party's own certificates), plus ``tls.trusted``. The
client presents the same certificate and verifies the partner's server against the agreement's
``ServerSecurityDetails`` for that channel (plus ``tls.trusted``), host name included.

Every certificate so named is a trust anchor as it is (:func:`_trust_as_named`): a partner's self-signed
leaf (``msh keys generate``, a CA flag or not) or a CA-issued certificate named without its CA is trusted
for exactly what it is, as the agreement says (OpenSSL's partial-chain verification); a named CA
certificate also vouches for what it issues. Host names are always verified against the server
certificate's subjectAltName.

A trusted client certificate is not yet the right one: every partner's certificate is trusted, and a
partner could claim to be another. :func:`client_certificate_issue` binds the certificate presented on the
connection to the party the message header names as From (docs/design.md §7): it must be one of the
certificates that party's ``PartyInfo`` names in the agreement of the header's CPAId, or chain to one of them
through CA certificates of any number, every certificate of the chain valid now; otherwise the message is
refused with a SecurityFailure error. The chain check is :mod:`cpa.trust`'s, shared with the signature check
of :mod:`msh.security`.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from cpa.model import Certificate, CollaborationProtocolAgreement, SecurityDetails
from cpa.resolve import SendingParameters, party_keys
from cpa.trust import (
    UntrustedCertificate,
    certificate_path,
    describe,
    load_certificate,
    party_certificate_problem,
    party_certificates,
)
from msh.ebms.model import Party
from msh.engine.routing import Route
from msh.errors import ConfigurationError, ErrorCode, Issue, Severity

__all__ = ["ClientContexts", "certificate_of", "client_certificate_issue", "server_context", "trust_anchors_pem"]

FROM_PARTY_ID = "//Header/MessageHeader/From/PartyId"


@functools.lru_cache(maxsize=256)
def _pem(der: bytes) -> str:
    """The PEM text of the certificate ``der``: the same few certificates are written for every context."""
    return x509.load_der_x509_certificate(der).public_bytes(Encoding.PEM).decode("ascii")


def _certificates_pem(certs: Iterable[Certificate]) -> list[str]:
    return [_pem(der) for c in certs for der in c.x509]


def trust_anchors_pem(agreements: Iterable[CollaborationProtocolAgreement], our_party: tuple[str, str | None]) -> str:
    """PEM text of the certificates our server accepts from clients, drawn from ``agreements``."""
    out: list[str] = []
    for cpa in agreements:
        ours = [p for p in cpa.party_infos if our_party in party_keys(p)]
        theirs = [p for p in cpa.party_infos if our_party not in party_keys(p)]
        for info in ours:
            for channel in (*info.delivery_channels, info.default_msh_channel):
                receiver = channel.transport.receiver
                security = receiver.server_security if receiver is not None else None
                if security is not None and security.peer_security is not None:
                    out += _certificates_pem(security.peer_security.trust_anchors)
        for info in theirs:
            # A partner's own certificates are what its client presents when the agreement names no anchors.
            out += _certificates_pem(info.certificates)
    return "".join(dict.fromkeys(out))


def _trust_as_named(context: ssl.SSLContext) -> None:
    """Make every certificate loaded into ``context``'s verify store a trust anchor by itself (CPP/A 2.0
    §8.4.33, §8.4.35: the agreement names the certificates to trust; OpenSSL's X509_V_FLAG_PARTIAL_CHAIN),
    so that a verification succeeds when the peer's chain reaches any of them, a leaf included; without it
    OpenSSL accepts a named certificate only if it is a self-signed root, and refuses a CA-issued leaf
    the agreement names without its CA. Host name checks are untouched."""
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN


def _trusts_any(context: ssl.SSLContext) -> bool:
    """Whether ``context``'s verify store holds any certificate: CA certificates and leaf ones alike
    (``get_ca_certs()`` lists only those with the CA flag, so a partner's self-signed leaf escapes it)."""
    return context.cert_store_stats()["x509"] > 0


def _load_extra(context: ssl.SSLContext, trusted: Iterable[Path]) -> None:
    for path in trusted:
        try:
            context.load_verify_locations(cafile=str(path))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(f"tls.trusted: cannot load {path} as PEM certificates: {exc}") from None


def _load_own(context: ssl.SSLContext, certificate: Path | None, private_key: Path | None, what: str) -> None:
    if certificate is None or private_key is None:
        raise ConfigurationError(f"{what} needs tls.certificate and tls.private_key (PEM files)")
    try:
        context.load_cert_chain(str(certificate), str(private_key))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigurationError(
            f"tls.certificate/tls.private_key: cannot load {certificate} with {private_key}: {exc}"
        ) from None


def server_context(
    *,
    certificate: Path | None,
    private_key: Path | None,
    client_anchors_pem: str,
    trusted: Iterable[Path] = (),
    require_client_certificate: bool = True,
) -> ssl.SSLContext:
    """The server's TLS context (TLS 1.2 or newer)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_own(context, certificate, private_key, "server.tls")
    if require_client_certificate:
        _trust_as_named(context)
        if client_anchors_pem:
            context.load_verify_locations(cadata=client_anchors_pem)
        _load_extra(context, trusted)
        if not _trusts_any(context):
            raise ConfigurationError(
                "tls.require_client_certificate is on but no agreement names a certificate to trust and "
                "tls.trusted is empty: add the partners' certificates or turn client certificates off"
            )
        # CPP/A 2.0 §8.4.31: ClientSecurityDetails - the client must authenticate with a trusted certificate.
        context.verify_mode = ssl.CERT_REQUIRED
    return context


@dataclass(frozen=True, slots=True)
class _AgreementContext:
    """A client context made for an agreement's channel, with what it was made from: the agreement's
    ServerSecurityDetails and server certificate (the objects) and the PEM text of its trust anchors."""

    server_trust: SecurityDetails | None
    server_certificate: Certificate | None
    anchors_pem: str
    context: ssl.SSLContext


def _server_anchors_pem(server_trust: SecurityDetails | None, server_certificate: Certificate | None) -> str:
    anchors = server_trust.trust_anchors if server_trust is not None else ()
    if server_certificate is not None:
        anchors = (*anchors, server_certificate)
    return "".join(_certificates_pem(anchors))


class ClientContexts:
    """One client TLS context per destination, built on first use: per (agreement, channel), made again when
    the agreement (reloaded) names other certificates for the partner's server; per route; per URL."""

    def __init__(self, *, certificate: Path | None, private_key: Path | None, trusted: Iterable[Path] = ()) -> None:
        self._certificate = certificate
        self._private_key = private_key
        self._trusted = tuple(trusted)
        self._cache: dict[tuple[str, str], ssl.SSLContext] = {}
        self._agreements: dict[tuple[str, str], _AgreementContext] = {}

    def for_parameters(self, params: SendingParameters) -> ssl.SSLContext | None:
        """The context for sending under ``params`` (None for a plain http:// endpoint): it trusts the
        agreement's server certificate and trust anchors and ``tls.trusted`` (the system CAs when none of
        them names a certificate). After an agreement reload it trusts what the reloaded agreement names: a
        context is reused only while those certificates are the same."""
        transport = params.transport
        if not transport.endpoint_url.lower().startswith("https:"):
            return None
        key = (params.cpaid, params.sending_channel_id)
        server_trust, server_certificate = transport.tls_server_trust, transport.tls_server_certificate
        made = self._agreements.get(key)
        if made is not None and made.server_trust is server_trust and made.server_certificate is server_certificate:
            return made.context  # the same agreement elements as last time (frozen): the same anchors
        anchors_pem = _server_anchors_pem(server_trust, server_certificate)
        if made is None or made.anchors_pem != anchors_pem:
            # CPP/A 2.0 §8.4.26, §8.4.31: the server certificate and trust anchors the agreement names now.
            context = self._new_context(anchors_pem=anchors_pem, trusted=self._trusted, system_cas=None)
        else:
            context = made.context  # a reloaded agreement naming the same certificates
        self._agreements[key] = _AgreementContext(server_trust, server_certificate, anchors_pem, context)
        return context

    def for_route(self, route: Route) -> ssl.SSLContext | None:
        """The context for sending to a route's next hop (None for a plain http:// one): it trusts the
        route's ``trusted`` certificates (``tls.trusted`` and the system CAs when it names none)."""
        if not route.next_hop.lower().startswith("https:"):
            return None
        key = ("route", f"{route.name}|{route.next_hop}")
        if route.trusted:
            return self._context(key, trusted=tuple(Path(p) for p in route.trusted), system_cas=False)
        return self._context(key, trusted=self._trusted, system_cas=True)

    def for_url(self, url: str) -> ssl.SSLContext | None:
        """A context for ``url`` without an agreement at hand (trusts ``tls.trusted`` and system CAs)."""
        if not url.lower().startswith("https:"):
            return None
        return self._context(("", url), trusted=self._trusted, system_cas=True)

    def _context(
        self, key: tuple[str, str], *, anchors_pem: str = "", trusted: Iterable[Path], system_cas: bool | None
    ) -> ssl.SSLContext:
        """:meth:`_new_context`, cached by ``key``."""
        context = self._cache.get(key)
        if context is None:
            context = self._cache[key] = self._new_context(
                anchors_pem=anchors_pem, trusted=trusted, system_cas=system_cas
            )
        return context

    def _new_context(self, *, anchors_pem: str, trusted: Iterable[Path], system_cas: bool | None) -> ssl.SSLContext:
        """The one way a client context is made: TLS 1.2 or newer; trusting ``anchors_pem`` and the
        ``trusted`` files, and the system CAs (always when ``system_cas`` is True, only when nothing else is
        trusted when it is None, never when False); authenticating with our certificate when we have one
        (CPP/A 2.0 §8.4.26: ClientCertificateRef)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        _trust_as_named(context)
        if anchors_pem:
            context.load_verify_locations(cadata=anchors_pem)
        _load_extra(context, trusted)
        if system_cas or (system_cas is None and not _trusts_any(context)):
            context.load_default_certs()
        if self._certificate is not None and self._private_key is not None:
            _load_own(context, self._certificate, self._private_key, "TLS client authentication")
        return context


def client_certificate_issue(
    cpa: CollaborationProtocolAgreement,
    from_party: Party,
    presented: bytes,
    *,
    now: datetime | None = None,
    chain: Sequence[bytes] = (),
    to_party: Party | None = None,
) -> Issue | None:
    """The SecurityFailure to report when the TLS client certificate ``presented`` (DER) does not belong to
    ``from_party`` under ``cpa`` at ``now`` (default: the current time); None when it does, or when the
    agreement gives no way to tell (the party is not in it, which the header check reports, or its
    PartyInfo names no certificate). ``chain``: the intermediate certificates the client sent (DER), if
    the TLS layer gives them.

    docs/design.md §7: the certificate a partner presents must belong to the party the header claims. It
    belongs when it is one of the certificates of that party's PartyInfo (CPP/A 2.0 §8.4.33), or chains
    to one of them through CA certificates of any number (:func:`cpa.trust.party_certificate_problem`),
    and every certificate of that chain is valid at ``now``: an expired or not-yet-valid one is refused.
    ebMS2 §10: a certificate that belongs so to the ``to_party`` (ours) is taken too: the agreement names
    it for the intermediary that forwards to us (the To party's endpoint is the intermediary's, and the
    intermediary presents the certificate the agreement lists for that endpoint).
    """
    claimed = tuple((p.value, p.type) for p in from_party.party_ids)
    if not party_certificates(cpa, claimed):
        return None
    first = from_party.party_ids[0]
    leaf = load_certificate(presented)
    if leaf is None:
        problem: str | None = (
            f"the TLS client certificate is unreadable (not DER X.509), so it is not a certificate of party "
            f"{first.value!r}, nor issued by one, in agreement {cpa.cpaid!r}"
        )
    else:
        intermediates = [c for c in (load_certificate(der) for der in chain) if c is not None]
        at = now if now is not None else datetime.now(UTC)
        problem = party_certificate_problem(cpa, claimed, leaf, at=at, intermediates=intermediates)
        if problem is not None and to_party is not None:
            ours = tuple((p.value, p.type) for p in to_party.party_ids)
            if party_certificates(cpa, ours) and (
                party_certificate_problem(cpa, ours, leaf, at=at, intermediates=intermediates) is None
            ):
                problem = None  # ebMS2 §10: the intermediary the agreement names in front of us
        if problem is not None:
            problem = (
                f"the TLS client certificate ({describe(leaf)}) is not a certificate of party {first.value!r}, "
                f"nor issued by one, in agreement {cpa.cpaid!r}: {problem}"
            )
    if problem is None:
        return None
    return Issue(
        ErrorCode.SECURITY_FAILURE,
        Severity.ERROR,
        f"{problem}; a partner may only send as itself (docs/design.md §7)",
        FROM_PARTY_ID,
    )


def certificate_of(presented: bytes, owned: Iterable[bytes], *, at: datetime | None = None) -> bool:
    """Whether the certificate ``presented`` (DER) is one of ``owned`` (DER), or chains to one of them
    (:func:`cpa.trust.certificate_path`), valid at ``at`` (default: now)."""
    leaf = load_certificate(presented)
    anchors = [c for c in (load_certificate(der) for der in owned) if c is not None]
    if leaf is None or not anchors:
        return False
    try:
        certificate_path(leaf, anchors, (), at=at if at is not None else datetime.now(UTC))
    except UntrustedCertificate:
        return False
    return True
