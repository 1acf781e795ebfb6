"""msh journal generate (realistic, deterministic, faults at known places) and the analytics commands'
command line: --help everywhere, bad input in one line, exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from msh.analytics.generate import FAULT_CASES, HUB, RELAY, generate_journal
from msh.cli import main
from tests.support.journal_reference import read_events


def test_the_generator_is_deterministic_and_realistic(tmp_path: Path) -> None:
    a = generate_journal(3000, tmp_path / "a", seed=3, partners=10, days=3, faults_per_case=2)
    b = generate_journal(3000, tmp_path / "b", seed=3, partners=10, days=3, faults_per_case=2)
    assert a.faults == b.faults and a.events == b.events >= 3000
    events = read_events(tmp_path / "a")
    assert events == read_events(tmp_path / "b")
    assert len(events) == a.events
    kinds = Counter(e["kind"] for e in events)
    for kind in ("submitted", "transmission", "delivered", "failed", "received", "duplicate", "forward", "app-taken"):
        assert kinds[kind] > 0, kind
    sources = Counter(e["source"] for e in events)
    assert HUB in sources and RELAY in sources
    # Skewed: the busiest partner sends and receives several times what the quietest does.
    partners = Counter(e["source"] for e in events if e["source"] not in (HUB, RELAY))
    assert max(partners.values()) > 4 * min(partners.values())
    # The planted faults are listed, distinct messages, and present in the journal.
    manifest = json.loads((tmp_path / "a" / "faults.json").read_text())
    assert manifest["faults"] == a.faults and set(a.faults) == set(FAULT_CASES)
    planted = [m for ids in a.faults.values() for m in ids]
    assert len(planted) == len(set(planted)) == 2 * len(FAULT_CASES)
    ids = {e["message_id"] for e in events}
    assert set(planted) <= ids
    # Every event carries its typed columns.
    assert all(e["role"] and e["cpa_id"] and e["from_party"] and e["to_party"] for e in events)


def test_generate_refuses_a_folder_that_holds_a_journal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["journal", "generate", "--events", "50", "--out", str(tmp_path)]) == 0
    assert "planted faults" in capsys.readouterr().out
    assert main(["journal", "generate", "--events", "50", "--out", str(tmp_path)]) == 2
    assert "already holds a journal" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [["export"], ["report"], ["journal"], ["journal", "generate"], ["revalidate"]],
)
def test_every_analytics_command_has_help(command: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "msh.cli", *command, "--help"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "usage: msh" in done.stdout and len(done.stdout) > 200


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report", "/no/such/folder", "--out", "/tmp/x"], "no such folder"),
        (["export", "--config", "/no/such.toml", "--out", "/tmp/x"], "such.toml"),
        (["export", "--config", "x.toml", "--out", "/tmp/x", "--since", "yesterday"], "not a time"),
        (["journal", "generate", "--events", "0", "--out", "/tmp/x"], "--events"),
    ],
)
def test_bad_input_is_an_error_line_and_status_2(argv: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "msh.cli", *argv], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.startswith("msh "), done.stderr  # msh COMMAND: error: what, where, what to do


def test_report_on_an_empty_folder_says_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "no journal files" in err and "msh export" in err
