"""ebMS 2.0 §4.1 Security Module (printed lines 1003-1254): the Signature element (§4.1.1), how a message is
signed (§4.1.3), the persistent digital signature (§4.1.4.1) and the signed receipt (§4.1.4.2).

Each test quotes the sentence it checks and takes its expected answer from it. Both sides are shown where the
sentence concerns both: what this MSH writes when it signs (:func:`msh.security.sign`, and the running MSH on
the test network), and what it accepts when it verifies (:func:`msh.security.verify`). Forms of a signature
this MSH never writes itself (a Reference with a Type or an Id, another canonicalization, DSA-SHA1, payloads
named by Content-Location, a second Signature) are made by an independent signer, the ``xmlsec1`` command
line (tests/support/xmlsec1.py); those tests skip, saying so, where it is not installed.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import hashlib
import io
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import dsa, rsa
from cryptography.hazmat.primitives.serialization import Encoding
from lxml import etree

from cpa.model import ActionBinding, Certificate, CollaborationProtocolAgreement, DeliveryChannel, NonRepudiation
from msh.ebms.message import ParseMode, parse_message
from msh.ebms.mime import AttachmentSpec, PartBody, write_package
from msh.engine import OutboundStatus
from msh.errors import ErrorCode, SecurityError, Severity
from msh.runtime.msh import Msh
from msh.security import Verification, check_receipt, load_certificates, receipt_references, sign, verify
from msh.store.api import Direction
from msh.testing.network import TestNetwork
from tests.conformance.clauses import Exemption, Kind, clause
from tests.support.multihop import multihop, routed_cpa
from tests.support.multihop import order as multihop_order
from tests.support.secure_network import B_URL, KEYS, events, order, run_pair, signed_acks, stored_body
from tests.support.security import (
    NEXT_SYNC_REPLY,
    NOW,
    PAYLOADS,
    RSA_SHA256,
    SHA1,
    SHA256,
    certificate,
    dsa_certificate,
    dsa_key,
    envelope,
    rsa_key,
)
from tests.support.shared import shared_dir
from tests.support.xmlsec1 import SKIP_REASON, XMLSEC1, xmlsec1_sign

DSIG = "http://www.w3.org/2000/09/xmldsig#"
SOAP = "http://schemas.xmlsoap.org/soap/envelope/"
EB = "http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd"
XLINK = "http://www.w3.org/1999/xlink"
C14N = "http://www.w3.org/TR/2001/REC-xml-c14n-20010315"
EXC_C14N = "http://www.w3.org/2001/10/xml-exc-c14n#"
ENVELOPED = f"{DSIG}enveloped-signature"
XPATH = "http://www.w3.org/TR/1999/REC-xpath-19991116"
DSA_SHA1 = f"{DSIG}dsa-sha1"
OBJECT = f"{DSIG}Object"
NEXT_MSH = "urn:oasis:names:tc:ebxml-msg:actor:nextMSH"
NEXT = "http://schemas.xmlsoap.org/soap/actor/next"
ENVELOPE_REFERENCE = '//Header/Signature/SignedInfo/Reference[@URI=""]'
ORDER, SCAN = "order@a.example", "scan@a.example"
# ebMS2 §4.1.3, as the specification prints it (&quot; and line breaks inside the expression).
SPEC_XPATH = """ not(ancestor-or-self::node()[@SOAP:actor=
                    &quot;urn:oasis:names:tc:ebxml-msg:actor:nextMSH&quot;]
                          | ancestor-or-self::node()[@SOAP:actor=
                    &quot;http://schemas.xmlsoap.org/soap/actor/next&quot;])
                """
PROFILE_TRANSFORMS = (
    f'<ds:Transform Algorithm="{ENVELOPED}"/><ds:Transform Algorithm="{XPATH}">'
    f'<ds:XPath xmlns:SOAP="{SOAP}">{SPEC_XPATH}</ds:XPath></ds:Transform><ds:Transform Algorithm="{C14N}"/>'
)

needs_xmlsec1 = pytest.mark.skipif(XMLSEC1 is None, reason=SKIP_REASON)

EXEMPTIONS: tuple[Exemption, ...] = (
    Exemption(
        "4.1",
        (1016,),
        "Application of countermeasures SHOULD be balanced against an assessment of the inherent risks and the "
        "value of the asset(s) that might be placed at risk.",
        Kind.FOR_PEOPLE,
        "Weighing risks against the value of what is exchanged is the trading partners' decision, made when they "
        "write their agreement: the MSH applies the countermeasures the agreement asks for (signatures through "
        "SenderNonRepudiation, payload encryption through a DigitalEnvelope, TLS and client certificates through "
        "the transport), and the docs page 'Message security' (docs/concepts/security.md) tells operators what "
        "each one protects.",
    ),
    Exemption(
        "4.1.2",
        (1033,),
        "It is strongly RECOMMENDED that the site manager of an ebXML Message Service apply due diligence to the "
        "support and maintenance of its security mechanisms, site (or physical) security procedures, "
        "cryptographic protocols, update implementations and apply fixes as appropriate.",
        Kind.FOR_PEOPLE,
        "This is advice to the people who run the MSH, not behaviour the software can show. The docs page "
        "'Message security' tells operators what is theirs to maintain: keys kept as encrypted PEM with the "
        "passphrase in an environment variable, the lxml and xmlsec (libxmlsec1) pair to be kept on one libxml2 "
        "build and reinstalled as a pair, "
        "and the checks that refuse an agreement asking for security the MSH cannot apply.",
    ),
)


# ----------------------------------------------------------------------------------------------- helpers


@functools.cache
def party_a() -> tuple[rsa.RSAPrivateKey, x509.Certificate]:
    """From Party A's key and certificate, as the agreement names it."""
    return rsa_key("party A"), certificate("party A")


@functools.cache
def party_c() -> x509.Certificate:
    return certificate("party C")


def signed_by_us(soap: bytes | None = None, payloads: dict[str, bytes] | None = None) -> bytes:
    """The test envelope signed by this MSH as party A (rsa-sha256, sha256)."""
    key, cert = party_a()
    return sign(
        soap if soap is not None else envelope(),
        PAYLOADS if payloads is None else payloads,
        key,
        cert,
        RSA_SHA256,
        SHA256,
    )


def accepted(soap: bytes, payloads: dict[str, bytes] = PAYLOADS, **kwargs: object) -> Verification:
    trusted = kwargs.pop("trusted", party_a()[1])
    return verify(soap, payloads, trusted, at=NOW, **kwargs)  # type: ignore[arg-type]


def refused(soap: bytes, payloads: dict[str, bytes] = PAYLOADS, **kwargs: object) -> SecurityError:
    trusted = kwargs.pop("trusted", party_a()[1])
    with pytest.raises(SecurityError) as caught:
        verify(soap, payloads, trusted, at=NOW, **kwargs)  # type: ignore[arg-type]
    error = caught.value
    assert (error.error_code, error.severity) == (ErrorCode.SECURITY_FAILURE, Severity.ERROR)
    return error


def signature_of(soap: bytes) -> etree._Element:
    found = etree.fromstring(soap).find(f"{{{SOAP}}}Header/{{{DSIG}}}Signature")
    assert found is not None
    return found


def template(
    references: tuple[str, ...] = ("", f"cid:{ORDER}", f"cid:{SCAN}"),
    *,
    c14n: str = C14N,
    method: str = RSA_SHA256,
    digest: str = SHA256,
    envelope_attributes: str = "",
    transforms: str = PROFILE_TRANSFORMS,
    signature_open: str = f'<ds:Signature xmlns:ds="{DSIG}">',
    soap: bytes | None = None,
    before: bool = False,
) -> bytes:
    """The test envelope with an unsigned ``ds:Signature`` for xmlsec1 to sign: the References in the given
    order ("" the envelope), last in the SOAP Header (``before``: first, before any Signature already there)."""
    rows = []
    for uri in references:
        inner = f"<ds:Transforms>{transforms}</ds:Transforms>" if uri == "" else ""
        attributes = envelope_attributes if uri == "" else ""
        rows.append(
            f'<ds:Reference URI="{uri}"{attributes}>{inner}<ds:DigestMethod Algorithm="{digest}"/>'
            "<ds:DigestValue/></ds:Reference>"
        )
    xml = (
        f'{signature_open}<ds:SignedInfo><ds:CanonicalizationMethod Algorithm="{c14n}"/>'
        f'<ds:SignatureMethod Algorithm="{method}"/>{"".join(rows)}</ds:SignedInfo><ds:SignatureValue/>'
        "<ds:KeyInfo><ds:X509Data/></ds:KeyInfo></ds:Signature>"
    )
    if 'xmlns="' in signature_open:
        xml = xml.replace("ds:", "")
    soap = soap if soap is not None else envelope()
    if before:
        return soap.replace(b"<ds:Signature ", xml.encode() + b"<ds:Signature ", 1)
    assert soap.count(b"</SOAP:Header>") == 1
    return soap.replace(b"</SOAP:Header>", xml.encode() + b"</SOAP:Header>")


def independently_signed(
    tmp_path: Path,
    unsigned: bytes,
    parts: dict[str, bytes] | None = None,
    key: tuple[rsa.RSAPrivateKey | dsa.DSAPrivateKey, x509.Certificate] | None = None,
) -> bytes:
    """``unsigned`` (a template) signed by the xmlsec1 command line, each payload URI resolving to ``parts``."""
    private, cert = key if key is not None else party_a()
    parts = parts if parts is not None else {f"cid:{cid}": data for cid, data in PAYLOADS.items()}
    return xmlsec1_sign(unsigned, tmp_path, private, cert, parts)


def without_elements_for_the_next_node(soap: bytes) -> bytes:
    """The C14N of ``soap`` without its ds:Signature and the elements with a SOAP actor nextMSH or next, their
    surrounding text kept: what the envelope Reference's Transforms sign (ebMS2 §4.1.3), computed here apart."""
    root = etree.fromstring(soap)
    actor = f"{{{SOAP}}}actor"
    doomed = [e for e in root.iter() if e.get(actor) in (NEXT_MSH, NEXT) or e.tag == f"{{{DSIG}}}Signature"]
    for element in doomed:
        parent, before = element.getparent(), element.getprevious()
        assert parent is not None
        if before is not None:
            before.tail = (before.tail or "") + (element.tail or "")
        else:
            parent.text = (parent.text or "") + (element.tail or "")
        parent.remove(element)
    return etree.tostring(root, method="c14n")


def soap_part(body: bytes, content_type: str) -> bytes:
    message = parse_message(body, content_type, mode=ParseMode.LENIENT)
    message.close()
    return message.soap


# ------------------------------------------------------------------------------------- §4.1.1 Signature


@clause(
    "4.1.1",
    (1022, 1023),
    "The Signature element MUST be namespace qualified in accordance with XML Signature [XMLDSIG]. The structure "
    "and content of the Signature element MUST conform to the XML Signature [XMLDSIG] specification.",
)
def test_4_1_1_our_signature_is_a_namespace_qualified_xmldsig_signature_in_the_soap_header() -> None:
    # Our output: a ds:Signature in the XML-DSig namespace, a child of the SOAP Header, valid against the
    # XML Signature schema (structure and content).
    soap = signed_by_us()
    header = etree.fromstring(soap).find(f"{{{SOAP}}}Header")
    assert header is not None
    signatures = [e for e in header if etree.QName(e).localname == "Signature"]
    assert [etree.QName(e).namespace for e in signatures] == [DSIG]
    schema_file = shared_dir() / "reference" / "schemas" / "xmldsig-core-schema.xsd"
    schema = etree.XMLSchema(etree.parse(str(schema_file)))
    schema.assertValid(etree.ElementTree(signatures[0]))


@clause(
    "4.1.1",
    (1022,),
    "The Signature element MUST be namespace qualified in accordance with XML Signature [XMLDSIG].",
)
def test_4_1_1_a_signature_element_outside_the_xmldsig_namespace_is_not_a_signature() -> None:
    # Receiving: a "Signature" element in no namespace, or in another one, is not an XML Signature; the message
    # counts as unsigned and is refused where a signature is verified.
    soap = signed_by_us()
    changed = soap.replace(f'xmlns:ds="{DSIG}"'.encode(), b'xmlns:ds="urn:example:not-xmldsig"')
    assert changed != soap
    error = refused(changed)
    assert error.location == "//Header/Signature" and "not signed" in error.description
    assert accepted(soap).signer == party_a()[1]


@needs_xmlsec1
@clause(
    "4.1.1",
    (1022,),
    "The Signature element MUST be namespace qualified in accordance with XML Signature [XMLDSIG].",
)
def test_4_1_1_a_signature_in_the_default_namespace_as_in_the_spec_example_is_accepted(tmp_path: Path) -> None:
    # Namespace qualified by a default namespace declaration, as the §4.1.3 example writes it.
    soap = independently_signed(tmp_path, template(signature_open=f'<ds:Signature xmlns="{DSIG}">'))
    assert b"<Signature " in soap and b"<ds:Signature" not in soap
    assert accepted(soap).signed_payloads == (ORDER, SCAN)


@needs_xmlsec1
@clause(
    "4.1.1",
    (1024, 1025),
    "If there is more than one Signature element contained within the SOAP Header, the first MUST represent the "
    "digital signature of the ebXML Message as signed by the From Party MSH in conformance with section 4.1.",
)
def test_4_1_1_the_first_of_several_signatures_is_the_from_partys_and_the_one_verified(tmp_path: Path) -> None:
    key_c, cert_c = rsa_key("party C"), party_c()
    # From Party A's signature first, another (party C's, purpose undefined) after it: accepted as A's.
    second = sign(envelope(), PAYLOADS, key_c, cert_c, RSA_SHA256, SHA256)
    a_first = independently_signed(tmp_path, template(soap=second, before=True))
    header = etree.fromstring(a_first).find(f"{{{SOAP}}}Header")
    assert header is not None and len(header.findall(f"{{{DSIG}}}Signature")) == 2
    assert accepted(a_first).signer == party_a()[1]
    # Party C's signature first, A's after it: the first is not the From party's, and the message is refused
    # with A's certificate (the agreement's for the From party), though it verifies with C's.
    c_first = independently_signed(tmp_path, template(soap=signed_by_us(), before=True), key=(key_c, cert_c))
    error = refused(c_first)
    assert error.location == "//Header/Signature" and "CN=party C" in error.description
    assert accepted(c_first, trusted=cert_c).signer == cert_c


# ------------------------------------------------------------------------------ §4.1.3 Signature Generation


@clause(
    "4.1.3",
    (1052,),
    "3) Construct the Signature element that includes the SignedInfo, KeyInfo (RECOMMENDED) and SignatureValue "
    "elements as specified in XML Signature [XMLDSIG].",
)
@clause(
    "4.1.3",
    (1055,),
    "The SignedInfo element SHALL have a CanonicalizationMethod element, a SignatureMethod element and one or more "
    "Reference elements, as defined in XML Signature [XMLDSIG].",
)
def test_4_1_3_our_signature_has_signedinfo_keyinfo_and_signaturevalue() -> None:
    signature = signature_of(signed_by_us())
    assert [etree.QName(e).localname for e in signature] == ["SignedInfo", "SignatureValue", "KeyInfo"]
    signed_info = signature[0]
    names = [etree.QName(e).localname for e in signed_info]
    assert names[:2] == ["CanonicalizationMethod", "SignatureMethod"] and names[2:] == ["Reference"] * 3
    assert base64.b64decode(signature.findtext(f"{{{DSIG}}}SignatureValue") or "")
    # KeyInfo (RECOMMENDED) carries the signer's certificate.
    carried = signature.findtext(f"{{{DSIG}}}KeyInfo/{{{DSIG}}}X509Data/{{{DSIG}}}X509Certificate") or ""
    assert base64.b64decode(carried) == party_a()[1].public_bytes(Encoding.DER)


@clause(
    "4.1.3",
    (1052,),
    "3) Construct the Signature element that includes the SignedInfo, KeyInfo (RECOMMENDED) and SignatureValue "
    "elements as specified in XML Signature [XMLDSIG].",
)
def test_4_1_3_a_signature_without_keyinfo_is_accepted() -> None:
    # KeyInfo is RECOMMENDED, not required: a signature without one verifies with the certificate the
    # agreement names for the From party.
    soap = signed_by_us()
    start, end = soap.index(b"<ds:KeyInfo>"), soap.index(b"</ds:KeyInfo>") + len(b"</ds:KeyInfo>")
    bare = soap[:start] + soap[end:]
    assert b"KeyInfo" not in bare
    assert accepted(bare).signer == party_a()[1]


@clause(
    "4.1.3",
    (1055,),
    "The SignedInfo element SHALL have a CanonicalizationMethod element, a SignatureMethod element and one or more "
    "Reference elements, as defined in XML Signature [XMLDSIG].",
)
@clause(
    "4.1.3",
    (1060,),
    "The SignatureMethod element SHALL be present and SHALL have an Algorithm attribute.",
)
def test_4_1_3_a_signedinfo_lacking_a_required_element_is_refused_saying_which() -> None:
    soap = signed_by_us()
    c14n = f'<ds:CanonicalizationMethod Algorithm="{C14N}"/>'.encode()
    method = f'<ds:SignatureMethod Algorithm="{RSA_SHA256}"/>'.encode()
    assert c14n in soap and method in soap
    error = refused(soap.replace(c14n, b""))
    assert "no CanonicalizationMethod" in error.description and error.location == "//Header/Signature"
    error = refused(soap.replace(method, b""))
    assert "no SignatureMethod" in error.description and error.location == "//Header/Signature"
    error = refused(soap.replace(method, b"<ds:SignatureMethod/>"))
    assert "no SignatureMethod Algorithm" in error.description
    # No Reference at all: nothing is signed.
    root = etree.fromstring(soap)
    signed_info = root.find(f".//{{{DSIG}}}SignedInfo")
    assert signed_info is not None
    for reference in signed_info.findall(f"{{{DSIG}}}Reference"):
        signed_info.remove(reference)
    error = refused(etree.tostring(root))
    assert 'has 0 References with URI=""' in error.description


@clause(
    "4.1.3",
    (1057,),
    "The RECOMMENDED canonicalization method applied to the data to be signed is "
    '<CanonicalizationMethod Algorithm="http://www.w3.org/TR/2001/REC-xml-c14n-20010315"/> described in '
    "[XMLC14N]. This algorithm excludes comments.",
)
def test_4_1_3_we_canonicalize_with_c14n_without_comments() -> None:
    soap = envelope().replace(b"<eb:CPAId>", b"<!-- a comment --><eb:CPAId>")
    signature = signature_of(signed_by_us(soap))
    assert signature.find(f"{{{DSIG}}}SignedInfo/{{{DSIG}}}CanonicalizationMethod").get("Algorithm") == C14N  # type: ignore[union-attr]
    # "This algorithm excludes comments": a comment changed after signing does not count.
    signed = signed_by_us(soap)
    accepted(signed.replace(b"<!-- a comment -->", b"<!-- another comment -->"))


@needs_xmlsec1
@clause(
    "4.1.3",
    (1057,),
    "The RECOMMENDED canonicalization method applied to the data to be signed is "
    '<CanonicalizationMethod Algorithm="http://www.w3.org/TR/2001/REC-xml-c14n-20010315"/>',
)
def test_4_1_3_other_canonicalization_methods_are_accepted(tmp_path: Path) -> None:
    # RECOMMENDED, not required: a signature canonicalized with exclusive C14N, or C14N with comments, verifies.
    for method in (EXC_C14N, f"{C14N}#WithComments"):
        assert accepted(independently_signed(tmp_path, template(c14n=method))).signed_payloads == (ORDER, SCAN)


@clause(
    "4.1.3",
    (1060, 1061),
    "The SignatureMethod element SHALL be present and SHALL have an Algorithm attribute. The RECOMMENDED value for "
    'the Algorithm attribute is: <SignatureMethod Algorithm="http://www.w3.org/2000/09/xmldsig#dsa-sha1"/>',
)
def test_4_1_3_our_signature_method_is_the_agreements_the_recommended_dsa_sha1_included() -> None:
    # The agreement's SignatureAlgorithm is written as the SignatureMethod's Algorithm: rsa-sha256 here, and the
    # RECOMMENDED dsa-sha1 when the agreement names it (with a DSA key).
    for key, cert, method, digest in (
        (rsa_key("party A"), party_a()[1], RSA_SHA256, SHA256),
        (dsa_key("party A DSA"), dsa_certificate("party A DSA"), DSA_SHA1, SHA1),
    ):
        soap = sign(envelope(), PAYLOADS, key, cert, method, digest)
        element = signature_of(soap).find(f"{{{DSIG}}}SignedInfo/{{{DSIG}}}SignatureMethod")
        assert element is not None and element.get("Algorithm") == method
        assert accepted(soap, trusted=cert).signature_algorithm == method


@needs_xmlsec1
@clause(
    "4.1.3",
    (1063,),
    "This RECOMMENDED value SHALL be supported by all compliant ebXML Message Service software implementations.",
)
def test_4_1_3_dsa_sha1_signatures_are_verified(tmp_path: Path) -> None:
    key = (dsa_key("party A DSA"), dsa_certificate("party A DSA"))
    soap = independently_signed(tmp_path, template(method=DSA_SHA1, digest=SHA1), key=key)
    result = accepted(soap, trusted=key[1], signature_algorithms={DSA_SHA1})
    assert result.signature_algorithm == DSA_SHA1 and result.signed_payloads == (ORDER, SCAN)
    # Supported means checked: a changed payload under a DSA-SHA1 signature is refused.
    error = refused(soap, {**PAYLOADS, SCAN: b"other"}, trusted=key[1])
    assert error.location == f"cid:{SCAN}"


@clause(
    "4.1.3",
    (1065,),
    'The [XMLDSIG] Reference element for the SOAP Envelope document SHALL have a URI attribute value of "" to '
    "provide for the signature to be applied to the document that contains the Signature element.",
)
def test_4_1_3_the_envelope_is_signed_by_a_reference_with_uri_empty() -> None:
    soap = signed_by_us()
    references = signature_of(soap).findall(f"{{{DSIG}}}SignedInfo/{{{DSIG}}}Reference")
    assert [r.get("URI") for r in references].count("") == 1
    # Receiving: an envelope Reference by another URI (the same document as an XPointer) is not the profile's.
    error = refused(soap.replace(b'<ds:Reference URI="">', b'<ds:Reference URI="#xpointer(/)">'))
    assert error.location == ENVELOPE_REFERENCE and 'has 0 References with URI=""' in error.description


@clause(
    "4.1.3",
    (1067, 1068, 1069),
    "The [XMLDSIG] Reference element for the SOAP Envelope MAY include a Type attribute that has a value "
    '"http://www.w3.org/2000/09/xmldsig#Object" in accordance with XML Signature [XMLDSIG]. This attribute is '
    "purely informative. It MAY be omitted. Implementations of the ebXML MSH SHALL be prepared to handle either "
    "case.",
)
def test_4_1_3_we_omit_the_type_attribute_of_the_envelope_reference() -> None:
    # Our output takes the "omitted" case; the receiving side is shown with both cases below.
    [envelope_reference] = [r for r in signature_of(signed_by_us()).iter(f"{{{DSIG}}}Reference") if r.get("URI") == ""]
    assert envelope_reference.get("Type") in (None, OBJECT)


@needs_xmlsec1
@pytest.mark.parametrize(
    "attributes",
    ["", f' Type="{OBJECT}"', ' Id="envelope-reference"', f' Type="{OBJECT}" Id="ref-1"'],
    ids=["no Type, no Id", "Type Object", "Id", "Type and Id"],
)
@clause(
    "4.1.3",
    (1069,),
    "Implementations of the ebXML MSH SHALL be prepared to handle either case. The Reference element MAY include "
    "the id attribute.",
)
def test_4_1_3_an_envelope_reference_with_or_without_type_and_id_is_accepted(tmp_path: Path, attributes: str) -> None:
    soap = independently_signed(tmp_path, template(envelope_attributes=attributes))
    assert accepted(soap).signed_payloads == (ORDER, SCAN)
    # And still checked: the envelope changed after signing is refused at its Reference.
    assert refused(soap.replace(b"NewOrder", b"OldOrder")).location == ENVELOPE_REFERENCE


@clause(
    "4.1.3",
    (1071, 1072),
    "The [XMLDSIG] Reference element for the SOAP Envelope SHALL include a child Transforms element. The "
    "Transforms element SHALL include the following Transform child elements.",
)
@clause(
    "4.1.3",
    (1088,),
    "The last Transform element SHOULD have an Algorithm attribute with a value of: <Transform "
    'Algorithm="http://www.w3.org/TR/2001/REC-xml-c14n-20010315"/>',
)
def test_4_1_3_our_envelope_reference_has_the_three_transforms_in_order() -> None:
    [reference] = [r for r in signature_of(signed_by_us()).iter(f"{{{DSIG}}}Reference") if r.get("URI") == ""]
    transforms = reference.findall(f"{{{DSIG}}}Transforms/{{{DSIG}}}Transform")
    assert [t.get("Algorithm") for t in transforms] == [ENVELOPED, XPATH, C14N]
    # The second has the XPath of the profile (compared as a normalised expression).
    xpath = transforms[1].find(f"{{{DSIG}}}XPath")
    assert xpath is not None and xpath.nsmap.get("SOAP") == SOAP
    expected = SPEC_XPATH.replace("&quot;", '"')
    assert "".join((xpath.text or "").split()) == "".join(expected.split())


@clause(
    "4.1.3",
    (1071, 1072),
    "The [XMLDSIG] Reference element for the SOAP Envelope SHALL include a child Transforms element. The "
    "Transforms element SHALL include the following Transform child elements.",
)
def test_4_1_3_the_transforms_leave_out_only_the_elements_for_the_next_msh_or_node() -> None:
    # "The result of this [XPath] statement excludes all elements within the SOAP Envelope which contain a
    # SOAP:actor attribute targeting the nextMSH, and all their descendants. It also excludes all elements with
    # actor attributes targeting the element at the next node": those may change en route, nothing else may.
    soap = signed_by_us()
    assert b'SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH"' in soap
    accepted(soap.replace(b'eb:signed="false"', b'eb:signed="true"'))  # the nextMSH AckRequested changed
    accepted(soap.replace(b"</SOAP:Header>", NEXT_SYNC_REPLY.encode() + b"</SOAP:Header>"))  # one for "next" added
    error = refused(soap.replace(b"<eb:ConversationId>conv-1", b"<eb:ConversationId>conv-2"))
    assert error.location == ENVELOPE_REFERENCE


@needs_xmlsec1
@pytest.mark.parametrize(
    ("transforms", "reason"),
    [
        (
            f'<ds:Transform Algorithm="{XPATH}"><ds:XPath xmlns:SOAP="{SOAP}">{SPEC_XPATH}</ds:XPath></ds:Transform>'
            f'<ds:Transform Algorithm="{C14N}"/>',
            "has no enveloped-signature Transform",
        ),
        (
            f'<ds:Transform Algorithm="{ENVELOPED}"/><ds:Transform Algorithm="{XPATH}"><ds:XPath xmlns:SOAP="{SOAP}">'
            "not(ancestor-or-self::SOAP:Body)</ds:XPath></ds:Transform>",
            "is not the ebMS2 §4.1.3 one",
        ),
    ],
    ids=["no enveloped-signature", "a filter leaving the Body out"],
)
@clause(
    "4.1.3",
    (1071, 1072),
    "The [XMLDSIG] Reference element for the SOAP Envelope SHALL include a child Transforms element. The "
    "Transforms element SHALL include the following Transform child elements.",
)
def test_4_1_3_an_envelope_reference_without_the_profiles_transforms_is_refused(
    tmp_path: Path, transforms: str, reason: str
) -> None:
    error = refused(independently_signed(tmp_path, template(transforms=transforms)))
    assert error.location == ENVELOPE_REFERENCE and reason in error.description


@needs_xmlsec1
@clause(
    "4.1.3",
    (1088,),
    "The last Transform element SHOULD have an Algorithm attribute with a value of: <Transform "
    'Algorithm="http://www.w3.org/TR/2001/REC-xml-c14n-20010315"/>',
)
def test_4_1_3_without_the_last_c14n_transform_a_signature_is_still_accepted(tmp_path: Path) -> None:
    # SHOULD: the envelope Reference without a last canonicalization (XML-DSig then canonicalizes the node-set
    # with C14N anyway) or with exclusive C14N verifies.
    first_two = PROFILE_TRANSFORMS[: PROFILE_TRANSFORMS.rindex("<ds:Transform ")]
    for transforms in (first_two, first_two + f'<ds:Transform Algorithm="{EXC_C14N}"/>'):
        soap = independently_signed(tmp_path, template(transforms=transforms))
        accepted(soap)
        assert refused(soap.replace(b"cpa-a-b", b"cpa-a-c")).location == ENVELOPE_REFERENCE


def _signing_a(cpa: CollaborationProtocolAgreement) -> CollaborationProtocolAgreement:
    """``cpa`` (tests.support.multihop) with A's business channels signing with A's demo certificate."""
    [cert] = load_certificates(KEYS / "party-a.cert.pem")
    nr = NonRepudiation(DSIG, SHA256, RSA_SHA256, certificate=Certificate("A_Sign", (cert.public_bytes(Encoding.DER),)))

    def signing(channel: DeliveryChannel) -> DeliveryChannel:
        if not channel.channel_id.startswith("A_") or channel.channel_id == "A_msh":
            return channel
        exchange = channel.doc_exchange
        assert exchange.sender_binding is not None
        sender = dataclasses.replace(exchange.sender_binding, non_repudiation=nr)
        return dataclasses.replace(channel, doc_exchange=dataclasses.replace(exchange, sender_binding=sender))

    def bindings(actions: tuple[ActionBinding, ...]) -> tuple[ActionBinding, ...]:
        return tuple(dataclasses.replace(b, channels=tuple(signing(c) for c in b.channels)) for b in actions)

    infos = tuple(
        dataclasses.replace(
            info,
            collaboration_roles=tuple(
                dataclasses.replace(
                    r,
                    service_binding=dataclasses.replace(
                        r.service_binding,
                        can_send=bindings(r.service_binding.can_send),
                        can_receive=bindings(r.service_binding.can_receive),
                    ),
                )
                for r in info.collaboration_roles
            ),
            delivery_channels=tuple(signing(c) for c in info.delivery_channels),
        )
        for info in cpa.party_infos
    )
    return dataclasses.replace(cpa, party_infos=infos)


@clause(
    "4.1.3",
    (1084, 1085, 1086),
    "Any intermediate node or MSH MUST NOT change, format or in any way modify any element not targeted to the "
    "intermediary. Intermediate nodes MUST NOT add or delete white space.",
)
def test_4_1_3_an_intermediary_forwards_every_element_not_targeted_at_it_byte_for_byte() -> None:
    # A signs (with the nextMSH AckRequested the intermediary answers), the intermediary forwards to C. Outside
    # the elements targeted at the next MSH or node, what it forwards is what A sent, white space included, and
    # C verifies A's signature (the one Signature: the intermediary adds none).
    cpa = _signing_a(routed_cpa(de=True, e2e=True, hop=True))

    async def main() -> None:
        net = TestNetwork(seed=2)
        try:
            path = multihop(net, cpa, keys={"a": (KEYS / "party-a.key.pem", KEYS / "party-a.cert.pem")})
            await net.start()
            message_id = await path.a.submit_async(multihop_order(1))
            await net.run_until(lambda: path.a.status(message_id).state.status.final)  # type: ignore[union-attr]
            assert path.a.status(message_id).state.status is OutboundStatus.DELIVERED  # type: ignore[union-attr]
            [intermediary] = path.hops
            sent = soap_part(stored_body(path.a, message_id), path.a.status(message_id).content_type)  # type: ignore[union-attr]
            forwarded = soap_part(
                stored_body(intermediary, message_id),
                intermediary.status(message_id).content_type,  # type: ignore[union-attr]
            )
            assert b'actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH"' in sent
            assert without_elements_for_the_next_node(forwarded) == without_elements_for_the_next_node(sent)
            # The signature itself is forwarded as it was, and is the only one.
            assert etree.tostring(signature_of(forwarded), method="c14n") == etree.tostring(
                signature_of(sent), method="c14n"
            )
            assert len(etree.fromstring(forwarded).findall(f"{{{SOAP}}}Header/{{{DSIG}}}Signature")) == 1
            received = [e.detail for e in events(path.c, message_id, Direction.INBOUND) if e.kind == "received"]
            assert [d["signed"] for d in received] == [True]
        finally:
            await net.close()

    asyncio.run(main())


@clause(
    "4.1.3",
    (1093, 1094),
    "Each payload object requiring signing SHALL be represented by a [XMLDSIG] Reference element that SHALL have a "
    "URI attribute resolving to the payload object. This can be either the Content-Id URI of the MIME body part of "
    "the payload object, or a URI matching the Content-Location of the MIME body part of the payload object",
)
@clause(
    "4.1.3",
    (1096, 1097),
    "It is strongly RECOMMENDED that the URI attribute value match the xlink:href URI value of the corresponding "
    "Manifest/Reference element for the payload object.",
)
def test_4_1_3_we_sign_each_payload_by_the_uri_its_manifest_reference_names() -> None:
    # One Reference per payload part; its URI is the Manifest's xlink:href (here %-escaped, as written there).
    soap = envelope(payloads=("order%40a.example", SCAN))
    signed = signed_by_us(soap)
    hrefs = [r.get(f"{{{XLINK}}}href") for r in etree.fromstring(signed).iter(f"{{{EB}}}Reference")]
    uris = [r.get("URI") for r in signature_of(signed).iter(f"{{{DSIG}}}Reference") if r.get("URI") != ""]
    assert uris == hrefs == ["cid:order%40a.example", f"cid:{SCAN}"]
    # Each resolves to its part: its DigestValue is the digest of that part's content.
    values = [
        base64.b64decode(r.findtext(f"{{{DSIG}}}DigestValue") or "")
        for r in signature_of(signed).iter(f"{{{DSIG}}}Reference")
        if r.get("URI") != ""
    ]
    assert values == [hashlib.sha256(PAYLOADS[ORDER]).digest(), hashlib.sha256(PAYLOADS[SCAN]).digest()]
    assert accepted(signed).signed_payloads == (ORDER, SCAN)


@clause(
    "4.1.3",
    (1093, 1094),
    "Each payload object requiring signing SHALL be represented by a [XMLDSIG] Reference element that SHALL have a "
    "URI attribute resolving to the payload object. This can be either the Content-Id URI of the MIME body part of "
    "the payload object, or a URI matching the Content-Location of the MIME body part of the payload object",
)
@clause(
    "4.1.3",
    (1096, 1097),
    "It is strongly RECOMMENDED that the URI attribute value match the xlink:href URI value of the corresponding "
    "Manifest/Reference element for the payload object.",
)
@clause(
    "4.1.3",
    (1099, 1100),
    "Note: When a transfer encoding (e.g. base64) specified by a Content-Transfer-Encoding MIME header is used for "
    "the SOAP Envelope or payload objects, the signature generation MUST be executed before the encoding.",
)
def test_4_1_3_the_running_msh_signs_what_the_application_gave_by_the_manifests_href() -> None:
    # The sample agreement has A sign its business messages. What A sends: one Reference per payload, its URI
    # the Manifest's xlink:href, its digest that of the content the application submitted (before any encoding).
    content = bytes(range(256)) * 3  # binary: a part a writer could base64-encode

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1, content))
        await net.run_until(lambda: a.status(message_id).state.status.final)  # type: ignore[union-attr]
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        soap = soap_part(stored_body(a, message_id), stored.content_type)
        hrefs = [r.get(f"{{{XLINK}}}href") for r in etree.fromstring(soap).iter(f"{{{EB}}}Reference")]
        payload_refs = [r for r in signature_of(soap).iter(f"{{{DSIG}}}Reference") if r.get("URI") != ""]
        assert [r.get("URI") for r in payload_refs] == hrefs and len(hrefs) == 1
        assert base64.b64decode(payload_refs[0].findtext(f"{{{DSIG}}}DigestValue") or "") == (
            hashlib.sha256(content).digest()
        )
        received = [e.detail for e in events(b, message_id, Direction.INBOUND) if e.kind == "received"]
        assert [d["signed"] for d in received] == [True]  # B verified it

    run_pair(scenario)


