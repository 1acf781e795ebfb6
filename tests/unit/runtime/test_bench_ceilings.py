"""``scripts/bench_exchange.py``: the line under each run's CPU figures, the highest rate they allow."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "bench_exchange.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_exchange", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look their module up by name
    spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules[spec.name]


def test_each_side_is_bound_by_one_core_and_both_by_the_machine() -> None:
    a, b, both = _script().ceilings(2.0, 1.0, 2)
    assert a == pytest.approx(500)  # 1,000 ms of one core / 2 ms per message
    assert b == pytest.approx(1000)
    assert both == pytest.approx(2 * 1000 / 3)  # two cores' 2,000 ms / (2 + 1) ms per message


def test_the_line_names_the_first_bound() -> None:
    script = _script()
    assert script.ceiling_text(4.0, 1.0).endswith("the first bound: A's process")
    cores = len(script.os.sched_getaffinity(0))
    if cores == 1:
        pytest.skip("one usable core: both sides together bind first whatever the figures")
    assert script.ceiling_text(1.0, 4.0).endswith("the first bound: B's process")
    assert script.ceiling_text(1.0, 1.0).endswith(f"the first bound: the {cores} cores") == (cores < 2)
