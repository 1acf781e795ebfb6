"""The inbox through REST (Certified HTTP's confirmation by DELETE, the AMQP 1.0 broker-behaviour paper's
release and reject): leases and their expiry on the fake clock, browsing, filters, priorities, the TTL report
and long polls."""

from __future__ import annotations

import asyncio
import base64

from tests.support.store import add_inbound
from tests.unit.api.conftest import ACTION, AUTH, OTHER, PARTY_B, SERVICE, Apis, on_apis, order

INBOX = "/api/inbox"


async def _available(t: Apis) -> list[int]:
    return [i["id"] for i in (await t.api_b.get(INBOX, headers=AUTH)).json()["items"]]


def test_take_streams_the_message_and_leases_it_until_deleted() -> None:
    async def scenario(t: Apis) -> None:
        (entry,) = await t.deliver(1)
        taken = await t.api_b.get(f"{INBOX}/{entry}", headers=AUTH)
        assert taken.status_code == 200
        assert taken.headers["content-type"].startswith("multipart/related")
        assert b"<order n='0'/>" in taken.content and b"eb:MessageHeader" in taken.content
        assert "Msh-Lease-Until" in taken.headers
        with t.b.store.transaction(readonly=True) as tx:
            record = tx.get_inbound(entry)
            assert record is not None
        with t.b.store.open_blob(record.body_blob_id) as blob:
            assert taken.content == blob.read()  # the message exactly as received
        assert await _available(t) == []  # leased: not offered
        leased = (await t.api_b.get(INBOX, params={"view": "leased"}, headers=AUTH)).json()["items"]
        assert [(i["id"], i["state"], i["takes"]) for i in leased] == [(entry, "leased", 1)]
        other = await t.api_b.get(f"{INBOX}/{entry}", headers=OTHER)
        assert other.status_code == 409  # another application's lease
        done = await t.api_b.delete(f"{INBOX}/{entry}", headers=AUTH)
        assert done.json() == {"id": entry, "messageId": taken.headers["Msh-Message-Id"], "state": "acknowledged"}
        assert (await t.api_b.delete(f"{INBOX}/{entry}", headers=AUTH)).status_code == 200  # repeatable
        assert (await t.api_b.get(f"{INBOX}/{entry}", headers=AUTH)).status_code == 410  # never offered again
        await t.advance(3600)
        assert await _available(t) == []

    on_apis(scenario)


def test_browse_takes_nothing() -> None:
    async def scenario(t: Apis) -> None:
        (entry,) = await t.deliver(1)
        r = await t.api_b.get(f"{INBOX}/{entry}", params={"browse": "true", "format": "json"}, headers=AUTH)
        assert r.status_code == 200 and "Msh-Lease-Until" not in r.headers
        doc = r.json()
        assert doc["entry"]["state"] == "available" and doc["entry"]["takes"] == 0
        assert doc["header"]["action"] == "NewOrder"
        assert base64.b64decode(doc["payloads"][0]["data"]) == b"<order n='0'/>"
        assert await _available(t) == [entry]
        everything = (await t.api_b.get(INBOX, params={"view": "all"}, headers=AUTH)).json()["items"]
        assert [i["id"] for i in everything] == [entry]

    on_apis(scenario)


def test_release_puts_a_message_back_at_once() -> None:
    async def scenario(t: Apis) -> None:
        (entry,) = await t.deliver(1)
        await t.api_b.get(f"{INBOX}/{entry}", headers=AUTH)
        assert (await t.api_b.post(f"{INBOX}/{entry}/release", headers=OTHER)).status_code == 409
        r = await t.api_b.post(f"{INBOX}/{entry}/release", headers=AUTH)
        assert r.json()["state"] == "available"
        assert await _available(t) == [entry]
        assert (await t.api_b.post(f"{INBOX}/{entry}/release", headers=AUTH)).status_code == 200  # repeatable
        again = await t.api_b.get(f"{INBOX}/{entry}", params={"format": "json"}, headers=OTHER)
        assert again.json()["entry"]["takes"] == 2

    on_apis(scenario)


