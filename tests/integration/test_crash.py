"""The crash test, shortened: MSH processes are killed with SIGKILL at random moments while they exchange
messages; nothing acknowledged is lost and nothing is delivered twice (docs/design.md §5.6).
The long form is ``scripts/crash_test.py`` (``--multihop`` for the form through an intermediary, ``--nodes 3
--store postgresql`` for several nodes of one party on one database)."""

from __future__ import annotations

from pathlib import Path

import pytest

from msh.faults.crash import run_crash_test
from msh.faults.crash_multihop import run_multihop_crash_test


def test_sigkill_at_random_moments_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    report = run_crash_test(
        tmp_path / "crash", messages=150, kill_for=12.0, min_kills=4, mean_gap=1.0, settle_timeout=120, seed=4
    )
    assert report.kills_a + report.kills_b >= 4, report.summary()
    assert report.ok, report.summary()


def test_sigkill_of_the_intermediary_and_c_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    # ebMS2 §10: A -> I -> C; I and C die at random moments; every message reaches C's application once
    # and ends delivered at A (C's end-to-end acknowledgment, back through I).
    report = run_multihop_crash_test(
        tmp_path / "crash", messages=60, kill_for=10.0, min_kills=3, mean_gap=1.0, settle_timeout=120, seed=5
    )
    # The seed fixes which process each kill hits: the first three hit both.
    assert report.kills_i >= 1 and report.kills_c >= 1 and report.kills_i + report.kills_c >= 3, report.summary()
    assert report.ok, report.summary()
    assert report.acknowledged == report.delivered_once == report.payloads_intact == 60, report.summary()
    assert report.forwarded_copies >= 60, report.summary()


def test_sigkill_of_cluster_nodes_on_one_postgresql_store_loses_nothing_and_strands_no_timer(tmp_path: Path) -> None:
    # docs/cluster.md: three nodes of A on one PostgreSQL schema, killed at random; every message reaches B's
    # application once, and what a dead node had claimed is taken over (no timer or lease left at the end).
    from msh.faults.crash_cluster import run_cluster_crash_test
    from tests.conftest import PG_URL, postgres_unavailable

    reason = postgres_unavailable()
    if reason is not None:
        pytest.skip(reason)
    report = run_cluster_crash_test(
        tmp_path / "cluster",
        nodes=3,
        postgres_url=PG_URL,
        messages=300,
        kill_for=10.0,
        min_kills=2,
        mean_gap=1.0,
        settle_timeout=120,
        seed=3,
    )
    assert sum(count for _, count in report.kills) >= 2, report.summary()
    assert report.ok, report.summary()
    assert report.acknowledged == report.delivered_once == report.payloads_intact == 300, report.summary()
    assert (report.timers_left, report.leases_left) == (0, 0), report.summary()
