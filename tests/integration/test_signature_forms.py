"""Signatures written the ways other ebMS 2.0 implementations write them, made by an independent signer (the
``xmlsec1`` command line: libxmlsec1 1.2 run as a program, from a ``ds:Signature`` template written here by
hand, the payload parts given to it as files under the URIs the References use), and verified here.

Every form ebMS2 §4.1.3 allows is accepted; every form it does not is refused with a SecurityFailure naming
the Reference or element at fault. Each test quotes the sentence of ebMS2 §4.1.3 (or §4.1.1, §10.1.4) it
checks; the expected answer is that sentence's. Where the spec leaves room, the test says which decision of
the MSH it checks (documented in msh/security/references.py, profile.py and verifying.py).

Skipped where xmlsec1 is not installed (scripts/test installs it when run as root).
"""

from __future__ import annotations

import base64
import functools
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import dsa, rsa
from cryptography.hazmat.primitives.serialization import Encoding

from msh.errors import ErrorCode, SecurityError, Severity
from msh.security import Verification, verify
from tests.support.security import (
    NEXT_MSH_ACKNOWLEDGMENT,
    NOW,
    PAYLOADS,
    RSA_SHA1,
    RSA_SHA256,
    SHA1,
    SHA256,
    certificate,
    dsa_certificate,
    dsa_key,
    envelope,
    rsa_key,
)
from tests.support.xmlsec1 import SKIP_REASON, XMLSEC1, xmlsec1_sign, xmlsec1_sign_hmac

pytestmark = pytest.mark.skipif(XMLSEC1 is None, reason=SKIP_REASON)

DSIG = "http://www.w3.org/2000/09/xmldsig#"
SOAP_NS = "http://schemas.xmlsoap.org/soap/envelope/"
C14N = "http://www.w3.org/TR/2001/REC-xml-c14n-20010315"
C14N_COMMENTS = C14N + "#WithComments"
EXC_C14N = "http://www.w3.org/2001/10/xml-exc-c14n#"
EXC_C14N_COMMENTS = EXC_C14N + "WithComments"
ENVELOPED = DSIG + "enveloped-signature"
XPATH = "http://www.w3.org/TR/1999/REC-xpath-19991116"
SHA512 = "http://www.w3.org/2001/04/xmlenc#sha512"
DSA_SHA1 = DSIG + "dsa-sha1"
HMAC_SHA1 = DSIG + "hmac-sha1"
ENVELOPE_REFERENCE = '//Header/Signature/SignedInfo/Reference[@URI=""]'

# ebMS2 §4.1.3, as the spec writes it in its example (&quot; and line breaks inside the expression).
SPEC_XPATH = """ not(ancestor-or-self::node()[@SOAP:actor=
                    &quot;urn:oasis:names:tc:ebxml-msg:actor:nextMSH&quot;]
                          | ancestor-or-self::node()[@SOAP:actor=
                    &quot;http://schemas.xmlsoap.org/soap/actor/next&quot;])
                """
ORDER, SCAN = "order@a.example", "scan@a.example"


@dataclass(frozen=True)
class Form:
    """A ``ds:Signature`` template as an implementation writes it (what xmlsec1 is asked to sign)."""

    c14n: str = C14N
    method: str = RSA_SHA256
    digest: str = SHA256
    # The References in SignedInfo order: "" the envelope, else a payload URI.
    references: tuple[str, ...] = ("", f"cid:{ORDER}", f"cid:{SCAN}")
    envelope_attributes: str = ""
    transforms: str | None = None  # None: the profile's three, with xpath and last below
    xpath: str = SPEC_XPATH
    xpath_namespaces: str = f' xmlns:SOAP="{SOAP_NS}"'
    last: str | None = C14N
    payload_transforms: str = ""
    key_info: str = "<ds:KeyInfo><ds:X509Data/></ds:KeyInfo>"
    signature_open: str = f'<ds:Signature xmlns:ds="{DSIG}">'
    signed_info_attributes: str = ""

    def envelope_transforms(self) -> str:
        if self.transforms is not None:
            return self.transforms
        last = f'<ds:Transform Algorithm="{self.last}"/>' if self.last else ""
        return (
            f'<ds:Transform Algorithm="{ENVELOPED}"/>\n'
            f'          <ds:Transform Algorithm="{XPATH}">'
            f"<ds:XPath{self.xpath_namespaces}>{self.xpath}</ds:XPath></ds:Transform>\n"
            f"          {last}"
        )

    def reference(self, uri: str) -> str:
        digest = f'<ds:DigestMethod Algorithm="{self.digest}"/><ds:DigestValue/>'
        if uri == "":
            return (
                f'<ds:Reference URI=""{self.envelope_attributes}>\n'
                f"        <ds:Transforms>\n          {self.envelope_transforms()}\n        </ds:Transforms>\n"
                f"        {digest}\n      </ds:Reference>"
            )
        transforms = f"<ds:Transforms>{self.payload_transforms}</ds:Transforms>" if self.payload_transforms else ""
        return f'<ds:Reference URI="{uri}">{transforms}{digest}</ds:Reference>'

    def xml(self) -> str:
        references = "\n      ".join(self.reference(uri) for uri in self.references)
        return (
            f"{self.signature_open}\n"
            f"    <ds:SignedInfo{self.signed_info_attributes}>\n"
            f'      <ds:CanonicalizationMethod Algorithm="{self.c14n}"/>\n'
            f'      <ds:SignatureMethod Algorithm="{self.method}"/>\n'
            f"      {references}\n"
            f"    </ds:SignedInfo>\n"
            f"    <ds:SignatureValue/>\n"
            f"    {self.key_info}\n"
            f"  </ds:Signature>"
        ).replace("ds:", self.signature_prefix())

    def signature_prefix(self) -> str:
        return "" if 'xmlns="' in self.signature_open else "ds:"


