"""Reading an ebXML Message Package (:func:`parse_package`; ebMS2 §2.1, [SOAPAttach], RFC 2387, RFC 2046).

The :class:`~msh.ebms.mime.scanner.Scanner` finds the parts in the stream; each part's headers say how its
content is transfer-encoded (:mod:`msh.ebms.mime.transfer_encoding`) and its decoded content goes to a
:class:`~msh.ebms.mime.body.Sink`; the root part is checked as the SOAP part.

Strict and lenient mode
    In strict mode every deviation from the specifications raises :class:`~msh.errors.MimeProblemError`.
    In lenient mode the deviations real partners produce are accepted and reported as ``Warning`` issues
    in :attr:`MimePackage.warnings`:

    * no Content-Type for the package: the boundary is taken from the first ``--`` line of the body;
    * a multipart type other than ``related``: read like multipart/related;
    * the ``type`` parameter missing or not ``text/xml``: ignored;
    * ``start`` without angle brackets (``start=id@host``, as in ebMS2 §2.1.2's own example and as
      PHIN-MS and the NHS MHS send it): used as the Content-ID;
    * a boundary longer than 70 characters or with characters outside bchars: used (up to 256);
    * bare LF line endings (delimiters, part headers): accepted (one Warning per package);
    * a SOAP part typed ``application/soap+xml`` or ``application/xml``: accepted;
    * a non-header line where a part header was expected: taken as the start of the part body (as the
      Python ``email`` package, and so the NHS MHS, reads it);
    * characters outside the base64 alphabet: ignored (RFC 2045 §6.8); missing ``=`` padding: added;
    * 8-bit data in a part labelled ``7bit``: kept as is;
    * a closing delimiter without its trailing ``--`` at end of stream: taken as the closing delimiter (the
      last part's content is delimited, so complete).

    A SOAP part transfer-encoded as base64 or quoted-printable is *not* a deviation either: it is decoded in
    both modes, as every part is (ebMS2 §4.1.3 signs the envelope "before the encoding"; B.3.2 makes the
    encoding a MUST for 8-bit parts sent by mail, and the MSH's envelope is one line longer than SMTP's 998
    octets).

    A missing ``charset`` on the SOAP part is *not* a deviation (ebMS2 §2.1.3.1: the charset MAY be
    present; §2.1.3.2: it has no default, the XML declaration or UTF-8 then applies): strict mode accepts
    it silently and lenient mode reports it as a Warning, ``charset`` being ``None`` either way.

    A package that ends without its closing delimiter is refused in both modes: its last payload may be
    cut short, and nothing else in an ebXML message tells (an Acknowledgment would tell the sender that
    a possibly truncated payload arrived whole, and it would stop resending). Lenient mode accepts it, with
    a Warning, only when asked to (``allow_unterminated``, the MSH setting
    ``receiving.accept_unterminated_packages``): one test fixture of the NHS MHS ends that way.

    Errors in both modes: not multipart, no boundary, no part found (wrong boundary), ``start`` naming no
    part, duplicate Content-IDs, too many parts, part headers too long, an unknown
    Content-Transfer-Encoding, invalid base64, a SOAP part that is not XML, a package, SOAP part or
    preamble over its limit, a stream that ends inside part headers.

    Error locations are ``cid:<Content-ID>`` for a problem with one part (ebMS2 §4.2.3.2.5) and empty for
    a problem with the package as a whole.
"""

from __future__ import annotations

import io
from typing import BinaryIO, Final

from msh.ebms.mime.body import PartBody, Sink, Spooler
from msh.ebms.mime.headers import BOUNDARY_RE, PartInfo, decode_header, parse_content_type, strip_angle
from msh.ebms.mime.limits import CHUNK, DEFAULT_LIMITS, MimeLimits
from msh.ebms.mime.parts import MimePackage, MimePart
from msh.ebms.mime.report import Report, fail
from msh.ebms.mime.scanner import EOF, EOF_AFTER, NEXT, Scanner
from msh.ebms.mime.transfer_encoding import decoder_for

__all__ = ["parse_package"]


_LENIENT_BOUNDARY_MAX: Final = 256  # the longest boundary lenient mode uses (RFC 2046 §5.1.1 allows 70)


