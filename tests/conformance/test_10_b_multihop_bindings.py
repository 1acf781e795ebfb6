"""ebMS 2.0 §10 (Multi-Hop Module) and Appendix B (Communications Protocol Bindings): each normative sentence
checked against the MSH, or listed in ``EXEMPTIONS`` with the reason.

Multi-hop scenarios run party A, an intermediary I and party C on the test network (memory stores, one fake
clock, no socket): a tap in front of each node records what it received and what it answered, so the bytes
an intermediary forwards are compared with the bytes it was given. The HTTP binding is checked on the ASGI
endpoint and on the HTTP client against a raw listener on 127.0.0.1 (bounded waits); TLS on in-memory
handshakes. The SMTP binding (B.3) is not built.
"""

from __future__ import annotations

import asyncio
import io
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from lxml import etree

from cpa.model import Certificate, SyncReplyMode
from msh.ebms.hop import forward_message
from msh.ebms.message import ParseMode, parse_message
from msh.ebms.model import Envelope
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH, SOAP_ACTOR_NEXT
from msh.ebms.via import ack_requested_element
from msh.engine import OutboundStatus
from msh.engine.intermediary import hop_answer
from msh.engine.replies import acknowledgment_message
from msh.engine.routing import Route
from msh.errors import ConfigurationError, ErrorCode
from msh.runtime.msh import Msh
from msh.testing.network import TestNetwork
from msh.transport.asgi import Endpoint
from msh.transport.http import HttpTransport
from msh.transport.port import HttpReply, Request
from msh.transport.tls import client_certificate_issue, server_context
from tests.conformance.clauses import Exemption, Kind, clause
from tests.support.cpa_factory import A_ID, make_cpa
from tests.support.multihop import (
    A_URL,
    C_URL,
    A,
    C,
    Path3,
    intermediary_url,
    multihop,
    order,
    routed_cpa,
    settings_for,
)

EB = "http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd"
SOAP = "http://schemas.xmlsoap.org/soap/envelope/"
DS = "http://www.w3.org/2000/09/xmldsig#"
ACTOR = f"{{{SOAP}}}actor"
KEYS = Path(__file__).resolve().parents[2] / "samples" / "keys"
ROW_1 = {"de": True, "e2e": True, "hop": True}
WAIT = 10.0  # seconds: the bound of every wait on a real socket

# ------------------------------------------------------------------------------------------------ helpers


@dataclass
class Exchange:
    """One request a node received (its Content-Type and body) and what it answered."""

    node: str
    content_type: str | None
    body: bytes
    reply: HttpReply


@dataclass
class Tap:
    """An endpoint in front of an MSH on the test network that records every exchange."""

    msh: Msh
    node: str
    log: list[Exchange] = field(default_factory=list)

    async def handle_http(self, body: Any, content_type: str | None, *, size: int | None = None) -> HttpReply:
        data = body if isinstance(body, bytes) else body.read()
        reply = await self.msh.handle_http(data, content_type, size=size)
        self.log.append(Exchange(self.node, content_type, data, reply))
        return reply


def run(scenario: Callable[[TestNetwork], Awaitable[None]]) -> None:
    async def main() -> None:
        net = TestNetwork(seed=1)
        try:
            await scenario(net)
        finally:
            await net.close()

    asyncio.run(main())


def tapped(net: TestNetwork, p: Path3) -> dict[str, Tap]:
    """Taps in front of A, the first intermediary and C."""
    taps = {"a": Tap(p.a, "a"), "i1": Tap(p.hops[0], "i1"), "c": Tap(p.c, "c")}
    for url, name in ((A_URL, "a"), (intermediary_url(1), "i1"), (C_URL, "c")):
        net.network.attach(url, taps[name])
    return taps


def status(msh: Msh, message_id: str) -> OutboundStatus:
    stored = msh.status(message_id)
    assert stored is not None
    return stored.state.status


def envelope_of(body: bytes, content_type: str | None) -> Envelope:
    assert content_type is not None
    message = parse_message(body, content_type, mode=ParseMode.LENIENT)
    message.close()
    return message.envelope


def soap_of(body: bytes, content_type: str | None) -> etree._Element:
    assert content_type is not None
    message = parse_message(body, content_type, mode=ParseMode.LENIENT)
    message.close()
    return etree.fromstring(message.soap)


def with_id(exchanges: list[Exchange], message_id: str) -> list[Exchange]:
    return [x for x in exchanges if f"<eb:MessageId>{message_id}</eb:MessageId>".encode() in x.body]


def header_children(root: etree._Element) -> list[etree._Element]:
    header = root.find(f"{{{SOAP}}}Header")
    assert header is not None
    return [child for child in header if isinstance(child.tag, str)]


async def first_message(net: TestNetwork, p: Path3, taps: dict[str, Tap]) -> Exchange:
    """A's first message as the intermediary received it (A submits; the exchange runs to its end)."""
    message_id = await p.a.submit_async(order(1))
    await net.run_until(lambda: status(p.a, message_id) is OutboundStatus.DELIVERED)
    [exchange] = with_id(taps["i1"].log, message_id)
    return exchange


def renamed(body: bytes, message_id: str) -> bytes:
    """A's first message under another MessageId (a new message with the same content)."""
    assert body.count(b"<eb:MessageId>a-1@testnet</eb:MessageId>") == 1
    return body.replace(
        b"<eb:MessageId>a-1@testnet</eb:MessageId>", f"<eb:MessageId>{message_id}</eb:MessageId>".encode()
    )


NEXT_MSH_ACK_REQUESTED = re.compile(rb"<eb:AckRequested[^>]*actor:nextMSH\"[^>]*/>")
SYNC_REPLY = f'<eb:SyncReply eb:version="2.0" SOAP:mustUnderstand="1" SOAP:actor="{SOAP_ACTOR_NEXT}"/>'.encode()


def errors_of(envelope: Envelope) -> list[tuple[str, str]]:
    assert envelope.error_list is not None
    return [(e.error_code, e.severity.value) for e in envelope.error_list.errors]


# ------------------------------------------------------------------------------------- §10 intermediaries

# The test elements: one aimed at SOAP's next node (an intermediary removes it), one at nobody in particular
# (the ultimate receiver: it stays), and white space of every kind between the Header's children.
NEXT_NODE_ELEMENT = (
    f'<t:Trace xmlns:t="urn:x-conformance" SOAP:actor="{SOAP_ACTOR_NEXT}" SOAP:mustUnderstand="0">hop 1</t:Trace>'
).encode()
END_ELEMENT = b'<t:Note xmlns:t="urn:x-conformance" SOAP:mustUnderstand="0">\tkeep  me\r\n</t:Note>'


