"""Whole ebXML messages: parse and build, strict or lenient (ebMS2 §2.1, §2.3).

A message on the wire is either a ``multipart/related`` SOAP-with-attachments package (the SOAP part plus
payload parts) or, for a message without payloads, a bare ``text/xml`` SOAP envelope. :func:`parse_message`
reads either from bytes or a stream, validates the envelope against the project's schemas and returns an
:class:`EbxmlMessage`; :func:`read_message_file` also accepts a raw HTTP capture or a header dump.
:func:`build_message` and :func:`write_message` go the other way.

Two modes (:class:`ParseMode`): ``strict`` rejects anything that is not schema-valid and by the book;
``lenient`` accepts the quirks real partners send (``start`` without brackets, no
charset, element order slips, unqualified attributes; in files, a capture whose headers say chunked over a
body saved de-chunked) and reports each as a Warning in :attr:`EbxmlMessage.warnings`. What would lose
or misread the sender's content is refused in both modes: a Manifest ``cid:`` reference to a part the
package does not hold (ebMS2 §3.2.2), a package without its closing delimiter (unless asked to accept it).

Bytes after a whole message are judged by the framing, the same way in both modes, so that a message is
either refused whole or taken whole, never stored and then refused: after a package's close delimiter they
are the epilogue, which RFC 2046 §5.1.1 tells a reader to ignore (the package is whole, its parts delimited;
the MSH stores the body as received and acknowledges it); after a bare envelope's root element, or after the
envelope inside the SOAP part, anything but comments, processing instructions and white space makes the
body no XML document (XML 1.0 §2.1), so the message is refused with OtherXml before anything is stored.
A file read by :func:`read_message_file` (or split by :func:`split_message_stream`) is read as a stream: its
header block, then its body a piece at a time into the package reader, so a capture of any size is never held
whole in memory.
"""

from __future__ import annotations

import io
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO, Final, cast

from lxml import etree

from msh.ebms.envelope import read_envelope, serialise_envelope
from msh.ebms.mime import AttachmentSpec, MimeLimits, MimePart, parse_content_type, parse_package, write_package
from msh.ebms.mime.limits import CHUNK
from msh.ebms.model import Envelope
from msh.ebms.schema import validate_envelope
from msh.errors import EbmsError, EnvelopeError, ErrorCode, Issue, MimeProblemError, MshError, Severity
from msh.safexml import XmlLimits, parse_xml, text_encoding

__all__ = [
    "EbxmlMessage",
    "FileForm",
    "MessageFile",
    "MessageStream",
    "ParseMode",
    "build_message",
    "decode_soap_part",
    "message_id_of",
    "parse_message",
    "soap_action_issue",
    "read_message_file",
    "split_http_message",
    "split_message_file",
    "split_message_stream",
    "write_message",
]


class ParseMode(StrEnum):
    """How forgiving :func:`parse_message` is."""

    STRICT = "strict"
    LENIENT = "lenient"


@dataclass(frozen=True, slots=True)
class EbxmlMessage:
    """A parsed ebXML message.

    ``soap`` is the SOAP part exactly as received (signatures cover these bytes; an intermediary forwards
    them), ``payloads`` the other MIME parts in order with their bodies spooled (call :meth:`close` to
    release temporary files), ``warnings`` what lenient mode let through, ``root`` the parsed SOAP part
    (read only; kept so that later steps such as the content digest need not parse it again).
    """

    envelope: Envelope
    soap: bytes
    payloads: tuple[MimePart, ...]
    content_type: str
    warnings: tuple[Issue, ...] = ()
    root: etree._Element | None = field(default=None, compare=False, repr=False)

    def payload(self, content_id: str) -> MimePart | None:
        """The payload part with ``content_id`` (with or without ``cid:`` and angle brackets)."""
        wanted = _bare_cid(content_id)
        for part in self.payloads:
            if part.content_id is not None and part.content_id == wanted:
                return part
        return None

    def close(self) -> None:
        for part in self.payloads:
            part.body.close()


def _bare_cid(value: str) -> str:
    value = value.strip()
    if value[:4].lower() == "cid:":
        value = value[4:]
    if value.startswith("<") and value.endswith(">"):
        value = value[1:-1]
    return value


_XML_DECL = re.compile(rb"^\s*<\?xml[^>]*\?>")


