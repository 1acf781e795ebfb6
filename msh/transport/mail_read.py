"""Reading one received e-mail (ebMS2 Appendix B.3): an ebXML message, a delivery status notification, or
neither. Pure: bytes in, a verdict out, no I/O.

ebMS2 B.3.2 puts the ebXML Message Envelope's MIME headers (``Content-Type: multipart/related ...`` or, for a
message without payloads, ``text/xml``) in the mail's own header, so the mail's body after its header block
*is* the ebXML package: :class:`ReceivedMail` carries that body and Content-Type to the same inbound pipeline
as an HTTP POST (which parses it with the project's MIME codec, :mod:`msh.ebms.message`; nothing is parsed
twice here). A delivery status notification an MTA sends back (RFC 3464 ``multipart/report;
report-type=delivery-status``) is a :class:`DeliveryReport` naming the ebXML messages it concerns (ebMS2
B.3.3: the MSH "MUST be capable of receiving a delivery failure notification"). Anything else is
:class:`NotEbxml`, kept in a dead-letter folder by the receiver (ebMS2 B.3.3).

Lenient reading, each deviation reported as a Warning (:class:`~msh.errors.Issue`) as the codec does: a mail
whose lines end with a bare LF (as mail clients save or forward it) is read with CRLF line ends, which MIME
framing needs (RFC 2046 §5.1.1); a mail without the SOAPAction header ebMS2 B.3.2 asks for is read all the
same (the receiving MSH routes on the ebXML header, never on SOAPAction).
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass
from email.message import Message
from email.utils import getaddresses
from enum import StrEnum
from typing import Final

from msh.ebms.mime.headers import parse_content_type, strip_angle
from msh.ebms.mime.report import Report
from msh.ebms.mime.transfer_encoding import ENCODINGS, decoder_for
from msh.errors import ErrorCode, Issue, MimeProblemError, Severity

__all__ = ["DeliveryReport", "NotEbxml", "ReceivedMail", "ReportAction", "read_mail"]


@dataclass(frozen=True, slots=True)
class ReceivedMail:
    """A mail that carries an ebXML message (ebMS2 B.3.2): ``content_type`` and ``body`` are the package as
    the inbound pipeline takes it; ``from_address`` where answers go (Reply-To, else From; None: neither);
    ``mail_id`` the mail's Message-ID without angle brackets; ``warnings`` what lenient reading let through."""

    content_type: str
    body: bytes
    from_address: str | None
    mail_id: str | None
    warnings: tuple[Issue, ...] = ()


class ReportAction(StrEnum):
    """RFC 3464 §2.3.3: what the reporting MTA did for a recipient."""

    FAILED = "failed"
    DELAYED = "delayed"
    DELIVERED = "delivered"
    RELAYED = "relayed"
    EXPANDED = "expanded"


_WORST_FIRST: Final = (ReportAction.FAILED, ReportAction.DELAYED, ReportAction.DELIVERED, ReportAction.RELAYED)


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """A delivery status notification (RFC 3464): the ``action`` reported (the worst over its recipients:
    failed before delayed before the others), the MTA's ``diagnostic`` in words, the ebMS MessageIds it
    concerns (``message_ids``, found from the returned message's Message-ID, the Original-Envelope-Id, or an
    eb:MessageId in what was returned; empty when none could be found) and the ``recipients`` reported on."""

    action: ReportAction
    diagnostic: str
    message_ids: tuple[str, ...]
    recipients: tuple[str, ...] = ()
    mail_id: str | None = None


@dataclass(frozen=True, slots=True)
class NotEbxml:
    """A mail that is neither an ebXML message nor a delivery status notification, why in words, and the
    mail's Message-ID (without angle brackets; None: none could be read)."""

    reason: str
    mail_id: str | None = None


MailVerdict = ReceivedMail | DeliveryReport | NotEbxml

# ebMS2 §2.1.2, B.3.2: the media types an ebXML message comes as.
_EBXML_TYPES: Final = frozenset({"multipart/related", "text/xml"})
_BARE_LF: Final = re.compile(rb"(?<!\r)\n")
_MESSAGE_ID_ELEMENT: Final = re.compile(rb"<(?:[A-Za-z0-9_.-]+:)?MessageId\s*>\s*([^<\s][^<]*?)\s*</", re.IGNORECASE)


