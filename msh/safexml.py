"""Hardened XML parsing, in one place (docs/design.md §7).

Every byte of XML the MSH reads from outside goes through :func:`parse_xml`:

* the input size is bounded, and libxml2's own limits on depth (256) and on a single text node (10 MB)
  stay on;
* every node is counted, while the document is parsed: elements, comments and processing instructions,
  those of the prolog and the epilog (before and after the root element) included, at most
  ``XmlLimits.max_nodes`` in the whole document, so a document of tiny nodes (16 MB of ``<!---->`` is 2.4
  million nodes, some 300 MB in libxml2) is refused before it is built; the document's own children (the
  prolog, the root and the epilog) count against ``max_children`` like any element's;
* a document that declares a DTD or an entity is refused. The check runs on the document's *text*: its
  encoding is detected as XML 1.0 Appendix F says (byte order mark, the ``<?xml`` pattern in UTF-16 or
  UTF-32, then the declared ``encoding``) and the document is decoded before it is searched, so a
  ``<!DOCTYPE`` spelt in UTF-16, UTF-32 or any other encoding is found; an encoding this check cannot
  decode (EBCDIC, an unknown name, a codec that is not a text encoding) is refused rather than handed to
  libxml2 unchecked;
* libxml2 never opens a file or a URL, whatever it is asked for: the parser loads no DTD, resolves no
  entity, has network access off, and carries a resolver that refuses every external resource (an
  external DTD, an external parameter entity) before libxml2's own loader could open it.
"""

from __future__ import annotations

import codecs
import itertools
import re
import threading
from dataclasses import dataclass
from typing import AnyStr, Final

from lxml import etree

from msh.errors import EnvelopeError, ErrorCode

__all__ = [
    "DEFAULT_LIMITS",
    "XmlLimits",
    "check_size",
    "detect_encoding",
    "parse_xml",
    "text_encoding",
    "xml_safe",
]


@dataclass(frozen=True, slots=True)
class XmlLimits:
    """Bounds on one XML document read from outside.

    ``max_bytes`` caps the document (the SOAP part of a message, an agreement); ``max_nodes`` the
    elements, comments and processing instructions of the whole document, prolog and epilog included (text
    nodes lie between them, so they are bounded too), counted as the parser builds them: each costs libxml2
    a hundred bytes or more whatever its size in the input, so the byte limit alone lets a document of empty
    comments take twenty times its size in memory; ``max_namespace_declarations`` the ``xmlns``
    declarations in the whole document, ``max_attributes`` the attributes of any one element and
    ``max_children`` the child nodes of any one element, and of the document itself (the comments and
    processing instructions before and after the root, and the root): a real ebXML message or agreement has
    a few dozen of each (a Manifest names at most as many payloads as a package may hold, 256), while
    thousands make later steps cost the square of the document's size (serialising foreign elements with
    their in-scope namespaces, reading attributes by name, libxml2 working out the path of each schema error
    among its siblings). Nesting depth is capped by libxml2 at
    256 levels and cannot be raised here on purpose.
    """

    max_bytes: int = 16 * 1024 * 1024
    max_nodes: int = 65_536
    max_namespace_declarations: int = 256
    max_attributes: int = 256
    max_children: int = 256

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_nodes", "max_namespace_declarations", "max_attributes", "max_children"):
            if getattr(self, name) <= 0:
                raise ValueError(f"XmlLimits.{name} must be positive, got {getattr(self, name)}")


DEFAULT_LIMITS = XmlLimits()


class _ExternalResourceRefused(Exception):
    """Raised by :class:`_RefuseEverything` inside libxml2's resource loading."""


class _RefuseEverything(etree.Resolver):
    """A resolver that lets libxml2 load nothing: no file, no URL, no FIFO that would block forever."""

    def resolve(self, system_url: str, public_id: str, context: object = None) -> None:
        raise _ExternalResourceRefused(f"external resource {system_url or public_id!r} refused")


_local = threading.local()

