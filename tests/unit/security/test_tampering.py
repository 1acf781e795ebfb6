"""A signed message changed anywhere the profile signs fails verification, naming what failed; adding or
removing the elements targeted at the next MSH or the next SOAP node does not (ebMS2 §4.1.3, §10.1.5)."""

from __future__ import annotations

from datetime import timedelta
from functools import cache

import pytest

from msh.errors import ErrorCode, SecurityError, Severity
from msh.security import sign, verify
from msh.security.profile import ENVELOPE_REFERENCE
from tests.support.security import (
    NEXT_MSH_ACK,
    NEXT_SYNC_REPLY,
    NOW,
    PAYLOADS,
    RSA_SHA1,
    RSA_SHA256,
    SHA1,
    SHA256,
    certificate,
    envelope,
    rsa_key,
)


@cache
def signed_message() -> bytes:
    return sign(envelope(), PAYLOADS, rsa_key("party A"), certificate_a(), RSA_SHA256, SHA256)


@cache
def certificate_a() -> object:
    return certificate("party A")


def failure(soap: bytes, payloads: dict[str, bytes] = PAYLOADS, **kwargs: object) -> SecurityError:
    with pytest.raises(SecurityError) as caught:
        verify(soap, payloads, certificate_a(), **kwargs)  # type: ignore[arg-type]
    error = caught.value
    assert (error.error_code, error.severity) == (ErrorCode.SECURITY_FAILURE, Severity.ERROR)
    return error


def changed(old: bytes, new: bytes) -> bytes:
    message = signed_message()
    assert message.count(old) >= 1, old
    return message.replace(old, new, 1)


