"""The multi-hop crash test (docs/design.md §5.4-§5.6, ebMS2 §10): A sends to C through the intermediary I while
I and C are killed with SIGKILL at random moments and restarted; afterwards C's application must hold each
message exactly once (payload intact) and A every message as ``delivered`` (C's end-to-end acknowledgment,
back through I).

The three MSHs run the multi-hop samples with free ports (:mod:`msh.faults.chain`) and short timings: A
resends every second, up to 200 times (so its end-to-end deadline is minutes away), and so do I and C on
their routes. :func:`run_multihop_crash_test` is used by the test suite (shortened) and by
``scripts/crash_test.py --multihop`` (long).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from msh.faults.chain import PARTY_C, Timings, make_chain
from msh.faults.killer import DeliveryOutcome, send_under_kills
from msh.faults.outcome import EventCounts, inbox_census, journal, order_payload
from msh.store.events import EventKind

__all__ = ["CRASH_TIMINGS", "MultihopCrashReport", "run_multihop_crash_test"]

CRASH_TIMINGS = Timings(
    retries=200,
    retry_interval="PT1S",
    route_retries=200,
    route_retry_interval="PT1S",
    first_resend="PT1S",
    http_timeout="PT0.8S",
    connect_timeout="PT0.5S",
    poll="PT0.2S",
    lease="PT2S",
    renew="PT0.5S",
)
"""Resends every second, many of them; a dead process's timers are taken over after 2 s (a live one renews
its claims every half second)."""


@dataclass(frozen=True, slots=True)
class MultihopCrashReport(DeliveryOutcome):
    """What the multi-hop crash test saw (:class:`~msh.faults.killer.DeliveryOutcome`: ``acknowledged``
    counts the messages ``delivered`` at A, by C's end-to-end acknowledgment) and the kills of I and C;
    :attr:`ok` is the verdict.

    ``duplicates_eliminated`` counts the copies C received again and did not deliver; ``resends`` the
    resends on each hop, from the journals: A→I (A's messages), I→C (I's forwards), C→I (C's end-to-end
    acknowledgments) and I→A (the acknowledgments I relays); ``forwarded_copies`` the copies of A's
    messages I stored and forwarded (a resent copy is forwarded again: no duplicate elimination at an
    intermediary, ebMS2 §10.1)."""

    kills_i: int
    kills_c: int
    duplicates_eliminated: int
    resends: dict[str, int]
    forwarded_copies: int

    def summary(self) -> str:
        resends = ", ".join(f"{hop} {count}" for hop, count in self.resends.items())
        return (
            f"{self.messages} messages A -> I -> C, I killed {self.kills_i}x, C killed {self.kills_c}x (SIGKILL) in "
            f"{self.seconds:.1f} s: A {self.acknowledged} delivered (end-to-end acknowledgment), {self.failed} failed, "
            f"{self.pending} pending; C {self.delivered_once} exactly once, {self.delivered_twice_or_more} more than "
            f"once, {self.missing} missing, {self.unexpected} unexpected, {self.payloads_intact} payloads intact; "
            f"{self.duplicates_eliminated} duplicates eliminated at C; {self.forwarded_copies} copies forwarded by I; "
            f"resends {resends} -> " + ("OK" if self.ok else "FAILED")
        )


def run_multihop_crash_test(
    work: Path,
    *,
    messages: int = 1000,
    kill_for: float = 60.0,
    min_kills: int = 0,
    mean_gap: float = 1.0,
    settle_timeout: float = 300.0,
    seed: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> MultihopCrashReport:
    """Run the multi-hop crash test in ``work``: submit ``messages`` to A while killing I and C for
    ``kill_for`` seconds, and on until at least ``min_kills`` kills were made (bounded by another
    ``kill_for``); then wait up to ``settle_timeout`` seconds for every message to be final at A."""
    chain = make_chain(work, timings=CRASH_TIMINGS, proxies=False)
    run = send_under_kills(
        chain.partners,
        (chain.i, chain.c),
        chain.a.config,
        PARTY_C,
        messages=messages,
        payload=order_payload,
        kill_for=kill_for,
        min_kills=min_kills,
        mean_gap=mean_gap,
        settle_timeout=settle_timeout,
        rng=random.Random(seed),
        say=progress or (lambda _text: None),
    )
    a, i, c = (EventCounts.of(journal(p.store), run.sent) for p in (chain.a, chain.i, chain.c))
    return MultihopCrashReport.of(
        run,
        inbox_census(chain.c.store, run.sent),
        work,
        kills_i=run.kills[chain.i.name],
        kills_c=run.kills[chain.c.name],
        duplicates_eliminated=c.ours[EventKind.DUPLICATE],
        resends={
            "A->I": a.ours[EventKind.RESENT],
            "I->C": i.ours[EventKind.RESENT],
            "C->I": c.others[EventKind.RESENT],
            "I->A": i.others[EventKind.RESENT],
        },
        forwarded_copies=i.ours[EventKind.FORWARD],
    )
