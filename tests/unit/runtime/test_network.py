"""Reliability scenarios on the test network (msh.testing.network): partners A and B of the sample
agreement in one process, memory stores, the in-memory transport, one fake clock; no socket, no sleep.

Each scenario checks the promise of docs/design.md §5 from the stores: every message A sent is acknowledged
or reported failed with the right severity, and B's application received each one exactly once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tomllib
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta
from functools import cache
from pathlib import Path

import pytest

from msh.engine import OutboundStatus
from msh.errors import ConfigurationError, ErrorCode, Severity
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.msh import Msh
from msh.testing.network import TestNetwork

CONFIG = Path(__file__).resolve().parents[3] / "samples" / "config"
B_PARTY = ("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")
B_URL = "https://127.0.0.1:8082/msh"
SERVICE = "urn:example:services:ordering"


@cache
def settings(name: str) -> Settings:
    path = CONFIG / f"party-{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    return settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})


def order(n: int) -> Submission:
    return Submission(B_PARTY, SERVICE, "NewOrder", (Payload(f"<order n='{n}'/>".encode(), "application/xml"),))


def run(scenario: Callable[[TestNetwork, Msh, Msh], Awaitable[None]], *, seed: int = 1) -> None:
    async def main() -> None:
        net = TestNetwork(seed=seed)
        a, b = net.add("a", settings("a")), net.add("b", settings("b"))
        await net.start()
        try:
            await scenario(net, a, b)
        finally:
            await net.close()

    asyncio.run(main())


def statuses(msh: Msh, ids: list[str]) -> Counter[OutboundStatus]:
    found: Counter[OutboundStatus] = Counter()
    for message_id in ids:
        stored = msh.status(message_id)
        assert stored is not None
        found[OutboundStatus(stored.state.status.value)] += 1
    return found


def final(msh: Msh, ids: list[str]) -> Callable[[], bool]:
    def check() -> bool:
        counted = statuses(msh, ids)
        return counted[OutboundStatus.DELIVERED] + counted[OutboundStatus.FAILED] == len(ids)

    return check


def delivered_once(b: Msh, ids: list[str]) -> None:
    seen = Counter(entry.message_id for entry in b.inbox(None, limit=10_000))
    assert {m: seen[m] for m in ids} == dict.fromkeys(ids, 1)
    assert set(seen) == set(ids)


def test_a_message_is_acknowledged_and_delivered_once() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.settle()
        assert statuses(a, [message_id]) == {OutboundStatus.DELIVERED: 1}
        delivered_once(b, [message_id])
        assert net.network.stats["delivered"] == 1

    run(scenario)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_hundred_messages_over_a_lossy_network_are_each_delivered_exactly_once(seed: int) -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.lose_requests = net.faults.lose_answers = 0.1
        ids = [await a.submit_async(order(n)) for n in range(100)]
        await net.run_until(final(a, ids))
        assert statuses(a, ids) == {OutboundStatus.DELIVERED: 100}
        delivered_once(b, ids)
        assert net.network.stats["requests-lost"] > 0 and net.network.stats["answers-lost"] > 0
        assert b.counters["duplicates"] > 0  # lost answers: the resends were duplicates, answered from the store
        assert a.counters["resent"] > 0

    run(scenario, seed=seed)


def test_delays_and_reordering_change_nothing() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.delay = timedelta(seconds=1)
        net.faults.reorder = True
        ids = [await a.submit_async(order(n)) for n in range(30)]
        await net.run_until(final(a, ids))
        assert statuses(a, ids) == {OutboundStatus.DELIVERED: 30}
        delivered_once(b, ids)

    run(scenario)


def test_a_partner_down_for_a_while_gets_the_message_once_it_is_back() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.down.add(B_URL)
        message_id = await a.submit_async(order(1))
        await net.advance(timedelta(seconds=10))  # the first send and a resend or two fail
        assert statuses(a, [message_id]) == {OutboundStatus.AWAITING_ACK: 1}
        net.faults.down.clear()
        await net.run_until(final(a, [message_id]))
        assert statuses(a, [message_id]) == {OutboundStatus.DELIVERED: 1}
        delivered_once(b, [message_id])
        failed = [t for t in a.attempts(message_id) if t.error]
        assert failed and all("connection refused" in (t.error or "") for t in failed)

    run(scenario)


def test_a_partner_down_past_the_retries_is_a_delivery_failure_of_severity_error() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.down.add(B_URL)
        failures = []
        a.on_failed = lambda message_id, issue: failures.append((message_id, issue))
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, [message_id]))
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.FAILED
        assert stored.state.attempts == 6  # the first transmission and Retries (5) resends
        [(failed_id, issue)] = failures
        assert failed_id == message_id
        assert issue.error_code is ErrorCode.DELIVERY_FAILURE and issue.severity is Severity.ERROR
        assert b.inbox(None) == []

    run(scenario)


def test_answers_lost_every_time_fail_the_message_yet_the_receiver_delivered_it_once() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.lose_answers = 1.0  # B gets every copy; A never hears back
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, [message_id]))
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.FAILED
        # ebMS2 §6.5.7: "Warning if the message was transmitted, but an Acknowledgment Message was not
        # received": no answer came, yet every request left A: Warning, and A's application is told it may have
        # been delivered (it was: an Error here would invite a duplicate business transaction).
        failure = stored.state.failure
        assert failure is not None and failure.severity is Severity.WARNING
        assert "may have been delivered" in failure.description
        delivered_once(b, [message_id])  # yet it did arrive, once; the resends were duplicates
        assert b.counters["duplicates"] == 5

    run(scenario)


def test_a_sender_killed_after_committing_resumes_from_its_store() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.lose_next_requests = 1
        message_id = await a.submit_async(order(1))
        await net.settle()  # the first transmission was lost
        a = await net.restart("a")  # as kill -9: nothing of the old process's memory survives
        await net.run_until(final(a, [message_id]))
        assert statuses(a, [message_id]) == {OutboundStatus.DELIVERED: 1}
        delivered_once(b, [message_id])

    run(scenario)


def test_a_receiver_killed_after_storing_answers_the_resend_from_its_store() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.lose_next_answers = 1  # B stored the message and acknowledged it; the answer was lost
        message_id = await a.submit_async(order(1))
        await net.settle()
        b = await net.restart("b")
        await net.run_until(final(a, [message_id]))
        assert statuses(a, [message_id]) == {OutboundStatus.DELIVERED: 1}
        delivered_once(b, [message_id])
        assert b.counters["duplicates"] == 1

    run(scenario)


def journal(msh: Msh) -> list[tuple[str, str | None, str | None, str | None, str | None]]:
    """(kind, message id, role, severity, cause) of every event of ``msh``'s journal, in order."""
    with msh.store.transaction(readonly=True) as tx:
        events = tx.list_events(0, limit=10_000)
    return [(e.kind, e.message_id, e.role, e.severity, e.cause) for e in events]


