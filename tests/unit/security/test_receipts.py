"""Signed receipts (ebMS2 §6.3.1.2, §6.3.2.5): the Acknowledgment's ds:Reference list and the sender's check."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from lxml import etree

from msh.errors import SecurityError
from msh.security import check_receipt, receipt_references, sign, verify
from msh.security.profile import ds
from tests.support.security import PAYLOADS, RSA_SHA256, SHA1, SHA256, certificate, envelope, rsa_key


def signed() -> bytes:
    return sign(envelope(), PAYLOADS, rsa_key("party A"), certificate("party A"), RSA_SHA256, SHA256)


def test_a_signed_messages_references_are_copied_as_they_are() -> None:
    message = signed()
    references = receipt_references(message)
    signature_refs = etree.fromstring(message).findall(f".//{ds('SignedInfo')}/{ds('Reference')}")
    assert [etree.fromstring(r.encode()).get("URI") for r in references] == [r.get("URI") for r in signature_refs]
    assert [etree.fromstring(r.encode()).findtext(ds("DigestValue")) for r in references] == [
        r.findtext(ds("DigestValue")) for r in signature_refs
    ]
    assert [r.uri for r in check_receipt(references, message)] == ["", "cid:order@a.example", "cid:scan@a.example"]


def _independent_envelope_digest(soap: bytes, algorithm: str) -> bytes:
    """The envelope digest computed without xmlsec: elements for the next MSH/node removed (their
    tails kept), C14N 1.0 without comments, hashed."""
    root = etree.fromstring(soap)
    actor = "{http://schemas.xmlsoap.org/soap/envelope/}actor"
    for element in [e for e in root.iter() if e.get(actor, "").endswith(("nextMSH", "/actor/next"))]:
        parent, before = element.getparent(), element.getprevious()
        if before is not None:
            before.tail = (before.tail or "") + (element.tail or "")
        else:
            parent.text = (parent.text or "") + (element.tail or "")
        parent.remove(element)
    canonical = etree.tostring(root.getroottree(), method="c14n", with_comments=False)
    return hashlib.new(algorithm, canonical).digest()


@pytest.mark.parametrize(("digest", "name"), [(SHA1, "sha1"), (SHA256, "sha256")])
def test_an_unsigned_messages_references_are_derived_as_the_profile_would_sign_it(digest: str, name: str) -> None:
    soap = envelope()
    references = [etree.fromstring(r.encode()) for r in receipt_references(soap, PAYLOADS, digest=digest)]
    assert [r.get("URI") for r in references] == ["", "cid:order@a.example", "cid:scan@a.example"]
    values = [base64.b64decode(r.findtext(ds("DigestValue"))) for r in references]
    assert values[0] == _independent_envelope_digest(soap, name)
    assert values[1:] == [hashlib.new(name, PAYLOADS[c]).digest() for c in ("order@a.example", "scan@a.example")]
    assert all(r.find(f"{ds('DigestMethod')}").get("Algorithm") == digest for r in references)
    check_receipt(receipt_references(soap, PAYLOADS, digest=digest), soap, PAYLOADS)


def test_a_receipt_for_other_content_is_a_security_failure_naming_the_part() -> None:
    message = signed()
    references = list(receipt_references(message))
    other = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    references[2] = re.sub(r"<ds:DigestValue>[^<]*", f"<ds:DigestValue>{other}", references[2])
    with pytest.raises(SecurityError) as caught:
        check_receipt(references, message)
    assert caught.value.location == '//Header/Acknowledgment/Reference[@URI="cid:scan@a.example"]'
    assert "got other content than was sent" in caught.value.description


def test_a_receipt_missing_a_reference_or_naming_an_extra_one_fails() -> None:
    message = signed()
    references = list(receipt_references(message))
    with pytest.raises(SecurityError, match=r"does not name payload part cid:order@a\.example"):
        check_receipt([references[0], references[2]], message)
    extra = references[2].replace("cid:scan@a.example", "cid:extra@x")
    with pytest.raises(SecurityError, match="names payload part cid:extra@x, which the message sent does not have"):
        check_receipt([*references, extra], message)
    with pytest.raises(SecurityError, match="carries no ds:Reference"):
        check_receipt([], message)


def test_a_signed_acknowledgment_carries_the_references_and_verifies() -> None:
    message = signed()
    references = "".join(receipt_references(message))
    ack = envelope(payloads=(), header_extra="").replace(
        b"</SOAP:Header>",
        b'<eb:Acknowledgment SOAP:mustUnderstand="1" eb:version="2.0" '
        b'SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH"><eb:Timestamp>2026-01-01T00:00:00Z'
        b"</eb:Timestamp><eb:RefToMessageId>m-1@a.example</eb:RefToMessageId>"
        + references.encode()
        + b"</eb:Acknowledgment>\n  </SOAP:Header>",
    )
    receipt = sign(ack, {}, rsa_key("party B"), certificate("party B"), RSA_SHA256, SHA256)
    verify(receipt, {}, certificate("party B"))
    kept = etree.fromstring(receipt).findall(
        f".//{{http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd}}Acknowledgment/{ds('Reference')}"
    )
    check_receipt([etree.tostring(r, encoding="unicode") for r in kept], message)
    with pytest.raises(SecurityError):
        verify(receipt.replace(b"m-1@a.example", b"m-9@a.example"), {}, certificate("party B"))
