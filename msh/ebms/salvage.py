"""What can still be read of a message that parsing refused.

:func:`salvage_message_file` reads a message file again, as a stream, step by step, going on past what
:func:`~msh.ebms.message.read_message_file` refuses wherever it can: the file's headers, the MIME package
(else the raw bytes searched for a SOAP envelope), the SOAP envelope's XML, the ebXML header (whole, else
field by field: :func:`~msh.ebms.envelope.salvage_envelope`), and the payload parts. It says how far each
step got, for a person diagnosing the message (``msh message inspect``).

:func:`salvage_reply_address` is what the receiving MSH can still read of a refused body to address its
ErrorList to the sender (ebMS2 §4.2.4.2): the same search for the envelope, then
:func:`~msh.ebms.envelope.read_reply_address`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from lxml import etree

from msh.ebms.envelope import SalvagedEnvelope, read_envelope, read_reply_address, salvage_envelope
from msh.ebms.envelope.names import ENVELOPE
from msh.ebms.message import FileForm, MessageStream, decode_soap_part, split_message_stream
from msh.ebms.mime import MimeLimits, parse_content_type, parse_package
from msh.ebms.mime.limits import CHUNK
from msh.ebms.model import Envelope, ReplyAddress
from msh.errors import EbmsError
from msh.safexml import XmlLimits, check_size, parse_xml

__all__ = ["PayloadPart", "Salvage", "find_envelope", "salvage_message_file", "salvage_reply_address"]

# A SOAP Envelope start and end tag, any prefix, searched for in the first MiB of a body.
_ENVELOPE_START = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?Envelope[\s>]")
_ENVELOPE_END = re.compile(rb"</(?:[A-Za-z_][\w.-]*:)?Envelope\s*>")
_SEARCHED = 1 << 20
# What find_envelope may look at: a start tag in the first MiB, its end tag within a MiB of it.
_SEARCH_READ = 2 * _SEARCHED
# A SOAP envelope is read within the size limit of a package's SOAP part.
_SOAP_LIMITS = XmlLimits(max_bytes=MimeLimits().max_soap_part_bytes)


@dataclass(frozen=True, slots=True)
class PayloadPart:
    """A payload part of the MIME package: its Content-ID (without brackets), Content-Type and size."""

    content_id: str | None
    content_type: str
    size: int


@dataclass(frozen=True, slots=True)
class Salvage:
    """What :func:`salvage_message_file` read.

    ``steps``: how far reading got, one sentence per step, the last one saying where it stopped when it
    did; ``content_type`` the message's (from its headers, else as sniffed); ``envelope`` the whole envelope
    when the lenient reader takes it (the message was refused for something else, e.g. a Manifest
    reference to a missing part), else ``salvaged`` what could be read of it (None: no envelope could be
    parsed); ``payloads`` the payload parts when the MIME package could be read.
    """

    steps: tuple[str, ...]
    content_type: str | None = None
    envelope: Envelope | None = None
    salvaged: SalvagedEnvelope | None = None
    payloads: tuple[PayloadPart, ...] = ()


def find_envelope(body: bytes) -> bytes | None:
    """The bytes from the first SOAP ``Envelope`` start tag to the end tag after it, any prefix, within the
    first MiB of ``body``; None when there is none."""
    start = _ENVELOPE_START.search(body, 0, _SEARCHED)
    if start is None:
        return None
    end = _ENVELOPE_END.search(body, start.start(), start.start() + _SEARCHED)
    return body[start.start() : end.end()] if end is not None else None


def salvage_reply_address(body: bytes) -> ReplyAddress | None:
    """Who to answer about a message that failed to parse, if its envelope can still be found and its
    MessageHeader's addressing read (to address the ErrorList to its sender, ebMS2 §4.2.4.2)."""
    found = find_envelope(body)
    if found is None:
        return None
    try:
        return read_reply_address(parse_xml(found, what="SOAP envelope"))
    except (EbmsError, ValueError):
        return None


