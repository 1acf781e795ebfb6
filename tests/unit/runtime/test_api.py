"""The Python API with the runtime in the same process, on the test network (msh.testing.network):
callbacks reach the application after the commit, a DeliveryFailure reaches the sender, the inbox hands a
message over until the application acknowledges it, resends follow the agreement's calendar durations."""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

import pytest

from cpa import load
from cpa.duration import XsDuration
from msh.engine import OutboundState, OutboundStatus, Reliability
from msh.errors import ErrorCode, Issue, Severity
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.msh import Msh
from msh.store import InboxState, open_store
from msh.testing.network import TestNetwork
from tests.support.store import add_outbound

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "samples" / "config"
PARTY_B = ("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")
SERVICE, ACTION = "urn:example:services:ordering", "NewOrder"
B_URL = "https://127.0.0.1:8082/msh"


@cache
def settings(name: str) -> Settings:
    path = CONFIG / f"party-{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    return settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})


def submission(n: int = 0) -> Submission:
    return Submission(PARTY_B, SERVICE, ACTION, (Payload(f"<o n='{n}'/>".encode(), "application/xml"),))


def on_network(scenario: Callable[[TestNetwork, Msh, Msh], Awaitable[None]], **agreement: bytes) -> None:
    async def main() -> None:
        net = TestNetwork(seed=7)
        cpa = agreement.get("cpa")
        agreements = [load(cpa)] if cpa is not None else None
        a = net.add("a", settings("a"), agreements=agreements)
        b = net.add("b", settings("b"), agreements=agreements)
        await net.start()
        try:
            await scenario(net, a, b)
        finally:
            await net.close()

    asyncio.run(main())


def test_on_delivered_and_on_message_fire_once_per_message_after_the_commit() -> None:
    delivered: list[str] = []
    received: list[tuple[int, str]] = []
    failed: list[tuple[str, Issue]] = []

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        a.on_delivered = delivered.append
        a.on_failed = lambda m, i: failed.append((m, i))
        b.on_message = lambda entry, m: received.append((entry, m))

        def committed(message_id: str) -> None:
            # A callback runs after the commit that decided it: the store already says delivered.
            stored = a.status(message_id)
            assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
            delivered.append(message_id)

        a.on_delivered = committed
        net.faults.lose_next_answers = 2  # two messages are resent: still one callback each
        ids = [await a.submit_async(submission(i)) for i in range(5)]
        await net.run_until(lambda: len(delivered) == 5)
        assert sorted(delivered) == sorted(ids) and failed == []
        assert sorted(m for _, m in received) == sorted(ids)
        assert [e.id for e in b.inbox()] == [entry for entry, _ in received]

    on_network(scenario)


def test_a_delivery_failure_reaches_the_sending_application() -> None:
    failed: list[tuple[str, Issue]] = []

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        a.on_failed = lambda m, i: failed.append((m, i))
        net.faults.down.add(B_URL)  # B never answers
        message_id = await a.submit_async(submission())
        await net.run_until(lambda: bool(failed))
        stored = a.status(message_id)
        assert [m for m, _ in failed] == [message_id]
        issue = failed[0][1]
        # ebMS2 §6.5.7: no attempt reached the peer -> severity Error.
        assert (issue.error_code, issue.severity) == (ErrorCode.DELIVERY_FAILURE, Severity.ERROR)
        assert stored is not None and stored.state.status is OutboundStatus.FAILED
        assert stored.state.attempts == stored.state.reliability.retries + 1

    on_network(scenario)


def test_an_agreement_counting_months_schedules_resends_a_calendar_month_apart() -> None:
    # RetryInterval P1M, PersistDuration P2M: the first resend waits the RetryInterval too (ebMS2 §6.4.4:
    # the setting's PT5S is shorter), a calendar month after the first transmission (XML Schema Part 2
    # Appendix E); PersistDuration ends it two calendar months after the first transmission.
    cpa = (ROOT / "samples" / "cpas" / "demo-a-b.xml").read_bytes()
    cpa = cpa.replace(b">PT5S</tp:RetryInterval>", b">P1M</tp:RetryInterval>")
    cpa = cpa.replace(b">P1D</tp:PersistDuration>", b">P2M</tp:PersistDuration>")

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.down.add(B_URL)
        start = datetime(2027, 1, 31, 10, 0, tzinfo=UTC)  # a month end: February has fewer days
        net.clock.set(start)
        message_id = await a.submit_async(submission())
        await net.settle()
        stored = a.status(message_id)
        assert stored is not None
        assert (stored.state.reliability.retry_interval, stored.state.reliability.persist_duration) == (
            XsDuration(months=1),
            XsDuration(months=2),
        )
        assert stored.state.reliability.first_resend_timeout == XsDuration(months=1)
        # Appendix E: 2027-01-31 plus P1M is pinned to 2027-02-28.
        assert stored.state.next_due_at == datetime(2027, 2, 28, 10, 0, tzinfo=UTC)
        await net.advance(timedelta(days=28))  # the first resend
        stored = a.status(message_id)
        assert stored is not None and stored.state.attempts == 2
        assert stored.state.status is OutboundStatus.AWAITING_ACK
        # The next wait starts from that resend: 2027-02-28 plus P1M is 2027-03-28.
        assert stored.state.next_due_at == datetime(2027, 3, 28, 10, 0, tzinfo=UTC)
        await net.advance(timedelta(days=28))  # the third transmission; PersistDuration ends it on 2027-03-31
        stored = a.status(message_id)
        assert stored is not None and stored.state.attempts == 3
        assert stored.state.next_due_at == XsDuration(months=2).add_to(start)

    on_network(scenario, cpa=cpa)


def test_the_inbox_hands_a_message_over_until_the_application_acknowledges_it() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(submission(7))
        await net.settle()
        [entry] = b.inbox()
        got = b.fetch(entry.id)
        try:
            assert got.envelope.message_id == message_id
            assert got.message.payloads[0].body.read_bytes() == b"<o n='7'/>"
        finally:
            got.close()
        assert [e.state for e in b.inbox(None)] == [InboxState.DELIVERED_TO_APP]
        assert b.inbox() == []  # no longer new
        assert b.ack(entry.id).state is InboxState.ACKNOWLEDGED_BY_APP

    on_network(scenario)


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_engine_state_survives_the_trip_through_the_store(tmp_path: Path, kind: str) -> None:
    t0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    r = Reliability(
        3,
        XsDuration.parse("PT5S"),
        XsDuration.parse("PT2S"),
        XsDuration.parse("P1M"),  # months survive the trip
        t0 + timedelta(hours=1),
        True,
        "urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH",
    )
    issue = Issue(ErrorCode.DELIVERY_FAILURE, Severity.WARNING, "no Acknowledgment after 4 transmissions")
    state = OutboundState("m@x", OutboundStatus.FAILED, r, 4, t0, 0, None, issue)
    with open_store("memory:" if kind == "memory" else str(tmp_path / "s.sqlite")) as store:
        with store.transaction() as tx:
            add_outbound(tx, "m@x", state=state)
        with store.transaction(readonly=True) as tx:
            stored = tx.get_outbound("m@x")
    assert stored is not None
    assert stored.state == state