def decode_soap_part(data: bytes, charset: str | None) -> bytes:
    """The SOAP part ``data`` re-encoded so that its ``charset`` (from MIME, ebMS2 §2.1.3.2) agrees with what
    the XML parser will assume; a charset that names no text encoding is a MimeProblem."""
    if charset is None:
        return data
    codec = text_encoding(charset)
    if codec is None:
        # RFC 2046 §4.1.2: charset names a character encoding; anything else is a broken package.
        shown = charset.encode("ascii", "backslashreplace").decode("ascii")[:80]
        raise MimeProblemError(
            f"the SOAP part's charset {shown!r} is not a supported text encoding; send UTF-8", location="cid:start"
        )
    if codec in ("utf-8", "ascii"):
        return data
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as exc:
        raise MimeProblemError(f"SOAP part cannot be decoded as {codec}: {exc}", location="cid:start") from None
    # The XML declaration's encoding would contradict the re-encoded bytes: drop it.
    return _XML_DECL.sub(b"", text.encode("utf-8"), count=1)


# The media types a bare SOAP envelope comes as: text/xml (ebMS2 §2.1.2), the others only in lenient mode.
_XML_MEDIA_TYPES = ("text/xml", "application/xml", "application/soap+xml")


def _sniff_media_type(head: bytes) -> str | None:
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if stripped.startswith(b"<"):
        return "text/xml"
    if stripped.startswith(b"--"):
        return "multipart/related"
    return None


def parse_message(
    source: bytes | BinaryIO,
    content_type: str | None,
    *,
    mode: ParseMode = ParseMode.STRICT,
    mime_limits: MimeLimits | None = None,
    xml_limits: XmlLimits | None = None,
    allow_unterminated: bool = False,
) -> EbxmlMessage:
    """Parse an ebXML message from its HTTP body and Content-Type header value.

    ``allow_unterminated`` (lenient mode only): accept a MIME package without its closing delimiter, with
    a Warning (see :func:`~msh.ebms.mime.parse_package`).

    ``content_type`` may be None for a file with no headers: the body is then sniffed (an envelope starts
    with ``<``, a MIME package with ``--``), which lenient mode reports as a Warning and strict mode
    refuses. Raises :class:`~msh.errors.EbmsError` subclasses carrying errorCode, severity and location:
    :class:`EnvelopeError` when no envelope can be read (answer with a SOAP Fault), any other
    :class:`EbmsError` when the envelope was read (answer with an ErrorList message).
    """
    lenient = mode is ParseMode.LENIENT
    mime_limits = mime_limits or MimeLimits()
    xml_limits = xml_limits or XmlLimits(max_bytes=mime_limits.max_soap_part_bytes)
    warnings: list[Issue] = []
    stream: BinaryIO = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source

    if content_type is None:
        head = stream.read(64)
        stream = io.BufferedReader(_Prefixed(head, stream))
        media_type = _sniff_media_type(head)
        if media_type is None:
            raise EnvelopeError("message has no Content-Type and is neither XML nor MIME", location="/")
        if not lenient:
            raise MimeProblemError("message has no Content-Type (strict mode does not guess)", location="/")
        warnings.append(
            Issue(ErrorCode.MIME_PROBLEM, Severity.WARNING, f"no Content-Type given; content sniffed as {media_type}")
        )
        effective_type: str | None = None if media_type == "multipart/related" else "text/xml"
    else:
        media_type, _params = parse_content_type(content_type)
        effective_type = content_type

    payloads: tuple[MimePart, ...] = ()
    if media_type == "multipart/related":
        package = parse_package(
            stream, effective_type, lenient=lenient, limits=mime_limits, allow_unterminated=allow_unterminated
        )
        warnings.extend(package.warnings)
        soap = package.start.body.read_bytes()
        soap = decode_soap_part(soap, package.start.charset)
        package.start.body.close()
        payloads = package.attachments
        wire_type = content_type or f'multipart/related; boundary="{package.boundary}"'
    elif media_type in _XML_MEDIA_TYPES:
        # ebMS2 §2.1.2: a message without payloads may be sent as the bare SOAP envelope.
        if media_type != "text/xml":
            if not lenient:
                raise MimeProblemError(f"SOAP envelope sent as {media_type}; text/xml expected", location="/")
            warnings.append(
                Issue(
                    ErrorCode.MIME_PROBLEM, Severity.WARNING, f"SOAP envelope sent as {media_type}; text/xml expected"
                )
            )
        soap = stream.read(xml_limits.max_bytes + 1)
        if len(soap) > xml_limits.max_bytes:
            raise EnvelopeError(f"SOAP envelope is over the limit of {xml_limits.max_bytes} bytes", location="/")
        charset = _params.get("charset") if content_type is not None else None
        soap = decode_soap_part(soap, charset)
        wire_type = content_type or "text/xml"
    else:
        raise MimeProblemError(
            f"Content-Type {media_type} is neither multipart/related nor text/xml (ebMS2 §2.1.2)", location="/"
        )

    try:
        envelope, root = _read_soap(soap, payloads, warnings, lenient, xml_limits)
    except BaseException:
        for part in payloads:
            part.body.close()
        raise
    return EbxmlMessage(envelope, soap, payloads, wire_type, tuple(warnings), root)


