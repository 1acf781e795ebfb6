"""MessageOrder (ebMS2 §9) on the test network: A and B under the sample agreement with message order
guaranteed (tests/support/agreement_files.with_message_order), memory stores, one fake clock.

Each expected answer comes from the text of §9 and §9.1.1 (quoted at each test); what B's application is
given is what B's ``on_message`` callback and inbox show.
"""

from __future__ import annotations

import dataclasses
import random
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

from msh.ebms.message import parse_message
from msh.ebms.model import Envelope, SequenceStatus
from msh.engine import OutboundStatus
from msh.errors import ConfigurationError
from msh.runtime.attempts import failure_despite_acknowledgment
from msh.runtime.compose import Payload, Submission
from msh.runtime.msh import Msh
from msh.store.api import Direction, InboxState
from msh.testing.network import TestNetwork
from tests.support.agreement_files import with_message_order
from tests.support.secure_network import ACTION, PARTY_B, SERVICE, events, run_pair, settings, stored_body

ORDERED = with_message_order()
SEQUENCE_NUMBER = "//Header/MessageOrder/SequenceNumber"


def order(n: int, conversation: str = "conv-1") -> Submission:
    body = f"<order n='{n}'/>".encode()
    return Submission(PARTY_B, SERVICE, ACTION, (Payload(body, "application/xml"),), conversation_id=conversation)


def sent_envelope(a: Msh, message_id: str) -> Envelope:
    stored = a.status(message_id)
    assert stored is not None
    message = parse_message(stored_body(a, message_id), stored.content_type)
    message.close()
    return message.envelope


def run(scenario: Callable[[TestNetwork, Msh, Msh], Awaitable[None]], *, max_held: int | None = None) -> None:
    b = settings("b")
    if max_held is not None:
        b = dataclasses.replace(b, receiving=dataclasses.replace(b.receiving, max_held_messages=max_held))
    run_pair(scenario, cpa=ORDERED, b=b)


def given_to_application(b: Msh) -> list[str]:
    """B's application hears of each message it may take, in this order (its on_message callback)."""
    given: list[str] = []
    b.on_message = lambda _entry, message_id: given.append(message_id)
    return given


def statuses(a: Msh, ids: list[str]) -> dict[str, OutboundStatus]:
    found = {}
    for message_id in ids:
        stored = a.status(message_id)
        assert stored is not None
        found[message_id] = stored.state.status
    return found


def drop_message(message_id: str) -> Callable[[str, bytes], bool]:
    """Every transmission of ``message_id`` is lost on the way (it never arrives)."""
    marker = f">{message_id}<".encode()
    return lambda _url, body: marker in body


def test_each_message_carries_its_sequence_number_reset_first_then_continue() -> None:
    # ebMS2 §9.1.1: "The SequenceNumber element MUST be included in the first message from the Sending MSH
    # within the conversation: it MUST be set to 0 and the status attribute MUST be set to Reset"; "The
    # value of SequenceNumber ... MUST be incremented by 1 for each subsequent message"; "In all other
    # cases ... the status attribute MUST be set to Continue". §9.1: "DuplicateElimination MUST also be
    # present" and "SyncReply MUST NOT be present".
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        first = [await a.submit_async(order(n)) for n in range(3)]
        other = [await a.submit_async(order(n, "conv-2")) for n in range(2)]
        await net.run_until(lambda: set(statuses(a, first + other).values()) == {OutboundStatus.DELIVERED})
        for ids in (first, other):
            envelopes = [sent_envelope(a, m) for m in ids]
            orders = [e.message_order for e in envelopes]
            assert [(o.sequence_number, o.status) for o in orders if o is not None] == [
                (0, SequenceStatus.RESET),
                *((n, SequenceStatus.CONTINUE) for n in range(1, len(ids))),
            ]
            for envelope in envelopes:
                assert envelope.message_header is not None and envelope.message_header.duplicate_elimination
                assert envelope.sync_reply is None and envelope.ack_requested
        with b.store.transaction(readonly=True) as tx:
            assert [tx.find_inbound(m).sequence_number for m in first] == [0, 1, 2]  # type: ignore[union-attr]

    run(scenario)


