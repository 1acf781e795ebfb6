"""Where, in the bytes of a SOAP envelope, are the elements an intermediary removes and the place where it
adds its own (ebMS2 §4.1.3, §10.1.1, §10.1.5).

:func:`locate_header` runs expat over the SOAP part's bytes: streaming, with namespace processing, never
resolving anything (a DTD is refused, so no entity can be declared, and no external entity is ever
loaded). It returns the byte ranges of the SOAP Header's children whose ``SOAP:actor`` is the next SOAP
node or the next MSH, and the offset of the Header's end tag. :func:`soap_encoding` says which character
encoding the bytes are in; :func:`check_insert` checks an element an intermediary wants to add.

Offsets are byte offsets into the document as received (``CurrentByteIndex``), whatever its encoding:
expat tokenises the raw bytes. An element's range runs from the ``<`` of its start tag to the ``>`` that
ends its end tag, or its empty-element tag; nothing around it (white space, comments) belongs to it.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, NoReturn
from xml.parsers import expat

from msh.ebms.namespaces import ACTOR_NEXT_MSH, SOAP_ACTOR_NEXT, SOAP_ENV
from msh.errors import EnvelopeError, ErrorCode
from msh.safexml import detect_encoding, text_encoding

__all__ = ["NEXT_ACTORS", "HeaderLayout", "Insert", "Span", "check_insert", "locate_header", "soap_encoding"]


# ebMS2 §4.1.3: the actors whose elements the signature's XPath transform leaves out, and the only ones an
# intermediary may remove or add (ebMS2 §10.1.5).
NEXT_ACTORS: Final = frozenset({ACTOR_NEXT_MSH, SOAP_ACTOR_NEXT})

_SEP: Final = " "  # expat's separator between a namespace URI and a local name
_ENVELOPE: Final = f"{SOAP_ENV}{_SEP}Envelope"
_HEADER: Final = f"{SOAP_ENV}{_SEP}Header"
_CHUNK: Final = 64 * 1024
# The encodings expat reads itself, by the names it knows them by; any other must be a single-byte
# encoding, which pyexpat maps through the Python codec.
_EXPAT_NAMES: Final = {
    "utf-8": "UTF-8",
    "utf-16-le": "UTF-16LE",
    "utf-16-be": "UTF-16BE",
    "ascii": "US-ASCII",
    "iso8859-1": "ISO-8859-1",
    "latin-1": "ISO-8859-1",
}


def _refuse(what: str) -> NoReturn:
    raise EnvelopeError(what, error_code=ErrorCode.OTHER_XML, location="/")


def _clark(name: str) -> str:
    """``{uri}local`` (or ``local``) from expat's ``uri local [prefix]``."""
    parts = name.split(_SEP)
    return f"{{{parts[0]}}}{parts[1]}" if len(parts) > 1 else parts[0]


def _actor(attributes: dict[str, str]) -> str | None:
    """The ``SOAP:actor`` attribute (SOAP 1.1 §4.2.2), with any prefix."""
    for name, value in attributes.items():
        parts = name.split(_SEP)
        if len(parts) > 1 and parts[0] == SOAP_ENV and parts[1] == "actor":
            return value
    return None


