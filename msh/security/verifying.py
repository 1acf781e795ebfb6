"""Verifying the signature of a received ebXML message (ebMS2 §4.1.3, §4.1.4.1).

:func:`verify` checks the first ``ds:Signature`` of the SOAP Header with a key the caller trusts (the From
party's certificate in the agreement: never whatever KeyInfo the message carries, which may hold an
X509Certificate, an X509IssuerSerial, a KeyName, a KeyValue or be absent), after checking that

* the signature is in the profile (:func:`~msh.security.profile.profile_problems`): the envelope signed by
  one Reference ``URI=""`` leaving out at most the elements targeted at the next MSH or the next SOAP node,
  algorithms this MSH implements;
* each payload Reference names a part of this message, by its ``cid:`` Content-ID URI or its
  Content-Location (:func:`~msh.security.references.resolve`; a URI outside the package is refused: this
  MSH fetches nothing);
* the certificate is valid at the given instant and chains to the trust anchors (:mod:`cpa.trust`);
* the algorithms are the ones the agreement names, when it names some.

The References may come in any order, and the payload parts in any order in the package: each Reference
names its part, whatever its place (XML-DSig core validation checks each Reference by its URI).

**Decision: payload parts the signature does not cover.** ebMS2 §4.1.3 asks for a Reference for "each
payload object requiring signing" and for "any required payload objects", so a signature may leave a
payload out; which payloads require signing is not said by the agreement as this MSH reads it (CPP/A 2.0
signs per message, a SenderNonRepudiation on the channel, never per payload). So the envelope Reference
is required, and a payload part without a Reference is accepted but never passed off as signed: the
:class:`Verification` lists the parts covered (:attr:`~Verification.signed_payloads`) and those not
(:attr:`~Verification.unsigned_payloads`), with a Warning issue (SecurityFailure) for each of the latter,
for the application to decide. A Reference naming a part the package does not carry, or whose digest does
not match, is always refused.

**How it is checked.** An RSA signature in the profile is checked first without libxmlsec
(:func:`msh.security.fast_verifying.verified_without_xmlsec`): the received tree canonicalised once, in place
(marks in its texts, set back afterwards), the digests and the RSA signature of the canonical SignedInfo
computed as libxmlsec computes them. That check can only accept: whatever it cannot tell (a signature read
otherwise by libxmlsec, another algorithm or key type, ``xml:`` attributes above the signature) or that does
not match is verified by libxmlsec, which says what failed. With several certificates to try (the party's
CA and the certificate it issued, say), each is tried that way before any is tried with libxmlsec. The
signature's elements are read with ``iterchildren`` and one walk of each element's children, not lxml's
ElementPath, which would be run a few dozen times for every message.

Every failure is a :class:`~msh.errors.SecurityError` (errorCode SecurityFailure, severity Error) whose
issues name what failed: each Reference whose digest does not match (location the ``cid:`` URI of its
part, or the envelope's Reference), each Reference the profile refuses (location that Reference), or the
SignatureValue when every digest matches but the key is not the one that signed.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from lxml import etree

from cpa.trust import UntrustedCertificate, certificate_path, describe, load_certificate, validity_problem
from msh.errors import ErrorCode, Issue, SecurityError, Severity
from msh.safexml import XmlLimits, parse_xml
from msh.security import fast_verifying
from msh.security.algorithms import SignatureAlgorithm
from msh.security.digests import ReferenceDigest, claimed_digests, reference_digests
from msh.security.dsa_keys import DSAPublicKey
from msh.security.library import Payload, public_key, resolving_parts, restrict_transforms, xmlsec
from msh.security.profile import (
    ENVELOPE_REFERENCE,
    SIGNATURE,
    ds,
    ds_children,
    first_signature,
    profile_notes,
    profile_problems,
    reference_path,
)
from msh.security.references import PackageParts, Resolution, resolve

__all__ = ["Verification", "keyinfo_certificates", "reference_location", "verify"]


@dataclass(frozen=True, slots=True)
class Verification:
    """A signature that verified: the certificate whose key made it (with its chain to the trust anchor),
    its SignatureMethod, its References (each digest checked) and its ``ds:Signature`` element (of the
    tree verified), whose References are also given as the XML text a receipt copies
    (:attr:`reference_elements`, ebMS2 §6.3.2.5).

    ``signed_payloads``: the Content-IDs of the payload parts a Reference covers (their content is what was
    signed); ``unsigned_payloads``: those no Reference covers (in package order; their content is not
    vouched for by the signature), each also a Warning in ``warnings``, with the deviations from the
    profile's form the signature was accepted with (:func:`~msh.security.profile.profile_notes`)."""

    signer: x509.Certificate
    chain: tuple[x509.Certificate, ...]
    signature_algorithm: str
    references: tuple[ReferenceDigest, ...]
    signature_element: etree._Element = field(compare=False, repr=False)
    signed_payloads: tuple[str, ...] = ()
    unsigned_payloads: tuple[str, ...] = ()
    warnings: tuple[Issue, ...] = ()

    @property
    def reference_elements(self) -> tuple[str, ...]:
        """The ``ds:Reference`` elements of the signature's SignedInfo as XML text (ebMS2 §6.3.2.5: what a
        receipt copies), written when asked for: most verifications never need them."""
        return tuple(
            etree.tostring(r, encoding="unicode", with_tail=False)
            for r in ds_children(self.signature_element, "SignedInfo", "Reference")
        )


