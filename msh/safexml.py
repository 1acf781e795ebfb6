"""Hardened XML parsing, in one place (DESIGN.md §7).

Every byte of XML the MSH reads from outside goes through :func:`parse_xml`: no DTD is loaded and a
document that declares one is refused outright (so no external entity is fetched and no entity is
expanded: XXE and "billion laughs" end in a clean error), nothing is fetched from the network, the input
size is bounded, and libxml2's own limits on depth (256) and on a single text node (10 MB) stay on.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from lxml import etree

from msh.errors import EnvelopeError, ErrorCode

__all__ = ["DEFAULT_LIMITS", "XmlLimits", "parse_xml"]


@dataclass(frozen=True, slots=True)
class XmlLimits:
    """Bounds on one XML document read from outside.

    ``max_bytes`` caps the document (the SOAP part of a message, an agreement); nesting depth is capped
    by libxml2 at 256 levels and cannot be raised here on purpose.
    """

    max_bytes: int = 16 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.max_bytes <= 0:
            raise ValueError(f"XmlLimits.max_bytes must be positive, got {self.max_bytes}")


DEFAULT_LIMITS = XmlLimits()

_local = threading.local()


def _parser() -> etree.XMLParser:
    # lxml parsers are not thread-safe: one per thread.
    parser: etree.XMLParser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = etree.XMLParser(
            resolve_entities=False,
            load_dtd=False,
            dtd_validation=False,
            no_network=True,
            huge_tree=False,
            remove_comments=False,
            collect_ids=False,
        )
        _local.parser = parser
    return parser


def parse_xml(data: bytes, *, what: str = "XML document", limits: XmlLimits = DEFAULT_LIMITS) -> etree._Element:
    """Parse ``data`` safely and return its root element.

    Raises :class:`~msh.errors.EnvelopeError` (errorCode ``OtherXml``) naming ``what`` when the input is
    too large, declares a DTD, or is not well-formed XML.
    """
    if len(data) > limits.max_bytes:
        raise EnvelopeError(
            f"{what} is {len(data)} bytes, over the limit of {limits.max_bytes} bytes",
            error_code=ErrorCode.OTHER_XML,
        )
    # A DOCTYPE is never legitimate in SOAP 1.1 (§3) nor needed by an ebXML document: refuse it before
    # libxml2 sees it, so no entity declaration is ever processed.
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise EnvelopeError(f"{what} declares a DTD or entities, which are refused", error_code=ErrorCode.OTHER_XML)
    try:
        root = etree.fromstring(data, _parser())
    except etree.XMLSyntaxError as exc:
        raise EnvelopeError(f"{what} is not well-formed XML: {exc}", error_code=ErrorCode.OTHER_XML) from exc
    except ValueError as exc:  # e.g. a str with an encoding declaration
        raise EnvelopeError(f"{what} cannot be parsed: {exc}", error_code=ErrorCode.OTHER_XML) from exc
    docinfo = root.getroottree().docinfo
    if getattr(docinfo, "doctype", "") or docinfo.internalDTD is not None:
        # Defence in depth for encodings the byte scan above cannot see (e.g. UTF-16).
        raise EnvelopeError(f"{what} declares a DTD, which is refused", error_code=ErrorCode.OTHER_XML)
    return root
