"""``/health``, ``/ready`` (each not-ready reason) and the operators' authentication of the admin port."""

from __future__ import annotations

import asyncio
import base64
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from starlette.responses import PlainTextResponse

from msh.admin.app import build_admin_app, load_operators
from msh.admin.readiness import Watch
from msh.errors import ConfigurationError
from msh.runtime.msh import Msh
from msh.store import open_store
from msh.store.writer import GroupCommitWriter
from msh.testing.network import FakeClock
from tests.unit.admin.conftest import AUTH, TOKEN, Admins, on_admins, settings


def reasons(body: dict[str, object]) -> dict[str, object]:
    checks = body["checks"]
    assert isinstance(checks, list)
    return {c["name"]: c["reason"] for c in checks if not c["ok"]}


def test_health_and_ready_when_all_is_well() -> None:
    async def scenario(s: Admins) -> None:
        health = await s.admin_a.get("/health", headers=AUTH)
        assert health.status_code == 200
        assert health.json()["alive"] is True and health.json()["party"] == "123456789"
        not_yet = await s.admin_a.get("/ready", headers=AUTH)  # the test network fires the timers itself
        assert reasons(not_yet.json()) == {"timers": "the timer loop is not running: resends and give-ups are not done"}
        s.a.timers.start()
        try:
            ready = await s.admin_a.get("/ready", headers=AUTH)
            assert ready.status_code == 200, ready.text
            assert ready.json()["ready"] is True
            assert [c["name"] for c in ready.json()["checks"]] == ["store", "agreements", "writer", "timers"]
        finally:
            await s.a.timers.stop()

    on_admins(scenario)


def test_not_ready_before_the_runtime_runs_and_once_the_store_is_closed() -> None:
    async def scenario(s: Admins) -> None:
        r = await s.admin_a.get("/ready", headers=AUTH)
        assert r.status_code == 503
        assert reasons(r.json()) == {"timers": "the runtime is not running (not started yet, or stopping)"}
        s.a.close()  # the writer closes, and the MSH's own store with it
        r = await s.admin_a.get("/ready", headers=AUTH)
        assert r.status_code == 503
        assert "store" in reasons(r.json()) and "writer is closed" in str(reasons(r.json())["store"])
        assert (await s.admin_a.get("/health", headers=AUTH)).status_code == 200  # alive all the same

    on_admins(scenario, start=False)


def test_a_timer_loop_that_stands_still_is_not_ready_after_stall_after() -> None:
    async def scenario(s: Admins) -> None:
        a = s.a
        # The loop's task runs, but waits an hour of real time between rounds: on the fake clock it stands still.
        a.timers.start()
        try:
            first = await s.admin_a.get("/ready", headers=AUTH)
            assert first.status_code == 200, first.text
            s.net.clock.advance(timedelta(hours=2) - timedelta(seconds=1))
            assert (await s.admin_a.get("/ready", headers=AUTH)).status_code == 200
            s.net.clock.advance(timedelta(seconds=1))
            late = await s.admin_a.get("/ready", headers=AUTH)
            assert late.status_code == 503
            assert reasons(late.json()) == {
                "timers": "the timer loop has not finished a round for 7200 s (admin.stall_after 7200 s)"
            }
            a.timers.rounds += 1  # it moves on: ready again
            assert (await s.admin_a.get("/ready", headers=AUTH)).status_code == 200
        finally:
            await a.timers.stop()

    on_admins(scenario, stall_after="PT2H", timers={"poll_interval": "PT1H"})


def test_a_busy_writer_that_does_not_commit_is_stalled() -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    watch = Watch()
    assert watch.look(7, True, now) == timedelta(0)
    assert watch.look(7, True, now + timedelta(seconds=90)) == timedelta(seconds=90)
    assert watch.look(8, True, now + timedelta(seconds=91)) == timedelta(0)  # a commit: moved on
    assert watch.look(8, False, now + timedelta(seconds=500)) == timedelta(0)  # idle is not stalled
    assert watch.look(8, True, now + timedelta(seconds=501)) == timedelta(0)
    assert watch.look(8, True, now + timedelta(seconds=530)) == timedelta(seconds=29)


def test_agreements_missing_is_a_reason() -> None:
    async def scenario(s: Admins) -> None:
        for cpa in list(s.b.registry):
            s.b.registry.remove(cpa.cpaid)
        r = await s.admin_b.get("/ready", headers=AUTH)
        assert r.status_code == 503
        assert reasons(r.json())["agreements"] == "no agreement is in force and there are no routes: nothing to do"

    on_admins(scenario)


