"""ebMS 2.0 §7 Message Status Service, §8 MSH Ping Service and §9 MessageOrder Module: each normative
sentence, checked on the running MSH (two or three MSHs on the in-memory test network with memory stores and
one fake clock, no socket, no sleep), on the engine's decisions, or on the codec.

Partners A and B of the sample agreement sign their MSH signals and answer them asynchronously; the
messages a test writes by hand go between MSHs under agreements of ``tests/support/cpa_factory.py`` (plain
HTTP, no signing), where X is a partner of A's under another agreement.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tomllib
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from cpa import load
from cpa.check import check
from cpa.interactions import interaction_problems
from cpa.model import CollaborationProtocolAgreement, MessageOrderSemantics, PartyId, PerMessage, SyncReplyMode
from msh.ebms import model as m
from msh.ebms.envelope import read_envelope, serialise_envelope
from msh.ebms.message import EbxmlMessage, ParseMode, parse_message
from msh.ebms.namespaces import ACTOR_TO_PARTY_MSH, SERVICE_MSH
from msh.engine import Discard, Evidence, OutboundEvent, OutboundStatus, receive
from msh.engine.ordering import LAST_SEQUENCE_NUMBER, SequenceCounter, SequenceNotReady, assign
from msh.errors import ConfigurationError, EbmsError
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.config.model import SendingSettings
from msh.runtime.msh import Msh
from msh.safexml import parse_xml
from msh.store.api import Direction, InboxState
from msh.testing.network import TestNetwork
from msh.transport.port import SOAP_CONTENT_TYPE, HttpReply
from tests.conformance.clauses import Exemption, clause
from tests.support.agreement_files import with_message_order
from tests.support.cpa_factory import A_ID, B_ID, NOW, SERVICE, channel, make_cpa, make_envelope

EXEMPTIONS: tuple[Exemption, ...] = ()

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "samples" / "config"
ISO6523 = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
A_PARTY = m.PartyId("123456789", ISO6523)
B_PARTY = m.PartyId("987654321", ISO6523)
A_URL = "https://127.0.0.1:8081/msh"
B_URL = "https://127.0.0.1:8082/msh"
X_ID = PartyId("555555555", "urn:duns")
PLAIN_A_URL = "http://a.example:8443/msh"
SEQUENCE_NUMBER = "//Header/MessageOrder/SequenceNumber"

_T = TypeVar("_T")


# --- the networks -------------------------------------------------------------------------------------


def sample(name: str, **sending: object) -> Settings:
    """The sample settings of party ``name`` on a memory store; ``sending`` replaces keys of ``[sending]``
    (None removes one: its default applies)."""
    path = CONFIG / f"party-{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    for key, value in sending.items():
        data["sending"].pop(key, None)
        if value is not None:
            data["sending"][key] = value
    return settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})


def plain(party: PartyId, domain: str) -> Settings:
    """Settings of an MSH on plain HTTP without keys, for the agreements of cpa_factory."""
    data: dict[str, Any] = {
        "identity": {"party_id": party.value, "party_id_type": party.type, "message_id_domain": domain},
        "agreements": {"paths": [str(ROOT / "samples" / "cpas" / "demo-a-b.xml")]},
        "store": {"url": "memory:"},
        "server": {"tls": False},
    }
    return settings_from_mapping(data, base_dir=Path.cwd(), source=f"<{domain}>", env={})


def run_sample(
    scenario: Callable[[TestNetwork, Msh, Msh], Awaitable[None]],
    *,
    a: Settings | None = None,
    b: Settings | None = None,
    cpa: bytes | None = None,
) -> None:
    """``scenario`` with A and B under the sample agreement (or ``cpa``), with their keys."""

    async def main() -> None:
        net = TestNetwork(seed=1)
        agreements = [load(cpa)] if cpa is not None else None
        msh_a = net.add("a", a or sample("a"), agreements=agreements)
        msh_b = net.add("b", b or sample("b"), agreements=agreements)
        await net.start()
        try:
            await scenario(net, msh_a, msh_b)
        finally:
            await net.close()

    asyncio.run(main())


BEST_EFFORT: dict[str, Any] = {
    "retries": None,
    "ack_requested": PerMessage.NEVER,
    "duplicate_elimination": PerMessage.NEVER,
}


def plain_agreements() -> tuple[CollaborationProtocolAgreement, CollaborationProtocolAgreement]:
    """cpa-a-b between A and B, and cpa-a-x between A and X (MSH signals asynchronous, nothing signed)."""
    ab = make_cpa(a_msh=channel("A", channel_id="A_msh", **BEST_EFFORT), retry_interval=timedelta(seconds=10))
    x_url = "http://x.example:8443/msh"
    x_msh = channel("X", channel_id="X_msh", endpoint=x_url, **BEST_EFFORT)
    ax = make_cpa(cpaid="cpa-a-x", b_ids=(X_ID,), b_channel=channel("X", endpoint=x_url), b_msh=x_msh)
    return ab, ax


def run_plain(scenario: Callable[[TestNetwork, Msh, Msh, Msh], Awaitable[None]]) -> None:
    """``scenario`` on A, B and X with :func:`plain_agreements`."""

    async def main() -> None:
        ab, ax = plain_agreements()
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


async def answered(net: TestNetwork, asking: Coroutine[Any, Any, _T], *, advance: timedelta | None = None) -> _T:
    """Run ``asking`` (a Ping or a StatusRequest) while the network moves."""
    task = asyncio.ensure_future(asking)
    await net.settle()
    if advance is not None:
        await net.advance(advance)
    return await asyncio.wait_for(task, timeout=30)


def recorded(net: TestNetwork, url: str) -> list[EbxmlMessage]:
    """Every message POSTed to ``url`` from now on, read as it travelled."""
    seen: list[EbxmlMessage] = []
    handler = net.network._endpoints[url]

    class Recording:
        async def handle_http(self, body: Any, content_type: str | None, **kw: Any) -> HttpReply:
            message = parse_message(bytes(body), content_type, mode=ParseMode.STRICT)
            message.close()
            seen.append(message)
            return await handler.handle_http(body, content_type, **kw)

    net.network.attach(url, Recording())  # type: ignore[arg-type]
    return seen


def of_action(messages: list[EbxmlMessage], action: str) -> list[EbxmlMessage]:
    return [
        msg
        for msg in messages
        if msg.envelope.message_header is not None and msg.envelope.message_header.action == action
    ]


def header_of(envelope: m.Envelope) -> m.MessageHeader:
    assert envelope.message_header is not None
    return envelope.message_header


def order(to: m.PartyId = B_PARTY, action: str = "NewOrder") -> Submission:
    return Submission((to.value, to.type), SERVICE, action, (Payload(b"<order/>", "application/xml"),))


def party(pid: PartyId) -> m.Party:
    return m.Party((m.PartyId(pid.value, pid.type),))


def msh_signal(
    action: str,
    message_id: str,
    *,
    sender: PartyId = A_ID,
    to: PartyId = B_ID,
    cpa_id: str = "cpa-a-b",
    **body: Any,
) -> m.Envelope:
    """A message of the MSH service, written by hand (as another implementation would send it)."""
    header = m.MessageHeader(
        from_party=party(sender),
        to_party=party(to),
        cpa_id=cpa_id,
        conversation_id="conv-status",
        service=m.Service(SERVICE_MSH),
        action=action,
        message_data=m.MessageData(message_id, NOW),
    )
    return m.Envelope(message_header=header, **body)


def replies(msh: Msh, envelope: m.Envelope | bytes) -> list[m.Envelope]:
    """Everything ``msh`` answers to ``envelope`` POSTed to it: on the connection and asynchronously."""
    body = envelope if isinstance(envelope, bytes) else serialise_envelope(envelope)
    reply, after = msh.receive_http(body, SOAP_CONTENT_TYPE)
    bodies = ([reply.body] if reply.body else []) + [b for b, _ in after.async_replies]
    out = []
    for raw in bodies:
        message = parse_message(bytes(raw), SOAP_CONTENT_TYPE, mode=ParseMode.STRICT)
        message.close()
        out.append(message.envelope)
    return out


def errors_of(envelopes: list[m.Envelope]) -> list[tuple[str, str, str | None]]:
    return [
        (e.error_code, e.severity.value, e.location)
        for env in envelopes
        if env.error_list is not None
        for e in env.error_list.errors
    ]


# --- §7 Message Status Service --------------------------------------------------------------------------


@clause(
    "7",
    (1780,),
    "A Message Service Handler SHOULD respond to Message Status Requests for messages that have been sent "
    "reliably and the MessageId in the RefToMessageId is present in persistent storage (see section 6.1).",
)
def test_7_answers_about_a_reliably_sent_message_held_in_persistent_storage() -> None:
    """B received A's reliably sent message and keeps its MessageId in its store: asked about it, B responds
    with what its store says (Received, with the time it was received)."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order())
        await net.settle()
        sent = a.status(message_id)
        assert sent is not None and sent.state.status is OutboundStatus.DELIVERED  # acknowledged: reliable
        with b.store.transaction(readonly=True) as tx:
            record = tx.find_inbound(message_id)
        assert record is not None  # in B's persistent storage
        responses = recorded(net, A_URL)
        result = await answered(net, a.remote_status(message_id))
        assert (result.message_status, result.timestamp) == (m.MessageStatus.RECEIVED, record.received_at)
        (response,) = of_action(responses, "StatusResponse")
        assert response.envelope.status_response is not None
        assert response.envelope.status_response.ref_to_message_id == message_id

    run_sample(scenario)


