"""Reading received mail (ebMS2 Appendix B.3): an ebXML message in the B.3.2 shape, a delivery status
notification (B.3.3), or neither (B.3.3: a dead letter)."""

from __future__ import annotations

import base64

from msh.ebms.message import ParseMode, parse_message
from msh.errors import Severity
from msh.transport.mail_read import DeliveryReport, NotEbxml, ReceivedMail, ReportAction, read_mail
from tests.support.mail import delivery_report, ebxml_mail, plain_mail

SOAP = b"""<?xml version="1.0" encoding="UTF-8"?>
<SOAP:Envelope xmlns:SOAP="http://schemas.xmlsoap.org/soap/envelope/"
  xmlns:eb="http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd">
<SOAP:Header><eb:MessageHeader SOAP:mustUnderstand="1" eb:version="2.0">
<eb:From><eb:PartyId>urn:duns:123456789</eb:PartyId></eb:From>
<eb:To><eb:PartyId>urn:duns:912345678</eb:PartyId></eb:To>
<eb:CPAId>cpa-1</eb:CPAId><eb:ConversationId>conv-1</eb:ConversationId>
<eb:Service>urn:services:SupplierOrderProcessing</eb:Service><eb:Action>NewOrder</eb:Action>
<eb:MessageData><eb:MessageId>20261207-1@party-a.example</eb:MessageId>
<eb:Timestamp>2026-12-07T09:00:00Z</eb:Timestamp></eb:MessageData>
</eb:MessageHeader></SOAP:Header>
<SOAP:Body xmlns:xlink="http://www.w3.org/1999/xlink"><eb:Manifest eb:version="2.0">
<eb:Reference xlink:href="cid:payload1@party-a.example" xlink:type="simple"/></eb:Manifest></SOAP:Body>
</SOAP:Envelope>"""

PACKAGE_TYPE = 'multipart/related; boundary="BoundarY"; type="text/xml"; start="<ebxmlheader1@party-a.example>"'
PACKAGE = (
    b"This is an ebXML SMTP example\r\n\r\n--BoundarY\r\nContent-ID: <ebxmlheader1@party-a.example>\r\n"
    b"Content-Type: text/xml\r\n\r\n" + SOAP.replace(b"\n", b"\r\n") + b"\r\n--BoundarY\r\n"
    b"Content-ID: <payload1@party-a.example>\r\nContent-Type: application/xml\r\n\r\n<order n='1'/>\r\n"
    b"--BoundarY--\r\n"
)


def test_b32_mail_is_read_as_the_package_it_carries() -> None:
    """ebMS2 B.3.2: the package's Content-Type is the mail's, its body is the package."""
    mail = ebxml_mail(PACKAGE_TYPE, PACKAGE, message_id="20261207-1@party-a.example")
    read = read_mail(mail)
    assert isinstance(read, ReceivedMail)
    assert read.content_type == PACKAGE_TYPE
    assert read.body == PACKAGE
    assert read.from_address == "msh@party-a.example"
    assert read.mail_id == "20261207-1@party-a.example"
    assert read.warnings == ()
    message = parse_message(read.body, read.content_type, mode=ParseMode.STRICT)
    try:
        assert message.envelope.message_header is not None
        assert message.envelope.message_header.message_data.message_id == "20261207-1@party-a.example"
    finally:
        message.close()


def test_folded_content_type_and_reply_to() -> None:
    """ebMS2 B.3.2 example: the Content-Type header folded over two lines; answers go to Reply-To."""
    folded = 'multipart/related; boundary="BoundarY"; type="text/xml";\r\n\tstart="<ebxmlheader1@party-a.example>"'
    mail = ebxml_mail(folded, PACKAGE, message_id="m-2@a", extra=("Reply-To: Party A <replies@party-a.example>",))
    read = read_mail(mail)
    assert isinstance(read, ReceivedMail)
    assert read.content_type == PACKAGE_TYPE
    assert read.from_address == "replies@party-a.example"


def test_bare_envelope_as_text_xml() -> None:
    """ebMS2 §2.1.2, B.3.2: a message without payloads is a bare text/xml envelope."""
    soap = SOAP.replace(b"\n", b"\r\n")  # SMTP lines end with CRLF (RFC 5321 §2.3.8)
    read = read_mail(ebxml_mail("text/xml; charset=UTF-8", soap, message_id="m-3@a"))
    assert (
        isinstance(read, ReceivedMail)
        and read.body == soap
        and read.warnings == ()
        and read.content_type == "text/xml; charset=UTF-8"
    )