def unusually_written(body: bytes) -> bytes:
    """``body`` with CR/LF, tabs and spaces between the Header's children, a comment, single-quoted
    attributes with spaces around ``=``, and the two test elements."""
    body = body.replace(b'<eb:MessageHeader eb:version="2.0"', b"<eb:MessageHeader   eb:version = '2.0' ", 1)
    body = body.replace(b"</eb:MessageHeader><eb:AckRequested", b"</eb:MessageHeader>\r\n\t  <eb:AckRequested", 1)
    body = body.replace(b'signed="false"/><eb:AckRequested', b'signed="false"/>\n\n    <eb:AckRequested', 1)
    body = body.replace(
        b"</SOAP:Header>", b"\t" + NEXT_NODE_ELEMENT + b" \r\n" + END_ELEMENT + b"<!-- c -->\r\n</SOAP:Header>"
    )
    return body


def _forwarded_bytes_are_the_received_ones_but_for_next_and_next_msh_elements() -> None:
    # The clauses: every byte outside the elements aimed at next/nextMSH goes on unchanged (white space,
    # comments, attribute quoting, the MIME framing, the payload); what is removed or added is aimed at
    # next or nextMSH.
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        taps = tapped(net, p)
        await net.start()
        first = await first_message(net, p, taps)
        body = unusually_written(renamed(first.body, "bytes-1@testnet"))
        assert first.content_type is not None
        await p.hops[0].handle_http(body, first.content_type)
        await net.settle()
        [forwarded] = with_id(taps["c"].log, "bytes-1@testnet")
        assert forwarded.content_type == first.content_type  # the package's boundary and start as they came
        # What I may take out: the AckRequested aimed at nextMSH (I is that MSH) and the element aimed at next.
        [hop_request] = NEXT_MSH_ACK_REQUESTED.findall(body)
        expected = body.replace(hop_request, b"", 1).replace(NEXT_NODE_ELEMENT, b"", 1)
        end = expected.index(b"</SOAP:Header>")
        assert forwarded.body.startswith(expected[:end])
        assert forwarded.body.endswith(expected[end:])
        added = forwarded.body[end : len(forwarded.body) - (len(expected) - end)]
        # What I put in: whole elements, each aimed at nextMSH or next, right before the Header's end tag.
        inserted = etree.fromstring(b"<w>" + added + b"</w>")
        assert len(inserted) >= 1
        assert {e.get(ACTOR) for e in inserted} <= {ACTOR_NEXT_MSH, SOAP_ACTOR_NEXT}
        assert END_ELEMENT + b"<!-- c -->\r\n" in forwarded.body

    run(scenario)


@clause(
    "10",
    2064,
    "Any Intermediary node or MSH MUST NOT change, format or in any way modify any element not targeted to the "
    "Intermediary.",
)
def test_10_the_forwarded_package_is_the_received_one_byte_for_byte_outside_next_msh_elements() -> None:
    _forwarded_bytes_are_the_received_ones_but_for_next_and_next_msh_elements()


@clause(
    "10.1.5",
    (2135, 2136),
    "Intermediaries MUST NOT add or remove elements unless they contain a SOAP actor of next or nextMSH. "
    "Intermediaries MUST NOT disturb white space - line terminators (CR/LF), tabs, spaces, etc. - outside those "
    "elements being added or removed.",
)
def test_10_1_5_only_next_and_next_msh_elements_are_removed_or_added_white_space_kept() -> None:
    _forwarded_bytes_are_the_received_ones_but_for_next_and_next_msh_elements()


@clause(
    "10.1",
    2073,
    "Since duplicate elimination by an intermediate MSH can interfere with End-to-End Reliable Messaging "
    "Retries, the intermediate MSH MUST know it is an intermediate and MUST NOT perform duplicate elimination "
    "tasks.",
)
def test_10_1_an_intermediary_forwards_every_copy_of_a_message_it_has_seen_before() -> None:
    # The clause: the intermediary takes the message as one for another party (never for its own application)
    # and forwards a second copy with the same MessageId (and DuplicateElimination) like the first.
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        taps = tapped(net, p)
        await net.start()
        first = await first_message(net, p, taps)
        body = renamed(first.body, "twice-1@testnet")
        assert b"<eb:DuplicateElimination/>" in body
        i = p.hops[0]
        replies = []
        for _ in range(2):
            replies.append(await i.handle_http(body, first.content_type))
            await net.settle()
        assert len(with_id(taps["c"].log, "twice-1@testnet")) == 2  # both copies went on to C
        for reply in replies:  # and each was acknowledged as the next MSH, as the first was
            ack = envelope_of(reply.body, reply.content_type)
            assert [a.actor for a in ack.acknowledgments] == [ACTOR_NEXT_MSH]
        assert i.counters.get("duplicates", 0) == 0
        assert i.inbox(None) == []  # it knows it is an intermediary: nothing for its own application

    run(scenario)


@clause(
    "10.1.1",
    2081,
    "The Acknowledgment element generated MUST be targeted at the next ebXML MSH node along the reverse message "
    "path (the Sending MSH) using the SOAP actor with a value of NextMSH (section 2.3.10).",
)
def test_10_1_1_the_hop_acknowledgment_is_aimed_at_next_msh_back_to_the_previous_hop() -> None:
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        taps = tapped(net, p)
        await net.start()
        first = await first_message(net, p, taps)
        # I answered A on A's connection (the reverse path's next MSH is A) with actor nextMSH.
        ack = soap_of(first.reply.body, first.reply.content_type)
        [element] = ack.iter(f"{{{EB}}}Acknowledgment")
        assert element.get(ACTOR) == ACTOR_NEXT_MSH
        assert element.findtext(f"{{{EB}}}RefToMessageId") == "a-1@testnet"
        # C, asked by I, answered I the same way on I's connection.
        [at_c] = with_id(taps["c"].log, "a-1@testnet")
        hop = [a for a in envelope_of(at_c.reply.body, at_c.reply.content_type).acknowledgments]
        assert [a.actor for a in hop] == [ACTOR_NEXT_MSH]

    run(scenario)


