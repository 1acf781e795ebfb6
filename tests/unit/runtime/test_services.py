"""The MSH services between running MSHs on the test network (msh.testing.network): the MSH Ping (ebMS2 §8)
and the Message Status Request (§7), from the side that asks (Msh.ping, Msh.remote_status) and the side that
answers; memory stores, the in-memory transport, one fake clock, no sleep.

Partners A and B of the sample agreement answer MSH signals asynchronously (its MSH channels have
syncReplyMode none): the Pong and the StatusResponse come later to the asker's endpoint. Agreements made
by tests/support/cpa_factory.py test the synchronous case, a third party, and an agreement to choose.
"""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import pytest

from cpa.model import CollaborationProtocolAgreement, PartyId, PerMessage, SyncReplyMode
from msh.ebms.envelope import serialise_envelope
from msh.ebms.errorlist import error_message
from msh.ebms.message import ParseMode, parse_message
from msh.ebms.model import (
    Envelope,
    MessageData,
    MessageHeader,
    MessageStatus,
    Party,
    Service,
    StatusRequest,
    StatusResponse,
)
from msh.ebms.model import PartyId as HeaderPartyId
from msh.ebms.namespaces import SERVICE_MSH
from msh.engine import Evidence, OutboundStatus
from msh.errors import ConfigurationError, ErrorCode, Issue, Severity
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.msh import Msh
from msh.runtime.services import AgreementChoice
from msh.testing.network import TestNetwork
from msh.transport.port import SOAP_CONTENT_TYPE, HttpReply
from tests.support.cpa_factory import A_ID, B_ID, SERVICE, channel, make_cpa

CONFIG = Path(__file__).resolve().parents[3] / "samples" / "config"
ISO6523 = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
A_PARTY = ("123456789", ISO6523)
B_PARTY = ("987654321", ISO6523)
B_TEXT = f"{ISO6523}:987654321"
A_URL = "https://127.0.0.1:8081/msh"
B_URL = "https://127.0.0.1:8082/msh"

_T = TypeVar("_T")


@cache
def sample(name: str) -> Settings:
    path = CONFIG / f"party-{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    return settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})


def plain(party: PartyId, domain: str) -> Settings:
    """Settings of an MSH on plain HTTP without keys (for the agreements of cpa_factory, which the network is
    given: the path named here only makes the settings whole)."""
    data: dict[str, Any] = {
        "identity": {"party_id": party.value, "party_id_type": party.type, "message_id_domain": domain},
        "agreements": {"paths": [str(CONFIG.parent / "cpas" / "demo-a-b.xml")]},
        "store": {"url": "memory:"},
        "server": {"tls": False},
    }
    return settings_from_mapping(data, base_dir=Path.cwd(), source=f"<{domain}>", env={})


def order(to: tuple[str, str | None] = B_PARTY) -> Submission:
    return Submission(to, SERVICE, "NewOrder", (Payload(b"<order/>", "application/xml"),))


def run(scenario: Callable[[TestNetwork, Msh, Msh], Awaitable[None]]) -> None:
    """``scenario`` on a network of A and B under the sample agreement."""

    async def main() -> None:
        net = TestNetwork(seed=1)
        a, b = net.add("a", sample("a")), net.add("b", sample("b"))
        await net.start()
        try:
            await scenario(net, a, b)
        finally:
            await net.close()

    asyncio.run(main())


async def answered(net: TestNetwork, asking: Coroutine[Any, Any, _T], *, advance: timedelta | None = None) -> _T:
    """Run ``asking`` (a Ping or StatusRequest) while the network moves; ``advance`` the clock meanwhile."""
    task = asyncio.ensure_future(asking)
    await net.settle()
    if advance is not None:
        await net.advance(advance)
    return await asyncio.wait_for(task, timeout=30)


def received_requests(net: TestNetwork, url: str) -> list[tuple[bytes, str | None]]:
    """Every body POSTed to ``url`` from now on (recorded on its way to the MSH attached there)."""
    seen: list[tuple[bytes, str | None]] = []
    handler = net.network._endpoints[url]

    class Recording:
        async def handle_http(self, body: Any, content_type: str | None, **kw: Any) -> HttpReply:
            seen.append((bytes(body), content_type))
            return await handler.handle_http(body, content_type, **kw)

    net.network.attach(url, Recording())  # type: ignore[arg-type]
    return seen


