"""The bytes an intermediary forwards (ebMS2 §10, §4.1.3; docs/design.md §5 invariant 5).

An intermediary stores a received message's HTTP body as it came and forwards it to the next MSH with
only the SOAP Header elements aimed at the next node changed: :func:`forward_message` copies the body,
taking out of the SOAP Header every child whose ``SOAP:actor`` is the next MSH
(``urn:oasis:names:tc:ebxml-msg:actor:nextMSH``) or the next SOAP node
(``http://schemas.xmlsoap.org/soap/actor/next``), and adding the intermediary's own such elements (an
AckRequested for the next hop, ebMS2 §10.1.1) just before the Header's end tag.

Nothing else changes by a single byte: not the white space around a removed element, not the rest of the
envelope, not the MIME framing, not a payload. That is what keeps the sender's signature valid: its XPath
transform leaves out exactly the elements aimed at next or nextMSH (ebMS2 §4.1.3), and intermediaries
"MUST NOT disturb white space ... outside those elements being added or removed" (ebMS2 §10.1.5).

The body may be large (payloads of hundreds of MB): it is read in chunks and only the SOAP part is held
in memory, within :attr:`~msh.ebms.mime.MimeLimits.max_soap_part_bytes`. Element offsets come from expat
(:mod:`msh.ebms.hop_offsets`), the MIME copy from :func:`~msh.ebms.mime.replace_root_part`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO, Final

from msh.ebms.hop_offsets import Insert, check_insert, locate_header, soap_encoding
from msh.ebms.mime import MimeLimits, PartInfo, parse_content_type, replace_root_part
from msh.ebms.mime.limits import CHUNK, DEFAULT_LIMITS
from msh.ebms.namespaces import ACTOR_NEXT_MSH, EB
from msh.errors import EnvelopeError, ErrorCode, MimeProblemError

__all__ = ["Forwarded", "forward_message"]


# ebMS2 §2.1.2: a message without payloads may be the bare SOAP envelope (the codec also reads these two).
_ENVELOPE_TYPES: Final = frozenset({"text/xml", "application/xml", "application/soap+xml"})
_ACK_REQUESTED: Final = f"{{{EB}}}AckRequested"


@dataclass(frozen=True, slots=True)
class Forwarded:
    """What :func:`forward_message` wrote.

    ``content_type`` is the Content-Type header value to send the forwarded body with (the received one:
    the boundary and ``start`` of a package do not change); ``removed`` names the removed elements in
    Clark notation (``{uri}local``), in document order, for the journal; ``soap_part`` is the forwarded
    SOAP envelope's bytes (before any Content-Transfer-Encoding of its MIME part).
    """

    content_type: str
    removed: tuple[str, ...]
    soap_part: bytes


def _checked(insert: Sequence[str]) -> tuple[Insert, ...]:
    if isinstance(insert, str | bytes):
        raise ValueError("insert is a sequence of elements: pass one element as a one-item tuple")
    inserts = tuple(check_insert(text) for text in insert)
    # ebMS2 §10.1.1: an intermediary MAY insert a single AckRequested with actor nextMSH, never two.
    if sum(1 for i in inserts if i.name == _ACK_REQUESTED and i.actor == ACTOR_NEXT_MSH) > 1:
        raise ValueError("there SHALL NOT be two AckRequested elements targeted at the next MSH (ebMS2 §10.1.1)")
    return inserts


def _rewrite(soap: bytes, charset: str | None, inserts: tuple[Insert, ...]) -> tuple[bytes, tuple[str, ...]]:
    """The SOAP envelope ``soap`` with the Header's next/nextMSH children cut out and ``inserts`` added
    before the Header's end tag, and the names of the elements cut out."""
    encoding = soap_encoding(soap, charset)
    layout = locate_header(soap, encoding)
    added: list[bytes] = []
    for item in inserts:
        try:
            added.append(item.text.encode(encoding))
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"the inserted {item.name} cannot be written in the document's encoding {encoding}: {exc.reason}; "
                "write such characters as character references"
            ) from None
    if added and layout.header_end is None:
        raise EnvelopeError(
            "the SOAP Header is empty (<Header/>): an ebXML message carries eb:MessageHeader there (ebMS2 §3.1)",
            error_code=ErrorCode.OTHER_XML,
            location="//Header",
        )
    # ebMS2 §10.1.5: exactly the removed elements' bytes go; the white space around them stays.
    pieces: list[bytes] = []
    at = 0
    for span in layout.targeted:
        pieces.append(soap[at : span.start])
        at = span.end
    if added:
        assert layout.header_end is not None
        # The added elements go right before the Header's end tag, with no white space of their own.
        pieces.append(soap[at : layout.header_end])
        pieces.extend(added)
        at = layout.header_end
    pieces.append(soap[at:])
    return b"".join(pieces), tuple(span.name for span in layout.targeted)