@clause(
    "10.1.1",
    2084,
    "Any Intermediary receiving an AckRequested with SOAP actor of NextMSH MUST remove the AckRequested element "
    "before forwarding to the next MSH.",
)
def test_10_1_1_the_intermediary_removes_the_next_msh_ack_requested_it_received() -> None:
    # A route that asks the next hop for nothing: what reaches C has no AckRequested aimed at nextMSH at all,
    # though A's message had one (the byte comparison above shows where a new one is put when I asks).
    async def scenario(net: TestNetwork) -> None:
        routes = (
            Route("i1-to-c", C.value, C_URL, to_party_id_type=C.type, hop_ack=False),
            Route("i1-to-a", A.value, A_URL, to_party_id_type=A.type),
        )
        p = multihop(net, routed_cpa(**ROW_1), intermediary_routes={1: routes})
        taps = tapped(net, p)
        await net.start()
        message_id = await p.a.submit_async(order(1))
        await net.run_until(lambda: status(p.a, message_id) is OutboundStatus.DELIVERED)
        [received] = with_id(taps["i1"].log, message_id)
        [forwarded] = with_id(taps["c"].log, message_id)
        assert len(NEXT_MSH_ACK_REQUESTED.findall(received.body)) == 1
        assert NEXT_MSH_ACK_REQUESTED.findall(forwarded.body) == []
        assert b"actor:toPartyMSH" in forwarded.body  # the end-to-end request is A's, kept

    run(scenario)


@clause(
    "10.1.1",
    2086,
    "There SHALL NOT be two AckRequested elements targeted at the next MSH.",
)
def test_10_1_1_never_two_ack_requested_aimed_at_the_next_msh() -> None:
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        taps = tapped(net, p)
        await net.start()
        first = await first_message(net, p, taps)
        # What A sent and what I forwarded each carry exactly one.
        [forwarded] = with_id(taps["c"].log, "a-1@testnet")
        for body in (first.body, forwarded.body):
            actors = [e.get(ACTOR) for e in soap_of(body, first.content_type).iter(f"{{{EB}}}AckRequested")]
            assert actors.count(ACTOR_NEXT_MSH) == 1
        # A message that comes with two is refused (Inconsistent, Error), not forwarded.
        [hop] = NEXT_MSH_ACK_REQUESTED.findall(first.body)
        twice = renamed(first.body, "two-1@testnet").replace(hop, hop + hop, 1)
        reply = await p.hops[0].handle_http(twice, first.content_type)
        await net.settle()
        assert errors_of(envelope_of(reply.body, reply.content_type)) == [("Inconsistent", "Error")]
        assert with_id(taps["c"].log, "two-1@testnet") == []

    run(scenario)
    # The rewrite itself cannot insert a second one.
    with pytest.raises(ValueError, match="SHALL NOT be two AckRequested"):
        forward_message(io.BytesIO(b""), "text/xml", io.BytesIO(), insert=(ack_requested_element(),) * 2)


@clause(
    "10.1.1",
    2089,
    "When the SyncReply element is present, an AckRequested element with SOAP actor of NextMSH MUST NOT be present.",
)
def test_10_1_1_an_agreement_asking_for_sync_reply_and_a_next_msh_acknowledgment_is_refused_when_loaded() -> None:
    # The sending side: the MSH never writes the two together; an agreement that would have it do so (a
    # synchronous syncReplyMode and a channel aimed at nextMSH) is refused before any message is sent.
    cpa = routed_cpa(**ROW_1, sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY)

    async def scenario(net: TestNetwork) -> None:
        with pytest.raises(ConfigurationError, match=r"10\.1\.1"):
            net.add("a", settings_for(A, "a.example", (Route("a-c", C.value, C_URL),)), agreements=(cpa,))

    run(scenario)


@clause(
    "10.1.1",
    (2089, 2091),
    "If these two elements are received in the same message, the Receiving MSH SHOULD report an error (see "
    "section 4.1.5) with errorCode set to Inconsistent and severity set to Error.",
)
def test_10_1_1_sync_reply_with_a_next_msh_ack_requested_is_inconsistent_at_intermediary_and_to_party() -> None:
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        taps = tapped(net, p)
        await net.start()
        first = await first_message(net, p, taps)
        for node, message_id in ((p.hops[0], "sync-i@testnet"), (p.c, "sync-c@testnet")):
            body = renamed(first.body, message_id).replace(b"</eb:MessageHeader>", b"</eb:MessageHeader>" + SYNC_REPLY)
            reply = await node.handle_http(body, first.content_type)
            await net.settle()
            # SyncReply was present: the error comes back on the connection. (At C the agreement's
            # syncReplyMode none makes the SyncReply itself a second Inconsistent error.)
            answer = envelope_of(reply.body, reply.content_type)
            assert answer.error_list is not None
            found = {(e.error_code, e.severity.value, e.location) for e in answer.error_list.errors}
            assert ("Inconsistent", "Error", "//Header/AckRequested/@actor") in found
        assert with_id(taps["c"].log, "sync-i@testnet") == []  # the intermediary did not forward it
        assert p.c.inbox(None) == [e for e in p.c.inbox(None) if e.message_id == "a-1@testnet"]

    run(scenario)


@clause(
    "10.1.3",
    (2102, 2103),
    "An Acknowledgement MUST be sent for each AckRequested using an identical SOAP actor attribute as the "
    "AckRequested element.",
)
def test_10_1_3_the_to_party_acknowledges_each_ack_requested_with_its_actor() -> None:
    # C got one AckRequested aimed at toPartyMSH (A's) and one aimed at nextMSH (I's): one Acknowledgment
    # for each, each with the actor of the request it answers.
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        taps = tapped(net, p)
        await net.start()
        await first_message(net, p, taps)
        [at_c] = with_id(taps["c"].log, "a-1@testnet")
        asked = sorted(e.get(ACTOR) for e in soap_of(at_c.body, at_c.content_type).iter(f"{{{EB}}}AckRequested"))
        assert asked == sorted([ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH])
        answered = [
            (a.actor, a.ref_to_message_id)
            for x in taps["c"].log
            for a in envelope_of(x.reply.body, x.reply.content_type).acknowledgments
            if x.reply.body
        ]
        answered += [
            (a.actor, a.ref_to_message_id)
            for x in taps["i1"].log
            if x.content_type is not None and x.content_type.startswith("text/xml")
            for a in envelope_of(x.body, x.content_type).acknowledgments
        ]
        assert sorted(answered) == sorted([(ACTOR_NEXT_MSH, "a-1@testnet"), (ACTOR_TO_PARTY_MSH, "a-1@testnet")])

    run(scenario)


