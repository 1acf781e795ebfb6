"""``scripts/step_times.py`` (``bench_exchange.py --step-times``): the steps are timed while they run, called
again on their last input, and put back as they were."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from msh.runtime.inbound import InboundPipeline
from msh.runtime.msh import Msh
from msh.runtime.submission import Submissions
from msh.store.writer import GroupCommitWriter
from msh.testing.network import TestNetwork
from tests.support.secure_network import nobody_signs, order, run_pair

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "step_times.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("step_times", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look their module up by name
    spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules[spec.name]


def test_each_step_is_timed_replayed_and_put_back() -> None:
    script = _script()
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
    assert len(closed) == 10  # five calls of each step that can be called again
    rows = {line.split("  ")[0]: line for line in report[1:]}
    assert set(rows) == {
        "compose and serialise a submission (Submissions.prepare)",
        "parse and check the acknowledgment (InboundPipeline.read_answer)",
    }
    for line in rows.values():
        assert line.rstrip().endswith("x")  # the run's figure as a multiple of the loop's
