"""An intermediary that bridges bindings (ebMS2 §10, docs/transports): A sends to C through I, one hop over
HTTPS and the other by mail (SMTP, ebMS2 Appendix B.3) or through an AMQP 1.0 broker; C's acknowledgments
come back to A through I over HTTPS.

:func:`run_bridge` starts the multi-hop samples (:func:`msh.faults.chain.make_chain`, no proxies) with one
hop moved to the other binding: ``out``, I's route to C (its ``next_hop`` becomes ``mailto:`` or
``amqp://``, C receives on that binding: its own SMTP listener, or its own address on the broker); ``in``,
A's hop to I (the agreement's endpoint for C, which is I's, becomes I's mail address or queue, and I
receives on that binding and forwards over HTTPS). It submits messages at A and waits until each is final.
The verdict: every message delivered to C's application exactly once and acknowledged end to end at A.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from msh.errors import ConfigurationError
from msh.faults.chain import PARTY_C, Timings, make_chain
from msh.faults.outcome import inbox_census, submit_orders, wait_final
from msh.faults.pair import Partner, free_port
from msh.faults.transport_pair import TransportKind, move_endpoints

__all__ = ["BridgeReport", "run_bridge"]

MAIL_C, MAIL_I = "msh-c@party-c.test", "msh-i@intermediary.test"


@dataclass(frozen=True, slots=True)
class BridgeReport:
    """What a bridge run saw: messages, acknowledged end to end at A, at C exactly once / more / missing."""

    transport: str
    direction: str
    messages: int
    acknowledged: int
    once: int
    extra: int
    missing: int
    intact: int
    seconds: float

    @property
    def ok(self) -> bool:
        return self.acknowledged == self.once == self.intact == self.messages and self.extra == 0

    def summary(self) -> str:
        return (
            f"{self._path()}: {self.messages} messages in {self.seconds:.1f} s, "
            f"{self.acknowledged} acknowledged end to end at A, {self.once} at C exactly once, {self.extra} extra, "
            f"{self.missing} missing, {self.intact} payloads intact -> " + ("OK" if self.ok else "FAILED")
        )

    def _path(self) -> str:
        if self.direction == "in":
            return f"A -> I ({self.transport}) -> C (HTTPS)"
        return f"A -> I (HTTPS) -> C ({self.transport})"


def _retarget_route(config: Path, old: str, new: str) -> None:
    """Point the route of I's settings whose next hop is ``old`` at ``new``."""
    text = config.read_text(encoding="utf-8")
    line = f'next_hop = "{old}"'
    if text.count(line) != 1:
        raise ConfigurationError(f"{config}: expected one route with {line}; update {__name__}")
    config.write_text(text.replace(line, f'next_hop = "{new}"'), encoding="utf-8")


def run_bridge(
    work: Path,
    transport: TransportKind,
    *,
    direction: Literal["in", "out"] = "out",
    messages: int = 20,
    amqp_url: str = "amqp://127.0.0.1:5672",
) -> BridgeReport:
    """Run the bridge in ``work`` (see the module docs)."""
    from msh.engine import OutboundStatus
    from msh.runtime.config import load_settings
    from msh.runtime.msh import Msh

    timings = Timings(retry_interval="PT3S", route_retry_interval="PT2S", first_resend="PT3S", poll="PT0.2S")
    chain = make_chain(work, timings=timings, proxies=False)
    # The hop over the other binding: A -> I ("in", the agreement's endpoint for C is I's) or I -> C ("out",
    # I's route to C).
    hop_sender, hop_receiver = (chain.a, chain.i) if direction == "in" else (chain.i, chain.c)
    old = f"https://127.0.0.1:{chain.i_public_port if direction == 'in' else chain.c.port}/msh"
    if transport == "smtp":
        address = MAIL_I if direction == "in" else MAIL_C
        new = f"mailto:{address}"
        _mail_hop(work, hop_sender, hop_receiver)
    else:
        new = f"{amqp_url.rstrip('/')}/queue/bridge-{hop_receiver.name.lower()}-{secrets.token_hex(4)}"
        _queue_hop(work, hop_sender, hop_receiver, new, amqp_url)
    if direction == "in":
        move_endpoints(chain.cpa, {old: new}, transport.upper(), senders=False)
    else:
        _retarget_route(chain.i.config, old, new)
    started = time.monotonic()
    try:
        for partner in chain.partners:
            partner.start()
        sender = Msh(load_settings(chain.a.config, env={}))
        try:
            sent = submit_orders(sender, PARTY_C, range(messages), pace=0.02)
            final = wait_final(sender, sent, timeout=180)
        finally:
            sender.close()
        chain.stop()
    finally:
        chain.kill()
    census = inbox_census(chain.c.store, sent)
    return BridgeReport(
        transport=transport,
        direction=direction,
        messages=messages,
        acknowledged=sum(1 for v in final.values() if v is OutboundStatus.DELIVERED),
        once=census.once,
        extra=census.extra,
        missing=census.missing,
        intact=census.intact,
        seconds=time.monotonic() - started,
    )


def _mail_hop(work: Path, sender: Partner, receiver: Partner) -> None:
    """``sender`` mails through ``receiver``'s own SMTP listener (a free port) as its relay."""
    port = free_port()
    sender.env.update(
        {
            "MSH_SMTP_HOST": "127.0.0.1",
            "MSH_SMTP_PORT": str(port),
            "MSH_SMTP_SECURITY": "none",
            "MSH_SMTP_FROM_ADDRESS": f"msh-{sender.name.lower()}@bridge.test",
        }
    )
    receiver.env.update(
        {
            "MSH_SMTPD_ENABLED": "true",
            "MSH_SMTPD_HOST": "127.0.0.1",
            "MSH_SMTPD_PORT": str(port),
            "MSH_SMTPD_DEAD_LETTERS": str(work / f"dead-letters-{receiver.name.lower()}"),
        }
    )


def _queue_hop(work: Path, sender: Partner, receiver: Partner, queue: str, amqp_url: str) -> None:
    """``sender`` puts messages on ``queue``, which ``receiver`` consumes (user guest on the broker)."""
    secret = work / "amqp.password"
    secret.write_text("guest\n", encoding="utf-8")
    login = {"MSH_AMQP_USERNAME": "guest", "MSH_AMQP_PASSWORD": f"file:{secret}"}
    sender.env.update({**login, "MSH_AMQP_URL": f"{amqp_url.rstrip('/')}/queue/bridge-unused"})
    receiver.env.update({**login, "MSH_AMQP_ENABLED": "true", "MSH_AMQP_URL": queue})
