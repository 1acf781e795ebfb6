"""The multi-hop demo (``msh demo --multihop``): A sends to C through the intermediary I (ebMS2 §10), three
``msh serve`` processes over HTTPS with mutual TLS, with losses on both hops.

The processes run the multi-hop samples (``samples/config/multihop``, agreement
``samples/cpas/demo-routed-a-c.xml``) copied into a work folder with free ports (:mod:`msh.faults.chain`);
the intermediary and C listen behind lossy proxies, on the ports the agreement and the routes name, which
lose requests and responses while A submits the first part of the messages. Each message asks for I's hop
acknowledgment (actor nextMSH) and C's end-to-end one (toPartyMSH), which comes back through I.

Part one ends with what each MSH recorded and the verdict, computed from C's inbox and A's store: every
message delivered to C's application exactly once, payload intact, and ``delivered`` at A. Part two stops
C and sends more: the intermediary gives up after its route's resends and sends A a DeliveryFailure; the
demo prints those A received (severity, RefToMessageId), checks each against I's journal, and prints A's
``failed`` statuses as ``msh status`` shows them. Then the three journals are exported and the delivery
report (Spark) runs on them (:mod:`msh.demos.analytics`); the demo says whether the reconciliation's "sent
but never received" are exactly the messages A was told had failed.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msh.demos.multihop_records import delivery_failures, final_status_text, hop_lines, network_line
from msh.faults.chain import INTERMEDIARY, PARTY_C, Chain, Timings, make_chain
from msh.faults.outcome import EventCounts, inbox_census, journal, submit_orders, wait_final, wait_states
from msh.faults.pair import PARTY_A
from msh.faults.workfolder import in_work_folder
from msh.store.events import EventKind

if TYPE_CHECKING:
    from msh.engine import OutboundStatus
    from msh.faults.proxy import RunningProxy
    from msh.runtime.msh import Msh

__all__ = ["DEMO_TIMINGS", "run_multihop_demo"]

DEMO_TIMINGS = Timings(route_retry_interval="PT2S")
"""The samples' timings, but resends every 2 s on the routes' hops (the intermediary's forwards, the routed
acknowledgments), so that the intermediary gives up on an unreachable C well before A's own end-to-end
deadline (3 s + 5 x 5 s after its first transmission, from the agreement)."""


def run_multihop_demo(
    messages: int = 100,
    loss: float = 0.15,
    undeliverable: int = 3,
    lossy_share: float = 0.6,
    seed: int = 7,
    keep: bool = False,
    analytics: bool = True,
) -> int:
    """Run the demo (see the module docs); return 0 when every message was delivered exactly once and
    every message sent after C stopped came back to A as a DeliveryFailure from the intermediary.

    With ``analytics``, the journals of A, I and C are then exported and the delivery report is run on the
    three (:mod:`msh.demos.analytics`; its reconciliation names I as the forwarder). The work folder
    (agreement, settings, stores, logs) is removed after a successful run unless ``keep``; after a failed
    one it is kept and named."""
    return in_work_folder(
        "msh-demo-multihop-",
        lambda work: _run_and_report(work, messages, loss, undeliverable, lossy_share, seed, analytics),
        keep=keep,
        contents="agreement.xml; settings, stores and logs party-a.*, intermediary.*, party-c.*",
    )


def _run_and_report(
    work: Path, messages: int, loss: float, undeliverable: int, lossy_share: float, seed: int, analytics: bool
) -> int:
    chain = make_chain(work, timings=DEMO_TIMINGS)
    status = _run(chain, work, messages, loss, undeliverable, lossy_share, seed)
    if analytics:
        from msh.demos.analytics import report_on_demo

        report = report_on_demo([(p.config, p.store) for p in chain.partners], env={})
        if report is not None:
            _explain_reconciliation(chain, report.summary["reconciliation"])
    return status


def _explain_reconciliation(chain: Chain, reconciliation: dict[str, Any]) -> None:
    """Say whether the messages the reconciliation finds sent but never received are those A was told had
    failed (the messages sent after C stopped: I took them, C never did): the case counts are exact, the
    rows listed (at most 500) must all be among A's failures."""
    failed = {e.message_id for e in journal(chain.a.store) if e.kind == EventKind.FAILED}
    counts: dict[str, int] = reconciliation["counts"]
    found = counts.get("sent_not_received", 0)
    listed = {r["message_id"] for r in reconciliation["rows"] if r["case"] == "sent_not_received"}
    others = sorted(case for case, n in counts.items() if n and case != "sent_not_received")
    if found == len(failed) and listed <= failed and not others:
        print(f"  sent but never received: the {found} message(s) sent after C stopped, each failed at A")
    else:
        print(
            f"  the reconciliation differs from A's failures: {found} sent but never received, "
            f"{len(failed)} failed at A; other cases: {', '.join(others) or 'none'}"
        )


