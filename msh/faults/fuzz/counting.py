"""The measure of work a fuzz target may spend on one input, and its linear bound.

:class:`OperationCounter` counts Python calls and executed lines while a target runs: the same on every
machine and in every run, unlike time. An input's work is within bounds when
``ops <= OPS_FIXED + OPS_PER_BYTE * len(input)`` (per target: :attr:`~msh.faults.fuzz.targets.Target.within`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, Final

__all__ = ["OPS_FIXED", "OPS_PER_BYTE", "OperationCounter"]

OPS_FIXED: Final = 20_000
"""The work any message may take, whatever its size (one-off work such as compiling the schemas is not
counted: :func:`~msh.faults.fuzz.targets.targets` warms every target up before use)."""
OPS_PER_BYTE: Final = 20
"""The work each byte of an input may add. Seeds measure one or two operations per byte (counted as
:class:`OperationCounter` does); a quadratic path passes this bound for inputs of a few kilobytes.
Agreements get ten times the fixed part and three times the per-byte part: their schema errors are
explained by ``xmlschema``, which walks the whole document in Python (about 20 operations per byte)."""


class OperationCounter:
    """Counts the Python calls and executed lines (each loop iteration is a line event) on this thread
    while it is active.

    ``sys.settrace`` sees every function call and every line run, loop iterations included, so the count is
    a deterministic measure of work for the same input and code, unlike elapsed time; a loop inside one C
    call (libxml2) counts once, which is why :mod:`msh.safexml` bounds what libxml2 is given.
    """

    def __init__(self) -> None:
        self.ops = 0

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        self.ops += 1
        return self._trace

    @contextmanager
    def counting(self) -> Iterator[OperationCounter]:
        previous = sys.gettrace()
        sys.settrace(self._trace)
        try:
            yield self
        finally:
            sys.settrace(previous)