def test_reject_moves_a_message_to_the_dead_letter_list_with_its_reason() -> None:
    async def scenario(t: Apis) -> None:
        first, second = await t.deliver(2)
        await t.api_b.get(f"{INBOX}/{first}", headers=AUTH)
        r = await t.api_b.post(f"{INBOX}/{first}/reject", json={"reason": "unknown customer 42"}, headers=AUTH)
        assert r.json()["state"] == "rejected"
        assert (await t.api_b.post(f"{INBOX}/{first}/reject", json={"reason": "x"}, headers=AUTH)).status_code == 200
        dead = (await t.api_b.get(INBOX, params={"view": "dead"}, headers=AUTH)).json()["items"]
        assert [(i["id"], i["state"], i["rejectedReason"]) for i in dead] == [
            (first, "rejected", "unknown customer 42")
        ]
        assert await _available(t) == [second]
        assert (await t.api_b.delete(f"{INBOX}/{first}", headers=AUTH)).status_code == 409
        assert (await t.api_b.get(f"{INBOX}/{first}", headers=AUTH)).status_code == 410
        assert (await t.api_b.post(f"{INBOX}/{second}/reject", json={"reason": ""}, headers=AUTH)).status_code == 422
        await t.api_b.delete(f"{INBOX}/{second}", headers=AUTH)
        refused = await t.api_b.post(f"{INBOX}/{second}/reject", json={"reason": "late"}, headers=AUTH)
        assert refused.status_code == 409  # acknowledged already
        with t.b.store.transaction(readonly=True) as tx:
            kinds = [e.kind for e in tx.list_events(limit=1000)]
        assert kinds.count("app-rejected") == 1

    on_apis(scenario)


def test_a_lease_that_runs_out_returns_the_message_to_the_inbox() -> None:
    async def scenario(t: Apis) -> None:
        (entry,) = await t.deliver(1)
        await t.api_b.get(f"{INBOX}/{entry}", headers=AUTH)
        await t.advance(299)
        assert await _available(t) == []
        await t.advance(2)  # the 5-minute lease has ended: the application crashed, say
        assert await _available(t) == [entry]
        taken = await t.api_b.get(f"{INBOX}/{entry}", params={"format": "json"}, headers=OTHER)
        assert taken.json()["entry"]["takes"] == 2
        late = await t.api_b.delete(f"{INBOX}/{entry}", headers=AUTH)
        assert late.status_code == 409  # the first taker's settlement comes too late
        assert (await t.api_b.delete(f"{INBOX}/{entry}", headers=OTHER)).status_code == 200

    on_apis(scenario, lease="PT5M")


def test_messages_not_taken_within_the_ttl_are_reported() -> None:
    async def scenario(t: Apis) -> None:
        first, second = await t.deliver(2)
        await t.api_b.get(f"{INBOX}/{second}", headers=AUTH)
        assert (await t.api_b.get(f"{INBOX}/overdue", headers=AUTH)).json()["items"] == []
        await t.advance(3601)
        report = (await t.api_b.get(f"{INBOX}/overdue", headers=AUTH)).json()["items"]
        assert [(i["id"], i["overdue"]) for i in report] == [(first, True)]
        listed = (await t.api_b.get(INBOX, params={"view": "all"}, headers=AUTH)).json()["items"]
        assert {i["id"]: i["overdue"] for i in listed} == {first: True, second: False}  # second is leased
        await t.advance(2 * 3600)  # second's lease has ended, untaken since: reported too
        report = (await t.api_b.get(f"{INBOX}/overdue", headers=AUTH)).json()["items"]
        assert [i["id"] for i in report] == [first, second]

    on_apis(scenario, inbox_ttl="PT1H", lease="PT2H")


def test_filters_and_priorities() -> None:
    async def scenario(t: Apis) -> None:
        ids = await t.deliver(2)
        listed = (await t.api_b.get(INBOX, params={"cpaId": "cpa-demo-a-b", "action": "NewOrder"}, headers=AUTH)).json()
        assert [i["id"] for i in listed["items"]] == ids
        assert {i["priority"] for i in listed["items"]} == {7}
        for params in ({"action": "Other"}, {"service": "urn:x"}, {"cpaId": "x"}, {"conversationId": "x"}):
            assert (await t.api_b.get(INBOX, params=params, headers=AUTH)).json()["items"] == []
        conversation = listed["items"][1]["conversationId"]
        only = (await t.api_b.get(INBOX, params={"conversationId": conversation}, headers=AUTH)).json()["items"]
        assert [i["id"] for i in only] == [ids[1]]
        assert (await t.api_b.get(INBOX, params={"limit": 0}, headers=AUTH)).status_code == 422

    on_apis(scenario, priorities=["cpa-demo-a-b;*;NewOrder=7"])


def test_a_long_poll_returns_when_a_message_arrives() -> None:
    async def scenario(t: Apis) -> None:
        poll = asyncio.create_task(t.api_b.get(INBOX, params={"wait": 20}, headers=AUTH))
        await asyncio.sleep(0.2)
        assert not poll.done()
        started = asyncio.get_running_loop().time()
        await t.api_a.post("/api/messages", json=order(), headers=AUTH)
        await t.net.settle()
        r = await asyncio.wait_for(poll, 5)
        assert len(r.json()["items"]) == 1
        assert asyncio.get_running_loop().time() - started < 2
        empty = await t.api_b.get(INBOX, params={"wait": 0.3, "view": "leased"}, headers=AUTH)
        assert empty.json()["items"] == []

    on_apis(scenario)