def _check_boundary(boundary: str, report: Report) -> bytes:
    if not boundary:
        fail("empty boundary parameter in the package Content-Type")
    # RFC 2046 §5.1.1: 1 to 70 characters from bchars.
    if not BOUNDARY_RE.fullmatch(boundary):
        if len(boundary) > _LENIENT_BOUNDARY_MAX or any(c in boundary for c in "\r\n\x00"):
            fail("unusable boundary parameter in the package Content-Type")
        report.deviation("boundary parameter not as RFC 2046 §5.1.1 allows (1-70 characters from bchars)")
    return boundary.encode("utf-8")


def parse_package(
    stream: BinaryIO | bytes | bytearray | memoryview,
    content_type: str | None,
    *,
    lenient: bool = False,
    limits: MimeLimits = DEFAULT_LIMITS,
    allow_unterminated: bool = False,
) -> MimePackage:
    """Read an ebXML Message Package from ``stream`` (a binary file-like object, or bytes).

    ``content_type`` is the package's Content-Type header (from HTTP); ``None`` only in lenient mode,
    where the boundary is taken from the first delimiter line. The root part is the one named by the
    ``start`` parameter, else the first (RFC 2387 §3.2). The stream is read up to the close delimiter;
    the epilogue is not read. See the module documentation for strict and lenient mode.

    ``allow_unterminated`` (lenient mode only) accepts a package that ends without its closing delimiter,
    with a Warning, the last part ending where the stream ends: for a partner known to send such packages,
    at the risk of taking a cut-short last payload for a whole one. Without it that is an error.

    Raises :class:`~msh.errors.MimeProblemError` (location ``cid:...`` for a part, empty for the
    package). The returned package owns temporary storage: close it when done.
    """
    return _parse_package(
        stream,
        content_type,
        lenient=lenient,
        limits=limits,
        chunk_size=CHUNK,
        allow_unterminated=allow_unterminated and lenient,
    )


def _parse_package(
    stream: BinaryIO | bytes | bytearray | memoryview,
    content_type: str | None,
    *,
    lenient: bool,
    limits: MimeLimits,
    chunk_size: int,
    allow_unterminated: bool = False,
) -> MimePackage:
    if isinstance(stream, bytes | bytearray | memoryview):
        stream = io.BytesIO(stream)
    report = Report(lenient)
    start_cid: str | None = None
    if content_type is None:
        report.deviation("no Content-Type for the package: the boundary is taken from its first line")
        scanner = Scanner(stream, b"", report, limits, chunk_size)
        boundary = _check_boundary(decode_header(scanner.sniff_boundary()), report)
        scanner.set_boundary(boundary)
    else:
        media, params = parse_content_type(content_type)
        # ebMS2 §2.1: the Message Package is a multipart/related MIME body ([SOAPAttach], RFC 2387).
        if not media.startswith("multipart/"):
            fail(f"the package Content-Type is {media or 'empty'!r}, not multipart/related")
        if media != "multipart/related":
            report.deviation(f"the package Content-Type is {media!r}, not multipart/related")
        # RFC 2046 §5.1.1: the boundary parameter is required.
        if "boundary" not in params:
            fail("no boundary parameter in the package Content-Type")
        boundary = _check_boundary(params["boundary"], report)
        # ebMS2 §2.1.2: the type parameter is the SOAP part's media type, "text/xml".
        type_param = params.get("type")
        if type_param is None:
            report.deviation("no type parameter in the package Content-Type (ebMS2 §2.1.2)")
        elif type_param.strip().lower() != "text/xml":
            report.deviation(f"the package type parameter is {type_param!r}, not text/xml (ebMS2 §2.1.2)")
        start = params.get("start")
        if start is not None:
            # RFC 2387 §3.2 / [SOAPAttach]: start is the root part's Content-ID, in its <...> form.
            start = start.strip()
            if not (start.startswith("<") and start.endswith(">")):
                report.deviation("the start parameter is not in <...> Content-ID form (RFC 2387 §3.2)")
            start_cid = strip_angle(start) or None
        scanner = Scanner(stream, boundary, report, limits, chunk_size)
    return _read_parts(scanner, boundary.decode("utf-8"), start_cid, report, limits, allow_unterminated)


