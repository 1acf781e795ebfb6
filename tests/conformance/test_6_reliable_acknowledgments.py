"""ebMS 2.0 §6 to §6.3.2.8: reliable messaging, persistent storage, the AckRequested and Acknowledgment
elements.

Engine decisions are taken on real agreement checks (:func:`cpa.check.check`, :func:`msh.engine.receive`);
scenarios run partners A and B of the sample agreement on the test network (one process, fake clock, no
socket, no sleep), on memory stores, or on SQLite files where what is shown is that something survives.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, timedelta
from pathlib import Path

import pytest
from lxml import etree

from cpa import load
from cpa.check import check
from cpa.model import CollaborationProtocolAgreement, PerMessage
from msh.ebms import model as m
from msh.ebms.envelope import read_envelope, serialise_envelope
from msh.ebms.errorlist import error_message
from msh.ebms.message import ParseMode, parse_message
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH, SERVICE_MSH, XMLDSIG
from msh.ebms.schema import validate_envelope
from msh.engine import (
    InboundDecision,
    OutboundStatus,
    Reject,
    ReplySync,
    ResendStoredAck,
    SendAsync,
    StoredInbound,
    StoreInbound,
    receive,
)
from msh.engine.replies import acknowledgment_message
from msh.errors import EbmsError, ErrorCode, Issue, Severity
from msh.runtime.msh import Msh
from msh.safexml import parse_xml
from msh.security import check_receipt
from msh.store import Store
from msh.store.api import Direction
from msh.testing.network import TestNetwork
from tests.conformance.clauses import Exemption, Kind, clause
from tests.support.cpa_factory import NOW, make_cpa, make_envelope
from tests.support.secure_network import (
    B_URL,
    events,
    nobody_signs,
    order,
    run_pair,
    settings,
    signed_acks,
    stored_body,
    unsigned_messages,
)

EB = "http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd"
DS = XMLDSIG
PER_MESSAGE = {
    "ack_requested": PerMessage.PER_MESSAGE,
    "duplicate_elimination": PerMessage.PER_MESSAGE,
    "ack_signature_requested": PerMessage.PER_MESSAGE,
}
CPA = make_cpa(**PER_MESSAGE)  # type: ignore[arg-type]
MID = "msg-1@a.example"
# A signature as the message's own (what a signed receipt copies, §6.3.2.5): two ds:References.
SIGNATURE = (
    f'<ds:Signature xmlns:ds="{XMLDSIG}"><ds:SignedInfo>'
    '<ds:CanonicalizationMethod Algorithm="http://www.w3.org/TR/2001/REC-xml-c14n-20010315"/>'
    '<ds:SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"/>'
    '<ds:Reference URI=""><ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"/>'
    "<ds:DigestValue>AAAA</ds:DigestValue></ds:Reference>"
    '<ds:Reference URI="cid:payload-1"><ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"/>'
    "<ds:DigestValue>BBBB</ds:DigestValue></ds:Reference>"
    "</ds:SignedInfo><ds:SignatureValue>CCCC</ds:SignatureValue></ds:Signature>"
)

EXEMPTIONS: tuple[Exemption, ...] = (
    Exemption(
        "6.3.1",
        (1479,),
        "A single MSH node SHOULD only insert one AckRequested element.",
        Kind.NOT_FOLLOWED,
        "On a single hop, and at an intermediary, one AckRequested element is inserted. When the agreement's "
        "channel asks the intermediary for a hop acknowledgment as well (a nextMSH channel, the combinations "
        "of section 6.6 rows 1 and 5), the From Party MSH inserts both elements itself, one aimed at the To "
        "Party MSH and one at the Next MSH (section 10.1.3 allows two on one message): the From Party is the "
        "only node that knows what its agreement asks of the first hop, and an intermediary that inserted the "
        "second one would change the message it forwards.",
    ),
)


# --- helpers ----------------------------------------------------------------------------------------------


def message(**kw: object) -> m.Envelope:
    env = make_envelope(**kw)  # type: ignore[arg-type]
    assert env.message_header is not None
    data = replace(env.message_header.message_data, message_id=MID)
    return replace(env, message_header=replace(env.message_header, message_data=data))


def decide(
    env: m.Envelope,
    cpa: CollaborationProtocolAgreement = CPA,
    *,
    duplicate: StoredInbound | None = None,
    **kw: object,
) -> InboundDecision:
    now = kw.pop("now", NOW)
    return receive(
        env,
        check_result=check(env, cpa, now=now),  # type: ignore[arg-type]
        duplicate=duplicate,
        now=now,  # type: ignore[arg-type]
        new_message_id="reply-1@b.example",
        next_id=lambda: "reply-2@b.example",
        **kw,  # type: ignore[arg-type]
    )


def replies(decision: InboundDecision) -> list[m.Envelope]:
    out: list[m.Envelope] = []
    for a in decision.actions:
        if isinstance(a, (ReplySync, SendAsync)):
            out.append(a.envelope)
        elif isinstance(a, Reject):
            out.append(a.error_message)
        elif isinstance(a, ResendStoredAck):
            assert isinstance(a.acknowledgment, m.Envelope)
            out.append(a.acknowledgment)
    return out


def acknowledgments(decision: InboundDecision) -> list[m.Acknowledgment]:
    return [a for reply in replies(decision) for a in reply.acknowledgments]


def soap(body: bytes, content_type: str) -> etree._Element:
    parsed = parse_message(body, content_type, mode=ParseMode.LENIENT)
    parsed.close()
    return etree.fromstring(parsed.soap)


def sent_envelope(a: Msh, message_id: str) -> m.Envelope:
    stored = a.status(message_id)
    assert stored is not None
    parsed = parse_message(stored_body(a, message_id), stored.content_type, mode=ParseMode.LENIENT)
    parsed.close()
    return parsed.envelope


def final(a: Msh, message_id: str) -> Callable[[], bool]:
    def done() -> bool:
        stored = a.status(message_id)
        return stored is not None and stored.state.status.final

    return done


# --- §6 -------------------------------------------------------------------------------------------------


@clause(
    "6",
    1435,
    "Failure to receive an Acknowledgment Message by a Sending MSH MAY trigger successive retries until such "
    "time as an Acknowledgment Message is received or the predetermined number of retries has been exceeded "
    "at which time the From Party MUST be notified of the probable delivery failure.",
)
@pytest.mark.parametrize(("fault", "severity"), [("down", Severity.ERROR), ("answers-lost", Severity.WARNING)])
def test_6_the_from_party_is_told_of_the_probable_delivery_failure_when_the_retries_are_exceeded(
    fault: str, severity: Severity
) -> None:
    """No Acknowledgment ever comes back: A retries the agreement's Retries (5) times, then tells its
    application (the From Party) of the delivery failure: DeliveryFailure, Error when nothing reached B,
    Warning when the transmissions left and only the acknowledgments were lost (probably delivered, §6.5.7)."""
    told: list[tuple[str, Issue]] = []

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        if fault == "down":
            net.faults.down.add(B_URL)
        else:
            net.faults.lose_answers = 1.0
        a.on_failed = lambda message_id, issue: told.append((message_id, issue))
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.FAILED
        assert stored.state.attempts == 6  # the first transmission and the 5 retries, then no more
        [(failed, issue)] = told
        assert failed == message_id
        assert (issue.error_code, issue.severity) == (ErrorCode.DELIVERY_FAILURE, severity)

    run_pair(scenario)


# --- §6.1 persistent storage --------------------------------------------------------------------------


def run_on_files(
    scenario: Callable[[TestNetwork, Msh, Msh, Callable[[str], Awaitable[Msh]]], Awaitable[None]],
    open_store: Callable[..., Store],
    tmp_path: Path,
) -> None:
    """A and B of the sample agreement (nobody signs: no key matters here) on SQLite files; the scenario gets
    ``restart(name)``: the MSH thrown away as kill -9 would, and a new one on a new connection to its file."""
    cpa = load(nobody_signs())
    urls = {name: str(tmp_path / f"{name}.db") for name in ("a", "b")}

    async def main() -> None:
        net = TestNetwork(seed=5)
        nodes = {
            name: net.add(name, settings(name), agreements=[cpa], store=open_store(url, clock=net.clock))
            for name, url in urls.items()
        }

        async def restart(name: str) -> Msh:
            net.nodes[name].store = open_store(urls[name], clock=net.clock)
            return await net.restart(name)

        await net.start()
        try:
            await scenario(net, nodes["a"], nodes["b"], restart)
        finally:
            await net.close()

    asyncio.run(main())


@clause(
    "6.1",
    1439,
    "A MSH that supports Reliable Messaging MUST keep messages sent or received reliably in persistent storage.",
)
@clause(
    "6.1",
    1444,
    "However, at a minimum, persistent storage with the resilience characteristics of a hard disk (or "
    "equivalent) SHOULD be used.",
)
@clause(
    "6.1",
    1444,
    "It is strongly RECOMMENDED that implementers of this specification use technology resilient to the "
    "failure of any single hardware or software component.",
)
@clause(
    "6.1",
    1447,
    "After a system interruption or failure, a MSH MUST ensure that messages in persistent storage are "
    "processed as if the system failure or interruption had not occurred.",
)
def test_6_1_a_message_accepted_for_sending_survives_a_restart_and_is_sent_after_it(
    open_store: Callable[..., Store], tmp_path: Path
) -> None:
    """A accepts a message while B is down; A's process is then thrown away (nothing in memory survives, the
    failure of a software component) and a new one opens its SQLite file (on disk) again: the message is
    there, and once B is back it is sent, acknowledged and delivered once, as if nothing had happened."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh, restart: Callable[[str], Awaitable[Msh]]) -> None:
        net.faults.down.add(B_URL)
        message_id = await a.submit_async(order(1))
        await net.advance(timedelta(seconds=3))
        assert b.inbox(None) == []
        a = await restart("a")
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.AWAITING_ACK
        assert stored_body(a, message_id)  # the message itself, from the file
        net.faults.down.clear()
        await net.run_until(final(a, message_id))
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        assert [e.message_id for e in b.inbox(None)] == [message_id]

    run_on_files(scenario, open_store, tmp_path)