# The hardened options of every parser here: no DTD, no entity, no network, libxml2's own size limits on.
_OPTIONS: Final = {
    "resolve_entities": False,
    "load_dtd": False,
    "dtd_validation": False,
    "no_network": True,
    "huge_tree": False,
    "remove_comments": False,
    "collect_ids": False,
}


def _parser() -> etree.XMLParser:
    # lxml parsers are not thread-safe: one per thread.
    parser: etree.XMLParser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = etree.XMLParser(**_OPTIONS)  # type: ignore[arg-type]
        parser.resolvers.add(_RefuseEverything())
        _local.parser = parser
    return parser


def _counting_parser() -> etree.XMLPullParser:
    """A parser with the same options that reports each node as it builds it (a new one each time: it is
    left half-way when a document is refused)."""
    parser = etree.XMLPullParser(events=_NODE_EVENTS, **_OPTIONS)  # type: ignore[arg-type]
    parser.resolvers.add(_RefuseEverything())
    return parser


# What a node of the document is to the counting parser: an element, a comment, a processing instruction,
# wherever it stands (in the prolog and the epilog too).
_NODE_EVENTS: Final = ("start", "comment", "pi")
# Fed to the counting parser at a time: at most this many bytes of nodes are built past the limit.
_FEED: Final = 64 * 1024


# XML 1.0 Appendix F.1: the first bytes of a document tell its encoding family.
_BOMS: Final = (
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
)
_PATTERNS: Final = (
    (b"\x00\x00\x00<", "utf-32-be"),
    (b"<\x00\x00\x00", "utf-32-le"),
    (b"\x00<\x00?", "utf-16-be"),
    (b"<\x00?\x00", "utf-16-le"),
)
_EBCDIC: Final = b"\x4c\x6f\xa7\x94"  # "<?xm" in EBCDIC
_DECLARED: Final = re.compile(rb"""^<\?xml[^>]*?\sencoding\s*=\s*(["'])([A-Za-z][A-Za-z0-9._-]*)\1""")
_DECLARATIONS: Final = ("<!DOCTYPE", "<!ENTITY")
_DECLARATION_BYTES: Final = tuple(d.encode("ascii") for d in _DECLARATIONS)
# Encodings in which ASCII text is the same bytes, so the byte search is the text search.
_ASCII_SUPERSETS: Final = frozenset({"utf-8", "ascii", "latin-1", "iso8859-1", "cp1252", "iso8859-15"})
# Codecs Python files under text encodings that are no character encoding of a document (XML 1.0 §4.3.3,
# RFC 2046 §4.1.2 charset): never legitimate in a message.
_NOT_TEXT: Final = frozenset(
    {"undefined", "punycode", "idna", "unicode-escape", "raw-unicode-escape", "charmap", "rot-13"}
)
_LABEL: Final = re.compile(r"[A-Za-z][A-Za-z0-9._:+-]{0,63}")
# Encodings in which every "<" of the text holds the byte 0x3C, so counting that byte bounds the markup
# (each element, comment and processing instruction starts with "<"; end tags count too, so it is an upper
# bound). In others (UTF-7 may spell "<" as "+ADw-", EBCDIC as 0x4C) the parser itself counts.
_LT_COUNTABLE: Final = _ASCII_SUPERSETS | {"utf-16-be", "utf-16-le", "utf-16", "utf-32-be", "utf-32-le", "utf-32"}


def text_encoding(label: str) -> str | None:
    """The Python codec name of the character encoding ``label`` names (an XML ``encoding`` or a MIME
    ``charset``), or None when it names none: unknown, not a text encoding (``base64``, ``rot13``),
    one of Python's pseudo-encodings (``undefined``, ``punycode``, ``unicode_escape``), or not even a
    well-formed name (control characters, NUL, over 64 characters)."""
    if not _LABEL.fullmatch(label):
        return None
    try:
        info = codecs.lookup(label)
    except LookupError:
        return None
    if info.name in _NOT_TEXT or not getattr(info, "_is_text_encoding", True):
        return None
    return info.name