def read_mail(data: bytes) -> MailVerdict:
    """What the mail ``data`` (its header block and body, as SMTP's DATA or IMAP's ``BODY[]`` gives it) is."""
    verdict = _read(data)
    if isinstance(verdict, NotEbxml) and verdict.mail_id is None:
        head = data[: max(data.find(b"\n\n"), data.find(b"\r\n\r\n"), 0) or len(data)]
        found = _MESSAGE_ID_HEADER.search(head)
        if found:
            return NotEbxml(verdict.reason, strip_angle(found.group(1).decode("latin-1")) or None)
    return verdict


_MESSAGE_ID_HEADER: Final = re.compile(rb"(?im)^message-id:[ \t]*(\S+)")


def _read(data: bytes) -> MailVerdict:
    warnings: list[Issue] = []
    if _BARE_LF.search(data):
        # RFC 5322 §2.1, RFC 2046 §5.1.1: mail lines end with CRLF; a mail saved or forwarded by a client often
        # has bare LFs, which would hide the MIME delimiters from the codec.
        data = _BARE_LF.sub(b"\r\n", data)
        warnings.append(
            _warning(
                "the mail's lines end with a bare LF instead of CRLF (as a mail client saves or forwards it); "
                "they were read as CRLF line ends (RFC 5322 §2.1, RFC 2046 §5.1.1)"
            )
        )
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return NotEbxml("the mail has no empty line after its header block, so it has no body")
    head, body = data[: end + 2], data[end + 4 :]
    headers = email.message_from_bytes(head + b"\r\n", policy=email.policy.compat32)
    raw_type = _header(headers, "Content-Type")
    if raw_type is None:
        return NotEbxml("the mail has no Content-Type header (an ebXML message is multipart/related or text/xml)")
    media, params = parse_content_type(raw_type)
    if media == "multipart/report" and params.get("report-type", "").lower() == "delivery-status":
        return _delivery_report(data)
    if media not in _EBXML_TYPES:
        return NotEbxml(
            f"the mail's Content-Type is {media or '(empty)'}; an ebXML message comes as multipart/related or "
            "text/xml (ebMS2 §2.1.2, B.3.2), a delivery status notification as multipart/report"
        )
    root_type = params.get("type")
    if media == "multipart/related" and root_type is not None and parse_content_type(root_type)[0] != "text/xml":
        # ebMS2 §2.1.2: the package's root part is the SOAP envelope, text/xml.
        return NotEbxml(
            f"the mail is multipart/related with a root part of type {root_type} (an HTML mail, say); an ebXML "
            "package's root part is the SOAP envelope, text/xml (ebMS2 §2.1.2)"
        )
    if _header(headers, "SOAPAction") is None:
        # ebMS2 B.3.2: "The SOAPAction MIME header field must also be included in the eMail MIME header".
        warnings.append(
            _warning(
                'the mail has no SOAPAction header, which ebMS2 B.3.2 asks for (SOAPAction: "ebXML"); it was '
                "read all the same (the ebXML header decides what the message is)"
            )
        )
    encoding = (_header(headers, "Content-Transfer-Encoding") or "").strip().lower()
    if encoding and encoding not in ("7bit", "8bit", "binary"):
        decoded = _decoded(body, encoding, warnings)
        if isinstance(decoded, NotEbxml):
            return decoded
        body = decoded
    sender = _address(_header(headers, "Reply-To")) or _address(_header(headers, "From"))
    return ReceivedMail(raw_type, body, sender, _mail_id(headers), tuple(warnings))


def _warning(text: str) -> Issue:
    return Issue(ErrorCode.MIME_PROBLEM, Severity.WARNING, text)


def _header(headers: Message, name: str) -> str | None:
    value = headers.get(name)
    return None if value is None else " ".join(str(value).split())


def _address(value: str | None) -> str | None:
    if not value:
        return None
    for _name, address in getaddresses([value]):
        if "@" in address:
            return address
    return None


def _mail_id(headers: Message) -> str | None:
    value = _header(headers, "Message-ID")
    return strip_angle(value) or None if value else None