def salvage_message_file(path: str | Path) -> Salvage:
    """Read the message file ``path`` as far as it can be read (see the module docs); never raises
    :class:`~msh.errors.EbmsError` (an unreadable file raises :class:`OSError`).

    The file is read as a stream, as :func:`~msh.ebms.message.read_message_file` reads it: its header block
    from its first MiB, the body a piece at a time into the package reader (payloads spooled to a temporary
    file, only their sizes kept), a chunked body de-chunked into a spooled file, and at most the body's
    first MiBs searched for an envelope; so a capture of any size is never held whole in memory.
    """
    with open(path, "rb") as file:
        return _salvage(file)


def _salvage(file: BinaryIO) -> Salvage:
    steps: list[str] = []
    try:
        split = split_message_stream(file)
    except EbmsError as exc:
        steps.append(f"headers: {exc.description}; the whole file was searched for a SOAP envelope")
        file.seek(0)
        return _from_raw(file, file.read(_SEARCH_READ), steps, None)
    with split:
        steps.append(_describe(split))
        content_type = split.content_type
        media = parse_content_type(content_type)[0] if content_type is not None else _sniffed(split.rewind().read(64))
        if media.startswith("multipart/"):
            return _from_package(file, split, steps)
        if media in ("text/xml", "application/xml", "application/soap+xml"):
            return _from_bare(file, split, steps, content_type or "text/xml")
        shown = f"Content-Type {media}" if content_type is not None else "the content"
        steps.append(f"body: {shown} is neither a MIME package nor a SOAP envelope; its bytes were searched for one")
        return _from_raw(file, split.rewind().read(_SEARCH_READ), steps, content_type)


def _describe(file: MessageStream) -> str:
    if file.form is FileForm.BARE_ENVELOPE:
        return "file: a bare SOAP envelope, without headers"
    if file.form is FileForm.NO_HEADERS:
        return "file: a body without headers (its content type is sniffed)"
    chunked = "; the body is de-chunked" if "chunked" in file.headers.get("transfer-encoding", "").lower() else ""
    type_ = f"Content-Type {file.content_type}" if file.content_type is not None else "no Content-Type"
    if file.form is FileForm.HEADERS:
        return f"file: {_count(len(file.headers), 'header line')} without a request line, {type_}{chunked}"
    return f"file: {file.form.value} with {_count(len(file.headers), 'header')}, {type_}{chunked}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _sniffed(head: bytes) -> str:
    head = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return "text/xml" if head.startswith(b"<") else "multipart/related" if head.startswith(b"--") else "unknown"


def _from_package(file: BinaryIO, split: MessageStream, steps: list[str]) -> Salvage:
    try:
        # Lenient, and a package without its closing delimiter is read to its end: as much as there is.
        package = parse_package(split.rewind(), split.content_type, lenient=True, allow_unterminated=True)
    except EbmsError as exc:
        where = f" at {exc.location}" if exc.location else ""
        steps.append(
            f"MIME package: cannot be read{where} ({exc.description}); its bytes were searched for a SOAP envelope"
        )
        return _from_raw(file, split.rewind().read(_SEARCH_READ), steps, split.content_type)
    with package:
        payloads = tuple(PayloadPart(p.content_id, p.content_type, p.body.size) for p in package.attachments)
        soap = package.start.body.read_bytes()
        charset = package.start.charset
        start = package.start.content_id
    soap_part = f"<{start}>" if start is not None else "(without Content-ID)"
    steps.append(
        f"MIME package: {_count(len(payloads) + 1, 'part')}, the SOAP part {soap_part} and "
        f"{_count(len(payloads), 'payload')}"
    )
    try:
        soap = decode_soap_part(soap, charset)
    except EbmsError as exc:
        steps.append(f"SOAP part: {exc.description}; its bytes were read as they are")
    content_type = split.content_type or f'multipart/related; boundary="{package.boundary}"'
    return _from_soap(file, soap, steps, content_type, payloads)


