"""The admin port on the test network: MSH A and MSH B of the sample agreement (msh.testing.network), each
with its admin application reached through httpx's ASGI transport, on the network's fake clock."""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from msh.admin.app import build_admin_app, load_operators
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.msh import Msh
from msh.testing.network import TestNetwork

CONFIG = Path(__file__).resolve().parents[3] / "samples" / "config"
B_PARTY = ("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")
B_URL = "https://127.0.0.1:8082/msh"
SERVICE = "urn:example:services:ordering"
TOKEN = "ops-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def settings(name: str, *, timers: dict[str, Any] | None = None, **admin: Any) -> Settings:
    path = CONFIG / f"party-{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    data["timers"] = {**data["timers"], **(timers or {})}
    data["admin"] = {**data["admin"], "enabled": True, **admin}
    return settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})


def order(n: int) -> Submission:
    return Submission(B_PARTY, SERVICE, "NewOrder", (Payload(f"<order n='{n}'/>".encode(), "application/xml"),))


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """Every sample of a scrape, parsed by the Prometheus client's own parser: (name, sorted labels) -> value."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls))


@dataclass
class Admins:
    net: TestNetwork
    a: Msh
    b: Msh
    admin_a: httpx.AsyncClient
    admin_b: httpx.AsyncClient

    async def scrape(self, client: httpx.AsyncClient) -> Samples:
        r = await client.get("/metrics", headers=AUTH)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/plain")
        return parse(r.text)


def on_admins(
    scenario: Callable[[Admins], Awaitable[None]],
    *,
    start: bool = True,
    timers: dict[str, Any] | None = None,
    **admin: Any,
) -> None:
    async def main() -> None:
        net = TestNetwork(seed=5)
        a = net.add("a", settings("a", timers=timers, **admin))
        b = net.add("b", settings("b", timers=timers, **admin))
        if start:
            await net.start()
        env = {"MSH_OPS_TOKEN": TOKEN}
        app_a = build_admin_app(a, a.settings, operators=load_operators(a.settings, env))
        app_b = build_admin_app(b, b.settings, operators=load_operators(b.settings, env))
        async with (
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app_a), base_url="http://admin-a") as admin_a,
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app_b), base_url="http://admin-b") as admin_b,
        ):
            try:
                await scenario(Admins(net, a, b, admin_a, admin_b))
                await net.settle()
            finally:
                await net.close()

    asyncio.run(main())