def journal(msh: Msh, message_id: str) -> list[tuple[str, dict[str, object]]]:
    with msh.store.transaction(readonly=True) as tx:
        return [(e.kind, dict(e.detail)) for e in tx.message_events(message_id, limit=1000)]


# --- the MSH Ping (ebMS2 §8) ---------------------------------------------------------------------------


def test_a_ping_is_answered_by_a_pong_that_comes_back_asynchronously() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        pings = received_requests(net, B_URL)
        net.faults.delay = timedelta(milliseconds=40)
        result = await answered(net, a.ping("987654321"), advance=timedelta(seconds=1))
        # ebMS2 §8.2: "Once the To Party receives the MSH Ping message, they MAY generate a ... Pong".
        assert result.pong and result.problem is None
        assert (result.partner, result.cpa_id, result.url) == (B_TEXT, "cpa-demo-a-b", B_URL)
        # The sample agreement's MSH channels are asynchronous (syncReplyMode none): B answered the Ping with
        # HTTP 202 and sent the Pong to A's endpoint; the round trip is the Ping's and the Pong's flights.
        assert result.on_connection is False and result.http_status == 202
        assert result.round_trip == timedelta(milliseconds=80)
        # ebMS2 §8.1: "an ebXML Message containing no ebXML Payload Container", From us, To the partner, a
        # CPAId, a ConversationId, Service urn:oasis:names:tc:ebxml-msg:service, Action Ping, MessageData,
        # and an [XMLDSIG] Signature (the sample agreement signs our signals).
        ((body, content_type),) = pings
        ping = parse_message(body, content_type, mode=ParseMode.STRICT)
        ping.close()
        header = ping.envelope.message_header
        assert header is not None and ping.payloads == ()
        assert header.from_party.party_ids == (HeaderPartyId(*A_PARTY),)
        assert header.to_party.party_ids == (HeaderPartyId(*B_PARTY),)
        assert (header.cpa_id, header.service.value, header.action) == ("cpa-demo-a-b", SERVICE_MSH, "Ping")
        assert header.conversation_id and header.message_data.message_id == result.message_id
        assert ping.envelope.signatures and ping.envelope.sync_reply is None and ping.envelope.ack_requested == ()
        # The Pong is journaled under the Ping's MessageId (its RefToMessageId, §8.2), with who sent it.
        [(kind, detail)] = journal(a, result.message_id)
        assert kind == "signal-Pong" and detail["messageId"] == result.pong_message_id and detail["from"] == B_TEXT

    run(scenario)


def test_a_ping_to_a_partner_that_is_down_says_the_connection_was_refused() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.down.add(B_URL)
        result = await answered(net, a.ping(B_PARTY, cpa_id="cpa-demo-a-b"))
        assert not result.pong and result.http_status is None
        assert result.problem == f"connection refused ({B_URL})"

    run(scenario)


def test_a_ping_whose_pong_never_comes_says_so_once_the_time_is_up() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.down.add(A_URL)  # B takes the Ping; its Pong cannot reach A
        result = await answered(net, a.ping("987654321", timeout=5), advance=timedelta(seconds=6))
        assert not result.pong and result.http_status == 202
        assert result.problem is not None
        assert result.problem.startswith("no Pong within 5 s (HTTP 202 (no body) to the request); under agreement ")
        assert "comes asynchronously (syncReplyMode none), to our endpoint" in result.problem
        assert len(a.core.questions) == 0  # nothing is left waiting

    run(scenario)


def test_a_partner_that_does_not_support_the_ping_service_answers_not_supported() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        class NoPing:
            """An MSH without the Ping service: "it SHOULD return an Error Message with an errorCode of
            NotSupported and a highestSeverity attribute set to Error" (ebMS2 §8)."""

            async def handle_http(self, body: Any, content_type: str | None, **kw: Any) -> HttpReply:
                ping = parse_message(bytes(body), content_type, mode=ParseMode.LENIENT)
                ping.close()
                assert ping.envelope.message_header is not None
                issue = Issue(ErrorCode.NOT_SUPPORTED, Severity.ERROR, "the Ping service is not supported here")
                reply = error_message(
                    issue, in_reply_to=ping.envelope.message_header, message_id="err-1@b", timestamp=net.clock()
                )
                return HttpReply(200, SOAP_CONTENT_TYPE, serialise_envelope(reply))

        net.network.attach(B_URL, NoPing())  # type: ignore[arg-type]
        result = await answered(net, a.ping("987654321"))
        assert not result.pong and result.http_status == 200
        assert [(e.error_code, e.severity) for e in result.errors] == [("NotSupported", "Error")]
        assert result.problem == (
            "the partner answered with an error: Error NotSupported: the Ping service is not supported here"
        )

    run(scenario)