@needs_xmlsec1
@pytest.mark.parametrize(
    "references",
    [("", f"cid:{ORDER}", f"cid:{SCAN}"), (f"cid:{SCAN}", "", f"cid:{ORDER}"), (f"cid:{ORDER}", f"cid:{SCAN}", "")],
    ids=["envelope first", "envelope between", "envelope last"],
)
@clause(
    "4.1.3",
    (1093, 1094),
    "Each payload object requiring signing SHALL be represented by a [XMLDSIG] Reference element that SHALL have a "
    "URI attribute resolving to the payload object. This can be either the Content-Id URI of the MIME body part of "
    "the payload object, or a URI matching the Content-Location of the MIME body part of the payload object",
)
def test_4_1_3_payloads_named_by_content_id_uri_in_any_order_are_accepted(tmp_path: Path, references: tuple) -> None:
    # Each Reference names its part by URI, wherever it stands in SignedInfo and the part in the package.
    soap = independently_signed(tmp_path, template(references))
    for payloads in (PAYLOADS, dict(reversed(PAYLOADS.items()))):
        result = accepted(soap, payloads)
        assert set(result.signed_payloads) == {ORDER, SCAN} and result.unsigned_payloads == ()
    # "resolving to the payload object": a part swapped for another is refused at its Content-ID URI.
    error = refused(soap, {ORDER: PAYLOADS[SCAN], SCAN: PAYLOADS[ORDER]})
    assert {i.location for i in error.issues} == {f"cid:{ORDER}", f"cid:{SCAN}"}


