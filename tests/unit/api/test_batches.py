"""Pull in batches (the HTTPR specification): fetch a batch, confirm it in the next request; a batch whose
confirmation was lost is resolved by asking, never by guessing."""

from __future__ import annotations

import base64

from tests.unit.api.conftest import AUTH, OTHER, Apis, on_apis

BATCHES = "/api/inbox/batches"


async def _available(t: Apis) -> list[int]:
    return [i["id"] for i in (await t.api_b.get("/api/inbox", headers=AUTH)).json()["items"]]


def test_fetch_then_confirm_in_the_next_request() -> None:
    async def scenario(t: Apis) -> None:
        ids = await t.deliver(5)
        first = (await t.api_b.post(BATCHES, params={"max": 3}, headers=AUTH)).json()
        assert first["state"] == "pending" and first["entries"] == ids[:3]
        assert [base64.b64decode(m["payloads"][0]["data"]) for m in first["messages"]] == [
            f"<order n='{n}'/>".encode() for n in range(3)
        ]
        assert await _available(t) == ids[3:]
        second = (await t.api_b.post(BATCHES, params={"max": 3, "confirm": first["batchId"]}, headers=AUTH)).json()
        assert second["previous"] == {
            "batchId": first["batchId"],
            "state": "confirmed",
            "confirmedAt": second["previous"]["confirmedAt"],
            "acknowledged": ids[:3],
            "returned": [],
        }
        assert second["entries"] == ids[3:]
        last = (await t.api_b.post(BATCHES, params={"confirm": second["batchId"]}, headers=AUTH)).json()
        assert last["batchId"] is None and last["state"] == "empty" and last["previous"]["acknowledged"] == ids[3:]
        everything = (await t.api_b.get("/api/inbox", params={"view": "all"}, headers=AUTH)).json()["items"]
        assert {i["state"] for i in everything} == {"acknowledged"}

    on_apis(scenario)


def test_a_lost_confirmation_is_resolved_by_asking() -> None:
    async def scenario(t: Apis) -> None:
        ids = await t.deliver(2)
        batch = (await t.api_b.post(BATCHES, headers=AUTH)).json()
        url = f"{BATCHES}/{batch['batchId']}"
        # The confirmation reached the MSH, its answer was lost: the application asks.
        await t.api_b.post(f"{url}/confirm", headers=AUTH)
        asked = (await t.api_b.get(url, headers=AUTH)).json()
        assert (asked["state"], asked["entries"]) == ("confirmed", ids)
        again = (await t.api_b.post(f"{url}/confirm", headers=AUTH)).json()
        assert (again["acknowledged"], again["returned"]) == (ids, [])
        # The other way: the confirmation never arrived; asking says pending, and the application confirms.
        await t.deliver(1)
        other = (await t.api_b.post(BATCHES, headers=AUTH)).json()
        assert (await t.api_b.get(f"{BATCHES}/{other['batchId']}", headers=AUTH)).json()["state"] == "pending"
        done = (await t.api_b.post(f"{BATCHES}/{other['batchId']}/confirm", headers=AUTH)).json()
        assert done["acknowledged"] == other["entries"]

    on_apis(scenario)


def test_an_expired_batch_returns_its_messages_and_says_which_on_confirmation() -> None:
    async def scenario(t: Apis) -> None:
        ids = await t.deliver(3)
        old = (await t.api_b.post(BATCHES, headers=AUTH)).json()
        await t.advance(301)  # the application was down longer than the lease
        assert (await t.api_b.get(f"{BATCHES}/{old['batchId']}", headers=AUTH)).json()["state"] == "expired"
        assert await _available(t) == ids
        await t.api_b.get(f"/api/inbox/{ids[0]}", headers=OTHER)  # taken again meanwhile by another application
        late = (await t.api_b.post(f"{BATCHES}/{old['batchId']}/confirm", headers=AUTH)).json()
        assert (late["acknowledged"], late["returned"]) == (ids[1:], [ids[0]])
        assert (await t.api_b.delete(f"/api/inbox/{ids[0]}", headers=OTHER)).status_code == 200
        again = (await t.api_b.post(f"{BATCHES}/{old['batchId']}/confirm", headers=AUTH)).json()
        assert (again["acknowledged"], again["returned"]) == (ids[1:], [ids[0]])  # answered the same

    on_apis(scenario, lease="PT5M")


def test_batches_belong_to_their_application_and_unknown_ones_are_404() -> None:
    async def scenario(t: Apis) -> None:
        await t.deliver(1)
        batch = (await t.api_b.post(BATCHES, headers=AUTH)).json()
        assert (await t.api_b.get(f"{BATCHES}/{batch['batchId']}", headers=OTHER)).status_code == 403
        assert (await t.api_b.post(f"{BATCHES}/{batch['batchId']}/confirm", headers=OTHER)).status_code == 403
        assert (await t.api_b.get(f"{BATCHES}/nope", headers=AUTH)).status_code == 404
        assert (await t.api_b.post(BATCHES, params={"confirm": "nope"}, headers=AUTH)).status_code == 404
        assert (await t.api_b.post(BATCHES, params={"max": 0}, headers=AUTH)).status_code == 422

    on_apis(scenario)


def test_batch_size_is_capped_by_the_settings() -> None:
    async def scenario(t: Apis) -> None:
        await t.deliver(4)
        batch = (await t.api_b.post(BATCHES, params={"max": 100}, headers=AUTH)).json()
        assert len(batch["entries"]) == 2

    on_apis(scenario, max_batch=2)


def test_a_fetch_with_wait_returns_when_a_message_arrives() -> None:
    async def scenario(t: Apis) -> None:
        import asyncio

        from tests.unit.api.conftest import order

        fetch = asyncio.create_task(t.api_b.post(BATCHES, params={"wait": 20}, headers=AUTH))
        await asyncio.sleep(0.2)
        assert not fetch.done()
        await t.api_a.post("/api/messages", json=order(), headers=AUTH)
        await t.net.settle()
        batch = (await asyncio.wait_for(fetch, 5)).json()
        assert batch["state"] == "pending" and len(batch["entries"]) == 1
        empty = (await t.api_b.post(BATCHES, params={"wait": 0.2}, headers=AUTH)).json()
        assert (empty["batchId"], empty["state"], empty["entries"]) == (None, "empty", [])

    on_apis(scenario)