@clause(
    "10.1.3",
    (2110, 2111),
    "A MSH supporting Multi-hop MUST differentiate, based upon the actor, which Acknowledgment is being returned "
    "and act accordingly.",
)
def test_10_1_3_a_hop_acknowledgment_is_not_taken_for_the_end_to_end_one() -> None:
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        await net.start()
        net.faults.down.add(C_URL)
        message_id = await p.a.submit_async(order(1))
        await net.settle()
        # Only I's Acknowledgment (nextMSH) came: forwarded, not delivered; A keeps waiting for C's.
        assert status(p.a, message_id) is OutboundStatus.FORWARDED
        net.faults.down.discard(C_URL)
        await net.run_until(lambda: status(p.a, message_id) is OutboundStatus.DELIVERED)

    run(scenario)
    # The intermediary: on its forward's connection, only the nextMSH Acknowledgment ends the forward; the
    # To party's (toPartyMSH) is for A and is sent on.
    forwarded = envelope_of(*_a_message())
    end = acknowledgment_message(forwarded, message_id="e2e@c", now=datetime.now(UTC), actors=(ACTOR_TO_PARTY_MSH,))
    hop = acknowledgment_message(forwarded, message_id="hop@c", now=datetime.now(UTC), actors=(ACTOR_NEXT_MSH,))
    assert forwarded.message_id is not None
    assert hop_answer(end, forwarded.message_id).event is None and hop_answer(end, forwarded.message_id).relay
    assert hop_answer(hop, forwarded.message_id).event is not None


@cache
def _a_message() -> tuple[bytes, str]:
    """A's first message to C through I (body, Content-Type)."""
    found: list[Exchange] = []

    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        taps = tapped(net, p)
        await net.start()
        found.append(await first_message(net, p, taps))

    run(scenario)
    assert found[0].content_type is not None
    return found[0].body, found[0].content_type


@clause(
    "10.1.3",
    2118,
    "The Receiving MSH MUST NOT send an Acknowledgment Message until the message has been persisted or delivered "
    "to the Next MSH.",
)
def test_10_1_3_the_hop_acknowledgment_leaves_only_once_the_message_is_stored() -> None:
    # When I's acknowledgment reaches A, I's store already holds the message to forward (the runtime commits
    # before it answers); C's hop acknowledgment reaches I once C has stored it.
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        i = p.hops[0]
        seen: list[tuple[str, bool]] = []

        class Check(Tap):
            async def handle_http(self, body: Any, content_type: str | None, *, size: int | None = None) -> HttpReply:
                reply = await super().handle_http(body, content_type, size=size)
                for ack in envelope_of(reply.body, reply.content_type).acknowledgments if reply.body else ():
                    if self.node == "i1":
                        seen.append(("i1", i.status(ack.ref_to_message_id) is not None))
                    else:
                        with self.msh.store.transaction(readonly=True) as tx:
                            seen.append(("c", tx.find_inbound(ack.ref_to_message_id) is not None))
                return reply

        net.network.attach(intermediary_url(1), Check(i, "i1"))
        net.network.attach(C_URL, Check(p.c, "c"))
        await net.start()
        message_id = await p.a.submit_async(order(1))
        await net.run_until(lambda: status(p.a, message_id) is OutboundStatus.DELIVERED)
        assert sorted(seen) == [("c", True), ("i1", True)]

    run(scenario)


@clause(
    "10.1.4",
    2122,
    "When a signed Intermediate Acknowledgment Message is requested (i.e. a signed Acknowledgment Message with a "
    "SOAP actor of NextMSH), it MUST be sent by itself and not bundled with any other message.",
)
def test_10_1_4_a_signed_hop_acknowledgment_is_a_message_of_its_own() -> None:
    # The clause and the rest of §10.1.4: a message with no payloads, a single Acknowledgment element and a
    # ds:Signature with the two Transforms enveloped-signature and C14N (no XPath filter).
    async def scenario(net: TestNetwork) -> None:
        keys = {"i1": (KEYS / "intermediary.key.pem", KEYS / "intermediary.cert.pem")}
        p = multihop(net, routed_cpa(**ROW_1), keys=keys)
        taps = tapped(net, p)
        await net.start()
        first = await first_message(net, p, taps)
        [hop] = NEXT_MSH_ACK_REQUESTED.findall(first.body)
        asked = renamed(first.body, "signed-hop@testnet").replace(hop, hop.replace(b'"false"', b'"true"'), 1)
        reply = await p.hops[0].handle_http(asked, first.content_type)
        await net.settle()
        assert reply.content_type is not None and reply.content_type.startswith("text/xml")  # no payloads
        root = soap_of(reply.body, reply.content_type)
        names = [etree.QName(e).localname for e in header_children(root)]
        assert sorted(names) == ["Acknowledgment", "MessageHeader", "Signature"]
        body = root.find(f"{{{SOAP}}}Body")
        assert body is not None and len(body) == 0
        [ack] = root.iter(f"{{{EB}}}Acknowledgment")
        assert ack.get(ACTOR) == ACTOR_NEXT_MSH
        [signature] = root.iter(f"{{{DS}}}Signature")
        [reference] = [r for r in signature.iter(f"{{{DS}}}Reference") if r.get("URI") == ""]
        transforms = [t.get("Algorithm") for t in reference.iter(f"{{{DS}}}Transform")]
        assert transforms == [
            "http://www.w3.org/2000/09/xmldsig#enveloped-signature",
            "http://www.w3.org/TR/2001/REC-xml-c14n-20010315",
        ]

    run(scenario)


MESSAGE_ORDER = (
    '<eb:MessageOrder eb:version="2.0" SOAP:mustUnderstand="1"><eb:SequenceNumber>{n}</eb:SequenceNumber>'
    "</eb:MessageOrder>"
)


@clause(
    "10.2",
    2139,
    "Intermediary MSH nodes MUST NOT participate in Message Order processing as specified in section 9.",
)
def test_10_2_an_intermediary_forwards_messages_out_of_sequence_at_once_and_unchanged() -> None:
    # Sequence numbers 7 then 3 (a gap, then a step back): an MSH doing §9 would hold or refuse them; the
    # intermediary forwards each at once, in arrival order, its MessageOrder element as it came.
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        taps = tapped(net, p)
        await net.start()
        first = await first_message(net, p, taps)
        for n in (7, 3):
            element = MESSAGE_ORDER.format(n=n).encode()
            body = renamed(first.body, f"seq-{n}@testnet").replace(
                b"</eb:MessageHeader>", b"</eb:MessageHeader>" + element, 1
            )
            reply = await p.hops[0].handle_http(body, first.content_type)
            assert [a.actor for a in envelope_of(reply.body, reply.content_type).acknowledgments] == [ACTOR_NEXT_MSH]
            await net.settle()
            [forwarded] = with_id(taps["c"].log, f"seq-{n}@testnet")
            assert element in forwarded.body
        arrived = [x for x in taps["c"].log if b"seq-" in x.body and b"<eb:MessageOrder" in x.body]
        assert [b"seq-7@" in x.body for x in arrived] == [True, False]

    run(scenario)


# --------------------------------------------------------------------------------------------- B.2 HTTP


