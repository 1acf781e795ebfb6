"""How a setting's value is read, made absolute, verified and shown: one :class:`Kind` per type of value.

A kind reads a TOML value (:meth:`Kind.from_toml`) or the text of an environment variable
(:meth:`Kind.from_text`); paths are then read from the configuration file's folder (:meth:`Kind.resolve`)
and what they name is looked at (:meth:`Kind.verify`); :meth:`Kind.show` writes a value back the way
``msh serve --print-settings`` prints it. A value that cannot be read raises :class:`Invalid`, whose
message says what is wrong and what to write instead.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from cpa.duration import XsDuration, parse_duration
from msh.errors import ConfigurationError

__all__ = [
    "AGREEMENT_PATHS",
    "BOOLEAN",
    "DURATION",
    "INTEGER",
    "NEW_FILE",
    "PEM_FILE",
    "PEM_FILES",
    "STORE_URL",
    "TEXT",
    "TEXTS",
    "XS_DURATION",
    "Choice",
    "Invalid",
    "Kind",
    "did_you_mean",
    "format_duration",
    "show",
    "type_name",
]


class Invalid(Exception):
    """A value cannot be read; the message says what is wrong and what to write."""


_TYPE_NAMES: Final = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list"}


def format_duration(value: timedelta) -> str:
    """``value`` as an xs:duration (``PT2S``, ``PT0.5S``, ``P1DT2H``); negative ones with a leading '-'."""
    return str(XsDuration.from_timedelta(value))


def show(value: object) -> str:
    """``value`` as a message quotes it: ``true``, ``"PT2S"`` for a duration, ``'text'``, ``8081``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, XsDuration):
        return str(value)
    if isinstance(value, (str, Path)):
        return repr(str(value))
    return repr(value)