@needs_xmlsec1
@clause(
    "4.1.3",
    (1093, 1094, 1095),
    "Each payload object requiring signing SHALL be represented by a [XMLDSIG] Reference element that SHALL have a "
    "URI attribute resolving to the payload object. This can be either the Content-Id URI of the MIME body part of "
    "the payload object, or a URI matching the Content-Location of the MIME body part of the payload object",
)
def test_4_1_3_a_payload_named_by_its_content_location_is_accepted(tmp_path: Path) -> None:
    location = "http://a.example/orders/po-1.xml"
    parts = {location: PAYLOADS[ORDER], f"cid:{SCAN}": PAYLOADS[SCAN]}
    soap = independently_signed(tmp_path, template(("", location, f"cid:{SCAN}")), parts)
    assert accepted(soap, locations={ORDER: location}).signed_payloads == (ORDER, SCAN)
    changed = {ORDER: b"<Order><Id>PO-2</Id></Order>", SCAN: PAYLOADS[SCAN]}
    assert refused(soap, changed, locations={ORDER: location}).location == f"cid:{ORDER}"


@clause(
    "4.1.3",
    (1093, 1094),
    "Each payload object requiring signing SHALL be represented by a [XMLDSIG] Reference element that SHALL have a "
    "URI attribute resolving to the payload object. This can be either the Content-Id URI of the MIME body part of "
    "the payload object, or a URI matching the Content-Location of the MIME body part of the payload object",
)
def test_4_1_3_a_reference_resolving_to_no_part_of_the_message_is_refused() -> None:
    soap = signed_by_us()
    error = refused(soap, {ORDER: PAYLOADS[ORDER]})
    assert error.location == f"cid:{SCAN}" and "does not carry" in error.description


