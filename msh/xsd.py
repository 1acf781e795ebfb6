"""XML Schema plumbing shared by the schema users: the SOAP envelope's (:mod:`msh.ebms.schema`) and the
agreement's (:mod:`cpa.schema`).

* :class:`SchemaSet`: one set of schema documents, compiled on first use by libxml2 (once per thread) for
  the verdict and by the ``xmlschema`` library (once per process) for readable explanations, which fall
  back to libxml2's findings when xmlschema has nothing to say or fails;
* :class:`LogEntry` and :func:`error_log`: what is read from libxml2's error log;
* :class:`Prefixes`: messages with ``{namespace}name`` (Clark notation) written with the spec's prefixes;
* :func:`offending_element` and :func:`source_line`: where an xmlschema finding points;
* XML Schema datatypes: :func:`date_time` reads an ``xs:dateTime``.

Nothing is ever fetched from the network: documents are parsed without DTDs, entities or network access,
and xmlschema may read local files only.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timezone, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, TypeVar, cast

from lxml import etree

from msh.errors import ConfigurationError

if TYPE_CHECKING:
    import xmlschema

__all__ = [
    "CLARK",
    "XMLSCHEMA_ATTRIBUTE",
    "DateTimeOutOfRange",
    "LogEntry",
    "Prefixes",
    "SchemaSet",
    "date_time",
    "error_log",
    "offending_element",
    "source_line",
]

_T = TypeVar("_T")

#: A name in Clark notation, ``{namespace}local``, as libxml2 and xmlschema write names in their messages.
CLARK: Final = re.compile(r"\{([^{}]*)\}([A-Za-z_][\w.\-]*)")

#: The attribute an xmlschema reason is about (``attribute 'type'``, ``attribute xlink:type='x'``), group 1.
XMLSCHEMA_ATTRIBUTE: Final = re.compile(r"attribute '?(?:[\w.\-]+:|\{[^{}]*\})?([\w.\-]+)(?:'|=)")


class LogEntry(Protocol):
    """What is read from an entry of libxml2's error log (``lxml.etree._LogEntry``)."""

    @property
    def message(self) -> str: ...

    @property
    def path(self) -> str | None: ...

    @property
    def line(self) -> int: ...


def error_log(schema: etree.XMLSchema) -> list[LogEntry]:
    """The entries of ``schema``'s error log after a failed validation, in document order."""
    return cast("list[LogEntry]", list(cast("Iterable[object]", schema.error_log)))


class SchemaSet:
    """One set of XML Schema documents, compiled when first needed.

    ``document`` gives what libxml2 compiles: the bytes of a schema document (absolute ``file:`` URIs in its
    imports) or the path of one. ``xmlschema_file`` gives the schema document ``xmlschema`` compiles.
    ``unusable`` says, for the exception of a failed compilation, what is wrong and how to fix it (the
    :class:`~msh.errors.ConfigurationError` raised). Either callable may itself raise
    :class:`~msh.errors.ConfigurationError`, for a missing file.
    """

    __slots__ = ("_document", "_libxml2", "_lock", "_unusable", "_xmlschema", "_xmlschema_file")

    def __init__(
        self,
        *,
        document: Callable[[], bytes | Path],
        xmlschema_file: Callable[[], Path],
        unusable: Callable[[Exception], str],
    ) -> None:
        self._document = document
        self._xmlschema_file = xmlschema_file
        self._unusable = unusable
        self._libxml2 = threading.local()
        self._lock = threading.Lock()
        self._xmlschema: list[xmlschema.XMLSchemaBase] = []

    def validator(self) -> etree.XMLSchema:
        """This thread's compiled schema (an lxml validator and its error log must not be shared between
        threads)."""
        schema: etree.XMLSchema | None = getattr(self._libxml2, "schema", None)
        if schema is None:
            source = self._document()
            parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
            try:
                if isinstance(source, bytes):
                    schema = etree.XMLSchema(etree.fromstring(source, parser))
                else:
                    schema = etree.XMLSchema(etree.parse(str(source), parser))
            except (etree.XMLSchemaParseError, etree.XMLSyntaxError, OSError) as exc:
                raise ConfigurationError(self._unusable(exc)) from exc
            self._libxml2.schema = schema
        return schema

    def explainer(self) -> xmlschema.XMLSchemaBase:
        """The schema as an ``xmlschema`` object, built on first use and shared (guarded by a lock)."""
        with self._lock:
            if not self._xmlschema:
                import xmlschema

                path = self._xmlschema_file()
                try:
                    schema = xmlschema.XMLSchema10(str(path), allow="local", defuse="always")
                except (xmlschema.XMLSchemaException, OSError) as exc:
                    raise ConfigurationError(self._unusable(exc)) from exc
                self._xmlschema.append(schema)
            return self._xmlschema[0]

    def explain(
        self,
        root: etree._Element,
        *,
        namespaces: Mapping[str, str],
        at_most: int,
        convert: Callable[[xmlschema.XMLSchemaValidationError], _T | None],
    ) -> list[_T]:
        """xmlschema's first ``at_most`` findings about ``root``, each turned into a ``_T`` by ``convert``
        (None leaves it out); ``namespaces`` are the prefixes its reasons use.

        Empty when xmlschema finds nothing (it is more lenient than libxml2 in places) or fails (elementpath's
        OverflowError on an absurd value, say): the caller then reports libxml2's findings, so that the
        verdict never depends on which library explains.
        """
        schema = self.explainer()
        with self._lock:  # xmlschema makes no thread-safety promise for validation either
            try:
                errors = itertools.islice(schema.iter_errors(root, namespaces=dict(namespaces)), at_most)
                found = [convert(error) for error in errors]
            except Exception:  # e.g. elementpath's OverflowError on an absurd value: libxml2's findings will do
                return []
        return [item for item in found if item is not None]


