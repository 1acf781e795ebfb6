"""The reader's shared part: one pass over one envelope and the rules every ebXML element follows.

:class:`ElementReader` carries the mode (strict or lenient) and the lenient-mode Warnings through a pass,
and reads what all elements have in common: eb: attributes, SOAP mustUnderstand (SOAP 1.1 §4.2.3),
eb:version (ebMS2 §2.3.8), Descriptions, From and To parties, foreign extensions (what the schema's
``##other`` wildcards let in), and xsd:boolean and severity values. Foreign elements are kept as exclusive
canonical text, at most :data:`MAX_FOREIGN_ELEMENTS` per message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict

from lxml import etree

from msh.ebms.envelope.names import ACTOR, EB_ID, EB_VERSION, ENVELOPE, MUST_UNDERSTAND, XML_LANG, eb
from msh.ebms.model import NO_EXTENSIONS, Description, Extensions, Party, PartyId
from msh.ebms.namespaces import EB
from msh.errors import EbmsError, ErrorCode, Issue, Severity

__all__ = [
    "KNOWN_ATTRIBUTES",
    "MAX_FOREIGN_ELEMENTS",
    "BodyAttributes",
    "ElementReader",
    "HeaderAttributes",
    "foreign_attributes",
    "must_understand_of",
]

_E = etree._Element

KNOWN_ATTRIBUTES = frozenset({MUST_UNDERSTAND, ACTOR, EB_ID, EB_VERSION})
"""Attributes the model holds itself, never kept in :class:`Extensions` (even on an element that does not
read them); any other foreign attribute of an ebXML element goes to its Extensions."""


MAX_FOREIGN_ELEMENTS = 256
"""Foreign (non-ebXML) elements kept per message at most: extension elements, ds:Signature and
ds:Reference, Fault details. Each is kept as its canonical text, and canonicalising an element costs in
proportion to the namespaces in scope; a real message carries a handful, so more is refused (OtherXml)."""


class BodyAttributes(TypedDict):
    """The attributes of an ebXML element of the SOAP Body: eb:id (ebMS2 §2.3.7), eb:version (§2.3.8)."""

    id: str | None
    version: str


class HeaderAttributes(BodyAttributes):
    """The attributes of an ebXML element of the SOAP Header: those of the Body's and SOAP mustUnderstand
    (ebMS2 §2.3.9)."""

    must_understand: bool


def must_understand_of(value: str | None) -> bool | None:
    """What a ``SOAP:mustUnderstand`` attribute says (absent: False); None for a value it cannot take."""
    if value is None:
        return False
    value = value.strip()
    # SOAP 1.1 §4.2.3: mustUnderstand is "0" or "1".
    if value in ("1", "true"):
        return True
    if value in ("0", "false"):
        return False
    return None


class ElementReader:
    """One pass over one envelope; collects lenient-mode Warnings.

    It holds what every element's reader shares (:mod:`~msh.ebms.envelope.header_reader`,
    :mod:`~msh.ebms.envelope.body_reader`): the mode, the Warnings found so far and the count of foreign
    elements kept, with the rules for attributes, text, extensions, parties and Descriptions."""

    __slots__ = ("kept", "lenient", "warnings")

    def __init__(self, lenient: bool) -> None:
        self.lenient = lenient
        self.warnings: list[Issue] = []
        self.kept = 0

    def keep(self, el: _E) -> str:
        """A foreign element kept as canonical text (:func:`_xml_text`), counted against the limit."""
        self.kept += 1
        if self.kept > MAX_FOREIGN_ELEMENTS:
            raise EbmsError(
                f"the message carries more than {MAX_FOREIGN_ELEMENTS} foreign elements (extensions, signatures, "
                "references); no ebXML message needs that many",
                error_code=ErrorCode.OTHER_XML,
                location=_where(el),
            )
        return _xml_text(el)

    # -- small helpers

    def fail(self, message: str, location: str, code: ErrorCode = ErrorCode.OTHER_XML) -> EbmsError:
        return EbmsError(message, error_code=code, location=location)

    def warn(self, message: str, location: str, code: ErrorCode = ErrorCode.OTHER_XML) -> None:
        self.warnings.append(Issue(code, Severity.WARNING, message, location))

    def attr(self, el: _E, local: str, location: str) -> str | None:
        """An eb: attribute; an unqualified one is accepted in lenient mode (a common quirk)."""
        value = el.get(eb(local))
        if value is None:
            value = el.get(local)
            if value is not None:
                if not self.lenient:
                    raise self.fail(f"attribute {local} must be in the eb: namespace", f"{location}/@{local}")
                self.warn(f"attribute {local} is not namespace-qualified (eb:{local} expected)", location)
        return value

    def required_child(self, el: _E, local: str, location: str) -> _E:
        """The eb: child ``local`` of ``el``, or an error naming where it is missing."""
        child = el.find(eb(local))
        if child is None:
            raise self.fail(f"{location.rsplit('/', 1)[-1]} has no {local}", f"{location}/{local}")
        return child

    def text(self, el: _E, location: str) -> str:
        value = (el.text or "").strip()
        if not value:
            raise self.fail(f"{location.rsplit('/', 1)[-1]} must not be empty", location)
        return value

    def children(self, el: _E) -> list[_E]:
        return [c for c in el if isinstance(c.tag, str)]

    def extensions(
        self, el: _E, known: Callable[[str], bool], location: str, skip_attrs: tuple[str, ...] = ()
    ) -> Extensions:
        """Foreign children and attributes of ``el``; an unknown eb: child is an error (strict) or a
        Warning (lenient, then kept as an extension)."""
        elements: list[str] = []
        for child in el:
            tag = child.tag
            if not isinstance(tag, str) or known(tag):
                continue
            if tag.startswith(f"{{{EB}}}"):
                name = etree.QName(tag).localname
                if not self.lenient:
                    raise self.fail(f"unexpected element eb:{name}", f"{location}/{name}")
                self.warn(f"unexpected element eb:{name} kept as an extension", f"{location}/{name}")
            elements.append(self.keep(child))
        attributes = tuple(
            (str(name), str(value))
            for name, value in el.attrib.items()
            if name not in KNOWN_ATTRIBUTES
            and name not in skip_attrs
            and str(name).startswith("{")
            and not str(name).startswith(f"{{{EB}}}")
        )
        if not elements and not attributes:
            return NO_EXTENSIONS
        return Extensions(tuple(elements), attributes)

    def must_understand(self, el: _E, location: str) -> bool:
        value = el.get(MUST_UNDERSTAND)
        meant = must_understand_of(value)
        if meant is None:
            raise self.fail(f"SOAP:mustUnderstand must be 0 or 1, got {value!r}", f"{location}/@mustUnderstand")
        return meant

    def version(self, el: _E, location: str) -> str:
        value = self.attr(el, "version", location)
        if value is None:
            if not self.lenient:
                raise self.fail("eb:version is required", f"{location}/@version")
            self.warn("eb:version is missing; 2.0 assumed", location)
            return "2.0"
        # ebMS2 §2.3.8: the version of this specification is 2.0.
        if value.strip() != "2.0":
            raise self.fail(
                f"eb:version {value!r} is not supported (2.0 expected)", f"{location}/@version", ErrorCode.NOT_SUPPORTED
            )
        return value.strip()

    def body_attributes(self, el: _E, location: str) -> BodyAttributes:
        """eb:id and eb:version of ``el``, in that order (lenient-mode Warnings are kept in reading order)."""
        return {"id": self.attr(el, "id", location), "version": self.version(el, location)}

    def header_attributes(self, el: _E, location: str) -> HeaderAttributes:
        """eb:id, eb:version and SOAP mustUnderstand of ``el``, in that order."""
        return {
            "id": self.attr(el, "id", location),
            "version": self.version(el, location),
            "must_understand": self.must_understand(el, location),
        }

    def descriptions(self, el: _E, location: str) -> list[Description]:
        """A Description as a list of zero or one: lenient mode drops an empty one with a Warning."""
        if not (el.text or "").strip() and self.lenient:
            self.warn("Description is empty; dropped", location)
            return []
        return [self.description(el, location)]

    def description(self, el: _E, location: str) -> Description:
        lang = (el.get(XML_LANG) or "").strip()
        if not lang:
            # ebMS2 §3.2.1, §4.2.3.2.6: a Description names its language in xml:lang.
            if not self.lenient:
                raise self.fail("Description needs a non-empty xml:lang", f"{location}/@lang")
            self.warn("Description has no (or an empty) xml:lang; 'en' assumed", location)
            lang = "en"
        return Description(self.text(el, location), lang)

    def party(self, el: _E, location: str) -> Party:
        ids: list[PartyId] = []
        role: str | None = None
        for child in self.children(el):
            if child.tag == eb("PartyId"):
                loc = f"{location}/PartyId"
                ptype = self.attr(child, "type", loc)
                if ptype is not None and not ptype.strip():
                    raise self.fail("PartyId@type must not be empty", f"{loc}/@type")
                value = (child.text or "").strip()
                if not value:
                    if not self.lenient:
                        raise self.fail("PartyId must not be empty", loc)
                    self.warn("PartyId is empty", loc)
                ids.append(PartyId(value, ptype))
            elif child.tag == eb("Role"):
                role = self.text(child, f"{location}/Role")
            else:
                raise self.fail(f"unexpected element {child.tag} in {location}", location)
        if not ids:
            raise self.fail("at least one PartyId is required", f"{location}/PartyId")
        return Party(tuple(ids), role)

    # -- values

    def boolean(self, value: str, location: str) -> bool:
        v = value.strip()
        if v in ("true", "1"):
            return True
        if v in ("false", "0"):
            return False
        raise self.fail(f"{value!r} is not an xsd:boolean", location)

    def severity(self, value: str | None, location: str) -> Severity:
        if value is None:
            raise self.fail("severity is required", location)
        try:
            return Severity(value.strip())
        except ValueError:
            if self.lenient and value.strip().capitalize() in ("Error", "Warning"):
                self.warn(f"severity {value!r} is not spelt Error or Warning", location)
                return Severity(value.strip().capitalize())
            raise self.fail(f"severity {value!r} is neither Error nor Warning", location) from None


def foreign_attributes(el: _E) -> tuple[tuple[str, str], ...]:
    """Every namespace-qualified attribute of ``el`` (a SOAP Envelope, Header or Body), as the model keeps
    them in Extensions: (Clark name, value) in document order."""
    items = el.items()
    return tuple((str(k), str(v)) for k, v in items if str(k).startswith("{")) if items else ()


def _xml_text(el: _E) -> str:
    """Foreign XML as exclusive canonical text: only the namespaces it uses are declared, so the same
    element reads back to the same text wherever it stood (W3C Exclusive XML Canonicalization 1.0)."""
    try:
        return etree.tostring(el, method="c14n", exclusive=True, with_comments=True).decode("utf-8")
    except etree.C14NError:
        # W3C C14N 1.0 §2.3 refuses relative namespace URIs (deprecated by Namespaces in XML 1.0 §2.2).
        raise EbmsError(
            f"{etree.QName(el).localname} uses a relative namespace URI, which canonical XML cannot represent",
            error_code=ErrorCode.OTHER_XML,
            location=_where(el),
        ) from None


def _where(el: _E) -> str:
    """The location of ``el`` in the style of ebMS error locations (``//Header/Name/...``)."""
    names: list[str] = []
    node: _E | None = el
    while node is not None and node.tag != ENVELOPE:
        names.append(etree.QName(node).localname if isinstance(node.tag, str) else "node()")
        node = node.getparent()
    return "//" + "/".join(reversed(names))
