"""An ebXML message as an e-mail (ebMS2 Appendix B.3.2): :func:`compose_mail` turns one transmission into
the bytes of an RFC 5322 mail that a relay carries to the partner's mailbox.

What B.3.2 asks, and how it is done here:

* the package's Content-Type (``multipart/related`` with all its parameters, or ``text/xml`` for a bare
  envelope) and the other headers of the ebXML Message Envelope (``SOAPAction: "ebXML"``) become the mail's
  headers, with ``MIME-Version: 1.0``, ``From`` (our MSH's address), ``To`` (the ``mailto:`` endpoint's
  address) and ``Date`` (RFC 5322 §3.3);
* ``Message-ID`` is the ebMS MessageId in angle brackets (ebMS2 §3.1.6.1 makes a MessageId an RFC 2822
  msg-id): the receiving MSH and the relays' delivery-status notifications (RFC 3464, which quote it) map a
  mail back to its ebXML message through it (ebMS2 B.3.3);
* transfer encoding (B.3.2 first bullet, RFC 2045 §6): SMTP carries 7-bit lines of at most 998 octets
  (RFC 5321 §4.5.3.1.6). A part (or a bare envelope) whose content is not that is re-encoded base64 with a
  ``Content-Transfer-Encoding: base64`` header; a part already base64 or quoted-printable is left as is, and
  a part that is 7-bit already keeps its content (its ``binary``/``8bit`` label, which would claim an 8-bit
  path, becomes ``7bit``). The SOAP part is one long line as the MSH writes it, so it travels base64: its
  signature was made before the encoding and covers the decoded content (ebMS2 §4.1.3), as do the digests
  of the payloads' ``cid:`` references.

Everything is done on bytes, CRLF line ends throughout, so that no header is re-folded or re-encoded behind
the MSH's back. The mail is built whole in memory: the caller bounds its size (``[smtp] max_message_bytes``).
"""

from __future__ import annotations

import base64
import re
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Final
from urllib.parse import unquote

from msh.ebms.mime.headers import parse_content_type

__all__ = ["MailComposeError", "compose_mail", "mailto_address", "needs_encoding", "message_id_header"]

_MAX_LINE: Final = 998
"""RFC 5321 §4.5.3.1.6 / RFC 5322 §2.1.1: at most 998 octets in a line, without its CRLF."""
_B64_CHARS: Final = 76  # RFC 2045 §6.8: encoded lines of at most 76 characters
_FOLD_AT: Final = 78  # RFC 5322 §2.1.1: lines SHOULD be at most 78 characters

# RFC 5321 §4.1.2 Mailbox (dot-atom or quoted local part, a domain or an address literal), no white space.
_ADDRESS: Final = re.compile(
    r'(?:[A-Za-z0-9!#$%&\'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&\'*+/=?^_`{|}~-]+)*|"[^"\\\r\n]*")'
    r"@(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[^\]\s]+\])"
)
# RFC 5322 §3.6.4 msg-id: "<" id-left "@" id-right ">", printable US-ASCII without white space or brackets.
_MSG_ID: Final = re.compile(r"[\x21-\x3b\x3d\x3f-\x7e]+@[\x21-\x3b\x3d\x3f-\x5a\x5e-\x7e]+")
_OURS: Final = frozenset(
    {"from", "to", "date", "message-id", "mime-version", "content-type", "content-transfer-encoding"}
)
_HEADER_NAME: Final = re.compile(r"[!-9;-~]+")  # RFC 5322 §3.6.8 ftext


class MailComposeError(ValueError):
    """The transmission cannot be written as a mail: ``str()`` says what is wrong and what to do."""


def mailto_address(url: str) -> str:
    """The one recipient address of a ``mailto:`` URL, percent-decoded (RFC 6068 §2); header fields other
    than ``to`` (``?subject=...``) are ignored. :class:`MailComposeError` when it names no address, several,
    or something that is not an address."""
    scheme, colon, rest = url.partition(":")
    if not colon or scheme.strip().lower() != "mailto":
        raise MailComposeError(f"{url!r} is not a mailto: URL (RFC 6068); the endpoint must be mailto:address")
    path, _, query = rest.partition("?")
    found = [unquote(a).strip() for a in path.split(",") if a.strip()]
    for field_ in query.split("&"):
        name, _, value = field_.partition("=")
        if unquote(name).strip().lower() == "to":
            found += [unquote(a).strip() for a in value.split(",") if a.strip()]
    if len(found) != 1:
        what = "no address" if not found else f"{len(found)} addresses ({', '.join(found)})"
        raise MailComposeError(
            f"the endpoint {url!r} names {what}; an ebXML message goes to one MSH: write mailto:msh@partner.example"
        )
    address = found[0]
    if not _ADDRESS.fullmatch(address):
        raise MailComposeError(
            f"the endpoint {url!r} does not name an e-mail address (local-part@domain, RFC 5321 §4.1.2): {address!r}"
        )
    return address