def _read_envelope(source: BinaryIO, limit: int) -> bytes:
    """A bare SOAP envelope, read in chunks, refused beyond ``limit`` bytes."""
    data = bytearray()
    while chunk := source.read(CHUNK):
        data += chunk
        if len(data) > limit:
            raise EnvelopeError(f"the SOAP envelope is over the limit of {limit} bytes", location="/")
    return bytes(data)


def forward_message(
    source: BinaryIO,
    content_type: str,
    sink: BinaryIO,
    *,
    insert: Sequence[str] = (),
    limits: MimeLimits = DEFAULT_LIMITS,
    allow_unterminated: bool = False,
) -> Forwarded:
    """Write to ``sink`` the body an intermediary forwards for the received body in ``source``.

    ``source`` is the HTTP body as received (seekable, read from its current position), ``content_type``
    its Content-Type header value: a ``multipart/related`` ebXML package, or a bare SOAP envelope
    (``text/xml``). Out of the SOAP Header go its children whose ``SOAP:actor`` is nextMSH or next; in go
    the elements of ``insert`` (each one complete XML element as text, declaring its own namespaces and
    itself aimed at nextMSH or next), in order, right before the Header's end tag, in the document's
    encoding. Everything else is copied byte for byte; the root part's Content-Length, where it has one,
    is updated; a base64 or quoted-printable SOAP part is decoded, rewritten and encoded again.

    ``limits`` bounds what is read (the SOAP part, part headers, parts); ``allow_unterminated`` forwards a
    package that ends without its close delimiter as it is (for a receiving side that accepts such
    packages, :func:`~msh.ebms.mime.parse_package`), instead of refusing it.

    Raises :class:`ValueError` for an ``insert`` that is not one such element (a programming error), and
    :class:`~msh.errors.EbmsError` subclasses for a body that cannot be forwarded: not XML, a DTD, no SOAP
    Header, a broken or truncated package, a SOAP part over the limit or in an encoding that cannot be
    read (:class:`~msh.errors.EnvelopeError` for the envelope, :class:`~msh.errors.MimeProblemError` for
    the package). After an error ``sink`` may hold part of a body: discard it.
    """
    inserts = _checked(insert)
    media, params = parse_content_type(content_type)
    removed: tuple[str, ...] = ()
    if media.startswith("multipart/"):
        forwarded = b""

        def rewrite(info: PartInfo, soap: bytes) -> bytes:
            nonlocal forwarded, removed
            forwarded, removed = _rewrite(soap, info.charset, inserts)
            return forwarded

        replace_root_part(source, content_type, sink, rewrite, limits=limits, allow_unterminated=allow_unterminated)
        return Forwarded(content_type, removed, forwarded)
    if media in _ENVELOPE_TYPES:
        # ebMS2 §2.1.2: the body is the SOAP envelope itself.
        soap = _read_envelope(source, limits.max_soap_part_bytes)
        forwarded, removed = _rewrite(soap, params.get("charset"), inserts)
        sink.write(forwarded)
        return Forwarded(content_type, removed, forwarded)
    raise MimeProblemError(
        f"Content-Type {media or 'empty'!r} is neither multipart/related nor text/xml (ebMS2 §2.1.2): "
        "not an ebXML message",
        location="/",
    )
