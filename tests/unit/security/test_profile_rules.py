"""The ebMS2 §4.1.3 profile a received ``ds:Signature`` is held to before any digest is computed
(:func:`msh.security.profile.profile_problems`): each rule's refusal, with its reason and the location of the
element at fault, and the forms the profile allows that are accepted. The signatures are written by hand:
only their shape is judged here (tests/integration/test_signature_forms.py verifies real ones)."""

from __future__ import annotations

import pytest
from lxml import etree

from msh.security.profile import ENVELOPE_REFERENCE, SIGNATURE, first_signature, profile_notes, profile_problems
from tests.support.security import NEXT_MSH_ACKNOWLEDGMENT, envelope

DSIG = "http://www.w3.org/2000/09/xmldsig#"
SOAP = "http://schemas.xmlsoap.org/soap/envelope/"
C14N = "http://www.w3.org/TR/2001/REC-xml-c14n-20010315"
EXC_C14N = "http://www.w3.org/2001/10/xml-exc-c14n#"
ENVELOPED = f"{DSIG}enveloped-signature"
XPATH = "http://www.w3.org/TR/1999/REC-xpath-19991116"
XSLT = "http://www.w3.org/TR/1999/REC-xslt-19991116"
RSA_SHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
SHA256 = "http://www.w3.org/2001/04/xmlenc#sha256"
FILTER = (
    f'<ds:Transform Algorithm="{XPATH}"><ds:XPath>not(ancestor-or-self::node()[@SOAP:actor='
    '"urn:oasis:names:tc:ebxml-msg:actor:nextMSH"] | ancestor-or-self::node()[@SOAP:actor='
    '"http://schemas.xmlsoap.org/soap/actor/next"])</ds:XPath></ds:Transform>'
)
PROFILE_TRANSFORMS = f'<ds:Transform Algorithm="{ENVELOPED}"/>{FILTER}<ds:Transform Algorithm="{C14N}"/>'
DIGEST = f'<ds:DigestMethod Algorithm="{SHA256}"/><ds:DigestValue>AAAA</ds:DigestValue>'


def signature(
    *,
    transforms: str = PROFILE_TRANSFORMS,
    payloads: str = f'<ds:Reference URI="cid:order@a.example">{DIGEST}</ds:Reference>',
    c14n: str = f'<ds:CanonicalizationMethod Algorithm="{C14N}"/>',
    method: str = f'<ds:SignatureMethod Algorithm="{RSA_SHA256}"/>',
    envelope_reference: str | None = None,
    header_extra: str = "",
) -> etree._Element:
    """The first signature of a test envelope whose SOAP Header carries the given SignedInfo parts."""
    if envelope_reference is None:
        envelope_reference = f'<ds:Reference URI=""><ds:Transforms>{transforms}</ds:Transforms>{DIGEST}</ds:Reference>'
    xml = (
        f'<ds:Signature xmlns:ds="{DSIG}"><ds:SignedInfo>{c14n}{method}{envelope_reference}{payloads}'
        "</ds:SignedInfo><ds:SignatureValue>AAAA</ds:SignatureValue></ds:Signature>"
    )
    soap = envelope(header_extra=header_extra).replace(b"  </SOAP:Header>", xml.encode() + b"</SOAP:Header>")
    found = first_signature(etree.fromstring(soap))
    assert found is not None
    return found


def test_the_profiles_own_form_has_no_problem_and_no_note() -> None:
    assert profile_problems(signature()) == []
    assert profile_notes(signature()) == []


ALLOWED = {
    # ebMS2 §4.1.3: "The last Transform element SHOULD have an Algorithm attribute with a value of" C14N.
    "no last canonicalization": f'<ds:Transform Algorithm="{ENVELOPED}"/>{FILTER}',
    "exclusive canonicalization last": f'<ds:Transform Algorithm="{ENVELOPED}"/>{FILTER}'
    f'<ds:Transform Algorithm="{EXC_C14N}"/>',
    "canonicalization with comments last": f'<ds:Transform Algorithm="{ENVELOPED}"/>{FILTER}'
    f'<ds:Transform Algorithm="{C14N}#WithComments"/>',
}


@pytest.mark.parametrize("transforms", ALLOWED.values(), ids=ALLOWED.keys())
def test_forms_of_the_last_transform_the_profile_allows(transforms: str) -> None:
    assert profile_problems(signature(transforms=transforms)) == []


def test_the_envelope_reference_may_have_a_type_and_an_id_and_come_last() -> None:
    # ebMS2 §4.1.3: "MAY include a Type attribute ... MAY be omitted ... The Reference element MAY include the
    # id attribute"; SignedInfo has "one or more Reference elements", in no order the spec sets.
    reference = (
        f'<ds:Reference Id="r1" Type="{DSIG}Object" URI=""><ds:Transforms>{PROFILE_TRANSFORMS}</ds:Transforms>'
        f"{DIGEST}</ds:Reference>"
    )
    payload = f'<ds:Reference URI="cid:order@a.example">{DIGEST}</ds:Reference>'
    assert profile_problems(signature(envelope_reference=payload, payloads=reference)) == []


