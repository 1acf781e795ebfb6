"""Schema validation of the SOAP envelope of an ebXML message (ebMS2 §2.1.1, §2.3, Appendix A).

The project ships its own schemas in ``schemas/`` (SOAP 1.1 envelope, the ebXML header extensions,
XML Signature, XLink and the XML namespace). They are combined by a small in-memory *driver* schema that
imports every namespace from its local file, so that the lax wildcards of ``SOAP:Header`` and
``SOAP:Body`` validate the ``eb:`` and ``ds:`` entries they carry against their declarations; nothing is
ever fetched from the network.

Two entry points give the same verdict:

* :func:`validate_envelope` uses libxml2 (``lxml.etree.XMLSchema``): the hot path of the receiving MSH.
  One compiled schema is kept per thread, since an lxml validator (and its error log) must not be used
  by two threads at once.
* :func:`explain_envelope` uses the ``xmlschema`` library, slower but with more readable reasons; it is
  meant for the command line and for diagnostics.

Each schema violation becomes one :class:`~msh.errors.Issue` with errorCode ``OtherXml`` and severity
``Error`` (ebMS2 §4.2.3.4.1), whose ``location`` is an XPath into the message in the style MSHs use in
``eb:Error/@location``, e.g. ``//Header/MessageHeader/From/PartyId`` or
``//Header/ErrorList/@highestSeverity``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from lxml import etree

from msh.ebms.namespaces import EB, SOAP_ENV, XLINK, XML, XMLDSIG
from msh.errors import ErrorCode, Issue, Severity
from msh.resources import schema_path
from msh.xmlpath import Locator
from msh.xsd import XMLSCHEMA_ATTRIBUTE, Prefixes, SchemaSet, error_log, offending_element, source_line

if TYPE_CHECKING:
    import xmlschema

__all__ = ["MAX_SCHEMA_ISSUES", "SCHEMA_FILES", "explain_envelope", "schema_files", "validate_envelope"]

MAX_SCHEMA_ISSUES = 50
"""Schema violations reported per message at most (a last issue says how many more there were): a real
message has a handful, and a hostile one with thousands would cost work and reply size for nothing."""

#: The namespaces the envelope schema set covers, each with the name of its file in ``schemas/``.
SCHEMA_FILES: dict[str, str] = {
    SOAP_ENV: "envelope.xsd",
    EB: "msg-header-2_0.xsd",
    XMLDSIG: "xmldsig-core-schema.xsd",
    XLINK: "xlink.xsd",
    XML: "xml.xsd",
}

# Prefixes used when naming elements and attributes in descriptions (the ones of the spec samples).
_PREFIXES = Prefixes({SOAP_ENV: "SOAP", EB: "eb", XMLDSIG: "ds", XLINK: "xlink", XML: "xml"})

_ENVELOPE_TAG = f"{{{SOAP_ENV}}}Envelope"
_REFERENCE_TAG = f"{{{EB}}}Reference"
_XLINK_TYPE = f"{{{XLINK}}}type"
_XSD = "http://www.w3.org/2001/XMLSchema"

_ATTRIBUTE_IN_MESSAGE = re.compile(r"attribute '(?:\{[^{}]*\})?([^']+)'")
_STEP = re.compile(r"^(?:(?P<prefix>[^:\[\]]+):)?(?P<name>[^:\[\]]+)(?:\[(?P<index>\d+)\])?$")


def schema_files() -> dict[str, Path]:
    """The project's schema files, keyed by the namespace URI each one defines.

    Raises :class:`~msh.errors.ConfigurationError` (saying how to fix it) when one is missing.
    """
    return {namespace: schema_path(name) for namespace, name in SCHEMA_FILES.items()}


def _driver_document() -> bytes:
    """An in-memory schema with no namespace of its own that imports every namespace of the set from
    its local file (absolute ``file:`` URIs, so the result does not depend on the working directory)."""
    imports = "".join(
        f'<xs:import namespace="{namespace}" schemaLocation="{path.resolve().as_uri()}"/>'
        for namespace, path in schema_files().items()
    )
    return f'<xs:schema xmlns:xs="{_XSD}">{imports}</xs:schema>'.encode()


def _unusable(exc: Exception) -> str:
    """What to do when the envelope schemas do not compile."""
    return (
        f"the envelope schemas in {schema_path(SCHEMA_FILES[EB]).parent} cannot be compiled: {exc}; "
        "restore them from the source checkout"
    )


# The schema set: libxml2 compiles the driver document (one per thread: the hot path), xmlschema
# msg-header-2_0.xsd, which imports the four other namespaces from the same folder.
_SCHEMAS = SchemaSet(document=_driver_document, xmlschema_file=lambda: schema_files()[EB], unusable=_unusable)


# --------------------------------------------------------------------------------------------------
# lxml (libxml2): the hot path
# --------------------------------------------------------------------------------------------------


def validate_envelope(root: etree._Element) -> tuple[Issue, ...]:
    """Validate a parsed SOAP envelope against the project's schemas (libxml2).

    Returns an empty tuple when ``root`` is a schema-valid ``SOAP:Envelope`` (header and body entries
    included); otherwise one ``OtherXml`` / ``Error`` :class:`~msh.errors.Issue` per violation (in
    document order as libxml2 reports them), each with an XPath ``location`` such as
    ``//Header/MessageHeader/From`` or ``//Header/ErrorList/@highestSeverity``.

    Not thread-bound: each thread gets its own compiled schema on first use.
    """
    wrong_root = _check_root(root)
    if wrong_root is not None:
        return (wrong_root,)
    schema = _SCHEMAS.validator()
    issues: list[Issue] = []
    locator = Locator()
    if not schema.validate(root):
        log = error_log(schema)
        for entry in log[:MAX_SCHEMA_ISSUES]:
            location = _lxml_location(root, entry.path, entry.message, locator)
            text = _readable(_PREFIXES.apply(entry.message))
            issues.append(_issue(text, location, entry.line))
        if len(log) > MAX_SCHEMA_ISSUES:
            issues.append(_more(len(log) - MAX_SCHEMA_ISSUES))
        if not issues:  # libxml2 said "invalid" without saying why; never report a bare failure as valid
            issues.append(_issue("the envelope does not conform to the ebXML schemas", "/Envelope", 0))
    for extra in _fixed_value_issues(root, locator):
        if len(issues) > MAX_SCHEMA_ISSUES:
            break
        issues.append(extra)
    return _unique(issues)


def _more_unknown() -> Issue:
    return Issue(
        ErrorCode.OTHER_XML,
        Severity.ERROR,
        f"and more schema violations not listed (at most {MAX_SCHEMA_ISSUES} are reported)",
        "/Envelope",
    )


def _more(count: int) -> Issue:
    return Issue(
        ErrorCode.OTHER_XML,
        Severity.ERROR,
        f"and {count} more schema violation(s) not listed (at most {MAX_SCHEMA_ISSUES} are reported)",
        "/Envelope",
    )


def _fixed_value_issues(root: etree._Element, locator: Locator) -> Iterator[Issue]:
    """What libxml2 leaves out: it ignores a ``fixed`` value put on a *reference* to a global attribute,
    and the schema says (ebMS2 §3.2.1) ``<attribute ref="xlink:type" fixed="simple"/>`` on eb:Reference.
    Every eb:Reference of the document is schema-validated (all wildcards are lax), so all are checked."""
    for reference in root.iter(_REFERENCE_TAG):
        value = reference.get(_XLINK_TYPE)
        if value is not None and value.strip() != "simple":
            location = _element_location(reference, root, locator) + "/@type"
            text = (
                f"Element 'eb:Reference', attribute 'xlink:type': the value '{value}' is not the fixed "
                "value 'simple' (ebMS2 §3.2.1)"
            )
            yield _issue(text, location, _line(reference))


def _lxml_location(root: etree._Element, path: str | None, message: str, locator: Locator) -> str:
    """Turn libxml2's node path (``/SOAP:Envelope/SOAP:Header/eb:MessageHeader[2]``, with ``*[n]`` for
    elements in a default namespace) into this module's location style."""
    attribute = _ATTRIBUTE_IN_MESSAGE.search(message)
    suffix = f"/@{attribute.group(1)}" if attribute else ""
    if not path:
        return "/" + etree.QName(root).localname + suffix
    element = _resolve_node_path(root, path, locator)
    if element is not None:
        return _element_location(element, root, locator) + suffix
    return _strip_node_path(path) + suffix