@clause(
    "4.1.3",
    (1099, 1100),
    "Note: When a transfer encoding (e.g. base64) specified by a Content-Transfer-Encoding MIME header is used for "
    "the SOAP Envelope or payload objects, the signature generation MUST be executed before the encoding.",
)
def test_4_1_3_a_base64_encoded_part_is_verified_on_its_decoded_content() -> None:
    # A partner signs the content, then base64-encodes the part: the receiving MSH decodes before it verifies.
    soap = signed_by_us()
    out = io.BytesIO()
    specs = [
        AttachmentSpec(cid, "application/octet-stream", PartBody.from_bytes(data), "base64")
        for cid, data in PAYLOADS.items()
    ]
    content_type = write_package(out, soap, specs, start_id="soap@a.example")
    wire = out.getvalue()
    assert b"Content-Transfer-Encoding: base64" in wire and PAYLOADS[SCAN] not in wire
    message = parse_message(wire, content_type, mode=ParseMode.LENIENT)
    try:
        payloads = {p.content_id or "": p.body.read_bytes() for p in message.payloads}
        assert accepted(message.soap, payloads).signed_payloads == (ORDER, SCAN)
    finally:
        message.close()
    # The digest of the encoded text is not the digest signed: verifying it as the content fails.
    encoded = {cid: base64.encodebytes(data) for cid, data in PAYLOADS.items()}
    assert refused(soap, encoded).location in (f"cid:{ORDER}", f"cid:{SCAN}")


