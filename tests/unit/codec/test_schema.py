"""Unit tests of msh.ebms.schema on small hand-written envelopes.

Every case is judged by both entry points (libxml2 and xmlschema), which must agree on the verdict and on
the places they point at.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from lxml import etree

from msh.ebms.namespaces import EB, SOAP_ENV, XLINK, XML, XMLDSIG
from msh.ebms.schema import SCHEMA_FILES, explain_envelope, schema_files, validate_envelope
from msh.errors import ErrorCode, Issue, Severity
from msh.safexml import parse_xml

NS = f'xmlns:SOAP="{SOAP_ENV}" xmlns:eb="{EB}" xmlns:xlink="{XLINK}" xmlns:ds="{XMLDSIG}"'

HEADER = """<eb:MessageHeader SOAP:mustUnderstand="1" eb:version="2.0">
      <eb:From><eb:PartyId eb:type="urn:duns">123456789</eb:PartyId><eb:Role>Buyer</eb:Role></eb:From>
      <eb:To><eb:PartyId>uri:seller.example.com</eb:PartyId></eb:To>
      <eb:CPAId>cpa-1</eb:CPAId>
      <eb:ConversationId>conv-1</eb:ConversationId>
      <eb:Service eb:type="local">QuoteToCollect</eb:Service>
      <eb:Action>NewPurchaseOrder</eb:Action>
      <eb:MessageData>
        <eb:MessageId>m1@example.com</eb:MessageId>
        <eb:Timestamp>2024-01-02T03:04:05Z</eb:Timestamp>
      </eb:MessageData>
    </eb:MessageHeader>"""

MANIFEST = """<eb:Manifest eb:version="2.0">
      <eb:Reference xlink:href="cid:payload-1" xlink:type="simple" xlink:role="http://example.com/po">
        <eb:Schema eb:location="http://example.com/po.xsd" eb:version="1"/>
        <eb:Description xml:lang="en-US">Purchase order</eb:Description>
      </eb:Reference>
    </eb:Manifest>"""

SIGNATURE = """<ds:Signature>
      <ds:SignedInfo>
        <ds:CanonicalizationMethod Algorithm="http://www.w3.org/TR/2001/REC-xml-c14n-20010315"/>
        <ds:SignatureMethod Algorithm="http://www.w3.org/2000/09/xmldsig#rsa-sha1"/>
        <ds:Reference URI="">
          <ds:Transforms>
            <ds:Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"/>
            <ds:Transform Algorithm="http://www.w3.org/TR/1999/REC-xpath-19991116">
              <ds:XPath>not(ancestor-or-self::node()[@SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH"])</ds:XPath>
            </ds:Transform>
            <ds:Transform Algorithm="http://www.w3.org/TR/2001/REC-xml-c14n-20010315"/>
          </ds:Transforms>
          <ds:DigestMethod Algorithm="http://www.w3.org/2000/09/xmldsig#sha1"/>
          <ds:DigestValue>R016FadxKMVB12bBafh3zUUTQys=</ds:DigestValue>
        </ds:Reference>
        <ds:Reference URI="cid:payload-1">
          <ds:DigestMethod Algorithm="http://www.w3.org/2000/09/xmldsig#sha1"/>
          <ds:DigestValue>R016FadxKMVB12bBafh3zUUTQys=</ds:DigestValue>
        </ds:Reference>
      </ds:SignedInfo>
      <ds:SignatureValue>niO/oCjf29rQ1KPTvvFyfocCpJvMDB6P30Rf+bPMFJ21km0CgBMNvlOsulq9GE5g</ds:SignatureValue>
      <ds:KeyInfo>
        <ds:KeyName>seller</ds:KeyName>
        <ds:X509Data>
          <ds:X509IssuerSerial><ds:X509IssuerName>CN=CA</ds:X509IssuerName><ds:X509SerialNumber>42</ds:X509SerialNumber></ds:X509IssuerSerial>
          <ds:X509SubjectName>CN=seller</ds:X509SubjectName>
          <ds:X509SKI>AQAB</ds:X509SKI>
          <ds:X509Certificate>MIIBszCCAR2gAwIBAgIBADANBgkqhkiG9w0BAQUFADAA</ds:X509Certificate>
        </ds:X509Data>
        <ds:KeyValue><ds:RSAKeyValue><ds:Modulus>0bmSwWXcoHdJ</ds:Modulus><ds:Exponent>AQAB</ds:Exponent></ds:RSAKeyValue></ds:KeyValue>
      </ds:KeyInfo>
    </ds:Signature>"""


def envelope(header: str = HEADER, body: str = MANIFEST, *, extra_ns: str = "") -> bytes:
    """A SOAP envelope with the given header entries and body entries."""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<SOAP:Envelope {NS}{extra_ns}>\n'
        f"  <SOAP:Header>\n    {header}\n  </SOAP:Header>\n"
        f"  <SOAP:Body>\n    {body}\n  </SOAP:Body>\n</SOAP:Envelope>\n"
    ).encode()


def judge(data: bytes) -> tuple[Issue, ...]:
    """Validate with both entry points, check they agree on the verdict, return the lxml issues."""
    root = parse_xml(data)
    fast = validate_envelope(root)
    slow = explain_envelope(root)
    assert bool(fast) == bool(slow), f"libxml2 says {fast}, xmlschema says {slow}"
    assert set(locations(fast)) == set(locations(slow)), "both engines must point at the same places"
    for issue in (*fast, *slow):
        assert issue.error_code is ErrorCode.OTHER_XML
        assert issue.severity is Severity.ERROR
        assert issue.description
    return fast


def locations(issues: tuple[Issue, ...]) -> list[str]:
    return [issue.location for issue in issues]


# --- valid messages -------------------------------------------------------------------------------


def test_minimal_message_is_valid() -> None:
    assert judge(envelope()) == ()


def test_header_only_message_with_empty_body_is_valid() -> None:
    assert judge(envelope(body="")) == ()


def test_full_header_with_optional_parts_is_valid() -> None:
    header = HEADER.replace(
        "</eb:MessageData>",
        "<eb:RefToMessageId>m0@example.com</eb:RefToMessageId>"
        "<eb:TimeToLive>2024-01-03T00:00:00Z</eb:TimeToLive></eb:MessageData>"
        "<eb:DuplicateElimination/>"
        '<eb:Description xml:lang="en">one</eb:Description><eb:Description xml:lang="fr">un</eb:Description>'
        '<x:Extra xmlns:x="urn:x">anything</x:Extra>',
    ).replace('eb:version="2.0">', 'eb:version="2.0" eb:id="MH1" x:note="n" xmlns:x="urn:x">', 1)
    extras = (
        '<eb:AckRequested SOAP:mustUnderstand="1" eb:version="2.0" eb:signed="false" '
        'SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH"/>'
        '<eb:SyncReply SOAP:mustUnderstand="1" eb:version="2.0" '
        'SOAP:actor="http://schemas.xmlsoap.org/soap/actor/next"/>'
        '<eb:MessageOrder SOAP:mustUnderstand="1" eb:version="2.0">'
        '<eb:SequenceNumber eb:status="Reset">0</eb:SequenceNumber></eb:MessageOrder>'
    )
    assert judge(envelope(header + extras + SIGNATURE)) == ()


def test_signed_message_is_valid() -> None:
    assert judge(envelope(HEADER + SIGNATURE)) == ()


def test_acknowledgment_with_ds_reference_is_valid() -> None:
    ack = (
        '<eb:Acknowledgment SOAP:mustUnderstand="1" eb:version="2.0" '
        'SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH">'
        "<eb:Timestamp>2024-01-02T03:04:06Z</eb:Timestamp>"
        "<eb:RefToMessageId>m0@example.com</eb:RefToMessageId>"
        "<eb:From><eb:PartyId>uri:seller.example.com</eb:PartyId></eb:From>"
        '<ds:Reference URI="cid:payload-1"><ds:DigestMethod Algorithm="http://www.w3.org/2000/09/xmldsig#sha1"/>'
        "<ds:DigestValue>AQAB</ds:DigestValue></ds:Reference>"
        "</eb:Acknowledgment>"
    )
    assert judge(envelope(HEADER + ack, body="")) == ()


def test_error_list_is_valid() -> None:
    errors = (
        '<eb:ErrorList SOAP:mustUnderstand="1" eb:version="2.0" eb:highestSeverity="Error">'
        '<eb:Error eb:errorCode="SecurityFailure" eb:severity="Error" eb:location="//Header/Signature"'
        ' eb:codeContext="urn:oasis:names:tc:ebxml-msg:service:errors">'
        '<eb:Description xml:lang="en">bad signature</eb:Description></eb:Error>'
        '<eb:Error eb:errorCode="Unknown" eb:severity="Warning"/>'
        "</eb:ErrorList>"
    )
    assert judge(envelope(HEADER + errors, body="")) == ()


@pytest.mark.parametrize("status", ["UnAuthorized", "NotRecognized", "Received", "Processed", "Forwarded"])
def test_status_response_values_are_valid(status: str) -> None:
    body = (
        f'<eb:StatusResponse eb:version="2.0" eb:messageStatus="{status}">'
        "<eb:RefToMessageId>m0@example.com</eb:RefToMessageId></eb:StatusResponse>"
    )
    assert judge(envelope(body=body)) == ()


def test_status_request_is_valid() -> None:
    body = '<eb:StatusRequest eb:version="2.0"><eb:RefToMessageId>m0</eb:RefToMessageId></eb:StatusRequest>'
    assert judge(envelope(body=body)) == ()


def test_soap_fault_is_valid() -> None:
    fault = (
        "<SOAP:Fault><faultcode>SOAP:Client</faultcode><faultstring>bad</faultstring>"
        "<faultactor>urn:x</faultactor><detail><x:why xmlns:x='urn:x'>because</x:why></detail></SOAP:Fault>"
    )
    assert judge(envelope(header="", body=fault)) == ()


def test_unknown_foreign_element_in_header_is_accepted() -> None:
    """SOAP Header admits any foreign-namespace entry; an undeclared one is skipped (lax)."""
    foreign = '<hl7:Stuff xmlns:hl7="urn:hl7-org:v3" SOAP:mustUnderstand="0"><hl7:x/></hl7:Stuff>'
    assert judge(envelope(HEADER + foreign)) == ()


def test_default_namespace_message_is_valid() -> None:
    data = (
        f'<Envelope xmlns="{SOAP_ENV}"><Header><MessageHeader xmlns="{EB}" xmlns:eb="{EB}" '
        f'xmlns:s="{SOAP_ENV}" s:mustUnderstand="1" eb:version="2.0"><From><PartyId>a</PartyId></From>'
        "<To><PartyId>b</PartyId></To><CPAId>c</CPAId><ConversationId>d</ConversationId>"
        "<Service>urn:e</Service><Action>f</Action><MessageData><MessageId>g</MessageId>"
        "<Timestamp>2024-01-01T00:00:00</Timestamp></MessageData></MessageHeader></Header><Body/></Envelope>"
    ).encode()
    assert judge(data) == ()


@pytest.mark.parametrize("value", ["0", "1"])
def test_must_understand_zero_and_one_are_valid(value: str) -> None:
    assert judge(envelope(HEADER.replace('SOAP:mustUnderstand="1"', f'SOAP:mustUnderstand="{value}"'))) == ()


# --- invalid messages -----------------------------------------------------------------------------


def test_missing_from_is_invalid_and_located() -> None:
    header = HEADER.replace(
        '<eb:From><eb:PartyId eb:type="urn:duns">123456789</eb:PartyId><eb:Role>Buyer</eb:Role></eb:From>', ""
    )
    issues = judge(envelope(header))
    assert locations(issues) == ["//Header/MessageHeader/To"]
    assert "eb:From" in issues[0].description
    assert "line 6" in issues[0].description


def test_eb_entries_inside_header_and_body_are_really_validated() -> None:
    """The lax wildcards of SOAP:Header/Body must not let a broken eb: entry through."""
    broken_manifest = MANIFEST.replace(' xlink:href="cid:payload-1"', "")
    issues = judge(envelope(body=broken_manifest))
    assert locations(issues) == ["//Body/Manifest/Reference/@href"]
    assert "xlink:href" in issues[0].description


def test_wrong_highest_severity_is_invalid() -> None:
    errors = (
        '<eb:ErrorList SOAP:mustUnderstand="1" eb:version="2.0" eb:highestSeverity="Fatal">'
        '<eb:Error eb:errorCode="Unknown" eb:severity="Error"/></eb:ErrorList>'
    )
    issues = judge(envelope(HEADER + errors))
    assert locations(issues) == ["//Header/ErrorList/@highestSeverity"]
    assert "Fatal" in issues[0].description


def test_error_list_needs_an_error() -> None:
    errors = '<eb:ErrorList SOAP:mustUnderstand="1" eb:version="2.0" eb:highestSeverity="Warning"/>'
    assert locations(judge(envelope(HEADER + errors))) == ["//Header/ErrorList"]


@pytest.mark.parametrize("value", ["true", "false", "yes", ""])
def test_must_understand_other_spellings_are_invalid(value: str) -> None:
    issues = judge(envelope(HEADER.replace('SOAP:mustUnderstand="1"', f'SOAP:mustUnderstand="{value}"')))
    assert locations(issues) == ["//Header/MessageHeader/@mustUnderstand"]


def test_must_understand_is_required_on_header_entries() -> None:
    issues = judge(envelope(HEADER.replace(' SOAP:mustUnderstand="1"', "")))
    assert locations(issues) == ["//Header/MessageHeader/@mustUnderstand"]


def test_body_entries_need_no_must_understand() -> None:
    assert judge(envelope(body=MANIFEST.replace('eb:version="2.0"', 'eb:version="2.0" SOAP:mustUnderstand="1"'))) == ()


def test_version_is_required_and_must_be_qualified() -> None:
    assert judge(envelope(HEADER.replace(' eb:version="2.0"', ""))) != ()
    issues = judge(envelope(HEADER.replace(' eb:version="2.0"', ' version="2.0"')))
    assert issues
    assert all(i.location.startswith("//Header/MessageHeader") for i in issues)


def test_empty_version_is_invalid() -> None:
    assert judge(envelope(HEADER.replace('eb:version="2.0"', 'eb:version=""'))) != ()


def test_wrong_child_order_is_invalid() -> None:
    header = HEADER.replace("<eb:CPAId>cpa-1</eb:CPAId>", "").replace(
        "<eb:Action>", "<eb:CPAId>cpa-1</eb:CPAId><eb:Action>"
    )
    issues = judge(envelope(header))
    assert locations(issues)[0] == "//Header/MessageHeader/ConversationId"


def test_role_before_party_id_is_invalid() -> None:
    header = HEADER.replace(
        '<eb:PartyId eb:type="urn:duns">123456789</eb:PartyId><eb:Role>Buyer</eb:Role>',
        '<eb:Role>Buyer</eb:Role><eb:PartyId eb:type="urn:duns">123456789</eb:PartyId>',
    )
    assert locations(judge(envelope(header))) == ["//Header/MessageHeader/From/Role"]


def test_empty_party_id_is_invalid() -> None:
    header = HEADER.replace("<eb:PartyId>uri:seller.example.com</eb:PartyId>", "<eb:PartyId></eb:PartyId>")
    assert locations(judge(envelope(header))) == ["//Header/MessageHeader/To/PartyId"]


def test_bad_timestamp_is_invalid() -> None:
    issues = judge(envelope(HEADER.replace("2024-01-02T03:04:05Z", "yesterday")))
    assert locations(issues) == ["//Header/MessageHeader/MessageData/Timestamp"]


def test_eb_element_in_message_header_extension_point_is_invalid() -> None:
    """§2.3.6: extension content must be from a foreign namespace."""
    header = HEADER.replace("</eb:MessageData>", "</eb:MessageData><eb:Bogus/>")
    assert locations(judge(envelope(header))) == ["//Header/MessageHeader/Bogus"]


def test_soap_namespace_element_in_header_is_invalid() -> None:
    assert locations(judge(envelope(HEADER + "<SOAP:Bogus/>"))) == ["//Header/Bogus"]


def test_acknowledgment_has_no_extension_point() -> None:
    ack = (
        '<eb:Acknowledgment SOAP:mustUnderstand="1" eb:version="2.0">'
        "<eb:Timestamp>2024-01-02T03:04:06Z</eb:Timestamp><eb:RefToMessageId>m0</eb:RefToMessageId>"
        '<x:More xmlns:x="urn:x"/></eb:Acknowledgment>'
    )
    assert locations(judge(envelope(HEADER + ack))) == ["//Header/Acknowledgment/More"]


def test_sync_reply_needs_an_actor() -> None:
    sync = '<eb:SyncReply SOAP:mustUnderstand="1" eb:version="2.0"/>'
    assert locations(judge(envelope(HEADER + sync))) == ["//Header/SyncReply/@actor"]


def test_ack_requested_signed_must_be_boolean() -> None:
    ack = '<eb:AckRequested SOAP:mustUnderstand="1" eb:version="2.0" eb:signed="maybe"/>'
    assert locations(judge(envelope(HEADER + ack))) == ["//Header/AckRequested/@signed"]


def test_description_needs_xml_lang() -> None:
    issues = judge(envelope(body=MANIFEST.replace(' xml:lang="en-US"', "")))
    assert locations(issues) == ["//Body/Manifest/Reference/Description/@lang"]


def test_reference_type_is_fixed_to_simple() -> None:
    issues = judge(envelope(body=MANIFEST.replace('xlink:type="simple"', 'xlink:type="extended"')))
    assert locations(issues) == ["//Body/Manifest/Reference/@type"]


def test_foreign_xlink_attribute_on_reference_is_checked() -> None:
    """eb:Reference admits other xlink:* attributes, which are then validated against XLink."""
    assert judge(envelope(body=MANIFEST.replace('xlink:type="simple"', 'xlink:show="embed"'))) == ()
    assert judge(envelope(body=MANIFEST.replace('xlink:type="simple"', 'xlink:show="bogus"'))) != ()


def test_bad_message_status_is_invalid() -> None:
    body = (
        '<eb:StatusResponse eb:version="2.0" eb:messageStatus="Lost">'
        "<eb:RefToMessageId>m0</eb:RefToMessageId></eb:StatusResponse>"
    )
    assert locations(judge(envelope(body=body))) == ["//Body/StatusResponse/@messageStatus"]


@pytest.mark.parametrize("number,status", [("-1", "Continue"), ("x", "Continue"), ("3", "Restart")])
def test_bad_sequence_number_is_invalid(number: str, status: str) -> None:
    order = (
        '<eb:MessageOrder SOAP:mustUnderstand="1" eb:version="2.0">'
        f'<eb:SequenceNumber eb:status="{status}">{number}</eb:SequenceNumber></eb:MessageOrder>'
    )
    assert judge(envelope(HEADER + order)) != ()


def test_duplicate_ids_are_invalid() -> None:
    header = HEADER.replace('eb:version="2.0">', 'eb:version="2.0" eb:id="dup">', 1)
    assert judge(envelope(header, MANIFEST.replace('eb:version="2.0">', 'eb:version="2.0" eb:id="dup">', 1))) != ()


def test_signature_without_signature_value_is_invalid() -> None:
    signature = SIGNATURE.replace(
        "<ds:SignatureValue>niO/oCjf29rQ1KPTvvFyfocCpJvMDB6P30Rf+bPMFJ21km0CgBMNvlOsulq9GE5g</ds:SignatureValue>",
        "",
    )
    assert locations(judge(envelope(HEADER + signature))) == ["//Header/Signature/KeyInfo"]


def test_signature_reference_without_digest_is_invalid() -> None:
    signature = SIGNATURE.replace("<ds:DigestValue>R016FadxKMVB12bBafh3zUUTQys=</ds:DigestValue>", "", 1)
    assert judge(envelope(HEADER + signature)) != ()


def test_fault_without_faultstring_is_invalid() -> None:
    assert judge(envelope(header="", body="<SOAP:Fault><faultcode>SOAP:Client</faultcode></SOAP:Fault>")) != ()


def test_body_is_required() -> None:
    data = f"<SOAP:Envelope {NS}><SOAP:Header>{HEADER}</SOAP:Header></SOAP:Envelope>".encode()
    assert locations(judge(data)) == ["/Envelope"]


def test_several_problems_give_several_issues_in_document_order() -> None:
    header = HEADER.replace("cpa-1", "").replace("2024-01-02T03:04:05Z", "later")
    assert locations(judge(envelope(header))) == [
        "//Header/MessageHeader/CPAId",
        "//Header/MessageHeader/MessageData/Timestamp",
    ]


def test_positions_are_given_for_repeated_elements() -> None:
    errors = (
        '<eb:ErrorList SOAP:mustUnderstand="1" eb:version="2.0" eb:highestSeverity="Error">'
        '<eb:Error eb:errorCode="A" eb:severity="Error"/><eb:Error eb:errorCode="B" eb:severity="Bad"/>'
        "</eb:ErrorList>"
    )
    assert locations(judge(envelope(HEADER + errors))) == ["//Header/ErrorList/Error[2]/@severity"]


def test_default_namespace_locations_use_local_names() -> None:
    data = (
        f'<Envelope xmlns="{SOAP_ENV}"><Header><MessageHeader xmlns="{EB}" xmlns:eb="{EB}" '
        f'xmlns:s="{SOAP_ENV}" s:mustUnderstand="1" eb:version="2.0"><To><PartyId>a</PartyId></To>'
        "</MessageHeader></Header><Body/></Envelope>"
    ).encode()
    assert locations(judge(data)) == ["//Header/MessageHeader/To"]


@pytest.mark.parametrize(
    "data",
    [
        f'<eb:MessageHeader xmlns:eb="{EB}"/>'.encode(),
        b'<Envelope xmlns="http://www.w3.org/2003/05/soap-envelope"><Body/></Envelope>',
        b"<Envelope><Body/></Envelope>",
    ],
)
def test_root_must_be_a_soap11_envelope(data: bytes) -> None:
    issues = judge(data)
    assert len(issues) == 1
    assert "SOAP:Envelope" in issues[0].description
    assert issues[0].location.startswith("/")


def test_validation_of_a_subtree_envelope() -> None:
    """An Envelope that is not its document's root is validated on its own."""
    wrapper = etree.Element("wrapper")
    wrapper.append(parse_xml(envelope()))
    assert validate_envelope(wrapper[0]) == ()
    broken = parse_xml(envelope(HEADER.replace("cpa-1", "")))
    wrapper.append(broken)
    assert locations(validate_envelope(wrapper[1])) == ["//Header/MessageHeader/CPAId"]


# --- module plumbing ------------------------------------------------------------------------------


def test_schema_files_are_keyed_by_namespace_and_exist() -> None:
    files = schema_files()
    assert set(files) == {SOAP_ENV, EB, XMLDSIG, XLINK, XML}
    assert {path.name for path in files.values()} == set(SCHEMA_FILES.values())
    for path in files.values():
        assert isinstance(path, Path)
        assert path.is_file()


def test_schema_imports_are_local_relative_paths() -> None:
    """No schemaLocation may point at the network or outside schemas/."""
    for path in schema_files().values():
        tree = etree.parse(str(path))
        for imp in tree.iter("{http://www.w3.org/2001/XMLSchema}import", "{http://www.w3.org/2001/XMLSchema}include"):
            location = imp.get("schemaLocation")
            assert location is not None
            assert "/" not in location and ":" not in location
            assert (path.parent / location).is_file()


def test_issue_description_says_what_and_where() -> None:
    (issue,) = judge(envelope(HEADER.replace("2024-01-02T03:04:05Z", "soon")))
    assert "soon" in issue.description
    assert "//Header/MessageHeader/MessageData/Timestamp" in issue.description
    assert "{" not in issue.description  # namespaces shown as prefixes, not in Clark notation


def test_validation_is_thread_safe() -> None:
    good = envelope()
    bad = envelope(HEADER.replace("cpa-1", ""))
    results: list[tuple[bool, bool]] = []
    failures: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(200):
                results.append((validate_envelope(parse_xml(good)) == (), validate_envelope(parse_xml(bad)) == ()))
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert len(results) == 8 * 200
    assert set(results) == {(True, False)}