def _resolve_node_path(root: etree._Element, path: str, locator: Locator) -> etree._Element | None:
    """Follow libxml2's ``xmlGetNodePath`` output from ``root``; None when it cannot be followed."""
    steps = [step for step in path.split("/") if step]
    if not steps:
        return None
    current = root
    for step in steps[1:]:
        if step.startswith("@") or step.startswith("text()") or "(" in step:
            break  # the element holding the attribute / text is the place to report
        match = _STEP.match(step)
        if match is None:
            return None
        prefix, name, index = match.group("prefix"), match.group("name"), int(match.group("index") or 1)
        candidates = locator.element_children(current) if name == "*" else locator.named_children(current, prefix, name)
        if len(candidates) < index:
            return None
        current = candidates[index - 1]
    return current


def _strip_node_path(path: str) -> str:
    """Fallback: drop namespace prefixes and the leading Envelope step from a node path."""
    steps = [step.split(":", 1)[-1] for step in path.split("/") if step]
    if steps and steps[0] == "Envelope" and len(steps) > 1:
        steps = steps[1:]
    return "//" + "/".join(steps)


def _element_location(element: etree._Element, root: etree._Element, locator: Locator | None = None) -> str:
    """``//Header/MessageHeader/From/PartyId[2]``: local names from below the validated Envelope down to
    ``element``, with a position only where same-named siblings make one necessary."""
    if element is root:
        return "/" + etree.QName(root).localname
    locator = locator or Locator()
    steps = locator.steps(element, below=root)
    if root.tag != _ENVELOPE_TAG or not _is_below(element, root):  # not below an Envelope: keep the root step
        steps.insert(0, etree.QName(root).localname)
    return "//" + "/".join(steps)