def _from_bare(file: BinaryIO, split: MessageStream, steps: list[str], content_type: str) -> Salvage:
    """A body that is the SOAP envelope itself: read whole, unless over the size the XML reader takes."""
    body = split.rewind()
    try:
        check_size(body.seek(0, os.SEEK_END) - split.start, what="SOAP envelope", limits=_SOAP_LIMITS)
    except EbmsError as exc:
        steps.append(exc.description)
        return Salvage(tuple(steps), content_type)
    return _from_soap(file, split.rewind().read(), steps, content_type)


def _from_raw(file: BinaryIO, head: bytes, steps: list[str], content_type: str | None) -> Salvage:
    """``head``: the first bytes of the body, as many as :func:`find_envelope` searches."""
    found = find_envelope(head)
    if found is None:
        steps.append("no SOAP envelope found: nothing more can be read")
        return Salvage(tuple(steps), content_type)
    steps.append("a SOAP envelope was found in the bytes and read from there")
    return _from_soap(file, found, steps, content_type)


def _from_soap(
    file: BinaryIO, soap: bytes, steps: list[str], content_type: str | None, payloads: tuple[PayloadPart, ...] = ()
) -> Salvage:
    def stop(step: str, salvaged: SalvagedEnvelope | None = None, envelope: Envelope | None = None) -> Salvage:
        steps.append(step)
        return Salvage(tuple(steps), content_type, envelope, salvaged, payloads)

    try:
        root = parse_xml(soap, what="SOAP envelope", limits=_SOAP_LIMITS)
    except EbmsError as exc:
        return stop(_xml_problem(exc, file, soap))
    if root.tag != ENVELOPE:
        # SOAP 1.1 §4.1: the root is SOAP-ENV:Envelope in the SOAP 1.1 namespace.
        return stop(f"SOAP envelope: the root element is {root.tag}, not a SOAP 1.1 Envelope")
    try:
        envelope, _ = read_envelope(root, lenient=True)
    except (EbmsError, ValueError) as exc:
        problem = exc.description if isinstance(exc, EbmsError) else str(exc)
        where = f" at {exc.location}" if isinstance(exc, EbmsError) and exc.location else ""
        return stop(
            f"ebXML header: refused{where} ({problem}); what follows was read field by field, as written",
            salvaged=salvage_envelope(root),
        )
    return stop("ebXML elements: all read", envelope=envelope)


def _xml_problem(exc: EbmsError, file: BinaryIO, soap: bytes) -> str:
    """The step that says why the SOAP envelope is not XML: where, for a syntax error (of the SOAP part,
    and of the file when the SOAP part is in it as it is)."""
    cause = exc.__cause__
    if not isinstance(cause, etree.XMLSyntaxError) or cause.position is None:
        return exc.description
    line, column = cause.position
    offset, newlines = _find_in(file, soap) if soap else (-1, 0)
    in_file = f" (line {newlines + line} of the file)" if offset > 0 else ""
    message = re.sub(r", line \d+, column \d+$", "", str(cause.msg or "").strip())
    return f"SOAP envelope: not well-formed XML at line {line}, column {column}{in_file}: {message}"


def _find_in(file: BinaryIO, needle: bytes) -> tuple[int, int]:
    """Where ``needle`` first occurs in ``file`` and how many line feeds come before it, (-1, 0) when it does
    not; the file is read a piece at a time, holding at most about twice the needle or ``CHUNK`` bytes."""
    file.seek(0)
    window, start, newlines = b"", 0, 0  # window: the file's bytes from start; newlines: those before start
    while piece := file.read(max(CHUNK, len(needle))):
        window += piece
        found = window.find(needle)
        if found >= 0:
            return start + found, newlines + window.count(b"\n", 0, found)
        # A match still to come can only begin in the window's last len(needle) - 1 bytes.
        dropped = max(len(window) - len(needle) + 1, 0)
        newlines += window.count(b"\n", 0, dropped)
        start += dropped
        window = window[dropped:]
    return -1, 0
