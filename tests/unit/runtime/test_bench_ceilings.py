"""``scripts/bench_exchange.py``: the line under each run's CPU figures, the highest rate they allow."""

from __future__ import annotations

import pytest

from tests.support.scripts import load_script


def test_each_side_is_bound_by_one_core_and_both_by_the_machine() -> None:
    a, b, both = load_script("bench_exchange").ceilings(2.0, 1.0, 2)
    assert a == pytest.approx(500)  # 1,000 ms of one core / 2 ms per message
    assert b == pytest.approx(1000)
    assert both == pytest.approx(2 * 1000 / 3)  # two cores' 2,000 ms / (2 + 1) ms per message


def test_the_line_names_the_first_bound() -> None:
    script = load_script("bench_exchange")
    assert script.ceiling_text(4.0, 1.0).endswith("the first bound: A's process")
    cores = len(script.os.sched_getaffinity(0))
    if cores == 1:
        pytest.skip("one usable core: both sides together bind first whatever the figures")
    assert script.ceiling_text(1.0, 4.0).endswith("the first bound: B's process")
    assert script.ceiling_text(1.0, 1.0).endswith(f"the first bound: the {cores} cores") == (cores < 2)
