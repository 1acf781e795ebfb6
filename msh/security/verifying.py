"""Verifying the signature of a received ebXML message (ebMS2 §4.1.3, §4.1.4.1).

:func:`verify` checks the first ``ds:Signature`` of the SOAP Header with a key the caller trusts (the From
party's certificate in the agreement: never whatever KeyInfo the message carries), after checking that

* the signature is in the profile: one Reference signs the whole envelope, leaving out only the elements
  targeted at the next MSH or the next SOAP node, and the others name the message's own ``cid:`` parts
  (:func:`~msh.security.profile.profile_problems`);
* every payload part is signed, no signed part is missing, and the parts come in the order they were
  signed in;
* the certificate is valid at the given instant and chains to the trust anchors (:mod:`cpa.trust`);
* the algorithms are the ones the agreement names, when it names some.

Every failure is a :class:`~msh.errors.SecurityError` (errorCode SecurityFailure, severity Error) whose
issues name what failed: each Reference whose digest does not match (location its ``cid:`` URI, or the
envelope's Reference), or the SignatureValue when every digest matches but the key is not the one that
signed.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography import x509
from lxml import etree

from cpa.trust import UntrustedCertificate, certificate_path, describe, validity_problem
from msh.errors import ErrorCode, Issue, SecurityError, Severity
from msh.safexml import XmlLimits, parse_xml
from msh.security import fast_signing
from msh.security.digests import ReferenceDigest, claimed_digests, reference_digests
from msh.security.library import Payload, bare_content_id, public_key, resolving_parts, restrict_transforms, xmlsec
from msh.security.profile import ENVELOPE_REFERENCE, SIGNATURE, ds, first_signature, profile_problems

__all__ = ["Verification", "keyinfo_certificates", "reference_location", "verify"]


@dataclass(frozen=True, slots=True)
class Verification:
    """A signature that verified: the certificate whose key made it (with its chain to the trust anchor),
    its SignatureMethod, and its References (each digest checked), also as the ``ds:Reference`` XML text a
    receipt copies (ebMS2 §6.3.2.5)."""

    signer: x509.Certificate
    chain: tuple[x509.Certificate, ...]
    signature_algorithm: str
    references: tuple[ReferenceDigest, ...]
    reference_elements: tuple[str, ...]


def reference_location(uri: str) -> str:
    """ebMS2 §4.2.3.2.5 location of the Reference with ``uri``: its ``cid:`` URI for a payload part, else
    the envelope Reference's path."""
    return uri if uri[:4].lower() == "cid:" else ENVELOPE_REFERENCE


def _fail(issues: Sequence[Issue]) -> SecurityError:
    head = issues[0]
    return SecurityError(head.description, location=head.location, issues=tuple(issues))


def _issue(description: str, location: str) -> Issue:
    return Issue(ErrorCode.SECURITY_FAILURE, Severity.ERROR, description, location)


def keyinfo_certificates(signature: etree._Element) -> tuple[x509.Certificate, ...]:
    """The certificates the signature's KeyInfo carries (readable ones only; for information, for a chain's
    intermediates and for ``msh message verify --keyinfo``: never trusted for being there)."""
    out = []
    for node in signature.iterfind(f"{ds('KeyInfo')}/{ds('X509Data')}/{ds('X509Certificate')}"):
        try:
            out.append(x509.load_der_x509_certificate(base64.b64decode("".join((node.text or "").split()))))
        except (binascii.Error, ValueError):
            continue
    return tuple(out)


def _coverage_issues(signature: etree._Element, payloads: Mapping[str, Payload]) -> list[Issue]:
    """Payload parts the signature does not cover, signed parts the message lacks, and parts out of the
    signed order."""
    signed = [
        bare_content_id(uri)
        for uri in (r.get("URI", "") for r in signature.iterfind(f"{ds('SignedInfo')}/{ds('Reference')}"))
        if uri[:4].lower() == "cid:"
    ]
    present = [bare_content_id(cid) for cid in payloads]
    issues = [
        # ebMS2 §4.1.3: each payload object requiring signing SHALL be represented by a Reference.
        _issue(f"payload part cid:{cid} is not covered by the signature (no Reference names it)", f"cid:{cid}")
        for cid in present
        if cid not in signed
    ]
    issues += [
        _issue(f"the signature signs payload part cid:{cid}, which the message does not carry", f"cid:{cid}")
        for cid in signed
        if cid not in present
    ]
    in_both = [cid for cid in present if cid in signed]
    if not issues and in_both != [cid for cid in signed if cid in present]:
        issues.append(
            _issue(
                f"the payload parts are in the order {', '.join(in_both)}, not in the order they were signed in "
                f"({', '.join(c for c in signed if c in present)})",
                f"cid:{in_both[0]}",
            )
        )
    return issues


