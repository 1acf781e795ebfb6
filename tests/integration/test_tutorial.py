"""The tutorial "Connect to a partner" (docs/tutorial.md), followed literally: every command of its ``shell``
blocks runs in order, in an empty folder, on free ports in place of the page's 18401 and 18402; a line ending
in ``&`` runs in the background (as ``msh serve`` there) until the test ends. The page's promises are checked on
what the commands print: the message is delivered and lands in beta's inbox. A page that goes stale fails here.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

from msh.faults.pair import free_port

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
PORTS = ("18401", "18402")


def commands(page: str) -> list[str]:
    """The command lines of the page's ``shell`` blocks, in order."""
    blocks = re.findall(r"^```shell\n(.*?)^```", page, flags=re.S | re.M)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def _listening(port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.2)
    return False


def test_the_page_has_the_steps_it_promises() -> None:
    lines = commands(PAGE.read_text(encoding="utf-8"))
    verbs = [" ".join(shlex.split(line)[:3]) for line in lines if line.startswith("msh ")]
    for step in ("msh keys generate", "msh cpa new", "msh init alpha", "msh serve --config", "msh send --config"):
        assert any(v.startswith(step) for v in verbs), step
    assert sum(line.endswith("&") for line in lines) == 2  # both parties served


def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    ports = {page_port: str(free_port()) for page_port in PORTS}
    env = {k: v for k, v in os.environ.items() if not k.startswith("MSH_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the msh of this install
    background: list[subprocess.Popen[bytes]] = []
    printed: dict[str, str] = {}
    try:
        for n, line in enumerate(commands(PAGE.read_text(encoding="utf-8"))):
            for page_port, port in ports.items():
                line = line.replace(page_port, port)
            if line.endswith("&"):
                log = (tmp_path / f"background-{n}.log").open("wb")
                background.append(
                    subprocess.Popen(["bash", "-c", "exec " + line[:-1]], cwd=tmp_path, env=env, stdout=log, stderr=log)
                )
                continue
            if background and len(background) == len(ports) and not printed.get("served"):
                for port in ports.values():  # both msh serve listen before the first message goes
                    assert _listening(int(port), time.monotonic() + 60), f"nothing listens on {port}"
                printed["served"] = "yes"
            done = subprocess.run(
                ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150, check=False
            )
            logs = "".join(p.read_text(errors="replace") for p in tmp_path.glob("background-*.log"))
            assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}\n{logs}"
            printed[line.split(" --")[0]] = done.stdout
    finally:
        for process in background:
            process.terminate()
        for process in background:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    assert "delivered (the To party acknowledged it)" in printed["msh send"]
    assert "available" in printed["msh inbox"]
    assert "ok" in printed["msh cpa validate agreement.xml"]
    shown = printed["msh cpa show agreement.xml"]
    assert "CN=" in shown or "subject" in shown.lower(), shown  # the certificates' subjects and expiry