def _run(
    chain: Chain, work: Path, messages: int, loss: float, undeliverable: int, lossy_share: float, seed: int
) -> int:
    from msh.faults.proxy import run_in_thread
    from msh.runtime.config import load_settings
    from msh.runtime.msh import Msh

    _introduce(chain, messages, loss, work)
    (i_listen, i_target), (c_listen, c_target) = chain.proxied_hops()
    with contextlib.ExitStack() as stack:
        stack.callback(chain.stop)  # whatever happens, no process outlives the demo (SIGTERM, then SIGKILL)
        for partner in chain.partners:
            partner.start()
        lossy = dict(drop_requests=loss, drop_responses=loss)
        to_i = stack.enter_context(run_in_thread(i_listen, i_target, **lossy, seed=seed))
        to_c = stack.enter_context(run_in_thread(c_listen, c_target, **lossy, seed=seed + 1))
        print(f"  A, I and C up; lossy stretch: {loss:.0%} of requests and {loss:.0%} of responses lost on both hops")
        sender = Msh(load_settings(chain.a.config, env={}))
        stack.callback(sender.close)
        lossy_count = int(messages * lossy_share)

        sent: dict[str, str] = {}

        def before(i: int) -> None:
            if i == lossy_count:
                # A's server picks submissions up on its own schedule: the first pass of the messages of the
                # lossy stretch (A's transmissions, I's forwards, C's acknowledgments) goes through the loss.
                wait_states(sender, sent, lambda state: state.attempts > 0, timeout=30)
                time.sleep(1.0)
                to_i.set_loss(0.0, 0.0)
                to_c.set_loss(0.0, 0.0)
                print(f"  {i} messages sent in the lossy stretch; the network is clean from here on")

        started = time.monotonic()
        submit_orders(sender, PARTY_C, range(messages), before=before, into=sent)
        final = wait_final(sender, sent, timeout=120 + 0.2 * messages)
        elapsed = time.monotonic() - started
        to_i.set_loss(0.0, 0.0)
        to_c.set_loss(0.0, 0.0)
        print("\nnetwork (the proxies count flights: HTTP requests and responses, and TLS handshake flights):")
        print(network_line("A->I (and C->I)", "I", to_i.stats()))
        print(network_line("I->C", "C", to_c.stats()))
        delivered = _part_one(chain, sent, final, elapsed)
        failures_ok = _part_two(chain, sender, undeliverable, messages, to_c)
    return 0 if delivered and failures_ok else 1


def _introduce(chain: Chain, messages: int, loss: float, work: Path) -> None:
    print(
        f"ebXML MSH multi-hop demo: {messages} reliable messages from party A to party C through the "
        f"intermediary I (work folder {work})"
    )
    print(
        "  agreement samples/cpas/demo-routed-a-c.xml: each message asks for the next MSH's acknowledgment "
        "(actor nextMSH)\n  and C's (actor toPartyMSH), with DuplicateElimination; HTTPS with mutual TLS on "
        "both hops (demo keys of samples/keys)"
    )
    print(
        f"  A at https://127.0.0.1:{chain.a.port}/msh -> I (PartyId {INTERMEDIARY[0]}) at "
        f"https://127.0.0.1:{chain.i_public_port}/msh -> C at https://127.0.0.1:{chain.c_public_port}/msh; lossy "
        f"proxies in front of I and of C"
    )
    print(
        f"  A resends after {DEMO_TIMINGS.first_resend} and then every {DEMO_TIMINGS.retry_interval} (agreement), "
        f"I and C resend on their routes every {DEMO_TIMINGS.route_retry_interval}, at most "
        f"{DEMO_TIMINGS.route_retries} times"
    )