def test_unknown_entries_and_bad_values() -> None:
    async def scenario(t: Apis) -> None:
        for call in (
            t.api_b.get(f"{INBOX}/999", headers=AUTH),
            t.api_b.delete(f"{INBOX}/999", headers=AUTH),
            t.api_b.post(f"{INBOX}/999/release", headers=AUTH),
            t.api_b.post(f"{INBOX}/999/reject", json={"reason": "x"}, headers=AUTH),
        ):
            r = await call
            assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"
        assert (await t.api_b.get(f"{INBOX}/abc", headers=AUTH)).status_code == 422
        assert (await t.api_b.get(INBOX, params={"view": "nope"}, headers=AUTH)).status_code == 422
        assert (await t.api_b.get(INBOX)).status_code == 401
        assert (await t.api_b.get("/api/nothing-here", headers=AUTH)).status_code == 404

    on_apis(scenario)


def test_the_status_of_a_sent_message() -> None:
    async def scenario(t: Apis) -> None:
        r = await t.api_a.post("/api/messages", json=order(), headers=AUTH)
        message_id = r.json()["messageId"]
        t.net.faults.lose_requests = 1.0
        await t.net.settle()
        pending = (await t.api_a.get(f"/api/messages/{message_id}", headers=AUTH)).json()
        assert pending["final"] is False and pending["receipt"] is None
        assert pending["transmissions"][0]["outcome"] == "failed"
        t.net.faults.lose_requests = 0.0
        await t.advance(5)  # the first resend: the RetryInterval (PT5S)
        await t.net.settle()
        done = (await t.api_a.get(f"/api/messages/{message_id}", headers=AUTH)).json()
        assert (done["status"], done["final"], done["attempts"]) == ("delivered", True, 2)
        assert done["receipt"]["acknowledgedAt"]
        # ebMS2 §6.5.2: the status rests on the To party's acknowledgment, and says so.
        assert (done["evidence"], done["explanation"]) == ("to-party-acknowledgment", "the To party acknowledged it")
        assert done["receiptProblem"] is None and pending["evidence"] == "transmission"
        assert (await t.api_a.get("/api/messages/nope@x", headers=AUTH)).status_code == 404
        # another application does not see it; one sent otherwise (the Python API) every application sees
        assert (await t.api_a.get(f"/api/messages/{message_id}", headers=OTHER)).status_code == 404
        from msh.runtime.compose import Payload, Submission

        own = await t.a.submit_async(
            Submission((PARTY_B["partyId"], PARTY_B["type"]), SERVICE, ACTION, (Payload(b"<o/>", "application/xml"),))
        )
        assert (await t.api_a.get(f"/api/messages/{own}", headers=OTHER)).status_code == 200

    on_apis(scenario)


def test_a_message_held_for_its_turn_is_listed_as_held_and_never_given_to_the_application() -> None:
    # ebMS2 §9.1.1: "A MSH that receives a message with a SequenceNumber element MUST NOT pass the message to an
    # application until all the messages with a lower SequenceNumber have been passed to the application."
    async def scenario(t: Apis) -> None:
        with t.b.store.transaction() as tx:
            held = add_inbound(tx, "held@x", deliver=False, hold=True, sequence_number=2).id
            gone = add_inbound(tx, "gone@x", deliver=False, hold=True, sequence_number=3).id
            tx.abandon_held(gone)
        assert await _available(t) == []
        listed = (await t.api_b.get(INBOX, params={"view": "held"}, headers=AUTH)).json()["items"]
        assert sorted((i["id"], i["state"]) for i in listed) == sorted([(held, "held"), (gone, "abandoned")])
        for method, path, params, body in (
            ("GET", f"{INBOX}/{held}", {}, None),
            ("GET", f"{INBOX}/{held}", {"browse": "true"}, None),
            ("DELETE", f"{INBOX}/{held}", {}, None),
            ("POST", f"{INBOX}/{held}/release", {}, None),
            ("POST", f"{INBOX}/{held}/reject", {}, {"reason": "x"}),
        ):
            r = await t.api_b.request(method, path, params=params, json=body, headers=AUTH)
            assert (r.status_code, r.json()["type"].rsplit("/", 1)[-1]) == (409, "held"), (method, path)
        r = await t.api_b.get(f"{INBOX}/{gone}", headers=AUTH)
        assert (r.status_code, r.json()["type"].rsplit("/", 1)[-1]) == (410, "abandoned")
        with t.b.store.transaction(readonly=True) as tx:
            assert tx.inbox_entry(held).state.value == "held"  # type: ignore[union-attr]

    on_apis(scenario)
