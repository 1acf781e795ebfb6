"""``msh demo``: the two-partner demo (two real ``msh serve`` processes and a lossy proxy) runs on free
ports while the sample ports are taken (8081 held by this test), and on the ports ``--ports`` names."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from msh.faults.pair import free_port

MESSAGES = 6


@pytest.fixture
def port_8081_taken() -> Iterator[None]:
    with socket.socket() as holder:
        with contextlib.suppress(OSError):  # already taken by something else: just as good for this test
            holder.bind(("127.0.0.1", 8081))
            holder.listen()
        yield


def demo(*extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "msh.cli", "demo", "--messages", str(MESSAGES), "--no-analytics", *extra]
    # The demo bounds each of its waits; this bound only keeps a hung run from hanging the suite.
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def assert_delivered(result: subprocess.CompletedProcess[str]) -> str:
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert f"{MESSAGES}/{MESSAGES} acknowledged at A; {MESSAGES}/{MESSAGES} in B's inbox exactly once" in out
    assert "\nevery message signed, verified and delivered exactly once\n" in out
    return out


def test_the_demo_runs_on_free_ports_while_8081_is_taken(port_8081_taken: None) -> None:
    out = assert_delivered(demo("--loss", "0.1"))
    ports = re.search(r"ports on 127\.0\.0\.1: A (\d+), B (\d+), the lossy proxy in front of B (\d+)", out)
    assert ports is not None, out
    assert 8081 not in {int(p) for p in ports.groups()}


def test_the_demo_runs_on_the_ports_given() -> None:
    chosen: list[int] = []
    while len(chosen) < 3:
        port = free_port()
        if port not in chosen:
            chosen.append(port)
    a, b, proxy = chosen
    out = assert_delivered(demo("--loss", "0", "--ports", f"{a},{b},{proxy}"))
    assert f"ports on 127.0.0.1: A {a}, B {b}, the lossy proxy in front of B {proxy}" in out