@dataclass(frozen=True)
class Wire:
    """One HTTP request as it crossed a socket: request line, header fields (in order), body."""

    request_line: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]


async def _listen_once() -> tuple[int, asyncio.Future[Wire], asyncio.AbstractServer]:
    """A raw HTTP listener on 127.0.0.1 that reads one request and answers 202 with no body."""
    got: asyncio.Future[Wire] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = [(k.strip(), v.strip()) for k, v in (line.split(":", 1) for line in lines[1:] if line)]
        length = int(next(v for k, v in headers if k.lower() == "content-length"))
        body = await reader.readexactly(length)
        writer.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()
        if not got.done():
            got.set_result(Wire(lines[0], headers, body))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return port, got, server


@cache
def sent_over_http() -> tuple[Request, Wire]:
    """The request A's MSH makes for a business message (on the test network), and the same request sent by
    the HTTP client to a raw listener on 127.0.0.1, as it crossed the socket."""
    requests: list[Request] = []

    async def scenario(net: TestNetwork) -> None:
        cpa = routed_cpa(de=True, e2e=True, hop=False, first_hop=C_URL)
        a = net.add("a", settings_for(A, "a.example", (Route("a-c", C.value, C_URL),)), agreements=(cpa,))
        net.add("c", settings_for(C, "c.example", (Route("c-a", A.value, A_URL),)), agreements=(cpa,))
        net.network.observers.append(requests.append)  # what A's transport sends, as sent
        await net.start()
        # A payload with every byte value: HTTP carries binary (B.2.2); nothing re-encodes it.
        submission = order(1)
        binary = bytes(range(256)) * 4
        submission = type(submission)(
            submission.to_party,
            submission.service,
            submission.action,
            (type(submission.payloads[0])(binary, "application/octet-stream"),),
        )
        message_id = await a.submit_async(submission)
        await net.run_until(lambda: status(a, message_id) is OutboundStatus.DELIVERED)

    run(scenario)
    [request] = [r for r in requests if r.url == C_URL and r.content_type.startswith("multipart/related")]

    async def over_socket() -> Wire:
        port, got, server = await _listen_once()
        client = HttpTransport(timeout=timedelta(seconds=WAIT), connect_timeout=timedelta(seconds=WAIT))
        try:
            wire = Request(
                f"http://127.0.0.1:{port}/ebxmlhandler", request.content_type, request.body, None, request.headers
            )
            response = await asyncio.wait_for(client.send(wire), WAIT)
            assert response.status == 202
            return await asyncio.wait_for(got, WAIT)
        finally:
            await client.close()
            server.close()
            await server.wait_closed()

    return request, asyncio.run(over_socket())


@clause(
    "B.2.1",
    2444,
    "Hypertext Transfer Protocol Version 1.1 [RFC2616] is the minimum level of protocol that MUST be used.",
)
def test_b_2_1_the_msh_posts_with_http_1_1() -> None:
    _, wire = sent_over_http()
    method, _, version = wire.request_line.split(" ")
    assert (method, version) == ("POST", "HTTP/1.1")
    assert wire.header("Host")  # RFC 2616 §14.23: every HTTP/1.1 request carries Host


@clause(
    "B.2.1",
    2444,
    "Hypertext Transfer Protocol Version 1.1 [RFC2616] is the minimum level of protocol that MUST be used.",
)
def test_b_2_1_the_endpoint_answers_with_http_1_1(tmp_path: Path) -> None:
    from tests.support.endpoint import serving, valid_message

    with serving(tmp_path / "b") as b:
        content_type, body = valid_message(b.msh, "http11@party-a.example")

        async def post() -> bytes:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", b.port), WAIT)
            head = (
                f'POST /msh HTTP/1.1\r\nHost: 127.0.0.1\r\nSOAPAction: "ebXML"\r\nContent-Type: {content_type}\r\n'
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode("latin-1") + body)
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), WAIT)
            writer.close()
            return answer

        answer = asyncio.run(post())
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 2")
    head = rest.partition(b"\r\n\r\n")[0].lower()
    assert b"mime-version" not in head and b"content-transfer-encoding" not in head  # B.2.2 on the answer too


@clause(
    "B.2.2",
    2450,
    "Prior to sending over HTTP, an ebXML Message MUST be formatted according to ebXML Message Service Specification.",
)
def test_b_2_2_what_goes_over_http_is_an_ebxml_message_package() -> None:
    _, wire = sent_over_http()
    [content_type] = wire.header("Content-Type")
    message = parse_message(wire.body, content_type, mode=ParseMode.STRICT)  # ebMS2 §2.1, schema-valid envelope
    message.close()
    assert message.envelope.message_header is not None and message.envelope.manifest is not None


@clause(
    "B.2.2",
    2451,
    "Additionally, the messages MUST conform to the HTTP specific MIME canonical form constraints specified in "
    "section 19.4 of RFC 2616 [RFC2616] specification.",
)
def test_b_2_2_the_package_keeps_to_http_s_mime_rules() -> None:
    # RFC 2616 §19.4: HTTP uses no Content-Transfer-Encoding (§19.4.5) and carries binary as it is (a binary
    # payload is not re-encoded); multipart boundaries are delimited by CRLF (§3.7.2).
    _, wire = sent_over_http()
    assert wire.header("Content-Transfer-Encoding") == []
    assert bytes(range(256)) * 4 in wire.body
    [content_type] = wire.header("Content-Type")
    boundary = re.search(r'boundary="([^"]+)"', content_type)
    assert boundary is not None
    dash = b"--" + boundary.group(1).encode()
    assert wire.body.startswith(dash + b"\r\n")
    assert wire.body.count(b"\r\n" + dash) == wire.body.count(dash) - 1
    assert wire.body.endswith(dash + b"--\r\n")


@clause(
    "B.2.2",
    2458,
    "The Content-Type: Multipart/Related MIME header with the associated parameters, from the ebXML Service "
    "Message Envelope MUST appear as an HTTP header.",
)
@clause(
    "B.2.2",
    2459,
    "All other MIME headers that constitute the ebXML Message Envelope MUST also become part of the HTTP header.",
)
def test_b_2_2_the_envelope_s_mime_headers_are_the_http_headers() -> None:
    request, wire = sent_over_http()
    [content_type] = wire.header("Content-Type")
    assert content_type == request.content_type
    assert content_type.startswith("multipart/related")
    for parameter in ("type=", "boundary=", "start="):
        assert parameter in content_type
    # No MIME header of the envelope stays behind in the entity body: it opens with the first boundary.
    assert wire.body.startswith(b"--")
    assert wire.header("SOAPAction") == ['"ebXML"']


