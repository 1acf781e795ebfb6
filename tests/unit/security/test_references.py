"""What each payload Reference names (ebMS2 §4.1.3): "Each payload object requiring signing SHALL be
represented by a [XMLDSIG] Reference element that SHALL have a URI attribute resolving to the payload object.
This can be either the Content-Id URI of the MIME body part of the payload object, or a URI matching the
Content-Location of the MIME body part of the payload object, or a URI that resolves to a payload object
external to the Message Package." The last is refused (msh/security/references.py: this MSH fetches
nothing), as is anything that does not name exactly one part."""

from __future__ import annotations

import threading

import pytest
import xmlsec
from lxml import etree

from msh.security.library import resolving_parts
from msh.security.references import Named, PackageParts, resolve

DS = "http://www.w3.org/2000/09/xmldsig#"
PARTS = PackageParts.of(
    {"<order@a.example>": b"order", "scan@a.example": b"scan", "cid:notes@a.example": b"notes"},
    {"order@a.example": "http://a.example/po-1.xml", "notes@a.example": "  notes.txt "},
)


def signature(*uris: str | None) -> etree._Element:
    root = etree.Element(f"{{{DS}}}Signature", nsmap={"ds": DS})
    signed_info = etree.SubElement(root, f"{{{DS}}}SignedInfo")
    for uri in uris:
        reference = etree.SubElement(signed_info, f"{{{DS}}}Reference")
        if uri is not None:
            reference.set("URI", uri)
    return root


def test_parts_are_keyed_by_bare_content_id_in_package_order() -> None:
    assert list(PARTS.contents) == ["order@a.example", "scan@a.example", "notes@a.example"]
    assert PARTS.locations == {"order@a.example": "http://a.example/po-1.xml", "notes@a.example": "notes.txt"}


CONTENT_ID_URIS = ["cid:scan@a.example", "CID:scan@a.example", "cId:scan@a.example", "cid:scan%40a.example"]


@pytest.mark.parametrize("uri", CONTENT_ID_URIS)
def test_the_content_id_uri_names_its_part(uri: str) -> None:
    # "either the Content-Id URI of the MIME body part": RFC 2392 cid: URL, scheme in any case, %-escaped.
    [reference] = resolve(signature("", uri), PARTS).references
    assert (reference.content_id, reference.named, reference.location) == ("scan@a.example", Named.CONTENT_ID, uri)


def test_the_content_location_names_its_part() -> None:
    # "or a URI matching the Content-Location of the MIME body part of the payload object".
    resolution = resolve(signature("http://a.example/po-1.xml", "", "notes.txt"), PARTS)
    assert [(r.content_id, r.named) for r in resolution.references] == [
        ("order@a.example", Named.CONTENT_LOCATION),
        ("notes@a.example", Named.CONTENT_LOCATION),
    ]
    # An error in it is reported at the part's Content-ID URI (ebMS2 §4.2.3.2.5).
    assert resolution.references[0].location == "cid:order@a.example"
    assert resolution.unsigned == ("scan@a.example",) and resolution.problems == ()


def test_a_content_location_is_matched_as_written() -> None:
    # RFC 2557 resolves relative Content-Locations against a base this MSH does not guess: "po-1.xml" is not
    # "http://a.example/po-1.xml", and names nothing.
    resolution = resolve(signature("po-1.xml"), PARTS)
    [(description, location)] = resolution.problems
    assert "neither the envelope" in description and location.endswith('[@URI="po-1.xml"]')


def test_parts_without_a_reference_are_unsigned_and_several_references_may_name_one_part() -> None:
    # "Each payload object requiring signing": the others have no Reference, and are listed as unsigned.
    resolution = resolve(signature("", "cid:order@a.example", "http://a.example/po-1.xml"), PARTS)
    assert resolution.signed == ("order@a.example",)
    assert resolution.unsigned == ("scan@a.example", "notes@a.example")
    assert resolution.problems == ()


def path(uri: str) -> str:
    return f'//Header/Signature/SignedInfo/Reference[@URI="{uri}"]'