HEADER_CHANGES = {
    "From/PartyId": (b">123456789<", b">123456780<"),
    "From/PartyId@type": (b'eb:type="urn:duns">123456789', b'eb:type="urn:other">123456789'),
    "From/Role": (b"<eb:Role>Buyer</eb:Role>", b"<eb:Role>Seller</eb:Role>"),
    "To/PartyId": (b">987654321<", b">987654320<"),
    "CPAId": (b"<eb:CPAId>cpa-a-b<", b"<eb:CPAId>cpa-a-c<"),
    "ConversationId": (b"conv-1", b"conv-2"),
    "Service": (b"urn:example:services:ordering", b"urn:example:services:billing"),
    "Service@type": (b'eb:type="string"', b'eb:type="other"'),
    "Action": (b"<eb:Action>NewOrder<", b"<eb:Action>Cancel<"),
    "MessageId": (b"m-1@a.example", b"m-2@a.example"),
    "Timestamp": (
        NOW.strftime("%Y-%m-%dT%H:%M:%SZ").encode(),
        (NOW + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ").encode(),
    ),
    "DuplicateElimination removed": (b"<eb:DuplicateElimination/>", b""),
    "MessageHeader@mustUnderstand": (
        b'<eb:MessageHeader SOAP:mustUnderstand="1"',
        b'<eb:MessageHeader SOAP:mustUnderstand="0"',
    ),
    "element added to the Header": (b"  </SOAP:Header>", b"  <x:Extra xmlns:x='urn:x'/></SOAP:Header>"),
    "white space in the Header": (b"<eb:CPAId>", b" <eb:CPAId>"),
}


@pytest.mark.parametrize("change", HEADER_CHANGES.values(), ids=HEADER_CHANGES.keys())
def test_changing_any_header_element_is_detected(change: tuple[bytes, bytes]) -> None:
    error = failure(changed(*change))
    assert error.location == ENVELOPE_REFERENCE
    assert "the SOAP envelope" in error.description and "changed after it was signed" in error.description


MANIFEST_CHANGES = {
    "references swapped": (
        b'cid:order@a.example" xlink:type="simple"/>\n      <eb:Reference xlink:href="cid:scan@a.example"',
        b'cid:scan@a.example" xlink:type="simple"/>\n      <eb:Reference xlink:href="cid:order@a.example"',
    ),
    "reference removed": (b'\n      <eb:Reference xlink:href="cid:scan@a.example" xlink:type="simple"/>', b""),
    "reference added": (b"\n    </eb:Manifest>", b'<eb:Reference xlink:href="http://x.example/"/>\n    </eb:Manifest>'),
    "description added": (
        b'xlink:href="cid:order@a.example" xlink:type="simple"/>',
        b'xlink:href="cid:order@a.example" xlink:type="simple">'
        b'<eb:Description xml:lang="en">x</eb:Description></eb:Reference>',
    ),
    "Manifest version": (b'<eb:Manifest eb:version="2.0">', b'<eb:Manifest eb:version="2.1">'),
}


@pytest.mark.parametrize("change", MANIFEST_CHANGES.values(), ids=MANIFEST_CHANGES.keys())
def test_changing_the_manifest_is_detected(change: tuple[bytes, bytes]) -> None:
    assert failure(changed(*change)).location == ENVELOPE_REFERENCE


@pytest.mark.parametrize("where", [0, 100, -1])
def test_changing_any_payload_byte_is_detected(where: int) -> None:
    scan = bytearray(PAYLOADS["scan@a.example"])
    scan[where] ^= 0x01
    error = failure(signed_message(), {**PAYLOADS, "scan@a.example": bytes(scan)})
    assert error.location == "cid:scan@a.example"
    assert "payload part cid:scan@a.example" in error.description
    assert len(error.issues) == 1  # the envelope and the other payload still verify


def test_swapping_payload_contents_is_detected_for_both_parts() -> None:
    swapped = {"order@a.example": PAYLOADS["scan@a.example"], "scan@a.example": PAYLOADS["order@a.example"]}
    error = failure(signed_message(), swapped)
    assert [i.location for i in error.issues] == ["cid:order@a.example", "cid:scan@a.example"]


def test_payload_parts_in_another_order_than_signed_still_verify() -> None:
    # ebMS2 §4.1.3: each Reference "SHALL have a URI attribute resolving to the payload object": the part is
    # found by its URI, wherever it is in the package, so the order of the MIME parts is not signed.
    reordered = {"scan@a.example": PAYLOADS["scan@a.example"], "order@a.example": PAYLOADS["order@a.example"]}
    result = verify(signed_message(), reordered, certificate_a())
    assert set(result.signed_payloads) == set(PAYLOADS) and result.unsigned_payloads == ()


def test_an_added_part_is_reported_unsigned_and_a_missing_signed_part_is_refused() -> None:
    # ebMS2 §4.1.3 signs "each payload object requiring signing": a part without a Reference is not signed,
    # and is said so (a Warning naming it), never passed off as signed.
    result = verify(signed_message(), {**PAYLOADS, "extra@x": b"smuggled"}, certificate_a())
    assert result.unsigned_payloads == ("extra@x",)
    assert [(w.severity, w.location) for w in result.warnings] == [(Severity.WARNING, "cid:extra@x")]
    assert "not covered by the signature" in result.warnings[0].description
    # A Reference naming a part the package does not carry can never be checked: refused.
    error = failure(signed_message(), {"order@a.example": PAYLOADS["order@a.example"]})
    assert error.location == "cid:scan@a.example" and "does not carry" in error.description


NEXT_HOP_CHANGES = {
    "nextMSH AckRequested removed": (NEXT_MSH_ACK.encode(), b""),
    "nextMSH AckRequested changed": (b'eb:signed="false"', b'eb:signed="true"'),
    "next SyncReply added": (NEXT_MSH_ACK.encode(), NEXT_MSH_ACK.encode() + NEXT_SYNC_REPLY.encode()),
    "nextMSH Acknowledgment added": (
        NEXT_MSH_ACK.encode(),
        NEXT_MSH_ACK.encode()
        + b'<eb:Acknowledgment SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH" SOAP:mustUnderstand="1" '
        b'eb:version="2.0"><eb:Timestamp>2026-01-01T00:00:00Z</eb:Timestamp>'
        b"<eb:RefToMessageId>m-0@b.example</eb:RefToMessageId></eb:Acknowledgment>",
    ),
}


@pytest.mark.parametrize("change", NEXT_HOP_CHANGES.values(), ids=NEXT_HOP_CHANGES.keys())
def test_elements_for_the_next_msh_or_node_may_change_on_the_way(change: tuple[bytes, bytes]) -> None:
    verify(changed(*change), PAYLOADS, certificate_a())


def test_a_next_msh_element_added_where_there_was_none_keeps_the_signature() -> None:
    cert = certificate_a()
    signed = sign(envelope(header_extra=""), PAYLOADS, rsa_key("party A"), cert, RSA_SHA1, SHA1)
    hop = signed.replace(b"\n    \n  </SOAP:Header>", b"\n    " + NEXT_MSH_ACK.encode() + b"\n  </SOAP:Header>", 1)
    assert hop != signed
    verify(hop, PAYLOADS, cert)


def test_another_soap_prefix_verifies_too() -> None:
    cert = certificate_a()
    soap = envelope(prefix="soap-env")
    signed = sign(soap, PAYLOADS, rsa_key("party A"), cert, RSA_SHA256, SHA256)
    verify(signed.replace(b'eb:signed="false"', b'eb:signed="true"'), PAYLOADS, cert)


def test_a_signature_by_another_party_names_the_signature_value_and_the_key_it_carries() -> None:
    other = certificate("party C")
    forged = sign(envelope(), PAYLOADS, rsa_key("party C"), other, RSA_SHA256, SHA256)
    error = failure(forged)
    assert error.location == "//Header/Signature"
    assert "SignatureValue does not verify with the key of CN=party A" in error.description
    assert "KeyInfo carries the certificate CN=party C" in error.description


def test_an_expired_or_not_yet_valid_certificate_is_refused() -> None:
    cert = certificate_a()
    error = failure(signed_message(), at=NOW + timedelta(days=60))
    assert "expired on" in error.description
    error = failure(signed_message(), at=NOW - timedelta(days=60))
    assert "is not valid before" in error.description
    assert cert is certificate_a()


def test_the_certificate_must_chain_to_the_trust_anchors() -> None:
    root_key = rsa_key("A's CA")
    ca = certificate("A's CA", ca=True)
    leaf = certificate("A's MSH", issuer=(ca, root_key), key_name="party A")
    signed = sign(envelope(), PAYLOADS, rsa_key("party A"), leaf, RSA_SHA256, SHA256)
    assert verify(signed, PAYLOADS, leaf, anchors=[ca], at=NOW).chain == (leaf, ca)
    with pytest.raises(SecurityError, match="not trusted: certificate CN=A's MSH"):
        verify(signed, PAYLOADS, leaf, anchors=[certificate("someone else")], at=NOW)


def test_algorithms_other_than_the_agreements_are_refused() -> None:
    error = failure(signed_message(), signature_algorithms={RSA_SHA1})
    assert "signed with http://www.w3.org/2001/04/xmldsig-more#rsa-sha256; the agreement says" in error.description
    error = failure(signed_message(), digest_algorithms={SHA1})
    assert "DigestMethod" in error.description


def test_a_signature_leaving_part_of_the_envelope_unsigned_is_refused() -> None:
    narrower = changed(b"not(ancestor-or-self::node()", b"not(ancestor-or-self::SOAP:Body | ancestor-or-self::node()")
    error = failure(narrower)
    assert "is not the ebMS2 §4.1.3 one" in error.description


def test_a_reference_to_a_file_or_url_is_refused_before_anything_is_read() -> None:
    external = changed(b'URI="cid:order@a.example"', b'URI="file:///etc/passwd"')
    error = failure(external, {"scan@a.example": PAYLOADS["scan@a.example"]})
    assert any("never a file or a URL" in i.description for i in error.issues)