@clause(
    "7",
    (1785,),
    "A Message Service SHOULD NOT use the Message Status Request Service to implement Reliable Messaging.",
)
def test_7_reliable_messaging_does_not_use_status_requests_by_default() -> None:
    """Out of the box, a message whose acknowledgment was lost and whose partner was then down for a while
    is simply resent until acknowledged (ebMS2 §6.5.4): no StatusRequest goes out.

    The setting ``sending.status_before_resend`` (a duration; unset by default) changes one thing: once the
    partner has been unreachable that long, the MSH asks it for the message's status before sending the body
    again and skips that resend if the partner has it. The acknowledgment still delivers messages; the option
    only spares a large body a second trip after an outage, and an operator turns it on knowingly."""
    assert SendingSettings().status_before_resend is None

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        assert a.settings.sending.status_before_resend is None
        to_b = recorded(net, B_URL)
        net.faults.lose_next_answers = 1  # B has the message; A never hears so
        message_id = await a.submit_async(order())
        await net.settle()
        net.faults.down.add(B_URL)
        await net.advance(timedelta(seconds=12))
        net.faults.down.clear()
        await net.run_until(lambda: (s := a.status(message_id)) is not None and s.state.status.final)
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        assert stored.state.evidence is Evidence.TO_PARTY_ACKNOWLEDGMENT
        assert of_action(to_b, "StatusRequest") == []
        assert len(of_action(to_b, "NewOrder")) >= 2  # resent, not asked about

    run_sample(scenario, a=sample("a", status_before_resend=None))