@clause(
    "6.1",
    1450,
    "In order to support the filtering of duplicate messages, a Receiving MSH MUST save the MessageId in "
    "persistent storage.",
)
@clause(
    "6.1",
    1451,
    "It is also RECOMMENDED the following be kept in persistent storage: the complete message, at least until "
    "the information in the message has been passed to the application or other process needing to process "
    "it",
)
@clause(
    "6.1",
    1447,
    "After a system interruption or failure, a MSH MUST ensure that messages in persistent storage are "
    "processed as if the system failure or interruption had not occurred.",
)
def test_6_1_a_received_message_id_survives_a_restart_and_filters_the_duplicate(
    open_store: Callable[..., Store], tmp_path: Path
) -> None:
    """B receives a message; read back from B's SQLite file through a connection of its own: the MessageId,
    and what line 1451 recommends keeping (its list goes on to lines 1454-1456): the complete message, the
    time it was received and the complete response message (the Acknowledgment sent). After B restarts, a
    copy of the message is recognised as a duplicate: answered with that same Acknowledgment, not delivered
    again."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh, restart: Callable[[str], Awaitable[Msh]]) -> None:
        received_at = net.clock()
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        body = stored_body(a, message_id)
        content_type = a.status(message_id).content_type  # type: ignore[union-attr]
        b = await restart("b")
        with net.nodes["b"].store.transaction(readonly=True) as tx:
            record = tx.find_inbound(message_id)
            assert record is not None and record.duplicate_elimination
            assert record.received_at == received_at
            with net.nodes["b"].store.open_blob(record.body_blob_id) as blob:
                assert blob.read() == body  # the complete message as received
            assert record.ack_envelope is not None
            ack = read_envelope(parse_xml(soap_bytes(record.ack_envelope)))[0]
        assert [x.ref_to_message_id for x in ack.acknowledgments] == [message_id]
        answer = await b.handle_http(body, content_type)
        assert b.counters["duplicates"] == 1
        assert [e.message_id for e in b.inbox(None)] == [message_id]  # not delivered again
        assert soap_bytes(answer.body) == soap_bytes(record.ack_envelope)  # the same response again

    run_on_files(scenario, open_store, tmp_path)


def soap_bytes(body: bytes) -> bytes:
    """The SOAP envelope of a stored or answered message (a bare envelope is itself)."""
    start = body.find(b"<SOAP:Envelope")
    end = body.find(b"</SOAP:Envelope>")
    return body[start : end + len(b"</SOAP:Envelope>")] if start >= 0 and end >= 0 else body


# --- §6.3.1 AckRequested ----------------------------------------------------------------------------------


@clause(
    "6.3.1",
    1480,
    "If there are two AckRequested elements present, they MUST have different values for their respective "
    "SOAP actor attributes.",
)
def test_6_3_1_two_ack_requested_elements_for_the_same_actor_are_refused() -> None:
    """Two AckRequested elements aimed at the same actor break the rule: refused, Inconsistent, Error (no
    store, no acknowledgment); aimed at the two different actors they are taken, one Acknowledgment each."""
    env = message()
    with pytest.raises(ValueError, match="at most one AckRequested per SOAP actor"):
        m.Envelope(message_header=env.message_header, ack_requested=(m.AckRequested(), m.AckRequested()))
    # No actor and the To Party MSH actor name the same target (§6.3.1.1): the same actor twice.
    same = replace(env, ack_requested=(m.AckRequested(actor=None), m.AckRequested(actor=ACTOR_TO_PARTY_MSH)))
    decision = decide(same)
    [reject] = [a for a in decision.actions if isinstance(a, Reject)]
    [error] = reject.error_message.error_list.errors  # type: ignore[union-attr]
    assert (error.code, error.severity, error.location) == (
        ErrorCode.INCONSISTENT,
        Severity.ERROR,
        "//Header/AckRequested",
    )
    assert not decision.delivers and acknowledgments(decision) == []
    different = replace(env, ack_requested=(m.AckRequested(), m.AckRequested(actor=ACTOR_NEXT_MSH)))
    taken = decide(different)
    assert taken.delivers
    assert sorted(a.actor or ACTOR_TO_PARTY_MSH for a in acknowledgments(taken)) == sorted(
        [ACTOR_TO_PARTY_MSH, ACTOR_NEXT_MSH]
    )


@clause(
    "6.3.1.1",
    1485,
    "The AckRequested element MUST be targeted at either the Next MSH or the To Party MSH (these are "
    "equivalent for single-hop routing).",
)
@pytest.mark.parametrize("actor", [None, ACTOR_TO_PARTY_MSH, ACTOR_NEXT_MSH, "urn:example:some-other-actor"])
def test_6_3_1_1_ack_requested_is_taken_for_the_next_or_to_party_msh_only(actor: str | None) -> None:
    """AckRequested aimed at the Next MSH or the To Party MSH (no actor: the To Party MSH, line 1488) is
    answered with an Acknowledgment for that actor; aimed at any other actor it is refused, Inconsistent."""
    decision = decide(message(ack_actor=actor))
    if actor == "urn:example:some-other-actor":
        [reject] = [a for a in decision.actions if isinstance(a, Reject)]
        [error] = reject.error_message.error_list.errors  # type: ignore[union-attr]
        assert (error.code, error.location) == (ErrorCode.INCONSISTENT, "//Header/AckRequested/@actor")
        assert not decision.delivers
        return
    [ack] = acknowledgments(decision)
    assert (ack.actor or ACTOR_TO_PARTY_MSH) == (actor or ACTOR_TO_PARTY_MSH)


# --- §6.3.1.2 signed attribute ----------------------------------------------------------------------------


@clause(
    "6.3.1.2",
    1490,
    "The REQUIRED signed attribute is used by a From Party to indicate whether or not a message received by "
    "the To Party MSH should result in the To Party returning a signed Acknowledgment Message",
)
def test_6_3_1_2_the_signed_attribute_is_always_written_and_its_absence_refused() -> None:
    """Every AckRequested written carries eb:signed (true or false); one received without it is refused
    (OtherXml at the attribute), by the schema and by the reader."""
    for signed in (True, False):
        root = parse_xml(serialise_envelope(message(ack_signed=signed)))
        [element] = root.iter(f"{{{EB}}}AckRequested")
        assert element.get(f"{{{EB}}}signed") == str(signed).lower()
    without = serialise_envelope(message()).replace(b' eb:signed="false"', b"")
    root = parse_xml(without)
    [issue] = validate_envelope(root)
    assert (issue.error_code, issue.location) == (ErrorCode.OTHER_XML, "//Header/AckRequested/@signed")
    with pytest.raises(EbmsError) as refused:
        read_envelope(root)
    assert refused.value.issues[0].location == "//Header/AckRequested/@signed"


@clause(
    "6.3.1.2",
    1495,
    "Before setting the value of the signed attribute in AckRequested, the Sending MSH SHOULD check if the "
    "Receiving MSH supports Acknowledgment Messages of the type requested (see also [ebCPP]).",
)
@pytest.mark.parametrize(("agreement", "signed"), [("never", "false"), ("always", "true")])
def test_6_3_1_2_the_sending_msh_asks_for_the_acknowledgment_the_agreement_says_the_receiver_supports(
    agreement: str, signed: str
) -> None:
    """A sets eb:signed from the agreement's ackSignatureRequested (the CPA says what B supports): true
    only where the agreement says signed acknowledgments."""
    cpa = signed_acks() if agreement == "always" else None

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        stored = a.status(message_id)
        assert stored is not None
        [asked] = soap(stored_body(a, message_id), stored.content_type).iter(f"{{{EB}}}AckRequested")
        assert asked.get(f"{{{EB}}}signed") == signed

    run_pair(scenario, cpa=cpa)


@clause(
    "6.3.1.2",
    1499,
    "If the Receiving MSH can produce the Acknowledgment Message of the type requested, then it MUST return to "
    "the Sending MSH a message containing an Acknowledgment element.",
)
@pytest.mark.parametrize("signed", [False, True])
def test_6_3_1_2_an_acknowledgment_of_the_type_requested_is_returned(signed: bool) -> None:
    """B can sign: the message is answered with an Acknowledgment element, to be signed exactly when
    signed="true" was asked."""
    decision = decide(message(ack_signed=signed))
    [reply] = replies(decision)
    assert len(reply.acknowledgments) == 1
    assert decision.signs(reply) is signed


@clause(
    "6.3.1.2",
    1499,
    "If the Receiving MSH can produce the Acknowledgment Message of the type requested, then it MUST return to "
    "the Sending MSH a message containing an Acknowledgment element.",
)
def test_6_3_1_2_a_signed_acknowledgment_asked_for_comes_back_signed() -> None:
    """On the network, with signed acknowledgments agreed: B returns an Acknowledgment message carrying an
    XML signature, which A keeps as the receipt."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        receipt = a.receipt(message_id)
        assert receipt is not None
        root = etree.fromstring(receipt)
        assert root.find(f".//{{{DS}}}Signature") is not None
        [ack] = root.iter(f"{{{EB}}}Acknowledgment")
        assert ack.findtext(f"{{{EB}}}RefToMessageId") == message_id

    run_pair(scenario, cpa=signed_acks())