def message_id_of(body: bytes, content_type: str | None) -> str | None:
    """The MessageId of the message in ``body`` (read leniently), for a binding that names what it carries
    (an e-mail's Message-ID); None when it has none or cannot be read."""
    try:
        message = parse_message(body, content_type, mode=ParseMode.LENIENT)
    except MshError:
        return None
    try:
        return message.envelope.message_id
    finally:
        message.close()


def _read_soap(
    soap: bytes,
    payloads: tuple[MimePart, ...],
    warnings: list[Issue],
    lenient: bool,
    xml_limits: XmlLimits,
) -> tuple[Envelope, etree._Element]:
    root = parse_xml(soap, what="SOAP envelope", limits=xml_limits)
    if root.tag != "{http://schemas.xmlsoap.org/soap/envelope/}Envelope":
        raise EnvelopeError(f"root element is {etree.QName(root).localname}, not a SOAP 1.1 Envelope", location="/")
    schema_issues = validate_envelope(root)
    if schema_issues:
        if not lenient:
            head = schema_issues[0]
            raise EbmsError(head.description, error_code=head.error_code, location=head.location, issues=schema_issues)
        warnings.extend(
            Issue(i.error_code, Severity.WARNING, f"not schema-valid: {i.description}", i.location)
            for i in schema_issues
        )
    try:
        envelope, envelope_warnings = read_envelope(root, lenient=lenient)
    except ValueError as exc:
        # A value the reader took but the model refuses: never an internal error (docs/design.md §6).
        problem = f"the envelope holds a value that cannot be used: {exc}"
        raise EbmsError(problem, error_code=ErrorCode.OTHER_XML) from exc
    warnings.extend(envelope_warnings)

    if envelope.message_header is None and envelope.fault is None:
        # ebMS2 §3.1: MessageHeader is required in every ebXML message.
        problem = "message has no eb:MessageHeader"
        if not lenient:
            raise EbmsError(problem, error_code=ErrorCode.OTHER_XML, location="//Header/MessageHeader")
        warnings.append(Issue(ErrorCode.OTHER_XML, Severity.WARNING, problem, "//Header/MessageHeader"))

    if envelope.manifest is not None:
        ids = {p.content_id for p in payloads if p.content_id is not None}
        for ref in envelope.manifest.references:
            cid = ref.content_id
            if cid is not None and _bare_cid(cid) not in ids:
                # ebMS2 §3.2.2: a cid: reference with no MIME part is a MimeProblem of severity Error, in
                # both modes: the payload the sender meant is not here, so nothing may be acknowledged.
                problem = f"Manifest references {ref.href} but the message has no part with that Content-ID"
                raise MimeProblemError(problem, location=ref.href)
    return envelope, root