def reference_location(uri: str) -> str:
    """ebMS2 §4.2.3.2.5 location of the Reference with ``uri``: its ``cid:`` URI for a payload part named by
    Content-ID, the envelope Reference's path for ``""``, else the path of that Reference."""
    if uri == "":
        return ENVELOPE_REFERENCE
    return uri if uri[:4].lower() == "cid:" else reference_path(uri)


def _fail(issues: Sequence[Issue]) -> SecurityError:
    head = issues[0]
    return SecurityError(head.description, location=head.location, issues=tuple(issues))


def _issue(description: str, location: str) -> Issue:
    return Issue(ErrorCode.SECURITY_FAILURE, Severity.ERROR, description, location)


def keyinfo_certificates(signature: etree._Element) -> tuple[x509.Certificate, ...]:
    """The certificates the signature's KeyInfo carries (readable ones only; for information, for a chain's
    intermediates and for ``msh message verify --keyinfo``: never trusted for being there)."""
    out = []
    for node in ds_children(signature, "KeyInfo", "X509Data", "X509Certificate"):
        certificate = _certificate(node.text or "")
        if certificate is not None:
            out.append(certificate)
    return tuple(out)


@functools.lru_cache(maxsize=32)
def _certificate(text: str) -> x509.Certificate | None:
    """The certificate of an X509Certificate's base64 text as it is written, white space and all (None:
    unreadable); a partner sends the same one in every message, so each is decoded once, by the loader the
    agreement's certificates go through (:func:`cpa.trust.load_certificate`): the one an agreement names is
    then the same object, whose chain checks :mod:`cpa.trust` remembers."""
    try:
        der = base64.b64decode("".join(text.split()))
    except binascii.Error:
        return None
    return load_certificate(der)


def _notes(signature: etree._Element) -> tuple[Issue, ...]:
    return tuple(
        Issue(ErrorCode.SECURITY_FAILURE, Severity.WARNING, text, where) for text, where in profile_notes(signature)
    )


def _unsigned_warnings(resolution: Resolution) -> tuple[Issue, ...]:
    return tuple(
        # ebMS2 §4.1.3: "Each payload object requiring signing SHALL be represented by a Reference": this one is
        # not, so the signature says nothing of its content.
        Issue(
            ErrorCode.SECURITY_FAILURE,
            Severity.WARNING,
            f"payload part cid:{cid} is not covered by the signature (no Reference names it): its content is not "
            "signed",
            f"cid:{cid}",
        )
        for cid in resolution.unsigned
    )


def _outside_header(root: etree._Element) -> list[Issue]:
    """Why a message whose SOAP Header has no ds:Signature is refused: it has none, or has one elsewhere."""
    for element in root.iter(ds("Signature")):
        path = "/" + "/".join(
            etree.QName(e).localname for e in reversed([element, *element.iterancestors()]) if isinstance(e.tag, str)
        )
        return [
            _issue(
                f"the message's ds:Signature is at {path}, not a child of the SOAP Header: ebMS2 §4.1.1 puts the "
                "signature of the message there, so it is not verified as one",
                path,
            )
        ]
    # ebMS2 §4.1.1: a signed message carries ds:Signature as a child of the SOAP Header.
    return [_issue("the message is not signed: its SOAP Header has no ds:Signature (ebMS2 §4.1.1)", SIGNATURE)]


def _signature_method(signature: etree._Element) -> str:
    """The Algorithm of the signature's SignatureMethod ("" when it has none)."""
    method = next(iter(ds_children(signature, "SignedInfo", "SignatureMethod")), None)
    return method.get("Algorithm", "") if method is not None else ""


