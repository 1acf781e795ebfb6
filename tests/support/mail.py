"""E-mails in the shape ebMS2 B.3.2 gives, made by hand for the SMTP binding's tests, and delivery status
notifications (RFC 3464) as an MTA sends them back."""

from __future__ import annotations

import re

CRLF = b"\r\n"


def ebxml_mail(
    content_type: str,
    body: bytes,
    *,
    message_id: str,
    sender: str = "msh@party-a.example",
    to: str = "msh@party-b.example",
    soap_action: bool = True,
    extra: tuple[str, ...] = (),
) -> bytes:
    """An ebXML message as mail (ebMS2 B.3.2): the package's Content-Type in the mail's header, SOAPAction,
    MIME-Version, From, To, Date, the package as the mail's body; the mail's Message-ID is the MessageId."""
    lines = [
        f"From: {sender}",
        f"To: {to}",
        "Date: Mon, 07 Dec 2026 09:00:00 +0000",
        f"Message-ID: <{message_id}>",
        "MIME-Version: 1.0",
        *(['SOAPAction: "ebXML"'] if soap_action else []),
        f"Content-Type: {content_type}",
        *extra,
    ]
    return CRLF.join(line.encode("ascii") for line in lines) + CRLF + CRLF + body


def plain_mail(text: str = "Hello, are you there?") -> bytes:
    """An ordinary text mail: no ebXML message, no delivery report."""
    return (
        b"From: someone@elsewhere.example\r\nTo: msh@party-b.example\r\nSubject: hello\r\n"
        b"Message-ID: <hello-1@elsewhere.example>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii"
        b"\r\n\r\n" + text.encode("ascii") + b"\r\n"
    )


def delivery_report(message_id: str, *, action: str = "failed", diagnostic: str = "550 5.1.1 no such user") -> bytes:
    """A delivery status notification (RFC 3464 multipart/report; report-type=delivery-status) about the mail
    whose Message-ID was ``<message_id>``, its headers returned as text/rfc822-headers."""
    text = f"""From: MAILER-DAEMON@mx.party-b.example
To: msh@party-a.example
Subject: Undelivered Mail Returned to Sender
Message-ID: <dsn-1@mx.party-b.example>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status; boundary="DSN-b"

--DSN-b
Content-Type: text/plain

Your message could not be delivered to one recipient.

--DSN-b
Content-Type: message/delivery-status

Reporting-MTA: dns; mx.party-b.example
Original-Envelope-Id: {message_id.replace("+", "+2B")}

Final-Recipient: rfc822; nobody@party-b.example
Action: {action}
Status: 5.1.1
Diagnostic-Code: smtp; {diagnostic}

--DSN-b
Content-Type: text/rfc822-headers

From: msh@party-a.example
To: nobody@party-b.example
Message-ID: <{message_id}>
SOAPAction: "ebXML"
Content-Type: text/xml

--DSN-b--
"""
    return text.replace("\n", "\r\n").encode("ascii")


def seven_bit(content_type: str, body: bytes) -> bytes:
    """The package ``body`` made fit for SMTP (ebMS2 B.3.2, RFC 5321 §4.5.3.1.6: lines of at most 998
    characters): its SOAP part, whose signed XML may run on one long line, transfer-encoded as base64 (RFC 2045
    §6.8; the decoded bytes, and so the signature, are unchanged). A bare envelope is left as it is: the caller
    encodes the whole mail body instead."""
    import base64

    from msh.ebms.message import ParseMode, parse_message

    if not content_type.lower().startswith("multipart/"):
        return body
    message = parse_message(body, content_type, mode=ParseMode.LENIENT)
    try:
        soap = message.soap
    finally:
        message.close()
    at = body.index(soap)
    blank = body.rindex(b"\r\n\r\n", 0, at)
    encoded = base64.encodebytes(soap).replace(b"\n", b"\r\n")
    start = body.rfind(b"\n--", 0, blank) + 1  # the boundary line that opens the SOAP part
    head = re.sub(rb"(?im)^content-transfer-encoding:[^\r\n]*\r\n?", b"", body[start:blank] + b"\r\n").rstrip(b"\r\n")
    head += b"\r\nContent-Transfer-Encoding: base64"
    out = body[:start] + head + body[blank:at] + encoded + body[at + len(soap) :]
    assert max(len(line) for line in out.split(b"\r\n")) <= 998
    return out
