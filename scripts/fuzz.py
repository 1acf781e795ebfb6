#!/usr/bin/env python3
"""Fuzz the MSH's doors for a while and write a minimal reproducer for every new finding.

Feeds mutated inputs (:mod:`msh.faults.fuzz`) to the codec in both modes, raw-capture reading, the
agreement loader and the ASGI endpoint in process, in turn, until ``--minutes`` have passed. An input
whose outcome is not documented (an exception of another type than the project's own, an HTTP answer
the endpoint does not document) or whose work passes the linear bound is a finding; each new one (by
its signature: exception type and the place in the project's code) is minimised and written to ``--out``
as ``<name>.bin`` (the input) and ``<name>.json`` (target, Content-Type, outcome, traceback). At the end it
prints, per target, the inputs tried and their outcomes, the slowest input, and the peak memory.

    .venv/bin/python scripts/fuzz.py --minutes 30
    .venv/bin/python scripts/fuzz.py --replay fuzz-findings/parse-strict-ValueError-....json

Exit status: 0 when nothing was found, 1 when something was.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from msh.faults.fuzz import Mutator, Target, fingerprint, minimise, seeds, targets

ALL_TARGETS = ("parse-strict", "parse-lenient", "capture", "agreement", "endpoint")


@dataclass
class Tally:
    """What one target saw."""

    inputs: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    findings: Counter[str] = field(default_factory=Counter)
    slowest: tuple[float, int, str] = (0.0, 0, "")  # seconds of CPU, input size, fingerprint
    most_work: tuple[float, int, int] = (0.0, 0, 0)  # ops per byte beyond the fixed part, size, ops


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60]


def _write(out: Path, target: Target, data: bytes, content_type: str, signature: str, detail: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    name = f"{target.name}-{_slug(signature)}-{fingerprint(data)}"
    (out / f"{name}.bin").write_bytes(data)
    outcome = target.run(data, content_type)
    record = {
        "target": target.name,
        "contentType": content_type,
        "signature": signature,
        "kind": outcome.kind,
        "ops": outcome.ops,
        "bound": target.ops_fixed + target.ops_per_byte * len(data),
        "size": len(data),
        "detail": outcome.detail or detail,
        "input": f"{name}.bin",
    }
    path = out / f"{name}.json"
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def replay(path: Path) -> int:
    record = json.loads(path.read_text(encoding="utf-8"))
    target = targets([record["target"]])[0]
    try:
        data = (path.parent / record["input"]).read_bytes()
        outcome = target.run(data, record["contentType"])
        finding = target.finding(outcome, len(data))
        bound = target.ops_fixed + target.ops_per_byte * len(data)
        print(f"{path.name}: {outcome.kind}, ops {outcome.ops} (bound {bound})")
        if outcome.detail:
            print(outcome.detail)
        print("still a finding" if finding else "no longer a finding")
        return 1 if finding else 0
    finally:
        target.close()


def run(minutes: float, names: list[str], seed: int, out: Path) -> int:
    rng = random.Random(seed)
    mutator = Mutator(rng)
    chosen = targets(names)
    tallies = {t.name: Tally() for t in chosen}
    known: set[tuple[str, str]] = set()
    written: list[Path] = []
    started = time.monotonic()
    deadline = started + minutes * 60
    last_report = started
    try:
        while time.monotonic() < deadline:
            for target in chosen:
                pool = seeds(target.kind)
                base = rng.choice(pool)
                data, content_type = mutator.mutate(base, pool)
                cpu = time.process_time()
                outcome = target.run(data, content_type)
                cpu = time.process_time() - cpu
                tally = tallies[target.name]
                tally.inputs += 1
                tally.outcomes[outcome.kind] += 1
                if cpu > tally.slowest[0]:
                    tally.slowest = (cpu, len(data), fingerprint(data))
                if outcome.ops is not None:
                    per_byte = max(0, outcome.ops - target.ops_fixed) / max(len(data), 1)
                    if per_byte > tally.most_work[0]:
                        tally.most_work = (per_byte, len(data), outcome.ops)
                signature = target.finding(outcome, len(data))
                if signature is None:
                    continue
                tally.findings[signature] += 1
                if (target.name, signature) in known:
                    continue
                known.add((target.name, signature))
                small = minimise(target, data, content_type, signature)
                path = _write(out, target, small, content_type, signature, outcome.detail)
                written.append(path)
                print(
                    f"new finding in {target.name}: {signature} ({len(data)} bytes, minimised to {len(small)}): {path}",
                    flush=True,
                )
            now = time.monotonic()
            if sys.stdout.isatty() and now - last_report > 10:
                last_report = now
                total = sum(t.inputs for t in tallies.values())
                print(f"\r{(now - started) / 60:5.1f} min, {total} inputs, {len(known)} findings", end="", flush=True)
    finally:
        for target in chosen:
            target.close()
    if sys.stdout.isatty():
        print()
    elapsed = (time.monotonic() - started) / 60
    print(f"fuzzed for {elapsed:.1f} min (seed {seed}):")
    for name, tally in tallies.items():
        outcomes = ", ".join(f"{kind} {count}" for kind, count in tally.outcomes.most_common())
        print(f"  {name}: {tally.inputs} inputs: {outcomes}")
        cpu, size, fp = tally.slowest
        print(
            f"    slowest input {cpu * 1000:.1f} ms of CPU ({size} bytes, {fp}); most work "
            f"{tally.most_work[0]:.1f} ops/byte over the fixed part "
            f"({tally.most_work[1]} bytes, {tally.most_work[2]} ops)"
        )
        for signature, count in tally.findings.items():
            print(f"    FINDING {signature}: {count} input(s)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak RSS {peak:.0f} MB; findings: {len(known)}" + (f" (reproducers in {out})" if written else ""))
    return 1 if known else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="how long to fuzz (default 5)")
    parser.add_argument(
        "--targets", default=",".join(ALL_TARGETS), help=f"comma-separated, of: {', '.join(ALL_TARGETS)}"
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock, printed)")
    parser.add_argument("--out", type=Path, default=Path("fuzz-findings"), help="where reproducers go")
    parser.add_argument("--replay", type=Path, metavar="FINDING.json", help="run one reproducer again")
    args = parser.parse_args()
    if args.replay is not None:
        return replay(args.replay)
    names = [n.strip() for n in args.targets.split(",") if n.strip()]
    unknown = [n for n in names if n not in ALL_TARGETS]
    if unknown or args.minutes <= 0:
        parser.error(f"unknown target(s) {unknown}" if unknown else "--minutes must be positive")
    seed = args.seed if args.seed is not None else int(time.time())
    return run(args.minutes, names, seed, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
