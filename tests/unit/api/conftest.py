"""The application interfaces on the test network: MSH A and MSH B (msh.testing.network), each with its
REST interface reached through httpx's ASGI transport on the network's event loop and fake clock."""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from msh.api.app import create_app
from msh.api.auth import Applications
from msh.api.context import ApiContext
from msh.api.soarity import format_msg_create
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.msh import Msh
from msh.testing.network import TestNetwork

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "samples" / "config"
PARTY_B = {"partyId": "987654321", "type": "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"}
SERVICE, ACTION = "urn:example:services:ordering", "NewOrder"
TOKENS = {"erp": "erp-token-0123456789abcdef", "crm": "crm-token-0123456789abcdef"}
AUTH = {"Authorization": f"Bearer {TOKENS['erp']}"}
OTHER = {"Authorization": f"Bearer {TOKENS['crm']}"}


def settings(name: str, **api: Any) -> Settings:
    path = CONFIG / f"party-{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    data["api"] = {**data["api"], "enabled": True, "lease": "PT5M", "inbox_ttl": "PT1H", **api}
    return settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})


def order(n: int = 0, **extra: Any) -> dict[str, Any]:
    import base64

    content = base64.b64encode(f"<order n='{n}'/>".encode()).decode()
    return {
        "to": PARTY_B,
        "service": SERVICE,
        "action": ACTION,
        "payloads": [{"contentType": "application/xml", "data": content}],
        **extra,
    }


def pair(message_id: str, created: datetime) -> dict[str, str]:
    return {"Message-ID": message_id, "MsgCreate": format_msg_create(created)}


@dataclass
class Apis:
    net: TestNetwork
    a: Msh
    b: Msh
    api_a: httpx.AsyncClient
    api_b: httpx.AsyncClient
    ctx_a: ApiContext
    ctx_b: ApiContext

    @property
    def now(self) -> datetime:
        return self.net.clock()

    async def advance(self, seconds: float) -> None:
        await self.net.advance(timedelta(seconds=seconds))

    async def deliver(self, count: int = 1) -> list[int]:
        """Send ``count`` orders A -> B through A's REST interface; B's inbox entry ids."""
        for n in range(count):
            r = await self.api_a.post("/api/messages", json=order(n), headers=AUTH)
            assert r.status_code == 201, r.text
        await self.net.settle()
        r = await self.api_b.get("/api/inbox", params={"limit": 1000}, headers=AUTH)
        return [item["id"] for item in r.json()["items"]]


def on_apis(scenario: Callable[[Apis], Awaitable[None]], **api: Any) -> None:
    async def main() -> None:
        net = TestNetwork(seed=3)
        a = net.add("a", settings("a", **api))
        b = net.add("b", settings("b", **api))
        await net.start()
        apps = Applications({k: v.encode() for k, v in TOKENS.items()})
        ctx_a = ApiContext(a, a.settings.api, apps)
        ctx_b = ApiContext(b, b.settings.api, apps)
        transport_a = httpx.ASGITransport(app=create_app(ctx_a))
        transport_b = httpx.ASGITransport(app=create_app(ctx_b))
        async with (
            httpx.AsyncClient(transport=transport_a, base_url="http://msh-a") as api_a,
            httpx.AsyncClient(transport=transport_b, base_url="http://msh-b") as api_b,
        ):
            try:
                await scenario(Apis(net, a, b, api_a, api_b, ctx_a, ctx_b))
                await net.settle()  # transmissions under way end here, not in the shutdown's wait
            finally:
                await net.close()

    asyncio.run(main())
