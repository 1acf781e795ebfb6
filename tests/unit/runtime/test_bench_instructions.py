"""``scripts/bench_instructions.py``: the exchange it counts instructions of delivers every message it submits
(the figure would otherwise count a failure's instructions), and it refuses what it cannot measure."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "bench_instructions.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_instructions", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_counted_exchange_delivers_every_message() -> None:
    script = _script()
    assert script.exchange(2) == (script.WARMUP + 2, script.WARMUP + 2)


def test_the_native_run_prints_what_was_delivered_and_a_count_of_none_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--native", "--messages", "1"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("delivered 6 of 6")
    refused = subprocess.run(
        [sys.executable, str(SCRIPT), "--callgrind", "--messages", "0"], capture_output=True, text=True, check=False
    )
    assert refused.returncode == 2 and "--messages must be at least 1" in refused.stderr
