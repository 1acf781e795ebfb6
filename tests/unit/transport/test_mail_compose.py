"""An ebXML message as an e-mail (msh.transport.mail_compose), checked against ebMS2 Appendix B.3.2."""

from __future__ import annotations

import base64
import io
from datetime import UTC, datetime, timedelta, timezone
from email import policy
from email.parser import BytesHeaderParser
from email.utils import parsedate_to_datetime

import pytest

from cpa.resolve import Exchange
from msh.ebms.message import ParseMode, parse_message
from msh.ebms.mime import AttachmentSpec, PartBody
from msh.ebms.mime.writer import write_package
from msh.runtime.compose import Payload, Submission, compose
from msh.runtime.msh import Msh
from msh.testing.network import TestNetwork
from msh.transport.mail_compose import MailComposeError, compose_mail, mailto_address, needs_encoding
from tests.support.endpoint import CPA_ID, PARTY_A, PARTY_B, signed_as_a
from tests.support.secure_network import ACTION, SERVICE, run_pair

NOW = datetime(2026, 3, 2, 9, 30, 5, tzinfo=UTC)
SOAP_XML = b'<?xml version="1.0" encoding="UTF-8"?>\r\n<SOAP:Envelope xmlns:SOAP="x"/>'
BINARY = bytes(range(256)) * 40


def mail_of(
    content_type: str, body: bytes, *, message_id: str | None = "m-1@a.example", url: str = "mailto:b@b.example"
) -> bytes:
    return compose_mail(
        url=url,
        content_type=content_type,
        body=body,
        from_address="msh-a@a.example",
        headers={"SOAPAction": '"ebXML"'},
        message_id=message_id,
        now=NOW,
    )


def split(mail: bytes) -> tuple[dict[str, str], bytes]:
    """The mail's header fields (read by Python's e-mail parser, unfolded) and its raw body."""
    head, _, body = mail.partition(b"\r\n\r\n")
    parsed = BytesHeaderParser(policy=policy.default).parsebytes(head + b"\r\n\r\n")
    return {name: str(value) for name, value in parsed.items()}, body


def package(*parts: tuple[str, bytes, str | None]) -> tuple[str, bytes]:
    """A multipart/related package whose root is ``SOAP_XML``, with parts (Content-ID, content, encoding)."""
    specs = [
        AttachmentSpec(cid, "application/octet-stream", PartBody.from_bytes(content), encoding or "binary")
        for cid, content, encoding in parts
    ]
    out = io.BytesIO()
    content_type = write_package(out, SOAP_XML, specs, start_id="soap@a.example", boundary="BoundarY")
    return content_type, out.getvalue()


# -------------------------------------------------------------------------------------- the mail header


def test_the_mail_header_as_b32_lists_it() -> None:
    content_type, body = package(("p@a.example", b"hello", "7bit"))
    headers, _ = split(mail_of(content_type, body))
    # ebMS2 B.3.2: "From:" the sender MSH's address, "To:" the receiving MSH's address.
    assert headers["From"] == "msh-a@a.example"
    assert headers["To"] == "b@b.example"
    # ebMS2 B.3.2: "Construct a "Date:" eMail header in accordance with SMTP".
    assert parsedate_to_datetime(headers["Date"]) == NOW
    # ebMS2 B.3.2: "The "MIME-Version: 1.0" header must appear as an eMail MIME header."
    assert headers["MIME-Version"] == "1.0"
    # ebMS2 B.3.2: "The SOAPAction MIME header field must also be included ... SOAPAction: "ebXML"".
    assert headers["SOAPAction"] == '"ebXML"'
    # ebMS2 B.3.2: "The Content-Type: Multipart/Related MIME header with the associated parameters ... MUST
    # appear as an eMail MIME header."
    assert headers["Content-Type"] == content_type
    # The ebMS MessageId is the mail's Message-ID (ebMS2 §3.1.6.1: an RFC 2822 msg-id).
    assert headers["Message-ID"] == "<m-1@a.example>"


def test_a_local_date_is_written_in_rfc5322_form() -> None:
    mail = compose_mail(
        url="mailto:b@b.example",
        content_type="text/xml",
        body=SOAP_XML,
        from_address="a@a.example",
        headers={},
        message_id=None,
        now=NOW.astimezone(timezone(timedelta(hours=-6))),
    )
    # RFC 5322 §3.3: day, date, time and a numeric zone (obs-zone "GMT" is not to be generated).
    assert b"\r\nDate: Mon, 02 Mar 2026 09:30:05 +0000\r\n" in mail


def test_without_a_message_id_a_unique_one_is_made() -> None:
    first, _ = split(mail_of("text/xml", SOAP_XML, message_id=None))
    second, _ = split(mail_of("text/xml", SOAP_XML, message_id="not an id"))
    assert first["Message-ID"] != second["Message-ID"]
    for headers in (first, second):
        assert headers["Message-ID"].startswith("<") and headers["Message-ID"].endswith("@a.example>")