async def _unsupported_and_supported(b: Msh, action: str, supported: m.Envelope) -> list[m.Envelope]:
    """B's answers to a request for a service of the MSH that B does not offer (Action ``action``) and to
    ``supported``; returns the latter's."""
    unknown = replies(b, msh_signal(action, f"{action}-1@a.example"))
    assert errors_of(unknown) == [("NotSupported", "Error", "//Header/MessageHeader/Action")]
    (error_message,) = unknown
    assert error_message.error_list is not None
    assert error_message.error_list.highest_severity is m.Severity.ERROR
    assert header_of(error_message).action == "MessageError"
    answer = replies(b, supported)
    assert errors_of(answer) == []
    return answer


@clause(
    "7",
    (1787,),
    "If a Receiving MSH does not support the service requested, it SHOULD return an Error Message with an "
    "errorCode of NotSupported and a highestSeverity attribute set to Error.",
)
def test_7_a_service_not_supported_is_answered_not_supported_the_status_service_is_answered() -> None:
    """This MSH supports the Message Status Request service (a StatusRequest gets a StatusResponse, no error);
    a request for a service of the MSH service it does not offer (an Action it does not implement) gets an
    Error Message: errorCode NotSupported, highestSeverity Error."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh, x: Msh) -> None:
        request = msh_signal("StatusRequest", "ask-1@a.example", status_request=m.StatusRequest("any@a.example"))
        (answer,) = await _unsupported_and_supported(b, "StatusQuery", request)
        assert header_of(answer).action == "StatusResponse" and answer.status_response is not None

    run_plain(scenario)


async def _status_exchange(net: TestNetwork, a: Msh, b: Msh) -> tuple[str, m.Envelope, EbxmlMessage]:
    """A sends B a message and asks B for its status: the message's id, A's request, B's response."""
    message_id = await a.submit_async(order())
    await net.settle()
    to_b, to_a = recorded(net, B_URL), recorded(net, A_URL)
    result = await answered(net, a.remote_status(message_id))
    assert result.message_status is m.MessageStatus.RECEIVED
    (request,) = of_action(to_b, "StatusRequest")
    (response,) = of_action(to_a, "StatusResponse")
    return message_id, request.envelope, response


@clause(
    "7.1.2",
    (1806,),
    "Once the To Party receives the Message Status Request message, they SHOULD generate a Message Status "
    "Response message with no ebXML Payload Container",
)
def test_7_1_2_the_to_party_generates_a_status_response_message() -> None:
    """B's answer to A's StatusRequest is a Message Status Response message as §7.1.2 lists it: no payload;
    From B; To "set to the value of the From element in the Message Status Request message"; Service
    urn:oasis:names:tc:ebxml-msg:service; Action StatusResponse; MessageData with a RefToMessageId that
    identifies the request; a StatusResponse element; an XMLDSIG Signature (the sample agreement signs
    signals)."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        _message_id, request, response = await _status_exchange(net, a, b)
        header = header_of(response.envelope)
        assert response.payloads == () and response.envelope.manifest is None
        assert header.from_party.party_ids == (B_PARTY,)
        assert header.to_party == header_of(request).from_party
        assert (header.service.value, header.action) == (SERVICE_MSH, "StatusResponse")
        assert header.message_data.ref_to_message_id == header_of(request).message_id
        assert response.envelope.status_response is not None
        assert response.envelope.signatures

    run_sample(scenario)


@clause("7.1.3", (1819,), "Parties who receive a Message Status Request message SHOULD always respond to the message.")
def test_7_1_3_every_status_request_gets_a_response() -> None:
    """Whatever is asked, by whom, the request is answered (never ignored): a message B received, one it
    never saw, one asked about by a party outside the message's agreement (answered UnAuthorized: §7.1.3
    lets B ignore that one, and this MSH chooses to answer), and a request that names the StatusRequest
    Action but carries no StatusRequest element (answered with an error saying so)."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh, x: Msh) -> None:
        message_id = await x.submit_async(order(m.PartyId(A_ID.value, A_ID.type), "OrderResponse"))
        await net.settle()
        known = replies(
            a,
            msh_signal(
                "StatusRequest",
                "q1@x",
                sender=X_ID,
                to=A_ID,
                cpa_id="cpa-a-x",
                status_request=m.StatusRequest(message_id),
            ),
        )
        unknown = replies(
            a,
            msh_signal(
                "StatusRequest",
                "q2@x",
                sender=X_ID,
                to=A_ID,
                cpa_id="cpa-a-x",
                status_request=m.StatusRequest("never@x.example"),
            ),
        )
        stranger = replies(
            a, msh_signal("StatusRequest", "q3@b", sender=B_ID, to=A_ID, status_request=m.StatusRequest(message_id))
        )
        statuses = [
            [r.status_response.message_status for r in got if r.status_response] for got in (known, unknown, stranger)
        ]
        assert statuses == [
            [m.MessageStatus.RECEIVED],
            [m.MessageStatus.NOT_RECOGNIZED],
            [m.MessageStatus.UN_AUTHORIZED],
        ]
        empty = replies(a, msh_signal("StatusRequest", "q4@x", sender=X_ID, to=A_ID, cpa_id="cpa-a-x"))
        assert len(empty) == 1 and errors_of(empty)

    run_plain(scenario)