def detect_encoding(data: bytes) -> str:
    """The encoding of an XML document's bytes (a Python codec name), per XML 1.0 Appendix F: a byte
    order mark, else the ``<?xml`` pattern of UTF-16 or UTF-32, else the ``encoding`` of an
    ASCII-compatible declaration, else UTF-8.

    Raises :class:`~msh.errors.EnvelopeError` (OtherXml) for EBCDIC, and for a declared encoding that
    is not a text encoding Python knows.
    """
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name
    for pattern, name in _PATTERNS:
        if data.startswith(pattern):
            return name
    if data.startswith(_EBCDIC):
        raise EnvelopeError(
            "the document is in an EBCDIC encoding, which is not supported; send UTF-8",
            error_code=ErrorCode.OTHER_XML,
            location="/",
        )
    declared = _DECLARED.match(data[:1024])
    if declared is None:
        return "utf-8"
    label = declared.group(2).decode("ascii")
    codec = text_encoding(label)
    if codec is None:
        raise EnvelopeError(
            f"the XML declaration names the encoding {label!r}, which is not a supported text encoding; send UTF-8",
            error_code=ErrorCode.OTHER_XML,
            location="/",
        )
    return codec


def _declares_dtd(data: bytes, encoding: str) -> bool:
    """Whether the document's text, in ``encoding``, holds a DTD or entity declaration (after
    :func:`_declares_dtd_in_bytes` found none byte for byte)."""
    if encoding in _ASCII_SUPERSETS:
        return False  # the byte search has seen the text as it is
    text = data.decode(encoding, errors="replace")
    return any(d in text for d in _DECLARATIONS)


def _declares_dtd_in_bytes(data: bytes) -> bool:
    """Whether the document's bytes spell a DTD or entity declaration in ASCII (found before the
    encoding is detected: such a document is refused as declaring a DTD, whatever its encoding)."""
    return any(d in data for d in _DECLARATION_BYTES)


def check_size(size: int, *, what: str = "XML document", limits: XmlLimits = DEFAULT_LIMITS) -> None:
    """Refuse a document of ``size`` bytes over ``limits.max_bytes`` as :func:`parse_xml` refuses it (an
    :class:`~msh.errors.EnvelopeError` naming ``what``), for a caller that knows the size before reading it."""
    if size > limits.max_bytes:
        raise EnvelopeError(
            f"{what} is {size} bytes, over the limit of {limits.max_bytes} bytes",
            error_code=ErrorCode.OTHER_XML,
        )


def parse_xml(data: bytes, *, what: str = "XML document", limits: XmlLimits = DEFAULT_LIMITS) -> etree._Element:
    """Parse ``data`` safely and return its root element.

    Raises :class:`~msh.errors.EnvelopeError` (errorCode ``OtherXml``) naming ``what`` when the input is
    too large, declares a DTD or entities (in any encoding), is in an encoding that cannot be checked, or
    is not well-formed XML. libxml2 opens no file and no URL in any case.
    """
    check_size(len(data), what=what, limits=limits)
    # A DOCTYPE is never legitimate in SOAP 1.1 (§3) nor needed by an ebXML document: refuse it, found in
    # the decoded text, before libxml2 sees it, so no entity declaration is ever processed. The encoding
    # is detected once here and used by every later step.
    spelt = _declares_dtd_in_bytes(data)
    encoding = "" if spelt else detect_encoding(data)
    if spelt or _declares_dtd(data, encoding):
        raise EnvelopeError(f"{what} declares a DTD or entities, which are refused", error_code=ErrorCode.OTHER_XML)
    small = False
    try:
        tags = data.count(b"<")
        if tags <= limits.max_nodes and encoding in _LT_COUNTABLE:
            root = etree.fromstring(data, _parser())  # fewer nodes than the limit can be there: no counting
            # Every child node and every node around the root begins with "<", every attribute has its "=",
            # every namespace declaration spells "xmlns" (in an ASCII superset, byte for byte): within all
            # three limits, no walk can find more.
            small = (
                encoding in _ASCII_SUPERSETS
                and tags <= limits.max_children
                and data.count(b"=") <= limits.max_attributes
                and data.count(b"xmlns") <= limits.max_namespace_declarations
            )
        else:
            root = _parse_counting(data, encoding, what, limits)
    except etree.XMLSyntaxError as exc:
        raise EnvelopeError(f"{what} is not well-formed XML: {exc}", error_code=ErrorCode.OTHER_XML) from exc
    except (ValueError, LookupError) as exc:  # e.g. a str with an encoding declaration, an unknown encoding
        raise EnvelopeError(f"{what} cannot be parsed: {exc}", error_code=ErrorCode.OTHER_XML) from exc
    docinfo = root.getroottree().docinfo
    if getattr(docinfo, "doctype", "") or docinfo.internalDTD is not None or docinfo.externalDTD is not None:
        # Defence in depth: a declaration the text search above did not see.
        raise EnvelopeError(f"{what} declares a DTD, which is refused", error_code=ErrorCode.OTHER_XML)
    if not small:
        _check_counts(root, what, limits)
    return root