@clause(
    "B.2.2",
    (2464, 2465),
    "Other headers with semantics defined by MIME specifications, such as Content-Transfer-Encoding, SHALL NOT "
    'appear as HTTP headers. Specifically, the "MIME-Version: 1.0" header MUST NOT appear as an HTTP header.',
)
def test_b_2_2_no_mime_only_header_is_an_http_header() -> None:
    _, wire = sent_over_http()
    names = {k.lower() for k, _ in wire.headers}
    assert "mime-version" not in names and "content-transfer-encoding" not in names
    assert not any(n.startswith("content-") and n not in ("content-type", "content-length") for n in names)


# --- the endpoint: response codes (B.2.3-B.2.5) -----------------------------------------------------------


async def asgi(
    endpoint: Endpoint, method: str, body: bytes, content_type: str | None
) -> tuple[int, dict[str, str], bytes]:
    """One request to the ASGI endpoint, in process: status, headers, body."""
    headers = [(b"soapaction", b'"ebXML"')]
    if content_type is not None:
        headers.append((b"content-type", content_type.encode("latin-1")))
    scope = {"type": "http", "method": method, "path": "/msh", "headers": headers}
    sent = False
    out: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        out.append(message)

    await endpoint(scope, receive, send)
    start = out[0]
    head = {k.decode("latin-1"): v.decode("latin-1") for k, v in start["headers"]}
    return start["status"], head, b"".join(m.get("body", b"") for m in out[1:])


@dataclass
class Pair:
    net: TestNetwork
    a: Msh
    c: Msh
    taps: dict[str, Tap]
    message: tuple[str, bytes]  # a message from A to C, not yet sent: (Content-Type, body)


def with_pair(mode: SyncReplyMode, scenario: Callable[[Pair], Awaitable[None]]) -> None:
    """A and C directly (no intermediary) under an agreement with syncReplyMode ``mode``; C's endpoint is
    the ASGI application in the tests that use it."""

    async def main(net: TestNetwork) -> None:
        cpa = routed_cpa(de=True, e2e=True, hop=False, first_hop=C_URL, sync_reply_mode=mode)
        a = net.add("a", settings_for(A, "a.example", (Route("a-c", C.value, C_URL),)), agreements=(cpa,))
        c = net.add("c", settings_for(C, "c.example", (Route("c-a", A.value, A_URL),)), agreements=(cpa,))
        taps = {"a": Tap(a, "a"), "c": Tap(c, "c")}
        net.network.attach(A_URL, taps["a"])
        net.network.attach(C_URL, taps["c"])
        await net.start()
        message_id = await a.submit_async(order(1))
        await net.run_until(lambda: status(a, message_id) is OutboundStatus.DELIVERED)
        [first] = taps["c"].log
        assert first.content_type is not None
        await scenario(Pair(net, a, c, taps, (first.content_type, renamed(first.body, "fresh-1@testnet"))))

    run(main)


def bad_action(body: bytes) -> bytes:
    return renamed(
        body.replace(b"<eb:MessageId>fresh-1@testnet</eb:MessageId>", b"<eb:MessageId>a-1@testnet</eb:MessageId>"),
        "bad-1@testnet",
    ).replace(b">NewOrder<", b">NoSuchAction<")


@clause(
    "B.2.3",
    (2532, 2533),
    "In general, semantics of communicating over HTTP as specified in the [RFC2616] MUST be followed, for "
    "returning the HTTP level response codes. A 2xx code MUST be returned when the HTTP Posted message is "
    "successfully received by the receiving HTTP entity.",
)
def test_b_2_3_2xx_when_the_post_was_received_and_rfc_2616_codes_otherwise() -> None:
    async def scenario(pair: Pair) -> None:
        endpoint = Endpoint(pair.c)
        code, _, _ = await asgi(endpoint, "POST", pair.message[1], pair.message[0])
        assert 200 <= code < 300
        # RFC 2616 §10.4.6: a method the resource does not allow is 405 with an Allow header.
        code, head, _ = await asgi(endpoint, "PUT", b"", None)
        assert code == 405 and head.get("allow") == "POST"
        await pair.net.settle()

    with_pair(SyncReplyMode.NONE, scenario)


@clause(
    "B.2.3",
    2537,
    "However, error conditions encountered while processing an ebXML Service Message MUST be reported using the "
    "error mechanism defined by the ebXML Message Service Specification (see section 4.1.5).",
)
@pytest.mark.parametrize("mode", [SyncReplyMode.NONE, SyncReplyMode.MSH_SIGNALS_ONLY])
def test_b_2_3_an_error_in_an_ebxml_message_is_an_ebxml_error_message(mode: SyncReplyMode) -> None:
    # An action the agreement does not know: an ErrorList (ValueNotRecognized) about the message, on the
    # connection (synchronous) or by a POST of its own (asynchronous), not a bare HTTP error code.
    async def scenario(pair: Pair) -> None:
        code, _, body = await asgi(Endpoint(pair.c), "POST", bad_action(pair.message[1]), pair.message[0])
        await pair.net.settle()
        assert 200 <= code < 300
        if mode is SyncReplyMode.NONE:
            [report] = [x for x in pair.taps["a"].log if b"<eb:ErrorList" in x.body]
            envelope = envelope_of(report.body, report.content_type)
        else:
            envelope = envelope_of(body, 'text/xml; charset="UTF-8"')
        header = envelope.message_header
        assert header is not None and header.message_data.ref_to_message_id == "bad-1@testnet"
        assert errors_of(envelope) == [(ErrorCode.VALUE_NOT_RECOGNIZED.value, "Error")]

    with_pair(mode, scenario)


@clause(
    "B.2.4",
    2541,
    '"In case of a SOAP error while processing the request, the SOAP HTTP server MUST issue an HTTP 500 "Internal '
    'Server Error" response and include a SOAP message in the response containing a SOAP Fault element indicating '
    'the SOAP processing error. "',
)
@clause(
    "B.2.4",
    (2546, 2548),
    "Hence, the SOAP 1.1 specification MUST be followed for synchronous mode of message exchange, where the SOAP "
    "Message containing a SOAP Fault element indicating the SOAP processing error MUST be returned in the HTTP "
    'response with a response code of "HTTP 500 Internal Server Error".',
)
def test_b_2_4_a_soap_error_is_a_500_with_a_soap_fault() -> None:
    # An envelope that is not XML at all cannot be processed as SOAP: 500 and a SOAP Fault saying why.
    async def scenario(pair: Pair) -> None:
        code, head, body = await asgi(Endpoint(pair.c), "POST", b"<SOAP:Envelope", 'text/xml; charset="UTF-8"')
        assert code == 500 and head["content-type"].startswith("text/xml")
        root = etree.fromstring(body)
        [fault] = root.iter(f"{{{SOAP}}}Fault")
        assert fault.findtext("faultcode") and fault.findtext("faultstring")

    with_pair(SyncReplyMode.MSH_SIGNALS_ONLY, scenario)


