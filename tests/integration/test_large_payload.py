"""A 64 MiB payload between two real ``msh serve`` processes: neither holds it whole in memory.

A's body is streamed from its store to the socket at each transmission (and again at the resend that follows
a lost answer), B's from the socket to its store; both stores keep it as a file beside the SQLite database,
not in its write-ahead log. Each process's peak resident size (``VmHWM``) may grow by well under the payload's
size over its idle size; before bodies were streamed, A grew by about 4.5 times the payload.
The scale scripts/bench_large_payload.py runs (1 GiB, 8 x 128 MiB) is beyond a test's time.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from msh.faults.pair import ACTION, PARTY_B, SERVICE, Pair, make_pair
from msh.faults.proxy import RunningProxy, run_in_thread
from msh.store import open_store
from msh.store.blob_files import folder_for

MiB = 1024 * 1024
SIZE = 64 * MiB
GROWTH_LIMIT = SIZE // 2
"""Peak RSS growth allowed per process: half the payload (measured: under 10 MB)."""


def _kib(pid: int, field: str) -> int:
    found = re.search(rf"^{field}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    assert found is not None
    return int(found.group(1)) * 1024


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Pair, RunningProxy]]:
    # The answer's wait covers B verifying and storing 64 MiB after the last byte (first resend after it).
    pair = make_pair(
        tmp_path / "pair", retries=3, retry_interval="PT5S", first_resend="PT21S", http_timeout="PT20S", lease="PT1M"
    )
    with run_in_thread(("127.0.0.1", pair.b_public_port), ("127.0.0.1", pair.b.port)) as proxy:
        try:
            pair.b.start()
            pair.a.start()
            yield pair, proxy
        finally:
            pair.stop()


def test_a_64_mib_payload_with_a_resend_stays_out_of_memory(pair: tuple[Pair, RunningProxy], tmp_path: Path) -> None:
    partners, proxy = pair
    assert partners.a.proc is not None and partners.b.proc is not None
    a_pid, b_pid = partners.a.proc.pid, partners.b.proc.pid
    payload = tmp_path / "large.bin"
    block = hashlib.sha256(b"x").digest() * 4096
    with payload.open("wb") as f:
        for _ in range(SIZE // len(block)):
            f.write(block)
    digest = hashlib.sha256(payload.read_bytes()).hexdigest()
    idle = {"A": _kib(a_pid, "VmRSS"), "B": _kib(b_pid, "VmRSS")}
    proxy.drop_next_response_after(SIZE)  # B stores it, A hears nothing: a resend of the stored bytes
    sent = subprocess.run(
        [sys.executable, "-m", "msh.cli", "send", "--config", str(partners.a.config), "--to", PARTY_B[0],
         "--service", SERVICE, "--action", ACTION, "--payload", f"{payload}=application/octet-stream"],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    message_id = sent.stdout.strip().splitlines()[-1]
    status, attempts = "", 0
    for _ in range(600):  # at most 5 minutes
        with open_store(str(partners.a.store), migrate=False) as store, store.transaction(readonly=True) as tx:
            stored = tx.get_outbound(message_id)
            assert stored is not None
            status, attempts = stored.state.status.value, stored.state.attempts
        if status in ("delivered", "failed"):
            break
        time.sleep(0.5)
    assert proxy.stats().responses_dropped == 1  # the armed loss happened (else no resend is to be expected)
    assert (status, attempts) == ("delivered", 2)  # the first answer was lost: one resend
    growth = {"A": _kib(a_pid, "VmHWM") - idle["A"], "B": _kib(b_pid, "VmHWM") - idle["B"]}
    taken = tmp_path / "taken"
    subprocess.run(
        [sys.executable, "-m", "msh.cli", "inbox", "--config", str(partners.b.config), "--take", str(taken)],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    (meta,) = taken.glob("*/message.json")
    (got,) = json.loads(meta.read_text())["payloads"]
    assert got["sha256"] == digest
    assert hashlib.sha256((meta.parent / got["file"]).read_bytes()).hexdigest() == digest
    for side, partner in (("A", partners.a), ("B", partners.b)):
        files = list(folder_for(partner.store.resolve()).glob("*.blob"))
        assert len(files) == 1, f"{side} keeps the body as one file beside its store"
    assert growth["A"] < GROWTH_LIMIT, f"A's peak RSS grew by {growth['A'] / MiB:.0f} MiB for a 64 MiB body"
    assert growth["B"] < GROWTH_LIMIT, f"B's peak RSS grew by {growth['B'] / MiB:.0f} MiB for a 64 MiB body"
