"""The crash test, shortened: both MSH processes are killed with SIGKILL at random moments while they
exchange messages; nothing acknowledged is lost and nothing is delivered twice (DESIGN.md §5.6).
The long form is ``scripts/crash_test.py``."""

from __future__ import annotations

from pathlib import Path

from msh.faults.crash import run_crash_test


def test_sigkill_at_random_moments_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    report = run_crash_test(
        tmp_path / "crash", messages=150, kill_for=12.0, min_kills=4, mean_gap=1.0, settle_timeout=120, seed=4
    )
    assert report.kills_a + report.kills_b >= 4, report.summary()
    assert report.ok, report.summary()
