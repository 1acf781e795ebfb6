"""``scripts/step_times.py`` (``bench_exchange.py --step-times``): the steps are timed while they run, called
again on their last input, and put back as they were."""

from __future__ import annotations

import pytest

from msh.runtime.inbound import InboundPipeline
from msh.runtime.msh import Msh
from msh.runtime.submission import Submissions
from msh.store.api import Transaction
from msh.store.memory import MemoryStore
from msh.store.writer import GroupCommitWriter
from msh.testing.network import FakeClock, TestNetwork
from tests.support.scripts import load_script
from tests.support.secure_network import nobody_signs, order, run_pair


def test_each_step_is_timed_replayed_and_put_back() -> None:
    script = load_script("step_times")
    originals = (Submissions.prepare, InboundPipeline.read_answer, GroupCommitWriter._commit)
    closed: list[object] = []
    report: list[str] = []

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        with script.timed_steps() as steps:
            for n in range(3):
                await a.submit_async(order(n))
            await net.settle()
        assert (Submissions.prepare, InboundPipeline.read_answer, GroupCommitWriter._commit) == originals
        by_label = {step.label.split(" (")[0]: step for step in steps.steps}
        prepare = by_label["compose and serialise a submission"]
        answer = by_label["parse and check the acknowledgment"]
        assert sum(prepare.calls.values()) == 3 and sum(answer.calls.values()) == 3
        assert all(ns > 0 for ns in prepare.ns.values())
        report.extend(steps.lines(3, 5, closed.append))

    run_pair(scenario, cpa=nobody_signs())
    assert len(closed) == 20  # five warm and five cold calls of each step that can be called again
    rows = {line.split("  ")[0]: line for line in report[1:]}
    assert set(rows) == {
        "compose and serialise a submission (Submissions.prepare)",
        "parse and check the acknowledgment (InboundPipeline.read_answer)",
    }
    for line in rows.values():
        ratios = [word for word in line.split() if word.endswith("x")]
        assert len(ratios) == 2  # the run's figure as a multiple of the warm loop's, then of the cold loop's


def test_the_cold_loop_sweeps_the_caches_before_each_call_and_not_in_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    script = load_script("step_times")
    per_call = load_script("per_call")
    happened: list[str] = []

    class Sha:  # stands for the sweep: hashlib.sha256 over the swept buffer
        def __init__(self, data: bytes) -> None:
            happened.append(f"sweep {len(data)}")

        def digest(self) -> bytes:
            return b""

    monkeypatch.setattr(per_call.hashlib, "sha256", Sha)

    def step(n: int) -> int:
        happened.append("call")
        return n

    timed = script._Step("a step", True, step, last=((7,), {}))
    closed: list[object] = []
    assert script.StepTimes._loop_us(timed, 3, closed.append, cold=True) is not None
    assert happened == [f"sweep {64 << 20}", "call"] * 3 and closed == [7, 7, 7]
    happened.clear()
    script.StepTimes._loop_us(timed, 2, closed.append)
    assert happened == ["call", "call"]  # the warm loop sweeps nothing


def test_per_call_counts_the_call_alone() -> None:
    """Neither the sweep nor what is done with the result is in the figure: a call that does nothing
    measures less than a millisecond although each sweep and each release costs more."""
    per_call = load_script("per_call")

    def slow_release(_result: object) -> None:
        sum(i * i for i in range(200_000))

    assert per_call.per_call_us(lambda: None, 3, sweep_bytes=64 << 20, after=slow_release) < 1000


def _spin(tx: Transaction) -> int:
    """A unit that spends some CPU time (thread time advances in ticks)."""
    return sum(i * i for i in range(20_000))


def test_the_writers_units_are_timed_by_kind_and_the_rest_is_the_transactions_own() -> None:
    script = load_script("step_times")
    writer = GroupCommitWriter(MemoryStore(clock=FakeClock()), name="test-writer")
    try:
        with script.timed_steps() as steps:
            for _ in range(3):
                writer.call(_spin)
            writer.call(lambda tx: None)
        later = writer.call(_spin)  # queued after the block: not timed
    finally:
        writer.close()
    assert later > 0
    assert steps.units.calls["_spin"] == 3  # the unit after the block is not counted
    assert sorted(steps.units.calls.values()) == [1, 3]  # and the lambda is a kind of its own
    assert steps.units.ns["_spin"] > 0
    report = steps.lines(4, 5, lambda _result: None)
    split = report.index("the store writer's group commits, split: the units by kind, then the transactions' own work")
    units = report[split + 1 :]
    assert units[0].startswith("  unit: _spin ")  # the costliest kind first; unnamed kinds by their qualname
    assert units[-1].startswith("  BEGIN, the journal, COMMIT")


def test_units_queued_after_the_block_are_not_timed() -> None:
    """The writer is put back as it was: what is queued after the block runs as it is, uncounted."""
    script = load_script("step_times")
    real_put = GroupCommitWriter._put

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        with script.timed_steps() as steps:
            await a.submit_async(order(0))
            await net.settle()
        counted = dict(steps.units.calls)
        await a.submit_async(order(1))
        await net.settle()
        assert steps.units.calls == counted

    run_pair(scenario, cpa=nobody_signs())
    assert GroupCommitWriter._put is real_put