def _algorithm_issues(
    signature: etree._Element, signature_algorithms: Collection[str] | None, digest_algorithms: Collection[str] | None
) -> list[Issue]:
    issues = []
    method = signature.find(f"{ds('SignedInfo')}/{ds('SignatureMethod')}")
    used = method.get("Algorithm", "") if method is not None else ""
    if signature_algorithms is not None and used not in signature_algorithms:
        issues.append(
            _issue(
                f"the message is signed with {used or 'no SignatureMethod'}; the agreement says "
                f"{' or '.join(sorted(signature_algorithms))}",
                SIGNATURE,
            )
        )
    if digest_algorithms is not None:
        for reference in claimed_digests(signature):
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
    parsed: etree._Element | None = None,
) -> Verification:
    """Verify the ebMS signature of the SOAP part ``soap`` (the bytes as received) over it and ``payloads``
    (Content-ID -> content after any Content-Transfer-Encoding, decrypted if it was encrypted, in package
    order) with the key of one of the ``trusted`` certificates.

    Each trusted certificate must be valid at ``at`` (default: now) and, when ``anchors`` is given, chain to
    one of them through ``intermediates``. ``signature_algorithms`` and ``digest_algorithms``, when given,
    are the only SignatureMethod and DigestMethod URIs accepted (the agreement's). ``parsed``: ``soap``
    already parsed by :func:`msh.safexml.parse_xml` (read only here), to spare a second parse.

    Returns the :class:`Verification`; raises :class:`~msh.errors.SecurityError` saying what failed and
    where (see the module docs), :class:`~msh.errors.EnvelopeError` when ``soap`` is not XML.
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
        # ebMS2 §4.1.1: a signed message carries ds:Signature as a child of the SOAP Header.
        raise _fail(
            [_issue("the message is not signed: its SOAP Header has no ds:Signature (ebMS2 §4.1.1)", SIGNATURE)]
        )
    issues = [_issue(text, where) for text, where in profile_problems(signature)]
    issues += _coverage_issues(signature, payloads)
    issues += _algorithm_issues(signature, signature_algorithms, digest_algorithms)
    if issues:
        raise _fail(issues)
    if not trusted:
        raise _fail([_issue("no certificate to verify the signature with: the agreement names none", SIGNATURE)])
    usable, certificate_issues = _usable(trusted, anchors, intermediates, at)
    if not usable:
        raise _fail(certificate_issues)
    errors = []
    for certificate, chain in usable:
        try:
            # The profile's RSA signature checked without libxmlsec's per-node XPath filter; libxmlsec
            # verifies whatever that path does not accept (fast_signing can only accept, never refuse).
            if not fast_signing.verified_without_xmlsec(root, signature, payloads, certificate):
                with resolving_parts(payloads):
                    _context(certificate).verify(signature)
        except xmlsec.Error as exc:
            errors.append(str(exc))
            continue
        method = signature.find(f"{ds('SignedInfo')}/{ds('SignatureMethod')}")
        references = signature.findall(f"{ds('SignedInfo')}/{ds('Reference')}")
        return Verification(
            certificate,
            chain,
            method.get("Algorithm", "") if method is not None else "",
            tuple(claimed_digests(signature)),
            tuple(etree.tostring(r, encoding="unicode", with_tail=False) for r in references),
        )
    raise _fail(_explain(root, signature, payloads, [c for c, _ in usable]))


def _explain(
    root: etree._Element, signature: etree._Element, payloads: Mapping[str, Payload], keys: Sequence[x509.Certificate]
) -> list[Issue]:
    """Why the signature did not verify: the References whose digest differs, else the SignatureValue."""
    issues = []
    for claimed, computed in zip(claimed_digests(signature), reference_digests(root, payloads), strict=True):
        where = reference_location(claimed.uri)
        what = f"payload part {claimed.uri}" if where != ENVELOPE_REFERENCE else "the SOAP envelope"
        if computed.digest is None:
            issues.append(_issue(f"the digest of {what} (Reference URI={claimed.uri!r}) cannot be computed", where))
        elif computed.digest != claimed.digest:
            changed = "payload" if where != ENVELOPE_REFERENCE else "envelope (outside the nextMSH/next elements)"
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
    carried = [describe(c) for c in keyinfo_certificates(signature) if c not in keys]
    hint = f" (its KeyInfo carries the certificate {'; '.join(carried)})" if carried else ""
    return [
        _issue(
            f"the SignatureValue does not verify with the key of {names}: the message was signed with another "
            f"key{hint}, or its SignedInfo was changed",
            SIGNATURE,
        )
    ]
