"""Webhooks: called at least once, in order, HMAC-signed with the application's token, retried with
backoff; the cursor moves only after a 2xx answer (a restart calls again what was not answered)."""

from __future__ import annotations

import hashlib
import hmac
import json

from msh.api.webhooks import Call, Webhooks, sign
from msh.store.api import Direction
from tests.support.store import add_inbound
from tests.unit.api.conftest import AUTH, TOKENS, Apis, on_apis, order

HOOKS = ["erp=https://erp.example/hook", "crm=https://crm.example/hook"]


def test_arrivals_and_final_states_are_called_signed_at_least_once() -> None:
    async def scenario(t: Apis) -> None:
        received: list[Call] = []
        answers = [503, 500]  # the first two calls fail

        async def post(call: Call) -> int:
            received.append(call)
            return answers.pop(0) if answers else 204

        sent = await t.api_a.post("/api/messages", json=order(1), headers=AUTH)
        await t.net.settle()
        hooks_b = Webhooks.from_context(t.ctx_b, post)
        assert hooks_b is not None
        erp = next(h for h in hooks_b.hooks if h.name == "erp")
        assert await hooks_b.step(erp) == 0
        assert hooks_b.backoff["erp"] == 1.0
        assert await hooks_b.step(erp) == 0
        assert hooks_b.backoff["erp"] == 2.0  # doubling
        assert await hooks_b.step(erp) == 1
        assert hooks_b.backoff["erp"] == 0.0
        assert await hooks_b.step(erp) == 0  # nothing new: not called again
        assert len(received) == 3 and len({c.body for c in received}) == 1  # the same call, repeated
        call = received[-1]
        doc = json.loads(call.body)
        assert doc["event"] == "message-received" and doc["messageId"] == sent.json()["messageId"]
        assert doc["action"] == "NewOrder" and isinstance(doc["entry"], int)
        expected = hmac.new(
            TOKENS["erp"].encode(), call.headers["Msh-Timestamp"].encode() + b"." + call.body, hashlib.sha256
        ).hexdigest()
        assert call.headers["Msh-Signature"] == f"sha256={expected}"
        assert call.headers["Msh-Event-Id"] == str(doc["eventId"])
        # the sender's side: only the application that submitted hears of the delivery
        hooks_a = Webhooks.from_context(t.ctx_a, post)
        assert hooks_a is not None
        by_name = {h.name: h for h in hooks_a.hooks}
        received.clear()
        assert await hooks_a.step(by_name["crm"]) == 0
        assert await hooks_a.step(by_name["erp"]) == 1
        delivered = json.loads(received[0].body)
        # ebMS2 §6.5.2: delivered on the To party's acknowledgment, and the call says so.
        assert delivered["event"] == "message-delivered" and delivered["evidence"] == "to-party-acknowledgment"

    on_apis(scenario, webhooks=HOOKS)


def test_a_restart_before_the_cursor_moved_calls_again() -> None:
    async def scenario(t: Apis) -> None:
        await t.deliver(2)
        calls: list[bytes] = []

        async def post(call: Call) -> int:
            calls.append(call.body)
            if len(calls) == 2:
                raise ConnectionError("the application went away")
            return 200

        hooks = Webhooks.from_context(t.ctx_b, post)
        assert hooks is not None
        erp = hooks.hooks[0]
        assert await hooks.step(erp) == 1  # the second call had no answer
        restarted = Webhooks.from_context(t.ctx_b, post)  # a new process reads the committed cursor
        assert restarted is not None
        assert await restarted.step(restarted.hooks[0]) == 1
        ids = [json.loads(b)["eventId"] for b in calls]
        assert ids[1] == ids[2] and ids[0] < ids[1]  # in order, the unanswered one again

    on_apis(scenario, webhooks=HOOKS[:1])


def test_a_webhook_of_an_unknown_application_is_not_called() -> None:
    async def scenario(t: Apis) -> None:
        assert Webhooks.from_context(t.ctx_b) is None

    on_apis(scenario, webhooks=["nobody=https://x.example/hook"])


def test_sign_is_hmac_sha256_of_timestamp_and_body() -> None:
    assert sign(b"k", "1", b"{}") == "sha256=" + hmac.new(b"k", b"1.{}", hashlib.sha256).hexdigest()


def test_a_held_message_is_announced_when_its_turn_comes_and_an_abandoned_one_as_abandoned() -> None:
    # ebMS2 §9.1.1: a message held for its turn is not passed to the application before every lower
    # SequenceNumber has been; §9: one whose predecessor never came is never presented, and the application
    # is told so.
    async def scenario(t: Apis) -> None:
        with t.b.store.transaction() as tx:
            for message_id, number in (("held@x", 2), ("gone@x", 3)):
                add_inbound(tx, message_id, deliver=False, hold=True, sequence_number=number)
                tx.append_event(
                    at=t.now,
                    kind="received",
                    message_id=message_id,
                    direction=Direction.INBOUND,
                    detail={"sequenceNumber": number, "held": True},
                )
        calls: list[Call] = []

        async def post(call: Call) -> int:
            calls.append(call)
            return 204

        hooks = Webhooks.from_context(t.ctx_b, post)
        assert hooks is not None
        erp = next(h for h in hooks.hooks if h.name == "erp")
        await hooks.step(erp)
        assert calls == []  # held: not announced
        with t.b.store.transaction() as tx:
            held = tx.find_inbound("held@x")
            gone = tx.find_inbound("gone@x")
            assert held is not None and gone is not None
            tx.release_held(held.id, t.now)
            tx.append_event(
                at=t.now,
                kind="released",
                message_id="held@x",
                direction=Direction.INBOUND,
                detail={"sequenceNumber": 2},
            )
            tx.abandon_held(gone.id)
            tx.append_event(
                at=t.now,
                kind="abandoned",
                message_id="gone@x",
                direction=Direction.INBOUND,
                detail={"sequenceNumber": 3, "reason": "SequenceNumber 1 never arrived"},
            )
        await hooks.step(erp)
        docs = [json.loads(c.body) for c in calls]
        assert [(d["event"], d["messageId"]) for d in docs] == [
            ("message-received", "held@x"),
            ("message-abandoned", "gone@x"),
        ]
        assert docs[1]["sequenceNumber"] == 3 and "never arrived" in docs[1]["reason"]

    on_apis(scenario, webhooks=HOOKS)