# --------------------------------------------------------------- §4.1.4.1 Persistent Digital Signature


@clause(
    "4.1.4.1",
    (1158, 1159, 1160),
    "If signatures are being used to digitally sign an ebXML Message then XML Signature [DSIG] MUST be used to bind "
    "the ebXML SOAP Header and Body to the ebXML Payload Container(s) or data elsewhere on the web that relate to "
    "the message.",
)
def test_4_1_4_1_one_signature_binds_the_header_the_body_and_every_payload() -> None:
    # One XML Signature covers the SOAP Header, the SOAP Body and each payload: a change to any of them after
    # signing is refused, naming what changed.
    soap = signed_by_us()
    accepted(soap)
    assert refused(soap.replace(b"<eb:Action>NewOrder", b"<eb:Action>OldOrder")).location == ENVELOPE_REFERENCE
    body = soap.replace(b'xlink:type="simple"/>\n    </eb:Manifest>', b'xlink:type="locator"/>\n    </eb:Manifest>')
    assert body != soap
    assert refused(body).location == ENVELOPE_REFERENCE
    for cid in PAYLOADS:
        assert refused(soap, {**PAYLOADS, cid: PAYLOADS[cid] + b" "}).location == f"cid:{cid}"


@clause(
    "4.1.4.1",
    (1158, 1159, 1160),
    "If signatures are being used to digitally sign an ebXML Message then XML Signature [DSIG] MUST be used to bind "
    "the ebXML SOAP Header and Body to the ebXML Payload Container(s) or data elsewhere on the web that relate to "
    "the message.",
)
def test_4_1_4_1_a_signed_message_changed_on_the_way_is_refused_and_not_delivered() -> None:
    # On the test network under the sample agreement (A signs): a payload byte changed in transit makes B refuse
    # the message with SecurityFailure; it is neither delivered nor acknowledged.
    def tamper(url: str, body: bytes) -> bytes:
        return body.replace(b"<item>bolts</item>", b"<item>nails</item>") if url == B_URL else body

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.tamper = tamper
        message_id = await a.submit_async(order(1))
        await net.settle()
        assert [entry.message_id for entry in b.inbox(None, limit=10)] == []
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is not OutboundStatus.DELIVERED
        refusals = [e.detail for e in events(b, message_id, Direction.INBOUND) if e.kind != "received"]
        assert any("SecurityFailure" in str(d) for d in refusals), refusals

    run_pair(scenario)