def soap_encoding(data: bytes, charset: str | None) -> str:
    """The Python codec the SOAP part's bytes are in: the byte order mark where there is one (XML 1.0
    Appendix F), else the MIME ``charset`` (RFC 3023 §3.1: it wins over the XML declaration), else what
    the XML declaration or the first bytes say, else UTF-8 (XML 1.0 §4.3.3).

    UTF-16 is returned with its byte order (``utf-16-le``/``utf-16-be``). Raises
    :class:`~msh.errors.EnvelopeError` for what cannot be forwarded: UTF-32, an unknown charset.
    """
    if data.startswith(codecs.BOM_UTF32_LE) or data.startswith(codecs.BOM_UTF32_BE):
        _refuse("the SOAP part is in UTF-32, which this MSH does not forward; send UTF-8")
    if data.startswith(codecs.BOM_UTF8):
        return "utf-8"
    if data.startswith(codecs.BOM_UTF16_LE):
        return "utf-16-le"
    if data.startswith(codecs.BOM_UTF16_BE):
        return "utf-16-be"
    codec: str | None
    if charset is not None:
        codec = text_encoding(charset.strip().strip('"'))
        if codec is None:
            shown = charset.encode("ascii", "backslashreplace").decode("ascii")[:80]
            _refuse(f"the SOAP part's charset {shown!r} is not a supported text encoding; send UTF-8")
    else:
        codec = detect_encoding(data)
    if codec == "utf-8-sig":
        return "utf-8"
    if codec == "utf-16":
        # XML 1.0 Appendix F: without a byte order mark, "<" tells the byte order.
        if data.startswith(b"<\x00"):
            return "utf-16-le"
        if data.startswith(b"\x00<"):
            return "utf-16-be"
        _refuse("the SOAP part is declared UTF-16 but has no byte order mark and does not start with '<'")
    if codec.startswith("utf-32"):
        _refuse("the SOAP part is in UTF-32, which this MSH does not forward; send UTF-8")
    return codec


@dataclass(frozen=True, slots=True)
class Span:
    """One element's bytes: ``data[start:end]``; ``name`` in Clark notation (``{uri}local``)."""

    start: int
    end: int
    name: str


@dataclass(frozen=True, slots=True)
class HeaderLayout:
    """What :func:`locate_header` found.

    ``targeted`` are the SOAP Header's children aimed at the next node or the next MSH, in document
    order; ``header_end`` is the offset of the ``<`` of the Header's end tag, None when the Header is an
    empty-element tag (``<SOAP:Header/>``: there is no end tag to add anything before).
    """

    targeted: tuple[Span, ...]
    header_end: int | None


class _Tags:
    """What an end event means in bytes: where an element's last tag ends (the encoding's ``>`` and ``/>``)."""

    __slots__ = ("_data", "_gt", "_slash_gt", "_unit")

    def __init__(self, data: bytes, encoding: str) -> None:
        self._data = data
        self._gt = ">".encode(encoding)
        self._slash_gt = "/>".encode(encoding)
        self._unit = len(self._gt)

    def end_of(self, end_event: int, right_after_start: bool) -> tuple[int, bool]:
        """(where the element ends, whether it was an empty-element tag), from the offset of its end event.

        expat reports the end of an empty-element tag at the offset just after ``/>``, and an end tag at
        its ``<``. An element with nothing between its start and its end event is an empty-element tag when
        ``/>`` comes just before that offset (a start tag never ends with ``/>``, XML 1.0 §3.1).
        """
        data = self._data
        if right_after_start and data[end_event - len(self._slash_gt) : end_event] == self._slash_gt:
            return end_event, True
        # XML 1.0 §3.1 ETag: '</' Name S? '>': the first '>' (on a character boundary) ends it.
        pos = end_event
        while True:
            found = data.find(self._gt, pos)
            if found < 0:  # cannot happen once expat accepted the end tag
                _refuse("an end tag has no '>'")
            if (found - end_event) % self._unit == 0:
                return found + self._unit, False
            pos = found + 1


def _parser(encoding: str, *, prefixes: bool) -> expat.XMLParserType:
    """A namespace-aware expat parser that refuses any DTD and resolves nothing."""
    parser = expat.ParserCreate(encoding=_EXPAT_NAMES.get(encoding, encoding), namespace_separator=_SEP)
    parser.buffer_text = False
    parser.specified_attributes = True
    parser.namespace_prefixes = prefixes
    # docs/design.md §7 / SOAP 1.1 §3: a SOAP message carries no DTD; without one no entity exists to expand.
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)

    def refuse_dtd(*_: object) -> None:
        _refuse("the XML declares a DTD or entities, which are refused")

    def refuse_external(*_: object) -> int:
        _refuse("the XML refers to an external entity, which is refused")

    parser.StartDoctypeDeclHandler = refuse_dtd
    parser.EntityDeclHandler = refuse_dtd
    parser.ExternalEntityRefHandler = refuse_external
    return parser


