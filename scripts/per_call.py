"""The CPU time of one call of a step, in a tight loop or with the processor's caches swept before each call:
shared by ``scripts/bench_codec.py --cold`` and ``scripts/bench_exchange.py --step-times``
(``scripts/step_times.py``).

A sweep reads a buffer through the caches before each call, outside the time counted, so the call finds
its code and data in none of the caches the buffer filled. :data:`SWEEPS` are the sizes the scripts print:
more than a core's own cache, and more than all of them (docs/benchmarks.md).
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Callable
from typing import Any

__all__ = ["SWEEPS", "per_call_us"]

SWEEPS: tuple[tuple[str, int], ...] = (("4 MiB", 4 << 20), ("64 MiB", 64 << 20))
"""What is read between two calls: more than a core's own cache (L2, 1 MiB on the development machine), and
more than all of them (L3, 32 MiB shared there)."""


def per_call_us(
    fn: Callable[[], Any], calls: int, *, sweep_bytes: int = 0, after: Callable[[Any], None] | None = None
) -> float:
    """Median CPU time of one call of ``fn`` in microseconds (the thread's CPU time), with ``sweep_bytes``
    read through the caches before each call; ``after`` is given each call's result (to release it). Neither
    the sweep nor ``after`` is counted."""
    sweep = bytes(sweep_bytes)
    times = []
    for _ in range(calls):
        if sweep_bytes:
            hashlib.sha256(sweep).digest()  # the caches now hold this buffer, not fn's code and data
        start = time.thread_time_ns()
        result = fn()
        times.append(time.thread_time_ns() - start)
        if after is not None:
            after(result)
    return statistics.median(times) / 1000