@clause(
    "4.1.4.1",
    (1161, 1162),
    "An ebXML Message requiring a digital signature SHALL be signed following the process defined in this section "
    "of the specification and SHALL be in full compliance with XML Signature [XMLDSIG].",
)
def test_4_1_4_1_our_signature_verifies_with_an_independent_xmldsig_implementation(tmp_path: Path) -> None:
    # Full compliance with XML Signature: the xmlsec1 command line (libxmlsec1 as a program of its own, given
    # only the certificate and the payload parts under their cid: URIs) verifies what this MSH signs, and
    # refuses it once a payload is changed. The signature also validates against the XML Signature schema.
    if XMLSEC1 is None:
        pytest.skip(SKIP_REASON)
    from tests.support.xmlsec1 import run

    soap = signed_by_us()
    (tmp_path / "cert.pem").write_bytes(party_a()[1].public_bytes(Encoding.PEM))
    (tmp_path / "signed.xml").write_bytes(soap)
    for cid, data in PAYLOADS.items():
        (tmp_path / cid).write_bytes(data)

    def check(parts: dict[str, str]) -> int:
        maps = [arg for cid, name in parts.items() for arg in (f"--url-map:cid:{cid}", str(tmp_path / name))]
        common = ["--verify", "--enabled-key-data", "key-name", "--pubkey-cert-pem", str(tmp_path / "cert.pem")]
        return run([*common, *maps, str(tmp_path / "signed.xml")]).returncode

    assert check({cid: cid for cid in PAYLOADS}) == 0
    (tmp_path / "changed").write_bytes(b"changed")
    assert check({ORDER: ORDER, SCAN: "changed"}) != 0


