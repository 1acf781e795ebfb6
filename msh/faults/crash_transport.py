"""The crash test over SMTP or AMQP (docs/transports): partner A sends to partner B over the binding while B
is killed with SIGKILL at random moments and restarted (at least twice), and, as the binding has one, the
component between them is disrupted as well: the mailbox server (Dovecot) killed and restarted, or every
connection to the broker closed by the broker. Afterwards B's application must hold each message exactly
once, payload intact, and A every message as acknowledged (the acknowledgment came back over the binding).

:func:`run_transport_crash_test` is used by the test suite (500 messages) and by ``scripts/crash_test.py
--transport smtp|amqp``.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from msh.errors import ConfigurationError
from msh.faults.dovecot import Dovecot
from msh.faults.killer import DeliveryOutcome, Victim, send_under_kills
from msh.faults.outcome import inbox_census
from msh.faults.pair import PARTY_B, Partner
from msh.faults.transport_pair import TransportKind, make_transport_pair

__all__ = [
    "BrokerConnections",
    "BrokerReliabilityReport",
    "TransportCrashReport",
    "run_broker_reliability",
    "run_transport_crash_test",
]


@dataclass(frozen=True, slots=True)
class TransportCrashReport(DeliveryOutcome):
    """What the crash test over ``transport`` saw (:class:`~msh.faults.killer.DeliveryOutcome`) and the
    disruptions by name (B's kills; the mailbox server's restarts; the broker's dropped connections)."""

    transport: str
    disruptions: tuple[tuple[str, int], ...]

    def summary(self) -> str:
        done = ", ".join(f"{name} {count}x" for name, count in self.disruptions)
        return (
            f"{self.messages} messages over {self.transport}, {done} in {self.seconds:.1f} s: sender "
            f"{self.acknowledged} acknowledged, {self.failed} failed, {self.pending} pending; receiver "
            f"{self.delivered_once} exactly once, {self.delivered_twice_or_more} more than once, {self.missing} "
            f"missing, {self.unexpected} unexpected, {self.payloads_intact} payloads intact -> "
            + ("OK" if self.ok else "FAILED")
        )


class BrokerConnections:
    """The broker's side of every client connection, as a victim: "killing" it closes them all from the
    broker (``rabbitmqctl close_all_connections``); the clients must reconnect by themselves."""

    name = "broker connections dropped"

    def __init__(self) -> None:
        self.command = shutil.which("rabbitmqctl")
        if self.command is None:
            raise ConfigurationError("rabbitmqctl is not on PATH: the broker's connections cannot be dropped")

    @property
    def alive(self) -> bool:
        return True

    def kill(self) -> None:
        assert self.command is not None
        done = subprocess.run(
            [self.command, "close_all_connections", "crash test: connection dropped"],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise ConfigurationError(f"rabbitmqctl close_all_connections failed: {done.stderr.strip() or done.stdout}")

    def start(self) -> None:
        """Nothing to start: the clients reconnect."""


def _payload(i: int) -> bytes:
    return f"<order id='{i}'>{'transport crash test ' * 90}</order>".encode()


def run_transport_crash_test(
    work: Path,
    transport: TransportKind,
    *,
    messages: int = 500,
    kill_for: float = 30.0,
    min_each: int = 2,
    mean_gap: float = 2.0,
    settle_timeout: float = 240.0,
    seed: int | None = None,
    mailbox: Dovecot | None = None,
    drop_connections: bool = False,
    amqp_url: str = "amqp://127.0.0.1:5672",
    progress: Callable[[str], None] | None = None,
) -> TransportCrashReport:
    """Run the test in ``work`` (see the module docs): ``messages`` submitted at A while B (and ``mailbox``,
    a running private Dovecot that B reads and a mail drop delivers A's mail into; or the broker's
    connections with ``drop_connections``) are disrupted at random moments for ``kill_for`` seconds, each at
    least ``min_each`` times."""
    from msh.faults.dovecot import PASSWORD, USER
    from msh.faults.maildrop import MailDrop

    say = progress or (lambda _text: None)
    login = None if mailbox is None else (mailbox.port, USER, PASSWORD)
    tp = make_transport_pair(work, transport, mailbox=login, amqp_url=amqp_url)
    victims: list[Victim] = [tp.pair.b]
    if mailbox is not None:
        victims.append(mailbox)
    if drop_connections:
        victims.append(BrokerConnections())
    drop = None
    if tp.maildrop_port is not None and mailbox is not None:
        drop = MailDrop(mailbox.maildir, tp.maildrop_port, mailbox.mail_owner)
        drop.start()
    try:
        partners: Sequence[Partner] = (tp.pair.b, tp.pair.a)
        run = send_under_kills(
            partners,
            victims,
            tp.pair.a.config,
            PARTY_B,
            messages=messages,
            payload=_payload,
            kill_for=kill_for,
            min_kills=0,
            min_each=min_each,
            mean_gap=mean_gap,
            settle_timeout=settle_timeout,
            rng=random.Random(seed),
            say=say,
        )
    finally:
        if drop is not None:
            drop.stop()
    disruptions = tuple((v.name if v is not tp.pair.b else "B killed", run.kills[v.name]) for v in victims)
    return TransportCrashReport.of(
        run, inbox_census(tp.pair.b.store, run.sent), work, transport=transport, disruptions=disruptions
    )


@dataclass(frozen=True, slots=True)
class BrokerReliabilityReport:
    """What :func:`run_broker_reliability` saw: messages, acknowledged at A, hand-offs A made (transmissions
    in its journal), and B's inbox census."""

    messages: int
    acknowledged: int
    transmissions: int
    once: int
    extra: int
    intact: int
    seconds: float

    @property
    def ok(self) -> bool:
        return self.acknowledged == self.once == self.intact == self.transmissions == self.messages and self.extra == 0

    def summary(self) -> str:
        return (
            f"{self.messages} messages with ReliableMessagingMethod Transport in {self.seconds:.1f} s: "
            f"{self.transmissions} hand-offs to the broker, {self.acknowledged} acknowledged at A, {self.once} at B "
            f"exactly once, {self.extra} extra, {self.intact} payloads intact -> " + ("OK" if self.ok else "FAILED")
        )


def run_broker_reliability(
    work: Path,
    *,
    messages: int = 50,
    receiver_down_for: float = 8.0,
    amqp_url: str = "amqp://127.0.0.1:5672",
    progress: Callable[[str], None] | None = None,
) -> BrokerReliabilityReport:
    """A sends ``messages`` to B over AMQP on a channel with ReliableMessagingMethod Transport
    (``sending.reliable_messaging_method``) while B is stopped: the broker keeps them, A resends nothing,
    and when B comes back ``receiver_down_for`` seconds later it takes them and acknowledges each; A's
    messages end delivered after exactly one hand-off each."""
    import time

    from msh.engine import OutboundStatus
    from msh.faults.outcome import journal, submit_orders, wait_final
    from msh.runtime.config import load_settings
    from msh.runtime.msh import Msh
    from msh.store.events import EventKind

    say = progress or (lambda _text: None)
    tp = make_transport_pair(work, "amqp", amqp_url=amqp_url)
    a, b = tp.pair.a, tp.pair.b
    # the reliable-messaging draft, "Queuing Transports": the transport decides whether it was delivered.
    a.env["MSH_SENDING_RELIABLE_MESSAGING_METHOD"] = "A_Channel=Transport"
    started = time.monotonic()
    try:
        b.start()  # B declares its queue, then goes away
        b.stop()
        a.start()
        sender = Msh(load_settings(a.config, env={"MSH_SENDING_RELIABLE_MESSAGING_METHOD": "A_Channel=Transport"}))
        try:
            sent = submit_orders(sender, PARTY_B, range(messages), pace=0.01)
            say(f"{messages} submitted while B is down; B starts in {receiver_down_for:g} s")
            time.sleep(receiver_down_for)
            b.start()
            final = wait_final(sender, sent, timeout=120)
        finally:
            sender.close()
        a.stop()
        b.stop()
    finally:
        a.kill()
        b.kill()
    transmissions = sum(1 for e in journal(a.store) if e.kind == EventKind.TRANSMISSION and e.message_id in sent)
    census = inbox_census(b.store, sent)
    return BrokerReliabilityReport(
        messages=messages,
        acknowledged=sum(1 for v in final.values() if v is OutboundStatus.DELIVERED),
        transmissions=transmissions,
        once=census.once,
        extra=census.extra,
        intact=census.intact,
        seconds=time.monotonic() - started,
    )