def _is_below(element: etree._Element, root: etree._Element) -> bool:
    return any(ancestor is root for ancestor in element.iterancestors())


def _readable(message: str) -> str:
    """libxml2 messages, lightly tidied: no trailing dot doubling, no ``( x )`` spacing."""
    text = message.strip()
    text = re.sub(r"\(\s+", "(", text)
    text = re.sub(r"\s+\)", ")", text)
    return text.rstrip(".")


# --------------------------------------------------------------------------------------------------
# xmlschema: readable explanations
# --------------------------------------------------------------------------------------------------


def explain_envelope(root: etree._Element) -> tuple[Issue, ...]:
    """Validate like :func:`validate_envelope` (same schemas, same verdict) but with the ``xmlschema``
    library, whose reasons are easier to read (e.g. "eb:MessageHeader: Unexpected child with tag 'eb:To'
    at position 1. Tag 'eb:From' expected."). Slower: for the command line and diagnostics.

    Where xmlschema is more lenient than libxml2 (character data in an element whose content is a lone
    wildcard), the libxml2 findings are returned instead, so the verdict never differs.
    """
    wrong_root = _check_root(root)
    if wrong_root is not None:
        return (wrong_root,)
    locator = Locator()
    errors = _SCHEMAS.explain(
        root,
        namespaces=_PREFIXES.namespaces,
        at_most=MAX_SCHEMA_ISSUES + 1,
        convert=lambda error: _xmlschema_issue(error, root, locator),
    )
    if len(errors) > MAX_SCHEMA_ISSUES:
        errors[MAX_SCHEMA_ISSUES:] = [_more_unknown()]
    if not errors:  # or xmlschema failed (elementpath's OverflowError on an absurd value, say)
        # xmlschema lets character data through in an element whose only particle is a wildcard (it
        # treats it like an empty declaration), e.g. text directly inside SOAP:Header; libxml2 does
        # not. Fall back on its findings so that both entry points always give the same verdict.
        return validate_envelope(root)
    return _unique(errors)


def _xmlschema_issue(error: xmlschema.XMLSchemaValidationError, root: etree._Element, locator: Locator) -> Issue:
    """One xmlschema finding as an issue, located like libxml2's."""
    elem = offending_element(error)
    if elem is not None:
        location = _element_location(elem, root, locator)
        line = _line(elem)
    else:
        location = _strip_node_path(error.path or "")
        line = 0
    reason = error.reason or error.message
    if isinstance(error.elem, etree._Element) and isinstance(error.elem.tag, str):
        reason = f"{_PREFIXES.apply(error.elem.tag)}: {reason}"
    attribute = XMLSCHEMA_ATTRIBUTE.search(reason)
    if attribute is not None:
        location += f"/@{attribute.group(1)}"
    return _issue(_readable(_PREFIXES.apply(reason)), location, line)


# --------------------------------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------------------------------


def _check_root(root: etree._Element) -> Issue | None:
    """ebMS2 §2.1.1 / SOAP 1.1 §4: the document must be a SOAP 1.1 Envelope (the schema set would
    otherwise accept, say, a lone eb:MessageHeader as a document)."""
    if root.tag == _ENVELOPE_TAG:
        return None
    if not isinstance(root.tag, str):
        return _issue("the document has no root element", "/", 0)
    name = _PREFIXES.apply(root.tag)
    return _issue(
        f"the root element is {name}, not a SOAP 1.1 SOAP:Envelope ({SOAP_ENV})",
        "/" + etree.QName(root).localname,
        _line(root),
    )


def _line(element: etree._Element) -> int:
    return source_line(element) or 0


def _issue(text: str, location: str, line: int) -> Issue:
    where = f"{location}, line {line}" if line else location
    return Issue(ErrorCode.OTHER_XML, Severity.ERROR, f"{text} (at {where})", location)


def _unique(issues: list[Issue]) -> tuple[Issue, ...]:
    return tuple(dict.fromkeys(issues))