# ------------------------------------------------------------------ §4.1.4.2 Persistent Signed Receipt


def _references(root: etree._Element, path: str) -> list[bytes]:
    return [etree.tostring(r, method="c14n") for r in root.iterfind(path)]


@clause(
    "4.1.4.2",
    (1165, 1166, 1167),
    "The Acknowledgment Message MUST contain a [XMLDSIG] Reference element list consistent with those contained in "
    "the [XMLDSIG] Signature element of the original message.",
)
def test_4_1_4_2_the_signed_acknowledgment_carries_the_original_signatures_references() -> None:
    # A asks for signed acknowledgments (ackSignatureRequested always) and signs its message. B's
    # Acknowledgment Message is signed, and its eb:Acknowledgment holds the very ds:Reference elements of the
    # Signature of A's message (same URIs, Transforms, DigestMethods, DigestValues, same order).
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.run_until(lambda: a.status(message_id).state.status.final)  # type: ignore[union-attr]
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        sent = etree.fromstring(soap_part(stored_body(a, message_id), stored.content_type))
        original = _references(sent, f"{{{SOAP}}}Header/{{{DSIG}}}Signature/{{{DSIG}}}SignedInfo/{{{DSIG}}}Reference")
        assert len(original) == 2
        receipt = a.receipt(message_id)
        assert receipt is not None
        ack = etree.fromstring(receipt)
        assert ack.find(f"{{{SOAP}}}Header/{{{DSIG}}}Signature") is not None
        copied = _references(ack, f"{{{SOAP}}}Header/{{{EB}}}Acknowledgment/{{{DSIG}}}Reference")
        assert copied == original

    run_pair(scenario, cpa=signed_acks())


@clause(
    "4.1.4.2",
    (1165, 1166, 1167),
    "The Acknowledgment Message MUST contain a [XMLDSIG] Reference element list consistent with those contained in "
    "the [XMLDSIG] Signature element of the original message.",
)
def test_4_1_4_2_a_reference_list_inconsistent_with_the_original_is_not_a_receipt() -> None:
    # The sender holds the receipt's list against its message's Signature: a list missing a Reference, naming
    # one more, or with another digest is refused (SecurityFailure at the Acknowledgment's Reference).
    message = signed_by_us()
    references = list(receipt_references(message))
    assert len(check_receipt(references, message)) == 3
    other = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    start = references[1].index("<ds:DigestValue>") + len("<ds:DigestValue>")
    end = references[1].index("</ds:DigestValue>")
    changed = references[1][:start] + other + references[1][end:]
    extra = references[2].replace(f"cid:{SCAN}", "cid:extra@a.example")
    for wrong in ([references[0], references[2]], [*references, extra], [references[0], changed, references[2]]):
        with pytest.raises(SecurityError) as caught:
            check_receipt(wrong, message)
        assert caught.value.error_code is ErrorCode.SECURITY_FAILURE
        assert caught.value.location.startswith("//Header/Acknowledgment/Reference")
