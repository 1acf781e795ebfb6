"""Short party labels and console links of the report page, the --console-url and --log-level options, and
what the Spark session leaves out of the JVM's standard error: no Spark needed, except the last test, which
runs a small `msh report` as an operator would and reads its standard error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from msh.analytics.labels import WIDTH, console_link, ellipsize, party_label
from msh.analytics.session import LOG_LEVELS, noise
from msh.cli.analytics import LOG_LEVELS as CLI_LOG_LEVELS
from tests.analytics.conftest import SPARK_MISSING


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088:987654321", "0088:987654321"),
        ("urn:msh:partner:003", "msh:partner:003"),
        ("urn:example:a-very-long-namespace-name:orders:party-a", "orders:party-a"),
        ("123456789", "123456789"),
        (None, "-"),
        ("", "-"),
    ],
)
def test_a_party_is_shown_by_a_short_label(name: str | None, label: str) -> None:
    assert party_label(name) == label


def test_what_is_still_too_long_is_cut_in_the_middle() -> None:
    name = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088:12345678901234567890123456789"
    label = party_label(name)
    assert len(label) == WIDTH and "…" in label
    assert label.endswith(name[-15:]) and label.startswith("0088")
    assert ellipsize("short") == "short" and len(ellipsize("x" * 100, 10)) == 10


def test_a_console_link_escapes_the_message_id() -> None:
    assert console_link("http://127.0.0.1:8090/", "a-1/x@testnet") == "http://127.0.0.1:8090/messages/a-1%2Fx%40testnet"
    assert console_link("https://h/console", "m@h") == "https://h/console/messages/m%40h"


def test_the_command_line_knows_the_sessions_log_levels() -> None:
    assert CLI_LOG_LEVELS == LOG_LEVELS


@pytest.mark.parametrize(
    "line",
    [
        b"WARNING: Using incubator modules: jdk.incubator.vector\n",
        b'Setting default log level to "WARN".\n',
        b"To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).\n",
    ],
)
def test_the_start_up_lines_are_noise(line: bytes) -> None:
    assert noise(line)


def test_other_lines_of_the_jvm_are_not_noise() -> None:
    assert not noise(b"12:00:00 FATAL SparkContext: out of memory\n")
    assert not noise(b'Exception in thread "main" java.lang.OutOfMemoryError\n')
    assert not noise(b"Error: Could not find or load main class\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--console-url", "ftp://h/x"], "is not the console's base URL"),
        (["--console-url", "http://h/?q=1"], "is not the console's base URL"),
        (["--log-level", "loud"], "invalid choice"),
    ],
)
def test_bad_report_options_are_one_line(argv: list[str], message: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "msh.cli", "report", str(tmp_path), "--out", str(tmp_path / "r"), *argv],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_a_report_prints_no_spark_start_up_noise(tmp_path: Path) -> None:
    """The lines every run printed (the JVM's incubator-module warning, Spark's log-level notice) are gone
    at the default log level; the command's own lines are all there is."""
    if SPARK_MISSING is not None:
        pytest.skip(f"Spark cannot run here: {SPARK_MISSING}")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    msh = [sys.executable, "-m", "msh.cli"]
    journal = tmp_path / "j"
    subprocess.run([*msh, "journal", "generate", "--events", "300", "--out", str(journal)], check=True, env=env)
    done = subprocess.run(
        [*msh, "report", str(journal), "--out", str(tmp_path / "r"), "--shuffle-partitions", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # not a terminal: no progress line either
    assert "HTML report:" in done.stdout and "failed messages:" in done.stdout
