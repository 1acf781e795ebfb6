#!/usr/bin/env python3
"""Benchmark the agreement side: loading and registering agreements, then lookups by CPAId, by route, and
sending-parameter resolution.

Builds N distinct agreements (default 1,000) by templating a real agreement (a different CPAId and party
ids each) and loading every copy through ``cpa.loader.load``, or with the unit-test factory when the
loader or the template is not there (``--source factory``). Prints agreements/s for load+add, then
lookups/s for ``get``, ``find`` and ``resolve`` (the median of several rounds; this machine is noisy) and,
for information, ``check`` of an inbound header. Target: >= 100,000 lookups/s. Not a test: it asserts
nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cpa.check import check  # noqa: E402
from cpa.model import CollaborationProtocolAgreement, PartyId  # noqa: E402
from cpa.registry import CpaRegistry  # noqa: E402
from cpa.resolve import Exchange, clear_cache, routes  # noqa: E402
from msh.ebms import model as m  # noqa: E402

DEFAULT_TEMPLATE = ROOT.parent / "shared" / "interop" / "cpas" / "cpaStubEBF.rm.https.signed.xml"
NOW = datetime(2026, 3, 1, tzinfo=UTC)


def from_template(template: Path, count: int) -> list[bytes]:
    """``count`` copies of the template agreement with their own CPAId and PartyIds."""
    from lxml import etree

    from cpa.model import CPPA_NS

    root = etree.fromstring(template.read_bytes())
    cpaid_attr = f"{{{CPPA_NS}}}cpaid"
    party_ids = root.findall(f"{{{CPPA_NS}}}PartyInfo/{{{CPPA_NS}}}PartyId")
    originals = [p.text or "" for p in party_ids]
    out = []
    for i in range(count):
        root.set(cpaid_attr, f"urn:bench:cpa:{i}")
        for n, p in enumerate(party_ids):
            p.text = f"{originals[n]}-{i}"
        out.append(etree.tostring(root, xml_declaration=True, encoding="UTF-8"))
    return out


def factory_agreements(count: int) -> list[CollaborationProtocolAgreement]:
    from tests.support.cpa_factory import make_cpa

    return [
        make_cpa(
            cpaid=f"urn:bench:cpa:{i}", a_ids=(PartyId(f"a-{i}", "urn:bench"),), b_ids=(PartyId(f"b-{i}", "urn:bench"),)
        )
        for i in range(count)
    ]


def rate(fn: Callable[[], int], rounds: int) -> float:
    """Median operations/s of ``rounds`` runs of ``fn`` (which returns how many operations it did)."""
    results = []
    for _ in range(rounds):
        start = time.perf_counter()
        n = fn()
        results.append(n / (time.perf_counter() - start))
    return statistics.median(results)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agreements", type=int, default=1000, help="distinct agreements to build (default 1000)")
    parser.add_argument("--lookups", type=int, default=100_000, help="lookups per round, split over the kinds")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the median is printed (default 5)")
    parser.add_argument(
        "--source",
        choices=("auto", "loader", "factory"),
        default="auto",
        help="build agreements through the loader from a template, or with the test factory",
    )
    parser.add_argument("--template", type=Path, default=DEFAULT_TEMPLATE, help="agreement to template (loader)")
    parser.add_argument("--seed", type=int, default=1, help="random seed of the lookup mix")
    args = parser.parse_args(argv)

    source = args.source
    if source == "auto":
        has_loader = importlib.util.find_spec("cpa.loader") is not None
        source = "loader" if has_loader and args.template.is_file() else "factory"

    # -- load + add ----------------------------------------------------------------------------------
    registry = CpaRegistry()
    if source == "loader":
        from cpa.loader import load

        documents = from_template(args.template, args.agreements)
        start = time.perf_counter()
        agreements = [load(doc) for doc in documents]
        loaded = time.perf_counter()
    else:
        start = time.perf_counter()
        agreements = factory_agreements(args.agreements)
        loaded = time.perf_counter()
    for cpa in agreements:
        registry.add(cpa)
    added = time.perf_counter()
    bulk = CpaRegistry()
    bulk_start = time.perf_counter()
    bulk.add_all(agreements)
    bulk_time = time.perf_counter() - bulk_start
    n = len(agreements)
    print(f"source: {source}" + (f" (template {args.template.name})" if source == "loader" else ""))
    print(f"agreements: {n}, routes each: {len(routes(agreements[0]))}")
    print(f"load+add       {n / (added - start):>12,.0f} agreements/s   ({added - start:.2f} s)")
    print(f"  load alone   {n / (loaded - start):>12,.0f} agreements/s")
    print(f"  add one by one {n / (added - loaded):>10,.0f} agreements/s;  add_all {n / bulk_time:,.0f} agreements/s")

    # -- lookups -------------------------------------------------------------------------------------
    rnd = random.Random(args.seed)
    all_routes = [(cpa, r) for cpa in agreements for r in routes(cpa)]
    per_kind = max(1, args.lookups // 3)
    picks = [all_routes[rnd.randrange(len(all_routes))] for _ in range(per_kind)]
    gets = [cpa.cpaid for cpa, _ in picks]
    finds = [(r.from_party.party_ids, r.to_party.party_ids, r.service, r.action, r.service_type) for _, r in picks]
    resolves = [
        (cpa.cpaid, r.from_party.party_ids, r.to_party.party_ids, r.service, r.action, r.service_type)
        for cpa, r in picks
    ]

    def do_get() -> int:
        get = registry.get
        for cpaid in gets:
            get(cpaid)
        return len(gets)

    def do_find() -> int:
        find = registry.find
        for f, t, service, action, stype in finds:
            find(f, t, service, action, stype)
        return len(finds)

    def do_resolve() -> int:
        res = registry.resolve
        for cpaid, f, t, service, action, stype in resolves:
            res(cpaid, Exchange(f, t, service, action, service_type=stype), now=NOW)
        return len(resolves)

    def do_mix() -> int:
        return do_get() + do_find() + do_resolve()

    clear_cache()
    cold_start = time.perf_counter()
    do_resolve()
    cold = len(resolves) / (time.perf_counter() - cold_start)
    print(f"lookups: {per_kind:,} per kind per round, median of {args.rounds} rounds")
    print(f"get            {rate(do_get, args.rounds):>12,.0f} lookups/s")
    print(f"find           {rate(do_find, args.rounds):>12,.0f} lookups/s")
    print(
        f"resolve        {rate(do_resolve, args.rounds):>12,.0f} lookups/s   (first pass, cache filling: {cold:,.0f}/s)"
    )
    print(f"mix (1:1:1)    {rate(do_mix, args.rounds):>12,.0f} lookups/s")

    # -- check (for information) ---------------------------------------------------------------------
    envelopes = []
    for cpa, r in picks[:20_000]:
        mc = r.sending.messaging_characteristics
        envelopes.append(
            m.Envelope(
                message_header=m.MessageHeader(
                    from_party=m.Party(tuple(m.PartyId(p.value, p.type) for p in r.from_party.party_ids), r.from_role),
                    to_party=m.Party(tuple(m.PartyId(p.value, p.type) for p in r.to_party.party_ids), r.to_role),
                    cpa_id=cpa.cpaid,
                    conversation_id="bench",
                    service=m.Service(r.service, r.service_type),
                    action=r.action,
                    message_data=m.MessageData("bench@x", NOW - timedelta(seconds=1)),
                    duplicate_elimination=mc.duplicate_elimination.value == "always",
                ),
                ack_requested=(m.AckRequested(),) if mc.ack_requested.value == "always" else (),
            )
        )

    def do_check() -> int:
        for env in envelopes:
            check(env, registry, now=NOW)
        return len(envelopes)

    print(f"check          {rate(do_check, args.rounds):>12,.0f} headers/s (information; not a lookup)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