def test_without_an_operator_token_everything_is_401() -> None:
    wrong = [
        ({}, "send Authorization: Bearer <token>"),
        ({"Authorization": "Bearer not-the-token-at-all"}, "is not one of"),
        ({"Authorization": f"Basic {TOKEN}"}, "send Authorization: Bearer <token>"),
    ]

    async def scenario(s: Admins) -> None:
        for path in ("/health", "/ready", "/metrics", "/console"):
            for headers, detail in wrong:
                r = await s.admin_a.get(path, headers=headers)
                assert r.status_code == 401, (path, headers)
                assert r.headers["content-type"] == "application/problem+json"
                challenges = r.headers.get_list("www-authenticate")
                assert challenges[0].startswith("Basic") and challenges[1].startswith("Bearer")
                assert detail in r.json()["detail"]
        assert (await s.admin_a.get("/console", headers=AUTH)).status_code == 404  # no console mounted here

    on_admins(scenario)


def test_the_mounted_console_is_behind_the_same_authentication_and_knows_the_operator() -> None:
    async def console(scope, receive, send):  # type: ignore[no-untyped-def]
        who = scope["state"]["operator"]
        await PlainTextResponse(f"console at {scope['path']} for {who}")(scope, receive, send)

    async def scenario(s: Admins) -> None:
        operators = load_operators(s.a.settings, {"MSH_OPS_TOKEN": TOKEN})
        app = build_admin_app(s.a, s.a.settings, extra=console, operators=operators)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://admin") as client:
            assert (await client.get("/messages")).status_code == 401
            r = await client.get("/messages", headers=AUTH)
            assert r.status_code == 200 and r.text == "console at /messages for ops"
            assert (await client.get("/health", headers=AUTH)).json()["alive"] is True  # ours, not the console's

    on_admins(scenario)


def test_a_browser_signs_in_with_basic_credentials_naming_the_operator_and_its_token() -> None:
    """RFC 7617: user name and password in Basic form; the console in a browser signs in this way."""

    def basic(user: str, password: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}

    async def console(scope, receive, send):  # type: ignore[no-untyped-def]
        await PlainTextResponse(f"console for {scope['state']['operator']}")(scope, receive, send)

    async def scenario(s: Admins) -> None:
        operators = load_operators(s.a.settings, {"MSH_OPS_TOKEN": TOKEN})
        app = build_admin_app(s.a, s.a.settings, extra=console, operators=operators)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://admin") as client:
            refused = await client.get("/")
            assert refused.status_code == 401
            assert 'Basic realm="msh admin"' in refused.headers.get_list("www-authenticate")[0]
            r = await client.get("/", headers=basic("ops", TOKEN))
            assert r.status_code == 200 and r.text == "console for ops"
            assert (await client.get("/", headers=basic("someone-else", TOKEN))).status_code == 401
            assert (await client.get("/", headers=basic("ops", "wrong-token-0123456789"))).status_code == 401
            assert (await client.get("/", headers={"Authorization": "Basic %%%"})).status_code == 401

    on_admins(scenario)


def test_open_probes_answer_without_a_token_but_metrics_do_not() -> None:
    async def scenario(s: Admins) -> None:
        assert (await s.admin_a.get("/health")).status_code == 200
        assert (await s.admin_a.get("/ready")).json()["checks"]
        assert (await s.admin_a.get("/metrics")).status_code == 401

    on_admins(scenario, open_probes=True)


def test_an_operator_token_that_cannot_be_read_stops_the_start_naming_the_setting() -> None:
    s = settings("a")
    with pytest.raises(ConfigurationError) as caught:
        load_operators(s, {})
    assert str(caught.value).startswith("admin.operators: the token of 'ops' is to come from the environment variable")
    assert "MSH_OPS_TOKEN" in str(caught.value)


def test_a_writer_stuck_in_a_transaction_is_not_ready_after_stall_after(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(str(tmp_path / "msh.sqlite"), clock=clock)  # SQLite in WAL mode: reads beside the writer
    writer = GroupCommitWriter(store)
    msh = Msh(settings("a"), store=store, clock=clock, writer=writer)
    app = build_admin_app(msh, msh.settings, operators=load_operators(msh.settings, {"MSH_OPS_TOKEN": TOKEN}))
    gate = threading.Event()

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://admin") as client:
            stuck = writer.submit(lambda tx: gate.wait(30))  # a transaction that does not end (a hung disk)
            waiting = writer.submit(lambda tx: None)
            first = await client.get("/ready", headers=AUTH)
            assert "writer" not in reasons(first.json())
            clock.advance(timedelta(seconds=60))
            stalled = await client.get("/ready", headers=AUTH)
            assert stalled.status_code == 503
            assert reasons(stalled.json())["writer"] == (
                "the store writer has work waiting and has not finished a transaction for 60 s (admin.stall_after 60 s)"
            )
            gate.set()
            stuck.result(10), waiting.result(10)
            assert "writer" not in reasons((await client.get("/ready", headers=AUTH)).json())

    try:
        asyncio.run(main())
    finally:
        gate.set()
        msh.close()
        store.close()
