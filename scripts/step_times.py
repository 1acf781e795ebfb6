"""The CPU time of a few steps of partner A while the reliable exchange runs, beside the same steps called in a
tight loop on the same input afterwards (``scripts/bench_exchange.py --step-times``).

Each step :func:`steps` names is wrapped in place for the run (and put back after): the wrapper adds the
calling thread's CPU time (``time.thread_time_ns``: not the time spent waiting for the interpreter lock or a
core) and remembers the arguments of the last call. After the run, the steps that can be called again
without effects (composing a submission, reading an answer) are called ``repeat`` times with those
arguments, one after the other, and as many times again with 64 MiB read through the processor's caches
before each call (``scripts/per_call.py``, outside the time counted). The warm loop is what the step costs
when its code and data stay in the caches, the cold loop what it costs when none of them is there. In the
exchange each message passes through many libraries between two calls of a step (HTTP, TLS, XML, the store,
the engine), so the run's figure falls between the two: how far it is from the warm loop is how much of the
step's time goes to fetching its code and data again.

The store writer's group commits are split too: each unit of work queued while the block runs is timed on
the writer's thread by the kind of unit (the function that made it: a submission's, an answer's, a step of
the sending machine), and what is left of the group commits is the transaction's own work (BEGIN, the
journal's one statement, COMMIT and its disk flush, handing the results back).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from per_call import SWEEPS, per_call_us

__all__ = ["UNIT_LABELS", "StepTimes", "UnitTimes", "steps", "timed_steps"]


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


UNIT_LABELS: dict[str, str] = {
    "Submissions._unit.<locals>.unit": "a submission: the message stored, its timer set",
    "InboundPipeline.unit.<locals>.unit": "an answer: the acknowledgment with the transmission's outcome",
    "Sender.step.<locals>.unit": "a step of the sending machine alone (no answer read)",
}
"""The writer's units by the function that makes them (its ``__qualname__``), as the report names them."""


@dataclass
class UnitTimes:
    """CPU nanoseconds and calls of the writer's units, by kind (:data:`UNIT_LABELS`, else the qualname)."""

    ns: dict[str, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, spent: int) -> None:
        self.ns[kind] = self.ns.get(kind, 0) + spent
        self.calls[kind] = self.calls.get(kind, 0) + 1


class StepTimes:
    """What :func:`timed_steps` measured."""

    def __init__(self, steps: list[_Step], units: UnitTimes | None = None) -> None:
        self.steps = steps
        self.units = units if units is not None else UnitTimes()

    def lines(self, messages: int, repeat: int, close: Callable[[object], None]) -> list[str]:
        """The report: each step's CPU per call (and per message) in the run, and per call in a loop of
        ``repeat`` calls with the last call's arguments; ``close`` releases what a replayed call returns."""
        out = [
            f"step                                                                 thread        calls  per call  "
            f"per msg  loop/call  run/loop  cold/call  run/cold  (CPU µs, {messages} messages)"
        ]
        for step in self.steps:
            for thread, ns in sorted(step.ns.items()):
                calls = step.calls[thread]
                per_call = ns / calls / 1000
                loop = self._loop_us(step, repeat, close) if step.replay else None
                cold = self._loop_us(step, repeat, close, cold=True) if step.replay else None
                loop_text = " ".join(
                    f"{us:9.1f}  {per_call / us:7.1f}x" if us else f"{'-':>9}  {'-':>8}" for us in (loop, cold)
                )
                out.append(
                    f"{step.label:<68} {thread[:12]:<12} {calls:6d} {per_call:9.1f} {ns / messages / 1000:8.1f}  "
                    f"{loop_text}"
                )
        out.extend(self._unit_lines(messages))
        return out

    def _unit_lines(self, messages: int) -> list[str]:
        """The writer's units by kind, and the rest of its group commits (the transaction's own work)."""
        units = self.units
        if not units.calls:
            return []
        out = ["the store writer's group commits, split: the units by kind, then the transactions' own work"]
        for kind, ns in sorted(units.ns.items(), key=lambda item: -item[1]):
            calls = units.calls[kind]
            out.append(
                f"  unit: {UNIT_LABELS.get(kind, kind):<62} {'':<12} {calls:6d} {ns / calls / 1000:9.1f} "
                f"{ns / messages / 1000:8.1f}"
            )
        commits = [step for step in self.steps if not step.replay]
        total = sum(sum(step.ns.values()) for step in commits)
        batches = sum(sum(step.calls.values()) for step in commits)
        rest = total - sum(units.ns.values())
        if batches and rest > 0:
            out.append(
                f"  {'BEGIN, the journal, COMMIT, results handed back (per transaction)':<68} {'':<12} {batches:6d} "
                f"{rest / batches / 1000:9.1f} {rest / messages / 1000:8.1f}"
            )
        return out

    @staticmethod
    def _loop_us(step: _Step, repeat: int, close: Callable[[object], None], *, cold: bool = False) -> float | None:
        """The median CPU µs of ``repeat`` calls with the last call's arguments; ``cold``: with the last of
        :data:`per_call.SWEEPS` (more than all the processor's caches) read through the caches before each
        call, not counted."""
        if step.last is None:
            return None
        args, kwargs = step.last
        sweep = SWEEPS[-1][1] if cold else 0
        return per_call_us(lambda: step.real(*args, **kwargs), repeat, sweep_bytes=sweep, after=close)


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
    units = UnitTimes()
    from msh.store.writer import GroupCommitWriter

    real_put = GroupCommitWriter._put
    originals.append((GroupCommitWriter, "_put", real_put))

    def put(writer: GroupCommitWriter, job: Any) -> None:
        unit = job.unit
        kind = getattr(unit, "__qualname__", type(unit).__name__)

        def timed(tx: Any) -> Any:  # runs on the writer's thread
            start = time.thread_time_ns()
            try:
                return unit(tx)
            finally:
                spent = time.thread_time_ns() - start
                with lock:
                    units.add(kind, spent)

        job.unit = timed
        real_put(writer, job)

    GroupCommitWriter._put = put  # type: ignore[method-assign]
    try:
        yield StepTimes(wrapped, units)
    finally:
        for owner, name, real in originals:
            setattr(owner, name, real)