def template(form: Form, soap: bytes | None = None) -> bytes:
    """The envelope (by default the test envelope with its nextMSH AckRequested) with ``form`` last in its
    SOAP Header."""
    soap = soap if soap is not None else envelope()
    assert soap.count(b"  </SOAP:Header>") == 1
    return soap.replace(b"  </SOAP:Header>", b"  " + form.xml().encode() + b"\n  </SOAP:Header>")


@functools.cache
def party_a() -> tuple[rsa.RSAPrivateKey, x509.Certificate]:
    """Party A's key and certificate: the From party's, as the agreement names it."""
    return rsa_key("party A"), certificate("party A")


def signed(
    tmp_path: Path,
    form: Form,
    parts: dict[str, bytes] | None = None,
    *,
    soap: bytes | None = None,
    key: tuple[rsa.RSAPrivateKey | dsa.DSAPrivateKey, x509.Certificate] | None = None,
    key_name: str | None = None,
) -> bytes:
    """``form`` signed by xmlsec1, each payload Reference URI resolving to ``parts[uri]`` (by default the
    test payloads under their ``cid:`` URIs)."""
    private, cert = key if key is not None else party_a()
    parts = parts if parts is not None else {f"cid:{cid}": data for cid, data in PAYLOADS.items()}
    return xmlsec1_sign(template(form, soap), tmp_path, private, cert, parts, key_name=key_name)


def refused(soap: bytes, payloads: dict[str, bytes] = PAYLOADS, **kwargs: object) -> SecurityError:
    with pytest.raises(SecurityError) as caught:
        verify(soap, payloads, kwargs.pop("trusted", party_a()[1]), at=NOW, **kwargs)  # type: ignore[arg-type]
    error = caught.value
    assert (error.error_code, error.severity) == (ErrorCode.SECURITY_FAILURE, Severity.ERROR)
    return error