@clause(
    "B.2.4",
    2550,
    "When asynchronous mode of message exchange is being used, a HTTP response code in the range 2xx MUST be "
    "returned when the message is received successfully and any error conditions (including SOAP errors) must be "
    "returned via separate HTTP Post.",
)
def test_b_2_4_asynchronous_mode_answers_2xx_and_posts_errors_separately() -> None:
    async def scenario(pair: Pair) -> None:
        endpoint = Endpoint(pair.c)
        code, _, body = await asgi(endpoint, "POST", pair.message[1], pair.message[0])
        assert 200 <= code < 300 and body == b""
        code, _, body = await asgi(endpoint, "POST", bad_action(pair.message[1]), pair.message[0])
        assert 200 <= code < 300 and body == b""
        await pair.net.settle()
        assert [
            x for x in pair.taps["a"].log if b"<eb:RefToMessageId>bad-1@testnet<" in x.body and b"ErrorList" in x.body
        ]

    with_pair(SyncReplyMode.NONE, scenario)


@clause(
    "B.2.5",
    (2553, 2554),
    "When a synchronous transport is in use, the MSH response message(s) SHOULD be returned on the same HTTP "
    "connection as the inbound request, with an appropriate HTTP response code, as described above.",
)
def test_b_2_5_synchronous_replies_come_back_on_the_same_connection() -> None:
    async def scenario(pair: Pair) -> None:
        code, head, body = await asgi(Endpoint(pair.c), "POST", pair.message[1], pair.message[0])
        assert code == 200 and head["content-type"].startswith("text/xml")
        [ack] = envelope_of(body, head["content-type"]).acknowledgments
        assert ack.ref_to_message_id == "fresh-1@testnet"
        await pair.net.settle()
        assert [x for x in pair.taps["a"].log if b"fresh-1@testnet" in x.body] == []  # nothing by another POST

    with_pair(SyncReplyMode.MSH_SIGNALS_ONLY, scenario)


@clause(
    "B.2.5",
    (2557, 2558),
    "If the syncReplyMode has a value of none, an HTTP response with a response code as defined in section B.2.3 "
    "above and with an empty HTTP body MUST be returned in response to the HTTP Post.",
)
def test_b_2_5_sync_reply_mode_none_answers_with_an_empty_body() -> None:
    # The acknowledgment and any error go by POSTs of their own. (§10.1.1 lets the next MSH return the
    # Acknowledgment aimed at nextMSH on the connection when there is no SyncReply; the MSH does so, as the
    # intermediary tests above show: that is the one answer with a body under none.)
    async def scenario(pair: Pair) -> None:
        endpoint = Endpoint(pair.c)
        for body in (pair.message[1], bad_action(pair.message[1])):
            code, head, answer = await asgi(endpoint, "POST", body, pair.message[0])
            assert 200 <= code < 300 and answer == b"" and head.get("content-length") == "0"
        await pair.net.settle()
        acks = [x for x in pair.taps["a"].log if b"<eb:RefToMessageId>fresh-1@testnet<" in x.body]
        assert [a.actor for x in acks for a in envelope_of(x.body, x.content_type).acknowledgments] == [
            ACTOR_TO_PARTY_MSH
        ]

    with_pair(SyncReplyMode.NONE, scenario)