def _read_parts(
    scanner: Scanner,
    boundary: str,
    start_cid: str | None,
    report: Report,
    limits: MimeLimits,
    allow_unterminated: bool = False,
) -> MimePackage:
    spooler = Spooler(limits)
    parts: list[MimePart] = []
    root_index: int | None = None
    seen_ids: set[str] = set()
    preamble = 0

    def skip(data: bytes) -> None:
        nonlocal preamble
        preamble += len(data)
        if preamble > limits.max_preamble_bytes:
            fail(f"no boundary delimiter '--{boundary}' in the first {limits.max_preamble_bytes} bytes")

    try:
        # RFC 2046 §5.1.1: the preamble before the first delimiter is ignored.
        if scanner.scan(skip) != NEXT:
            fail(f"no MIME part found with boundary {boundary!r}")
        while True:
            # Hardening: bound the number of parts (each costs memory and bookkeeping).
            if len(parts) >= limits.max_parts:
                fail(f"the package has more than {limits.max_parts} parts")
            headers = scanner.read_headers()
            info = PartInfo.of(headers)
            if info.content_id is not None:
                # RFC 2045 §7 / [SOAPAttach]: Content-IDs are unique, else references are ambiguous.
                if info.content_id in seen_ids:
                    fail(f"duplicate Content-ID <{info.content_id}>", info.location)
                seen_ids.add(info.content_id)
            # RFC 2387 §3.2: the root is the part named by start, else the first part.
            is_root = root_index is None and (info.content_id == start_cid if start_cid is not None else not parts)
            if is_root:
                _check_soap_part(info, report)
            decoder = decoder_for(info.transfer_encoding, report, info.location)
            sink = Sink(spooler, decoder, limits.max_soap_part_bytes if is_root else None, info.location)
            kind = scanner.scan(sink.take)
            if kind == EOF and allow_unterminated:
                report.deviation("the package ends without its closing delimiter (truncated)", info.location)
            elif kind == EOF:
                # RFC 2046 §5.1.1: the body ends with the close delimiter; without it the last part may be cut short.
                fail(
                    "the package ends without its closing delimiter (truncated): the last part may be incomplete; "
                    "the sender must send the whole package, ending with --boundary--",
                    info.location,
                )
            elif kind == EOF_AFTER:
                report.deviation("the closing delimiter lacks its trailing '--'", info.location)
            parts.append(_mime_part(info, tuple(headers), sink.finish()))
            if is_root:
                root_index = len(parts) - 1
            if kind != NEXT:
                break
        if root_index is None:
            fail(f"the start parameter names no part: no part has Content-ID <{start_cid}>")
        return MimePackage(
            start=parts[root_index],
            attachments=tuple(p for i, p in enumerate(parts) if i != root_index),
            warnings=tuple(report.issues.values()),
            boundary=boundary,
        )
    except BaseException:
        for part in parts:
            part.body.close()
        raise
    finally:
        spooler.spool.release()


def _check_soap_part(info: PartInfo, report: Report) -> None:
    media, location = info.media_type, info.location
    # ebMS2 §2.1.3.1 / SOAP 1.1: the Header Container's Content-Type is text/xml.
    if media != "text/xml":
        if media in ("application/soap+xml", "application/xml"):
            report.deviation(f"the SOAP part is {media}, not text/xml (ebMS2 §2.1.3.1)", location)
        else:
            fail(f"the SOAP part is {media or 'untyped'}, not text/xml (ebMS2 §2.1.3.1)", location)
    # ebMS2 §2.1.3.2: the charset MAY be given and has no default; a Warning only in lenient mode.
    if info.charset is None and report.lenient:
        report.deviation("no charset on the SOAP part: the XML declaration (or UTF-8) applies", location)
    # A base64 or quoted-printable SOAP part is by the book, not a deviation: ebMS2 §4.1.3 (the signature is made
    # "before the encoding" of "the SOAP Envelope or payload objects"), B.2.2 (over HTTP "not precluded"), B.3.2
    # (over SMTP, 8-bit parts MUST be encoded). It is decoded like any part (decoder_for, below).


def _mime_part(info: PartInfo, headers: tuple[tuple[str, str], ...], body: PartBody) -> MimePart:
    return MimePart(
        content_id=info.content_id,
        content_type=info.content_type,
        media_type=info.media_type,
        charset=info.charset,
        transfer_encoding=info.transfer_encoding,
        headers=headers,
        body=body,
    )
