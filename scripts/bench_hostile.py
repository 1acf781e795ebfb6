#!/usr/bin/env python3
"""How promptly the endpoint answers others while it processes hostile requests.

Starts party B's MSH (samples/config/party-b.toml, plain HTTP on a free port, SQLite in a temporary
folder) in this process, then, for each request of :mod:`msh.faults.hostile`: sends it ``--rounds`` times
one after the other from a thread while the main thread sends health checks (GET) on other connections,
and prints the time each hostile request took to be answered and the health checks' latency (p50, p99,
max) against the same figures with no hostile traffic (the baseline, measured first). Run it inside the
environment: ``.venv/bin/python scripts/bench_hostile.py``.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import tempfile
import threading
import time
import tomllib
from pathlib import Path

from msh.faults.hostile import HostileRequest, hostile_requests
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.msh import Msh
from msh.testing.threaded import serving_in_thread

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "samples" / "config" / "party-b.toml"


def settings_for(work: Path) -> Settings:
    data = tomllib.loads(CONFIG.read_text(encoding="utf-8"))
    data["server"] = {**data["server"], "tls": False, "port": 0, "host": "127.0.0.1"}
    data["store"] = {**data["store"], "url": str(work / "b.sqlite")}
    return settings_from_mapping(data, base_dir=CONFIG.parent, source=str(CONFIG), env={})


def get(port: int) -> float:
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("GET", "/msh")
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit(f"health check answered {response.status}")
    finally:
        conn.close()
    return time.perf_counter() - started


def post(port: int, request: HostileRequest) -> tuple[int, float]:
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request(
            "POST", "/msh", body=request.body, headers={"Content-Type": request.content_type, "SOAPAction": '"ebXML"'}
        )
        response = conn.getresponse()
        response.read()
        return response.status, time.perf_counter() - started
    finally:
        conn.close()


def attack(
    port: int, request: HostileRequest, rounds: int, answers: list[tuple[int, float]], done: threading.Event
) -> None:
    try:
        for _ in range(rounds):
            answers.append(post(port, request))
    finally:
        done.set()


def percentiles(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"p50 {statistics.median(ms):6.1f} ms  p99 {p99:6.1f} ms  max {ms[-1]:6.1f} ms  (n={len(ms)})"


def measure(port: int, rounds: int, baseline_checks: int) -> None:
    for _ in range(20):
        get(port)  # warm up
    baseline = [get(port) for _ in range(baseline_checks)]
    print(f"health checks, no hostile traffic:         {percentiles(baseline)}")
    for request in hostile_requests():
        answers: list[tuple[int, float]] = []
        done = threading.Event()
        attacker = threading.Thread(target=attack, args=(port, request, rounds, answers, done), daemon=True)
        attacker.start()
        checks: list[float] = []
        while not done.is_set():
            checks.append(get(port))
        attacker.join()
        statuses = sorted({status for status, _ in answers})
        took = statistics.median(seconds for _, seconds in answers) * 1000
        print(f"\n{request.name} ({len(request.body) // 1024} KB): answered {statuses}, median {took:.1f} ms")
        print(f"  health checks meanwhile:                 {percentiles(checks) if checks else 'none'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="times each hostile request is sent (default 10)")
    parser.add_argument("--baseline", type=int, default=300, help="health checks for the baseline (default 300)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="msh-bench-hostile-") as work:
        settings = settings_for(Path(work))
        msh = Msh(settings)
        try:
            with serving_in_thread(settings, msh) as port:
                measure(port, args.rounds, args.baseline)
        finally:
            msh.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