def _algorithm_issues(
    signature: etree._Element,
    claimed: Sequence[ReferenceDigest],
    signature_algorithms: Collection[str] | None,
    digest_algorithms: Collection[str] | None,
) -> list[Issue]:
    issues = []
    used = _signature_method(signature)
    if signature_algorithms is not None and used not in signature_algorithms:
        issues.append(
            _issue(
                f"the message is signed with {used or 'no SignatureMethod'}; the agreement says "
                f"{' or '.join(sorted(signature_algorithms))}",
                SIGNATURE,
            )
        )
    if digest_algorithms is not None:
        for reference in claimed:
            if reference.digest_algorithm not in digest_algorithms:
                issues.append(
                    _issue(
                        f"the Reference {reference.uri or '(the envelope)'} uses DigestMethod "
                        f"{reference.digest_algorithm or 'none'}; the agreement says "
                        f"{' or '.join(sorted(digest_algorithms))}",
                        reference_location(reference.uri),
                    )
                )
    return issues


def _context(certificate: x509.Certificate) -> xmlsec.SignatureContext:
    context = xmlsec.SignatureContext()
    context.key = public_key(certificate)
    return restrict_transforms(context)


def _usable(
    trusted: Sequence[x509.Certificate],
    anchors: Sequence[x509.Certificate] | None,
    intermediates: Sequence[x509.Certificate],
    at: datetime,
) -> tuple[list[tuple[x509.Certificate, tuple[x509.Certificate, ...]]], list[Issue]]:
    usable: list[tuple[x509.Certificate, tuple[x509.Certificate, ...]]] = []
    issues: list[Issue] = []
    for certificate in trusted:
        if anchors is None:
            problem = validity_problem(certificate, at)
            if problem is None:
                usable.append((certificate, (certificate,)))
            else:
                issues.append(_issue(f"the signing certificate cannot be used: {problem}", SIGNATURE))
            continue
        try:
            usable.append((certificate, certificate_path(certificate, anchors, intermediates, at=at)))
        except UntrustedCertificate as exc:
            issues.append(_issue(f"the signing certificate is not trusted: {exc}", SIGNATURE))
    return usable, issues


def verify(
    soap: bytes,
    payloads: Mapping[str, Payload],
    trusted: x509.Certificate | Sequence[x509.Certificate],
    *,
    anchors: Sequence[x509.Certificate] | None = None,
    intermediates: Sequence[x509.Certificate] = (),
    at: datetime | None = None,
    signature_algorithms: Collection[str] | None = None,
    digest_algorithms: Collection[str] | None = None,
    locations: Mapping[str, str] | None = None,
    parsed: etree._Element | None = None,
) -> Verification:
    """Verify the ebMS signature of the SOAP part ``soap`` (the bytes as received) over it and ``payloads``
    (Content-ID -> content after any Content-Transfer-Encoding, decrypted if it was encrypted, in package
    order) with the key of one of the ``trusted`` certificates. ``locations`` maps the Content-ID of each
    part that has a Content-Location header to it, for References that name a part by its Content-Location.

    Each trusted certificate must be valid at ``at`` (default: now) and, when ``anchors`` is given, chain to
    one of them through ``intermediates``. ``signature_algorithms`` and ``digest_algorithms``, when given,
    are the only SignatureMethod and DigestMethod URIs accepted (the agreement's). ``parsed``: ``soap``
    already parsed by :func:`msh.safexml.parse_xml` (read only here), to spare a second parse.

    Returns the :class:`Verification` (with the payload parts covered and not covered); raises
    :class:`~msh.errors.SecurityError` saying what failed and where (see the module docs),
    :class:`~msh.errors.EnvelopeError` when ``soap`` is not XML.
    """
    trusted = (trusted,) if isinstance(trusted, x509.Certificate) else tuple(trusted)
    at = at if at is not None else datetime.now(UTC)
    root = (
        parsed
        if parsed is not None
        else parse_xml(soap, what="SOAP envelope", limits=XmlLimits(max_bytes=max(len(soap), 1)))
    )
    signature = first_signature(root)
    if signature is None:
        raise _fail(_outside_header(root))
    parts = PackageParts.of(payloads, locations)
    resolution = resolve(signature, parts)
    issues = [_issue(text, where) for text, where in (*profile_problems(signature), *resolution.problems)]
    claimed = tuple(claimed_digests(signature))
    issues += _algorithm_issues(signature, claimed, signature_algorithms, digest_algorithms)
    if issues:
        raise _fail(issues)
    if not trusted:
        raise _fail([_issue("no certificate to verify the signature with: the agreement names none", SIGNATURE)])
    usable, certificate_issues = _usable(trusted, anchors, intermediates, at)
    if not usable:
        raise _fail(certificate_issues)
    uris = resolution.uri_table()
    accepted = _signer(root, signature, parts, uris, usable)
    if accepted is None:
        raise _fail(_explain(root, signature, parts, resolution, [c for c, _ in usable]))
    certificate, chain = accepted
    return Verification(
        certificate,
        chain,
        _signature_method(signature),
        claimed,
        signature,
        signed_payloads=tuple(cid for cid in parts.contents if cid in resolution.signed),
        unsigned_payloads=resolution.unsigned,
        warnings=(*_notes(signature), *_unsigned_warnings(resolution)),
    )