def message_id_header(message_id: str | None, domain: str) -> str:
    """The mail's Message-ID: ``<ebMS MessageId>`` when it is a valid msg-id (RFC 5322 §3.6.4), else a new
    unique one on ``domain`` (then nothing maps the mail to the message by its id)."""
    if message_id is not None:
        bare = message_id.strip()
        if bare.startswith("<") and bare.endswith(">"):
            bare = bare[1:-1]
        if _MSG_ID.fullmatch(bare):
            return f"<{bare}>"
    return f"<{secrets.token_hex(16)}@{domain}>"


def needs_encoding(content: bytes) -> bool:
    """True when ``content`` is not 7-bit data SMTP carries as it is (RFC 2045 §2.7): a byte over 127 or NUL,
    a CR or LF not in a CRLF pair, or a line over 998 octets."""
    if not content.isascii() or b"\x00" in content:
        return True
    lines = content.split(b"\r\n")
    return any(len(line) > _MAX_LINE or b"\r" in line or b"\n" in line for line in lines)


def _base64(content: bytes) -> bytes:
    """``content`` base64-encoded in lines of 76 characters, each ending CRLF (RFC 2045 §6.8)."""
    encoded = base64.b64encode(content)
    lines = [encoded[at : at + _B64_CHARS] for at in range(0, len(encoded), _B64_CHARS)]
    return b"\r\n".join(lines) + b"\r\n" if lines else b""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    raw: bytes
    """The whole field as written, folded lines included, with its final CRLF."""


def _fields(block: bytes) -> Iterator[_Field]:
    """The header fields of a part's header block (each ending CRLF; continuation lines kept with theirs)."""
    current = b""
    for line in block.split(b"\r\n")[:-1] if block.endswith(b"\r\n") else block.split(b"\r\n"):
        if line[:1] in (b" ", b"\t") and current:
            current += line + b"\r\n"
            continue
        if current:
            yield _Field(current.split(b":", 1)[0].strip().decode("ascii", "replace").lower(), current)
        current = line + b"\r\n"
    if current:
        yield _Field(current.split(b":", 1)[0].strip().decode("ascii", "replace").lower(), current)


def _transfer_encoding(field_: _Field) -> str:
    value = field_.raw.split(b":", 1)[1] if b":" in field_.raw else b""
    return b"".join(value.split()).decode("ascii", "replace").lower()


def _mail_part(part: bytes, where: str) -> bytes:
    """One body part, re-encoded base64 when its content is not 7-bit (RFC 2045 §6, ebMS2 B.3.2)."""
    if part.startswith(b"\r\n"):
        block, content = b"", part[2:]
    else:
        end = part.find(b"\r\n\r\n")
        if end < 0:
            raise MailComposeError(f"{where} has no blank line after its headers; the package is not well formed")
        block, content = part[: end + 2], part[end + 4 :]
    fields = list(_fields(block))
    coding = next((f for f in fields if f.name == "content-transfer-encoding"), None)
    encoding = _transfer_encoding(coding) if coding is not None else "7bit"
    media = next((f for f in fields if f.name == "content-type"), None)
    media_type = parse_content_type(media.raw.split(b":", 1)[1].decode("latin-1"))[0] if media else "text/plain"
    if encoding not in ("7bit", "8bit", "binary"):
        return part  # base64 or quoted-printable is 7-bit already (RFC 2045 §6.7, §6.8): left as written
    if not needs_encoding(content):
        if encoding == "7bit":
            return part
        label = b"Content-Transfer-Encoding: 7bit\r\n"  # RFC 2045 §2.7: 7-bit data, said so
    elif media_type.startswith("multipart/"):
        # RFC 2045 §6.4: a multipart entity is never base64; its own parts would have to be encoded.
        raise MailComposeError(
            f"{where} is a {media_type} entity with 8-bit content, which mail cannot carry and RFC 2045 §6.4 "
            "forbids to base64-encode; send it over HTTP"
        )
    else:
        label, content = b"Content-Transfer-Encoding: base64\r\n", _base64(content)
    kept = b"".join(f.raw for f in fields if f.name != "content-transfer-encoding")
    return kept + label + b"\r\n" + content