@dataclass(frozen=True)
class Prefixes:
    """The prefixes messages write names with, by namespace URI (those of the specification's samples).

    A name in a namespace not listed is written ``{uri}local`` (``local`` without a namespace), or
    ``uri:local`` when ``uri_as_prefix`` is set.
    """

    by_namespace: Mapping[str, str]
    uri_as_prefix: bool = False

    def name(self, namespace: str, local: str) -> str:
        """``prefix:local`` for the name ``{namespace}local``."""
        prefix = self.by_namespace.get(namespace)
        if prefix is not None:
            return f"{prefix}:{local}"
        if self.uri_as_prefix:
            return f"{namespace}:{local}"
        return local if not namespace else f"{{{namespace}}}{local}"

    def apply(self, text: str) -> str:
        """``text`` with every name in Clark notation written with its prefix."""
        return CLARK.sub(lambda match: self.name(match.group(1), match.group(2)), text)

    @property
    def namespaces(self) -> dict[str, str]:
        """The namespaces by prefix, for xmlschema (``xml`` is built in and left out)."""
        return {prefix: namespace for namespace, prefix in self.by_namespace.items() if prefix != "xml"}


def offending_element(error: xmlschema.XMLSchemaValidationError) -> etree._Element | None:
    """The element an xmlschema finding is about: the offending child (as libxml2 points at it) rather than
    its parent when there is one; None when the finding names no element of the document."""
    child = error.invalid_child
    element = child if isinstance(child, etree._Element) else error.elem
    return element if isinstance(element, etree._Element) else None


def source_line(element: etree._Element) -> int | None:
    """The line ``element`` starts on in its document, when the parser recorded one."""
    line: object = element.sourceline
    return line if isinstance(line, int) else None


class DateTimeOutOfRange(ValueError):
    """An ``xs:dateTime`` that is one but falls outside the years 1 to 9999 (which a datetime can hold)."""


def date_time(text: str, *, naive: tzinfo) -> datetime:
    """The ``xs:dateTime`` ``text`` (XML Schema Part 2 §3.2.7) as an aware datetime, in time zone ``naive``
    when it has none.

    Raises :class:`ValueError` when ``text`` is not an xs:dateTime and :class:`DateTimeOutOfRange` (a
    ValueError) when it is one outside the years 1 to 9999.
    """
    from elementpath.datatypes import DateTime

    value = DateTime.fromstring(text)
    if value.bce or not 1 <= value.year <= 9999:
        raise DateTimeOutOfRange(f"{text!r} is outside the years 1 to 9999")
    offset = value.tzinfo.utcoffset(None) if value.tzinfo is not None else None
    tz = timezone(offset) if offset else UTC if offset is not None else naive
    return datetime(
        value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond, tzinfo=tz
    )