class _Prefixed(io.RawIOBase):
    """A stream with some already-read bytes put back in front."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def soap_action_issue(value: str | None) -> Issue | None:
    """What is wrong with the SOAPAction HTTP header of a request carrying an ebXML message (``value``
    None: the header is absent), or None when nothing is.

    ebMS2 B.2.2 and SOAP 1.1 §6.1.1 make the header mandatory. Its value is not judged: ebMS2 says it MAY
    be ``"ebXML"``, SOAP 1.1 allows a URI, an empty string or no value, and other MSHs send their service
    URI there (NHS Spine). The receiving MSH routes on the ebXML header, never on SOAPAction.
    """
    if value is None:
        # ebMS2 B.2.2: "The mandatory SOAPAction HTTP header field must also be included".
        return Issue(
            ErrorCode.MIME_PROBLEM,
            Severity.ERROR,
            "the HTTP request has no SOAPAction header, which ebMS2 B.2.2 and SOAP 1.1 §6.1.1 make mandatory "
            '(send SOAPAction: "ebXML"); nothing was processed',
        )
    return None


# ---------------------------------------------------------------------------------------- raw captures

_REQUEST_LINE = re.compile(rb"^(?:[A-Z]+ \S+ HTTP/1\.[01]|HTTP/1\.[01] \d{3}[^\r\n]*)\r?\n")


# A header line: a name and a colon; the space after the colon is optional (RFC 9112 §5: OWS), and header
# dumps (captures saved by other tools) leave it out: ``Content-Type:multipart/related;...``.
_HEADER_LINE = re.compile(rb"^[A-Za-z0-9][A-Za-z0-9-]*:")


class FileForm(StrEnum):
    """The forms of message file :func:`read_message_file` reads."""

    HTTP_CAPTURE = "HTTP capture"
    """A request or status line, the header lines, the body."""
    HEADERS = "header lines without a request line"
    """Header lines without a request line (a header dump, or a MIME file with its Content-Type line)."""
    BARE_ENVELOPE = "bare SOAP envelope"
    """Just the SOAP envelope (ebMS2 §2.1.2)."""
    NO_HEADERS = "body without headers"
    """A MIME package without its Content-Type, or anything else: the content is sniffed."""


@dataclass(frozen=True, slots=True)
class MessageFile:
    """A message file split into its form, its headers (names lower-cased; empty without any), the message
    body (de-chunked) and its Content-Type (None: to be sniffed); ``warnings``: what lenient mode let through
    (a body that is not in the chunked framing its headers announce)."""

    form: FileForm
    headers: dict[str, str]
    body: bytes
    content_type: str | None
    warnings: tuple[Issue, ...] = ()


def split_message_file(data: bytes, *, mode: ParseMode = ParseMode.LENIENT) -> MessageFile:
    """Split the bytes of a message file as :func:`read_message_file` reads them (see there for the forms).

    Raises :class:`~msh.errors.MimeProblemError` when the headers announce a chunked body whose framing is
    broken; in lenient mode a body that is not chunked at all but starts like the message the headers
    announce is taken as it is, with a Warning (capture tools save the body already de-chunked).
    """
    lenient = mode is ParseMode.LENIENT
    if _REQUEST_LINE.match(data):
        headers, body, warnings = _split_header_block(data[data.index(b"\n") + 1 :], lenient)
        return MessageFile(FileForm.HTTP_CAPTURE, headers, body, headers.get("content-type"), warnings)
    # A MIME file, or a capture without its request line (a header dump), that starts with its header block.
    if _HEADER_LINE.match(data):
        headers, body, warnings = _split_header_block(data, lenient)
        if "content-type" in headers:
            return MessageFile(FileForm.HEADERS, headers, body, headers["content-type"], warnings)
    if _sniff_media_type(data[:64]) == "text/xml":
        # A file holding just the SOAP envelope: its form says what it is (ebMS2 §2.1.2 bare envelope).
        return MessageFile(FileForm.BARE_ENVELOPE, {}, data, "text/xml")
    return MessageFile(FileForm.NO_HEADERS, {}, data, None)


def split_http_message(data: bytes) -> tuple[dict[str, str], bytes] | None:
    """Split a raw HTTP request or response capture into (headers, body); None if ``data`` is not one.

    Header names are lower-cased; a chunked body is de-chunked (RFC 9112 §7.1). A body that is not in the
    chunked framing its headers announce is refused (:func:`split_message_file` can accept it leniently).
    """
    if not _REQUEST_LINE.match(data):
        return None
    headers, body, _ = _split_header_block(data[data.index(b"\n") + 1 :], lenient=False)
    return headers, body


def _split_header_block(data: bytes, lenient: bool) -> tuple[dict[str, str], bytes, tuple[Issue, ...]]:
    """Split ``Name: value`` lines (``Name:value`` too) from the body that follows, de-chunked when the
    headers say so (:func:`_unchunked`, which also returns its lenient-mode Warning); the header block as
    :func:`_header_block` finds it."""
    headers, body_start = _header_block(data)
    body, warnings = _unchunked(headers, data[body_start:], lenient)
    return headers, body, warnings


def _header_block(data: bytes) -> tuple[dict[str, str], int]:
    """The ``Name: value`` lines at the start of ``data`` (names lower-cased) and where the body starts.

    The header block ends at the first empty line (RFC 9112 §2.1). A header dump, as some tools save
    captures, has no empty line: there the block ends at the first line that is the body's own first line,
    a MIME boundary delimiter (``--``, RFC 2046 §5.1.1) or the ``<`` of a bare SOAP envelope; neither can
    begin a header line or a folded continuation.
    """
    headers: dict[str, str] = {}
    pos, body_start = 0, len(data)
    while pos < len(data):
        end = data.find(b"\n", pos)
        after = len(data) if end < 0 else end + 1
        line = data[pos:after].rstrip(b"\r\n")
        if not line:  # the empty line that ends the header block
            body_start = after
            break
        if line.startswith((b"--", b"<")):  # a header dump: the body follows the headers directly
            body_start = pos
            break
        text = line.decode("iso-8859-1")
        if text[:1] in (" ", "\t") and headers:
            # RFC 9112 §5.2: obsolete line folding continues the previous header.
            last = next(reversed(headers))
            headers[last] += " " + text.strip()
        else:
            name, sep, value = text.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        pos = after
    return headers, body_start


_NOT_CHUNKED = (
    "the body is not in chunked framing although Transfer-Encoding says chunked (RFC 9112 §7.1); it starts like "
    "the message the headers announce"
)


def _unchunked(headers: dict[str, str], body: bytes, lenient: bool) -> tuple[bytes, tuple[Issue, ...]]:
    """The body, de-chunked when Transfer-Encoding says chunked, and the lenient-mode Warning when it was
    not chunked after all (see :func:`split_message_file`)."""
    if "chunked" not in headers.get("transfer-encoding", "").lower():
        return body, ()
    try:
        return _dechunk(body), ()
    except MimeProblemError:
        if not _starts_like_message(body, headers.get("content-type")):
            raise
    # A chunk-size line is hex digits (RFC 9112 §7.1), so a body that starts with a MIME delimiter or an
    # XML "<" is not chunked: the capture tool kept the wire's headers over the body it had de-chunked.
    if not lenient:
        raise MimeProblemError(
            f"{_NOT_CHUNKED}: if the capture tool saved the de-chunked body, read it in lenient mode", location="/"
        )
    problem = f"{_NOT_CHUNKED}, so it was read as already de-chunked (as capture tools save it)"
    return body, (Issue(ErrorCode.MIME_PROBLEM, Severity.WARNING, problem, "/"),)


def _starts_like_message(body: bytes, content_type: str | None) -> bool:
    """Whether ``body`` starts as the message ``content_type`` announces: a package with the delimiter of
    its boundary (RFC 2046 §5.1.1; any delimiter without a boundary), a SOAP envelope with ``<``."""
    head = body[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if content_type is None:
        return _sniff_media_type(head) is not None
    media, params = parse_content_type(content_type)
    if media.startswith("multipart/"):
        boundary = params.get("boundary")
        return head.startswith(b"--" + boundary.encode("iso-8859-1", "replace") if boundary else b"--")
    return media in _XML_MEDIA_TYPES and head.startswith(b"<")


_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")


def _dechunk(body: bytes) -> bytes:
    """The body of a chunked HTTP capture (RFC 9112 §7.1); a broken chunk framing is a MimeProblem."""
    out = bytearray()
    pos = 0
    while True:
        end = body.find(b"\r\n", pos)
        if end < 0:
            raise MimeProblemError("truncated chunked HTTP body", location="/")
        size_text = body[pos:end].split(b";", 1)[0].strip()
        # RFC 9112 §7.1: chunk-size = 1*HEXDIG (no sign, no spaces inside).
        if not _CHUNK_SIZE.fullmatch(size_text):
            shown = size_text[:20].decode("ascii", "backslashreplace")
            raise MimeProblemError(f"bad chunk size {shown!r} in a chunked HTTP body", location="/")
        size = int(size_text, 16)
        if size == 0:
            return bytes(out)
        if end + 2 + size > len(body):
            raise MimeProblemError("truncated chunked HTTP body", location="/")
        out += body[end + 2 : end + 2 + size]
        pos = end + 2 + size + 2


def _dechunk_stream(source: BinaryIO, out: BinaryIO) -> None:
    """:func:`_dechunk` from ``source`` to ``out``, a chunk piece at a time (RFC 9112 §7.1)."""
    while True:
        line = source.readline(_MAX_CHUNK_LINE)
        if not line.endswith(b"\r\n"):
            if len(line) >= _MAX_CHUNK_LINE:
                shown = line[:20].decode("ascii", "backslashreplace")
                raise MimeProblemError(f"bad chunk size {shown!r} in a chunked HTTP body", location="/")
            raise MimeProblemError("truncated chunked HTTP body", location="/")
        size_text = line[:-2].split(b";", 1)[0].strip()
        if not _CHUNK_SIZE.fullmatch(size_text):
            shown = size_text[:20].decode("ascii", "backslashreplace")
            raise MimeProblemError(f"bad chunk size {shown!r} in a chunked HTTP body", location="/")
        size = int(size_text, 16)
        if size == 0:
            return
        while size:
            piece = source.read(min(size, CHUNK))
            if not piece:
                raise MimeProblemError("truncated chunked HTTP body", location="/")
            out.write(piece)
            size -= len(piece)
        source.read(2)  # the CRLF after the chunk's data


_MAX_CHUNK_LINE: Final = 64 * 1024
# How much of a message file is read to find its form and its header block (a capture's headers are a few
# KiB; the body after them is read as a stream, never whole).
_FILE_HEAD: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class MessageStream:
    """A message file split as :func:`split_message_file` splits it, but read as a stream
    (:func:`split_message_stream`): the same form, headers (names lower-cased), Content-Type (None: to be
    sniffed) and lenient-mode Warnings; ``body`` reads the message body (de-chunked) from ``start``, the
    file itself from the body's first byte or a spooled de-chunked copy (``spooled``) from 0.

    Close it (or use it in a ``with`` block) to release the spooled copy; the file stays its opener's.
    """

    form: FileForm
    headers: dict[str, str]
    content_type: str | None
    body: BinaryIO
    start: int = 0
    warnings: tuple[Issue, ...] = ()
    spooled: bool = False

    def rewind(self) -> BinaryIO:
        """``body``, put back at the body's first byte."""
        self.body.seek(self.start)
        return self.body

    def close(self) -> None:
        if self.spooled:
            self.body.close()

    def __enter__(self) -> MessageStream:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def split_message_stream(file: BinaryIO, *, mode: ParseMode = ParseMode.LENIENT) -> MessageStream:
    """:func:`split_message_file` of a file read as a stream (seekable, at its first byte): the header block
    from the file's first MiB, the body left in the file (returned at its first byte), or de-chunked into a
    spooled temporary file when the headers say chunked. At most a MiB is held at a time, whatever the
    file's size.

    Raises :class:`~msh.errors.MimeProblemError` as :func:`split_message_file` does, and when the header
    block does not end within the file's first MiB.
    """
    lenient = mode is ParseMode.LENIENT
    head = file.read(_FILE_HEAD)
    headers: dict[str, str] = {}
    form, body_start = FileForm.NO_HEADERS, 0
    if _REQUEST_LINE.match(head):
        line_end = head.index(b"\n") + 1
        headers, block_end = _header_block(head[line_end:])
        form, body_start = FileForm.HTTP_CAPTURE, line_end + block_end
    elif _HEADER_LINE.match(head):
        found, block_end = _header_block(head)
        if "content-type" in found:
            form, headers, body_start = FileForm.HEADERS, found, block_end
    if form is not FileForm.NO_HEADERS and body_start >= len(head) == _FILE_HEAD:
        raise MimeProblemError(
            f"the file's header block does not end within its first {_FILE_HEAD} bytes; is it a message file?",
            location="/",
        )
    if form is FileForm.NO_HEADERS and _sniff_media_type(head[:64]) == "text/xml":
        form = FileForm.BARE_ENVELOPE
    content_type = headers.get("content-type") if form is not FileForm.BARE_ENVELOPE else "text/xml"
    file.seek(body_start)
    if "chunked" not in headers.get("transfer-encoding", "").lower():
        return MessageStream(form, headers, content_type, file, body_start)
    spool = cast(BinaryIO, tempfile.SpooledTemporaryFile(max_size=_FILE_HEAD))  # noqa: SIM115 - closed by the caller
    try:
        _dechunk_stream(file, spool)
    except MimeProblemError:
        spool.close()
        file.seek(body_start)
        if not _starts_like_message(file.read(4096), content_type):
            raise
        # As _unchunked: the capture tool kept the wire's headers over the body it had de-chunked.
        if not lenient:
            raise MimeProblemError(
                f"{_NOT_CHUNKED}: if the capture tool saved the de-chunked body, read it in lenient mode", location="/"
            ) from None
        file.seek(body_start)
        problem = f"{_NOT_CHUNKED}, so it was read as already de-chunked (as capture tools save it)"
        warning = Issue(ErrorCode.MIME_PROBLEM, Severity.WARNING, problem, "/")
        return MessageStream(form, headers, content_type, file, body_start, (warning,))
    spool.seek(0)
    return MessageStream(form, headers, content_type, spool, spooled=True)


