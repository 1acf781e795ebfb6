"""The CPU time of a few steps of partner A while the reliable exchange runs, beside the same steps called in a
tight loop on the same input afterwards (``scripts/bench_exchange.py --step-times``).

Each step :func:`steps` names is wrapped in place for the run (and put back after): the wrapper adds the
calling thread's CPU time (``time.thread_time_ns``: not the time spent waiting for the interpreter lock or a
core) and remembers the arguments of the last call. After the run, the steps that can be called again
without effects (composing a submission, reading an answer) are called ``repeat`` times with those
arguments, one after the other. The two figures differ by what the processor's caches hold: in the exchange,
each message passes through many libraries between two calls of a step (HTTP, TLS, XML, the store, the
engine), so a step's code and data are mostly gone from the caches by its next call; in the loop they stay.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["StepTimes", "steps", "timed_steps"]


@dataclass
class _Step:
    """One wrapped step: CPU nanoseconds and calls by thread name, the last call's arguments."""

    label: str
    replay: bool
    real: Callable[..., Any]
    ns: dict[str, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    last: tuple[tuple[Any, ...], dict[str, Any]] | None = None


def steps() -> list[tuple[object, str, str, bool]]:
    """The steps timed, each as (owner, attribute, label, can be called again without effects); the MSH's
    modules are imported when asked for."""
    from msh.runtime.inbound import InboundPipeline
    from msh.runtime.submission import Submissions
    from msh.store.writer import GroupCommitWriter

    return [
        (Submissions, "prepare", "compose and serialise a submission (Submissions.prepare)", True),
        (InboundPipeline, "read_answer", "parse and check the acknowledgment (InboundPipeline.read_answer)", True),
        (GroupCommitWriter, "_commit", "the store writer's group commits (GroupCommitWriter._commit)", False),
    ]


class StepTimes:
    """What :func:`timed_steps` measured."""

    def __init__(self, steps: list[_Step]) -> None:
        self.steps = steps

    def lines(self, messages: int, repeat: int, close: Callable[[object], None]) -> list[str]:
        """The report: each step's CPU per call (and per message) in the run, and per call in a loop of
        ``repeat`` calls with the last call's arguments; ``close`` releases what a replayed call returns."""
        out = [
            f"step                                                                 thread        calls  per call  "
            f"per msg  loop/call  run/loop  (CPU µs, {messages} messages)"
        ]
        for step in self.steps:
            for thread, ns in sorted(step.ns.items()):
                calls = step.calls[thread]
                per_call = ns / calls / 1000
                loop = self._loop_us(step, repeat, close) if step.replay else None
                loop_text = f"{loop:9.1f}  {per_call / loop:7.1f}x" if loop else f"{'-':>9}  {'-':>8}"
                out.append(
                    f"{step.label:<68} {thread[:12]:<12} {calls:6d} {per_call:9.1f} {ns / messages / 1000:8.1f}  "
                    f"{loop_text}"
                )
        return out

    @staticmethod
    def _loop_us(step: _Step, repeat: int, close: Callable[[object], None]) -> float | None:
        if step.last is None:
            return None
        args, kwargs = step.last
        times = []
        for _ in range(repeat):
            start = time.thread_time_ns()
            result = step.real(*args, **kwargs)
            times.append(time.thread_time_ns() - start)
            close(result)
        return statistics.median(times) / 1000


@contextmanager
def timed_steps() -> Iterator[StepTimes]:
    """Wrap the :func:`steps` for the block; the :class:`StepTimes` filled while it runs."""
    lock = threading.Lock()
    wrapped: list[_Step] = []
    originals: list[tuple[object, str, Any]] = []
    for owner, name, label, replay in steps():
        real = getattr(owner, name)
        step = _Step(label, replay, real)
        wrapped.append(step)
        originals.append((owner, name, real))

        def wrapper(*args: Any, _step: _Step = step, _real: Any = real, **kwargs: Any) -> Any:
            start = time.thread_time_ns()
            try:
                return _real(*args, **kwargs)
            finally:
                spent = time.thread_time_ns() - start
                thread = threading.current_thread().name
                with lock:
                    _step.ns[thread] = _step.ns.get(thread, 0) + spent
                    _step.calls[thread] = _step.calls.get(thread, 0) + 1
                    _step.last = (args, kwargs)

        setattr(owner, name, wrapper)
    try:
        yield StepTimes(wrapped)
    finally:
        for owner, name, real in originals:
            setattr(owner, name, real)