def _multipart_body(body: bytes, boundary: str) -> bytes:
    """The package's body with each part made fit for mail; preamble, delimiters and epilogue kept."""
    delimiter = b"--" + boundary.encode("ascii", "replace")
    if body.startswith(delimiter):
        at = 0
    else:
        found = body.find(b"\r\n" + delimiter)
        if found < 0:
            raise MailComposeError(
                f"the package has no CRLF-framed delimiter --{boundary}; it cannot be sent as a mail (RFC 2046 §5.1.1)"
            )
        at = found + 2
    out = bytearray(body[:at])
    index = 0
    while True:
        line_end = body.find(b"\r\n", at)
        if line_end < 0 or body[at + len(delimiter) : at + len(delimiter) + 2] == b"--":
            out += body[at:]  # the close delimiter and the epilogue (RFC 2046 §5.1.1)
            return bytes(out)
        out += body[at : line_end + 2]
        start = line_end + 2
        following = body.find(b"\r\n" + delimiter, start)
        if following < 0:
            raise MailComposeError(
                f"the package ends inside a part, without its closing delimiter --{boundary}--; it is truncated"
            )
        index += 1
        out += _mail_part(body[start:following], f"part {index} of the package")
        out += b"\r\n"
        at = following + 2


def _header(name: str, value: str) -> bytes:
    """``name: value`` CRLF, folded before a parameter when longer than 78 characters (RFC 5322 §2.2.3)."""
    if "\r" in value or "\n" in value or not value.isascii():
        raise MailComposeError(f"the header {name} holds a line break or a non-ASCII character: {value!r}")
    line = f"{name}: {value}"
    if len(line) > _FOLD_AT and ";" in value:
        pieces = [p.strip() for p in value.split(";")]
        folded, current = [], f"{name}: {pieces[0]}"
        for piece in pieces[1:]:
            if len(current) + 2 + len(piece) > _FOLD_AT:
                folded.append(current + ";")
                current = " " + piece
            else:
                current += "; " + piece
        line = "\r\n".join([*folded, current])
    return line.encode("ascii") + b"\r\n"


def compose_mail(
    *,
    url: str,
    content_type: str,
    body: bytes,
    from_address: str,
    headers: Mapping[str, str],
    message_id: str | None,
    now: datetime | None = None,
) -> bytes:
    """The RFC 5322 mail carrying the ebXML message ``body`` of ``content_type`` to the ``mailto:`` ``url``
    (ebMS2 B.3.2; see the module docs). :class:`MailComposeError` saying what is wrong when it cannot be."""
    to = mailto_address(url)
    media, params = parse_content_type(content_type)
    domain = from_address.rpartition("@")[2] or "localhost"
    when = (now or datetime.now(UTC)).astimezone(UTC)
    head = bytearray()
    head += _header("From", from_address)  # ebMS2 B.3.2: the sender MSH's address
    head += _header("To", to)  # ebMS2 B.3.2: the receiving MSH's address
    head += _header("Date", format_datetime(when))  # ebMS2 B.3.2, RFC 5322 §3.3
    head += _header("Message-ID", message_id_header(message_id, domain))
    head += _header("MIME-Version", "1.0")  # ebMS2 B.3.2: "MIME-Version: 1.0" as an eMail header
    for name, value in headers.items():  # ebMS2 B.3.2: SOAPAction and the envelope's other headers
        if name.strip().lower() in _OURS:
            continue
        if not _HEADER_NAME.fullmatch(name):
            raise MailComposeError(f"{name!r} is not a header field name (RFC 5322 §3.6.8)")
        head += _header(name, value)
    # ebMS2 B.3.2: the package's Content-Type, with all its parameters, is the mail's.
    head += _header("Content-Type", content_type)
    if media.startswith("multipart/"):
        boundary = params.get("boundary", "")
        if not boundary:
            raise MailComposeError(f"the package's Content-Type {content_type!r} has no boundary parameter")
        content = _multipart_body(body, boundary)
    elif needs_encoding(body):
        # RFC 2045 §6, ebMS2 B.3.2: a bare envelope that is not 7-bit travels base64, said in the mail header.
        head += _header("Content-Transfer-Encoding", "base64")
        content = _base64(body)
    else:
        content = body
    if not content.endswith(b"\r\n"):
        content += b"\r\n"  # RFC 5321 §4.1.1.4: the data ends with a line end before "."
    return bytes(head) + b"\r\n" + content
