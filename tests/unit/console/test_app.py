"""The console's ASGI application without a browser: every page answers, secrets stay masked, unknown things
are a clear 404, and a form without the session's token changes nothing (403)."""

from __future__ import annotations

import asyncio
import re
import tomllib
from pathlib import Path

import httpx

from msh.console import build_console
from msh.runtime.config import settings_from_mapping
from msh.runtime.msh import Msh
from msh.store.memory import MemoryStore

CONFIG = Path(__file__).resolve().parents[3] / "samples" / "config"
PASSWORD = "s3cret-pw"


def _msh() -> Msh:
    path = CONFIG / "party-a.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": f"postgresql+psycopg://msh:{PASSWORD}@127.0.0.1/msh"}
    settings = settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})
    return Msh(settings, store=MemoryStore(), keys=False)


async def _session() -> list[tuple[str, httpx.Response]]:
    msh = _msh()
    app = build_console(msh, msh.settings)
    transport = httpx.ASGITransport(app=app)
    answers = []
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
            for path in (
                "/",
                "/?span=7d",
                "/messages",
                "/inbox?view=dead",
                "/agreements",
                "/settings",
                "/static/console.css",
            ):
                answers.append((path, await client.get(path)))
            answers.append(("unknown message", await client.get("/messages/nothing%40here")))
            answers.append(("unknown payload", await client.get("/payloads/out/0?message=nothing")))
            answers.append(("unknown page", await client.get("/nowhere")))
            answers.append(
                ("forged", await client.post("/actions/inbox", data={"entry": "1", "op": "ack", "csrf": "x"}))
            )
            page = await client.get("/inbox")
            token = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
            csrf = token.group(1) if token else ""
            answers.append(
                ("no entry", await client.post("/actions/inbox", data={"entry": "7", "op": "ack", "csrf": csrf}))
            )
            answers.append(("after", await client.get(answers[-1][1].headers["location"])))
    finally:
        msh.close()
    return answers


def test_pages_answers_and_refusals() -> None:
    answers = dict(asyncio.run(_session()))
    for path in ("/", "/?span=7d", "/messages", "/inbox?view=dead", "/agreements", "/settings"):
        answer = answers[path]
        assert answer.status_code == 200, (path, answer.text[:300])
        assert "default-src 'none'" in answer.headers["content-security-policy"]
        assert (
            "<script" not in answer.text and "http://" not in answer.text.split("<main>")[0]
        )  # nothing from elsewhere
    assert answers["/static/console.css"].headers["content-type"].startswith("text/css")
    settings = answers["/settings"].text
    assert PASSWORD not in settings and "postgresql+psycopg://msh:••••••@127.0.0.1/msh" in settings
    assert "cpa-demo-a-b" in answers["/agreements"].text
    assert (
        answers["unknown message"].status_code == 404
        and "no message &#39;nothing@here&#39;" in answers["unknown message"].text
    )
    assert answers["unknown payload"].status_code == 404
    assert answers["unknown page"].status_code == 404 and "no such page" in answers["unknown page"].text
    assert answers["forged"].status_code == 403 and "security token" in answers["forged"].text
    assert answers["no entry"].status_code == 303
    assert "inbox entry 7 not acknowledged: the inbox has no entry 7" in answers["after"].text
