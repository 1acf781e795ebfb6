"""Multi-hop scenarios on the test network (ebMS2 §10, §6.6, docs/design.md §5 invariant 5): A sends to C
through one or more intermediaries; memory stores, the in-memory transport, one fake clock.

Each row of ebMS2 §6.6 is checked from the stores with losses on every hop: what A's application was
told (delivered, forwarded, failed with which severity) and how often C's application got each message.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

from cpa.model import SyncReplyMode
from msh.cli.status import status_line
from msh.ebms.envelope import serialise_envelope
from msh.ebms.message import ParseMode, parse_message
from msh.ebms.model import Party, PartyId
from msh.ebms.namespaces import ACTOR_NEXT_MSH
from msh.ebms.via import ack_requested_element, via_element
from msh.engine import Evidence, OutboundStatus
from msh.engine.intermediary import hop_acknowledgment
from msh.engine.routing import Route
from msh.errors import Severity
from msh.runtime.msh import HttpReply, Msh
from msh.store.api import Direction, OutboundKind
from msh.testing.network import TestNetwork
from msh.transport.port import SOAP_CONTENT_TYPE
from tests.support.multihop import (
    C_URL,
    A,
    C,
    intermediary_id,
    intermediary_url,
    multihop,
    order,
    routed_cpa,
)

ROW_1 = {"de": True, "e2e": True, "hop": True}


def run(scenario: Callable[[TestNetwork], Awaitable[None]], *, seed: int = 1) -> None:
    async def main() -> None:
        net = TestNetwork(seed=seed)
        try:
            await scenario(net)
        finally:
            await net.close()

    asyncio.run(main())


def status(msh: Msh, message_id: str) -> OutboundStatus:
    stored = msh.status(message_id)
    assert stored is not None
    return stored.state.status


def statuses(msh: Msh, ids: list[str]) -> Counter[OutboundStatus]:
    return Counter(status(msh, m) for m in ids)


def settled(msh: Msh, ids: list[str], *, accept: tuple[OutboundStatus, ...]) -> Callable[[], bool]:
    return lambda: all(status(msh, m) in accept for m in ids)


FINAL = (OutboundStatus.DELIVERED, OutboundStatus.SENT, OutboundStatus.FAILED)


def received(c: Msh) -> Counter[str]:
    return Counter(entry.message_id for entry in c.inbox(None, limit=100_000))


def events(msh: Msh, message_id: str) -> list[str]:
    with msh.store.transaction(readonly=True) as tx:
        return [e.kind for e in tx.message_events(message_id, limit=1000)]


def soap_of(body: bytes, content_type: str) -> bytes:
    message = parse_message(body, content_type, mode=ParseMode.LENIENT)
    message.close()
    return message.soap


def stored_outbound_soap(msh: Msh, message_id: str) -> bytes:
    stored = msh.status(message_id)
    assert stored is not None
    with msh.store.open_blob(stored.body_blob_id) as blob:
        return soap_of(blob.read(), stored.content_type)


def stored_inbound_soap(msh: Msh, message_id: str) -> bytes:
    with msh.store.transaction(readonly=True) as tx:
        record = tx.find_inbound(message_id)
    assert record is not None
    with msh.store.open_blob(record.body_blob_id) as blob:
        return soap_of(blob.read(), record.content_type)


# --- one message, one intermediary --------------------------------------------------------------------


def test_a_message_goes_through_the_intermediary_and_is_acknowledged_hop_by_hop_and_end_to_end() -> None:
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        await net.start()
        message_id = await p.a.submit_async(order(1))
        await net.run_until(lambda: status(p.a, message_id) is OutboundStatus.DELIVERED)
        assert received(p.c) == {message_id: 1}
        # ebMS2 §10.1.3: A saw the hop acknowledgment (forwarded), then the end-to-end one (delivered).
        kinds = events(p.a, message_id)
        assert kinds.index("hop-acknowledged") < kinds.index("delivered")
        # The intermediary stored and forwarded it, and the next MSH (C) acknowledged the hop.
        i = p.hops[0]
        forward = i.status(message_id)
        assert forward is not None and forward.kind is OutboundKind.FORWARD
        assert forward.state.status is OutboundStatus.DELIVERED
        assert forward.endpoint_url == C_URL
        assert "forward" in events(i, message_id) and "forward-delivered" in events(i, message_id)
        assert i.inbox(None) == []  # never delivered to the intermediary's own application

    run(scenario)


def test_the_forwarded_soap_part_is_the_original_minus_the_next_msh_elements_plus_the_intermediarys() -> None:
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        await net.start()
        message_id = await p.a.submit_async(order(1))
        await net.run_until(lambda: status(p.a, message_id) is OutboundStatus.DELIVERED)
        sent = stored_outbound_soap(p.a, message_id).decode("utf-8")
        arrived = stored_inbound_soap(p.c, message_id).decode("utf-8")
        # A's own AckRequested aimed at nextMSH, exactly as A wrote it (ebMS2 §10.1.1: I removes it).
        start = sent.index("<eb:AckRequested", sent.index(ACTOR_NEXT_MSH) - 400)
        while ACTOR_NEXT_MSH not in sent[start : sent.index(">", start)]:
            start = sent.index("<eb:AckRequested", start + 1)
        end = sent.index(">", start) + 1
        assert sent[end - 2 : end] == "/>"
        original_minus_hop = sent[:start] + sent[end:]
        # I inserted its AckRequested(nextMSH) and mh:Via right before the Header's end tag, nothing else.
        inserted = ack_requested_element() + via_element((f"{intermediary_id(1).type}:{intermediary_id(1).value}",))
        assert inserted in arrived
        assert arrived.replace(inserted, "", 1) == original_minus_hop

    run(scenario)


# --- the rows of ebMS2 §6.6, with losses on both hops --------------------------------------------------

ROWS = {
    1: (True, True, True),
    2: (True, True, False),
    3: (True, False, True),
    4: (True, False, False),
    5: (False, True, True),
    6: (False, True, False),
    7: (False, False, True),
    8: (False, False, False),
}


@pytest.mark.parametrize("row", sorted(ROWS))
def test_each_row_of_the_reliable_messaging_combinations_holds_across_an_intermediary(row: int) -> None:
    de, e2e, hop = ROWS[row]

    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(de=de, e2e=e2e, hop=hop))
        await net.start()
        net.faults.lose_requests = net.faults.lose_answers = 0.1
        ids = [await p.a.submit_async(order(n)) for n in range(40)]
        await net.run_until(settled(p.a, ids, accept=FINAL), limit=timedelta(days=2))
        net.faults.lose_requests = net.faults.lose_answers = 0.0
        await net.advance(timedelta(hours=2))  # let every hop finish (late resends, relayed signals)
        got = received(p.c)
        sent = statuses(p.a, ids)
        assert net.network.stats["requests-lost"] > 0 and net.network.stats["answers-lost"] > 0
        if e2e:
            # Rows 1, 2, 5, 6: the To party's acknowledgment came back through I: every message delivered.
            assert sent == {OutboundStatus.DELIVERED: len(ids)}
        elif hop:
            # Rows 3 and 7, "No End-to-End notification": I acknowledged each; nothing says C got it: sent,
            # never delivered (a timer does not deliver).
            assert sent == {OutboundStatus.SENT: len(ids)}
            assert all("delivered" not in events(p.a, m) for m in ids)
        else:
            # Rows 4 and 8: no acknowledgment asked: sent once I took it (or failed), never delivered.
            assert set(sent) <= {OutboundStatus.SENT, OutboundStatus.FAILED}
        if de and (e2e or hop):
            # Rows 1-3: once and only once (row 3: the intermediary is reliable, C eliminates duplicates).
            assert {m: got[m] for m in ids} == dict.fromkeys(ids, 1)
        elif e2e or hop:
            # Rows 5-7: at least once; duplicates possible at the To party.
            assert all(got[m] >= 1 for m in ids)
        elif de:
            # Row 4: at most once.
            assert all(got[m] <= 1 for m in ids)
        else:
            # Row 8: best effort: never more often than it was transmitted.
            for m in ids:
                stored = p.a.status(m)
                assert stored is not None
                assert got[m] <= stored.state.attempts * (1 + p.hops[0].counters["forwards"])
        assert set(got) <= set(ids)
        # ebMS2 §10.1: the intermediary eliminates no duplicate; every copy that reached it was forwarded.
        assert p.hops[0].counters["forwards"] >= len({m for m in ids if got[m]})
        assert p.hops[0].counters.get("duplicates", 0) == 0

    run(scenario, seed=row)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_hundred_messages_through_two_intermediaries_with_losses_are_delivered_exactly_once(seed: int) -> None:
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1), intermediaries=2)
        await net.start()
        net.faults.lose_requests = net.faults.lose_answers = 0.1
        ids = [await p.a.submit_async(order(n)) for n in range(100)]
        await net.run_until(settled(p.a, ids, accept=FINAL), limit=timedelta(days=2))
        assert statuses(p.a, ids) == {OutboundStatus.DELIVERED: 100}
        got = received(p.c)
        assert {m: got[m] for m in ids} == dict.fromkeys(ids, 1)
        assert all(i.counters["forwards"] >= 100 for i in p.hops)
        assert p.a.counters["hop-acknowledged"] > 0  # some answers were lost: the end-to-end ack came first

    run(scenario, seed=seed)


# --- failures along the path ----------------------------------------------------------------------------


@pytest.mark.parametrize("row", [1, 2, 3, 5, 6, 7])
def test_when_c_is_down_the_intermediary_sends_a_to_a_delivery_failure_of_severity_error(row: int) -> None:
    de, e2e, hop = ROWS[row]

    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(de=de, e2e=e2e, hop=hop))
        await net.start()
        net.faults.down.add(C_URL)
        message_id = await p.a.submit_async(order(1))
        await net.run_until(lambda: status(p.a, message_id) in FINAL, limit=timedelta(days=1))
        stored = p.a.status(message_id)
        assert stored is not None and stored.state.failure is not None
        assert stored.state.status is OutboundStatus.FAILED
        # ebMS2 §6.5.7: C never took it: Error; the DeliveryFailure came from the intermediary.
        assert stored.state.failure.severity is Severity.ERROR
        assert "DeliveryFailure" in stored.state.failure.description
        assert p.hops[0].counters["delivery-failures-queued"] >= 1
        assert "delivery-failure-queued" in events(p.hops[0], message_id)
        assert received(p.c) == {}

    run(scenario, seed=row)


def test_a_forward_transmitted_but_never_acknowledged_fails_with_warning() -> None:
    async def scenario(net: TestNetwork) -> None:
        # Row 3: only the next MSH is asked; the intermediary's DeliveryFailure is all A can learn.
        p = multihop(net, routed_cpa(de=True, e2e=False, hop=True))
        await net.start()
        # C takes the message but never acknowledges a hop (an MSH that ignores AckRequested aimed at
        # nextMSH): the intermediary's transmissions reach it, its acknowledgment never comes.
        net.network.attach(C_URL, _NoHopAcks(p.c))
        message_id = await p.a.submit_async(order(1))
        await net.run_until(lambda: status(p.a, message_id) in FINAL, limit=timedelta(days=1))
        stored = p.a.status(message_id)
        assert stored is not None and stored.state.failure is not None
        # ebMS2 §6.5.7: transmitted but not acknowledged: the intermediary's DeliveryFailure, Warning.
        assert stored.state.failure.severity is Severity.WARNING
        assert "DeliveryFailure" in stored.state.failure.description
        assert received(p.c) == {message_id: 1}

    run(scenario)


class _NoHopAcks:
    """An endpoint in front of an MSH that answers every request with 202 and no body."""

    def __init__(self, msh: Msh) -> None:
        self.msh = msh

    async def handle_http(self, body: bytes, content_type: str | None, *, size: int | None = None) -> HttpReply:
        await self.msh.handle_http(body, content_type, size=size)
        return HttpReply(202, None, b"")


def test_a_later_delivery_failure_is_ignored_once_the_end_to_end_acknowledgment_came() -> None:
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        await net.start()
        message_id = await p.a.submit_async(order(1))
        await net.run_until(lambda: status(p.a, message_id) is OutboundStatus.DELIVERED)
        # The intermediary reports a failure afterwards (its own view was stale): A ignores it (§6.5.7 note).
        from msh.ebms.envelope import serialise_envelope
        from msh.ebms.model import Envelope, Party, PartyId
        from msh.engine.intermediary import delivery_failure
        from msh.errors import ErrorCode, Issue

        with p.c.store.transaction(readonly=True) as tx:
            record = tx.find_inbound(message_id)
        assert record is not None
        with p.c.store.open_blob(record.body_blob_id) as blob:
            forwarded = parse_message(blob.read(), record.content_type, mode=ParseMode.LENIENT)
        forwarded.close()
        i = intermediary_id(1)
        failure = delivery_failure(
            forwarded.envelope,
            Issue(ErrorCode.DELIVERY_FAILURE, Severity.ERROR, "late"),
            own_party=Party((PartyId(i.value, i.type),)),
            message_id="late-df@i1.example",
            now=net.clock(),
        )
        assert isinstance(failure, Envelope)
        reply = await p.a.handle_http(serialise_envelope(failure), "text/xml; charset=utf-8")
        assert reply.status in (200, 202)
        assert status(p.a, message_id) is OutboundStatus.DELIVERED

    run(scenario)


def test_a_forwarded_message_is_resent_end_to_end_until_the_to_partys_acknowledgment() -> None:
    # ebMS2 §6.5.4: "The Sending MSH MUST resend the original message if an Acknowledgment Message has been
    # requested but has not been received"; the intermediary's acknowledgment is not the one requested of
    # the To party (§10.1.3: "MUST differentiate, based upon the actor").
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        await net.start()
        net.faults.down.add(C_URL)
        message_id = await p.a.submit_async(order(1))
        await net.settle()
        assert status(p.a, message_id) is OutboundStatus.FORWARDED
        shown = p.a.status(message_id)
        assert shown is not None
        assert status_line(shown).startswith(
            f"{message_id}: forwarded (an intermediary acknowledged it; waiting for the To party's acknowledgment), "
            "1 transmission(s)"
        )
        at_i = p.hops[0].status(message_id)
        assert at_i is not None and "forwarded for " in status_line(at_i)
        transmissions = p.a.counters["transmissions"]
        await net.advance(timedelta(seconds=70))  # past the agreement's RetryInterval (PT1M), before I gives up
        # A resent it end to end meanwhile, and it stayed forwarded (each copy forwarded again by I, §10.1).
        assert p.a.counters["transmissions"] > transmissions
        assert status(p.a, message_id) is OutboundStatus.FORWARDED
        net.faults.down.discard(C_URL)
        await net.run_until(lambda: status(p.a, message_id) is OutboundStatus.DELIVERED)
        assert received(p.c) == {message_id: 1}  # C eliminated the duplicates (§6.5.6)

    run(scenario)


def test_a_delivery_failure_that_cannot_reach_the_from_party_is_logged_at_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # ebMS2 §6.5.7: when the DeliveryFailure itself cannot be delivered, the From party "MUST be informed of the
    # problem by other means": the operator is told at error level (a failed signal of another kind stays a warning).
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1), hop_retries=1)
        await net.start()
        net.faults.down.add(C_URL)
        message_id = await p.a.submit_async(order(1))
        await net.settle()
        net.faults.down.add("http://a.example/msh")
        await net.run_until(lambda: p.hops[0].counters["signal-failed"] > 0)
        assert "delivery-failure-queued" in events(p.hops[0], message_id)
        assert "signal-failed" in [k for k in events(p.hops[0], "i1-2@testnet")]

    with caplog.at_level(logging.WARNING, logger="msh"):
        run(scenario)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert errors[0].startswith("DeliveryFailure i1-2@testnet about a-1@testnet for ")
    assert errors[0].endswith("tell the From party by other means")


# --- refusals --------------------------------------------------------------------------------------------


def test_no_route_to_the_to_party_is_reported_to_the_sender() -> None:
    async def scenario(net: TestNetwork) -> None:
        back = Route("i1-to-a", A.value, "http://a.example/msh", to_party_id_type=A.type)
        p = multihop(net, routed_cpa(**ROW_1), intermediary_routes={1: (back,)})
        await net.start()
        message_id = await p.a.submit_async(order(1))
        await net.run_until(lambda: status(p.a, message_id) in FINAL)
        stored = p.a.status(message_id)
        assert stored is not None and stored.state.failure is not None
        assert stored.state.failure.severity is Severity.ERROR
        assert "no route" in stored.state.failure.description
        assert received(p.c) == {}
        # The intermediary journals the refusal with the message's facts from its header (it stored nothing).
        with p.hops[0].store.transaction(readonly=True) as tx:
            [refusal] = [e for e in tx.message_events(message_id, limit=100) if e.kind == "rejected"]
        assert (refusal.role, refusal.cause, refusal.severity) == ("intermediary", "DeliveryFailure", "Error")
        assert refusal.cpa_id is not None and refusal.to_party is not None and refusal.action is not None

    run(scenario)


def test_a_routing_loop_is_detected_and_refused() -> None:
    async def scenario(net: TestNetwork) -> None:
        # i1 sends C's messages to i2, and i2 back to i1.
        i1, i2 = intermediary_id(1), intermediary_id(2)
        loop1 = (
            Route("i1-to-c", C.value, intermediary_url(2), to_party_id_type=C.type, next_hop_party=(i2.value, i2.type)),
            Route("i1-to-a", A.value, "http://a.example/msh", to_party_id_type=A.type),
        )
        loop2 = (
            Route("i2-to-c", C.value, intermediary_url(1), to_party_id_type=C.type, next_hop_party=(i1.value, i1.type)),
            Route("i2-to-a", A.value, intermediary_url(1), to_party_id_type=A.type, next_hop_party=(i1.value, i1.type)),
        )
        p = multihop(net, routed_cpa(**ROW_1), intermediaries=2, intermediary_routes={1: loop1, 2: loop2})
        await net.start()
        message_id = await p.a.submit_async(order(1))
        await net.run_until(lambda: status(p.a, message_id) in FINAL)
        stored = p.a.status(message_id)
        assert stored is not None and stored.state.failure is not None
        assert "routing loop" in stored.state.failure.description
        assert received(p.c) == {}
        # Not circling: i1 forwarded the message once (and then the error about it, back to A).
        assert events(p.hops[0], message_id).count("forward") == 1

    run(scenario)


def test_every_signal_from_c_travels_back_through_the_intermediary() -> None:
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        await net.start()
        message_id = await p.a.submit_async(order(1))
        await net.run_until(lambda: status(p.a, message_id) is OutboundStatus.DELIVERED)
        i = p.hops[0]
        with i.store.transaction(readonly=True) as tx:
            relayed = [r for r in tx.list_outbound(kind=OutboundKind.FORWARD, limit=100) if r.message_id != message_id]
        # The end-to-end acknowledgment from C to A was stored and forwarded by the intermediary.
        assert [r.action for r in relayed] == ["Acknowledgment"]
        # ebMS2 §6.3.1.4: a signal asks for no acknowledgment: A's endpoint took it, and that is all: sent.
        assert relayed[0].state.status is OutboundStatus.SENT
        # C sent it along its route, stored, as a signal of its own.
        with p.c.store.transaction(readonly=True) as tx:
            signals = tx.list_outbound(kind=OutboundKind.SIGNAL, limit=100)
        assert [s.action for s in signals] == ["Acknowledgment"]
        with p.a.store.transaction(readonly=True) as tx:
            kinds = [e.kind for e in tx.message_events(message_id, direction=Direction.OUTBOUND, limit=100)]
        assert "delivered" in kinds

    run(scenario)


# --- asynchronous hop acknowledgments (ebMS2 §10.1.3) ----------------------------------------------------


def _async_hop_ack(i: Msh, message_id: str, sender: Party) -> bytes:
    """The Acknowledgment aimed at nextMSH that ``sender`` returns for I's forward of ``message_id``, in a
    message of its own (as another implementation may send it, not on the connection)."""
    forward = i.status(message_id)
    assert forward is not None
    with i.store.open_blob(forward.body_blob_id) as blob:
        parsed = parse_message(blob.read(), forward.content_type, mode=ParseMode.LENIENT)
    parsed.close()
    ack = hop_acknowledgment(parsed.envelope, own_party=sender, message_id=f"hop-ack-{message_id}", now=i.clock())
    return serialise_envelope(ack)


def test_an_asynchronous_hop_acknowledgment_ends_the_intermediarys_forward() -> None:
    # ebMS2 §10.1.3: the Acknowledgment aimed at nextMSH is the intermediary's "and act accordingly": the forward
    # is done (§10.1.3 2: "mark the persisted message as delivered"), its resends stop, no DeliveryFailure
    # follows, and the acknowledgment is not sent on to A.
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        await net.start()
        net.faults.lose_answers_from[C_URL] = 1.0  # nothing C answers on the connection reaches I
        message_id = await p.a.submit_async(order(1))
        await net.settle()
        i = p.hops[0]
        assert i.status(message_id).state.status is OutboundStatus.AWAITING_ACK  # type: ignore[union-attr]
        body = _async_hop_ack(i, message_id, Party((PartyId(C.value, C.type),)))
        reply = await i.handle_http(body, SOAP_CONTENT_TYPE)
        assert reply.status == 202
        forward = i.status(message_id)
        assert forward is not None and forward.state.status is OutboundStatus.DELIVERED
        assert forward.state.evidence is Evidence.HOP_ACKNOWLEDGMENT
        assert i.status(f"hop-ack-{message_id}") is None  # taken, not stored to be forwarded
        resent = events(i, message_id).count("resent")
        await net.advance(timedelta(minutes=5))
        assert events(i, message_id).count("resent") == resent  # no resend after the hop acknowledgment
        assert "delivery-failure-queued" not in events(i, message_id)

    run(scenario)


def test_a_hop_acknowledgment_from_a_party_that_is_not_the_next_hop_is_ignored() -> None:
    # ebMS2 §10.1.3 and docs/design.md §7: only the next MSH the forward went to may acknowledge it.
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(**ROW_1))
        await net.start()
        net.faults.lose_answers_from[C_URL] = 1.0
        message_id = await p.a.submit_async(order(1))
        await net.settle()
        i = p.hops[0]
        stranger = Party((PartyId("999000999", "urn:duns"),))
        await i.handle_http(_async_hop_ack(i, message_id, stranger), SOAP_CONTENT_TYPE)
        assert i.status(message_id).state.status is OutboundStatus.AWAITING_ACK  # type: ignore[union-attr]
        assert i.counters["foreign-signals"] == 1

    run(scenario)


# --- SyncReply across an intermediary (ebMS2 §4.3, §10) -------------------------------------------------


@pytest.mark.parametrize("intermediaries", [1, 2])
def test_an_agreement_with_synchronous_signals_works_across_intermediaries(intermediaries: int) -> None:
    # ebMS2 §4.3: "If there are intermediary nodes ... it is necessary to provide some means by which the sender
    # of a message can indicate it is expecting a response so the intermediary nodes can keep the connection
    # open"; §10: an element aimed at the next node that must "continue to appear on the SOAP message destined
    # to the Next SOAP node ... must be reapplied". mshSignalsOnly: C's acknowledgment comes back on the
    # connection, through every intermediary.
    async def scenario(net: TestNetwork) -> None:
        cpa = routed_cpa(de=True, e2e=True, hop=False, sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY)
        p = multihop(net, cpa, intermediaries=intermediaries)
        await net.start()
        ids = [await p.a.submit_async(order(n)) for n in range(5)]
        await net.run_until(settled(p.a, ids, accept=FINAL))
        assert statuses(p.a, ids) == {OutboundStatus.DELIVERED: 5}
        assert received(p.c) == dict.fromkeys(ids, 1)
        # Nothing came back asynchronously: every acknowledgment rode the connections back.
        assert all(i.counters["sync-replies-relayed"] == 5 for i in p.hops)
        assert p.c.counters.get("signals-routed", 0) == 0
        assert p.c.counters.get("rejected", 0) == 0  # the SyncReply the agreement asks for was there at C
        # The SyncReply C got was the one I reapplied: C refused nothing as Inconsistent (ebMS2 §6.4.7).
        assert "SyncReply" in stored_inbound_soap(p.c, ids[0]).decode("utf-8")

    run(scenario)


def test_without_an_answer_in_time_the_previous_hop_gets_an_empty_one_and_resends() -> None:
    # ebMS2 §4.3: the connection is kept open "in expectation of a response"; when none comes, A's own
    # end-to-end resends (§6.5.4) carry the message on.
    async def scenario(net: TestNetwork) -> None:
        cpa = routed_cpa(de=True, e2e=True, hop=False, sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY)
        p = multihop(net, cpa)
        await net.start()
        net.faults.lose_answers_from[C_URL] = 1.0  # C's answers never reach I
        message_id = await p.a.submit_async(order(1))
        await net.settle()
        assert status(p.a, message_id) is OutboundStatus.AWAITING_ACK
        net.faults.lose_answers_from[C_URL] = 0.0
        await net.run_until(lambda: status(p.a, message_id) is OutboundStatus.DELIVERED)
        assert received(p.c) == {message_id: 1}

    run(scenario)