def test_base64_mail_body_is_decoded() -> None:
    """RFC 2045 §6.8, ebMS2 B.3.2: a body transfer-encoded for a 7-bit path is decoded."""
    encoded = base64.encodebytes(SOAP).replace(b"\n", b"\r\n")  # the decoded XML keeps its own LF ends
    mail = ebxml_mail("text/xml", encoded, message_id="m-4@a", extra=("Content-Transfer-Encoding: base64",))
    read = read_mail(mail)
    assert isinstance(read, ReceivedMail) and read.body == SOAP


def test_forwarded_mail_with_bare_lf_is_read_leniently() -> None:
    """RFC 5322 §2.1: a mail saved or forwarded by a client has bare LF line ends; read with CRLF, warned."""
    mail = ebxml_mail(PACKAGE_TYPE, PACKAGE, message_id="m-5@a").replace(b"\r\n", b"\n")
    read = read_mail(mail)
    assert isinstance(read, ReceivedMail)
    assert read.body == PACKAGE
    [warning] = read.warnings
    assert warning.severity is Severity.WARNING and "bare LF" in warning.description
    message = parse_message(read.body, read.content_type, mode=ParseMode.STRICT)
    message.close()


def test_missing_soapaction_is_a_warning_not_a_refusal() -> None:
    """ebMS2 B.3.2: "The SOAPAction MIME header field must also be included"; its absence is only warned."""
    read = read_mail(ebxml_mail(PACKAGE_TYPE, PACKAGE, message_id="m-6@a", soap_action=False))
    assert isinstance(read, ReceivedMail)
    [warning] = read.warnings
    assert "SOAPAction" in warning.description and "B.3.2" in warning.description


def test_plain_text_mail_is_not_ebxml() -> None:
    """ebMS2 B.3.3: a mail that is no ebXML message nor delivery failure notification is unidentified."""
    read = read_mail(plain_mail())
    assert isinstance(read, NotEbxml)
    assert "text/plain" in read.reason


def test_html_mail_in_multipart_related_is_not_ebxml() -> None:
    """ebMS2 §2.1.2: the root part of an ebXML package is the SOAP envelope, text/xml."""
    mail = ebxml_mail('multipart/related; boundary="x"; type="text/html"', b"--x--\r\n", message_id="h@x")
    read = read_mail(mail)
    assert isinstance(read, NotEbxml) and "text/html" in read.reason


def test_mail_without_body_is_not_ebxml() -> None:
    read = read_mail(b"From: a@b.example\r\nSubject: nothing")
    assert isinstance(read, NotEbxml) and "header block" in read.reason


def test_delivery_status_notification_names_the_message() -> None:
    """ebMS2 B.3.3: a delivery failure notification is examined for the ebXML message that caused it."""
    read = read_mail(delivery_report("20261207-1+x@party-a.example"))
    assert isinstance(read, DeliveryReport)
    assert read.action is ReportAction.FAILED
    assert read.message_ids == ("20261207-1+x@party-a.example",)
    assert read.recipients == ("nobody@party-b.example",)
    assert "550 5.1.1 no such user" in read.diagnostic


def test_delayed_delivery_report() -> None:
    """RFC 3464 §2.3.3: a delay is reported as such, not as a failure."""
    read = read_mail(delivery_report("m-7@a", action="delayed", diagnostic="451 4.4.1 try later"))
    assert isinstance(read, DeliveryReport) and read.action is ReportAction.DELAYED


def test_message_id_found_in_a_returned_message_body() -> None:
    """ebMS2 B.3.3: with no Message-ID or envelope id, the eb:MessageId of the returned message is used."""
    report = delivery_report("m-8@a").replace(b"Original-Envelope-Id: m-8@a\r\n", b"")
    report = report.replace(b"Message-ID: <m-8@a>\r\n", b"")
    report = report.replace(
        b"Content-Type: text/rfc822-headers\r\n\r\n",
        b"Content-Type: message/rfc822\r\n\r\nFrom: msh@party-a.example\r\nContent-Type: text/xml\r\n\r\n"
        b"<SOAP:Envelope><eb:MessageId>m-8@a</eb:MessageId></SOAP:Envelope>\r\n",
    )
    read = read_mail(report)
    assert isinstance(read, DeliveryReport) and read.message_ids == ("m-8@a",)
