"""What is kept of a finding: a minimal reproducer (:func:`minimise`) and a short name for it
(:func:`fingerprint`).
"""

from __future__ import annotations

import hashlib

from msh.faults.fuzz.targets import Target

__all__ = ["fingerprint", "minimise"]


def minimise(
    target: Target, data: bytes, content_type: str, signature: str, *, budget: int = 2000, seconds: float = 120.0
) -> bytes:
    """A smaller input that still gives the finding ``signature`` (an exception's signature, or
    ``"over-bound"`` for work past the linear bound): ranges are cut away while the finding stays, halving
    their size down to single bytes, within ``budget`` runs of the target and about ``seconds``."""
    import time

    deadline = time.monotonic() + seconds

    def same(candidate: bytes) -> bool:
        return target.finding(target.run(candidate, content_type), len(candidate)) == signature

    runs = 0
    size = max(1, len(data) // 2)
    while size >= 1 and runs < budget and time.monotonic() < deadline:
        start = 0
        while start < len(data) and runs < budget and time.monotonic() < deadline:
            candidate = data[:start] + data[start + size :]
            runs += 1
            if candidate != data and same(candidate):
                data = candidate
            else:
                start += size
        size //= 2
    return data


def fingerprint(data: bytes) -> str:
    """A short name for an input (the start of its SHA-256)."""
    return hashlib.sha256(data).hexdigest()[:12]