@clause(
    "7.2.1",
    (1831,),
    "A REQUIRED RefToMessageId element contains the MessageId of the message whose status is being requested.",
)
def test_7_2_1_the_status_request_names_the_message_asked_about() -> None:
    """Asking: A's StatusRequest carries RefToMessageId, the MessageId of the message asked about. Answering:
    a StatusRequest without RefToMessageId is refused with an error (it is REQUIRED)."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id, request, _response = await _status_exchange(net, a, b)
        assert request.status_request == m.StatusRequest(message_id)

    run_sample(scenario)

    async def without(net: TestNetwork, a: Msh, b: Msh, x: Msh) -> None:
        xml = serialise_envelope(msh_signal("StatusRequest", "ask-1@a.example", status_request=m.StatusRequest("r@a")))
        bare = xml.replace(b"<eb:RefToMessageId>r@a</eb:RefToMessageId>", b"")
        assert bare != xml
        answer = replies(b, bare)
        assert [r.status_response for r in answer] == [None]
        assert errors_of(answer) == [("OtherXml", "Error", "//Body/StatusRequest/RefToMessageId")]

    run_plain(without)


@clause(
    "7.2.3",
    (1839,),
    "A StatusRequest element MUST NOT be present with the following elements: a Manifest element a "
    "StatusResponse element an ErrorList element",
)
@pytest.mark.parametrize(
    "extra",
    [
        {"manifest": m.Manifest((m.Reference("https://example.com/catalogue.xml"),))},
        {"status_response": m.StatusResponse("other@a.example", m.MessageStatus.RECEIVED)},
        {"error_list": m.ErrorList((m.Error("Inconsistent", m.Severity.WARNING),), m.Severity.WARNING)},
    ],
    ids=["Manifest", "StatusResponse", "ErrorList"],
)
def test_7_2_3_a_status_request_never_comes_with_a_manifest_status_response_or_error_list(
    extra: dict[str, object],
) -> None:
    """Asking: A's StatusRequest carries none of the three. Answering: one that does is refused
    (Inconsistent, Error), not answered with a status."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        _message_id, request, _response = await _status_exchange(net, a, b)
        assert (request.manifest, request.status_response, request.error_list) == (None, None, None)

    if "manifest" in extra:
        run_sample(scenario)

    async def refused(net: TestNetwork, a: Msh, b: Msh, x: Msh) -> None:
        request = msh_signal(
            "StatusRequest", "ask-1@a.example", status_request=m.StatusRequest("any@a.example"), **extra
        )
        answer = replies(b, request)
        assert [r.status_response for r in answer] == [None]
        assert ("Inconsistent", "Error", "//Body/StatusRequest") in errors_of(answer)

    run_plain(refused)