def _too_many_nodes(what: str, limits: XmlLimits) -> EnvelopeError:
    return EnvelopeError(
        f"{what} has more than {limits.max_nodes} nodes (elements, comments and processing instructions, "
        "before and after the root element too); no ebXML document needs that many",
        error_code=ErrorCode.OTHER_XML,
        location="/",
    )


_XML_DECLARATION_TEXT: Final = re.compile(r"<\?xml[ \t\r\n][^>]*\?>")
_XML_DECLARATION_BYTES: Final = re.compile(rb"<\?xml[ \t\r\n][^>]*\?>")


def _check_around(data: bytes, encoding: str, what: str, limits: XmlLimits) -> None:
    """Count the comments and processing instructions before and after the root element from the text (in
    ``encoding``), before the counting parser sees them (it reports those outside the root in time that
    grows faster than their number): at most ``max_children - 1`` of them, beside the root."""
    limit = limits.max_children
    if encoding in _ASCII_SUPERSETS:  # the delimiters are the same bytes whatever the rest: no copy
        body = data.removeprefix(codecs.BOM_UTF8)
        declaration = _XML_DECLARATION_BYTES.match(body)
        start = declaration.end() if declaration is not None else 0
        tokens: tuple[bytes, ...] = (b"<!--", b"-->", b"<?", b"?>", b" \t\r\n")
        items = _count_prolog(body, start, tokens, limit)
        items += _count_epilog(body, tokens, limit - items)
    else:
        text = data.decode(encoding, errors="replace").removeprefix("\ufeff")
        found = _XML_DECLARATION_TEXT.match(text)
        start = found.end() if found is not None else 0
        words = ("<!--", "-->", "<?", "?>", " \t\r\n")
        items = _count_prolog(text, start, words, limit)
        items += _count_epilog(text, words, limit - items)
    if items >= limit:
        raise _too_many_around(what, limits)


def _count_epilog(text: AnyStr, tokens: tuple[AnyStr, ...], limit: int) -> int:
    """The comments and processing instructions at the end of ``text``, counted from its end up to
    ``limit`` (``tokens`` as for :func:`_count_prolog`)."""
    comment, comment_end, pi, pi_end, space = tokens
    position, items = len(text), 0
    while items < limit:
        while position > 0 and text[position - 1 : position] in space:
            position -= 1
        if text.endswith(comment_end, 0, position):
            start = text.rfind(comment, 0, position - 3)
        elif text.endswith(pi_end, 0, position):
            start = text.rfind(pi, 0, position - 2)
        else:
            break
        if start < 0:
            break
        position = start
        items += 1
    return items


def _count_prolog(text: AnyStr, position: int, tokens: tuple[AnyStr, ...], limit: int) -> int:
    """The comments and processing instructions from ``position`` up to the root element, counted up to
    ``limit`` (``tokens``: comment open and close, PI open and close, the white space characters)."""
    comment, comment_end, pi, pi_end, space = tokens
    items = 0
    while items < limit:
        while position < len(text) and text[position : position + 1] in space:
            position += 1
        if text.startswith(comment, position):
            end, close = text.find(comment_end, position + 4), 3
        elif text.startswith(pi, position):
            end, close = text.find(pi_end, position + 2), 2
        else:
            break
        if end < 0:
            break  # unterminated: the parser reports it
        position = end + close
        items += 1
    return items


