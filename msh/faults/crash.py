"""The crash test (DESIGN.md §5.6): two MSH processes exchange messages while each is killed with SIGKILL
at random moments and restarted; afterwards the receiving application must hold each message exactly once
(payload intact) and the sender must hold every message as acknowledged.

:func:`run_crash_test` is used by the test suite (shortened) and by ``scripts/crash_test.py`` (long).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from msh.faults.outcome import inbox_census, submit_orders, wait_final
from msh.faults.pair import PARTY_B, make_pair

__all__ = ["CrashReport", "run_crash_test"]


@dataclass(frozen=True, slots=True)
class CrashReport:
    """What the crash test saw; :attr:`ok` is the verdict."""

    messages: int
    kills_a: int
    kills_b: int
    acknowledged: int
    failed: int
    pending: int
    delivered_once: int
    delivered_twice_or_more: int
    missing: int
    unexpected: int
    payloads_intact: int
    seconds: float
    work: Path

    @property
    def ok(self) -> bool:
        return (
            self.acknowledged == self.messages
            and self.delivered_once == self.messages
            and self.delivered_twice_or_more == 0
            and self.unexpected == 0
            and self.payloads_intact == self.messages
        )

    def summary(self) -> str:
        return (
            f"{self.messages} messages, A killed {self.kills_a}x, B killed {self.kills_b}x (SIGKILL) in "
            f"{self.seconds:.1f} s: sender {self.acknowledged} acknowledged, {self.failed} failed, {self.pending} "
            f"pending; receiver {self.delivered_once} exactly once, {self.delivered_twice_or_more} more than once, "
            f"{self.missing} missing, {self.unexpected} unexpected, {self.payloads_intact} payloads intact -> "
            + ("OK" if self.ok else "FAILED")
        )


def _payload(i: int) -> bytes:
    return f"<order id='{i}'>{'crash-test ' * 180}</order>".encode()


def run_crash_test(
    work: Path,
    *,
    messages: int = 1000,
    kill_for: float = 30.0,
    min_kills: int = 0,
    mean_gap: float = 1.0,
    settle_timeout: float = 180.0,
    seed: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> CrashReport:
    """Run the crash test in ``work``: submit ``messages`` while killing for ``kill_for`` seconds, and on
    until at least ``min_kills`` kills were made (a slow machine restarts the processes slowly, so a count
    of kills cannot follow from a duration; the extra killing is bounded by another ``kill_for``)."""
    from msh.engine import OutboundStatus
    from msh.runtime.config import load_settings
    from msh.runtime.msh import Msh

    say = progress or (lambda _text: None)
    rng = random.Random(seed)
    pair = make_pair(work, retries=100, retry_interval="PT1S", first_resend="PT1S", http_timeout="PT0.8S", proxy=False)
    kills = Counter[str]()
    stop_killing = threading.Event()
    started = time.monotonic()

    def killer() -> None:
        end = time.monotonic() + kill_for
        limit = end + kill_for
        while not stop_killing.is_set() and (time.monotonic() < end or kills.total() < min_kills):
            if time.monotonic() >= limit:
                break
            if stop_killing.wait(rng.uniform(0.2, 2 * mean_gap)):
                break
            victim = pair.a if rng.random() < 0.5 else pair.b
            victim.kill()
            kills[victim.name] += 1
            stop_killing.wait(rng.uniform(0.05, 0.5))
            try:
                victim.start()
            except Exception as exc:  # a start that fails is retried on the next round
                say(f"restart of {victim.name} failed: {exc}")

    pair.b.start()
    pair.a.start()
    sender = Msh(load_settings(pair.a.config, env={}))
    thread = threading.Thread(target=killer, name="killer", daemon=True)
    sent: dict[str, str] = {}

    def before(i: int) -> None:
        if i and i % 200 == 0:
            say(f"{i} submitted; kills so far A {kills['A']}, B {kills['B']}")

    try:
        thread.start()
        pace = kill_for * 0.8 / max(messages, 1)
        sent = submit_orders(sender, PARTY_B, range(messages), payload=_payload, pace=pace, before=before)
        thread.join(2 * kill_for + 5)
        stop_killing.set()
        thread.join(10)
        for partner in (pair.a, pair.b):
            if not partner.alive:
                partner.start()
        say("killing over; waiting for every message to settle")
        final = wait_final(sender, sent, timeout=settle_timeout)
    finally:
        stop_killing.set()
        sender.close()
        pair.stop()
    census = inbox_census(pair.b.store, sent)
    values = list(final.values())
    return CrashReport(
        messages=messages,
        kills_a=kills["A"],
        kills_b=kills["B"],
        acknowledged=values.count(OutboundStatus.DELIVERED),
        failed=values.count(OutboundStatus.FAILED),
        pending=len(sent) - len(final),
        delivered_once=census.once,
        delivered_twice_or_more=census.twice_or_more,
        missing=census.missing,
        unexpected=census.unexpected,
        payloads_intact=census.intact,
        seconds=time.monotonic() - started,
        work=work,
    )