def _run(parser: expat.XMLParserType, data: bytes, what: str) -> None:
    try:
        for at in range(0, len(data), _CHUNK):
            parser.Parse(data[at : at + _CHUNK], False)
        parser.Parse(b"", True)
    except expat.ExpatError as exc:
        _refuse(f"{what} is not well-formed XML: {exc}")
    except (ValueError, LookupError) as exc:  # pyexpat: a multi-byte encoding it cannot map, an unknown one
        _refuse(f"{what} cannot be read in its encoding ({exc}); send UTF-8")


class _Locator:
    """The expat handlers of :func:`locate_header`: they keep the depth and the Header's children."""

    def __init__(self, data: bytes, encoding: str) -> None:
        self.parser = _parser(encoding, prefixes=False)
        self._tags = _Tags(data, encoding)
        self.depth = 0
        self.in_header = False
        self.header_seen = False
        self.header_end: int | None = None
        self.targeted: list[Span] = []
        self._right_after_start = False
        self._child: tuple[int, str, bool] | None = None  # (start, Clark name, targeted) of a Header child
        p = self.parser
        p.StartElementHandler = self._start
        p.EndElementHandler = self._end
        content: Callable[..., None] = self._content
        p.CharacterDataHandler = content
        p.CommentHandler = content
        p.ProcessingInstructionHandler = content
        p.StartCdataSectionHandler = content
        p.DefaultHandler = content

    def _content(self, *_: object) -> None:
        self._right_after_start = False

    def _start(self, name: str, attributes: dict[str, str]) -> None:
        at = self.parser.CurrentByteIndex
        self.depth += 1
        self._right_after_start = True
        if self.depth == 1 and name != _ENVELOPE:
            # SOAP 1.1 §4: the document element is the SOAP Envelope.
            _refuse(f"the root element is {_clark(name)}, not a SOAP 1.1 Envelope")
        if self.depth == 2 and name == _HEADER:
            # SOAP 1.1 §4.2: at most one Header, the Envelope's first child.
            if self.header_seen:
                _refuse("the SOAP Envelope has two Header elements")
            self.header_seen = self.in_header = True
        elif self.depth == 3 and self.in_header:
            # ebMS2 §10.1.5: only the Header's own children are taken off, with all they contain.
            self._child = (at, _clark(name), _actor(attributes) in NEXT_ACTORS)

    def _end(self, name: str) -> None:
        at = self.parser.CurrentByteIndex
        right_after_start, self._right_after_start = self._right_after_start, False
        if self.depth == 3 and self._child is not None:
            start, clark, targeted = self._child
            self._child = None
            if targeted:
                end, _ = self._tags.end_of(at, right_after_start)
                self.targeted.append(Span(start, end, clark))
        elif self.depth == 2 and self.in_header:
            self.in_header = False
            _, empty = self._tags.end_of(at, right_after_start)
            self.header_end = None if empty else at
        self.depth -= 1


def locate_header(data: bytes, encoding: str, *, what: str = "the SOAP envelope") -> HeaderLayout:
    """The SOAP Header's children aimed at the next node or the next MSH, and its end tag, in ``data``
    (the SOAP part's bytes, in ``encoding``, a codec from :func:`soap_encoding`).

    Raises :class:`~msh.errors.EnvelopeError` (OtherXml) when ``data`` is not well-formed, declares a
    DTD, is not a SOAP 1.1 Envelope, or has no SOAP Header.
    """
    locator = _Locator(data, encoding)
    _run(locator.parser, data, what)
    if not locator.header_seen:
        # ebMS2 §2.3.2 / §3.1: every ebXML message has a SOAP Header holding eb:MessageHeader.
        _refuse(f"{what} has no SOAP Header, which every ebXML message has (ebMS2 §3.1)")
    return HeaderLayout(tuple(locator.targeted), locator.header_end)


@dataclass(frozen=True, slots=True)
class Insert:
    """An element an intermediary adds to the SOAP Header: its text, Clark name and actor."""

    text: str
    name: str
    actor: str


