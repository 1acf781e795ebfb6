"""Writing an ebXML Message Package (:func:`write_package`, :func:`build_package`; ebMS2 §2.1, RFC 2046).

The package is streamed to a binary output; attachment bodies are copied from their
:class:`~msh.ebms.mime.PartBody` in chunks (encoded on the fly) and never loaded whole.
"""

from __future__ import annotations

import io
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO

from msh.ebms.mime.body import PartBody
from msh.ebms.mime.headers import BOUNDARY_RE, FIELD_NAME_RE, TOKEN_RE, strip_angle
from msh.ebms.mime.limits import CHUNK
from msh.ebms.mime.transfer_encoding import ENCODINGS, Coding, encoder_for

__all__ = ["AttachmentSpec", "build_package", "write_package"]


@dataclass(frozen=True)
class AttachmentSpec:
    """A payload part to write: Content-ID (with or without ``<>``), Content-Type, content and encoding.

    ``transfer_encoding`` is one of ``binary`` (default), ``8bit``, ``7bit`` (the content must be
    US-ASCII without NUL), ``base64`` and ``quoted-printable``. ``headers`` are extra part headers
    (for instance Content-Description), written after the standard ones.
    """

    content_id: str
    content_type: str
    body: PartBody
    transfer_encoding: str = "binary"
    headers: tuple[tuple[str, str], ...] = ()


def _new_boundary() -> str:
    # "=_" cannot occur in base64 or quoted-printable text; 128 random bits make a collision with
    # binary content negligible (RFC 2046 §5.1.1: the boundary must not occur in the content).
    return "=_MSH_" + secrets.token_hex(16)


def _check_header_text(what: str, value: str) -> None:
    if any(c in value for c in "\r\n\x00"):
        raise ValueError(f"{what} contains a line break or NUL: {value!r}")


def _clean_cid(what: str, value: str) -> str:
    cid = strip_angle(value)
    _check_header_text(what, cid)
    # RFC 2045 §7 / RFC 5322 §3.6.4: a Content-ID is a msg-id, <id-left@id-right>, without < > or spaces.
    if not cid or any(c in cid for c in "<> \t"):
        raise ValueError(f"{what} is not a usable Content-ID: {value!r}")
    return cid


def write_package(
    out: BinaryIO,
    soap: bytes,
    attachments: Sequence[AttachmentSpec],
    *,
    boundary: str | None = None,
    start_id: str,
    soap_charset: str = "UTF-8",
) -> str:
    """Stream an ebXML Message Package to ``out``; return the Content-Type header value to send.

    The SOAP envelope ``soap`` is the root part, Content-ID ``start_id``; the attachments follow in
    order, their bodies copied in chunks (never loaded whole) and encoded as asked. Without a
    ``boundary`` a random one is made; a given boundary must be valid (RFC 2046 §5.1.1) and must not
    occur in the SOAP part. Content that contains the boundary, 8-bit content for a 7bit part and
    malformed arguments raise :class:`ValueError` (``out`` is then incomplete and must be discarded).
    """
    start_cid = _clean_cid("start_id", start_id)
    if not TOKEN_RE.fullmatch(soap_charset):
        raise ValueError(f"soap_charset is not a charset name: {soap_charset!r}")
    specs: list[tuple[str, AttachmentSpec, str]] = []
    seen = {start_cid}
    for spec in attachments:
        cid = _clean_cid("attachment content_id", spec.content_id)
        if cid in seen:
            raise ValueError(f"duplicate Content-ID <{cid}>")
        seen.add(cid)
        _check_header_text(f"attachment <{cid}> content_type", spec.content_type)
        encoding = spec.transfer_encoding.strip().lower()
        if encoding not in ENCODINGS:
            raise ValueError(f"attachment <{cid}>: unsupported transfer encoding {spec.transfer_encoding!r}")
        for name, value in spec.headers:
            if not FIELD_NAME_RE.fullmatch(name.encode("utf-8", "replace")):
                raise ValueError(f"attachment <{cid}>: bad header name {name!r}")
            if name.lower() in ("content-id", "content-type", "content-transfer-encoding"):
                raise ValueError(f"attachment <{cid}>: header {name} is set from the AttachmentSpec fields")
            _check_header_text(f"attachment <{cid}> header {name}", value)
        specs.append((cid, spec, encoding))
    if boundary is None:
        boundary = _new_boundary()
        while (b"--" + boundary.encode("ascii")) in soap:
            boundary = _new_boundary()
    elif not BOUNDARY_RE.fullmatch(boundary):
        raise ValueError(f"boundary is not valid per RFC 2046 §5.1.1: {boundary!r}")
    dash = b"--" + boundary.encode("ascii")
    # RFC 2046 §5.1.1: the boundary must not occur in the content.
    if dash in soap:
        raise ValueError("the boundary occurs in the SOAP part")

    # RFC 2046 §5.1.1: each part opens with "--boundary" CRLF, headers, CRLF, content; CRLF before the
    # next delimiter belongs to the delimiter.
    out.write(
        dash + b"\r\n"
        b"Content-ID: <" + start_cid.encode("utf-8") + b">\r\n"
        b'Content-Type: text/xml; charset="' + soap_charset.encode("ascii") + b'"\r\n'
        b"Content-Transfer-Encoding: binary\r\n\r\n"
    )
    out.write(soap)
    for cid, spec, encoding in specs:
        head = [
            b"\r\n" + dash + b"\r\n",
            b"Content-ID: <" + cid.encode("utf-8") + b">\r\n",
            b"Content-Type: " + spec.content_type.strip().encode("utf-8") + b"\r\n",
            b"Content-Transfer-Encoding: " + encoding.encode("ascii") + b"\r\n",
        ]
        head.extend(f"{name}: {value}\r\n".encode() for name, value in spec.headers)
        head.append(b"\r\n")
        out.write(b"".join(head))
        # base64 text cannot contain "--", so only the other encodings are searched for the boundary.
        guard = None if encoding == "base64" else dash
        _copy_encoded(out, spec.body, encoder_for(encoding, cid), guard, cid)
    # RFC 2046 §5.1.1: the close delimiter.
    out.write(b"\r\n" + dash + b"--\r\n")
    return f'multipart/related; type="text/xml"; boundary="{boundary}"; start="<{start_cid}>"'


def _copy_encoded(out: BinaryIO, body: PartBody, encoder: Coding, dash: bytes | None, cid: str) -> None:
    tail = b""
    span = len(dash) - 1 if dash else 0

    def emit(data: bytes) -> None:
        nonlocal tail
        if not data:
            return
        if dash is not None:
            if dash in data or dash in tail + data[:span]:
                raise ValueError(f"attachment <{cid}>: the boundary occurs in the content")
            tail = (tail + data)[-span:] if len(data) < span else data[-span:]
        out.write(data)

    with body.open() as reader:
        while chunk := reader.read(CHUNK):
            emit(encoder.feed(chunk))
    emit(encoder.finish())


def build_package(
    soap: bytes,
    attachments: Sequence[AttachmentSpec] = (),
    *,
    boundary: str | None = None,
    start_id: str,
    soap_charset: str = "UTF-8",
) -> tuple[str, bytes]:
    """:func:`write_package` into memory: (Content-Type header value, package bytes)."""
    out = io.BytesIO()
    content_type = write_package(
        out, soap, attachments, boundary=boundary, start_id=start_id, soap_charset=soap_charset
    )
    return content_type, out.getvalue()