def accepted(soap: bytes, payloads: dict[str, bytes] = PAYLOADS, **kwargs: object) -> Verification:
    trusted = kwargs.pop("trusted", party_a()[1])
    return verify(soap, payloads, trusted, at=NOW, **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ References, order


ORDERS = {
    "envelope first, payloads in package order": ("", f"cid:{ORDER}", f"cid:{SCAN}"),
    "payloads reversed": ("", f"cid:{SCAN}", f"cid:{ORDER}"),
    "envelope last": (f"cid:{ORDER}", f"cid:{SCAN}", ""),
    "envelope between the payloads": (f"cid:{SCAN}", "", f"cid:{ORDER}"),
}


@pytest.mark.parametrize("references", ORDERS.values(), ids=ORDERS.keys())
def test_references_in_any_order_verify_whatever_the_order_of_the_parts(tmp_path: Path, references: tuple) -> None:
    # ebMS2 §4.1.3: "The SignedInfo element SHALL have a CanonicalizationMethod element, a SignatureMethod
    # element and one or more Reference elements" (no order), each payload Reference having "a URI attribute
    # resolving to the payload object": it names its part, wherever the part is in the package.
    soap = signed(tmp_path, Form(references=references))
    for payloads in (PAYLOADS, dict(reversed(PAYLOADS.items()))):
        result = accepted(soap, payloads)
        assert [r.uri for r in result.references] == list(references)
        assert set(result.signed_payloads) == {ORDER, SCAN} and result.unsigned_payloads == ()


# ------------------------------------------------------------------------------- payload URI forms


CID_FORMS = {
    "cid:": (f"cid:{ORDER}", ORDER),
    "CID: upper case scheme (RFC 2392: schemes are case-insensitive)": (f"CID:{ORDER}", ORDER),
    "Cid: mixed case": (f"Cid:{ORDER}", ORDER),
    "%-escaped Content-ID (RFC 2392)": ("cid:order%40a.example", ORDER),
    "the Content-ID header written with its angle brackets": (f"cid:{ORDER}", f"<{ORDER}>"),
}


@pytest.mark.parametrize(("uri", "content_id"), CID_FORMS.values(), ids=CID_FORMS.keys())
def test_a_payload_named_by_its_content_id_uri(tmp_path: Path, uri: str, content_id: str) -> None:
    # ebMS2 §4.1.3: the URI "can be either the Content-Id URI of the MIME body part of the payload object, ...".
    soap = signed(tmp_path, Form(references=("", uri)), {uri: PAYLOADS[ORDER]})
    result = accepted(soap, {content_id: PAYLOADS[ORDER]})
    assert result.signed_payloads == (ORDER,)


LOCATIONS = {
    "absolute http URI": "http://a.example/orders/po-1.xml",
    "relative URI": "po-1.xml",
    "URN": "urn:example:orders:po-1",
}


@pytest.mark.parametrize("location", LOCATIONS.values(), ids=LOCATIONS.keys())
def test_a_payload_named_by_its_content_location(tmp_path: Path, location: str) -> None:
    # ebMS2 §4.1.3: "... or a URI matching the Content-Location of the MIME body part of the payload object".
    form = Form(references=("", location, f"cid:{SCAN}"))
    soap = signed(tmp_path, form, {location: PAYLOADS[ORDER], f"cid:{SCAN}": PAYLOADS[SCAN]})
    result = accepted(soap, locations={ORDER: location})
    assert result.signed_payloads == (ORDER, SCAN) and result.unsigned_payloads == ()
    # Its digest is checked like any other: a changed part is named by its Content-ID URI (ebMS2 §4.2.3.2.5).
    error = refused(soap, {ORDER: b"<Order><Id>PO-2</Id></Order>", SCAN: PAYLOADS[SCAN]}, locations={ORDER: location})
    assert error.location == f"cid:{ORDER}" and "does not match its DigestValue" in error.description
    # Without that Content-Location on the part, the URI names nothing in the package.
    error = refused(soap)
    assert "neither the envelope" in error.description
    # With exclusive C14N and DSA-SHA1, libxmlsec checks the whole signature (not the RSA check without it):
    # it reads the part through the same resolution.
    key = (dsa_key("party A DSA"), dsa_certificate("party A DSA"))
    form = replace(form, c14n=EXC_C14N, method=DSA_SHA1, digest=SHA1)
    soap = signed(tmp_path, form, {location: PAYLOADS[ORDER], f"cid:{SCAN}": PAYLOADS[SCAN]}, key=key)
    assert accepted(soap, trusted=key[1], locations={ORDER: location}).signed_payloads == (ORDER, SCAN)


def test_a_reference_to_a_payload_outside_the_package_is_refused_never_fetched(tmp_path: Path) -> None:
    # ebMS2 §4.1.3 allows "a URI that resolves to a payload object external to the Message Package"; the
    # decision here (msh/security/references.py): this MSH never fetches what a message names, so such a
    # signature cannot be verified and is refused, saying so. xmlsec1 could resolve it (a file on its disk).
    external = "http://elsewhere.example/catalogue.xml"
    form = Form(references=("", f"cid:{ORDER}", external))
    soap = signed(tmp_path, form, {f"cid:{ORDER}": PAYLOADS[ORDER], external: b"<Catalogue/>"})
    error = refused(soap)
    assert error.location == f'//Header/Signature/SignedInfo/Reference[@URI="{external}"]'
    assert "outside the message package" in error.description and "never a file or a URL" in error.description


def test_a_reference_to_a_part_the_message_does_not_carry_is_refused(tmp_path: Path) -> None:
    # ebMS2 §4.1.3: the Reference "SHALL have a URI attribute resolving to the payload object": one that
    # resolves to no part of the package cannot be checked.
    soap = signed(tmp_path, Form())
    error = refused(soap, {ORDER: PAYLOADS[ORDER]})
    assert error.location == f"cid:{SCAN}" and "does not carry" in error.description


def test_a_content_location_two_parts_carry_is_refused(tmp_path: Path) -> None:
    # ebMS2 §4.1.3: the URI resolves "to the payload object": one URI matching two parts names neither.
    location = "po-1.xml"
    soap = signed(tmp_path, Form(references=("", location)), {location: PAYLOADS[ORDER]})
    error = refused(soap, locations={ORDER: location, SCAN: location})
    assert "matches the Content-Location of 2 payload parts" in error.description


# ------------------------------------------------------------------------------- unsigned payloads


def test_a_payload_without_a_reference_is_accepted_and_reported_unsigned(tmp_path: Path) -> None:
    # ebMS2 §4.1.3 step 1: References "for the SOAP Envelope and any required payload objects"; "Each payload
    # object requiring signing SHALL be represented by a [XMLDSIG] Reference": a payload may go unsigned.
    # Decision (msh/security/verifying.py): accepted, and said: the part is listed as unsigned, with a Warning.
    soap = signed(tmp_path, Form(references=("", f"cid:{ORDER}")), {f"cid:{ORDER}": PAYLOADS[ORDER]})
    result = accepted(soap)
    assert result.signed_payloads == (ORDER,) and result.unsigned_payloads == (SCAN,)
    [warning] = result.warnings
    assert (warning.error_code, warning.severity, warning.location) == (
        ErrorCode.SECURITY_FAILURE,
        Severity.WARNING,
        f"cid:{SCAN}",
    )
    # The unsigned part may change: the signature says nothing of it. The signed one may not.
    accepted(soap, {ORDER: PAYLOADS[ORDER], SCAN: b"anything"})
    assert refused(soap, {ORDER: b"<Order/>", SCAN: PAYLOADS[SCAN]}).location == f"cid:{ORDER}"


def test_an_envelope_only_signature_leaves_every_payload_unsigned(tmp_path: Path) -> None:
    # ebMS2 §4.1.3: "one or more Reference elements", the envelope's required; none of the payloads.
    result = accepted(signed(tmp_path, Form(references=("",)), {}))
    assert result.signed_payloads == () and result.unsigned_payloads == (ORDER, SCAN)


# ------------------------------------------------------------------------ algorithms, canonicalization


@pytest.mark.parametrize("c14n", [C14N, C14N_COMMENTS, EXC_C14N, EXC_C14N_COMMENTS])
def test_every_canonicalization_method(tmp_path: Path, c14n: str) -> None:
    # ebMS2 §4.1.3: "The RECOMMENDED canonicalization method applied to the data to be signed is" C14N 1.0
    # without comments: RECOMMENDED, so the others XML-DSig defines are allowed, for SignedInfo and as the
    # envelope's last Transform ("SHOULD have an Algorithm attribute with a value of" C14N).
    soap = envelope().replace(b"<eb:CPAId>", b"<!-- a comment --><eb:CPAId>")
    accepted(signed(tmp_path, Form(c14n=c14n, last=c14n), soap=soap))


@pytest.mark.parametrize(
    ("method", "digest"),
    [(RSA_SHA1, SHA1), (RSA_SHA256, SHA256), (RSA_SHA256, SHA512), (RSA_SHA1, SHA256), (RSA_SHA256, SHA1)],
)
def test_rsa_signatures_with_every_digest(tmp_path: Path, method: str, digest: str) -> None:
    # ebMS2 §4.1.3: "The SignatureMethod element SHALL be present and SHALL have an Algorithm attribute";
    # which one is the agreement's (CPP/A 2.0 SignatureAlgorithm, HashFunction).
    soap = signed(tmp_path, Form(method=method, digest=digest))
    result = accepted(soap, signature_algorithms={method}, digest_algorithms={digest})
    assert result.signature_algorithm == method and {r.digest_algorithm for r in result.references} == {digest}


def test_dsa_sha1_the_recommended_signature_method(tmp_path: Path) -> None:
    # ebMS2 §4.1.3: "The RECOMMENDED value for the Algorithm attribute is: ...#dsa-sha1. This RECOMMENDED value
    # SHALL be supported by all compliant ebXML Message Service software implementations."
    key = (dsa_key("party A DSA"), dsa_certificate("party A DSA"))
    soap = signed(tmp_path, Form(method=DSA_SHA1, digest=SHA1), key=key)
    result = accepted(soap, trusted=key[1])
    assert result.signature_algorithm == DSA_SHA1
    # Checked with the agreement's RSA certificate, it is refused, saying which key it needs.
    error = refused(soap)
    assert "needs a key of type DSA" in error.description and error.location == "//Header/Signature"
    # The agreement names the algorithms: a DSA-SHA1 message under an RSA-SHA256 agreement is refused.
    error = refused(soap, trusted=key[1], signature_algorithms={RSA_SHA256})
    assert "the agreement says" in error.description


def test_an_hmac_signature_method_is_refused(tmp_path: Path) -> None:
    # ebMS2 §4.1.4.1: the message is signed by its From party (XML Signature with the party's key); an HMAC is a
    # shared-secret MAC anyone holding the secret makes, not a signature method this MSH verifies.
    form = Form(method=HMAC_SHA1, digest=SHA1, key_info="")
    soap = xmlsec1_sign_hmac(template(form), tmp_path, b"secret", {f"cid:{c}": d for c, d in PAYLOADS.items()})
    error = refused(soap)
    assert error.location == "//Header/Signature" and f"SignatureMethod {HMAC_SHA1!r} is not one" in error.description


# ------------------------------------------------------------------------------- the envelope Reference


ENVELOPE_ATTRIBUTES = {
    "no Type, no Id": "",
    "Type Object": f' Type="{DSIG}Object"',
    "Id": ' Id="envelope-reference"',
    "Type and Id": f' Type="{DSIG}Object" Id="ref-1"',
}


@pytest.mark.parametrize("attributes", ENVELOPE_ATTRIBUTES.values(), ids=ENVELOPE_ATTRIBUTES.keys())
def test_the_envelope_reference_with_or_without_type_and_id(tmp_path: Path, attributes: str) -> None:
    # ebMS2 §4.1.3: "The [XMLDSIG] Reference element for the SOAP Envelope MAY include a Type attribute that has
    # a value "http://www.w3.org/2000/09/xmldsig#Object" ... It MAY be omitted. Implementations of the ebXML MSH
    # SHALL be prepared to handle either case. The Reference element MAY include the id attribute."
    accepted(signed(tmp_path, Form(envelope_attributes=attributes)))


XPATH_FORMS = {
    "the spec's example: &quot; and line breaks": (SPEC_XPATH, f' xmlns:SOAP="{SOAP_NS}"'),
    "on one line, double quotes": (
        'not(ancestor-or-self::node()[@SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH"] | '
        'ancestor-or-self::node()[@SOAP:actor="http://schemas.xmlsoap.org/soap/actor/next"])',
        f' xmlns:SOAP="{SOAP_NS}"',
    ),
    "single quotes, no spaces": (
        "not(ancestor-or-self::node()[@SOAP:actor='urn:oasis:names:tc:ebxml-msg:actor:nextMSH']|"
        "ancestor-or-self::node()[@SOAP:actor='http://schemas.xmlsoap.org/soap/actor/next'])",
        f' xmlns:SOAP="{SOAP_NS}"',
    ),
    "prefix SOAP-ENV declared on ds:XPath": (
        'not(ancestor-or-self::node()[@SOAP-ENV:actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH"] | '
        'ancestor-or-self::node()[@SOAP-ENV:actor="http://schemas.xmlsoap.org/soap/actor/next"])',
        f' xmlns:SOAP-ENV="{SOAP_NS}"',
    ),
    "prefix SOAP declared only on the Envelope": (SPEC_XPATH, ""),
    "the union's alternatives swapped": (
        'not(ancestor-or-self::node()[@SOAP:actor="http://schemas.xmlsoap.org/soap/actor/next"] | '
        'ancestor-or-self::node()[@SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH"])',
        "",
    ),
}


@pytest.mark.parametrize(("xpath", "namespaces"), XPATH_FORMS.values(), ids=XPATH_FORMS.keys())
def test_the_xpath_filter_written_in_other_ways(tmp_path: Path, xpath: str, namespaces: str) -> None:
    # ebMS2 §4.1.3: "The second Transform element has a child XPath element that has a value of: not
    # (ancestor-or-self::node()[@SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH"] | ...)": the same
    # expression, whatever its white space, quotes or prefix for the SOAP namespace.
    soap = signed(tmp_path, Form(xpath=xpath, xpath_namespaces=namespaces))
    accepted(soap)
    # "The result of this [XPath] statement excludes all elements within the SOAP Envelope which contain a
    # SOAP:actor attribute targeting the nextMSH": the nextMSH AckRequested may change on the way.
    accepted(soap.replace(b'eb:signed="false"', b'eb:signed="true"'))


def test_the_last_canonicalization_transform_may_be_absent(tmp_path: Path) -> None:
    # ebMS2 §4.1.3: "The last Transform element SHOULD have an Algorithm attribute with a value of" C14N: SHOULD.
    soap = signed(tmp_path, Form(last=None))
    accepted(soap)
    assert refused(soap.replace(b"cpa-a-b", b"cpa-a-c")).location == ENVELOPE_REFERENCE


KEY_INFOS = {
    "X509Data with the certificate": "<ds:KeyInfo><ds:X509Data/></ds:KeyInfo>",
    "X509IssuerSerial": "<ds:KeyInfo><ds:X509Data><ds:X509IssuerSerial/></ds:X509Data></ds:KeyInfo>",
    "KeyName": "<ds:KeyInfo><ds:KeyName/></ds:KeyInfo>",
    "KeyValue": "<ds:KeyInfo><ds:KeyValue/></ds:KeyInfo>",
    "no KeyInfo": "",
}


@pytest.mark.parametrize("key_info", KEY_INFOS.values(), ids=KEY_INFOS.keys())
def test_every_key_info_form_the_key_coming_from_the_agreement(tmp_path: Path, key_info: str) -> None:
    # ebMS2 §4.1.3 step 3: the Signature "includes the SignedInfo, KeyInfo (RECOMMENDED) and SignatureValue":
    # KeyInfo may be absent or in any XML-DSig form; the key is the one the agreement names for the From party.
    soap = signed(tmp_path, Form(key_info=key_info), key_name="party A")
    assert accepted(soap).signer == party_a()[1]


def test_a_key_info_naming_another_key_is_ignored_the_agreement_decides(tmp_path: Path) -> None:
    # KeyInfo is outside SignedInfo (ebMS2 §4.1.3 step 3): whatever it says, the agreement's key checks the
    # signature. A KeyInfo pointing elsewhere (another party's certificate, a URL to fetch) changes nothing.
    soap = signed(tmp_path, Form())
    other = base64.b64encode(certificate("party C").public_bytes(Encoding.DER)).decode()
    start, end = soap.index(b"<ds:KeyInfo>"), soap.index(b"</ds:KeyInfo>") + len(b"</ds:KeyInfo>")
    for key_info in (
        f"<ds:KeyInfo><ds:X509Data><ds:X509Certificate>{other}</ds:X509Certificate></ds:X509Data></ds:KeyInfo>",
        '<ds:KeyInfo><ds:RetrievalMethod URI="http://keys.example/party-a.cer"/></ds:KeyInfo>',
    ):
        assert accepted(soap[:start] + key_info.encode() + soap[end:]).signer == party_a()[1]
    # Signed with party C's key, carrying party C's certificate: refused, the SignatureValue named.
    forged = signed(tmp_path, Form(), key=(rsa_key("party C"), certificate("party C")))
    error = refused(forged)
    assert error.location == "//Header/Signature" and "KeyInfo carries the certificate CN=party C" in error.description


# ---------------------------------------------------------------------------- white space, namespaces

WHITE_SPACE_ENVELOPE = (
    envelope().replace(b"\n", b"\r\n").replace(b"    <eb:", b"\t\t<eb:").replace(b"<eb:To>", b"\n\n<eb:To >")
)


def test_white_space_and_line_breaks_in_the_signed_header(tmp_path: Path) -> None:
    # ebMS2 §4.1.3: "Intermediate nodes MUST NOT add or delete white space. Any such change may invalidate the
    # signature": white space is signed as written (CR LF, tabs, blank lines, a space in a tag), and a change
    # to it is detected.
    form = replace(Form(), signature_open=f'<ds:Signature xmlns:ds="{DSIG}">\r\n\t')
    soap = signed(tmp_path, form, soap=WHITE_SPACE_ENVELOPE)
    accepted(soap)
    assert refused(soap.replace(b"\t\t<eb:CPAId>", b"\t <eb:CPAId>", 1)).location == ENVELOPE_REFERENCE


SIGNATURE_NAMESPACES = {
    "default namespace, as the spec's example": replace(Form(), signature_open=f'<Signature xmlns="{DSIG}">'),
    "extra declarations on SignedInfo": replace(
        Form(), signed_info_attributes=' xmlns:x="urn:example:x" xmlns:eb="urn:example:not-eb"'
    ),
    "extra declarations on Signature": replace(
        Form(), signature_open=f'<ds:Signature xmlns:ds="{DSIG}" xmlns:y="urn:example:y" Id="sig-1">'
    ),
}


@pytest.mark.parametrize("form", SIGNATURE_NAMESPACES.values(), ids=SIGNATURE_NAMESPACES.keys())
def test_signatures_with_other_namespace_declarations(tmp_path: Path, form: Form) -> None:
    # ebMS2 §4.1.1: "The Signature element MUST be namespace qualified in accordance with XML Signature": any
    # prefix, or the default namespace as in the §4.1.3 example; SignedInfo is canonicalised with its
    # namespace context, whatever it declares.
    accepted(signed(tmp_path, form))


# ------------------------------------------------------------------------- the profile's refusals


def test_an_acknowledgment_sent_by_itself_is_signed_over_the_whole_envelope(tmp_path: Path) -> None:
    # ebMS2 §10.1.4: "create a message with no payloads, including a single Acknowledgment element ..., and a
    # [XMLDSIG] Signature element with the following Transforms": enveloped-signature and C14N.
    ack = envelope(payloads=(), header_extra=NEXT_MSH_ACKNOWLEDGMENT)
    transforms = f'<ds:Transform Algorithm="{ENVELOPED}"/><ds:Transform Algorithm="{C14N}"/>'
    soap = signed(tmp_path, Form(references=("",), transforms=transforms), {}, soap=ack)
    result = accepted(soap, {})
    assert result.warnings == ()
    # Every element is signed, the Acknowledgment for the next MSH too.
    assert refused(soap.replace(b"m-0@b.example", b"m-9@b.example"), {}).location == ENVELOPE_REFERENCE


def test_a_business_message_signed_without_the_xpath_filter_is_accepted_with_a_warning(tmp_path: Path) -> None:
    # ebMS2 §4.1.3 has the XPath filter leave out the nextMSH/next elements; without it every element is signed
    # (§10.1.4's form). Decision (msh/security/profile.py): accepted, deployed MSHs sign so, with a Warning
    # that an intermediary changing a nextMSH element will break it.
    transforms = f'<ds:Transform Algorithm="{ENVELOPED}"/><ds:Transform Algorithm="{C14N}"/>'
    soap = signed(tmp_path, Form(transforms=transforms))
    result = accepted(soap)
    [warning] = result.warnings
    assert warning.severity is Severity.WARNING and warning.location == ENVELOPE_REFERENCE
    assert "without the ebMS2 §4.1.3 XPath filter" in warning.description
    assert refused(soap.replace(b'eb:signed="false"', b'eb:signed="true"')).location == ENVELOPE_REFERENCE


REFUSED_TRANSFORMS = {
    "no enveloped-signature Transform": (
        f'<ds:Transform Algorithm="{XPATH}"><ds:XPath xmlns:SOAP="{SOAP_NS}">{SPEC_XPATH}</ds:XPath></ds:Transform>'
        f'<ds:Transform Algorithm="{C14N}"/>',
        "has no enveloped-signature Transform",
    ),
    "an XPath filter keeping the nextMSH elements in": (
        f'<ds:Transform Algorithm="{ENVELOPED}"/><ds:Transform Algorithm="{XPATH}"><ds:XPath xmlns:SOAP="{SOAP_NS}">'
        'not(ancestor-or-self::node()[@SOAP:actor="http://schemas.xmlsoap.org/soap/actor/next"])'
        f'</ds:XPath></ds:Transform><ds:Transform Algorithm="{C14N}"/>',
        "is not the ebMS2 §4.1.3 one",
    ),
    "an XPath filter leaving the Body out": (
        f'<ds:Transform Algorithm="{ENVELOPED}"/><ds:Transform Algorithm="{XPATH}"><ds:XPath xmlns:SOAP="{SOAP_NS}">'
        "not(ancestor-or-self::SOAP:Body)</ds:XPath></ds:Transform>",
        "is not the ebMS2 §4.1.3 one",
    ),
    "the filter's prefix bound to another namespace": (
        f'<ds:Transform Algorithm="{ENVELOPED}"/><ds:Transform Algorithm="{XPATH}">'
        f'<ds:XPath xmlns:SOAP="urn:example:not-soap">{SPEC_XPATH}</ds:XPath></ds:Transform>',
        "binds the prefix SOAP to urn:example:not-soap",
    ),
    "an actor with a space in it": (
        f'<ds:Transform Algorithm="{ENVELOPED}"/><ds:Transform Algorithm="{XPATH}">'
        f"<ds:XPath>{SPEC_XPATH.replace('actor:nextMSH', 'actor: nextMSH')}</ds:XPath></ds:Transform>",
        "is not the ebMS2 §4.1.3 one",
    ),
}


@pytest.mark.parametrize(("transforms", "reason"), REFUSED_TRANSFORMS.values(), ids=REFUSED_TRANSFORMS.keys())
def test_an_envelope_reference_outside_the_profile_is_refused(tmp_path: Path, transforms: str, reason: str) -> None:
    # ebMS2 §4.1.3: "The first Transform element has an Algorithm attribute with a value of: ...enveloped-
    # signature"; "The second Transform element has a child XPath element that has a value of: not(...)": a
    # signature that leaves out anything but the nextMSH/next elements does not sign the message as the profile
    # does, and is refused before any digest is computed, naming the envelope Reference.
    error = refused(signed(tmp_path, Form(transforms=transforms)))
    assert error.location == ENVELOPE_REFERENCE and reason in error.description


def test_a_same_document_reference_instead_of_uri_empty_is_refused(tmp_path: Path) -> None:
    # ebMS2 §4.1.3: "The [XMLDSIG] Reference element for the SOAP Envelope document SHALL have a URI attribute
    # value of """: one to "#xpointer(/)" (the whole document, by another name) is not it.
    form = Form(references=("", f"cid:{ORDER}", f"cid:{SCAN}"))
    soap = signed(tmp_path, form).replace(b'<ds:Reference URI="">', b'<ds:Reference URI="#xpointer(/)">')
    error = refused(soap)
    assert error.location == ENVELOPE_REFERENCE and 'has 0 References with URI=""' in error.description
    assert any("an element of the envelope by its id" in issue.description for issue in error.issues)


def test_a_signature_outside_the_soap_header_is_refused(tmp_path: Path) -> None:
    # ebMS2 §4.1.1: "Signature elements ... MAY be present as a child of the SOAP Header"; §4.1.3 step 4:
    # "Include the namespace qualified Signature element in the SOAP Header just signed".
    body = envelope().replace(b"  </SOAP:Body>", b"  " + Form().xml().encode() + b"\n  </SOAP:Body>")
    private, cert = party_a()
    soap = xmlsec1_sign(body, tmp_path, private, cert, {f"cid:{c}": d for c, d in PAYLOADS.items()})
    error = refused(soap)
    assert error.location == "/Envelope/Body/Signature" and "not a child of the SOAP Header" in error.description


def test_a_payload_reference_with_an_xpath_transform_is_refused(tmp_path: Path) -> None:
    # ebMS2 §4.1.3: "The determination of appropriate transforms for each payload is left to the
    # implementation": this MSH's is canonicalization only; an XPath on a payload could leave part of it unsigned.
    form = Form(
        references=("", f"cid:{ORDER}"),
        payload_transforms=f'<ds:Transform Algorithm="{XPATH}"><ds:XPath>not(self::Id)</ds:XPath></ds:Transform>',
    )
    soap = signed(tmp_path, form, {f"cid:{ORDER}": PAYLOADS[ORDER]})
    error = refused(soap)
    assert error.location == f'//Header/Signature/SignedInfo/Reference[@URI="cid:{ORDER}"]'
    assert "canonicalization only" in error.description


def test_a_canonicalized_xml_payload_reference_is_accepted(tmp_path: Path) -> None:
    # ebMS2 §4.1.3 leaves payload Transforms to the implementation: a canonicalization of an XML payload
    # selects nothing away, and is accepted.
    form = Form(references=("", f"cid:{ORDER}"), payload_transforms=f'<ds:Transform Algorithm="{EXC_C14N}"/>')
    soap = signed(tmp_path, form, {f"cid:{ORDER}": PAYLOADS[ORDER]})
    assert accepted(soap).signed_payloads == (ORDER,)


def test_changes_after_signing_are_named_reference_by_reference(tmp_path: Path) -> None:
    # ebMS2 §4.1.5: a payload swapped under another Content-ID "should be detected since the digest calculated
    # for the actual payload will not match the digest included in the SOAP Envelope".
    soap = signed(tmp_path, Form(references=(f"cid:{SCAN}", "", f"cid:{ORDER}")))
    error = refused(soap, {ORDER: PAYLOADS[SCAN], SCAN: PAYLOADS[ORDER]})
    assert [i.location for i in error.issues] == [f"cid:{SCAN}", f"cid:{ORDER}"]
    error = refused(soap.replace(b"NewOrder", b"OldOrder"))
    assert [i.location for i in error.issues] == [ENVELOPE_REFERENCE]