def read_message_file(path: str | Path, *, mode: ParseMode = ParseMode.LENIENT) -> EbxmlMessage:
    """Read a message file: a raw HTTP capture, a header dump (header lines with no request line, maybe no
    space after the colon and no empty line before the first MIME boundary), a MIME package (with or without
    its own headers), or a bare SOAP envelope. The Content-Type comes from the capture's headers where there
    are some. The Warnings of :func:`split_message_file` come first in the message's.

    The file is read as a stream, as the endpoint reads a request: its header block, then the body a piece at
    a time into the package reader (payloads past its in-memory threshold spool to a temporary file), so a
    capture of any size is never held whole in memory (a chunked body is de-chunked into a spooled file)."""
    with open(path, "rb") as file, split_message_stream(file, mode=mode) as split:
        message = parse_message(split.body, split.content_type, mode=mode)
    warnings = split.warnings
    return replace(message, warnings=(*warnings, *message.warnings)) if warnings else message


# ---------------------------------------------------------------------------------------------- build


def _check_manifest(envelope: Envelope, attachments: Sequence[AttachmentSpec]) -> None:
    ids = {_bare_cid(a.content_id) for a in attachments}
    if len(ids) != len(attachments):
        raise ValueError("attachments must have distinct Content-IDs")
    if envelope.manifest is not None:
        for ref in envelope.manifest.references:
            if ref.content_id is not None and _bare_cid(ref.content_id) not in ids:
                raise ValueError(f"Manifest references {ref.href} but no attachment has that Content-ID")