WITHOUT_FILTER = f'<ds:Transform Algorithm="{ENVELOPED}"/><ds:Transform Algorithm="{C14N}"/>'


def test_an_acknowledgment_alone_signed_over_the_whole_envelope_is_the_profiles_form() -> None:
    # ebMS2 §10.1.4: "create a message with no payloads, including a single Acknowledgment element ..., and a
    # [XMLDSIG] Signature element with the following Transforms": enveloped-signature, C14N.
    ack = signature(transforms=WITHOUT_FILTER, payloads="", header_extra=NEXT_MSH_ACKNOWLEDGMENT)
    assert profile_problems(ack) == [] and profile_notes(ack) == []


def test_a_business_message_signed_over_the_whole_envelope_is_accepted_with_a_note() -> None:
    # Decision (msh/security/profile.py): every element is signed, so it is not refused; but it is not
    # §4.1.3's form, and an intermediary changing a nextMSH element breaks it: said as a note.
    whole = signature(transforms=WITHOUT_FILTER)
    assert profile_problems(whole) == []
    [(note, location)] = profile_notes(whole)
    assert location == ENVELOPE_REFERENCE and "without the ebMS2 §4.1.3 XPath filter" in note
    # An Acknowledgment bundled with a payload Reference is not §10.1.4's message either.
    bundled = signature(transforms=WITHOUT_FILTER, header_extra=NEXT_MSH_ACKNOWLEDGMENT)
    assert len(profile_notes(bundled)) == 1


ENVELOPE_REFUSALS = {
    # ebMS2 §4.1.3: "The first Transform element has an Algorithm attribute with a value of ...enveloped-signature"
    "no Transforms": ("", "has no enveloped-signature Transform"),
    "no enveloped-signature": (f'{FILTER}<ds:Transform Algorithm="{C14N}"/>', "has no enveloped-signature"),
    "enveloped-signature second": (
        f'{FILTER}<ds:Transform Algorithm="{ENVELOPED}"/>',
        f"its first Transform is {XPATH!r}, not enveloped-signature",
    ),
    # ebMS2 §4.1.3: "The second Transform element has a child XPath element that has a value of: ..."
    "the XPath filter third": (
        f'<ds:Transform Algorithm="{ENVELOPED}"/><ds:Transform Algorithm="{C14N}"/>{FILTER}',
        "its XPath filter is Transform 3; ebMS2 §4.1.3 has it second",
    ),
    "another XPath expression": (
        f'<ds:Transform Algorithm="{ENVELOPED}"/><ds:Transform Algorithm="{XPATH}"><ds:XPath>true()</ds:XPath>'
        "</ds:Transform>",
        "is not the ebMS2 §4.1.3 one",
    ),
    "an XPath Transform without its XPath": (
        f'<ds:Transform Algorithm="{ENVELOPED}"/><ds:Transform Algorithm="{XPATH}"/>',
        "its XPath Transform has 0 ds:XPath elements",
    ),
    "an XSLT after the filter": (
        f'<ds:Transform Algorithm="{ENVELOPED}"/>{FILTER}<ds:Transform Algorithm="{XSLT}"/>',
        "at most one canonicalization after the XPath filter",
    ),
    "two canonicalizations": (
        f'<ds:Transform Algorithm="{ENVELOPED}"/>{FILTER}<ds:Transform Algorithm="{C14N}"/>'
        f'<ds:Transform Algorithm="{EXC_C14N}"/>',
        "at most one canonicalization",
    ),
}


@pytest.mark.parametrize(("transforms", "reason"), ENVELOPE_REFUSALS.values(), ids=ENVELOPE_REFUSALS.keys())
def test_an_envelope_reference_outside_the_profile_is_refused_naming_it(transforms: str, reason: str) -> None:
    [(description, location)] = profile_problems(signature(transforms=transforms))
    assert location == ENVELOPE_REFERENCE
    assert description.startswith("the signature does not cover the envelope as ebMS2 §4.1.3 says")
    assert reason in description


def test_the_envelope_must_have_exactly_one_reference_uri_empty() -> None:
    # ebMS2 §4.1.3: "The [XMLDSIG] Reference element for the SOAP Envelope document SHALL have a URI attribute
    # value of """.
    none = signature(envelope_reference="")
    assert profile_problems(none) == [
        (
            'the signature has 0 References with URI=""; the ebMS2 §4.1.3 profile signs the envelope with exactly one',
            ENVELOPE_REFERENCE,
        )
    ]
    twice = f'<ds:Reference URI=""><ds:Transforms>{PROFILE_TRANSFORMS}</ds:Transforms>{DIGEST}</ds:Reference>'
    assert "has 2 References" in profile_problems(signature(payloads=twice))[0][0]


