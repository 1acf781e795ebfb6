"""Errors of the agreement (CPP/CPA 2.0) layer.

A bad agreement is the operator's to fix, so :class:`CpaError` is a
:class:`~msh.errors.ConfigurationError` (docs/design.md §6). It carries every :class:`CpaProblem` found in one
document at once, each saying what is wrong, where (file, line, XPath) and what to do about it, so that an
operator fixes a file in one pass instead of one error per run.

A problem of severity Warning does not stop the agreement from loading: the loader returns it with the
agreement (``CollaborationProtocolAgreement.warnings``), e.g. an unfilled signature template.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from msh.errors import ConfigurationError, Severity

__all__ = ["CpaError", "CpaProblem"]


@dataclass(frozen=True, slots=True)
class CpaProblem:
    """One problem in an agreement document.

    ``source`` is the file name (or ``<bytes>``), ``line`` the line of the offending element when known,
    ``path`` an XPath to it such as ``/CollaborationProtocolAgreement/PartyInfo[1]/DeliveryChannel[2]``
    (empty when the problem concerns the whole file), and ``message`` says what is wrong and what to do.
    ``severity`` is Error (the agreement cannot be loaded) or Warning (it loads; the operator should know).
    """

    source: str
    line: int | None
    path: str
    message: str
    severity: Severity = Severity.ERROR

    def __str__(self) -> str:
        """``file:line: path: message``; a warning reads ``file:line: path: Warning: message``."""
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        message = f"Warning: {self.message}" if self.severity is Severity.WARNING else self.message
        return f"{where}: {self.path}: {message}" if self.path else f"{where}: {message}"


class CpaError(ConfigurationError):
    """An agreement could not be loaded; ``problems`` lists every problem found (never empty).

    ``str()`` gives one line per problem, ``file:line: path: message``.
    """

    def __init__(self, problems: Iterable[CpaProblem]) -> None:
        self.problems: tuple[CpaProblem, ...] = tuple(dict.fromkeys(problems))
        if not self.problems:
            raise ValueError("CpaError needs at least one CpaProblem")
        if all(p.severity is Severity.WARNING for p in self.problems):
            raise ValueError("CpaError needs at least one CpaProblem of severity Error")
        super().__init__("\n".join(str(p) for p in self.problems))

    @property
    def source(self) -> str:
        """The document the problems were found in (that of the first problem)."""
        return self.problems[0].source
