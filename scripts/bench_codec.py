#!/usr/bin/env python3
"""Benchmark the ebMS codec: parse+validate and build+serialise of a ~2 KB message, in messages/s.

Prints the median of several rounds (this machine is noisy) for: parsing a 2 KB multipart message in
strict mode (MIME, hardened XML parse, schema validation, model), the same without schema validation, and
building + serialising it. Target: >= 5,000 msgs/s each. Not a test: it asserts nothing.

``--cold`` adds, for each step, its CPU time per call after a buffer is read through the processor's caches
before each call (not timed): 4 MiB, more than a core's own cache, and 64 MiB, more than all of them; beside
the same step called in a tight loop. In the running MSH each message passes through many libraries between
two calls of a step (HTTP, TLS, XML, the store, the engine), so a step runs nearer the cold figures than the
tight loop's: this is why removing instructions from one step moves the whole exchange less than its loop
figure says (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime

from per_call import SWEEPS, per_call_us

from msh.ebms import model as m
from msh.ebms.envelope import read_envelope
from msh.ebms.message import ParseMode, build_message, parse_message
from msh.ebms.mime import AttachmentSpec, PartBody
from msh.ebms.namespaces import ACTOR_TO_PARTY_MSH
from msh.safexml import parse_xml


def sample() -> tuple[m.Envelope, list[AttachmentSpec]]:
    pid = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
    env = m.Envelope(
        message_header=m.MessageHeader(
            from_party=m.Party((m.PartyId("123456789", pid),), role="Buyer"),
            to_party=m.Party((m.PartyId("987654321", pid),), role="Seller"),
            cpa_id="cpa-demo-a-b",
            conversation_id="conv-20261101-0001",
            service=m.Service("urn:example:services:ordering"),
            action="NewOrder",
            message_data=m.MessageData("order-0001@a.example", datetime(2026, 11, 1, tzinfo=UTC)),
            duplicate_elimination=True,
        ),
        ack_requested=(m.AckRequested(actor=ACTOR_TO_PARTY_MSH),),
        sync_reply=m.SyncReply(),
        manifest=m.Manifest((m.Reference("cid:order@a.example", descriptions=(m.Description("Order"),)),)),
    )
    payload = b"<Order xmlns='urn:example'>" + b"<Line sku='W-1' qty='12'/>" * 28 + b"</Order>"
    return env, [AttachmentSpec("order@a.example", "application/xml", PartBody.from_bytes(payload))]


def rate(fn: Callable[[], object], seconds: float, rounds: int) -> float:
    results = []
    for _ in range(rounds):
        n = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            for _ in range(50):
                fn()
            n += 50
            now = time.perf_counter()
            if now >= deadline:
                break
        results.append(n / (now - start))
    return statistics.median(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one round (default 1.0)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per figure; the median is printed (default 5)")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="also print each step's CPU time per call after 4 MiB and 64 MiB are read through the caches before "
        "each call, beside a tight loop's",
    )
    parser.add_argument("--calls", type=int, default=300, help="calls per --cold figure (default 300)")
    args = parser.parse_args()

    env, attachments = sample()
    content_type, body = build_message(env, attachments, boundary="bench-boundary")
    print(f"message: {len(body)} bytes, {content_type.split(';')[0]}, 1 payload")

    def parse_strict() -> None:
        parse_message(body, content_type, mode=ParseMode.STRICT).close()

    soap = parse_message(body, content_type).soap

    def parse_no_schema() -> None:
        read_envelope(parse_xml(soap))

    def build() -> None:
        build_message(env, attachments, boundary="bench-boundary")

    target = 5000
    for name, fn in (
        ("parse+validate (strict, MIME+XML+schema+model)", parse_strict),
        ("  of which envelope only (XML+model, no schema)", parse_no_schema),
        ("build+serialise (model -> MIME bytes)", build),
    ):
        r = rate(fn, args.seconds, args.rounds)
        mark = (
            ""
            if name.startswith("  ")
            else (" (target >= 5,000: met)" if r >= target else " (target >= 5,000: NOT met)")
        )
        print(f"{name:<50} {r:>9,.0f} msgs/s median of {args.rounds}{mark}")
    if args.cold:
        print(
            f"\nCPU µs per call, median of {args.calls} calls: in a tight loop, and after reading each buffer "
            "through the caches (x: times the loop's)"
        )
        print(f"{'':<32}{'loop':>9}" + "".join(f"{'after ' + label:>22}" for label, _ in SWEEPS))
        for name, fn in (
            ("parse+validate", parse_strict),
            ("  envelope only", parse_no_schema),
            ("build+serialise", build),
        ):
            hot = per_call_us(fn, args.calls)
            line = f"{name:<32}{hot:>9.1f}"
            for _label, size in SWEEPS:
                cold = per_call_us(fn, args.calls, sweep_bytes=size)
                line += f"{cold:>14.1f} ({cold / hot:4.1f}x)"
            print(line)


if __name__ == "__main__":
    main()