def _signer(
    root: etree._Element,
    signature: etree._Element,
    parts: PackageParts,
    uris: Mapping[str, str],
    usable: Sequence[tuple[x509.Certificate, tuple[x509.Certificate, ...]]],
) -> tuple[x509.Certificate, tuple[x509.Certificate, ...]] | None:
    """The first of the ``usable`` certificates (with its chain) whose key made the signature, else None.

    The profile's RSA signature is checked without libxmlsec's per-node XPath filter with every certificate
    first (the digests and SignedInfo's canonical form computed once, then one RSA check per certificate);
    libxmlsec verifies only what that path accepts with none (fast_verifying can only accept, never
    refuse). So a certificate whose key did not sign (the party's CA named before the certificate it issued)
    costs no libxmlsec check when another one's key signed. The certificate found is the one trying each in
    turn with both would find: two certificates verify one signature only when they hold the same key, which
    the first path answers for alike."""
    # The digests and SignedInfo's canonical form are the same whatever the key: computed once (and not at all
    # when no certificate has an RSA key, the only kind this path checks).
    rsa_keys = any(isinstance(certificate.public_key(), rsa.RSAPublicKey) for certificate, _chain in usable)
    matched = fast_verifying.digests_matched(root, signature, parts.contents, uris) if rsa_keys else None
    if matched is not None:
        for certificate, chain in usable:
            if matched.verified_by(certificate):
                return certificate, chain
    for certificate, chain in usable:
        try:
            with resolving_parts(parts.contents, uris):
                _context(certificate).verify(signature)
        except xmlsec.Error:
            continue
        return certificate, chain
    return None


def _explain(
    root: etree._Element,
    signature: etree._Element,
    parts: PackageParts,
    resolution: Resolution,
    keys: Sequence[x509.Certificate],
) -> list[Issue]:
    """Why the signature did not verify: the References whose digest differs, else the SignatureValue."""
    issues = []
    located = {r.uri: r.location for r in resolution.references}
    computed_digests = reference_digests(root, parts.contents, uris=resolution.uri_table())
    for claimed, computed in zip(claimed_digests(signature), computed_digests, strict=True):
        where = ENVELOPE_REFERENCE if claimed.uri == "" else located.get(claimed.uri, reference_location(claimed.uri))
        what = "the SOAP envelope" if claimed.uri == "" else f"payload part {where}"
        if computed.digest is None:
            issues.append(_issue(f"the digest of {what} (Reference URI={claimed.uri!r}) cannot be computed", where))
        elif computed.digest != claimed.digest:
            changed = "payload" if claimed.uri != "" else "envelope (outside the nextMSH/next elements)"
            issues.append(
                _issue(
                    f"the digest of {what} (Reference URI={claimed.uri!r}) does not match its DigestValue: the "
                    f"{changed} was changed after it was signed",
                    where,
                )
            )
    if issues:
        return issues
    names = "; ".join(describe(c) for c in keys)
    method = signature.find(f"{ds('SignedInfo')}/{ds('SignatureMethod')}")
    algorithm = SignatureAlgorithm(method.get("Algorithm", "")) if method is not None else None
    kinds = {_key_type(c) for c in keys}
    if algorithm is not None and algorithm.key_type not in kinds:
        return [
            _issue(
                f"the message is signed with {algorithm.value}, which needs a key of type {algorithm.key_type}, and "
                f"the certificate it is checked with ({names}) has a key of type {' or '.join(sorted(kinds))}: the "
                "message was signed with another key than the agreement's",
                SIGNATURE,
            )
        ]
    carried = [describe(c) for c in keyinfo_certificates(signature) if c not in keys]
    hint = f" (its KeyInfo carries the certificate {'; '.join(carried)})" if carried else ""
    return [
        _issue(
            f"the SignatureValue does not verify with the key of {names}: the message was signed with another "
            f"key{hint}, or its SignedInfo was changed",
            SIGNATURE,
        )
    ]


def _key_type(certificate: x509.Certificate) -> str:
    key = certificate.public_key()
    if isinstance(key, rsa.RSAPublicKey):
        return "RSA"
    if isinstance(key, DSAPublicKey):
        return "DSA"
    if isinstance(key, ec.EllipticCurvePublicKey):
        return "EC"
    return type(key).__name__