def test_the_recipient_is_percent_decoded_and_must_be_one_address() -> None:
    # RFC 6068 §2: the addr-spec of a mailto URI is percent-encoded; "?to=" adds recipients.
    assert mailto_address("mailto:msh%2Bb@b.example") == "msh+b@b.example"
    assert mailto_address("MAILTO:msh@b.example?subject=ignored") == "msh@b.example"
    assert mailto_address("mailto:?to=msh%40b.example") == "msh@b.example"
    with pytest.raises(MailComposeError, match="names 2 addresses"):
        mailto_address("mailto:a@b.example,c@d.example")
    with pytest.raises(MailComposeError, match="names no address"):
        mailto_address("mailto:")
    with pytest.raises(MailComposeError, match="does not name an e-mail address"):
        mailto_address("mailto:no-at-sign")
    with pytest.raises(MailComposeError, match="not a mailto: URL"):
        mailto_address("https://b.example/msh")


def test_long_header_values_are_folded_and_read_back_whole() -> None:
    long_type = 'multipart/related; type="text/xml"; boundary="' + "b" * 60 + '"; start="<soap@a.example>"'
    mail = mail_of(long_type, b"--" + b"b" * 60 + b"\r\n\r\nx\r\n--" + b"b" * 60 + b"--\r\n")
    head = mail.partition(b"\r\n\r\n")[0]
    assert max(len(line) for line in head.split(b"\r\n")) <= 78 + 2
    headers, _ = split(mail)
    assert " ".join(headers["Content-Type"].split()) == long_type


# ------------------------------------------------------------------------------- transfer encoding


def part_of(body: bytes, cid: str) -> tuple[bytes, bytes]:
    """The header block and content of the part with Content-ID ``cid`` in a mail body."""
    for chunk in body.split(b"\r\n--BoundarY"):
        if f"Content-ID: <{cid}>".encode() in chunk:
            head, _, content = chunk.partition(b"\r\n\r\n")
            return head, content
    raise AssertionError(f"no part <{cid}>")


def test_a_binary_part_is_base64_encoded_and_says_so() -> None:
    # ebMS2 B.3.2: "apply transfer encoding to all 8-bit data ... The Content-Transfer-Encoding MIME header MUST
    # be included in the MIME envelope portion of any body part that has been transformed."
    content_type, body = package(("bin@a.example", BINARY, "binary"))
    _, mail_body = split(mail_of(content_type, body))
    head, content = part_of(mail_body, "bin@a.example")
    assert head.count(b"Content-Transfer-Encoding") == 1 and b"Content-Transfer-Encoding: base64" in head
    assert base64.b64decode(content) == BINARY
    assert all(len(line) <= 76 for line in content.split(b"\r\n"))


def test_a_7bit_part_with_a_line_over_998_octets_is_encoded() -> None:
    # RFC 5321 §4.5.3.1.6 (ebMS2 B.3.2: "lines no longer than 1000 characters including any trailing CRLF").
    long_line = b"a" * 999 + b"\r\nshort\r\n"
    content_type, body = package(("long@a.example", long_line, "7bit"), ("fits@a.example", b"a" * 998, "7bit"))
    _, mail_body = split(mail_of(content_type, body))
    head, content = part_of(mail_body, "long@a.example")
    assert b"Content-Transfer-Encoding: base64" in head and base64.b64decode(content) == long_line
    head, content = part_of(mail_body, "fits@a.example")
    assert b"Content-Transfer-Encoding: 7bit" in head and content == b"a" * 998


def test_7bit_parts_keep_their_content_and_encoded_parts_are_left_as_written() -> None:
    text = b"line one\r\nline two\r\n"
    content_type, body = package(
        ("text@a.example", text, "7bit"), ("labelled@a.example", text, "binary"), ("b64@a.example", BINARY, "base64")
    )
    mail = mail_of(content_type, body)
    _, mail_body = split(mail)
    assert part_of(mail_body, "text@a.example")[1] == text
    # A binary label on 7-bit content would claim an 8-bit path (RFC 3030): it becomes 7bit, the content is kept.
    head, content = part_of(mail_body, "labelled@a.example")
    assert content == text and b"Content-Transfer-Encoding: 7bit" in head and b"binary" not in head
    # Already base64: exactly as the package wrote it.
    assert part_of(body, "b64@a.example") == part_of(mail_body, "b64@a.example")


def test_the_soap_part_is_encoded_when_it_is_not_7bit() -> None:
    content_type, body = package(("p@a.example", b"x", "7bit"))
    eight_bit = body.replace(b'<SOAP:Envelope xmlns:SOAP="x"/>', '<SOAP:Envelope xmlns:SOAP="é"/>'.encode())
    _, mail_body = split(mail_of(content_type, eight_bit))
    head, content = part_of(mail_body, "soap@a.example")
    assert b"Content-Transfer-Encoding: base64" in head
    assert base64.b64decode(content) == SOAP_XML.replace(b'"x"', '"é"'.encode())