def test_a_submission_asking_to_leave_out_what_message_order_needs_is_refused() -> None:
    # ebMS2 §9: "Reliable Messaging MUST be used when a MessageOrder element is present"; §9.1:
    # "DuplicateElimination MUST also be present".
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        with pytest.raises(ConfigurationError, match="guarantees message order"):
            await a.submit_async(dataclasses.replace(order(1), duplicate_elimination=False))
        with pytest.raises(ConfigurationError, match="guarantees message order"):
            await a.submit_async(dataclasses.replace(order(1), ack_requested=False))
        with a.store.transaction(readonly=True) as tx:
            assert tx.sequence_counter("cpa-demo-a-b", "conv-1") is None  # nothing was numbered

    run(scenario)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lost_and_reordered_messages_reach_the_application_in_sequence_order_once(seed: int) -> None:
    # ebMS2 §9.1.1: "A MSH that receives a message with a SequenceNumber element MUST NOT pass the message
    # to an application until all the messages with a lower SequenceNumber have been passed to the
    # application." §6.5.3/§6.5.2: each message delivered once.
    rng = random.Random(seed)

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        given = given_to_application(b)
        net.faults.reorder = True
        net.faults.lose_requests = 0.2
        net.faults.lose_answers = 0.2
        sent: dict[str, list[str]] = defaultdict(list)
        for n in range(60):
            conversation = f"conv-{rng.randrange(3)}"
            sent[conversation].append(await a.submit_async(order(n, conversation)))
            if rng.random() < 0.3:
                await net.settle()
        ids = [m for group in sent.values() for m in group]
        await net.run_until(lambda: set(statuses(a, ids).values()) == {OutboundStatus.DELIVERED})
        net.faults.lose_requests = net.faults.lose_answers = 0.0
        await net.advance(timedelta(minutes=5))
        assert sorted(given) == sorted(ids)  # each once, none left held
        by_conversation: dict[str, list[str]] = defaultdict(list)
        with b.store.transaction(readonly=True) as tx:
            for message_id in given:
                stored = tx.find_inbound(message_id)
                assert stored is not None
                by_conversation[stored.conversation_id].append(message_id)
        assert dict(by_conversation) == dict(sent)  # in each conversation, in the order A numbered them
        # The inbox offers them in the same order (what an application taking them one by one gets).
        offered = [e.message_id for e in b.inbox(InboxState.NEW, limit=1000)]
        for conversation, group in sent.items():
            assert [m for m in offered if m in group] == group, conversation
        assert b.core.counters["held"] > 0  # the faults did put messages out of order

    run(scenario)


def test_a_held_message_waits_for_the_missing_one_and_follows_it() -> None:
    # ebMS2 §9.1.1: a message with a higher number is kept (and acknowledged, §6.5.3: it was persisted)
    # but not passed on until the lower ones have been.
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        given = given_to_application(b)
        first = await a.submit_async(order(0))
        await net.settle()
        late = await a.submit_async(order(1))
        net.faults.drop = drop_message(late)
        after = [await a.submit_async(order(n)) for n in (2, 3)]
        await net.settle()
        assert given == [first]
        assert statuses(a, after) == dict.fromkeys(after, OutboundStatus.DELIVERED)  # B has them, held
        held = b.inbox(InboxState.HELD, limit=10)
        assert [e.message_id for e in held] == after
        net.faults.drop = None
        await net.run_until(lambda: a.status(late).state.status is OutboundStatus.DELIVERED)  # type: ignore[union-attr]
        assert given == [first, late, *after]
        kinds = [e.kind for e in events(b, after[0], Direction.INBOUND)]
        assert kinds[:2] == ["received", "released"]

    run(scenario)


