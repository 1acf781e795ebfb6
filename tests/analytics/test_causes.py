"""The causes underneath the DeliveryFailures, the failed-messages table with its console links, and the
reconciliation's "refused by the receiver": against the plain-Python reading of the journal events
(tests.support.journal_reference.failure_causes) over the generated journal, and against what two MSHs on
the test network journaled (a message B refused with SecurityFailure, a message to B while B was down)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
from lxml import html as lxml_html

from msh.analytics.html import render
from msh.analytics.labels import console_link, party_label
from msh.engine import OutboundStatus
from msh.engine.signals import party_text
from msh.store import open_store
from msh.testing.network import TestNetwork
from tests.support.journal_reference import compute, failure_causes, read_events
from tests.support.secure_network import B_URL, PARTY_B, order, settings

CONSOLE = "https://msh.example:8443/console"


def _rows(folder: Path) -> list[dict[str, Any]]:
    return ds.dataset(str(folder), format="parquet").to_table().to_pylist()


def test_each_failed_message_has_the_cause_its_events_give(report: Any, journal: Path) -> None:
    expected = failure_causes(read_events(journal))
    got = {(r["source"], r["message_id"]): r for r in _rows(report.folder / "failed")}
    assert set(got) == set(expected)
    for key, cause in expected.items():
        row = got[key]
        assert {name: row[name] for name in cause} == cause, key
    # The generated journal has each kind of cause (else the comparison above would prove little).
    reasons = Counter(c["reason"] for c in expected.values())
    assert {"unreachable", "expired", "unacknowledged"} <= set(reasons), reasons
    assert reasons["security-failure"] + reasons["refused"] == 3  # the planted refusals
    # The unreachable ones name the URL they were sent to and the last transport error.
    unreachable = [r for r in got.values() if r["reason"] == "unreachable"]
    assert all(r["url"].startswith("https://") and r["error"] for r in unreachable)
    assert all(r["explanation"].startswith(f"partner unreachable at {r['url']}: {r['error']}") for r in unreachable)
    # The summary counts them by headline, as many as failed.
    counted = {c["headline"]: c["messages"] for c in report.summary["causes"]}
    assert counted == dict(Counter(c["headline"] for c in expected.values()))


def test_the_refusals_are_refused_by_the_receiver_with_its_error_code(report: Any, journal: Path) -> None:
    events = read_events(journal)
    planted = json.loads((journal / "faults.json").read_text())["faults"]["refused_by_receiver"]
    said = {e["message_id"]: e["cause"] for e in events if e["kind"] == "rejected" and e["role"] == "receiver"}
    rows = [r for r in _rows(report.folder / "reconciliation") if r["case"] == "refused_by_receiver"]
    assert sorted(r["message_id"] for r in rows) == sorted(planted) == sorted(said)
    assert {r["message_id"]: r["refused_with"] for r in rows} == said
    assert all(r["receiver_journal"] == r["to_party"] for r in rows)
    assert compute(events).cases["refused_by_receiver"] == set(planted)
    others = [r for r in _rows(report.folder / "reconciliation") if r["case"] != "refused_by_receiver"]
    assert others and all(r["refused_with"] is None for r in others)


def test_the_page_lists_the_failed_messages_with_links_and_short_party_names(report: Any) -> None:
    summary = report.summary
    dom = lxml_html.fromstring(render(summary, console_url=CONSOLE))
    table = dom.xpath('//table[@data-table="failed"]')[0]
    links = table.xpath('.//td[@data-figure="message_id"]/a')
    assert [a.text for a in links] == [r["message_id"] for r in summary["failed"]]
    assert [a.get("href") for a in links] == [console_link(CONSOLE, r["message_id"]) for r in summary["failed"]]
    assert all("@" not in a.get("href").removeprefix(CONSOLE) for a in links)  # the MessageId is URL-escaped
    causes = table.xpath('.//td[@data-figure="explanation"]/text()')
    assert causes == [r["explanation"] for r in summary["failed"]]
    # Party names: the short label shown, the full name on hover.
    for cell in dom.xpath('//td[@data-figure="partner" or @data-figure="from_party" or @data-figure="to_party"]'):
        assert cell.text == party_label(cell.get("title")) and len(cell.text) <= 24
    bars = {
        r.get("data-label"): float(r.get("data-value")) for r in dom.xpath('//svg[@data-chart="failure-causes"]//rect')
    }
    assert bars == {c["headline"]: float(c["messages"]) for c in summary["causes"]}
    says = dom.xpath('//table[@data-table="reconciliation"]//td[@data-figure="receiver_says"]/text()')
    says = [text for text in says if text != "-"]  # the other cases
    assert sorted(says) == sorted(
        f"refused by the receiver ({r['refused_with']})"
        for r in summary["reconciliation"]["rows"]
        if r["case"] == "refused_by_receiver"
    )
    # Without the console's URL: the MessageIds, no link.
    plain = lxml_html.fromstring(render(summary))
    assert not plain.xpath("//a") and plain.xpath('//table[@data-table="failed"]//td[@data-figure="message_id"]/text()')


def _exchange(tmp_path: Path) -> dict[str, Any]:
    """A and B on SQLite stores: one message B refuses (changed on the way: SecurityFailure), one sent while
    B's endpoint is down, one delivered."""
    result: dict[str, Any] = {}

    async def main() -> None:
        net = TestNetwork(seed=2)
        store_a = open_store(str(tmp_path / "a.sqlite"), clock=net.clock)
        store_b = open_store(str(tmp_path / "b.sqlite"), clock=net.clock)
        a = net.add("a", settings("a"), store=store_a)
        net.add("b", settings("b"), store=store_b)
        await net.start()
        try:
            net.faults.tamper = lambda url, body: body.replace(b"bolts", b"nails") if url == B_URL else body
            refused = await a.submit_async(order(1))
            await net.settle()
            net.faults.tamper = None
            net.faults.down.add(B_URL)
            unreachable = await a.submit_async(order(2))
            await net.run_until(lambda: a.status(unreachable).state.status.final, limit=timedelta(days=2))  # type: ignore[union-attr]
            net.faults.down.clear()
            delivered = await a.submit_async(order(3))
            await net.run_until(lambda: a.status(delivered).state.status.final)  # type: ignore[union-attr]
            result["ids"] = (refused, unreachable, delivered)
            result["statuses"] = [a.status(m).state.status for m in result["ids"]]  # type: ignore[union-attr]
            result["attempts"] = {m: a.attempts(m) for m in result["ids"]}
        finally:
            await net.close()
        result["stores"] = (store_a, store_b)

    asyncio.run(main())
    return result