def test_a_message_whose_time_to_live_passes_is_journaled_expired_beside_its_delivery_failure() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.down.add(B_URL)
        # ebMS2 §6.4.5: the TimeToLive leaves room for the retries (Retries 5 every PT5S: 30 s) ...
        ttl = net.clock() + timedelta(seconds=31)
        message_id = await a.submit_async(
            Submission(B_PARTY, SERVICE, "NewOrder", (Payload(b"<order/>", "application/xml"),), time_to_live=ttl)
        )
        await net.settle()
        # ... but the process was suspended past it (the clock jumped; the timer fires late).
        net.clock.advance(timedelta(seconds=40))
        await net.run_until(final(a, [message_id]))
        ended = [e for e in journal(a) if e[0] in ("failed", "expired")]
        # ebMS2 §3.1.6.4: past its TimeToLive the message is given up, and the journal says why (Error: the one
        # transmission was refused, nothing reached B).
        assert ended == [
            ("failed", message_id, "sender", "Error", "DeliveryFailure"),
            ("expired", message_id, "sender", "Error", "TimeToLiveExpired"),
        ]


def test_a_message_that_reaches_the_receiver_past_its_time_to_live_is_refused_and_journaled_expired() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.delay = timedelta(seconds=32)  # each transmission arrives after the TimeToLive below
        ttl = net.clock() + timedelta(seconds=31)  # ebMS2 §6.4.5: room for Retries 5 every PT5S
        message_id = await a.submit_async(
            Submission(B_PARTY, SERVICE, "NewOrder", (Payload(b"<order/>", "application/xml"),), time_to_live=ttl)
        )
        await net.run_until(final(a, [message_id]))  # A gives up at the TimeToLive
        await net.advance(timedelta(seconds=35))  # the transmissions still on the way reach B
        assert b.inbox(None) == []
        refused = [e for e in journal(b) if e[1] == message_id]
        # ebMS2 §3.1.6.4: B refuses it with TimeToLiveExpired and records it as expired.
        assert refused[:2] == [
            ("rejected", message_id, "receiver", "Error", "TimeToLiveExpired"),
            ("expired", message_id, "receiver", "Error", "TimeToLiveExpired"),
        ]
        # A's one transmission was still on its way when the TimeToLive passed (ebMS2 §6.4.4: no resend before
        # it has ended): A gives up at the TimeToLive, expired, with Warning: it was transmitted and may have
        # arrived (ebMS2 §6.5.7, "transmitted").
        assert "expired" in [e[0] for e in journal(a) if e[1] == message_id]
        stored = a.status(message_id)
        assert stored is not None and stored.state.attempts == 1
        failure = stored.state.failure
        assert failure is not None and failure.severity is Severity.WARNING

    run(scenario)


