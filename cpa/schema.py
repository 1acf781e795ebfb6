"""Schema validation of an agreement (step 2 of :func:`cpa.loader.load`).

The document must be valid under the project's CPP/A 2.0 schema (``schemas/cpp-cpa-2_0.xsd``), judged by
libxml2. When it is not, the ``xmlschema`` library explains each violation in readable words, pointing at
the offending element; past a few violations (xmlschema costs far more per error), or where xmlschema has
nothing to say, libxml2's own findings are reported.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from lxml import etree

from cpa.certificates import bad_base64_message
from cpa.document import DS, MAX_PROBLEMS, TP, XLINK, capped, path_of
from cpa.errors import CpaError, CpaProblem
from msh.resources import schema_path
from msh.xmlpath import Locator
from msh.xsd import XMLSCHEMA_ATTRIBUTE, Prefixes, SchemaSet, error_log, offending_element, source_line

if TYPE_CHECKING:
    import xmlschema

__all__ = ["AGREEMENT_SCHEMA", "SCHEMA_FILE", "validate"]

#: The project's CPP/A 2.0 schema, in ``schemas/``.
SCHEMA_FILE: Final = "cpp-cpa-2_0.xsd"

_EXPLAIN_AT_MOST: Final = 25
_SCHEMA_HINT: Final = f"correct it as the CPP/A 2.0 schema (schemas/{SCHEMA_FILE}) requires"
_LONG_QUOTED: Final = re.compile(r"'([^']{48})[^']{12,}'")
_PREFIXES: Final = Prefixes({TP: "tp", DS: "ds", XLINK: "xlink"}, uri_as_prefix=True)


def _unusable(exc: Exception) -> str:
    """What to do when the CPP/A schema does not compile."""
    return f"the CPP/A schema {schema_path(SCHEMA_FILE)} cannot be compiled: {exc}; restore it from the source checkout"


#: The CPP/A 2.0 schema, compiled on first use (by libxml2 per thread, by xmlschema once).
AGREEMENT_SCHEMA: Final = SchemaSet(
    document=lambda: schema_path(SCHEMA_FILE), xmlschema_file=lambda: schema_path(SCHEMA_FILE), unusable=_unusable
)


def validate(name: str, root: etree._Element, warnings: list[CpaProblem]) -> None:
    """Raise :class:`~cpa.errors.CpaError` listing the schema violations of agreement ``name`` (with the
    ``warnings`` found so far) unless ``root`` is valid under the CPP/A 2.0 schema."""
    schema = AGREEMENT_SCHEMA.validator()
    if schema.validate(root):
        return
    log = error_log(schema)
    # xmlschema explains in readable words but costs far more per error: past a few, libxml2's words do.
    problems = _explain(name, root) if len(log) <= _EXPLAIN_AT_MOST else []
    if not problems:  # xmlschema is more lenient here than libxml2: report libxml2's findings
        problems = [
            CpaProblem(
                name,
                entry.line or None,
                _strip_prefixes(entry.path or ""),
                f"not valid under the schema: {_tidy(entry.message)}; {_SCHEMA_HINT}",
            )
            for entry in log[: MAX_PROBLEMS + 1]
        ] or [CpaProblem(name, None, "", f"the document is not valid under the schema; {_SCHEMA_HINT}")]
    raise CpaError(capped([*problems, *warnings]))


def _explain(name: str, root: etree._Element) -> list[CpaProblem]:
    """Readable problems from ``xmlschema``'s ``iter_errors``, pointing at the offending element."""
    locator = Locator()
    return AGREEMENT_SCHEMA.explain(
        root,
        namespaces=_PREFIXES.namespaces,
        at_most=MAX_PROBLEMS + 1,
        convert=lambda error: _problem(name, error, locator),
    )


def _problem(name: str, error: xmlschema.XMLSchemaValidationError, locator: Locator) -> CpaProblem | None:
    """One xmlschema finding as a problem, with a hint at what to do; None for one reported elsewhere."""
    reason = error.reason or error.message
    if reason.startswith("IDREF ") and "not found" in reason:
        # A dangling reference is reported by the reference check, with its element and line, once the
        # schema problems are fixed; xmlschema only names the document root.
        return None
    elem = offending_element(error)
    if elem is not None:
        path, line = path_of(elem, locator), source_line(elem)
    else:
        path, line = _strip_prefixes(error.path or ""), None
    attribute = XMLSCHEMA_ATTRIBUTE.match(reason)
    if attribute is not None:
        path += f"/@{attribute.group(1)}"
    if elem is not None and elem.tag == f"{{{DS}}}X509Certificate":
        return CpaProblem(name, line, path, bad_base64_message(elem))
    hint = _SCHEMA_HINT
    if "expected" in reason and "Tag '" in reason:
        hint = f"add the expected element there or put the elements in the right order: {_SCHEMA_HINT}"
    return CpaProblem(name, line, path, f"not valid under the schema: {_tidy(reason)}; {hint}")


def _tidy(message: str) -> str:
    text = _PREFIXES.apply(message.strip())
    text = _LONG_QUOTED.sub(lambda m: f"'{m.group(1)}...'", text)
    return text.rstrip(".")


def _strip_prefixes(path: str) -> str:
    return "/".join(step.split(":", 1)[-1] for step in path.split("/"))
