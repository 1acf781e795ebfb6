"""The crash test (DESIGN.md §5.6): two MSH processes exchange messages while each is killed with SIGKILL
at random moments and restarted; afterwards the receiving application must hold each message exactly once
(payload intact) and the sender must hold every message as acknowledged.

:func:`run_crash_test` is used by the test suite (shortened) and by ``scripts/crash_test.py`` (long).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from msh.faults.killer import send_under_kills
from msh.faults.outcome import inbox_census
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
    sent, final, kills = run.sent, run.final, run.kills
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
        seconds=run.seconds,
        work=work,
    )
