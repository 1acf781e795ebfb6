"""SIGTERM stops a real ``msh serve`` process in order under traffic: exit status 0, ``msh: stopped``, and
nothing it acknowledged missing from its store. Every wait is bounded."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

from msh.engine import OutboundStatus
from msh.faults.pair import ACTION, PARTY_B, SERVICE, Partner, make_pair
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import load_settings
from msh.runtime.msh import Msh
from msh.store import open_store


def inbox(store: Path) -> Counter[str]:
    with open_store(str(store), migrate=False) as opened, opened.transaction(readonly=True) as tx:
        return Counter(e.message_id for e in tx.inbox_list(None, limit=100_000))


def terminate(partner: Partner, timeout: float = 30.0, signum: int = signal.SIGTERM) -> tuple[int, str]:
    """Send ``signum`` to the partner's process; its exit status and the last line of its log."""
    proc = partner.proc
    assert proc is not None and proc.poll() is None, "the partner is not running"
    proc.send_signal(signum)
    try:
        status = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise AssertionError(f"partner {partner.name} did not stop within {timeout:g} s after {signum}") from None
    finally:
        partner.proc = None
    lines = partner.log.read_text(errors="replace").strip().splitlines()
    return status, lines[-1] if lines else ""


class Feeder(threading.Thread):
    """Submits a message to A's store every few milliseconds until stopped (A's timer loop sends them)."""

    def __init__(self, msh: Msh) -> None:
        super().__init__(name="feeder", daemon=True)
        self.msh = msh
        self.ids: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.halt.is_set() and n < 2000:
            payload = Payload(f"<order n='{n}'>{'x' * 1000}</order>".encode(), "application/xml")
            self.ids.append(self.msh.submit(Submission(PARTY_B, SERVICE, ACTION, (payload,))))
            n += 1
            time.sleep(0.005)


def test_sigterm_under_traffic_stops_in_order_and_loses_nothing_acknowledged(tmp_path: Path) -> None:
    pair = make_pair(tmp_path / "pair", proxy=False, retries=20, retry_interval="PT1S", first_resend="PT1S")
    pair.b.start()
    pair.a.start()
    msh = Msh(load_settings(pair.a.config, env={}))
    feeder = Feeder(msh)
    try:
        feeder.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(inbox(pair.b.store).values()) < 30:
            time.sleep(0.05)
        assert sum(inbox(pair.b.store).values()) >= 30, "no traffic reached B"

        # B is stopped while A keeps sending to it.
        status_b, last_b = terminate(pair.b)
        # A is stopped while messages keep coming and its transmissions to B fail.
        time.sleep(0.5)
        status_a, last_a = terminate(pair.a)
        feeder.halt.set()
        feeder.join(10)

        delivered = [
            m for m in feeder.ids if (s := msh.status(m)) is not None and s.state.status is OutboundStatus.DELIVERED
        ]
    finally:
        feeder.halt.set()
        msh.close()
        pair.stop()

    assert (status_b, status_a) == (0, 0), (pair.b.log.read_text(), pair.a.log.read_text())
    assert last_b.startswith("msh: stopped (") and "received" in last_b, last_b
    assert last_a.startswith("msh: stopped (") and "transmissions" in last_a, last_a
    assert len(feeder.ids) > len(delivered) >= 30  # stopped mid-traffic: some were still on their way
    # Every message B acknowledged (A holds its acknowledgment) is in B's store, exactly once.
    received = inbox(pair.b.store)
    assert {m: received[m] for m in delivered} == dict.fromkeys(delivered, 1)
    assert "Traceback" not in pair.a.log.read_text() + pair.b.log.read_text()


def test_ctrl_c_stops_in_order_with_status_0(tmp_path: Path) -> None:
    pair = make_pair(tmp_path / "pair", proxy=False)
    pair.b.start()
    try:
        status, last = terminate(pair.b, signum=signal.SIGINT)
    finally:
        pair.stop()
    assert (status, last) == (0, "msh: stopped (no traffic)"), pair.b.log.read_text()