def test_an_http_refusal_of_a_ping_is_reported_with_its_status() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        class NotFound:
            async def handle_http(self, body: Any, content_type: str | None, **kw: Any) -> HttpReply:
                return HttpReply(404)

        net.network.attach(B_URL, NotFound())  # type: ignore[arg-type]
        result = await answered(net, a.ping("987654321"))
        assert (result.pong, result.http_status, result.problem) == (False, 404, f"HTTP 404 with no body from {B_URL}")

    run(scenario)


def a_b_x(*, a_msh_sync: bool = False) -> tuple[CollaborationProtocolAgreement, ...]:
    """cpa-a-b between A and B (A's MSH channel synchronous when ``a_msh_sync``) and cpa-a-x between A and X."""
    best_effort: dict[str, Any] = {
        "retries": None,
        "ack_requested": PerMessage.NEVER,
        "duplicate_elimination": PerMessage.NEVER,
    }
    mode = SyncReplyMode.MSH_SIGNALS_ONLY if a_msh_sync else SyncReplyMode.NONE
    a_msh = channel("A", channel_id="A_msh", sync_reply_mode=mode, **best_effort)
    ab = make_cpa(a_msh=a_msh, retry_interval=timedelta(seconds=10))
    x_business = channel("X", endpoint="http://x.example:8443/msh")
    x_msh = channel("X", channel_id="X_msh", endpoint="http://x.example:8443/msh", **best_effort)
    ax = make_cpa(cpaid="cpa-a-x", b_ids=(X_ID,), b_channel=x_business, b_msh=x_msh)
    return ab, ax


X_ID = PartyId("555555555", "urn:duns")


def run_factory(scenario: Callable[[TestNetwork, Msh, Msh, Msh], Awaitable[None]], *, a_msh_sync: bool = False) -> None:
    """``scenario`` on A, B and X with the agreements of :func:`a_b_x` (plain HTTP, no signing)."""

    async def main() -> None:
        ab, ax = a_b_x(a_msh_sync=a_msh_sync)
        net = TestNetwork(seed=2)
        a = net.add("a", plain(A_ID, "a.example"), agreements=(ab, ax))
        b = net.add("b", plain(B_ID, "b.example"), agreements=(ab,))
        x = net.add("x", plain(X_ID, "x.example"), agreements=(ax,))
        await net.start()
        try:
            await scenario(net, a, b, x)
        finally:
            await net.close()

    asyncio.run(main())


def test_a_pong_on_the_connection_when_the_agreement_returns_signals_synchronously() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh, x: Msh) -> None:
        pings = received_requests(net, "http://b.example:8443/msh")
        result = await answered(net, a.ping((B_ID.value, B_ID.type)))
        # CPP/A 2.0 §8.4.8.1, ebMS2 §4.3: syncReplyMode mshSignalsOnly: the Ping asks for SyncReply and the Pong
        # comes back on the connection.
        assert result.pong and result.on_connection is True and result.http_status == 200
        ((body, content_type),) = pings
        ping = parse_message(body, content_type, mode=ParseMode.STRICT)
        ping.close()
        assert ping.envelope.sync_reply is not None

    run_factory(scenario, a_msh_sync=True)


def test_the_partner_and_its_agreement_are_named_or_refused_with_the_choice() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh, x: Msh) -> None:
        with pytest.raises(ConfigurationError) as unknown:
            await a.ping("444444444")
        assert str(unknown.value) == (
            "partner 444444444: no agreement in force between us and a party with that PartyId; the partners are: "
            "555555555 (type urn:duns) in cpa-a-x; 987654321 (type urn:duns) in cpa-a-b (agreements.paths names "
            "the agreements)"
        )
        with pytest.raises(ConfigurationError, match="agreement cpa-a-x is not one in force between us and that"):
            await a.ping("987654321", cpa_id="cpa-a-x")
        result = await answered(net, a.ping("555555555"))  # the only agreement with X
        assert result.pong and result.cpa_id == "cpa-a-x"

    run_factory(scenario)


