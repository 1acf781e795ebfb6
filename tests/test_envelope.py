"""The envelope codec: model -> XML -> model round trips, lenient quirks and error locations."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings

from msh.ebms import model as m
from msh.ebms.envelope import format_datetime, parse_datetime, read_envelope, serialise_envelope
from msh.ebms.schema import validate_envelope
from msh.errors import EbmsError, EnvelopeError, ErrorCode, Severity
from msh.safexml import parse_xml
from tests.strategies import envelopes

EB = "http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd"


def minimal_header(**overrides: object) -> m.MessageHeader:
    fields: dict[str, object] = dict(
        from_party=m.Party((m.PartyId("partyA", "urn:test:type"),)),
        to_party=m.Party((m.PartyId("urn:duns:123456789"),), role="http://example.org/roles/Buyer"),
        cpa_id="cpa-1",
        conversation_id="conv-1",
        service=m.Service("urn:services:orders"),
        action="NewOrder",
        message_data=m.MessageData("mid-1@example.org", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
    )
    fields.update(overrides)
    return m.MessageHeader(**fields)  # type: ignore[arg-type]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(envelopes)
def test_generated_envelopes_round_trip_and_validate(envelope: m.Envelope) -> None:
    xml = serialise_envelope(envelope)
    root = parse_xml(xml)
    assert validate_envelope(root) == ()
    parsed, warnings = read_envelope(root, lenient=False)
    assert warnings == ()
    assert parsed == envelope


def test_serialised_form_is_stable() -> None:
    env = m.Envelope(message_header=minimal_header(duplicate_elimination=True), ack_requested=(m.AckRequested(),))
    once = serialise_envelope(env)
    twice = serialise_envelope(read_envelope(parse_xml(once))[0])
    assert once == twice
    assert b"<eb:DuplicateElimination/>" in once
    assert b'eb:signed="false"' in once


def test_datetime_forms() -> None:
    assert parse_datetime("2002-02-21T12:00:00Z", "x") == datetime(2002, 2, 21, 12, tzinfo=UTC)
    naive = parse_datetime("2010-11-17T12:54:24", "x")
    assert naive.tzinfo is None and format_datetime(naive) == "2010-11-17T12:54:24"
    assert format_datetime(datetime(2002, 2, 21, 12, tzinfo=UTC)) == "2002-02-21T12:00:00Z"
    with pytest.raises(EbmsError) as exc:
        parse_datetime("ENTRYDATE", "//Header/MessageHeader/MessageData/Timestamp")
    assert exc.value.location == "//Header/MessageHeader/MessageData/Timestamp"


def _envelope(header_xml: str, body_xml: str = "") -> bytes:
    return (
        '<SOAP:Envelope xmlns:SOAP="http://schemas.xmlsoap.org/soap/envelope/" '
        f'xmlns:eb="{EB}" xmlns:xlink="http://www.w3.org/1999/xlink">'
        f"<SOAP:Header>{header_xml}</SOAP:Header><SOAP:Body>{body_xml}</SOAP:Body></SOAP:Envelope>"
    ).encode()


HEADER = (
    '<eb:MessageHeader SOAP:mustUnderstand="1" eb:version="2.0">'
    '<eb:From><eb:PartyId eb:type="t">A</eb:PartyId></eb:From><eb:To><eb:PartyId eb:type="t">B</eb:PartyId></eb:To>'
    "<eb:CPAId>cpa</eb:CPAId><eb:ConversationId>c</eb:ConversationId><eb:Service>s</eb:Service>"
    "<eb:Action>a</eb:Action><eb:MessageData><eb:MessageId>m</eb:MessageId>"
    "<eb:Timestamp>2026-01-01T00:00:00Z</eb:Timestamp></eb:MessageData></eb:MessageHeader>"
)


def test_missing_element_names_its_location() -> None:
    xml = _envelope(HEADER.replace("<eb:CPAId>cpa</eb:CPAId>", ""))
    with pytest.raises(EbmsError) as exc:
        read_envelope(parse_xml(xml), lenient=True)
    assert exc.value.error_code is ErrorCode.OTHER_XML
    assert exc.value.location == "//Header/MessageHeader/CPAId"


def test_empty_party_id_is_located() -> None:
    xml = _envelope(HEADER.replace(">A<", "><"))
    with pytest.raises(EbmsError) as exc:
        read_envelope(parse_xml(xml))
    assert exc.value.location == "//Header/MessageHeader/From/PartyId"


def test_order_slip_is_error_strict_and_warning_lenient() -> None:
    slipped = HEADER.replace(
        "<eb:CPAId>cpa</eb:CPAId><eb:ConversationId>c</eb:ConversationId>",
        "<eb:ConversationId>c</eb:ConversationId><eb:CPAId>cpa</eb:CPAId>",
    )
    root = parse_xml(_envelope(slipped))
    with pytest.raises(EbmsError):
        read_envelope(root, lenient=False)
    env, warnings = read_envelope(root, lenient=True)
    assert env.message_header is not None and env.message_header.cpa_id == "cpa"
    assert [w.severity for w in warnings] == [Severity.WARNING]
    assert "out of order" in warnings[0].description


def test_unqualified_version_is_lenient_quirk() -> None:
    root = parse_xml(_envelope(HEADER.replace('eb:version="2.0"', 'version="2.0"')))
    with pytest.raises(EbmsError):
        read_envelope(root, lenient=False)
    _, warnings = read_envelope(root, lenient=True)
    assert "not namespace-qualified" in warnings[0].description


def test_wrong_version_is_not_supported() -> None:
    with pytest.raises(EbmsError) as exc:
        read_envelope(parse_xml(_envelope(HEADER.replace('eb:version="2.0"', 'eb:version="1.0"'))))
    assert exc.value.error_code is ErrorCode.NOT_SUPPORTED
    assert exc.value.location == "//Header/MessageHeader/@version"


def test_unknown_eb_element_in_header() -> None:
    root = parse_xml(_envelope(HEADER + '<eb:Bogus SOAP:mustUnderstand="1" eb:version="2.0"/>'))
    with pytest.raises(EbmsError) as exc:
        read_envelope(root)
    assert exc.value.error_code is ErrorCode.NOT_SUPPORTED
    env, warnings = read_envelope(root, lenient=True)
    assert len(env.header_extensions.elements) == 1 and warnings


def test_foreign_elements_and_attributes_survive() -> None:
    header = HEADER.replace(
        "</eb:MessageHeader>", '<x:Note xmlns:x="urn:x" x:a="1">hi</x:Note></eb:MessageHeader>'
    ).replace('eb:version="2.0">', 'eb:version="2.0" xmlns:y="urn:y" y:flag="on">', 1)
    xml = _envelope(header + '<z:Other xmlns:z="urn:z"><z:c/></z:Other>', '<p:Payload xmlns:p="urn:p">1</p:Payload>')
    env, _ = read_envelope(parse_xml(xml))
    again, _ = read_envelope(parse_xml(serialise_envelope(env)))
    assert again == env
    assert env.message_header is not None
    assert env.message_header.extensions.attributes == (("{urn:y}flag", "on"),)
    assert env.message_header.extensions.elements == ('<x:Note xmlns:x="urn:x" x:a="1">hi</x:Note>',)
    assert env.body_extensions.elements == ('<p:Payload xmlns:p="urn:p">1</p:Payload>',)


def test_not_an_envelope() -> None:
    with pytest.raises(EnvelopeError):
        read_envelope(parse_xml(b"<foo/>"))
    with pytest.raises(EnvelopeError) as exc:
        read_envelope(parse_xml(b'<S:Envelope xmlns:S="http://schemas.xmlsoap.org/soap/envelope/"/>'))
    assert "no Body" in exc.value.description


def test_two_ack_requested_for_same_actor_is_inconsistent() -> None:
    ack = '<eb:AckRequested SOAP:mustUnderstand="1" eb:version="2.0" eb:signed="false"/>'
    with pytest.raises(EbmsError) as exc:
        read_envelope(parse_xml(_envelope(HEADER + ack + ack)))
    assert exc.value.error_code is ErrorCode.INCONSISTENT


def test_model_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="CPAId"):
        minimal_header(cpa_id=" ")
    with pytest.raises(ValueError, match="SequenceNumber"):
        m.MessageOrder(sequence_number=-1)
    with pytest.raises(ValueError, match="PartyId"):
        m.Party(())
    with pytest.raises(ValueError, match="XML cannot carry"):
        m.Service("bad\x00value")


def test_reference_content_id() -> None:
    assert m.Reference("cid:abc@x").content_id == "abc@x"
    assert m.Reference("https://example.org/doc").content_id is None
