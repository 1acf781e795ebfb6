"""The operator's resend and purge on the test network (msh.testing.network): partners A and B of the sample
agreement (Retries 5, RetryInterval PT5S, PersistDuration P1D), one fake clock, no socket, no sleep.

A resent message reaches the partner once; one the partner already had is eliminated there as a duplicate
(ebMS2 §6.4.1), never delivered twice. A purge removes only what has ended and has been kept long enough
(ebMS2 §6.4.6), never a message being retried or waiting in the inbox, and the journal keeps its story.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest

from msh.engine import OutboundStatus
from msh.errors import Severity
from msh.runtime.agreements import load_agreements
from msh.runtime.msh import Msh
from msh.runtime.resending import ResendOutcome
from msh.store.api import Direction, EventKind
from msh.store.inline import InlineWriter
from msh.testing.network import TestNetwork
from tests.unit.runtime.test_network import B_URL, delivered_once, final, order, run, settings, statuses

MONTH = timedelta(days=31)
CPAS = Path(__file__).resolve().parents[3] / "samples" / "cpas"


async def failed_while_down(net: TestNetwork, a: Msh) -> str:
    net.faults.down.add(B_URL)
    message_id = await a.submit_async(order(1))
    await net.run_until(final(a, [message_id]))
    assert statuses(a, [message_id]) == {OutboundStatus.FAILED: 1}
    net.faults.down.clear()
    return message_id


def kinds(msh: Msh, message_id: str) -> list[str]:
    with msh.store.transaction(readonly=True) as tx:
        return [e.kind for e in tx.message_events(message_id, direction=Direction.OUTBOUND)]


def test_a_failed_message_resent_reaches_the_partner_once() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await failed_while_down(net, a)
        [result] = a.resend([message_id], reason="partner back", requested_by="ops")
        assert result.outcome is ResendOutcome.RESENT and result.status == "pending"
        await net.run_until(final(a, [message_id]))
        assert statuses(a, [message_id]) == {OutboundStatus.DELIVERED: 1}
        delivered_once(b, [message_id])
        journal = kinds(a, message_id)
        # The DeliveryFailure reported before stays; the resend is journaled with who asked and why.
        assert journal.index(EventKind.FAILED) < journal.index(EventKind.RESEND_REQUESTED) < journal.index("delivered")
        with a.store.transaction(readonly=True) as tx:
            asked = next(e for e in tx.message_events(message_id) if e.kind == EventKind.RESEND_REQUESTED)
        assert asked.detail["requestedBy"] == "ops" and asked.detail["reason"] == "partner back"
        assert asked.detail["previousAttempts"] == 6 and asked.detail["duplicateElimination"] is True
        # The attempts of the new series are numbered on from the first series' six.
        numbers = [t.number for t in a.attempts(message_id)]
        assert numbers == list(range(1, 8))

    run(scenario)


def test_a_resend_the_partner_already_had_is_eliminated_there_as_a_duplicate() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.lose_answers = 1.0  # B gets every copy; A never hears back
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, [message_id]))
        stored = a.status(message_id)
        assert stored is not None and stored.state.failure is not None
        assert stored.state.failure.severity is Severity.WARNING
        duplicates = b.counters["duplicates"]
        net.faults.lose_answers = 0.0
        [result] = a.resend([message_id], reason="it may have been delivered", requested_by="ops")
        assert result.outcome is ResendOutcome.RESENT
        await net.run_until(final(a, [message_id]))
        # ebMS2 §6.4.1, §6.5.5: B answers the resend with its stored acknowledgment and delivers nothing new.
        assert statuses(a, [message_id]) == {OutboundStatus.DELIVERED: 1}
        assert b.counters["duplicates"] == duplicates + 1
        delivered_once(b, [message_id])

    run(scenario)


def test_a_message_that_is_not_failed_is_refused_with_its_state_and_an_unknown_one_said_so() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, [message_id]))
        done, unknown = a.resend([message_id, "nobody@nowhere"], reason="", requested_by="ops")
        assert done.outcome is ResendOutcome.REFUSED and done.status == "delivered"
        assert "delivered, not failed" in done.detail
        assert unknown.outcome is ResendOutcome.UNKNOWN and unknown.status is None
        assert EventKind.RESEND_REQUESTED not in kinds(a, message_id)
        delivered_once(b, [message_id])

    run(scenario)


def test_without_duplicate_elimination_a_resend_needs_force(tmp_path: Path) -> None:
    # An agreement that leaves DuplicateElimination perMessage, and A's setting that does not ask for it.
    text = (CPAS / "demo-a-b.xml").read_text(encoding="utf-8")
    cpa = tmp_path / "demo-a-b.xml"
    cpa.write_text(text.replace('tp:duplicateElimination="always"', 'tp:duplicateElimination="perMessage"'))
    agreements = load_agreements([cpa])
    a_settings = settings("a")
    data = dataclasses.replace(a_settings, sending=dataclasses.replace(a_settings.sending, duplicate_elimination=False))

    async def main() -> None:
        net = TestNetwork(seed=1)
        a = net.add("a", data, agreements=agreements)
        b = net.add("b", settings("b"), agreements=agreements)
        await net.start()
        try:
            message_id = await failed_while_down(net, a)
            [refused] = a.resend([message_id], reason="", requested_by="ops")
            assert refused.outcome is ResendOutcome.REFUSED and "--force" in refused.detail
            assert statuses(a, [message_id]) == {OutboundStatus.FAILED: 1}
            [forced] = a.resend([message_id], reason="accepted", requested_by="ops", force=True)
            assert forced.outcome is ResendOutcome.RESENT and "forced" in forced.detail
            await net.run_until(final(a, [message_id]))
            delivered_once(b, [message_id])
        finally:
            await net.close()

    asyncio.run(main())


def test_a_resend_without_a_runtime_is_picked_up_by_the_server_of_the_store() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await failed_while_down(net, a)
        # As `msh resend` does beside `msh serve`: another Msh on the same store, its runtime not started.
        command = Msh(settings("a"), store=a.store, clock=net.clock, writer=InlineWriter(a.store), keys=False)
        [result] = command.resend([message_id], reason="from the command line", requested_by="ops")
        assert result.outcome is ResendOutcome.RESENT
        await net.run_until(final(a, [message_id]))  # A's timer loop finds the queued transmission
        assert statuses(a, [message_id]) == {OutboundStatus.DELIVERED: 1}
        delivered_once(b, [message_id])

    run(scenario)


def test_a_purge_removes_what_has_ended_and_keeps_what_is_in_flight() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        done = await a.submit_async(order(1))
        waiting = await a.submit_async(order(2))
        await net.run_until(final(a, [done, waiting]))
        settled, unsettled = sorted(b.inbox(), key=lambda e: e.message_id != done)
        b.ack(settled.id)
        # Within retention.keep (P30D) nothing goes.
        assert a.purge().removed == {} and b.purge().removed == {}
        net.faults.down.add(B_URL)
        retried = await a.submit_async(order(3))  # being retried at the time of the purge
        await net.advance(timedelta(seconds=2))
        net.clock.advance(MONTH)
        report = a.purge(dry_run=True)
        assert report.removed["outbound"] == 2 and a.status(done) is not None  # a dry run removes nothing
        # The retried message's timer has not fired yet: it is still awaiting its acknowledgment, and stays.
        report = a.purge()
        assert report.removed == {"outbound": 2} and report.bytes_freed > 0
        assert a.status(done) is None and a.status(waiting) is None and a.status(retried) is not None
        # B: the settled message goes, the one still in the inbox stays.
        report = b.purge()
        assert report.removed == {"inbound": 1} and [e.message_id for e in b.inbox()] == [unsettled.message_id]
        # The journal keeps the story, with the purge.
        assert kinds(a, done)[-1] == EventKind.PURGED and "delivered" in kinds(a, done)

    run(scenario)


def test_persist_duration_keeps_a_message_past_a_shorter_keep() -> None:
    short = dataclasses.replace(
        settings("a"), retention=dataclasses.replace(settings("a").retention, keep=timedelta(0))
    )

    async def main() -> None:
        net = TestNetwork(seed=1)
        a = net.add("a", short)
        net.add("b", settings("b"))
        await net.start()
        try:
            message_id = await a.submit_async(order(1))
            await net.run_until(final(a, [message_id]))
            net.clock.advance(timedelta(hours=1))
            # ebMS2 §6.4.6: PersistDuration (P1D) since the first transmission has not passed.
            report = a.purge()
            assert report.removed == {} and report.kept_for_persist_duration == 1
            net.clock.advance(timedelta(days=1))
            assert a.purge().removed == {"outbound": 1}
        finally:
            await net.close()

    asyncio.run(main())


def test_a_stale_listing_never_removes_a_message_resent_meanwhile() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await failed_while_down(net, a)
        net.faults.down.add(B_URL)
        with a.store.transaction(readonly=True) as tx:
            listed = tx.outbound_purge_candidates(settled_before=net.clock() + MONTH)
        assert [c.message_id for c in listed] == [message_id]
        a.resend([message_id], reason="race", requested_by="ops")  # between the listing and the removal
        with a.store.transaction() as tx:
            assert tx.purge_outbound(message_id, at=net.clock(), detail={}) is None
        stored = a.status(message_id)
        assert stored is not None and not stored.state.status.final

    run(scenario)


def test_msh_serve_purges_every_interval_when_enabled() -> None:
    from msh.runtime.retention import PurgeSchedule

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, [message_id]))
        net.clock.advance(MONTH)
        waits: list[float] = []

        async def no_wait(seconds: float) -> None:
            waits.append(seconds)
            await asyncio.sleep(0)

        schedule = PurgeSchedule(a.core, sleep=no_wait)
        await schedule.start()
        for _ in range(100):  # a bounded number of turns of the loop, no wall-clock wait
            if a.status(message_id) is None:
                break
            await asyncio.sleep(0)
        await schedule.stop()
        assert a.status(message_id) is None
        assert waits and waits[0] == a.settings.retention.interval.total_seconds()

    run(scenario)


def test_retention_settings_are_checked_and_overridden_from_the_environment() -> None:
    from msh.runtime.config import SettingsError, settings_from_mapping
    from tests.unit.runtime.test_config import minimal

    s = settings_from_mapping(
        minimal(retention={"keep": "P7D", "batch_size": 10}),
        base_dir=Path("."),
        source="t.toml",
        env={"MSH_RETENTION_ENABLED": "true", "MSH_RETENTION_INTERVAL": "PT10M"},
    )
    assert (s.retention.enabled, s.retention.interval, s.retention.keep, s.retention.batch_size) == (
        True,
        timedelta(minutes=10),
        timedelta(days=7),
        10,
    )
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(
            minimal(retention={"batch_size": 0, "interval": "PT0S"}), base_dir=Path("."), source="t.toml", env={}
        )
    text = " ".join(caught.value.problems)
    assert "retention.batch_size" in text and "retention.interval" in text
