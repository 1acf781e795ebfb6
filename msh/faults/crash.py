"""The crash test (docs/design.md §5.6): two MSH processes exchange messages while each is killed with SIGKILL
at random moments and restarted; afterwards the receiving application must hold each message exactly once
(payload intact) and the sender must hold every message as acknowledged.

:func:`run_crash_test` is used by the test suite (shortened) and by ``scripts/crash_test.py`` (long).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from msh.faults.killer import DeliveryOutcome, send_under_kills
from msh.faults.outcome import inbox_census
from msh.faults.pair import PARTY_B, make_pair

__all__ = ["CrashReport", "run_crash_test"]


@dataclass(frozen=True, slots=True)
class CrashReport(DeliveryOutcome):
    """What the crash test saw (:class:`~msh.faults.killer.DeliveryOutcome`) and the kills of A and B;
    :attr:`ok` is the verdict."""

    kills_a: int
    kills_b: int

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
    say = progress or (lambda _text: None)
    pair = make_pair(work, retries=100, retry_interval="PT1S", first_resend="PT1S", http_timeout="PT0.8S", proxy=False)
    run = send_under_kills(
        (pair.b, pair.a),
        (pair.a, pair.b),
        pair.a.config,
        PARTY_B,
        messages=messages,
        payload=_payload,
        kill_for=kill_for,
        min_kills=min_kills,
        mean_gap=mean_gap,
        settle_timeout=settle_timeout,
        rng=random.Random(seed),
        say=say,
    )
    return CrashReport.of(
        run,
        inbox_census(pair.b.store, run.sent),
        work,
        kills_a=run.kills["A"],
        kills_b=run.kills["B"],
    )
