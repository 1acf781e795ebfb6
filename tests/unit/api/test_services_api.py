"""The MSH services through REST: ``POST /api/ping`` (ebMS2 §8) and ``GET /api/messages/{id}/remote-status``
(ebMS2 §7), on the test network (the partners' answers come asynchronously under the sample agreement, so
each request runs while the network moves)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import httpx

from tests.unit.api.conftest import AUTH, OTHER, PARTY_B, Apis, on_apis, order

PING = "/api/ping"


async def moving(t: Apis, request: Awaitable[httpx.Response]) -> httpx.Response:
    """``request`` while the network delivers (the Ping and its Pong, the StatusRequest and its answer)."""
    task: asyncio.Future[httpx.Response] = asyncio.ensure_future(request)
    for _ in range(1000):  # the request reaches the network after a few turns of the loop
        if task.done():
            break
        await t.net.settle()
    return await asyncio.wait_for(task, timeout=30)


def problem(r: httpx.Response) -> dict[str, Any]:
    assert r.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = r.json()
    return body


def test_ping_answers_with_the_pong_and_its_round_trip() -> None:
    async def scenario(t: Apis) -> None:
        r = await moving(t, t.api_a.post(PING, json={"partner": PARTY_B}, headers=AUTH))
        assert r.status_code == 200, r.text
        doc = r.json()
        # ebMS2 §8.2: the Pong came (to A's endpoint: the sample agreement's MSH channels are asynchronous).
        assert (doc["pong"], doc["onConnection"], doc["cpaId"], doc["problem"]) == (True, False, "cpa-demo-a-b", None)
        assert doc["roundTripMs"] == 0.0  # the network's fake clock did not move
        assert doc["pongMessageId"] and doc["messageId"] != doc["pongMessageId"]

    on_apis(scenario)


def test_a_ping_that_gets_no_pong_is_still_a_200_that_says_why() -> None:
    async def scenario(t: Apis) -> None:
        t.net.faults.down.add("https://127.0.0.1:8082/msh")
        r = await moving(t, t.api_a.post(PING, json={"partner": {"partyId": "987654321"}, "timeout": 3}, headers=AUTH))
        assert r.status_code == 200
        doc = r.json()
        assert (doc["pong"], doc["httpStatus"]) == (False, None)
        assert doc["problem"] == "connection refused (https://127.0.0.1:8082/msh)"

    on_apis(scenario)


def test_ping_refusals_are_problem_documents() -> None:
    async def scenario(t: Apis) -> None:
        unknown = await t.api_a.post(PING, json={"partner": {"partyId": "444"}}, headers=AUTH)
        assert unknown.status_code == 422
        assert problem(unknown)["type"].endswith("/not-possible")
        assert "no agreement in force between us and a party with that PartyId" in problem(unknown)["detail"]
        bad = await t.api_a.post(PING, json={"partner": PARTY_B, "timeout": 0}, headers=AUTH)
        assert bad.status_code == 422 and problem(bad)["type"].endswith("/invalid-request")
        assert (await t.api_a.post(PING, json={"partner": PARTY_B})).status_code == 401

    on_apis(scenario)


def test_remote_status_shows_the_partners_answer_beside_our_record() -> None:
    async def scenario(t: Apis) -> None:
        r = await t.api_a.post("/api/messages", json=order(1), headers=AUTH)
        message_id = r.json()["messageId"]
        await t.net.settle()
        url = f"/api/messages/{message_id}/remote-status"
        r = await moving(t, t.api_a.get(url, params={"timeout": 5}, headers=AUTH))
        assert r.status_code == 200, r.text
        doc = r.json()
        # ebMS2 §7.3.3: Received, with the time B received it (§7.3.2); our own record beside it.
        assert (doc["messageId"], doc["messageStatus"], doc["problem"]) == (message_id, "Received", None)
        assert doc["timestamp"] is not None and doc["requestMessageId"] != message_id
        assert (doc["ours"]["messageId"], doc["ours"]["status"]) == (message_id, "delivered")
        # The message another application submitted is not shown to this one (as GET /messages/{id}).
        assert (await t.api_a.get(url, headers=OTHER)).status_code == 404
        missing = await t.api_a.get("/api/messages/nobody@nowhere/remote-status", headers=AUTH)
        assert missing.status_code == 404 and problem(missing)["type"].endswith("/no-such-message")
        # The route does not take the status path for a MessageId.
        plain = await t.api_a.get(f"/api/messages/{message_id}", headers=AUTH)
        assert plain.status_code == 200 and plain.json()["messageId"] == message_id

    on_apis(scenario)