def _decoded(body: bytes, encoding: str, warnings: list[Issue]) -> bytes | NotEbxml:
    """The body with the mail's own Content-Transfer-Encoding (RFC 2045 §6) undone, by the codec's decoders."""
    if encoding not in ENCODINGS:
        return NotEbxml(f"the mail's Content-Transfer-Encoding {encoding!r} is none of RFC 2045 §6.1")
    report = Report(lenient=True)
    try:
        decoder = decoder_for(encoding, report, "mail body")
        decoded = decoder.feed(body) + decoder.finish()
    except MimeProblemError as exc:
        return NotEbxml(f"the mail's body is not valid {encoding}: {exc}")
    warnings.extend(report.issues.values())
    return decoded


# ------------------------------------------------------------------------------ delivery status notifications


def _delivery_report(data: bytes) -> DeliveryReport | NotEbxml:
    """RFC 3464 §2: a human-readable part, a message/delivery-status part, and the returned message or its
    headers (message/rfc822 or text/rfc822-headers)."""
    mail = email.message_from_bytes(data, policy=email.policy.compat32)
    status: Message | None = None
    returned: list[Message] = []
    returned_text: list[bytes] = []
    for part in mail.walk():
        kind = part.get_content_type()
        if kind == "message/delivery-status":
            status = part
        elif kind == "message/rfc822":
            inner = part.get_payload()
            if isinstance(inner, list):
                returned.extend(m for m in inner if isinstance(m, Message))
        elif kind == "text/rfc822-headers":
            payload = part.get_payload(decode=True)
            if isinstance(payload, bytes):
                returned_text.append(payload)
                returned.append(email.message_from_bytes(payload, policy=email.policy.compat32))
    if status is None:
        return NotEbxml("the mail is a multipart/report without its message/delivery-status part (RFC 3464 §2)")
    blocks = _status_blocks(status)
    per_message, recipients = (blocks[0], blocks[1:]) if blocks else ({}, [])
    actions: list[ReportAction] = []
    diagnostics: list[str] = []
    addresses: list[str] = []
    for fields in recipients:
        try:
            action = ReportAction(fields.get("action", "").strip().lower())
        except ValueError:
            continue
        actions.append(action)
        who = fields.get("final-recipient") or fields.get("original-recipient") or ""
        address = who.split(";", 1)[-1].strip()
        if address:
            addresses.append(address)
        said = fields.get("diagnostic-code", "").split(";", 1)[-1].strip() or fields.get("status", "")
        if said:
            diagnostics.append(f"{address or 'a recipient'}: {said}" if address else said)
    if not actions:
        return NotEbxml("the delivery status notification names no recipient with an Action (RFC 3464 §2.3.3)")
    worst = next(a for a in (*_WORST_FIRST, ReportAction.EXPANDED) if a in actions)
    ids: list[str] = []
    for message in returned:
        _add(ids, _mail_id(message))
    envelope_id = per_message.get("original-envelope-id")
    if envelope_id:
        _add(ids, strip_angle(_xtext(envelope_id)))
    for message in returned:
        payload = message.get_payload(decode=True) if not message.is_multipart() else message.as_bytes()
        if isinstance(payload, bytes):
            returned_text.append(payload)
    for text in returned_text:
        for match in _MESSAGE_ID_ELEMENT.finditer(text):
            _add(ids, match.group(1).decode("utf-8", "replace"))
    diagnostic = "; ".join(diagnostics) or f"the mail was reported {worst.value}"
    return DeliveryReport(worst, diagnostic, tuple(ids), tuple(addresses), _mail_id(mail))


def _status_blocks(part: Message) -> list[dict[str, str]]:
    """The field groups of a message/delivery-status part (RFC 3464 §2.1), names lower-cased."""
    payload = part.get_payload()
    if isinstance(payload, list):
        return [
            {k.lower(): " ".join(str(v).split()) for k, v in block.items()}
            for block in payload
            if isinstance(block, Message)
        ]
    raw = payload if isinstance(payload, str) else ""
    blocks: list[dict[str, str]] = []
    for chunk in re.split(r"\r?\n\s*\r?\n", raw):
        block = email.message_from_string(chunk.strip() + "\n\n", policy=email.policy.compat32)
        fields = {k.lower(): " ".join(str(v).split()) for k, v in block.items()}
        if fields:
            blocks.append(fields)
    return blocks


def _xtext(value: str) -> str:
    """RFC 3461 §4: xtext, where ``+XX`` stands for the octet XX."""
    return re.sub(r"\+([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), value.strip())


def _add(ids: list[str], value: str | None) -> None:
    if value and value not in ids:
        ids.append(value)
