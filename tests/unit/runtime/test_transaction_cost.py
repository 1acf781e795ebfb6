"""``scripts/bench_store_steps.py --transaction-cost``: each figure is the cost of the transactions it names,
run through the store (write and read-only) or through the driver alone, as many as it says."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import pytest

from msh.store.sql import SqlStore
from tests.support.scripts import load_script


def test_each_figure_runs_its_own_transactions_as_many_times_as_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_script("bench_store_steps")
    begun: list[bool] = []
    real = SqlStore._begin

    def counting(self: SqlStore, readonly: bool) -> AbstractContextManager[Any]:
        begun.append(readonly)
        return real(self, readonly)

    monkeypatch.setattr(SqlStore, "_begin", counting)
    costs = bench.transaction_costs(rounds=2, count=30)
    assert set(costs) == {"write", "readonly", "driver"}
    # Per round: a warm-up of a tenth, then the counted loop; the driver's own loop never opens the store's.
    assert begun.count(False) == 2 * (3 + 30)
    assert begun.count(True) == 2 * (3 + 30)


def test_the_runs_report_their_commits_per_message() -> None:
    bench = load_script("bench_store_steps")
    result = bench.one_run("sqlite", bench.PG_URL, 20, 4, count=False)
    for side in "ab":
        # Commits per message times steps per commit is the steps per message: at least one on each side.
        assert result[side]["commits"] > 0
        assert result[side]["commits"] * result[side]["steps"] >= 1.0
