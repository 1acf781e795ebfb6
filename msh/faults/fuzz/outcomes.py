"""What one fuzz input did: an :class:`Outcome` (documented or not) and, when it is not, a :class:`Finding`
with a stable signature for the bug (the exception's type and the innermost frame of the project's code).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Finding", "Outcome", "undocumented"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one input did: ``kind`` (e.g. ``accepted``, ``refused:MimeProblem``, ``http:500``), whether
    that is ``documented``, the work it took (``ops``; None where not counted) and, for an undocumented
    one, ``detail`` (the exception and where it was raised)."""

    kind: str
    documented: bool
    ops: int | None = None
    detail: str = ""
    signature: str = ""


@dataclass(frozen=True, slots=True)
class Finding:
    """An input whose outcome is not documented or whose work passed the bound."""

    target: str
    outcome: Outcome
    data: bytes
    extra: str = ""


def _signature(exc: BaseException) -> tuple[str, str]:
    """A stable name for a bug: the exception type and the innermost frame of the project's code."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/msh/" in f.filename or "/cpa/" in f.filename] or frames
    where = f"{Path(ours[-1].filename).name}:{ours[-1].name}" if ours else "?"
    detail = "".join(traceback.format_exception(exc))[-4000:]
    return f"{type(exc).__name__}@{where}", detail


def undocumented(exc: BaseException, ops: int | None) -> Outcome:
    """The outcome of an exception the target does not document: a finding named by its signature."""
    signature, detail = _signature(exc)
    return Outcome(f"exception:{type(exc).__name__}", False, ops, detail, signature)
