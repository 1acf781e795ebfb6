"""The journals of a real exchange (partners A and B of the sample agreement on the test network, SQLite
stores, lost requests and acknowledgments) exported and reported as the demo does: the figures are what
happened, and the two journals reconcile."""

from __future__ import annotations

import asyncio
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

from msh.demos.analytics import export_and_report
from msh.engine import OutboundStatus
from msh.engine.signals import party_text
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import Settings, settings_from_mapping
from msh.store import Store, open_store
from msh.testing.network import TestNetwork
from tests.support.journal_reference import compute, read_events

CONFIG = Path(__file__).resolve().parents[2] / "samples" / "config"
B_PARTY = ("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")


def _settings(name: str) -> Settings:
    path = CONFIG / f"party-{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    return settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})


def _exchange(tmp_path: Path, count: int) -> tuple[Store, Store, dict[str, OutboundStatus], Counter[str]]:
    result: dict[str, Any] = {}

    async def main() -> None:
        net = TestNetwork(seed=5)
        store_a = open_store(str(tmp_path / "a.sqlite"), clock=net.clock)
        store_b = open_store(str(tmp_path / "b.sqlite"), clock=net.clock)
        a = net.add("a", _settings("a"), store=store_a)
        b = net.add("b", _settings("b"), store=store_b)
        await net.start()
        try:
            net.faults.lose_requests = 0.25
            net.faults.lose_answers = 0.25
            ids = []
            for n in range(count):
                submission = Submission(
                    B_PARTY,
                    "urn:example:services:ordering",
                    "NewOrder",
                    (Payload(f"<order n='{n}'/>".encode(), "application/xml"),),
                )
                ids.append(await a.submit_async(submission))

            def final() -> bool:
                return all(a.status(m).state.status.final for m in ids)  # type: ignore[union-attr]

            await net.run_until(final)
            result["statuses"] = {m: a.status(m).state.status for m in ids}  # type: ignore[union-attr]
            result["inbox"] = Counter(e.message_id for e in b.inbox(None, limit=10_000))
        finally:
            await net.close()
        result["stores"] = (store_a, store_b)

    asyncio.run(main())
    store_a, store_b = result["stores"]
    return store_a, store_b, result["statuses"], result["inbox"]


def test_the_report_of_an_exchange_says_what_happened(spark: Any, tmp_path: Path) -> None:
    store_a, store_b, statuses, inbox = _exchange(tmp_path, 12)
    a_party = party_text(_settings("a").identity.party_id, _settings("a").identity.party_id_type)
    b_party = party_text(*B_PARTY)
    report = export_and_report([(a_party, store_a), (b_party, store_b)], tmp_path / "out", spark=spark)
    store_a.close()
    store_b.close()
    assert report is not None
    html = report.html
    assert html.is_file()
    import json

    summary = json.loads((tmp_path / "out" / "report" / "summary.json").read_text())
    by_source = {s["source"]: s for s in summary["sources"]}
    delivered = sum(1 for s in statuses.values() if s is OutboundStatus.DELIVERED)
    assert by_source[a_party]["sent"] == 12
    assert by_source[a_party]["delivered"] == delivered
    assert by_source[b_party]["received"] == sum(inbox.values())
    # The losses made A resend and B eliminate duplicates: both are in the figures.
    events = read_events(tmp_path / "out" / "journal-1", tmp_path / "out" / "journal-2")
    assert any(e["kind"] == "transmission" and (e["attempt"] or 0) > 1 for e in events)
    assert by_source[b_party]["duplicates"] == sum(1 for e in events if e["kind"] == "duplicate") > 0
    # Every event of the exchange has its typed columns.
    for e in events:
        if e["message_id"] is not None and e["kind"] != "signal-Acknowledgment":
            assert e["role"] in ("sender", "receiver") and e["cpa_id"], e
    # The journals agree: nothing to reconcile, as the plain-Python reading says too.
    assert summary["reconciliation"]["counts"] == dict.fromkeys(summary["reconciliation"]["counts"], 0)
    assert not any(compute(events).cases.values())