def test_a_partner_of_several_agreements_needs_one_named() -> None:
    async def main() -> None:
        ab, _ = a_b_x()
        twin = make_cpa(cpaid="cpa-a-b-2")
        net = TestNetwork()
        a = net.add("a", plain(A_ID, "a.example"), agreements=(ab, twin))
        net.add("b", plain(B_ID, "b.example"), agreements=(ab, twin))
        await net.start()
        try:
            with pytest.raises(AgreementChoice) as choice:
                await a.ping("987654321")
            assert choice.value.candidates == ("cpa-a-b", "cpa-a-b-2")
            assert "name the one to ping under (msh ping --cpa-id, cpaId, cpa_id=)" in str(choice.value)
            result = await answered(net, a.ping("987654321", cpa_id="cpa-a-b-2"))
            assert result.pong and result.cpa_id == "cpa-a-b-2"
        finally:
            await net.close()

    asyncio.run(main())


# --- the Message Status Request (ebMS2 §7), asking ------------------------------------------------------


def test_the_to_party_says_received_then_processed_with_the_time_it_received_the_message() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order())
        await net.settle()
        requests = received_requests(net, B_URL)
        net.clock.advance(timedelta(minutes=5))
        result = await answered(net, a.remote_status(message_id))
        with b.store.transaction(readonly=True) as tx:
            record = tx.find_inbound(message_id)
        assert record is not None
        # ebMS2 §7.3.3 Received "has been received by the MSH"; §7.3.2: the Timestamp is "the time the message
        # ... was received".
        assert (result.message_status, result.timestamp) == (MessageStatus.RECEIVED, record.received_at)
        assert result.on_connection is False and result.problem is None
        # ebMS2 §7.1.1: no payload; From, To, the MSH Service, Action StatusRequest, MessageData, and the
        # StatusRequest's RefToMessageId "containing the MessageId of the message whose status is being queried".
        ((body, content_type),) = requests
        request = parse_message(body, content_type, mode=ParseMode.STRICT)
        request.close()
        header = request.envelope.message_header
        assert header is not None and request.payloads == () and request.envelope.manifest is None
        assert (header.service.value, header.action) == (SERVICE_MSH, "StatusRequest")
        assert header.message_data.message_id == result.request_message_id
        assert request.envelope.status_request == StatusRequest(message_id)
        # §7.2.3: "MUST NOT be present with ... a Manifest element, a StatusResponse element, an ErrorList".
        assert request.envelope.status_response is None and request.envelope.error_list is None
        assert request.envelope.signatures  # §7.1.1: "an [XMLDSIG] Signature element"
        # ebMS2 §7.3.3 Processed, "has been processed by the MSH": once B's application has it.
        (entry,) = b.inbox()
        b.fetch(entry.id).close()
        later = await answered(net, a.remote_status(message_id))
        assert (later.message_status, later.timestamp) == (MessageStatus.PROCESSED, record.received_at)
        # Both answers are journaled with the message, each with the StatusRequest it answers.
        answers = [d for k, d in journal(a, message_id) if k == "status-answered"]
        assert answers == [
            {"attempt": None, "requestMessageId": result.request_message_id, "messageStatus": "Received"},
            {"attempt": None, "requestMessageId": later.request_message_id, "messageStatus": "Processed"},
        ]

    run(scenario)


def test_a_message_the_partner_never_got_is_not_recognized_and_has_no_timestamp() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.lose_next_requests = 1
        message_id = await a.submit_async(order())
        await net.settle()
        result = await answered(net, a.remote_status(message_id))
        # ebMS2 §7.3.3 NotRecognized; §7.3.2: the Timestamp "MUST be omitted if the message ... is NotRecognized".
        assert (result.message_status, result.timestamp) == (MessageStatus.NOT_RECOGNIZED, None)
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.AWAITING_ACK  # the resends go on

    run(scenario)