def test_the_causes_of_a_real_exchange_are_what_the_msh_journaled(spark: Any, tmp_path: Path) -> None:
    from msh.demos.analytics import export_and_report

    done = _exchange(tmp_path)
    refused, unreachable, _delivered = done["ids"]
    assert done["statuses"] == [OutboundStatus.FAILED, OutboundStatus.FAILED, OutboundStatus.DELIVERED]
    a_party = party_text(settings("a").identity.party_id, settings("a").identity.party_id_type)
    store_a, store_b = done["stores"]
    try:
        result = export_and_report([(a_party, store_a), (party_text(*PARTY_B), store_b)], tmp_path / "out", spark=spark)
    finally:
        store_a.close()
        store_b.close()
    assert result is not None
    failed = {r["message_id"]: r for r in _rows(tmp_path / "out" / "report" / "failed")}
    assert set(failed) == {refused, unreachable}
    # What A journaled: B's ErrorList about the first, transport errors at B's URL for the second.
    [said] = [e for attempt in done["attempts"][refused] for e in attempt.errors]
    assert failed[refused]["reason"] == "security-failure" and said.error_code == "SecurityFailure"
    assert failed[refused]["partner_code"] == said.error_code
    assert failed[refused]["partner_description"] == said.description
    assert failed[refused]["headline"] == "refused by the partner: SecurityFailure"
    tries = done["attempts"][unreachable]
    assert tries and all(t.error for t in tries) and {t.url for t in tries} == {B_URL}
    row = failed[unreachable]
    assert (row["reason"], row["url"], row["error"], row["attempts"]) == (
        "unreachable",
        B_URL,
        tries[-1].error,
        len(tries),
    )
    assert row["headline"] == f"partner unreachable at {B_URL}"
    # B's journal has the refusal: the reconciliation says so, and finds nothing unexplained.
    cases = {r["message_id"]: r for r in _rows(tmp_path / "out" / "report" / "reconciliation")}
    assert set(cases) == {refused}
    assert (cases[refused]["case"], cases[refused]["refused_with"]) == ("refused_by_receiver", "SecurityFailure")