def test_a_to_party_id_of_another_type_is_answered_as_the_agreement_answers_not_as_undeliverable() -> None:
    # ebMS2 §3.1.1.1, §3.1.2: a To PartyId that is not a PartyId of the agreement's party is Inconsistent
    # (the check's answer); B is not an intermediary: "no route" (a DeliveryFailure) would misstate it.
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        to_b = f'type="{B_PARTY[1]}">{B_PARTY[0]}<'.encode()

        def retype(url: str, body: bytes) -> bytes:
            return body.replace(to_b, f'type="urn:example:other-scheme">{B_PARTY[0]}<'.encode(), 1)

        net.faults.tamper = retype
        message_id = await a.submit_async(order(1))
        await net.run_until(lambda: a.status(message_id).state.status is OutboundStatus.FAILED)  # type: ignore[union-attr]
        failure = a.status(message_id).state.failure  # type: ignore[union-attr]
        assert failure is not None and failure.severity is Severity.ERROR
        assert "Inconsistent at //Header/MessageHeader/To/PartyId" in failure.description
        assert "DeliveryFailure at" not in failure.description and "no route" not in failure.description
        assert b.inbox(None) == []

    run(scenario)


def test_a_time_to_live_that_leaves_no_room_for_the_retries_is_refused_at_submission() -> None:
    # ebMS2 §6.4.5: "For a reliably delivered message, TimeToLive MUST conform to: TimeToLive > Timestamp +
    # ((Retries + 1) * RetryInterval)". The sample agreement: Retries 5, RetryInterval PT5S: 30 s.
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        now = net.clock()
        early = dataclasses.replace(order(1), time_to_live=now + timedelta(seconds=30))
        with pytest.raises(ConfigurationError, match=r"must be after Timestamp \+ \(Retries \+ 1\) x RetryInterval"):
            await a.submit_async(early)
        assert a.counters["submitted"] == 0
        fine = dataclasses.replace(order(2), time_to_live=now + timedelta(seconds=31))
        message_id = await a.submit_async(fine)
        await net.run_until(lambda: a.status(message_id).state.status is OutboundStatus.DELIVERED)  # type: ignore[union-attr]

    run(scenario)


def test_listeners_and_the_applications_callback_are_both_told_of_a_message() -> None:
    # The application interfaces listen for arrivals; the application keeps on_message its own to set, even
    # after they started listening (it once replaced their wrapper and silenced them).
    told: list[str] = []

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        b.listen_for_messages(lambda entry_id, message_id: told.append(f"listener {message_id}"))
        b.on_message = lambda entry_id, message_id: told.append(f"application {message_id}")
        message_id = await a.submit_async(order(1))
        await net.run_until(lambda: bool(told) and len(told) >= 2)
        assert told == [f"listener {message_id}", f"application {message_id}"]

    run(scenario)