@clause(
    "6.3.1.2",
    (1501, 1502),
    "If the Receiving MSH cannot return an Acknowledgment Message as requested it MUST report the error to the "
    "Sending MSH using an errorCode of Inconsistent and a severity of either Error if inconsistent with the "
    "CPA, or Warning if not supported..",
)
def test_6_3_1_2_a_signed_acknowledgment_the_receiver_cannot_sign_is_reported_inconsistent_warning() -> None:
    """B has no signing key (not supported): A's message is taken, and A is told, with the Acknowledgment,
    Inconsistent of severity Warning at the signed attribute (no silent unsigned acknowledgment, no refusal)."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        assert [e.message_id for e in b.inbox(None)] == [message_id]
        found = {e.kind: e.detail for e in events(a, message_id, Direction.OUTBOUND)}
        [error] = found["error-received"]["errors"]  # type: ignore[misc]
        assert (error["errorCode"], error["severity"], error["location"]) == (
            "Inconsistent",
            "Warning",
            "//Header/AckRequested/@signed",
        )
        assert found["transmission"]["answer"] == "Acknowledgment, ErrorList"

    run_pair(scenario, cpa=signed_acks(nobody_signs()), b=settings("b", signing_key=None, signing_certificate=None))


@clause(
    "6.3.1.2",
    (1501, 1502),
    "If the Receiving MSH cannot return an Acknowledgment Message as requested it MUST report the error to the "
    "Sending MSH using an errorCode of Inconsistent and a severity of either Error if inconsistent with the "
    "CPA, or Warning if not supported..",
)
@pytest.mark.parametrize(("to_party_signed", "next_signed"), [(True, False), (False, True), (True, True)])
def test_6_3_1_2_each_of_two_acknowledgments_is_signed_as_asked_or_reported(
    to_party_signed: bool, next_signed: bool
) -> None:
    """Two AckRequested elements (To Party MSH and Next MSH) with their own signed values: an MSH that can
    sign signs each Acknowledgment as its own element asks (a signed one for the Next MSH by itself,
    §10.1.4); one that cannot reports Inconsistent, Warning, with each unsigned Acknowledgment."""
    env = message(ack_signed=to_party_signed)
    env = replace(
        env,
        ack_requested=(*env.ack_requested, m.AckRequested(signed=next_signed, actor=ACTOR_NEXT_MSH)),
        signatures=(m.Signature(SIGNATURE),),
    )
    asked = {ACTOR_TO_PARTY_MSH: to_party_signed, ACTOR_NEXT_MSH: next_signed}
    decision = decide(env)
    for reply in replies(decision):
        actors = [a.actor or ACTOR_TO_PARTY_MSH for a in reply.acknowledgments]
        assert decision.signs(reply) is any(asked[actor] for actor in actors)
        if next_signed and ACTOR_NEXT_MSH in actors:
            assert actors == [ACTOR_NEXT_MSH]
    assert sorted(a.actor or ACTOR_TO_PARTY_MSH for a in acknowledgments(decision)) == sorted(asked)
    cannot = decide(env, can_sign=False)
    assert cannot.delivers and not cannot.sign_reply
    for reply in replies(cannot):
        assert reply.acknowledgments and reply.error_list is not None
        [error] = reply.error_list.errors
        assert (error.code, error.severity) == (ErrorCode.INCONSISTENT, Severity.WARNING)


@clause(
    "6.3.1.2",
    (1501, 1502),
    "If the Receiving MSH cannot return an Acknowledgment Message as requested it MUST report the error to the "
    "Sending MSH using an errorCode of Inconsistent and a severity of either Error if inconsistent with the "
    "CPA, or Warning if not supported..",
)
def test_6_3_1_2_a_signed_acknowledgment_the_agreement_rules_out_is_refused_inconsistent_error() -> None:
    """The agreement says no signed acknowledgments (ackSignatureRequested never) and the message asks for
    one: inconsistent with the CPA, reported as Inconsistent of severity Error (the message is refused)."""
    cpa = make_cpa(ack_signature_requested=PerMessage.NEVER)
    decision = decide(message(ack_signed=True), cpa)
    [reject] = [a for a in decision.actions if isinstance(a, Reject)]
    assert reject.error_message.error_list is not None
    codes = {(e.code, e.severity) for e in reject.error_message.error_list.errors}
    assert codes == {(ErrorCode.INCONSISTENT, Severity.ERROR)}
    assert not decision.delivers and acknowledgments(decision) == []


# --- §6.3.1.3, §6.3.1.4 ---------------------------------------------------------------------------------


@clause(
    "6.3.1.3",
    1506,
    "The Acknowledgment element generated MUST be targeted to the ebXML MSH node acting in the role of the "
    "From Party along the reverse message path (end-to-end acknowledgment).",
)
def test_6_3_1_3_the_acknowledgment_goes_back_to_the_from_party() -> None:
    """The sample's AckRequested (no actor, signed false): the Acknowledgment is aimed at the To Party MSH
    actor of the reverse path (end to end), in a message addressed to the From Party, sent to its endpoint."""
    env = message(ack_actor=None)
    decision = decide(env)
    [reply] = [a for a in decision.actions if isinstance(a, SendAsync)]
    header, received = reply.envelope.message_header, env.message_header
    assert header is not None and received is not None
    assert header.to_party == received.from_party and header.from_party == received.to_party
    assert reply.to_endpoint.to_party == received.from_party
    [ack] = reply.envelope.acknowledgments
    assert (ack.actor or ACTOR_TO_PARTY_MSH) == ACTOR_TO_PARTY_MSH


@clause(
    "6.3.1.4",
    1511,
    "An AckRequested element MUST NOT be included on a message with only an Acknowledgment element (no payload).",
)
def test_6_3_1_4_an_acknowledgment_message_asks_for_no_acknowledgment() -> None:
    """The Acknowledgment message B builds carries no AckRequested; and an Acknowledgment message that
    carries one anyway is not acknowledged (no loop of acknowledgments)."""
    decision = decide(message(ack_signed=True))
    [reply] = replies(decision)
    assert reply.acknowledgments and reply.ack_requested == ()
    inbound_ack = acknowledgment_message(message(), message_id="ack-1@a.example", now=NOW)
    looping = replace(inbound_ack, ack_requested=(m.AckRequested(),))
    assert acknowledgments(decide(looping)) == []


@clause("6.3.1.4", 1513, "An Error Message MUST NOT contain an AckRequested element.")
def test_6_3_1_4_an_error_message_carries_no_ack_requested() -> None:
    """B's error messages (a refusal, and a Warning reported on its own) carry no AckRequested."""
    refused = decide(message(cpaid="no-such-agreement"))
    [error] = replies(refused)
    assert error.error_list is not None and error.ack_requested == ()
    warned = error_message(
        Issue(ErrorCode.INCONSISTENT, Severity.WARNING, "w"),
        in_reply_to=message().message_header,  # type: ignore[arg-type]
        message_id="e-1@b.example",
        timestamp=NOW,
    )
    assert warned.ack_requested == ()


