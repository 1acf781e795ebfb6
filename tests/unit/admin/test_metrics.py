"""``/metrics`` after traffic on the test network: parsed with the Prometheus client's own parser, every count
equals what the stores' journals say happened (and what the scenario made happen)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from msh.engine import OutboundStatus
from msh.runtime.msh import Msh
from msh.store.api import EventKind
from tests.unit.admin.conftest import B_URL, Admins, on_admins, order, total


def journal(msh: Msh) -> Counter[str]:
    with msh.store.transaction(readonly=True) as tx:
        return Counter(e.kind for e in tx.list_events(0, limit=10_000))


def final(msh: Msh, message_id: str) -> bool:
    stored = msh.status(message_id)
    return stored is not None and stored.state.status.final


def test_the_counts_equal_what_happened() -> None:
    async def scenario(s: Admins) -> None:
        net, a, b = s.net, s.a, s.b
        ids = [await a.submit_async(order(n)) for n in range(3)]
        await net.settle()
        # A lost answer: A resends, B eliminates the copy (ebMS2 §6.4.1) and acknowledges again.
        net.faults.lose_next_answers = 1
        ids.append(await a.submit_async(order(3)))
        await net.run_until(lambda: final(a, ids[3]))
        # B refuses connections until A gives up: a DeliveryFailure of severity Error (ebMS2 §6.5.7).
        net.faults.down.add(B_URL)
        ids.append(await a.submit_async(order(4)))
        await net.run_until(lambda: final(a, ids[4]), limit=timedelta(days=2))
        net.faults.down.clear()
        statuses = Counter(a.status(m).state.status for m in ids)  # type: ignore[union-attr]
        assert statuses == {OutboundStatus.DELIVERED: 4, OutboundStatus.FAILED: 1}

        sa, sb = await s.scrape(s.admin_a), await s.scrape(s.admin_b)
        ja, jb = journal(a), journal(b)
        assert total(sa, "msh_messages_submitted_total") == ja[EventKind.SUBMITTED] == 5
        assert total(sa, "msh_messages_sent_total", outcome="delivered") == ja[EventKind.DELIVERED] == 4
        assert total(sa, "msh_messages_failed_total", severity="Error", role="sender") == ja[EventKind.FAILED] == 1
        attempts = [len(a.attempts(m)) for m in ids]
        assert total(sa, "msh_transmissions_total") == ja[EventKind.TRANSMISSION] == sum(attempts)
        assert total(sa, "msh_transmissions_total", outcome="acknowledged") == 4
        assert total(sa, "msh_transmissions_total", outcome="unreachable") == sum(attempts) - 4
        assert total(sa, "msh_acknowledgment_latency_seconds_count") == 4
        # The resent message waited for its first resend: its latency is at least the resend timeout.
        slowest = a.settings.sending.first_resend_timeout.total_seconds()
        assert total(sa, "msh_acknowledgment_latency_seconds_bucket", le=str(float(slowest) / 2)) <= 3
        assert total(sa, "msh_acknowledgment_latency_seconds_bucket", le="+Inf") == 4
        partners = {dict(labels).get("partner") for (name, labels) in sa if name == "msh_messages_submitted_total"}
        assert len(partners) == 1 and "987654321" in str(partners.pop())
        assert total(sa, "msh_store_commit_seconds_count") > 0

        assert total(sb, "msh_messages_received_total") == jb[EventKind.RECEIVED] == 4
        assert total(sb, "msh_duplicates_eliminated_total") == jb[EventKind.DUPLICATE] == 1
        assert total(sb, "msh_inbox_messages", state="new") == 4
        assert total(sb, "msh_inbox_messages", state="acknowledged-by-app") == 0
        assert total(sa, "msh_messages_received_total") == 0

        # Gauges read at scrape time: the inbox's oldest message ages with the clock.
        before = total(sb, "msh_inbox_oldest_age_seconds")
        net.clock.advance(timedelta(minutes=10))
        later = await s.scrape(s.admin_b)
        assert total(later, "msh_inbox_oldest_age_seconds") == before + 600
        assert total(later, "msh_agreements_loaded") == len(b.registry) >= 1
        assert total(later, "msh_store_reachable") == 1
        assert total(later, "msh_build_info", party="987654321") == 1

    on_admins(scenario)


def test_due_timers_are_the_backlog_and_their_wait_the_lag() -> None:
    async def scenario(s: Admins) -> None:
        s.net.faults.down.add(B_URL)
        await s.a.submit_async(order(0))
        await s.net.settle()
        quiet = await s.scrape(s.admin_a)
        assert total(quiet, "msh_timers_due") == 0
        assert total(quiet, "msh_timer_lag_seconds") == 0
        # Nobody fires the timers (the test network's timer loop is the test): the resend waits.
        s.net.clock.advance(s.a.settings.sending.first_resend_timeout + timedelta(seconds=30))
        waiting = await s.scrape(s.admin_a)
        assert total(waiting, "msh_timers_due") == 1
        assert total(waiting, "msh_timer_lag_seconds") >= 30
        assert total(waiting, "msh_transmissions_in_flight") == 0
        s.net.faults.down.clear()

    on_admins(scenario)


def test_each_msh_counts_in_a_registry_of_its_own() -> None:
    async def scenario(s: Admins) -> None:
        await s.a.submit_async(order(0))
        await s.net.settle()
        sa, sb = await s.scrape(s.admin_a), await s.scrape(s.admin_b)
        assert total(sa, "msh_messages_submitted_total") == 1
        assert total(sb, "msh_messages_submitted_total") == 0

    on_admins(scenario)