@clause(
    "7.3.1",
    (1853,),
    "A REQUIRED RefToMessageId element contains the MessageId of the message whose status is being reported.",
)
@clause(
    "7.3.1",
    (1855,),
    "RefToMessageId element child of the MessageData element of a message containing a StatusResponse element "
    "SHALL have the MessageId of the message containing the StatusRequest element to which the StatusResponse "
    "element applies.",
)
@clause(
    "7.3.1",
    (1857,),
    "The RefToMessageId child element of the StatusRequest or StatusResponse element SHALL contain the MessageId "
    "of the message whose status is being queried.",
)
def test_7_3_1_the_status_response_refers_to_the_request_and_to_the_message() -> None:
    """B's StatusResponse message: MessageData/RefToMessageId is the StatusRequest message's MessageId;
    StatusResponse/RefToMessageId (present) is the MessageId of the message asked about, as is
    StatusRequest/RefToMessageId. A reads the answer as the status of that message (its sending record
    shows the StatusResponse)."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id, request, response = await _status_exchange(net, a, b)
        assert header_of(response.envelope).message_data.ref_to_message_id == header_of(request).message_id
        assert response.envelope.status_response is not None
        assert response.envelope.status_response.ref_to_message_id == message_id
        assert request.status_request is not None and request.status_request.ref_to_message_id == message_id

    run_sample(scenario)


@clause(
    "7.3.2",
    (1861,),
    "This MUST be omitted if the message, whose status is being reported, is NotRecognized or the request was "
    "UnAuthorized.",
)
def test_7_3_2_no_timestamp_when_not_recognized_or_unauthorized() -> None:
    """Answering: NotRecognized (a MessageId never received) and UnAuthorized (a requester that is no party
    of the message's agreement) carry no Timestamp; Received carries the time the message was received."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh, x: Msh) -> None:
        message_id = await x.submit_async(order(m.PartyId(A_ID.value, A_ID.type), "OrderResponse"))
        await net.settle()
        with a.store.transaction(readonly=True) as tx:
            record = tx.find_inbound(message_id)
        assert record is not None

        def ask(about: str, sender: PartyId, cpa_id: str, n: int) -> m.StatusResponse | None:
            request = msh_signal(
                "StatusRequest", f"q{n}@x", sender=sender, to=A_ID, cpa_id=cpa_id, status_request=m.StatusRequest(about)
            )
            (answer,) = replies(a, request)
            return answer.status_response

        assert ask("never@x.example", X_ID, "cpa-a-x", 1) == m.StatusResponse(
            "never@x.example", m.MessageStatus.NOT_RECOGNIZED, None
        )
        assert ask(message_id, B_ID, "cpa-a-b", 2) == m.StatusResponse(message_id, m.MessageStatus.UN_AUTHORIZED, None)
        assert ask(message_id, X_ID, "cpa-a-x", 3) == m.StatusResponse(
            message_id, m.MessageStatus.RECEIVED, record.received_at
        )

    run_plain(scenario)


@clause(
    "7.3.3",
    (1864, 1865),
    "The REQUIRED messageStatus attribute identifies the status of the message identified by the RefToMessageId "
    "element. It SHALL be set to one of the following values:",
)
def test_7_3_3_message_status_says_what_became_of_the_message() -> None:
    """Answering: Received once the MSH has the message, Processed once it handed it to the application,
    NotRecognized for a message it does not know, each the status of the message RefToMessageId names.
    Reading: a StatusResponse without messageStatus, or with a value not in the list, is not taken."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order())
        await net.settle()
        first = await answered(net, a.remote_status(message_id))
        assert first.message_status is m.MessageStatus.RECEIVED
        (entry,) = b.inbox()
        b.fetch(entry.id).close()
        second = await answered(net, a.remote_status(message_id))
        assert second.message_status is m.MessageStatus.PROCESSED
        net.faults.lose_next_requests = 1
        lost = await a.submit_async(order())
        await net.settle()
        third = await answered(net, a.remote_status(lost))
        assert third.message_status is m.MessageStatus.NOT_RECOGNIZED

    run_sample(scenario)

    response = msh_signal("StatusResponse", "r1@b", status_response=m.StatusResponse("x@a", m.MessageStatus.RECEIVED))
    xml = serialise_envelope(response)
    for bad in (b'eb:messageStatus="Lost"', b""):
        text = xml.replace(b'eb:messageStatus="Received"', bad)
        assert text != xml
        with pytest.raises(EbmsError) as refused:
            read_envelope(parse_xml(text))
        assert refused.value.location == "//Body/StatusResponse/@messageStatus", bad


@clause(
    "7.3.5",
    (1885,),
    "This element MUST NOT be present with the following elements: a Manifest element a StatusRequest element "
    "an ErrorList element with a highestSeverity attribute set to Error",
)
def test_7_3_5_a_status_response_never_comes_with_a_manifest_status_request_or_error() -> None:
    """Answering: B's StatusResponse message carries none of the three. Reading: a StatusResponse about our
    message that comes with one of them is discarded, never taken as the message's status."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        _message_id, _request, response = await _status_exchange(net, a, b)
        envelope = response.envelope
        assert (envelope.manifest, envelope.status_request, envelope.error_list) == (None, None, None)

    run_sample(scenario)
    cpa = make_cpa()
    status = m.StatusResponse("ours@b.example", m.MessageStatus.RECEIVED, NOW)
    for extra in (
        {"manifest": m.Manifest((m.Reference("https://example.com/catalogue.xml"),))},
        {"status_request": m.StatusRequest("other@b.example")},
        {"error_list": m.ErrorList((m.Error("Inconsistent", m.Severity.ERROR),), m.Severity.ERROR)},
    ):
        answer = msh_signal("StatusResponse", "r1@a.example", status_response=status, **extra)
        decision = receive(
            answer, check_result=check(answer, cpa, now=NOW), duplicate=None, now=NOW, new_message_id="n"
        )
        assert [type(action) for action in decision.actions] == [Discard], extra
        assert not any(isinstance(action, OutboundEvent) for action in decision.actions)


# --- §8 MSH Ping Service ----------------------------------------------------------------------------------


@clause(
    "8",
    (1894,),
    "If a Receiving MSH does not support the service requested, it SHOULD return an Error Message with an "
    "errorCode of NotSupported and a highestSeverity attribute set to Error.",
)
def test_8_a_service_not_supported_is_answered_not_supported_the_ping_service_is_answered() -> None:
    """This MSH supports the Ping service (a Ping gets a Pong, no error); a request for a service of the MSH
    service it does not offer (here Action ``Echo``) gets an Error Message: NotSupported, highestSeverity
    Error."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh, x: Msh) -> None:
        (answer,) = await _unsupported_and_supported(b, "Echo", msh_signal("Ping", "ping-1@a.example"))
        assert header_of(answer).action == "Pong"

    run_plain(scenario)


@clause("8.3", (1991,), "Parties who receive a MSH Ping message SHOULD always respond to the message.")
def test_8_3_a_ping_is_answered_with_a_pong() -> None:
    """A pings B: B responds with a Pong (§8.2: From B, To A, the MSH service, Action Pong, RefToMessageId
    the Ping's MessageId), signed as the agreement signs signals; A's ping reports it."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        to_b, to_a = recorded(net, B_URL), recorded(net, A_URL)
        result = await answered(net, a.ping("987654321"), advance=timedelta(seconds=1))
        assert result.pong and result.problem is None
        (ping,) = of_action(to_b, "Ping")
        (pong,) = of_action(to_a, "Pong")
        header = header_of(pong.envelope)
        assert header.from_party.party_ids == (B_PARTY,) and header.to_party.party_ids == (A_PARTY,)
        assert header.service.value == SERVICE_MSH and pong.payloads == ()
        assert header.message_data.ref_to_message_id == header_of(ping.envelope).message_id == result.message_id
        assert pong.envelope.signatures

    run_sample(scenario)


# --- §9 MessageOrder Module ------------------------------------------------------------------------------

ORDERED = with_message_order()


def run_ordered(scenario: Callable[[TestNetwork, Msh, Msh], Awaitable[None]], *, max_held: int | None = None) -> None:
    """``scenario`` with A and B under the sample agreement with message order guaranteed."""
    b = sample("b")
    if max_held is not None:
        b = dataclasses.replace(b, receiving=dataclasses.replace(b.receiving, max_held_messages=max_held))
    run_sample(scenario, b=b, cpa=ORDERED)


def numbered(n: int) -> Submission:
    body = f"<order n='{n}'/>".encode()
    return Submission(
        (B_PARTY.value, B_PARTY.type), SERVICE, "NewOrder", (Payload(body, "application/xml"),), conversation_id="c-1"
    )


def wire(messages: list[EbxmlMessage], message_id: str) -> m.Envelope:
    """The first transmission of ``message_id`` as it travelled."""
    return next(msg.envelope for msg in messages if msg.envelope.message_id == message_id)


def given_to_application(b: Msh) -> list[str]:
    given: list[str] = []
    b.on_message = lambda _entry, message_id: given.append(message_id)
    return given


def lost(message_id: str) -> Callable[[str, bytes], bool]:
    marker = f">{message_id}<".encode()
    return lambda _url, body: marker in body


def ordered_cpa(**kw: Any) -> CollaborationProtocolAgreement:
    """An agreement of cpa_factory whose A sends with message order guaranteed (``kw`` for A's channel)."""
    settings: dict[str, Any] = {"message_order": MessageOrderSemantics.GUARANTEED, **kw}
    return make_cpa(a_channel=channel("A", **settings))


def delivered(a: Msh, ids: list[str]) -> Callable[[], bool]:
    return lambda: all((s := a.status(i)) is not None and s.state.status is OutboundStatus.DELIVERED for i in ids)


@clause("9", (1998,), "Reliable Messaging MUST be used when a MessageOrder element is present.")
@clause(
    "9",
    (2000,),
    "MessageOrder module MUST only be used in conjunction with the ebXML Reliable Messaging Module (section 6) "
    "with a scheme of Once-And-Only-Once (sections 6.6).",
)
def test_9_message_order_travels_only_with_once_and_only_once_reliable_messaging() -> None:
    """Sending: every message with MessageOrder asks for the To party's acknowledgment and carries
    DuplicateElimination (§6.6 once-and-only-once), and is resent until acknowledged; a submission that
    leaves either out under an agreement guaranteeing order is refused, and so is an agreement that
    guarantees order without acknowledgments or duplicate elimination, when it is loaded."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        to_b = recorded(net, B_URL)
        net.faults.lose_next_requests = 1
        ids = [await a.submit_async(numbered(n)) for n in range(2)]
        await net.run_until(delivered(a, ids))
        for message_id in ids:
            envelope = wire(to_b, message_id)
            assert envelope.message_order is not None
            assert [r.actor for r in envelope.ack_requested] == [ACTOR_TO_PARTY_MSH]
            assert header_of(envelope).duplicate_elimination
        assert len(a.attempts(ids[0])) == 2  # the first transmission was lost: resent until acknowledged
        for leave_out in ({"ack_requested": False}, {"duplicate_elimination": False}):
            with pytest.raises(ConfigurationError, match="guarantees message order"):
                await a.submit_async(dataclasses.replace(numbered(9), **leave_out))

    run_ordered(scenario)
    assert interaction_problems(ordered_cpa()) == []
    (no_acks,) = interaction_problems(ordered_cpa(ack_requested=PerMessage.NEVER))
    assert "Reliable Messaging MUST be used" in no_acks
    (no_de,) = interaction_problems(ordered_cpa(duplicate_elimination=PerMessage.NEVER))
    assert "DuplicateElimination MUST also be present" in no_de
    with pytest.raises(ConfigurationError, match="Reliable Messaging MUST be used"):
        Msh(plain(A_ID, "a.example"), agreements=[ordered_cpa(ack_requested=PerMessage.NEVER)], keys=False)


@clause(
    "9.1",
    (2012, 2013),
    "When the MessageOrder element is present, DuplicateElimination MUST also be present and SyncReply MUST NOT "
    "be present.",
)
def test_9_1_message_order_comes_with_duplicate_elimination_and_without_sync_reply() -> None:
    """Sending: each ordered message carries DuplicateElimination and no SyncReply; an agreement that would
    put SyncReply beside MessageOrder is refused when loaded. Receiving: MessageOrder without
    DuplicateElimination, or with SyncReply, is refused (Inconsistent, Error): never stored or delivered."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        to_b = recorded(net, B_URL)
        message_id = await a.submit_async(numbered(0))
        await net.run_until(delivered(a, [message_id]))
        envelope = wire(to_b, message_id)
        assert envelope.message_order is not None
        assert header_of(envelope).duplicate_elimination and envelope.sync_reply is None

    run_ordered(scenario)
    (problem,) = interaction_problems(ordered_cpa(sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY))
    assert "SyncReply MUST NOT be present" in problem

    async def receiving(net: TestNetwork, a: Msh, b: Msh, x: Msh) -> None:
        for n, wrong in enumerate(({"duplicate_elimination": False}, {"sync_reply": True})):
            envelope = make_envelope(message_order=True, **wrong)  # type: ignore[arg-type]
            header = header_of(envelope)
            data = dataclasses.replace(header.message_data, message_id=f"ordered-{n}@a.example")
            envelope = dataclasses.replace(envelope, message_header=dataclasses.replace(header, message_data=data))
            answer = replies(b, envelope)
            assert ("Inconsistent", "Error", "//Header/MessageOrder") in errors_of(answer), wrong
            with b.store.transaction(readonly=True) as tx:
                assert tx.find_inbound(f"ordered-{n}@a.example") is None
        assert b.inbox(None) == []

    run_plain_ordered(receiving)


def run_plain_ordered(scenario: Callable[[TestNetwork, Msh, Msh, Msh], Awaitable[None]]) -> None:
    """``scenario`` on A, B and X, A and B under an agreement of cpa_factory that guarantees order with
    duplicate elimination and acknowledgments left to each message (perMessage), no SyncReply."""

    async def main() -> None:
        per_message = {"duplicate_elimination": PerMessage.PER_MESSAGE, "ack_requested": PerMessage.PER_MESSAGE}
        ab = make_cpa(
            a_channel=channel("A", message_order=MessageOrderSemantics.GUARANTEED, **per_message),  # type: ignore[arg-type]
            a_msh=channel("A", channel_id="A_msh", **BEST_EFFORT),
        )
        net = TestNetwork(seed=2)
        a = net.add("a", plain(A_ID, "a.example"), agreements=(ab,))
        b = net.add("b", plain(B_ID, "b.example"), agreements=(ab,))
        x = net.add("x", plain(X_ID, "x.example"), agreements=())
        await net.start()
        try:
            await scenario(net, a, b, x)
        finally:
            await net.close()

    asyncio.run(main())


@clause(
    "9.1.1",
    (2015,),
    "The REQUIRED SequenceNumber element indicates the sequence a Receiving MSH MUST process messages.",
)
@clause(
    "9.1.1",
    (2020,),
    "A MSH that receives a message with a SequenceNumber element MUST NOT pass the message to an application "
    "until all the messages with a lower SequenceNumber have been passed to the application.",
)
def test_9_1_1_messages_reach_the_application_in_sequence_number_order() -> None:
    """A sends 0, 1, 2, 3; 1 is lost on its first trips. B has 2 and 3 (it acknowledged them) but passes
    neither to the application until 1 has been; then 1, 2, 3 in that order. Reading: a MessageOrder
    without its SequenceNumber is refused."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        given = given_to_application(b)
        first = await a.submit_async(numbered(0))
        await net.settle()
        missing = await a.submit_async(numbered(1))
        net.faults.drop = lost(missing)
        after = [await a.submit_async(numbered(n)) for n in (2, 3)]
        await net.settle()
        assert given == [first]
        assert [e.message_id for e in b.inbox(InboxState.HELD, limit=10)] == after
        assert [e.message_id for e in b.inbox(InboxState.NEW, limit=10)] == [first]
        net.faults.drop = None
        await net.run_until(delivered(a, [missing]))
        assert given == [first, missing, *after]

    run_ordered(scenario)
    order_element = m.MessageOrder(3, m.SequenceStatus.CONTINUE)
    xml = serialise_envelope(dataclasses.replace(make_envelope(), message_order=order_element))
    bare = xml.replace(b'<eb:SequenceNumber eb:status="Continue">3</eb:SequenceNumber>', b"")
    bare = bare.replace(b"<eb:SequenceNumber>3</eb:SequenceNumber>", b"")
    assert bare != xml
    with pytest.raises(EbmsError, match="SequenceNumber"):
        read_envelope(parse_xml(bare))


@clause(
    "9.1.1",
    (2023,),
    "If the implementation defined limit for saved out-of-sequence messages is reached, then the Receiving MSH "
    "MUST indicate a delivery failure to the Sending MSH with errorCode set to DeliveryFailure and severity set "
    "to Error (see section 4.1.5).",
)
def test_9_1_1_past_the_limit_of_held_messages_a_delivery_failure_error() -> None:
    """B keeps at most two messages waiting for a missing one (``receiving.max_held_messages``): the third
    that would wait is answered with an ErrorList, DeliveryFailure, Error, and A records the message failed."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        given = given_to_application(b)
        first = await a.submit_async(numbered(0))
        await net.settle()
        missing = await a.submit_async(numbered(1))
        net.faults.drop = lost(missing)
        held = [await a.submit_async(numbered(n)) for n in (2, 3)]
        await net.settle()
        over = await a.submit_async(numbered(4))
        await net.run_until(lambda: (s := a.status(over)) is not None and s.state.status.final)
        stored = a.status(over)
        assert stored is not None and stored.state.status is OutboundStatus.FAILED
        (refusal,) = [e for e in events(a, over) if e.kind == "error-received"]
        (error,) = refusal.detail["errors"]  # type: ignore[index]
        assert (error["errorCode"], error["severity"]) == ("DeliveryFailure", "Error")
        assert [e.message_id for e in b.inbox(InboxState.HELD, limit=10)] == held
        assert given == [first]

    run_ordered(scenario, max_held=2)


def events(msh: Msh, message_id: str) -> list[Any]:
    with msh.store.transaction(readonly=True) as tx:
        return list(tx.message_events(message_id, direction=Direction.OUTBOUND))


@clause(
    "9.1.1",
    (2032, 2033),
    "The SequenceNumber element has a single attribute, status. This attribute is an enumeration, which SHALL "
    "have one of the following values:",
)
@clause(
    "9.1.1",
    (2036, 2037, 2038),
    'When the SequenceNumber is set to "0" because of 1 or 2 above, the Sending MSH MUST set the status '
    "attribute of the message to Reset. In all other cases, including 3 above, the status attribute MUST be set "
    "to Continue.",
)
def test_9_1_1_reset_on_a_first_or_reset_zero_continue_otherwise() -> None:
    """On the wire, the first message of a conversation is 0 with status Reset and the next ones 1, 2 with
    Continue (read as sent; Continue is the attribute's default). The sending rule: after 99999999 comes
    0 with Continue (case 3); the first message after the sequence was reset is 0 with Reset (case 2)."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        to_b = recorded(net, B_URL)
        ids = [await a.submit_async(numbered(n)) for n in range(3)]
        await net.run_until(delivered(a, ids))
        orders = [wire(to_b, message_id).message_order for message_id in ids]
        assert [(o.sequence_number, o.status) for o in orders if o is not None] == [
            (0, m.SequenceStatus.RESET),
            (1, m.SequenceStatus.CONTINUE),
            (2, m.SequenceStatus.CONTINUE),
        ]
        # Continue may be written or left to the attribute's default ("The default value of the status
        # attribute is Continue"); Reset is written on the first message only.
        raw = [serialise_envelope(wire(to_b, i)) for i in ids]
        assert [b'eb:status="Reset"' in r for r in raw] == [True, False, False]

    run_ordered(scenario)
    last, counter = assign(SequenceCounter(LAST_SEQUENCE_NUMBER), under_way=0, conversation_id="c")
    assert (last.sequence_number, last.status) == (LAST_SEQUENCE_NUMBER, m.SequenceStatus.CONTINUE)
    wrapped, _ = assign(counter, under_way=0, conversation_id="c")
    assert (wrapped.sequence_number, wrapped.status) == (0, m.SequenceStatus.CONTINUE)
    again, _ = assign(SequenceCounter(7, broken=True), under_way=0, conversation_id="c")
    assert (again.sequence_number, again.status) == (0, m.SequenceStatus.RESET)


@clause(
    "9.1.1",
    (2039,),
    "A Sending MSH MUST wait before resetting the SequenceNumber of a conversation until it has received "
    "confirmation of all the messages previously sent for the conversation.",
)
def test_9_1_1_the_sender_resets_only_once_every_message_sent_is_accounted_for() -> None:
    """A's sequence breaks (a message fails); while an earlier message of the conversation is still under way
    a new message is refused rather than sent as a reset 0; once all are final the next one is 0, Reset."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        first = await a.submit_async(numbered(0))
        await net.settle()
        missing = await a.submit_async(numbered(1))
        net.faults.drop = lost(missing)
        held = [await a.submit_async(numbered(n)) for n in (2, 3)]
        await net.settle()
        over = await a.submit_async(numbered(4))  # past B's limit: refused, the sequence breaks
        await net.run_until(lambda: (s := a.status(over)) is not None and s.state.status.final)
        assert a.status(missing).state.status.final is False  # type: ignore[union-attr]
        with pytest.raises(ConfigurationError, match="still under way"):
            await a.submit_async(numbered(5))
        await net.run_until(lambda: (s := a.status(missing)) is not None and s.state.status.final)
        to_b = recorded(net, B_URL)
        again = await a.submit_async(numbered(5))
        await net.run_until(delivered(a, [again]))
        order_element = wire(to_b, again).message_order
        assert order_element is not None
        assert (order_element.sequence_number, order_element.status) == (0, m.SequenceStatus.RESET)
        assert first and held

    run_ordered(scenario, max_held=2)
    with pytest.raises(SequenceNotReady):
        assign(SequenceCounter(3, broken=True), under_way=1, conversation_id="c")


@clause(
    "9.2",
    (2048,),
    "For this version of the ebXML Messaging Specification, the MessageOrder element MUST NOT be present with "
    "the SyncReply element.",
)
@clause(
    "9.2",
    (2050,),
    "If these two elements are received in the same message, the Receiving MSH SHOULD report an error (see "
    "section 4.1.5) with errorCode set to Inconsistent and severity set to Error.",
)
def test_9_2_message_order_with_sync_reply_is_reported_inconsistent_error() -> None:
    """Sending: an agreement that guarantees order and asks for SyncReply is refused when loaded, so no
    message carries both. Receiving: a message with both is answered with an ErrorList naming MessageOrder,
    Inconsistent, severity Error; it is neither stored nor delivered."""
    (problem,) = interaction_problems(ordered_cpa(sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY))
    assert "SyncReply MUST NOT be present" in problem
    with pytest.raises(ConfigurationError, match="SyncReply MUST NOT be present"):
        Msh(
            plain(A_ID, "a.example"),
            agreements=[ordered_cpa(sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY)],
            keys=False,
        )

    async def receiving(net: TestNetwork, a: Msh, b: Msh, x: Msh) -> None:
        answer = replies(b, make_envelope(message_order=True, sync_reply=True))
        errors = errors_of(answer)
        assert ("Inconsistent", "Error", "//Header/MessageOrder") in errors
        assert all(severity == "Error" for _code, severity, _location in errors)
        with b.store.transaction(readonly=True) as tx:
            assert tx.find_inbound("msg-1@a.example") is None

    run_plain_ordered(receiving)
