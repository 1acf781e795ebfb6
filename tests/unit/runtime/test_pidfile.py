"""The pid file of msh serve (server.pid_file): one live server per file, a stale file replaced, only our own
file removed; and the wait for the reload status a server writes beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from msh.errors import ConfigurationError
from msh.runtime.pidfile import (
    read_status,
    remove_pid_file,
    running_server,
    wait_for_reload,
    write_pid_file,
    write_status,
)

GONE = 999_999_999  # no such process


@pytest.fixture
def other() -> Iterator[int]:
    """The pid of another live process (a sleeping child), ended afterwards."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait(10)


def test_a_pid_file_of_a_live_server_is_not_taken_over(tmp_path: Path, other: int) -> None:
    path = tmp_path / "msh.pid"
    path.write_text(f"{other}\n")
    assert running_server(path) == other
    with pytest.raises(ConfigurationError, match=rf"names process {other}, which is running: another msh serve"):
        write_pid_file(path)
    remove_pid_file(path)  # not ours: left alone
    assert path.read_text() == f"{other}\n"


def test_a_stale_pid_file_is_replaced_and_ours_removed_at_the_stop(tmp_path: Path) -> None:
    path = tmp_path / "msh.pid"
    path.write_text(f"{GONE}\n")
    assert running_server(path) is None
    write_pid_file(path)
    assert path.read_text() == f"{os.getpid()}\n"
    write_status(path, {"pid": os.getpid(), "generation": 1, "ok": True})
    remove_pid_file(path)
    assert not path.exists() and read_status(path) is None


def test_the_wait_returns_only_a_newer_status_of_that_server(tmp_path: Path, other: int) -> None:
    path = tmp_path / "msh.pid"
    before = {"pid": other, "generation": 2, "ok": True}
    write_status(path, before)
    assert wait_for_reload(path, other, before, timeout=0.2) is None  # nothing newer came
    write_status(path, {"pid": other, "generation": 3, "ok": False, "problem": "x.xml cannot be used"})
    status = wait_for_reload(path, other, before, timeout=5)
    assert status is not None and status["problem"] == "x.xml cannot be used"
    # A status of an earlier server process counts as none: the first reload of this one is awaited.
    assert wait_for_reload(path, os.getpid(), {"pid": GONE, "generation": 7}, timeout=0.2) is None