def _part_one(chain: Chain, sent: dict[str, str], final: dict[str, OutboundStatus], elapsed: float) -> bool:
    from msh.engine import OutboundStatus as Status

    records = [EventCounts.of(journal(p.store), sent) for p in (chain.a, chain.i, chain.c)]
    print()
    for line in hop_lines(*records):
        print(line)
    n = len(sent)
    delivered = sum(1 for v in final.values() if v is Status.DELIVERED)
    census = inbox_census(chain.c.store, sent)
    print(
        f"\nresult after {elapsed:.1f} s: {delivered}/{n} delivered at A; {census.once}/{n} in C's inbox exactly "
        f"once, {census.intact} with the payload byte for byte; {census.extra} extra deliveries"
    )
    ok = delivered == n and census.once == n and census.intact == n and census.extra == 0
    print("every message delivered exactly once" if ok else "FAILED: not every message was delivered exactly once")
    return ok


def _part_two(chain: Chain, sender: Msh, count: int, first: int, to_c: RunningProxy) -> bool:
    from msh.engine import OutboundStatus as Status

    chain.c.stop()
    print(f"\nC stopped; A sends {count} more messages to C (the network is clean; I finds nobody behind its hop)")
    sent = submit_orders(sender, PARTY_C, range(first, first + count))
    timings = DEMO_TIMINGS
    # A's end-to-end deadline (first resend + Retries x RetryInterval), and time for the last of them.
    deadline = _seconds(timings.first_resend) + timings.retries * _seconds(timings.retry_interval) + 30
    refused = to_c.stats().target_failures
    final = wait_final(sender, sent, timeout=deadline)
    refused = to_c.stats().target_failures - refused
    a_party = f"{PARTY_A[1]}:{PARTY_A[0]}"
    seen = delivery_failures(journal(chain.a.store), journal(chain.i.store), list(sent), a_party)
    print(f"DeliveryFailures A received from the intermediary I (PartyId {INTERMEDIARY[0]}):")
    for item in seen:
        for severity, description in item.received:
            print(f"  {severity} DeliveryFailure, RefToMessageId {item.message_id}: {description}")
        if not item.received:
            print(f"  none about {item.message_id}")
        outcome = final[item.message_id].value if item.message_id in final else "not final in time"
        journaled = ", ".join(item.sent_by_intermediary) or "no"
        before = "forwarded (I acknowledged the hop), then " if item.forwarded_first else ""
        print(f"    I journaled sending it (its DeliveryFailure taken by A): {journaled}; at A: {before}{outcome}")
    print("A's statuses:")
    for message_id in sent:
        stored = sender.status(message_id)
        print(f"  {message_id}: {final_status_text(stored.state) if stored is not None else 'unknown'}")
    print(f"(while C was down, the proxy in front of it found nobody listening {refused} times)")
    census = inbox_census(chain.c.store, sent)
    failed = sum(1 for m in sent if final.get(m) is Status.FAILED)
    reported = sum(1 for item in seen if item.reported)
    print(
        f"\nresult: {failed}/{count} failed at A, {reported}/{count} reported by a DeliveryFailure from I "
        f"(and journaled there as taken by A), {census.once + census.twice_or_more}/{count} in C's inbox"
    )
    ok = failed == count and reported == count and census.missing == count
    print(
        "every undeliverable message reported to A by a DeliveryFailure from the intermediary"
        if ok
        else "FAILED: not every undeliverable message was reported to A by a DeliveryFailure from the intermediary"
    )
    return ok


def _seconds(duration: str) -> float:
    from cpa.duration import parse_duration

    return parse_duration(duration).total_seconds()
