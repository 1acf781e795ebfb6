"""How a setting is declared: a field of a settings dataclass, with :func:`setting` as its metadata.

The field gives the setting's name (``<section>.<key>``: the section is the :class:`Section`'s
``section``, the key the field's name), its type and its default (a field without one is required); the
metadata gives what the messages tell to write (``hint``), its check, and the line of the README's table
(``meaning``). Everything else follows from that one declaration: the TOML reader and the
``MSH_<SECTION>_<KEY>`` environment variables (:mod:`.sources`), the refusal of unknown keys and variables,
:func:`~msh.runtime.config.describe` and the README's settings table (:mod:`.describing`).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from types import NoneType, UnionType
from typing import Any, ClassVar, Final

from msh.errors import ConfigurationError
from msh.runtime.config.values import BOOLEAN, DURATION, INTEGER, TEXT, Choice, Invalid, Kind

__all__ = ["DURATION_HINT", "ENV_PREFIX", "WHOLE_HINT", "Declared", "Section", "SettingsError", "declared", "setting"]

ENV_PREFIX: Final = "MSH_"
"""What every environment variable of a setting starts with: ``MSH_<SECTION>_<KEY>``."""

DURATION_HINT: Final = 'write a duration, e.g. "{0}" or {1}'
"""The hint of a duration setting: ``.format(ISO 8601 example, the same in seconds)``."""
WHOLE_HINT: Final = "write a whole number of at least 1, e.g. {0}"
"""The hint of a count setting: ``.format(example)``."""

Check = Callable[[Any], "str | None"]
"""A check of a field's value: None, or what is wrong and what to write instead."""


class SettingsError(ConfigurationError):
    """The settings cannot be used; ``problems`` holds one line per problem (never empty).

    Each line names the setting, where its value came from and what to write instead.
    """

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems: tuple[str, ...] = tuple(problems)
        count = len(self.problems)
        head = f"the MSH settings from {source} have {count} problem{'' if count == 1 else 's'}:"
        super().__init__("\n".join([head, *(f"  - {p}" for p in self.problems)]))


@dataclass(frozen=True, slots=True)
class _About:
    hint: str
    meaning: str
    check: Check | None
    kind: Kind | None
    unset: str


_METADATA_KEY: Final = "msh.setting"


def setting(
    hint: str = "", *, meaning: str, check: Check | None = None, kind: Kind | None = None, unset: str = "—"
) -> Mapping[str, object]:
    """The metadata of a settings field (``dataclasses.field(default=..., metadata=setting(...))``).

    ``hint`` says what to write (it ends the messages about the setting; without one, the kind's own:
    the values of an enum, true or false), ``meaning`` is the README table's line, ``check`` is run on
    the value at construction and when loading, ``kind`` says how the value is read when its type alone
    does not (paths, the store URL), ``unset`` is what the README shows as the default of an optional
    setting left unset.
    """
    return {_METADATA_KEY: _About(hint, meaning, check, kind, unset)}


_KINDS: Final[dict[object, Kind]] = {str: TEXT, int: INTEGER, bool: BOOLEAN, timedelta: DURATION}


@dataclass(frozen=True, slots=True)
class Declared:
    """One setting as declared: ``section.key``, how its value is read, its default, hint and check."""

    section: str
    key: str
    kind: Kind
    optional: bool
    """None is a value: the setting may be left unset (an empty environment variable unsets it)."""
    default: Any
    """The default value, or :data:`dataclasses.MISSING` for a required setting."""
    hint: str
    meaning: str
    unset: str
    check: Check | None

    @property
    def name(self) -> str:
        """``section.key``, e.g. ``server.port``."""
        return f"{self.section}.{self.key}"

    @property
    def env(self) -> str:
        """The environment variable that overrides it, e.g. ``MSH_SERVER_PORT``."""
        return ENV_PREFIX + f"{self.section}_{self.key}".upper()

    @property
    def required(self) -> bool:
        """True when it has no default."""
        return self.default is dataclasses.MISSING

    @property
    def table_default(self) -> str:
        """Its default in a README table: ``required``, the words for unset, or the value as code."""
        if self.required:
            return "required"
        if self.default is None:
            return self.unset
        return "`" + self.kind.show(self.default).strip('"') + "`"

    def read(self, value: object, *, from_env: bool) -> Any:
        """``value`` (a TOML value, or the text of an environment variable) as the setting's Python value.

        Raises :class:`~msh.runtime.config.values.Invalid` saying what is wrong and what to write.
        """
        if from_env:
            assert isinstance(value, str)
            text = value.strip()
            if self.optional and not text:
                return None
            return self.kind.from_text(text, self.hint)
        if self.optional and value == "":
            raise Invalid("'' is empty; leave the key out to leave the setting unset")
        return self.kind.from_toml(value, self.hint)

    def problem(self, value: Any) -> str | None:
        """What the check finds wrong with ``value`` (None when nothing, or when ``value`` is unset)."""
        if self.check is None or (value is None and self.optional):
            return None
        return self.check(value)


_DECLARED: Final[dict[type, tuple[Declared, ...]]] = {}


def declared(cls: type[Section]) -> tuple[Declared, ...]:
    """The settings a section class declares, in field order."""
    if cls not in _DECLARED:
        _DECLARED[cls] = _declare(cls)
    return _DECLARED[cls]


def _declare(cls: type[Section]) -> tuple[Declared, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # a Section subclass is a dataclass
        about = f.metadata.get(_METADATA_KEY)
        if not isinstance(about, _About):
            raise TypeError(f"{cls.__name__}.{f.name} is not declared with metadata=setting(...)")
        kind, optional = _kind(hints[f.name], about.kind, f"{cls.__name__}.{f.name}")
        out.append(
            Declared(
                section=cls.section,
                key=f.name,
                kind=kind,
                optional=optional,
                default=f.default,
                hint=about.hint or kind.hint,
                meaning=about.meaning,
                unset=about.unset,
                check=about.check,
            )
        )
    return tuple(out)


def _kind(annotation: object, given: Kind | None, where: str) -> tuple[Kind, bool]:
    """The kind of a field (``given``, or the one of its type) and whether it is optional (``X | None``)."""
    args = typing.get_args(annotation) if isinstance(annotation, UnionType) else ()
    optional = NoneType in args
    base = next((a for a in args if a is not NoneType), annotation) if args else annotation
    if given is not None:
        return given, optional
    if isinstance(base, type) and issubclass(base, StrEnum):
        return Choice(base), optional
    if base in _KINDS:
        return _KINDS[base], optional
    raise TypeError(f"{where}: no kind for the type {annotation!r}; give setting(kind=...)")


def _problems_of(instance: Section) -> list[str]:
    """The problems the checks of ``instance``'s settings find, each ``section.key: problem``."""
    problems = []
    for d in declared(type(instance)):
        problem = d.problem(getattr(instance, d.key))
        if problem:
            problems.append(f"{d.name}: {problem}")
    return problems


class Section:
    """The base of a section's settings dataclass: its checks run at construction.

    A subclass names its ``section`` and declares each setting as a field with ``metadata=setting(...)``.
    """

    __slots__ = ()
    section: ClassVar[str]

    def __post_init__(self) -> None:
        problems = _problems_of(self)
        if problems:
            raise SettingsError(type(self).__name__, problems)