def test_a_gap_that_never_fills_ends_in_delivery_failures_and_a_new_sequence() -> None:
    # ebMS2 §9: "If a sequence is sent and one message fails to arrive at the To Party MSH, all subsequent
    # messages will also fail to be presented to the To Party Application"; §9.1.1: when the "limit for
    # saved out-of-sequence messages is reached, then the Receiving MSH MUST indicate a delivery failure to
    # the Sending MSH with errorCode set to DeliveryFailure and severity set to Error"; the next message
    # after a reset is "First message after resetting SequenceNumber information": 0, Reset.
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        given = given_to_application(b)
        first = await a.submit_async(order(0))
        await net.settle()
        lost = await a.submit_async(order(1))
        net.faults.drop = drop_message(lost)
        held = [await a.submit_async(order(n)) for n in (2, 3, 4)]
        await net.run_until(lambda: a.status(lost).state.status is OutboundStatus.FAILED)  # type: ignore[union-attr]
        await net.run_until(lambda: not b.inbox(InboxState.HELD, limit=10))
        await net.settle()
        assert given == [first]
        with b.store.transaction(readonly=True) as tx:
            states = [tx.inbox_entry(tx.find_inbound(m).id).state for m in held]  # type: ignore[union-attr]
        assert states == [InboxState.ABANDONED] * 3
        for message_id in held:
            # B told A about each held message: an ErrorList naming it, DeliveryFailure, Error.
            errors = [e for e in events(a, message_id, Direction.OUTBOUND) if e.kind == "error-received"]
            assert errors, message_id
            (error,) = errors[0].detail["errors"]  # type: ignore[index]
            assert (error["errorCode"], error["severity"], error["location"]) == (
                "DeliveryFailure",
                "Error",
                SEQUENCE_NUMBER,
            )
            # ebMS2 §6.5.7 note: after the To party's Acknowledgment A "should ignore all other DeliveryFailure":
            # the status stays delivered, and what B reported is shown with it.
            assert statuses(a, [message_id]) == {message_id: OutboundStatus.DELIVERED}
            reported = failure_despite_acknowledgment(True, a.attempts(message_id))
            assert reported is not None and reported.location == SEQUENCE_NUMBER
        # A starts the sequence again: the next message is 0, Reset, and B passes it on.
        again = await a.submit_async(order(5))
        await net.run_until(lambda: a.status(again).state.status is OutboundStatus.DELIVERED)  # type: ignore[union-attr]
        message_order = sent_envelope(a, again).message_order
        assert message_order is not None
        assert (message_order.sequence_number, message_order.status) == (0, SequenceStatus.RESET)
        assert given == [first, again]

    run(scenario)


def test_a_continued_broken_sequence_is_refused_with_a_delivery_failure() -> None:
    # ebMS2 §9: after a message fails to arrive "all subsequent messages will also fail to be presented";
    # §9.1.1: beyond B's limit of held messages, DeliveryFailure with severity Error.
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        given = given_to_application(b)
        first = await a.submit_async(order(0))
        await net.settle()
        lost = await a.submit_async(order(1))
        net.faults.drop = drop_message(lost)
        held = [await a.submit_async(order(n)) for n in (2, 3)]
        await net.settle()
        over = await a.submit_async(order(4))
        await net.run_until(lambda: a.status(over).state.status is OutboundStatus.FAILED)  # type: ignore[union-attr]
        stored = a.status(over)
        assert stored is not None and stored.state.failure is not None
        assert stored.state.failure.error_code.value == "DeliveryFailure"
        (refusal,) = [e for e in events(a, over, Direction.OUTBOUND) if e.kind == "error-received"]
        (error,) = refusal.detail["errors"]  # type: ignore[index]
        assert (error["errorCode"], error["severity"], error["location"]) == (
            "DeliveryFailure",
            "Error",
            SEQUENCE_NUMBER,
        )
        assert [e.message_id for e in b.inbox(InboxState.HELD, limit=10)] == held
        assert given == [first]
        # A's sequence is broken: a new message waits until every earlier one is final (ebMS2 §9.1.1: "A
        # Sending MSH MUST wait before resetting the SequenceNumber ... until it has received confirmation
        # of all the messages previously sent for the conversation").
        with pytest.raises(ConfigurationError, match="still under way"):
            await a.submit_async(order(5))
        await net.run_until(lambda: a.status(lost).state.status is OutboundStatus.FAILED)  # type: ignore[union-attr]
        again = await a.submit_async(order(5))
        await net.run_until(lambda: a.status(again).state.status is OutboundStatus.DELIVERED)  # type: ignore[union-attr]
        assert given == [first, again]
        # ebMS2 §9.1.1 case 2: the Reset abandoned what the old sequence held; A hears of each (it had them
        # acknowledged) and shows it beside their delivered status.
        assert not b.inbox(InboxState.HELD, limit=10)
        await net.settle()
        for message_id in held:
            reported = failure_despite_acknowledgment(True, a.attempts(message_id))
            assert reported is not None and "started the sequence again" in (reported.description or "")

    run(scenario, max_held=2)
