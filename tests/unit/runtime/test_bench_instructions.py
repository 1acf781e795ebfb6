"""``scripts/bench_instructions.py``: the exchange it counts instructions of delivers every message it submits
(the figure would otherwise count a failure's instructions), and it refuses what it cannot measure."""

from __future__ import annotations

import gc
import subprocess
import sys

from tests.support.scripts import SCRIPTS, load_script


def test_the_counted_exchange_delivers_every_message() -> None:
    script = load_script("bench_instructions")
    assert script.exchange(2) == (script.WARMUP + 2, script.WARMUP + 2)


def test_the_collector_is_paused_for_the_counted_messages_only() -> None:
    script = load_script("bench_instructions")
    seen: list[bool] = []
    pause = script.pause_collector

    def watched() -> None:
        pause()
        seen.append(gc.isenabled())

    script.pause_collector = watched
    try:
        for messages in (0, 1):
            assert script.exchange(messages) == (script.WARMUP + messages, script.WARMUP + messages)
            assert gc.isenabled()  # on again once the exchange is over
    finally:
        script.pause_collector = pause
    assert seen == [False, False]  # paused once in each run, the one with none counted too


def test_the_native_run_prints_what_was_delivered_and_a_count_of_none_is_refused() -> None:
    script = str(SCRIPTS / "bench_instructions.py")
    done = subprocess.run(
        [sys.executable, script, "--native", "--messages", "1"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("delivered 6 of 6")
    refused = subprocess.run(
        [sys.executable, script, "--callgrind", "--messages", "0"], capture_output=True, text=True, check=False
    )
    assert refused.returncode == 2 and "--messages must be at least 1" in refused.stderr
