"""Traffic for the console's tests, made by real MSHs: A and B of the demo agreement on the in-process test
network (msh.testing.network), A on an SQLite file the console then reads.

Over the five hours before ``end``, A sends orders to B (each delivered: B's acknowledgment comes back), B
sends order responses to A (they wait in A's inbox), and one order of A's fails because B's endpoint is down
(its retries run out: a DeliveryFailure, ebMS2 §6.5.7)."""

from __future__ import annotations

import asyncio
import tomllib
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from msh.engine import OutboundStatus
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import Settings, settings_from_mapping
from msh.store import open_store
from msh.store.api import OutboundMessage
from msh.testing.network import TestNetwork

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "samples" / "config"
TYPE = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
PARTY_A, PARTY_B = "123456789", "987654321"
SERVICE = "urn:example:services:ordering"
B_URL = "https://127.0.0.1:8082/msh"
ORDERS = 9
RESPONSES = 4


@dataclass(frozen=True)
class Traffic:
    """What the scenario left in A's store: A's settings, and the MessageIds by outcome."""

    settings: Settings
    delivered: tuple[str, ...]
    failed: str
    received: tuple[str, ...]


def _settings(name: str, store_url: str) -> Settings:
    path = CONFIG / f"party-{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": store_url}
    return settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})


def _is(stored: OutboundMessage | None, status: OutboundStatus) -> bool:
    return stored is not None and stored.state.status is status


def _order(to: str, action: str, n: int) -> Submission:
    body = f"<{action} n='{n}'><item sku='A-{n:03d}' quantity='{n + 1}'/></{action}>".encode()
    return Submission((to, TYPE), SERVICE, action, (Payload(body, "application/xml", f"{action.lower()}-{n}@example"),))


async def _run(settings_a: Settings, settings_b: Settings, store_path: Path, end: datetime) -> Traffic:
    net = TestNetwork(seed=7, start=end - timedelta(hours=5))
    a = net.add("a", settings_a, store=open_store(str(store_path), clock=net.clock))
    b = net.add("b", settings_b)
    await net.start()
    try:
        delivered, received = [], []
        for n in range(ORDERS):
            net.faults.delay = timedelta(milliseconds=150 + 90 * (n % 5))  # each way: the latency varies
            order = await a.submit_async(_order(PARTY_B, "NewOrder", n))
            delivered.append(order)
            await net.run_until(lambda order=order: _is(a.status(order), OutboundStatus.DELIVERED))
            if n < RESPONSES:
                response = await b.submit_async(_order(PARTY_A, "OrderResponse", n))
                received.append(response)
                await net.run_until(lambda response=response: _is(b.status(response), OutboundStatus.DELIVERED))
            await net.advance(timedelta(minutes=29))
        net.faults.delay = timedelta(0)
        net.faults.down.add(B_URL)
        failed = await a.submit_async(_order(PARTY_B, "NewOrder", 99))
        await net.settle()
        for _ in range(40):
            status = a.status(failed)
            if status is not None and status.state.status is OutboundStatus.FAILED:
                break
            await net.advance(timedelta(seconds=5))
        net.faults.down.discard(B_URL)
        for message_id in delivered:
            status = a.status(message_id)
            assert status is not None and status.state.status is OutboundStatus.DELIVERED, status
        return Traffic(settings_a, tuple(delivered), failed, tuple(received))
    finally:
        await net.close()


def make_traffic(folder: Path, end: datetime) -> Traffic:
    """Run the scenario, ending at ``end``; A's store is ``folder/a.sqlite``."""
    store_path = folder / "a.sqlite"
    settings_a = _settings("a", str(store_path))
    settings_b = _settings("b", "memory:")
    return asyncio.run(_run(settings_a, settings_b, store_path, end))