# --- TLS (B.2.7) ------------------------------------------------------------------------------------------


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    common_name: str, issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = None, *, ca: bool = False
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    issuer_name, signing_key = (issuer[0].subject, issuer[1]) if issuer is not None else (_name(common_name), key)
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)
        builder = builder.add_extension(usage, critical=True)
    return builder.sign(signing_key, hashes.SHA256()), key


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def _files(tmp_path: Path, name: str, pair: tuple[x509.Certificate, ec.EllipticCurvePrivateKey]) -> tuple[Path, Path]:
    cert, key = pair
    cert_path, key_path = tmp_path / f"{name}.cert.pem", tmp_path / f"{name}.key.pem"
    cert_path.write_text(_pem(cert))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> bool:
    """A TLS handshake between the two contexts in memory; True when both ends completed it."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(c_in, c_out, server_side=False, server_hostname="msh.example")
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"c": False, "s": False}
    for _ in range(20):
        for name, end in (("c", c), ("s", s)):
            if done[name]:
                continue
            try:
                end.do_handshake()
                done[name] = True
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError:
                return False
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            # TLS 1.3: the server may still reject the client's certificate after the client's handshake.
            try:
                s.read(1)
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError:
                return False
            c_in.write(s_out.read())
            try:
                c.read(1)
            except ssl.SSLWantReadError:
                return True
            except ssl.SSLError:
                return False
            return True
    return False


@clause(
    "B.2.7",
    (2579, 2580),
    "The use of 40-bit encryption keys/algorithms is permitted, however it is RECOMMENDED that stronger encryption "
    "keys/algorithms SHOULD be used.",
)
def test_b_2_7_the_endpoint_offers_no_cipher_weaker_than_128_bits(tmp_path: Path) -> None:
    own = _files(tmp_path, "server", _certificate("msh.example"))
    context = server_context(
        certificate=own[0], private_key=own[1], client_anchors_pem="", require_client_certificate=False
    )
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    assert context.get_ciphers() and all(c["strength_bits"] >= 128 for c in context.get_ciphers())


@clause(
    "B.2.7",
    (2582, 2583),
    "All ebXML Message Service handlers MUST support hierarchical and peer-to-peer or direct-trust trust models.",
)
def test_b_2_7_client_certificates_are_trusted_directly_or_through_a_ca(tmp_path: Path) -> None:
    server_pair = _certificate("msh.example")
    own = _files(tmp_path, "server", server_pair)
    direct = _certificate("party A")  # self-signed, named by the agreement itself: direct trust
    ca = _certificate("A's CA", ca=True)
    issued = _certificate("party A's MSH", issuer=ca)  # issued by a CA the agreement names: hierarchical
    stranger = _certificate("someone else")
    anchors = _pem(direct[0]) + _pem(ca[0])
    server = server_context(certificate=own[0], private_key=own[1], client_anchors_pem=anchors)

    def client(pair: tuple[x509.Certificate, ec.EllipticCurvePrivateKey], name: str) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.load_verify_locations(cadata=_pem(server_pair[0]))
        context.load_cert_chain(*[str(p) for p in _files(tmp_path, name, pair)])
        return context

    assert _handshake(server, client(direct, "direct"))
    assert _handshake(server, client(issued, "issued"))
    assert not _handshake(server, client(stranger, "stranger"))
    # And the certificate belongs to party A under an agreement that names either kind of anchor.
    from dataclasses import replace

    from msh.ebms import model as m

    from_a = m.Party((m.PartyId(A_ID.value, A_ID.type),))
    for anchor, presented in ((direct[0], direct[0]), (ca[0], issued[0])):
        der = anchor.public_bytes(serialization.Encoding.DER)
        cpa = make_cpa()
        a_info, b_info = cpa.party_infos
        cpa = replace(cpa, party_infos=(replace(a_info, certificates=(Certificate("anchor", (der,)),)), b_info))
        assert client_certificate_issue(cpa, from_a, presented.public_bytes(serialization.Encoding.DER)) is None


# ------------------------------------------------------------------------------------------- exemptions

_SMTP = (
    "The SMTP binding is not built: this MSH sends and receives over HTTP(S) only; the SMTP binding is planned "
    "as its own piece of work."
)
_SMTP_DSN = (
    "The SMTP binding is not built, so no MTA delivery failure notification can reach this MSH; handling them "
    "(finding the failed message, telling the sending application, keeping unidentified mail in a dead-letter "
    "folder) is part of the SMTP binding, planned as its own piece of work."
)

EXEMPTIONS: tuple[Exemption, ...] = (
    Exemption(
        "B.2.6",
        (2567,),
        "Implementers that use basic authentication for access control SHOULD also use communications protocol "
        'level security, as specified in the section titled "Confidentiality and Transport Protocol Level '
        'Security" in this document.',
        Kind.FOR_PEOPLE,
        "The MSH endpoint does not implement HTTP Basic authentication: it authenticates partners by TLS client "
        "certificates and message signatures. A site that puts Basic authentication in front of it (in a reverse "
        "proxy) is told here to do so over TLS, which is the site's configuration, not something this software "
        "can show.",
    ),
    Exemption(
        "B.2.7",
        (2574, 2575),
        "ebXML Message Service Handlers MUST be capable of operating in backwards compatibility mode with SSL "
        "[SSL3], as defined in Appendix E of TLS [RFC2246].",
        Kind.NOT_FOLLOWED,
        "The endpoint and the client speak TLS 1.2 or newer only. SSL 3.0 is broken (POODLE) and RFC 7568 "
        "forbids its use; current OpenSSL builds do not even include it, so falling back to it would only open "
        "the connection to downgrade attacks.",
    ),
    Exemption(
        "B.2.7",
        (2577, 2578),
        "At a minimum ebXML Message Service Handlers MUST support the key sizes and algorithms necessary for "
        "backward compatibility with [SSL3].",
        Kind.NOT_FOLLOWED,
        "The key sizes and cipher suites of SSL 3.0 (export ciphers, RC4, single DES) are disabled on purpose: "
        "the endpoint and the client offer only suites of 128 bits or more under TLS 1.2 or newer, as the test "
        "of B.2.7 lines 2579-2580 shows.",
    ),
    Exemption(
        "B.3.2",
        (2606,),
        "Prior to sending messages over SMTP an ebXML Message MUST be formatted according to the ebXML Message "
        "Service Specification.",
        Kind.NOT_BUILT,
        _SMTP,
    ),
    Exemption(
        "B.3.2",
        (2620, 2621),
        "The Content-Transfer-Encoding MIME header MUST be included in the MIME envelope portion of any body part "
        "that has been transformed (encoded).",
        Kind.NOT_BUILT,
        _SMTP,
    ),
    Exemption(
        "B.3.2",
        (2622, 2623),
        "The Content-Type: Multipart/Related MIME header with the associated parameters, from the ebXML Message "
        "Envelope MUST appear as an eMail MIME header.",
        Kind.NOT_BUILT,
        _SMTP,
    ),
    Exemption(
        "B.3.2",
        (2624, 2625),
        "All other MIME headers that constitute the ebXML Message Envelope MUST also become part of the eMail MIME "
        "header.",
        Kind.NOT_BUILT,
        _SMTP,
    ),
    Exemption(
        "B.3.2",
        (2630, 2631),
        'The eMail header "To:" MUST contain the SMTP [RFC2821] compliant eMail address of the ebXML Message '
        "Service Handler.",
        Kind.NOT_BUILT,
        _SMTP,
    ),
    Exemption(
        "B.3.2",
        (2632, 2633),
        'The eMail header "From:" MUST contain the SMTP [RFC2821] compliant eMail address of the senders ebXML '
        "Message Service Handler.",
        Kind.NOT_BUILT,
        _SMTP,
    ),
    Exemption(
        "B.3.3",
        (2706, 2707),
        "Each response message MUST be constructed in accordance with the rules specified in the section B.3.2.",
        Kind.NOT_BUILT,
        _SMTP,
    ),
    Exemption(
        "B.3.3",
        (2708,),
        "All ebXML Message Service Handlers MUST be capable of receiving a delivery failure notification message "
        "sent by an MTA.",
        Kind.NOT_BUILT,
        _SMTP_DSN,
    ),
    Exemption(
        "B.3.3",
        (2709, 2710),
        "A MSH that receives a delivery failure notification message SHOULD examine the message to determine which "
        "ebXML message, sent by the MSH, resulted in a message delivery failure.",
        Kind.NOT_BUILT,
        _SMTP_DSN,
    ),
    Exemption(
        "B.3.3",
        (2711,),
        "The MSH SHOULD attempt to identify the application responsible for sending the offending message causing "
        "the failure.",
        Kind.NOT_BUILT,
        _SMTP_DSN,
    ),
    Exemption(
        "B.3.3",
        (2712, 2713),
        "The MSH SHOULD attempt to notify the application that a message delivery failure has occurred.",
        Kind.NOT_BUILT,
        _SMTP_DSN,
    ),
    Exemption(
        "B.3.3",
        (2715, 2716),
        "MSH's which cannot identify a received message as a valid ebXML message or a message delivery failure "
        'SHOULD retain the unidentified message in a "dead letter" folder.',
        Kind.NOT_BUILT,
        _SMTP_DSN,
    ),
    Exemption(
        "B.3.3",
        (2717,),
        "A MSH SHOULD place an entry in an audit log indicating the disposition of each received message.",
        Kind.NOT_BUILT,
        "This sentence belongs to the SMTP binding's response messages (B.3.3), which is not built; the binding is "
        "planned as its own piece of work. (Over HTTP the MSH journals what it did with every received message.)",
    ),
)