def _too_many_around(what: str, limits: XmlLimits) -> EnvelopeError:
    return EnvelopeError(
        f"{what} has more than {limits.max_children - 1} comments and processing instructions around its root "
        f"element; a document holds at most {limits.max_children} nodes at its top level (max_children)",
        error_code=ErrorCode.OTHER_XML,
        location="/",
    )


def _parse_counting(data: bytes, encoding: str, what: str, limits: XmlLimits) -> etree._Element:
    """Parse ``data`` (in ``encoding``) a piece at a time, counting the nodes as libxml2 builds them, and
    stop as soon as there are more than ``limits.max_nodes``: the tree of a refused document is never built
    whole."""
    _check_around(data, encoding, what, limits)
    parser = _counting_parser()
    nodes = 0
    view = memoryview(data)
    for start in range(0, len(data), _FEED):
        parser.feed(bytes(view[start : start + _FEED]))
        nodes += len(list(parser.read_events()))  # counted in C, not an iteration per node in Python
        if nodes > limits.max_nodes:
            raise _too_many_nodes(what, limits)
    root: etree._Element = parser.close()
    nodes += len(list(parser.read_events()))
    if nodes > limits.max_nodes:
        raise _too_many_nodes(what, limits)
    return root


def _check_counts(root: etree._Element, what: str, limits: XmlLimits) -> None:
    """Refuse more namespace declarations, attributes or children than :class:`XmlLimits` allows (one
    linear pass); the document's children (prolog, root, epilog) are counted like an element's."""
    around = 1
    for _sibling in itertools.chain(root.itersiblings(preceding=True), root.itersiblings()):
        around += 1
        if around > limits.max_children:
            raise _too_many_around(what, limits)
    declarations = 0
    for event, item in etree.iterwalk(root, events=("start", "start-ns")):
        if event == "start-ns":
            declarations += 1
            if declarations > limits.max_namespace_declarations:
                raise EnvelopeError(
                    f"{what} declares more than {limits.max_namespace_declarations} namespaces; no ebXML document "
                    "needs that many",
                    error_code=ErrorCode.OTHER_XML,
                    location="/",
                )
        elif isinstance(item, etree._Element):
            if len(item.attrib) > limits.max_attributes:
                raise EnvelopeError(
                    f"{what}: element {etree.QName(item).localname} has {len(item.attrib)} attributes, more than "
                    f"the {limits.max_attributes} allowed",
                    error_code=ErrorCode.OTHER_XML,
                    location="/",
                )
            if len(item) > limits.max_children:
                raise EnvelopeError(
                    f"{what}: element {etree.QName(item).localname} has {len(item)} children, more than the "
                    f"{limits.max_children} allowed",
                    error_code=ErrorCode.OTHER_XML,
                    location="/",
                )


# XML 1.0 §2.2 Char: what a text node or an attribute value may hold.
_NOT_XML_CHAR: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _escape(match: re.Match[str]) -> str:
    return match.group(0).encode("unicode_escape", "backslashreplace").decode("ascii")


def xml_safe(text: str, *, limit: int = 1024) -> str:
    """``text`` made fit to be written into XML: every character XML 1.0 cannot hold (NUL, other C0
    controls, lone surrogates, U+FFFE/U+FFFF) as a ``\\xNN``/``\\uNNNN`` escape, and at most ``limit``
    characters (longer text ends in ``...``). For text copied from input into an error description, so
    that building the ErrorList or SOAP Fault that reports it can never fail."""
    if _NOT_XML_CHAR.search(text) is not None:
        text = _NOT_XML_CHAR.sub(_escape, text)
    if len(text) > limit:
        text = text[: max(limit - 3, 0)] + "..."
    return text
