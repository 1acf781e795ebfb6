"""Where the signature of a message is (ebMS2 §4.1.1: "Zero or more Signature elements ... MAY be present as
a child of the SOAP Header ... the first MUST represent the digital signature of the ebXML Message as signed
by the From Party MSH"), and which key checks it: a signature anywhere else is refused naming where it is;
a key of another type than the SignatureMethod's is named."""

from __future__ import annotations

import pytest
from lxml import etree

from msh.errors import SecurityError
from msh.security import sign, verify
from msh.security.profile import ds
from tests.support.security import PAYLOADS, RSA_SHA256, SHA256, certificate, dsa_certificate, envelope, rsa_key


def _signed() -> bytes:
    return sign(envelope(), PAYLOADS, rsa_key("party A"), certificate("party A"), RSA_SHA256, SHA256)


def _moved(soap: bytes, where: str) -> bytes:
    root = etree.fromstring(soap)
    signature = root.find(f".//{ds('Signature')}")
    assert signature is not None
    header = signature.getparent()
    assert header is not None
    header.remove(signature)
    target = root.find(where)
    assert target is not None
    target.append(signature)
    return etree.tostring(root)


@pytest.mark.parametrize(
    ("where", "path"),
    [
        ("{http://schemas.xmlsoap.org/soap/envelope/}Body", "/Envelope/Body/Signature"),
        (
            "{http://schemas.xmlsoap.org/soap/envelope/}Header/"
            "{http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd}MessageHeader",
            "/Envelope/Header/MessageHeader/Signature",
        ),
    ],
)
def test_a_signature_that_is_not_a_child_of_the_soap_header_is_refused_naming_where_it_is(
    where: str, path: str
) -> None:
    with pytest.raises(SecurityError) as caught:
        verify(_moved(_signed(), where), PAYLOADS, certificate("party A"))
    assert caught.value.location == path
    assert "not a child of the SOAP Header" in caught.value.description


def test_a_message_with_no_signature_at_all_is_not_signed() -> None:
    with pytest.raises(SecurityError) as caught:
        verify(envelope(), PAYLOADS, certificate("party A"))
    assert caught.value.location == "//Header/Signature" and "is not signed" in caught.value.description


def test_a_certificate_whose_key_is_not_of_the_signature_methods_type_is_named() -> None:
    with pytest.raises(SecurityError) as caught:
        verify(_signed(), PAYLOADS, dsa_certificate("party A DSA"))
    assert "which needs a key of type RSA" in caught.value.description
    assert "has a key of type DSA" in caught.value.description