REFUSED = {
    "a part the package does not carry": (
        "cid:other@a.example",
        "which the message does not carry",
        "cid:other@a.example",
    ),
    "a URL outside the package": (
        "https://b.example/po.xml",
        "outside the message package",
        path("https://b.example/po.xml"),
    ),
    "a local file": ("file:///etc/passwd", "never a file or a URL", path("file:///etc/passwd")),
    "an element of the envelope by its id": ("#manifest", "an element of the envelope by its id", path("#manifest")),
    "a fragment of a part": (
        "cid:order@a.example#xpointer(/Order)",
        "has a fragment",
        path("cid:order@a.example#xpointer(/Order)"),
    ),
    "no URI attribute": (None, "without a URI attribute", "//Header/Signature/SignedInfo/Reference[not(@URI)]"),
}


@pytest.mark.parametrize(("uri", "reason", "where"), REFUSED.values(), ids=REFUSED.keys())
def test_a_reference_that_names_no_single_part_is_refused_with_its_reason(
    uri: str | None, reason: str, where: str
) -> None:
    resolution = resolve(signature("", uri), PARTS)
    [(description, location)] = resolution.problems
    assert reason in description and location == where
    assert resolution.references == ()


def test_a_content_location_carried_by_two_parts_is_ambiguous() -> None:
    parts = PackageParts.of({"a@x": b"a", "b@x": b"b"}, {"a@x": "doc.xml", "b@x": "doc.xml"})
    [(description, _)] = resolve(signature("doc.xml"), parts).problems
    assert "matches the Content-Location of 2 payload parts (cid:a@x, cid:b@x)" in description


def test_uris_that_read_the_same_once_decoded_but_name_two_parts_are_refused() -> None:
    # libxmlsec looks a URI up %-decoded first: "a%20b" would open the part of "a b".
    parts = PackageParts.of({"p@x": b"p", "q@x": b"q"}, {"p@x": "a%20b", "q@x": "a b"})
    [(description, location)] = resolve(signature("a b", "a%20b"), parts).problems
    assert "read the same once %-decoded but name different payload parts" in description
    assert location.endswith('[@URI="a%20b"]')


def test_the_uri_table_opens_exactly_the_resolved_uris_as_written_and_decoded() -> None:
    resolution = resolve(signature("", "cid:scan%40a.example", "http://a.example/po-1.xml"), PARTS)
    assert resolution.uri_table() == {
        "cid:scan%40a.example": "scan@a.example",
        "cid:scan@a.example": "scan@a.example",
        "http://a.example/po-1.xml": "order@a.example",
    }


def test_libxmlsec_reads_the_part_the_table_names_and_nothing_else() -> None:
    # A Content-Location URI opens its part through the table; a cid: URI the table does not list opens nothing.
    template = etree.fromstring(
        f"""<Doc><ds:Signature xmlns:ds="{DS}"><ds:SignedInfo>
        <ds:CanonicalizationMethod Algorithm="http://www.w3.org/TR/2001/REC-xml-c14n-20010315"/>
        <ds:SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#hmac-sha256"/>
        <ds:Reference URI="http://a.example/po-1.xml"><ds:DigestMethod Algorithm="http://www.w3.org/2000/09/xmldsig#sha1"/>
        <ds:DigestValue/></ds:Reference></ds:SignedInfo><ds:SignatureValue/></ds:Signature></Doc>""".encode()
    )
    context = xmlsec.SignatureContext()
    context.key = xmlsec.Key.from_binary_data(xmlsec.constants.KeyDataHmac, b"k")
    with resolving_parts(PARTS.contents, {"http://a.example/po-1.xml": "order@a.example"}) as use:
        context.sign(template[0])
    assert use.requested == ["order@a.example"]
    with resolving_parts(PARTS.contents, {}), pytest.raises(xmlsec.Error):
        context.sign(template[0])
    # Other threads see their own table (none: nothing opens).
    outcome: list[bool] = []

    def other() -> None:
        try:
            context.sign(template[0])
            outcome.append(True)
        except xmlsec.Error:
            outcome.append(False)

    with resolving_parts(PARTS.contents, {"http://a.example/po-1.xml": "order@a.example"}):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert outcome == [False]
