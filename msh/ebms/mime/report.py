"""Strict and lenient reading of a package: in strict mode a deviation from the specifications is a
:class:`~msh.errors.MimeProblemError`; in lenient mode it is collected as a ``Warning`` issue."""

from __future__ import annotations

from typing import Final, NoReturn

from msh.errors import ErrorCode, Issue, MimeProblemError, Severity

__all__ = ["Report", "fail"]


_MAX_WARNINGS: Final = 100  # Warnings kept per package at most


class Report:
    """Strict mode raises at the first deviation; lenient mode collects one Warning per kind and place."""

    __slots__ = ("bare_lf", "issues", "lenient")

    def __init__(self, lenient: bool) -> None:
        self.lenient = lenient
        self.issues: dict[tuple[str, str], Issue] = {}
        self.bare_lf = False

    def deviation(self, description: str, location: str = "") -> None:
        """A deviation from the specifications: raised in strict mode, else kept as a Warning."""
        if not self.lenient:
            raise MimeProblemError(description, location=location)
        key = (description, location)
        if key not in self.issues and len(self.issues) < _MAX_WARNINGS:
            self.issues[key] = Issue(ErrorCode.MIME_PROBLEM, Severity.WARNING, description, location)

    def bare_line_feed(self) -> None:
        """A line ended by LF alone: one deviation per package, however many such lines."""
        if not self.bare_lf:
            self.bare_lf = True
            # RFC 2046 §5.1.1 / RFC 2045 §2.1: delimiters and header lines end with CRLF.
            self.deviation("bare LF line endings instead of CRLF")


def fail(description: str, location: str = "") -> NoReturn:
    """An error in both modes (location ``cid:...`` for a part, empty for the package)."""
    raise MimeProblemError(description, location=location)
