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
from msh.faults.chain import PARTY_C, Chain, Timings, make_chain
from msh.faults.outcome import inbox_census, submit_orders, wait_final
from msh.faults.pair import free_port
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
    c_url = f"https://127.0.0.1:{chain.c.port}/msh"
    if direction == "in":
        _into_intermediary(work, chain, transport, amqp_url)
    elif transport == "smtp":
        c_smtpd = free_port()
        _retarget_route(chain.i.config, c_url, f"mailto:{MAIL_C}")
        chain.i.env.update(
            {
                "MSH_SMTP_HOST": "127.0.0.1",
                "MSH_SMTP_PORT": str(c_smtpd),
                "MSH_SMTP_SECURITY": "none",
                "MSH_SMTP_FROM_ADDRESS": "msh-i@intermediary.test",
            }
        )
        chain.c.env.update(
            {
                "MSH_SMTPD_ENABLED": "true",
                "MSH_SMTPD_HOST": "127.0.0.1",
                "MSH_SMTPD_PORT": str(c_smtpd),
                "MSH_SMTPD_DEAD_LETTERS": str(work / "dead-letters-c"),
            }
        )
    else:
        secret = work / "amqp.password"
        secret.write_text("guest\n", encoding="utf-8")
        queue = f"{amqp_url.rstrip('/')}/queue/bridge-c-{secrets.token_hex(4)}"
        _retarget_route(chain.i.config, c_url, queue)
        login = {"MSH_AMQP_USERNAME": "guest", "MSH_AMQP_PASSWORD": f"file:{secret}"}
        chain.i.env.update({**login, "MSH_AMQP_URL": f"{amqp_url.rstrip('/')}/queue/bridge-i-unused"})
        chain.c.env.update({**login, "MSH_AMQP_ENABLED": "true", "MSH_AMQP_URL": queue})
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


def _into_intermediary(work: Path, chain: Chain, transport: TransportKind, amqp_url: str) -> None:
    """A's hop to I over ``transport``: the agreement's endpoint for C (I's) moved, I receiving on it."""
    i_url = f"https://127.0.0.1:{chain.i_public_port}/msh"
    if transport == "smtp":
        i_smtpd = free_port()
        move_endpoints(chain.cpa, {i_url: f"mailto:{MAIL_I}"}, "SMTP", senders=False)
        chain.a.env.update(
            {
                "MSH_SMTP_HOST": "127.0.0.1",
                "MSH_SMTP_PORT": str(i_smtpd),
                "MSH_SMTP_SECURITY": "none",
                "MSH_SMTP_FROM_ADDRESS": "msh-a@party-a.test",
            }
        )
        chain.i.env.update(
            {
                "MSH_SMTPD_ENABLED": "true",
                "MSH_SMTPD_HOST": "127.0.0.1",
                "MSH_SMTPD_PORT": str(i_smtpd),
                "MSH_SMTPD_DEAD_LETTERS": str(work / "dead-letters-i"),
            }
        )
        return
    secret = work / "amqp.password"
    secret.write_text("guest\n", encoding="utf-8")
    queue = f"{amqp_url.rstrip('/')}/queue/bridge-i-{secrets.token_hex(4)}"
    move_endpoints(chain.cpa, {i_url: queue}, "AMQP", senders=False)
    login = {"MSH_AMQP_USERNAME": "guest", "MSH_AMQP_PASSWORD": f"file:{secret}"}
    chain.a.env.update({**login, "MSH_AMQP_URL": f"{amqp_url.rstrip('/')}/queue/bridge-a-unused"})
    chain.i.env.update({**login, "MSH_AMQP_ENABLED": "true", "MSH_AMQP_URL": queue})
