"""Bounds on what the package reader accepts (:class:`MimeLimits`), and how much is read or written at a time.

Every quantity an attacker controls in a package is bounded here; going over a bound is a
:class:`~msh.errors.MimeProblemError`, never a crash or an unbounded allocation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["CHUNK", "DEFAULT_LIMITS", "MimeLimits"]


CHUNK: Final = 64 * 1024
"""How much is read from the input stream, or copied from a part body, at a time."""

_KIB: Final = 1024
_MIB: Final = 1024 * 1024
_GIB: Final = 1024 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class MimeLimits:
    """Bounds on what :func:`~msh.ebms.mime.parse_package` accepts; each one exceeded is a
    :class:`~msh.errors.MimeProblemError`.

    ``max_parts`` counts every part, the SOAP part included. ``spool_threshold`` is how much of one part's
    decoded content is kept in memory before the part spills to the package's temporary file;
    ``max_memory_bytes`` caps the in-memory content of all parts of one package together (beyond it every
    further part goes to the temporary file from its first byte). ``max_preamble_bytes`` bounds the bytes
    before the first delimiter (a wrong boundary fails after that many bytes, not at end of stream).
    """

    max_parts: int = 257  # the SOAP part and 256 payloads (a Manifest names at most 256: msh.safexml)
    max_header_bytes: int = 16 * _KIB
    max_total_bytes: int = 2 * _GIB
    max_soap_part_bytes: int = 16 * _MIB
    spool_threshold: int = 1 * _MIB
    max_memory_bytes: int = 8 * _MIB
    max_preamble_bytes: int = 64 * _KIB

    def __post_init__(self) -> None:
        for name in (
            "max_parts",
            "max_header_bytes",
            "max_total_bytes",
            "max_soap_part_bytes",
            "max_preamble_bytes",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"MimeLimits.{name} must be at least 1")
        for name in ("spool_threshold", "max_memory_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"MimeLimits.{name} must not be negative")


DEFAULT_LIMITS: Final = MimeLimits()
"""The limits :func:`~msh.ebms.mime.parse_package` applies unless given others."""