def test_received_after_a_warning_delivery_failure_makes_the_message_delivered() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.lose_answers = 1.0  # B gets every copy; A never hears back
        message_id = await a.submit_async(order())
        await net.run_until(lambda: (s := a.status(message_id)) is not None and s.state.status.final)
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.FAILED
        assert stored.state.failure is not None and stored.state.failure.severity is Severity.WARNING
        net.faults.lose_answers = 0.0
        result = await answered(net, a.remote_status(message_id))
        assert result.message_status is MessageStatus.RECEIVED
        # ebMS2 §7.3.3: Received, from the party the message went to, under its agreement: the To party has it.
        after = a.status(message_id)
        assert after is not None and after.state.status is OutboundStatus.DELIVERED
        assert after.state.evidence is Evidence.STATUS_RESPONSE

    run(scenario)


def test_a_status_response_from_another_party_does_not_count() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh, x: Msh) -> None:
        net.faults.down.add("http://a.example:8443/msh")  # B's acknowledgments (asynchronous here) never reach A
        message_id = await a.submit_async(order((B_ID.value, B_ID.type)))
        await net.run_until(lambda: (s := a.status(message_id)) is not None and s.state.status.final)
        net.faults.down.clear()
        # X, a partner of A under another agreement, says it has A's message to B.
        forged = Envelope(
            message_header=MessageHeader(
                from_party=Party((HeaderPartyId(X_ID.value, X_ID.type),)),
                to_party=Party((HeaderPartyId(A_ID.value, A_ID.type),)),
                cpa_id="cpa-a-x",
                conversation_id="c",
                service=Service(SERVICE_MSH),
                action="StatusResponse",
                message_data=MessageData("forged@x.example", net.clock(), ref_to_message_id="whatever@a.example"),
            ),
            status_response=StatusResponse(message_id, MessageStatus.RECEIVED, net.clock()),
        )
        reply, _after = a.receive_http(serialise_envelope(forged), SOAP_CONTENT_TYPE)
        assert reply.status == 202
        # docs/design.md §7: only the party the message went to, under its agreement, may report on it.
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.FAILED
        assert a.counters["foreign-signals"] == 1
        assert "status-answered" not in [k for k, _ in journal(a, message_id)]

    run_factory(scenario)


def test_a_status_request_answered_on_the_connection() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh, x: Msh) -> None:
        message_id = await a.submit_async(order((B_ID.value, B_ID.type)))
        await net.settle()
        result = await answered(net, a.remote_status(message_id))
        assert result.message_status is MessageStatus.RECEIVED and result.on_connection is True
        assert result.http_status == 200

    run_factory(scenario, a_msh_sync=True)


def test_only_our_own_messages_can_be_asked_about() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        with pytest.raises(ConfigurationError, match=r"no message sent from this store .* has that MessageId"):
            await a.remote_status("nobody@nowhere")

    run(scenario)


# --- the Message Status Request (ebMS2 §7), answering ---------------------------------------------------


def test_a_requester_that_is_no_party_of_the_messages_agreement_is_told_unauthorized() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh, x: Msh) -> None:
        message_id = await a.submit_async(order((B_ID.value, B_ID.type)))
        await net.settle()
        # X is A's partner under cpa-a-x; it asks A about A's message to B (which A sent, not received) and
        # about a message A received from B: the first is NotRecognized (A received no such message), the
        # second UnAuthorized (X is no party of cpa-a-b), neither with a Timestamp (ebMS2 §7.3.2).
        reply_id = await b.submit_async(
            Submission((A_ID.value, A_ID.type), SERVICE, "OrderResponse", (Payload(b"<ok/>", "application/xml"),))
        )
        await net.settle()

        def ask(about: str) -> StatusResponse | None:
            request = Envelope(
                message_header=MessageHeader(
                    from_party=Party((HeaderPartyId(X_ID.value, X_ID.type),)),
                    to_party=Party((HeaderPartyId(A_ID.value, A_ID.type),)),
                    cpa_id="cpa-a-x",
                    conversation_id="c",
                    service=Service(SERVICE_MSH),
                    action="StatusRequest",
                    message_data=MessageData(f"ask-{about}", net.clock()),
                ),
                status_request=StatusRequest(about),
            )
            _reply, after = a.receive_http(serialise_envelope(request), SOAP_CONTENT_TYPE)
            ((body, _endpoint),) = after.async_replies  # cpa-a-x answers asynchronously
            response = parse_message(body, SOAP_CONTENT_TYPE, mode=ParseMode.STRICT)
            response.close()
            return response.envelope.status_response

        assert ask(message_id) == StatusResponse(message_id, MessageStatus.NOT_RECOGNIZED, None)
        assert ask(reply_id) == StatusResponse(reply_id, MessageStatus.UN_AUTHORIZED, None)

    run_factory(scenario)