def write_message(
    out: BinaryIO,
    envelope: Envelope,
    attachments: Sequence[AttachmentSpec] = (),
    *,
    start_id: str = "ebxml-envelope@msh",
    boundary: str | None = None,
    multipart: bool | None = None,
    soap: bytes | None = None,
) -> str:
    """Write the message to ``out`` and return the Content-Type header value to send with it.

    With payloads (or ``multipart=True``) the message is a ``multipart/related`` package whose first part
    is the SOAP envelope (ebMS2 §2.1.2, §2.1.3); payload bodies are copied in chunks, never held whole.
    Without payloads it is the bare envelope as ``text/xml``. Every ``cid:`` reference of the Manifest
    must name one of the attachments. ``soap``, when given, is the SOAP part to write for ``envelope``
    (e.g. its serialisation signed, :mod:`msh.security`).
    """
    _check_manifest(envelope, attachments)
    if soap is None:
        soap = serialise_envelope(envelope)
    if multipart is None:
        multipart = bool(attachments)
    if not multipart:
        if attachments:
            raise ValueError("a message with attachments must be multipart")
        out.write(soap)
        return 'text/xml; charset="UTF-8"'
    return write_package(out, soap, attachments, boundary=boundary, start_id=start_id)


def build_message(
    envelope: Envelope,
    attachments: Sequence[AttachmentSpec] = (),
    *,
    start_id: str = "ebxml-envelope@msh",
    boundary: str | None = None,
    multipart: bool | None = None,
) -> tuple[str, bytes]:
    """In-memory :func:`write_message`: returns (Content-Type, body)."""
    buffer = io.BytesIO()
    content_type = write_message(
        buffer, envelope, attachments, start_id=start_id, boundary=boundary, multipart=multipart
    )
    return content_type, buffer.getvalue()