METHOD_REFUSALS = {
    # ebMS2 §4.1.3: "The SignedInfo element SHALL have a CanonicalizationMethod element, a SignatureMethod element"
    "no CanonicalizationMethod": ({"c14n": ""}, "has no CanonicalizationMethod Algorithm"),
    "an unknown CanonicalizationMethod": (
        {"c14n": '<ds:CanonicalizationMethod Algorithm="urn:example:c14n"/>'},
        "CanonicalizationMethod 'urn:example:c14n' is not one this MSH verifies",
    ),
    # "The SignatureMethod element SHALL be present and SHALL have an Algorithm attribute."
    "no SignatureMethod": ({"method": ""}, "has no SignatureMethod Algorithm"),
    "a SignatureMethod without Algorithm": ({"method": "<ds:SignatureMethod/>"}, "has no SignatureMethod Algorithm"),
    "an HMAC SignatureMethod": (
        {"method": f'<ds:SignatureMethod Algorithm="{DSIG}hmac-sha1"/>'},
        f"SignatureMethod '{DSIG}hmac-sha1' is not one this MSH verifies",
    ),
}


@pytest.mark.parametrize(("parts", "reason"), METHOD_REFUSALS.values(), ids=METHOD_REFUSALS.keys())
def test_signed_info_methods_are_required_and_known(parts: dict[str, str], reason: str) -> None:
    [(description, location)] = profile_problems(signature(**parts))
    assert location == SIGNATURE and reason in description


def test_digest_methods_must_be_known_and_digest_values_present() -> None:
    md5 = (
        '<ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#md5"/><ds:DigestValue>AAAA</ds:DigestValue>'
    )
    [(description, location)] = profile_problems(
        signature(payloads=f'<ds:Reference URI="cid:order@a.example">{md5}</ds:Reference>')
    )
    assert location == '//Header/Signature/SignedInfo/Reference[@URI="cid:order@a.example"]'
    assert "DigestMethod 'http://www.w3.org/2001/04/xmldsig-more#md5' is not one this MSH verifies" in description
    empty = f'<ds:DigestMethod Algorithm="{SHA256}"/><ds:DigestValue> </ds:DigestValue>'
    [(description, location)] = profile_problems(
        signature(payloads=f'<ds:Reference URI="cid:order@a.example">{empty}</ds:Reference>')
    )
    assert "has no base64 DigestValue" in description


PAYLOAD_TRANSFORMS = {
    "XPath": f'<ds:Transform Algorithm="{XPATH}"><ds:XPath>false()</ds:XPath></ds:Transform>',
    "XSLT": f'<ds:Transform Algorithm="{XSLT}"/>',
    "enveloped-signature": f'<ds:Transform Algorithm="{ENVELOPED}"/>',
    "base64": f'<ds:Transform Algorithm="{DSIG}base64"/>',
}


@pytest.mark.parametrize("transform", PAYLOAD_TRANSFORMS.values(), ids=PAYLOAD_TRANSFORMS.keys())
def test_payload_transforms_other_than_canonicalization_are_refused(transform: str) -> None:
    # ebMS2 §4.1.3: "The determination of appropriate transforms for each payload is left to the implementation":
    # this one runs canonicalization only.
    reference = (
        f'<ds:Reference URI="cid:order@a.example"><ds:Transforms>{transform}</ds:Transforms>{DIGEST}</ds:Reference>'
    )
    [(description, location)] = profile_problems(signature(payloads=reference))
    assert location == '//Header/Signature/SignedInfo/Reference[@URI="cid:order@a.example"]'
    assert "canonicalization only" in description


def test_a_canonicalized_payload_is_in_the_profile() -> None:
    transform = f'<ds:Transform Algorithm="{EXC_C14N}"/>'
    reference = (
        f'<ds:Reference URI="cid:order@a.example"><ds:Transforms>{transform}</ds:Transforms>{DIGEST}</ds:Reference>'
    )
    assert profile_problems(signature(payloads=reference)) == []


def test_a_signature_without_signed_info() -> None:
    soap = envelope().replace(b"  </SOAP:Header>", f'<ds:Signature xmlns:ds="{DSIG}"/></SOAP:Header>'.encode())
    found = first_signature(etree.fromstring(soap))
    assert found is not None
    assert profile_problems(found) == [("the ds:Signature has no ds:SignedInfo", SIGNATURE)]


def test_the_soap_namespace_of_the_filter_may_come_from_the_envelope() -> None:
    # The test envelope declares SOAP on its root: the ds:XPath inherits it (XPath prefixes are in-scope ones).
    assert SOAP in signature().nsmap.values()
    assert profile_problems(signature()) == []
