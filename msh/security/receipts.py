"""Signed receipts: the ``ds:Reference`` list of an Acknowledgment, and the sender's check of it (ebMS2
§6.3.1.2, §6.3.2.5, §4.1.4.2).

When a message asks for a signed acknowledgment (``AckRequested@signed="true"``), the receiving MSH
signs the Acknowledgment message and puts in its ``eb:Acknowledgment`` the ``ds:Reference`` elements of
the acknowledged message (:func:`receipt_references`): those of its signature when it was signed, else
derived from it as the profile would sign it. The sender compares them with what it sent
(:func:`check_receipt`): equal digests say the message arrived intact, and the signed Acknowledgment is the
non-repudiation of receipt the sender keeps.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Final

from lxml import etree

from msh.ebms.namespaces import SOAP_ENV
from msh.errors import EnvelopeError, ErrorCode, Issue, SecurityError, Severity
from msh.safexml import XmlLimits, parse_xml
from msh.security.algorithms import DigestAlgorithm, SignatureAlgorithm, digest_algorithm
from msh.security.digests import ReferenceDigest, claimed_digests, decode_digest, reference_digests
from msh.security.library import Payload, bare_content_id
from msh.security.profile import ds, first_signature, payload_uris, signature_template

__all__ = ["ACKNOWLEDGMENT_REFERENCE", "check_receipt", "receipt_references"]

ACKNOWLEDGMENT_REFERENCE: Final = "//Header/Acknowledgment/Reference"
"""ebMS2 §4.2.3.2.5 location of the Reference elements of an Acknowledgment."""

_LIMITS: Final = XmlLimits(max_bytes=64 * 1024)


def _root(soap: bytes) -> etree._Element:
    return parse_xml(soap, what="SOAP envelope", limits=XmlLimits(max_bytes=max(len(soap), 1)))


def _derived(
    root: etree._Element, payloads: Mapping[str, Payload], digest: DigestAlgorithm
) -> tuple[list[ReferenceDigest], list[etree._Element]]:
    """The References of the profile for the unsigned message ``root``, digests computed."""
    uris = payload_uris(root, [bare_content_id(cid) for cid in payloads])

    def template(header: etree._Element) -> etree._Element:
        return signature_template(header, SignatureAlgorithm.RSA_SHA256, digest, uris, key_info=False)

    computed = reference_digests(root, payloads, template)
    holder = etree.Element(f"{{{SOAP_ENV}}}Header", nsmap={"SOAP": SOAP_ENV})
    elements = template(holder).findall(f"{ds('SignedInfo')}/{ds('Reference')}")
    for element, reference in zip(elements, computed, strict=True):
        if reference.digest is None:
            raise SecurityError(
                f"the digest of {reference.uri or 'the SOAP envelope'} cannot be computed for the receipt",
                location=reference.uri or "/",
            )
        value = element.find(ds("DigestValue"))
        assert value is not None
        value.text = base64.b64encode(reference.digest).decode("ascii")
    return computed, elements


def receipt_references(
    soap: bytes,
    payloads: Mapping[str, Payload] | None = None,
    *,
    digest: str | DigestAlgorithm = DigestAlgorithm.SHA256,
) -> tuple[str, ...]:
    """The ``ds:Reference`` elements (XML text) the Acknowledgment of the message ``soap`` carries
    (ebMS2 §6.3.2.5), for :attr:`msh.ebms.model.Acknowledgment.references`.

    "If the original message is signed, the [XMLDSIG] Signature / Reference element(s) of the original
    message will be identical to the Acknowledgment / [XMLDSIG] Reference element(s)": copied as they are.
    "If the original message is not signed, the [XMLDSIG] Reference element must be derived from the
    original message": the References the profile would sign, with ``digest`` (the agreement's
    HashFunction), over ``soap`` and ``payloads`` (Content-ID -> content, in package order).
    """
    root = _root(soap)
    signature = first_signature(root)
    if signature is not None:
        return tuple(
            etree.tostring(r, encoding="unicode", with_tail=False)
            for r in signature.iterfind(f"{ds('SignedInfo')}/{ds('Reference')}")
        )
    _computed, elements = _derived(root, payloads or {}, digest_algorithm(digest))
    return tuple(etree.tostring(e, encoding="unicode", with_tail=False) for e in elements)


def _read(references: Sequence[str]) -> tuple[list[ReferenceDigest], list[Issue]]:
    read, issues = [], []
    for text in references:
        try:
            element = parse_xml(text.encode("utf-8"), what="ds:Reference of the Acknowledgment", limits=_LIMITS)
        except EnvelopeError as exc:
            issues.append(Issue(ErrorCode.SECURITY_FAILURE, Severity.ERROR, exc.description, ACKNOWLEDGMENT_REFERENCE))
            continue
        method = element.find(ds("DigestMethod"))
        read.append(
            ReferenceDigest(
                element.get("URI", ""),
                method.get("Algorithm", "") if method is not None else "",
                decode_digest(element.findtext(ds("DigestValue"))),
            )
        )
    return read, issues


def _name(uri: str) -> str:
    return 'the SOAP envelope (URI="")' if uri == "" else f"payload part {uri}"


def check_receipt(
    acknowledgment_references: Sequence[str], sent_soap: bytes, sent_payloads: Mapping[str, Payload] | None = None
) -> tuple[ReferenceDigest, ...]:
    """Check the ``ds:Reference`` elements of a received Acknowledgment (XML text, as in
    :attr:`msh.ebms.model.Acknowledgment.references`) against the message the sender sent: ``sent_soap``
    (the SOAP part as stored and sent) and, when it was not signed, ``sent_payloads``.

    Every Reference of the message sent (its signature's, or those derived as :func:`receipt_references`
    derives them, with the DigestMethod the Acknowledgment used) must be in the receipt with the same URI,
    DigestMethod and digest, and the receipt must name nothing else. Returns the References checked;
    raises :class:`~msh.errors.SecurityError` naming each one missing or different (ebMS2 §6.3.2.5: "If the
    digests match, the message arrived intact").
    """
    received, issues = _read(acknowledgment_references)
    if not acknowledgment_references:
        issues.append(
            Issue(
                ErrorCode.SECURITY_FAILURE,
                Severity.ERROR,
                "the Acknowledgment carries no ds:Reference, though a signed receipt was requested (ebMS2 §6.3.2.5)",
                ACKNOWLEDGMENT_REFERENCE,
            )
        )
    if issues:
        raise SecurityError(issues[0].description, location=issues[0].location, issues=issues)
    root = _root(sent_soap)
    signature = first_signature(root)
    if signature is not None:
        sent = claimed_digests(signature)
    else:
        used = digest_algorithm(received[0].digest_algorithm) if received else DigestAlgorithm.SHA256
        sent, _elements = _derived(root, sent_payloads or {}, used)
    by_uri = {r.uri: r for r in received}
    for expected in sent:
        where = f'{ACKNOWLEDGMENT_REFERENCE}[@URI="{expected.uri}"]'
        got = by_uri.pop(expected.uri, None)
        if got is None:
            problem = f"the receipt does not name {_name(expected.uri)} of the message sent"
        elif got.digest_algorithm != expected.digest_algorithm:
            problem = (
                f"the receipt digests {_name(expected.uri)} with {got.digest_algorithm}, the message sent with "
                f"{expected.digest_algorithm}"
            )
        elif got.digest != expected.digest:
            problem = (
                f"the receipt's digest of {_name(expected.uri)} differs from the message sent: the receiving MSH "
                "got other content than was sent"
            )
        else:
            continue
        issues.append(Issue(ErrorCode.SECURITY_FAILURE, Severity.ERROR, problem, where))
    for extra in by_uri:
        issues.append(
            Issue(
                ErrorCode.SECURITY_FAILURE,
                Severity.ERROR,
                f"the receipt names {_name(extra)}, which the message sent does not have",
                f'{ACKNOWLEDGMENT_REFERENCE}[@URI="{extra}"]',
            )
        )
    if issues:
        raise SecurityError(issues[0].description, location=issues[0].location, issues=issues)
    return tuple(sent)