class _NotAnInsert(Exception):
    """Raised by :class:`_InsertChecker` inside expat; :func:`check_insert` makes it a ValueError."""


class _InsertChecker:
    """The expat handlers of :func:`check_insert`."""

    def __init__(self, data: bytes) -> None:
        self.parser = _parser("utf-8", prefixes=True)
        self._tags = _Tags(data, "utf-8")
        self.depth = 0
        self.root: tuple[str, str | None] | None = None
        self.root_end = -1
        self._right_after_start = False
        self._defaults: list[bool] = []  # per open element: is a default namespace declared in the insert?
        self._pending_default = False
        p = self.parser
        p.StartElementHandler = self._start
        p.EndElementHandler = self._end
        p.StartNamespaceDeclHandler = self._namespace
        content: Callable[..., None] = self._content
        p.CharacterDataHandler = content
        p.CommentHandler = content
        p.ProcessingInstructionHandler = content
        p.StartCdataSectionHandler = content
        p.DefaultHandler = content

    def _namespace(self, prefix: str | None, _uri: str | None) -> None:
        if not prefix:
            self._pending_default = True

    def _content(self, *_: object) -> None:
        self._right_after_start = False
        if self.depth == 0:
            raise _NotAnInsert("an insert is one element and nothing else (no XML declaration, comment or space)")

    def _start(self, name: str, attributes: dict[str, str]) -> None:
        if self.depth == 0:
            if self.parser.CurrentByteIndex != 0 or self.root is not None:
                raise _NotAnInsert("an insert is one element and nothing else")
            self.root = (name, _actor(attributes))
        declared = self._pending_default or (bool(self._defaults) and self._defaults[-1])
        self._pending_default = False
        if _SEP not in name and not declared:
            # The received document's default namespace would apply to an unprefixed name: say xmlns="".
            raise _NotAnInsert(f"element {name} of an insert has no namespace of its own: declare it (xmlns)")
        self._defaults.append(declared)
        self.depth += 1
        self._right_after_start = True

    def _end(self, _name: str) -> None:
        right_after_start, self._right_after_start = self._right_after_start, False
        self.depth -= 1
        self._defaults.pop()
        if self.depth == 0:
            self.root_end, _ = self._tags.end_of(self.parser.CurrentByteIndex, right_after_start)


def check_insert(text: str) -> Insert:
    """Check an element an intermediary adds to the SOAP Header; ValueError when it may not.

    It must be one well-formed element and nothing else, declare every namespace it uses (the received
    document's prefixes are unknown), be namespace-qualified (SOAP 1.1 §4.2.1) and carry a ``SOAP:actor``
    of the next node or the next MSH (ebMS2 §10.1.5: an intermediary adds no other element).
    """
    if not isinstance(text, str):
        raise ValueError(f"an insert is XML text (str), not {type(text).__name__}")
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"an insert holds a character no XML document can: {exc}") from None
    checker = _InsertChecker(data)
    try:
        _run(checker.parser, data, "the insert")
    except EnvelopeError as exc:
        raise ValueError(f"an insert must be one well-formed XML element: {exc.description}") from None
    except _NotAnInsert as exc:
        raise ValueError(str(exc)) from None
    if checker.root is None or checker.root_end != len(data):
        raise ValueError("an insert is one element and nothing else")
    name, actor = checker.root
    # SOAP 1.1 §4.2.1: a header entry is namespace-qualified.
    if _SEP not in name:
        raise ValueError(f"the inserted element {name} is not namespace-qualified (SOAP 1.1 §4.2.1)")
    # ebMS2 §10.1.5: an intermediary adds only elements targeted at the next node or the next MSH.
    if actor not in NEXT_ACTORS:
        raise ValueError(
            f"the inserted element {_clark(name)} has SOAP:actor {actor!r}: an intermediary may add only elements "
            f"whose SOAP:actor is {ACTOR_NEXT_MSH} or {SOAP_ACTOR_NEXT} (ebMS2 §10.1.5)"
        )
    return Insert(text, _clark(name), actor)