def type_name(value: object) -> str:
    """What ``value`` is, in words: ``a string``, ``an integer``, ``a table``."""
    return _TYPE_NAMES.get(type(value), "a table" if isinstance(value, Mapping) else f"a {type(value).__name__}")


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` naming the one of ``choices`` closest to a misspelt ``word``, or ``""``."""
    close = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _wrong_type(value: object, expected: str, hint: str) -> Invalid:
    return Invalid(f"{show(value)} is {type_name(value)}, not {expected}; {hint}")


def _string(value: object, hint: str) -> str:
    if not isinstance(value, str):
        raise _wrong_type(value, "a string", hint)
    return value


def _resolve(path: Path, base_dir: Path) -> Path:
    return (path if path.is_absolute() else base_dir / path).resolve()


class Kind(ABC):
    """One type of setting value; the subclasses say how to read, resolve, verify and show it."""

    hint: str = ""
    """What to write, for a setting that declares no hint of its own."""

    @abstractmethod
    def from_toml(self, value: object, hint: str) -> Any:
        """``value`` as the TOML file gives it, as the setting's Python value (or :class:`Invalid`)."""

    @abstractmethod
    def from_text(self, text: str, hint: str) -> Any:
        """``text`` (an environment variable's value, stripped) as the setting's Python value."""

    def resolve(self, value: Any, base_dir: Path) -> Any:
        """``value`` with relative paths read from ``base_dir``."""
        return value

    def verify(self, value: Any, base_dir: Path) -> str | None:
        """None, or what is wrong with what the (resolved) ``value`` names and what to write instead."""
        return None

    def show(self, value: Any) -> str:
        """``value`` the way :func:`~msh.runtime.config.describe` prints it (a TOML-like value)."""
        return json.dumps(str(value))


class _Text(Kind):
    def from_toml(self, value: object, hint: str) -> Any:
        return _string(value, hint)

    def from_text(self, text: str, hint: str) -> Any:
        return text


_SQLITE_URL: Final = re.compile(r"(sqlite(?:\+\w+)?:///)(.*)", re.IGNORECASE | re.DOTALL)
_PASSWORD: Final = re.compile(r"(://[^/?#@:]*:)[^/?#@]*@")


class _StoreUrl(_Text):
    """A store URL: a path, ``sqlite:///path``, ``postgresql+psycopg://...`` or ``memory:``."""

    def from_toml(self, value: object, hint: str) -> Any:
        return self.from_text(_string(value, hint).strip(), hint)

    def from_text(self, text: str, hint: str) -> Any:
        if not text:
            raise Invalid(f"the value is empty; {hint}")
        return text

    def resolve(self, value: Any, base_dir: Path) -> Any:
        """A plain relative path or ``sqlite:///relative`` made absolute against ``base_dir``; others unchanged."""
        text = str(value)
        if text.lower() in ("memory:", "memory://"):
            return "memory:"
        match = _SQLITE_URL.fullmatch(text)
        if match:
            database, mark, query = match.group(2).partition("?")
            if database and database != ":memory:" and not database.startswith("file:"):
                path = Path(database).expanduser()
                if not path.is_absolute():
                    return f"{match.group(1)}{_resolve(path, base_dir)}{mark}{query}"
            return text
        if "://" in text or text.lower().startswith("sqlite:"):
            return text
        return str(_resolve(Path(text).expanduser(), base_dir))

    def verify(self, value: Any, base_dir: Path) -> str | None:
        if value == "memory:":
            return None
        from msh.store.sql import resolve_url  # the store's own reading of its URL (loads SQLAlchemy)

        try:
            resolve_url(value)
        except ConfigurationError as exc:
            return str(exc)
        return None

    def show(self, value: Any) -> str:
        """The URL with its password, if any, shown as ``***``."""
        return json.dumps(_PASSWORD.sub(r"\1***@", str(value)))


_INTEGER_TEXT: Final = re.compile(r"[+-]?[0-9]+")


class _Integer(Kind):
    def from_toml(self, value: object, hint: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _wrong_type(value, "an integer", hint)
        return value

    def from_text(self, text: str, hint: str) -> Any:
        if not _INTEGER_TEXT.fullmatch(text):
            raise Invalid(f"{text!r} is not an integer; {hint}")
        return int(text)

    def show(self, value: Any) -> str:
        return str(value)


_TRUE: Final = frozenset({"true", "1", "yes"})
_FALSE: Final = frozenset({"false", "0", "no"})


class _Boolean(Kind):
    hint = "write true or false"

    def from_toml(self, value: object, hint: str) -> Any:
        if not isinstance(value, bool):
            raise _wrong_type(value, "a boolean", hint)
        return value

    def from_text(self, text: str, hint: str) -> Any:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise Invalid(f"{text!r} is not a boolean; write true or false (or 1/0, yes/no)")

    def show(self, value: Any) -> str:
        return "true" if value else "false"


_DECIMAL: Final = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?")


class _Duration(Kind):
    """A fixed-length xs:duration (read by :func:`cpa.duration.parse_duration`) or a number of seconds."""

    def from_toml(self, value: object, hint: str) -> Any:
        if isinstance(value, str):
            return self._xs_duration(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return self._seconds(float(value), show(value))
        raise _wrong_type(value, 'a duration ("PT30S") or a number of seconds', hint)

    def from_text(self, text: str, hint: str) -> Any:
        if _DECIMAL.fullmatch(text):
            return self._seconds(float(text), repr(text))
        return self._xs_duration(text)

    def show(self, value: Any) -> str:
        return json.dumps(format_duration(value))

    @staticmethod
    def _xs_duration(text: str) -> timedelta:
        try:
            return parse_duration(text)
        except ValueError as exc:
            message = str(exc)
            if "is not an xs:duration" in message:
                message += ", or give a number of seconds"
            raise Invalid(message) from None

    @staticmethod
    def _seconds(value: float, shown: str) -> timedelta:
        if not math.isfinite(value):
            raise Invalid(f'{shown} is not a duration; give a number of seconds or an xs:duration like "PT30S"')
        if value < 0:
            raise Invalid(f"{shown} is negative; give a positive duration")
        try:
            return timedelta(seconds=value)
        except OverflowError:
            raise Invalid(f"{shown} is too long to be used; give a shorter duration") from None


class _XsDuration(Kind):
    """An xs:duration that may count months and years (read by :meth:`cpa.duration.XsDuration.parse`, as an
    agreement's RetryInterval is), or a number of seconds; negative ones are left to the setting's check."""

    def from_toml(self, value: object, hint: str) -> Any:
        if isinstance(value, str):
            return self._xs_duration(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return XsDuration.from_timedelta(_Duration._seconds(float(value), show(value)))
        raise _wrong_type(value, 'a duration ("PT30S") or a number of seconds', hint)

    def from_text(self, text: str, hint: str) -> Any:
        if _DECIMAL.fullmatch(text):
            return XsDuration.from_timedelta(_Duration._seconds(float(text), repr(text)))
        return self._xs_duration(text)

    def show(self, value: Any) -> str:
        return json.dumps(str(value))

    @staticmethod
    def _xs_duration(text: str) -> XsDuration:
        try:
            return XsDuration.parse(text)
        except ValueError as exc:
            message = str(exc)
            if "is not an xs:duration" in message:
                message += ", or give a number of seconds"
            raise Invalid(message) from None


class _PemFile(Kind):
    """The path of a file (a PEM file); a relative one is read from the configuration file's folder."""

    def from_toml(self, value: object, hint: str) -> Any:
        return self.from_text(_string(value, hint), hint)

    def from_text(self, text: str, hint: str) -> Any:
        if not text.strip():
            raise Invalid(f"a path is empty; {hint}")
        return Path(text).expanduser()

    def resolve(self, value: Any, base_dir: Path) -> Any:
        return _resolve(value, base_dir)

    def verify(self, value: Any, base_dir: Path) -> str | None:
        if not value.exists():
            return (
                f"{str(value)!r} does not exist; give the path of a PEM file "
                f"(a relative path is read from {str(base_dir)!r})"
            )
        if not value.is_file():
            return f"{str(value)!r} is not a file; give the path of a PEM file"
        return None


class _NewFile(_PemFile):
    """The path of a file the MSH writes (its pid file): its folder must exist."""

    def verify(self, value: Any, base_dir: Path) -> str | None:
        if not value.parent.is_dir():
            return (
                f"the folder of {str(value)!r} does not exist; create it or give another path "
                f"(a relative path is read from {str(base_dir)!r})"
            )
        if value.is_dir():
            return f"{str(value)!r} is a folder; give the path of a file"
        return None


class _AgreementPath(_PemFile):
    """The path of a CPA file or of a folder of CPA files."""

    def verify(self, value: Any, base_dir: Path) -> str | None:
        if not value.exists():
            return (
                f"{str(value)!r} does not exist; give a CPA file or a folder of CPA files "
                f"(a relative path is read from {str(base_dir)!r})"
            )
        if value.is_dir() and not any(p.is_file() for p in value.glob("*.xml")):
            return f"the folder {str(value)!r} holds no *.xml file; put the CPAs there or name the CPA files"
        return None


class _Paths(Kind):
    """A list of paths: a TOML array of strings, or ``os.pathsep`` separated in the environment."""

    def __init__(self, item: _PemFile) -> None:
        self.item = item

    def from_toml(self, value: object, hint: str) -> Any:
        if not isinstance(value, list):
            raise _wrong_type(value, "a list of paths", hint)
        paths = []
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise Invalid(f"item {index + 1} {show(item)} is {type_name(item)}, not a path string; {hint}")
            paths.append(self.item.from_text(item, hint))
        return tuple(paths)

    def from_text(self, text: str, hint: str) -> Any:
        return tuple(self.item.from_text(part, hint) for part in text.split(os.pathsep) if part.strip())

    def resolve(self, value: Any, base_dir: Path) -> Any:
        return tuple(self.item.resolve(path, base_dir) for path in value)

    def verify(self, value: Any, base_dir: Path) -> str | None:
        return "; ".join(p for p in (self.item.verify(path, base_dir) for path in value) if p) or None

    def show(self, value: Any) -> str:
        return "[" + ", ".join(self.item.show(path) for path in value) + "]"


class _Texts(Kind):
    """A list of strings: a TOML array of strings, or separated by commas in the environment."""

    def from_toml(self, value: object, hint: str) -> Any:
        if not isinstance(value, list):
            raise _wrong_type(value, "a list of strings", hint)
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise Invalid(f"item {index + 1} {show(item)} is {type_name(item)}, not a string; {hint}")
        return tuple(value)

    def from_text(self, text: str, hint: str) -> Any:
        return tuple(part.strip() for part in text.split(",") if part.strip())

    def show(self, value: Any) -> str:
        return "[" + ", ".join(json.dumps(item) for item in value) + "]"


class Choice(Kind):
    """One of the values of a :class:`~enum.StrEnum` (any case)."""

    def __init__(self, enum: type[StrEnum]) -> None:
        self.enum = enum
        self.hint = "write one of " + ", ".join(f'"{member.value}"' for member in enum)

    def from_toml(self, value: object, hint: str) -> Any:
        return self.from_text(_string(value, hint), hint)

    def from_text(self, text: str, hint: str) -> Any:
        try:
            return self.enum(text.strip().lower())
        except ValueError:
            raise Invalid(f"{text!r} is not a known value; {self.hint}") from None


TEXT: Final[Kind] = _Text()
"""A string."""
STORE_URL: Final[Kind] = _StoreUrl()
"""The store's URL (a relative SQLite path is read from the configuration file's folder; a password is
never shown)."""
INTEGER: Final[Kind] = _Integer()
"""A whole number (a TOML integer, or decimal digits in the environment)."""
BOOLEAN: Final[Kind] = _Boolean()
"""true or false (in the environment also 1/0 and yes/no, any case)."""
DURATION: Final[Kind] = _Duration()
"""A fixed-length xs:duration or a number of seconds, not negative."""
XS_DURATION: Final[Kind] = _XsDuration()
"""An xs:duration that may count months (``"P1M"``), or a number of seconds: like an agreement's durations."""
TEXTS: Final[Kind] = _Texts()
"""A list of strings."""
PEM_FILE: Final[Kind] = _PemFile()
"""The path of an existing PEM file."""
PEM_FILES: Final[Kind] = _Paths(_PemFile())
NEW_FILE: Final[Kind] = _NewFile()
"""A file the MSH writes (relative: from the settings file's folder); its folder must exist."""
"""A list of paths of existing PEM files."""
AGREEMENT_PATHS: Final[Kind] = _Paths(_AgreementPath())
"""A list of CPA files or folders of CPA files, each existing."""