def test_a_bare_envelope_that_is_not_7bit_is_encoded_with_the_header_in_the_mail_header() -> None:
    envelope = SOAP_XML.replace(b'"x"', '"é"'.encode())
    headers, body = split(mail_of('text/xml; charset="UTF-8"', envelope))
    assert headers["Content-Type"] == 'text/xml; charset="UTF-8"'
    assert headers["Content-Transfer-Encoding"] == "base64"
    assert base64.b64decode(body) == envelope
    headers, body = split(mail_of("text/xml", SOAP_XML))
    assert "Content-Transfer-Encoding" not in headers and body == SOAP_XML + b"\r\n"


def test_every_line_of_the_mail_ends_crlf_and_fits_smtp() -> None:
    content_type, body = package(("bin@a.example", BINARY, "binary"), ("t@a.example", b"x\r\ny", "8bit"))
    mail = mail_of(content_type, body)
    assert mail.endswith(b"\r\n")
    assert not needs_encoding(mail)  # 7-bit, CRLF only, no line over 998 octets


def test_bare_line_feeds_are_not_7bit_data() -> None:
    # RFC 2045 §2.7: CR and LF occur only as CRLF in 7bit data.
    assert needs_encoding(b"a\nb") and needs_encoding(b"a\rb") and not needs_encoding(b"a\r\nb")
    assert needs_encoding(b"a\x00b") and needs_encoding("é".encode())


def test_a_package_that_is_not_whole_is_refused_in_words() -> None:
    content_type, body = package(("p@a.example", b"x", "7bit"))
    with pytest.raises(MailComposeError, match="truncated"):
        mail_of(content_type, body[: body.index(b"\r\n--BoundarY--")])
    with pytest.raises(MailComposeError, match="no boundary"):
        mail_of("multipart/related; type=text/xml", body)


# ------------------------------------------------------------------------------------- round trips


def test_a_composed_message_comes_back_whole_through_the_codec() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        now = a.clock()
        params = a.registry.resolve(CPA_ID, Exchange(PARTY_A, PARTY_B, SERVICE, ACTION), now=now)
        submission = Submission(
            PARTY_B,
            SERVICE,
            ACTION,
            (Payload(b"<order n='1'>\xc3\xa9</order>", "application/xml"), Payload(BINARY, "application/octet-stream")),
        )
        composed = compose(
            params, submission, message_id="rt-1@a.example", now=now, conversation_id="c", content_id_domain="a.example"
        )
        content_type, body = signed_as_a(composed.envelope, composed.attachments)
        headers, mail_body = split(mail_of(content_type, body, message_id="rt-1@a.example"))
        message = parse_message(mail_body, headers["Content-Type"], mode=ParseMode.STRICT)
        try:
            assert [p.body.read_bytes() for p in message.payloads] == [b"<order n='1'>\xc3\xa9</order>", BINARY]
            assert message.envelope.message_header is not None
            assert message.envelope.message_header.message_data.message_id == "rt-1@a.example"
            assert message.warnings == ()
        finally:
            message.close()

    run_pair(scenario)


def test_a_signed_message_with_a_binary_payload_verifies_after_the_mail_round_trip() -> None:
    # ebMS2 §4.1.3: "When a transfer encoding (e.g. base64) ... is used for the SOAP Envelope or payload objects,
    # the signature generation MUST be executed before the encoding": the receiver verifies the decoded content.
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        now = b.clock()
        params = b.registry.resolve(CPA_ID, Exchange(PARTY_A, PARTY_B, SERVICE, ACTION), now=now)
        submission = Submission(PARTY_B, SERVICE, ACTION, (Payload(BINARY, "application/octet-stream"),))
        composed = compose(
            params,
            submission,
            message_id="signed-1@a.example",
            now=now,
            conversation_id="c",
            content_id_domain="a.example",
        )
        content_type, body = signed_as_a(composed.envelope, composed.attachments)
        headers, mail_body = split(mail_of(content_type, body, message_id="signed-1@a.example"))
        assert b"Content-Transfer-Encoding: base64" in mail_body and BINARY not in mail_body
        reply = await b.handle_http(mail_body, headers["Content-Type"])
        # B's agreement has A sign (ebMS2 §4.1.3) and asks for a synchronous acknowledgment: it verified.
        assert b"<eb:Acknowledgment" in reply.body, reply.body[:2000]
        assert b"SecurityFailure" not in reply.body
        [entry] = b.inbox(None, limit=10)
        assert entry.message_id == "signed-1@a.example"

    run_pair(scenario)
