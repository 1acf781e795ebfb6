"""Changing agreements between two real ``msh serve`` processes without a restart (issue 22): a broken
agreement and SIGHUP change nothing (the running set stays, the log says why, naming the file); a new
agreement added to both (``msh cpa add`` on B, a file and ``kill -HUP`` on A) carries a new exchange at once.
127.0.0.1, free ports, bounded waits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from msh.faults.pair import ACTION, PARTY_B, SERVICE, Partner, make_pair

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGHUP is a POSIX signal")

NEW = "cpa-demo-a-b-added"
WAIT = 30.0


def msh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "msh.cli", *args], capture_output=True, text=True, timeout=WAIT + 30, check=False
    )


def with_folder(partner: Partner, agreement: Path) -> Path:
    """Move ``partner``'s settings to a folder of agreements holding ``agreement``, with a pid file."""
    folder = partner.config.parent / f"cpas-{partner.name.lower()}"
    folder.mkdir()
    (folder / "agreement.xml").write_bytes(agreement.read_bytes())
    text = partner.config.read_text(encoding="utf-8")
    text = text.replace(f"paths = [{str(agreement)!r}]", f"paths = [{str(folder)!r}]")
    pid_file = partner.config.parent / f"{partner.name.lower()}.pid"
    text = text.replace("[server]\n", f"[server]\npid_file = {str(pid_file)!r}\n")
    partner.config.write_text(text, encoding="utf-8")
    return folder


def reload_status(pid_file: Path, generation: int) -> dict[str, Any]:
    """The reload status ``msh serve`` writes after its ``generation``-th reload (bounded wait)."""
    status_file = pid_file.with_name(pid_file.name + ".reload.json")
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if status_file.exists():
            status: dict[str, Any] = json.loads(status_file.read_text(encoding="utf-8"))
            if status["generation"] >= generation:
                return status
        time.sleep(0.05)
    raise AssertionError(f"no reload status {generation} in {status_file} within {WAIT} s")


def send(config: Path, cpa_id: str) -> subprocess.CompletedProcess[str]:
    to = ["--to", PARTY_B[0], "--to-type", PARTY_B[1], "--service", SERVICE, "--action", ACTION]
    return msh("send", "--config", str(config), *to, "--cpa-id", cpa_id, "--wait", str(int(WAIT)))


def test_sighup_puts_a_new_agreement_to_work_and_a_broken_one_changes_nothing(tmp_path: Path) -> None:
    pair = make_pair(tmp_path / "pair", proxy=False)
    folder_a, folder_b = with_folder(pair.a, pair.cpa), with_folder(pair.b, pair.cpa)
    new = tmp_path / "added.xml"
    new.write_text(pair.cpa.read_text(encoding="utf-8").replace('tp:cpaid="cpa-demo-a-b"', f'tp:cpaid="{NEW}"'))
    pid_a = pair.a.config.parent / "a.pid"
    try:
        pair.a.start()
        pair.b.start()
        assert pair.a.proc is not None and pid_a.read_text().strip() == str(pair.a.proc.pid)
        refused = send(pair.a.config, NEW)  # not an agreement of A's yet
        assert refused.returncode == 2 and NEW in refused.stderr, refused

        # A broken agreement in A's folder, and SIGHUP: nothing changes, the log says why, A goes on serving.
        (folder_a / "broken.xml").write_text("<not-a-cpa/>")
        os.kill(pair.a.proc.pid, signal.SIGHUP)
        status = reload_status(pid_a, 1)
        assert status["ok"] is False and "broken.xml" in status["problem"], status
        assert status["agreements"] == ["cpa-demo-a-b"]
        (folder_a / "broken.xml").unlink()
        assert pair.a.alive
        first = send(pair.a.config, "cpa-demo-a-b")
        assert first.returncode == 0, first

        # The new agreement: on B with msh cpa add (which signals B), on A as a file and kill -HUP.
        added = msh("cpa", "add", str(new), "--config", str(pair.b.config))
        assert added.returncode == 0, added
        assert f"agreements reloaded: {NEW}, cpa-demo-a-b; added {NEW}" in added.stdout  # in file-name order
        (folder_a / "added.xml").write_bytes(new.read_bytes())
        os.kill(pair.a.proc.pid, signal.SIGHUP)
        status = reload_status(pid_a, 2)
        assert status["ok"] is True and status["added"] == [NEW], status
        assert (folder_b / "added.xml").exists()
        second = send(pair.a.config, NEW)
        assert second.returncode == 0, second  # delivered under the new agreement, no restart

        pair.stop()
        assert not pid_a.exists()  # removed at the orderly stop
        log_a = pair.a.log.read_text()
        assert "agreements not reloaded, the running set is unchanged (cpa-demo-a-b)" in log_a
        assert "broken.xml" in log_a and "msh: stopped" in log_a
    finally:
        pair.a.kill()
        pair.b.kill()
