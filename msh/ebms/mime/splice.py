"""Replacing the root part's content of an ebXML Message Package as it streams through, every other byte kept
(:func:`replace_root_part`; ebMS2 §10.1.5, RFC 2046 §5.1.1, RFC 2387 §3.2).

An intermediary forwards the package it received with only the SOAP part changed: the preamble, every
delimiter, every other part's headers and content and the epilogue go out byte for byte; the root part's
headers too, except a Content-Length, set to the new length. The input is read twice at most and never
held: once up to the end of the root part (to find it and read its content), then again from the start,
copied in chunks, while a second scanner checks that the package ends with its close delimiter.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import BinaryIO, Final, cast

from msh.ebms.mime.headers import BOUNDARY_RE, PartInfo, parse_content_type, strip_angle
from msh.ebms.mime.limits import CHUNK, DEFAULT_LIMITS, MimeLimits
from msh.ebms.mime.report import Report, fail
from msh.ebms.mime.scanner import EOF, NEXT, Scanner
from msh.ebms.mime.transfer_encoding import decoder_for, encoder_for

__all__ = ["replace_root_part"]


_MAX_BOUNDARY: Final = 256  # as the lenient reader: RFC 2046 §5.1.1 says 70, real partners send longer ones
# RFC 2045 §3 / RFC 5322 §2.2: a Content-Length field of the part's headers, and its value.
_CONTENT_LENGTH: Final = re.compile(rb"^(content-length[ \t]*:[ \t]*)([^\r\n]*?)([ \t]*\r?\n)", re.I | re.M)
# RFC 2046 §5.1.1: what follows "--boundary" in a delimiter: "--", or transport padding and a line end.
_DELIMITER_TAIL: Final = re.compile(rb"--|[ \t]*(?:\r?\n|\Z)")


def _ignore(_: bytes) -> None:
    pass


class _Tee:
    """A reader of ``source`` that writes every byte it reads to ``sink`` (``read`` is all a
    :class:`~msh.ebms.mime.scanner.Scanner` calls)."""

    __slots__ = ("_sink", "_source")

    def __init__(self, source: BinaryIO, sink: BinaryIO) -> None:
        self._source = source
        self._sink = sink

    def read(self, size: int = -1) -> bytes:
        data = self._source.read(size)
        if data:
            self._sink.write(data)
        return data


def _copy(source: BinaryIO, sink: BinaryIO, size: int) -> None:
    """Copy ``size`` bytes from ``source`` to ``sink``, a chunk at a time."""
    while size > 0:
        data = source.read(min(size, CHUNK))
        if not data:
            fail("the package changed while it was forwarded (it is shorter the second time it is read)")
        sink.write(data)
        size -= len(data)


def _boundary(params: dict[str, str]) -> bytes:
    boundary = params.get("boundary")
    # RFC 2046 §5.1.1: the boundary parameter is required, 1 to 70 characters (longer ones tolerated).
    if not boundary:
        fail("no boundary parameter in the package Content-Type")
    if not BOUNDARY_RE.fullmatch(boundary) and (
        len(boundary) > _MAX_BOUNDARY or any(c in boundary for c in "\r\n\x00")
    ):
        fail("unusable boundary parameter in the package Content-Type")
    return boundary.encode("utf-8")


def _check_no_delimiter(content: bytes, dash: bytes, location: str) -> None:
    """RFC 2046 §5.1.1: the new content must not hold a delimiter (removing an element could join one)."""
    hits = [0] if content.startswith(dash) else []
    at = content.find(b"\n" + dash)
    while at >= 0:
        hits.append(at + 1)
        at = content.find(b"\n" + dash, at + 1)
    for hit in hits:
        if _DELIMITER_TAIL.match(content, hit + len(dash)):
            fail("the rewritten SOAP part would contain the package's boundary delimiter", location)


def replace_root_part(
    source: BinaryIO,
    content_type: str,
    sink: BinaryIO,
    rewrite: Callable[[PartInfo, bytes], bytes],
    *,
    limits: MimeLimits = DEFAULT_LIMITS,
    allow_unterminated: bool = False,
) -> None:
    """Copy the package in ``source`` (read from its current position) to ``sink`` with the root part's
    content replaced by ``rewrite(info, content)``.

    The root part is the one the ``start`` parameter of ``content_type`` names, else the first (RFC 2387
    §3.2). ``rewrite`` gets what the part's headers say and its content decoded from its
    Content-Transfer-Encoding (at most :attr:`MimeLimits.max_soap_part_bytes`) and returns the new
    content, which is encoded the same way. ``source`` must be seekable.

    Raises :class:`~msh.errors.MimeProblemError` for a package that cannot be forwarded whole (no
    boundary, ``start`` naming no part, part headers over the limit, a package that ends without its close
    delimiter unless ``allow_unterminated``), and whatever ``rewrite`` raises. On any error ``sink`` holds
    an incomplete package and must be discarded.
    """
    base = source.tell()
    media, params = parse_content_type(content_type)
    # ebMS2 §2.1: the Message Package is a multipart/related MIME body.
    if not media.startswith("multipart/"):
        fail(f"the package Content-Type is {media or 'empty'!r}, not multipart/related")
    boundary = _boundary(params)
    start = params.get("start")
    start_cid = (strip_angle(start) or None) if start is not None else None
    report = Report(lenient=True)  # forward what the receiving side accepted; real errors still fail()
    scanner = Scanner(source, boundary, report, limits, CHUNK)
    preamble = 0

    def skip(data: bytes) -> None:
        nonlocal preamble
        preamble += len(data)
        if preamble > limits.max_preamble_bytes:
            fail(f"no boundary delimiter in the first {limits.max_preamble_bytes} bytes of the package")

    # RFC 2046 §5.1.1: the preamble before the first delimiter.
    if scanner.scan(skip) != NEXT:
        fail("no MIME part found with the package's boundary")
    parts = 0
    while True:
        parts += 1
        if parts > limits.max_parts:
            fail(f"the package has more than {limits.max_parts} parts")
        headers_at = scanner.position
        info = PartInfo.of(scanner.read_headers())
        content_at = scanner.position
        # RFC 2387 §3.2: the root is the part named by start, else the first part.
        if (info.content_id == start_cid) if start_cid is not None else parts == 1:
            break
        kind = scanner.scan(_ignore)
        if kind == EOF:
            fail("the package ends without its closing delimiter (truncated)", info.location)
        if kind != NEXT:
            fail(f"the start parameter names no part: no part has Content-ID <{start_cid}>")

    location = info.location
    decoder = decoder_for(info.transfer_encoding, report, location)
    decoded = bytearray()
    raw_size = 0

    def collect(data: bytes) -> None:
        nonlocal raw_size
        raw_size += len(data)
        decoded.extend(decoder.feed(data))
        if len(decoded) > limits.max_soap_part_bytes:
            fail(f"the SOAP part is larger than {limits.max_soap_part_bytes} bytes", location)

    after_root = scanner.scan(collect)
    decoded.extend(decoder.finish())
    if len(decoded) > limits.max_soap_part_bytes:
        fail(f"the SOAP part is larger than {limits.max_soap_part_bytes} bytes", location)
    if after_root == EOF and not allow_unterminated:
        fail("the package ends inside its SOAP part, without a closing delimiter (truncated)", location)
    content_end = content_at + raw_size

    # RFC 2045 §6: the new content is transfer-encoded as the old one was (identity for 7bit, 8bit, binary).
    new = rewrite(info, bytes(decoded))
    del decoded[:]
    if info.transfer_encoding in ("base64", "quoted-printable"):
        encoder = encoder_for(info.transfer_encoding, info.content_id or "start")
        new = encoder.feed(new) + encoder.finish()
    _check_no_delimiter(new, b"--" + boundary, location)

    source.seek(base)
    _copy(source, sink, headers_at)
    headers = source.read(content_at - headers_at)
    if len(headers) != content_at - headers_at:
        fail("the package changed while it was forwarded (it is shorter the second time it is read)")
    # RFC 2045 / RFC 2616 §14.13: a Content-Length on the part counts its (encoded) content.
    sink.write(_CONTENT_LENGTH.sub(lambda m: m.group(1) + str(len(new)).encode("ascii") + m.group(3), headers))
    sink.write(new)
    source.seek(base + content_end)
    tee = _Tee(source, sink)
    if after_root != EOF:
        # The rest goes out as it is, checked on the way by a second scanner (RFC 2046 §5.1.1).
        rest = Scanner(cast(BinaryIO, tee), boundary, report, limits, CHUNK)
        kind = rest.scan(_ignore)
        while kind == NEXT:
            parts += 1
            if parts > limits.max_parts:
                fail(f"the package has more than {limits.max_parts} parts")
            rest.read_headers()
            kind = rest.scan(_ignore)
        if kind == EOF and not allow_unterminated:
            fail("the package ends without its closing delimiter (truncated): the last part may be incomplete")
    # RFC 2046 §5.1.1: the epilogue (and an unterminated end) goes out too, as received.
    while tee.read(CHUNK):
        pass
