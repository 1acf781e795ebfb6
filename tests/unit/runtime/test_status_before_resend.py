"""Status before resend on the test network (``sending.status_before_resend``; the REPORT idea of HTTPR;
ebMS2 §7): after an outage, A asks B for the status of a message that may have reached B before sending
its body again, and resends only when B does not have it. Memory stores, the in-memory transport, one fake
clock, no sleep.

The sample agreement: A's first resend after 3 s (``sending.first_resend_timeout``), then every 5 s
(RetryInterval PT5S), at most 5 resends; its MSH channels are asynchronous, so B's StatusResponse comes
later to A's endpoint (the synchronous case runs on an agreement of tests/support/cpa_factory.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import tomllib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from cpa.model import PerMessage, SyncReplyMode
from msh.ebms.envelope import serialise_envelope
from msh.ebms.errorlist import error_message
from msh.ebms.message import ParseMode, parse_message
from msh.engine import Evidence, OutboundStatus
from msh.errors import ErrorCode, Issue, Severity
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.msh import Msh
from msh.testing.network import TestNetwork
from msh.transport.port import SOAP_CONTENT_TYPE, HttpReply
from tests.support.cpa_factory import A_ID, B_ID, SERVICE, channel, make_cpa

CONFIG = Path(__file__).resolve().parents[3] / "samples" / "config"
B_PARTY = ("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")
A_URL = "https://127.0.0.1:8081/msh"
B_URL = "https://127.0.0.1:8082/msh"
OUTAGE = "PT8S"  # the setting: ask once B has been unreachable this long


def settings(name: str, status_before_resend: str | None = None) -> Settings:
    path = CONFIG / f"party-{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    data["sending"].pop("status_before_resend", None)
    if status_before_resend is not None:
        data["sending"]["status_before_resend"] = status_before_resend
    return settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})


def order() -> Submission:
    return Submission(B_PARTY, SERVICE, "NewOrder", (Payload(b"<order/>", "application/xml"),))


def run(scenario: Callable[[TestNetwork, Msh, Msh], Awaitable[None]], *, ask: str | None = OUTAGE) -> None:
    async def main() -> None:
        net = TestNetwork(seed=1)
        a = net.add("a", settings("a", ask))
        b = net.add("b", settings("b"))
        await net.start()
        try:
            await scenario(net, a, b)
        finally:
            await net.close()

    asyncio.run(main())


def journal(msh: Msh, message_id: str) -> list[tuple[str, dict[str, object]]]:
    with msh.store.transaction(readonly=True) as tx:
        return [(e.kind, dict(e.detail)) for e in tx.message_events(message_id, limit=1000)]


def kinds(msh: Msh, message_id: str) -> list[str]:
    return [kind for kind, _ in journal(msh, message_id)]


def final(msh: Msh, message_id: str) -> Callable[[], bool]:
    return lambda: (s := msh.status(message_id)) is not None and s.state.status.final


async def sent_then_outage(net: TestNetwork, a: Msh, *, lose: str = "answer", back_after: float | None = 12) -> str:
    """A sends; the first transmission reaches B but its answer is lost (``lose="answer"``), or is itself lost
    (``"request"``); B is down from then on, for ``back_after`` seconds (None: for good). B has then been
    unreachable since the first resend, 3 s in: at 13 s (the fourth transmission's timer) that is 10 s,
    past the 8 s of the setting."""
    if lose == "answer":
        net.faults.lose_next_answers = 1
    else:
        net.faults.lose_next_requests = 1
    message_id = await a.submit_async(order())
    await net.settle()
    net.faults.down.add(B_URL)
    if back_after is not None:
        await net.advance(timedelta(seconds=back_after))
        net.faults.down.clear()
    return message_id


def test_a_receiver_that_has_the_message_is_asked_and_not_sent_it_again() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await sent_then_outage(net, a)
        await net.run_until(final(a, message_id))
        stored = a.status(message_id)
        assert stored is not None
        # ebMS2 §7.3.3: Received - "has been received by the MSH": A's message is delivered on B's word.
        assert stored.state.status is OutboundStatus.DELIVERED
        assert stored.state.evidence is Evidence.STATUS_RESPONSE
        # B received it once and saw no duplicate: the body was not sent again after the outage.
        assert [e.message_id for e in b.inbox(None)] == [message_id]
        assert b.counters["duplicates"] == 0 and b.counters["received"] == 1
        # A's journal says why it was not resent: asked in place of the fourth transmission, answered Received.
        events = journal(a, message_id)
        ours = [(k, d) for k, d in events if k in ("status-requested", "status-answered", "delivered", "resent")]
        request_id = next(d["requestMessageId"] for k, d in ours if k == "status-answered")
        assert ours == [
            ("resent", {"attempt": 2}),
            ("resent", {"attempt": 3}),
            ("status-requested", {"attempt": 4}),
            ("status-answered", {"attempt": 4, "requestMessageId": request_id, "messageStatus": "Received"}),
            ("delivered", {"evidence": "status-response"}),
        ]
        # msh status reads the same from the journal.
        fourth = a.attempts(message_id)[-1]
        assert (fourth.number, fourth.status_request, fourth.resent) == (4, "StatusResponse Received", False)

    run(scenario)


def test_a_receiver_that_does_not_recognize_the_message_gets_it_resent() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await sent_then_outage(net, a, lose="request")  # B never got the first copy
        await net.run_until(final(a, message_id))
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        # ebMS2 §7.3.3 NotRecognized: the resend the question stood in for went, and B acknowledged it.
        assert stored.state.evidence is Evidence.TO_PARTY_ACKNOWLEDGMENT and stored.state.attempts == 4
        answered = [d for k, d in journal(a, message_id) if k == "status-answered"]
        assert [d["messageStatus"] for d in answered] == ["NotRecognized"]
        assert kinds(a, message_id)[-4:] == ["status-answered", "resent", "delivered", "transmission"]
        assert [e.message_id for e in b.inbox(None)] == [message_id]
        fourth = a.attempts(message_id)[-1]
        assert (fourth.status_request, fourth.resent, fourth.http_status) == ("StatusResponse NotRecognized", True, 200)

    run(scenario)


def test_a_receiver_still_down_counts_each_question_as_a_failed_resend() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await sent_then_outage(net, a, back_after=None)
        await net.run_until(final(a, message_id))
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.FAILED
        # ebMS2 §6.5.4, §6.5.7: the retries ran out; the first copy may have arrived (it did): Warning.
        failure = stored.state.failure
        assert failure is not None and failure.severity is Severity.WARNING
        assert stored.state.attempts == 6 and stored.state.evidence is Evidence.RETRIES_EXHAUSTED
        # Transmissions 4, 5 and 6 were questions, each refused; no body left A after the third.
        transmissions = [d["attempt"] for k, d in journal(a, message_id) if k == "transmission"]
        assert transmissions == [1, 2, 3]
        answered = [d for k, d in journal(a, message_id) if k == "status-answered"]
        assert [(d["attempt"], d["transmitted"]) for d in answered] == [(4, False), (5, False), (6, False)]
        assert all(d["reason"] == f"connection refused ({B_URL})" for d in answered)
        attempts = a.attempts(message_id)
        assert [t.failed for t in attempts] == [True] * 6
        assert [t.resent for t in attempts] == [True, True, True, False, False, False]

    run(scenario)


def test_with_the_setting_off_the_message_is_simply_resent() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await sent_then_outage(net, a)
        await net.run_until(final(a, message_id))
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        # ebMS2 §6.5.4: resent; B answers the duplicate with the stored acknowledgment (§6.5.5).
        assert stored.state.evidence is Evidence.TO_PARTY_ACKNOWLEDGMENT
        assert b.counters["duplicates"] == 1
        assert "status-requested" not in kinds(a, message_id)

    run(scenario, ask=None)


def test_an_asynchronous_status_response_that_never_comes_lets_the_resend_go() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await sent_then_outage(net, a)
        net.faults.down.add(A_URL)  # B's StatusResponse (asynchronous under the sample agreement) cannot reach A
        await net.run_until(final(a, message_id))
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        # No StatusResponse within sending.http_timeout (PT2S): the resend went; B answered it from its store.
        answered = [d for k, d in journal(a, message_id) if k == "status-answered"]
        assert len(answered) == 1 and answered[0]["transmitted"] is True
        assert str(answered[0]["reason"]).startswith("no StatusResponse within 2 s (HTTP 202 (no body)")
        assert b.counters["duplicates"] == 1

    run(scenario)


# --- on an agreement whose MSH signals come back on the connection -------------------------------------


def run_sync(scenario: Callable[[TestNetwork, Msh, Msh], Awaitable[None]]) -> None:
    async def main() -> None:
        best_effort: dict[str, Any] = {
            "retries": None,
            "ack_requested": PerMessage.NEVER,
            "duplicate_elimination": PerMessage.NEVER,
        }
        a_msh = channel("A", channel_id="A_msh", sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY, **best_effort)
        cpa = make_cpa(
            a_msh=a_msh,
            sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY,
            retries=5,
            retry_interval=timedelta(seconds=5),
        )
        net = TestNetwork(seed=3)
        common: dict[str, Any] = {
            "agreements": {"paths": [str(CONFIG.parent / "cpas" / "demo-a-b.xml")]},
            "store": {"url": "memory:"},
            "server": {"tls": False},
        }

        def plain(party: Any, domain: str, **sending: str) -> Settings:
            data = {
                "identity": {"party_id": party.value, "party_id_type": party.type, "message_id_domain": domain},
                "sending": {"first_resend_timeout": "PT3S", "http_timeout": "PT2S", **sending},
                **common,
            }
            return settings_from_mapping(data, base_dir=Path.cwd(), source=f"<{domain}>", env={})

        a = net.add("a", plain(A_ID, "a.example", status_before_resend=OUTAGE), agreements=(cpa,))
        b = net.add("b", plain(B_ID, "b.example"), agreements=(cpa,))
        await net.start()
        try:
            await scenario(net, a, b)
        finally:
            await net.close()

    asyncio.run(main())


B_PLAIN = "http://b.example:8443/msh"


def sync_order() -> Submission:
    return Submission((B_ID.value, B_ID.type), SERVICE, "NewOrder", (Payload(b"<o/>", "application/xml"),))


def test_a_status_response_on_the_connection_delivers_the_message_in_the_same_unit() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.lose_next_answers = 1
        message_id = await a.submit_async(sync_order())
        await net.settle()
        net.faults.down.add(B_PLAIN)
        await net.advance(timedelta(seconds=12))
        net.faults.down.clear()
        await net.run_until(final(a, message_id))
        stored = a.status(message_id)
        assert stored is not None and stored.state.evidence is Evidence.STATUS_RESPONSE
        answered = [d for k, d in journal(a, message_id) if k == "status-answered"]
        assert [(d["attempt"], d["messageStatus"]) for d in answered] == [(4, "Received")]
        assert b.counters["duplicates"] == 0

    run_sync(scenario)


def test_a_partner_without_the_status_service_answers_not_supported_and_gets_the_resend() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.lose_next_answers = 1
        message_id = await a.submit_async(sync_order())
        await net.settle()
        net.faults.down.add(B_PLAIN)
        await net.advance(timedelta(seconds=12))
        net.faults.down.clear()
        handler = net.network._endpoints[B_PLAIN]

        class NoStatusService:
            """B, as an MSH without the status service: "If a Receiving MSH does not support the service
            requested, it SHOULD return an Error Message with an errorCode of NotSupported" (ebMS2 §7)."""

            async def handle_http(self, body: Any, content_type: str | None, **kw: Any) -> HttpReply:
                message = parse_message(bytes(body), content_type, mode=ParseMode.LENIENT)
                message.close()
                header = message.envelope.message_header
                if header is None or header.action != "StatusRequest":
                    return await handler.handle_http(body, content_type, **kw)
                issue = Issue(ErrorCode.NOT_SUPPORTED, Severity.ERROR, "no status service here")
                reply = error_message(issue, in_reply_to=header, message_id="e@b", timestamp=net.clock())
                return HttpReply(200, SOAP_CONTENT_TYPE, serialise_envelope(reply))

        net.network.attach(B_PLAIN, NoStatusService())  # type: ignore[arg-type]
        await net.run_until(final(a, message_id))
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        assert stored.state.evidence is Evidence.TO_PARTY_ACKNOWLEDGMENT
        (answer,) = [d for k, d in journal(a, message_id) if k == "status-answered"]
        assert answer["transmitted"] is True and "NotSupported" in str(answer["reason"])
        assert b.counters["duplicates"] == 1  # resent after all, answered from B's store

    run_sync(scenario)


def test_only_our_own_messages_are_asked_about_not_an_intermediarys_forwards() -> None:
    from tests.support.multihop import C_URL, multihop, routed_cpa
    from tests.support.multihop import order as order_to_c

    async def main() -> None:
        net = TestNetwork(seed=5)

        # The intermediary is set to ask too: its forwards are resent as they are (it holds no agreement to ask
        # the To party under, ebMS2 §10).
        def asking(name: str, made: Settings) -> Settings:
            if name != "i1":
                return made
            sending = dataclasses.replace(made.sending, status_before_resend=timedelta(seconds=8))
            return dataclasses.replace(made, sending=sending)

        path = multihop(net, routed_cpa(de=True, e2e=True, hop=False), hop_interval=timedelta(seconds=5), adjust=asking)
        (i,) = path.hops
        assert i.settings.sending.status_before_resend == timedelta(seconds=8)
        await net.start()
        try:
            net.faults.lose_answers_from[C_URL] = 1.0
            message_id = await path.a.submit_async(order_to_c(1))
            await net.settle()
            net.faults.lose_answers_from.clear()
            net.faults.down.add(C_URL)
            await net.advance(timedelta(seconds=40))
            assert "status-requested" not in kinds(i, message_id)
            assert kinds(i, message_id).count("resent") >= 3
        finally:
            await net.close()

    asyncio.run(main())