# --- through an intermediary (ebMS2 §10) ----------------------------------------------------------------


def test_pings_and_status_requests_go_along_the_route_and_an_intermediary_answers_forwarded() -> None:
    from msh.engine.routing import Route
    from tests.support.multihop import A_URL as A_HOP_URL
    from tests.support.multihop import C_URL, C, intermediary_id, intermediary_url, routed_cpa, settings_for
    from tests.support.multihop import order as order_to_c

    async def main() -> None:
        i_id, i_url = intermediary_id(1), intermediary_url(1)
        a_c = routed_cpa(de=True, e2e=True, hop=False)
        best_effort: dict[str, Any] = {
            "retries": None,
            "ack_requested": PerMessage.NEVER,
            "duplicate_elimination": PerMessage.NEVER,
        }
        # An agreement between A and the intermediary itself, under which A may ask it.
        a_i = make_cpa(
            cpaid="cpa-a-i",
            b_ids=(i_id,),
            a_msh=channel("A", channel_id="A_msh", endpoint=A_HOP_URL, **best_effort),
            b_channel=channel("I", endpoint=i_url),
            b_msh=channel("I", channel_id="I_msh", endpoint=i_url, **best_effort),
        )

        def route(name: str, to: PartyId, url: str, via: PartyId | None = None) -> Route:
            return Route(
                name, to.value, url, to_party_id_type=to.type, next_hop_party=(via.value, via.type) if via else None
            )

        net = TestNetwork(seed=4)
        a = net.add(
            "a",
            settings_for(A_ID, "a.example", (route("a-to-c", C, i_url, i_id),)),
            agreements=(a_c, a_i),
            urls=(A_HOP_URL,),
        )
        i = net.add(
            "i1",
            settings_for(i_id, "i1.example", (route("to-c", C, C_URL), route("to-a", A_ID, A_HOP_URL))),
            agreements=(a_i,),
            urls=(i_url,),
        )
        c = net.add(
            "c", settings_for(C, "c.example", (route("c-to-a", A_ID, i_url, i_id),)), agreements=(a_c,), urls=(C_URL,)
        )
        await net.start()
        try:
            message_id = await a.submit_async(order_to_c(1))
            await net.run_until(lambda: (s := a.status(message_id)) is not None and s.state.status.final)
            # ebMS2 §10: a Ping to C and a StatusRequest about the message to C go along A's route through the
            # intermediary, and C's answers come back along C's route.
            pinged = await answered(net, a.ping((C.value, C.type), cpa_id=a_c.cpaid))
            assert pinged.pong and pinged.url == i_url
            status = await answered(net, a.remote_status(message_id))
            assert status.message_status is MessageStatus.RECEIVED and status.url == i_url
            assert c.counters["received"] == 1
            # A asks the intermediary itself (under cpa-a-i) about the message it forwarded to C: ebMS2 §7.3.3
            # Forwarded, "has been forwarded by the MSH to another MSH", with the time it received it (§7.3.2).
            request = Envelope(
                message_header=MessageHeader(
                    from_party=Party((HeaderPartyId(A_ID.value, A_ID.type),)),
                    to_party=Party((HeaderPartyId(i_id.value, i_id.type),)),
                    cpa_id="cpa-a-i",
                    conversation_id="c",
                    service=Service(SERVICE_MSH),
                    action="StatusRequest",
                    message_data=MessageData("ask-i@a.example", net.clock()),
                ),
                status_request=StatusRequest(message_id),
            )
            to_a = received_requests(net, A_HOP_URL)
            _reply, after = i.receive_http(serialise_envelope(request), SOAP_CONTENT_TYPE)
            i.sender.after_commit(after)  # the answer goes to A along the intermediary's route
            await net.settle()
            ((body, content_type),) = to_a
            response = parse_message(body, content_type, mode=ParseMode.STRICT)
            response.close()
            forward = i.status(message_id)
            assert forward is not None
            assert response.envelope.status_response == StatusResponse(
                message_id, MessageStatus.FORWARDED, forward.created_at
            )
        finally:
            await net.close()

    asyncio.run(main())
