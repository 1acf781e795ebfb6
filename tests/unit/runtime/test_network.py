"""Reliability scenarios on the test network (msh.testing.network): partners A and B of the sample
agreement in one process, memory stores, the in-memory transport, one fake clock; no socket, no sleep.

Each scenario checks the promise of DESIGN.md §5 from the stores: every message A sent is acknowledged
or reported failed with the right severity, and B's application received each one exactly once.
"""

from __future__ import annotations

import asyncio
import tomllib
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta
from functools import cache
from pathlib import Path

import pytest

from msh.engine import OutboundStatus
from msh.errors import ErrorCode, Severity
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
        ttl = net.clock() + timedelta(seconds=12)  # Retries 5 every PT5S would take 25 s
        message_id = await a.submit_async(
            Submission(B_PARTY, SERVICE, "NewOrder", (Payload(b"<order/>", "application/xml"),), time_to_live=ttl)
        )
        await net.run_until(final(a, [message_id]))
        ended = [e for e in journal(a) if e[0] in ("failed", "expired")]
        # ebMS2 §3.1.6.4: past its TimeToLive the message is given up, and the journal says why.
        assert ended == [
            ("failed", message_id, "sender", "Error", "DeliveryFailure"),
            ("expired", message_id, "sender", "Error", "TimeToLiveExpired"),
        ]
        # Submitted already past its TimeToLive: never sent, expired at once.
        late = await a.submit_async(
            Submission(B_PARTY, SERVICE, "NewOrder", (Payload(b"<o/>", "application/xml"),), time_to_live=net.clock())
        )
        assert [e[0] for e in journal(a) if e[1] == late] == ["submitted", "failed", "expired"]

    run(scenario)


def test_a_partner_down_past_the_retries_fails_without_expiring() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.down.add(B_URL)
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, [message_id]))
        kinds = [e[0] for e in journal(a) if e[1] == message_id]
        assert "failed" in kinds and "expired" not in kinds

    run(scenario)


def test_a_message_that_reaches_the_receiver_past_its_time_to_live_is_refused_and_journaled_expired() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.delay = timedelta(seconds=2)  # each transmission arrives after the TimeToLive below
        ttl = net.clock() + timedelta(seconds=1)
        message_id = await a.submit_async(
            Submission(B_PARTY, SERVICE, "NewOrder", (Payload(b"<order/>", "application/xml"),), time_to_live=ttl)
        )
        await net.run_until(final(a, [message_id]))  # A gives up at the TimeToLive
        await net.advance(timedelta(seconds=5))  # the transmission still on the way reaches B
        assert b.inbox(None) == []
        refused = [e for e in journal(b) if e[1] == message_id]
        # ebMS2 §3.1.6.4: B refuses it with TimeToLiveExpired and records it as expired.
        assert refused[:2] == [
            ("rejected", message_id, "receiver", "Error", "TimeToLiveExpired"),
            ("expired", message_id, "receiver", "Error", "TimeToLiveExpired"),
        ]
        assert "expired" in [e[0] for e in journal(a) if e[1] == message_id]

    run(scenario)