# --- §6.3.2 Acknowledgment --------------------------------------------------------------------------------


@clause(
    "6.3.2.1",
    1529,
    "The SOAP actor attribute of the Acknowledgment element SHALL have a value corresponding to the "
    "AckRequested element of the message being acknowledged.",
)
@pytest.mark.parametrize("actors", [(None,), (ACTOR_TO_PARTY_MSH,), (ACTOR_NEXT_MSH,), (None, ACTOR_NEXT_MSH)])
def test_6_3_2_1_each_acknowledgment_carries_the_actor_of_its_ack_requested(actors: tuple[str | None, ...]) -> None:
    """One Acknowledgment per AckRequested, with the same actor (no actor: the To Party MSH)."""
    env = replace(message(), ack_requested=tuple(m.AckRequested(actor=a) for a in actors))
    acks = acknowledgments(decide(env))
    assert sorted(a.actor or ACTOR_TO_PARTY_MSH for a in acks) == sorted(a or ACTOR_TO_PARTY_MSH for a in actors)


@clause(
    "6.3.2.2",
    1533,
    "The REQUIRED Timestamp element is a value representing the time that the message being acknowledged was "
    "received by the MSH generating the acknowledgment message.",
)
def test_6_3_2_2_the_timestamp_is_when_the_message_was_received() -> None:
    """The message was sent at NOW and received 5 minutes later: the Acknowledgment's Timestamp is the time of
    receipt, in UTC; the acknowledgment resent for a duplicate an hour later keeps it."""
    received = NOW + timedelta(minutes=5)
    env = message()
    first = decide(env, now=received)
    [ack] = acknowledgments(first)
    assert ack.timestamp == received and ack.timestamp.utcoffset() == timedelta(0)
    [store] = [a for a in first.actions if isinstance(a, StoreInbound)]
    root = parse_xml(serialise_envelope(store.record_ack))  # type: ignore[arg-type]
    written = root.findtext(f".//{{{EB}}}Acknowledgment/{{{EB}}}Timestamp") or ""
    assert written.endswith("Z") and written.startswith(received.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    stored = StoredInbound(MID, store.record_ack, True, store.digest)
    again = decide(env, duplicate=stored, now=received + timedelta(hours=1))
    assert [a.timestamp for a in acknowledgments(again)] == [received]


@clause(
    "6.3.2.3",
    1537,
    "The REQUIRED RefToMessageId element contains the MessageId of the message whose delivery is being reported.",
)
def test_6_3_2_3_ref_to_message_id_is_the_acknowledged_message_id() -> None:
    decision = decide(message())
    [reply] = replies(decision)
    [ack] = reply.acknowledgments
    assert ack.ref_to_message_id == MID
    root = parse_xml(serialise_envelope(reply))
    [element] = root.iter(f"{{{EB}}}Acknowledgment")
    assert element.findtext(f"{{{EB}}}RefToMessageId") == MID


@clause(
    "6.3.2.5",
    (1548, 1549),
    "The Reference element(s) MUST be namespace qualified to the aforementioned namespace and MUST conform to "
    "the XML Signature [XMLDSIG] specification.",
)
def test_6_3_2_5_the_references_of_a_receipt_are_xmldsig_references() -> None:
    """The signed receipt B returns (network, signed acknowledgments agreed): its Reference elements are
    ds:Reference in the XML Signature namespace, each with its DigestMethod and DigestValue, and they are
    the References of the message A signed (they check against it)."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        receipt = a.receipt(message_id)
        assert receipt is not None
        [ack] = etree.fromstring(receipt).iter(f"{{{EB}}}Acknowledgment")
        references = [child for child in ack if etree.QName(child).localname == "Reference"]
        assert references and all(etree.QName(r).namespace == DS for r in references)
        for reference in references:
            assert reference.find(f"{{{DS}}}DigestMethod") is not None
            assert reference.findtext(f"{{{DS}}}DigestValue")
        stored = a.status(message_id)
        assert stored is not None
        sent = parse_message(stored_body(a, message_id), stored.content_type, mode=ParseMode.LENIENT)
        try:
            texts = [etree.tostring(r, encoding="unicode") for r in references]
            assert len(check_receipt(texts, sent.soap)) == len(references)
        finally:
            sent.close()
        assert validate_envelope(etree.fromstring(receipt)) == ()

    run_pair(scenario, cpa=signed_acks())


@clause(
    "6.3.2.5",
    1551,
    "If the message being acknowledged contains an AckRequested element with a signed attribute set to true, "
    "then the [XMLDSIG] Reference list is REQUIRED.",
)
def test_6_3_2_5_a_signed_acknowledgment_carries_the_reference_list() -> None:
    """signed="true": the Acknowledgment carries the message's own References when it was signed; the
    receipt of an unsigned message (network) carries References derived from it. signed="false": none."""
    signed = replace(message(ack_signed=True), signatures=(m.Signature(SIGNATURE),))
    [ack] = acknowledgments(decide(signed))
    assert len(ack.references) == 2
    [plain] = acknowledgments(decide(replace(message(), signatures=(m.Signature(SIGNATURE),))))
    assert plain.references == ()

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        receipt = a.receipt(message_id)
        assert receipt is not None
        [element] = etree.fromstring(receipt).iter(f"{{{EB}}}Acknowledgment")
        uris = [r.get("URI", "") for r in element.findall(f"{{{DS}}}Reference")]
        assert uris and uris[0] == "" and all(u.startswith("cid:") for u in uris[1:])

    run_pair(scenario, cpa=signed_acks(unsigned_messages()))


@clause(
    "6.3.2.5",
    1565,
    "This MSH SHOULD ignore subsequent Error or Acknowledgment Messages with the same RefToMessageId value.",
)
def test_6_3_2_5_later_acknowledgments_and_errors_about_a_delivered_message_are_ignored() -> None:
    """A's message is delivered (B's end-to-end Acknowledgment); another Acknowledgment and then an Error
    message (DeliveryFailure, Error) about it arrive: A's status stays delivered, its application is not
    told of any failure."""
    told: list[str] = []

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        a.on_failed = lambda message_id, issue: told.append(message_id)
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        before = a.status(message_id)
        assert before is not None and before.state.status is OutboundStatus.DELIVERED
        sent = sent_envelope(a, message_id)
        again = acknowledgment_message(sent, message_id="ack-2@b.example", now=net.clock())
        await a.handle_http(serialise_envelope(again), "text/xml")
        failure = Issue(ErrorCode.DELIVERY_FAILURE, Severity.ERROR, "could not deliver")
        header = sent.message_header
        assert header is not None
        error = error_message(failure, in_reply_to=header, message_id="err-1@b.example", timestamp=net.clock())
        await a.handle_http(serialise_envelope(error), "text/xml")
        await net.settle()
        after = a.status(message_id)
        assert after is not None and after.state == before.state
        assert told == []

    run_pair(scenario, cpa=nobody_signs())


@clause(
    "6.3.2.7",
    (1576, 1577, 1578),
    "If there are no errors in the message received and an Acknowledgment Message is being sent on its own, "
    "not as a message containing payload data, then the Service and Action MUST be set as follows: the "
    "Service element MUST be set to urn:oasis:names:tc:ebxml-msg:service the Action element MUST be set to "
    "Acknowledgment",
)
def test_6_3_2_7_an_acknowledgment_on_its_own_has_the_msh_service_and_action_acknowledgment() -> None:
    [reply] = replies(decide(message()))
    header = reply.message_header
    assert header is not None and reply.acknowledgments and reply.manifest is None
    assert (header.service.value, header.service.type, header.action) == (SERVICE_MSH, None, "Acknowledgment")
    root = parse_xml(serialise_envelope(reply))
    assert root.findtext(f".//{{{EB}}}MessageHeader/{{{EB}}}Service") == "urn:oasis:names:tc:ebxml-msg:service"
    assert root.findtext(f".//{{{EB}}}MessageHeader/{{{EB}}}Action") == "Acknowledgment"


@clause("6.3.2.8", 1581, "An Acknowledgment Message MUST NOT be returned for an Error Message.")
@pytest.mark.parametrize("severity", [Severity.ERROR, Severity.WARNING])
def test_6_3_2_8_no_acknowledgment_is_returned_for_an_error_message(severity: Severity) -> None:
    """An Error message arrives (even one that wrongly asks for an acknowledgment): nothing is returned for
    it. And B's own Error message refusing a message is no Acknowledgment message either."""
    header = message().message_header
    assert header is not None
    issue = Issue(ErrorCode.INCONSISTENT, severity, "bad")
    reported = error_message(issue, in_reply_to=header, message_id="err-1@b.example", timestamp=NOW)
    # From B (the answer side of the agreement), about A's message, asking for an acknowledgment anyway.
    asking = replace(reported, ack_requested=(m.AckRequested(),))
    decision = decide(asking)
    assert replies(decision) == []
    refused = decide(message(cpaid="no-such-agreement"))
    [error] = replies(refused)
    assert error.error_list is not None and error.acknowledgments == ()
