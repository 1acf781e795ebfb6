"""SIGKILL at random moments (docs/design.md §5.6): a thread that kills MSH processes and restarts them
(:class:`Killer`), and the run of a crash test under it (:func:`send_under_kills`), for
:mod:`msh.faults.crash` and :mod:`msh.faults.crash_multihop`."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

from msh.faults.pair import Partner

if TYPE_CHECKING:
    from msh.engine import OutboundStatus
    from msh.faults.outcome import InboxCensus

__all__ = ["DeliveryOutcome", "KillRun", "Killer", "Victim", "send_under_kills"]


class Victim(Protocol):
    """What the :class:`Killer` kills and restarts: an MSH process (:class:`~msh.faults.pair.Partner`), a
    mailbox server, a broker's connections."""

    name: str

    @property
    def alive(self) -> bool: ...

    def kill(self) -> None: ...

    def start(self) -> None: ...


class Killer:
    """Kills one of ``victims`` (chosen at random) with SIGKILL every ``mean_gap`` seconds on average and
    restarts it a moment later, for ``kill_for`` seconds and on until at least ``min_kills`` kills were
    made, and each victim killed at least ``min_each`` times (a slow machine restarts the processes slowly,
    so a count of kills cannot follow from a duration; the extra killing is bounded by another ``kill_for``).
    ``kills`` counts the kills by partner name. A victim is anything with ``name``, ``alive``, ``kill()`` and
    ``start()``: an MSH process, a mailbox server, a broker's connections."""

    def __init__(
        self,
        victims: Sequence[Victim],
        *,
        kill_for: float,
        min_kills: int = 0,
        min_each: int = 0,
        mean_gap: float = 1.0,
        rng: random.Random,
        say: Callable[[str], None],
    ) -> None:
        self.victims = tuple(victims)
        self._min_each = min_each
        self.kills = Counter[str]()
        self._kill_for, self._min_kills, self._mean_gap = kill_for, min_kills, mean_gap
        self._rng, self._say = rng, say
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="killer", daemon=True)

    def start(self) -> None:
        """Start killing (in a daemon thread)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop killing at the next moment it would wait (idempotent)."""
        self._stop.set()

    def finish(self) -> None:
        """Wait for the killing to end by itself (bounded), stop it, and start every victim left dead."""
        self._thread.join(2 * self._kill_for + 5)
        self._stop.set()
        self._thread.join(10)
        for victim in self.victims:
            if not victim.alive:
                victim.start()

    def _short(self) -> bool:
        """Whether fewer kills than asked were made (in all, or of one victim)."""
        return self.kills.total() < self._min_kills or any(self.kills[v.name] < self._min_each for v in self.victims)

    def _run(self) -> None:
        end = time.monotonic() + self._kill_for
        limit = end + self._kill_for
        while not self._stop.is_set() and (time.monotonic() < end or self._short()):
            if time.monotonic() >= limit:
                break
            if self._stop.wait(self._rng.uniform(0.2, 2 * self._mean_gap)):
                break
            behind = [v for v in self.victims if self.kills[v.name] < self._min_each]
            victim = self._rng.choice(behind if time.monotonic() >= end and behind else self.victims)
            try:
                victim.kill()
            except Exception as exc:  # not counted: a kill that did not happen is no kill
                self._say(f"kill of {victim.name} failed: {exc}")
                continue
            self.kills[victim.name] += 1
            self._stop.wait(self._rng.uniform(0.05, 0.5))
            try:
                victim.start()
            except Exception as exc:  # a start that fails is retried on the next round
                self._say(f"restart of {victim.name} failed: {exc}")


@dataclass(frozen=True, slots=True)
class KillRun:
    """What :func:`send_under_kills` did: the messages sent (MessageId → payload SHA-256), the final status
    of those that got one, the kills by partner name and the seconds it took."""

    sent: dict[str, str]
    final: dict[str, OutboundStatus]
    kills: Counter[str]
    seconds: float


def send_under_kills(
    partners: Sequence[Partner],
    victims: Sequence[Victim],
    sender_config: Path,
    to_party: tuple[str, str],
    *,
    messages: int,
    payload: Callable[[int], bytes],
    kill_for: float,
    min_kills: int,
    mean_gap: float,
    settle_timeout: float,
    rng: random.Random,
    say: Callable[[str], None],
    min_each: int = 0,
) -> KillRun:
    """Start ``partners`` (in that order), submit ``messages`` to the store of the MSH of ``sender_config``
    while a :class:`Killer` kills ``victims``, then wait up to ``settle_timeout`` seconds for every message
    to be final. Every partner is stopped at the end, whatever happens."""
    from msh.faults.outcome import submit_orders, wait_final
    from msh.runtime.config import load_settings
    from msh.runtime.msh import Msh

    started = time.monotonic()
    killer = Killer(
        victims, kill_for=kill_for, min_kills=min_kills, min_each=min_each, mean_gap=mean_gap, rng=rng, say=say
    )

    def before(i: int) -> None:
        if i and i % 200 == 0:
            say(f"{i} submitted; kills so far " + ", ".join(f"{v.name} {killer.kills[v.name]}" for v in victims))

    try:
        for partner in partners:
            partner.start()
        sender = Msh(load_settings(sender_config, env={}))
        try:
            killer.start()
            pace = kill_for * 0.8 / max(messages, 1)
            sent = submit_orders(sender, to_party, range(messages), payload=payload, pace=pace, before=before)
            killer.finish()
            say("killing over; waiting for every message to settle")
            final = wait_final(sender, sent, timeout=settle_timeout)
        finally:
            killer.stop()
            sender.close()
    finally:
        for partner in reversed(partners):
            partner.stop()
    return KillRun(sent, final, killer.kills, time.monotonic() - started)


@dataclass(frozen=True, slots=True)
class DeliveryOutcome:
    """What a crash test saw at the sender (``acknowledged``: delivered, with the receiver's
    acknowledgment; ``failed``; ``pending``: not final in time) and in the receiving application's inbox;
    :attr:`ok` is the verdict: every message acknowledged and delivered exactly once, payload intact."""

    messages: int
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
        """One line: the figures and OK or FAILED."""
        raise NotImplementedError

    @classmethod
    def of(cls, run: KillRun, census: InboxCensus, work: Path, **more: Any) -> Self:
        """The outcome of ``run``, whose receiver's inbox is ``census``; ``more``: a subclass's fields."""
        from msh.engine import OutboundStatus

        values = list(run.final.values())
        return cls(
            messages=len(run.sent),
            acknowledged=values.count(OutboundStatus.DELIVERED),
            failed=values.count(OutboundStatus.FAILED),
            pending=len(run.sent) - len(run.final),
            delivered_once=census.once,
            delivered_twice_or_more=census.twice_or_more,
            missing=census.missing,
            unexpected=census.unexpected,
            payloads_intact=census.intact,
            seconds=run.seconds,
            work=work,
            **more,
        )
