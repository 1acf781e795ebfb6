#!/usr/bin/env python3
"""Benchmark the reliable exchange end to end, against the bare HTTP stack it runs on, in messages/s.

What it measures (every figure is the median over ``--repeats`` runs; this machine is noisy):

bare HTTP loop
    The MSH's own server and client stack with nothing of the MSH in it: uvicorn (httptools, uvloop) in a
    process of its own serving a trivial ASGI echo app over HTTPS with mutual TLS (party B's certificate,
    client certificates required and checked against party A's), and an aiohttp ClientSession in this
    process (party A's client certificate, trusting B's) posting a 2 KB body with ``--in-flight`` requests
    outstanding. Latency is one POST, request start to response read.

reliable exchange
    Partner B is a real ``msh serve`` process; partner A is :class:`msh.runtime.msh.Msh` serving in this
    process (so acknowledgments can reach it). Both use durable SQLite files (WAL, synchronous=FULL) or, with
    ``--store postgresql``, a PostgreSQL schema each (created for the run and dropped after), the
    agreement ``samples/cpas/demo-a-b.xml`` (copied with free ports): AckRequested, DuplicateElimination and
    synchronous acknowledgments (mshSignalsOnly), HTTPS with mutual TLS. A submits ``--messages`` messages
    with a 2 KB payload, keeping ``--in-flight`` submitted-but-not-acknowledged; a new one is submitted when
    ``on_delivered`` fires. Latency is the start of the submission to ``on_delivered``. Three ways to submit,
    all public API: "async" awaits ``Msh.submit_async`` in a task on the event loop (an asyncio
    application), "direct" calls the blocking ``Msh.submit`` on the event loop thread, "executor" calls it on
    a single-thread executor (a threaded application). All three are measured unless ``--submit-mode`` says
    otherwise, and the fastest is used for the ratio. The line under each figure gives A's group commit:
    message steps committed per store transaction (mean), from the MSH's writer statistics.
    Each run starts fresh stores and a fresh B, and first sends ``--warmup`` untimed messages (TLS handshakes,
    first-use caches).

signed and unsigned
    The reliable exchange runs twice in each repeat, interleaved: signed, as the agreement says (both
    parties sign every message and signal with rsa-sha256 / sha256 in the ebMS2 §4.1.3 profile, and verify
    what they receive against the other's certificate in the agreement), and unsigned (the same agreement
    without its SenderNonRepudiation elements). "signed/unsigned" is the price of message security (target:
    at least 0.5). The line under each signed figure counts, from A's store journal, the messages A
    signed, and the acknowledgments signed and verified, from the counters of A's runtime.

stores
    ``--store sqlite,postgresql`` measures every figure on both kinds of store, interleaved, beside one bare
    loop. ``--prefill N`` adds the same figures on stores that already hold N past messages (A's: sent and
    acknowledged, B's: received and settled by the application, with their journal; see
    ``scripts/prefill_store.py``), loaded once per kind of store before the timed runs and used by all of
    them, and prints each prefilled figure as a share of the empty store's (target: at least 0.9).
    ``--disk-usage`` prints, after the empty-store runs, the bytes per stored message of each table and
    index at A and at B.

other bindings
    ``--transport http,smtp,amqp`` adds the reliable exchange over SMTP (ebMS2 Appendix B.3: each partner
    runs its own SMTP listener, ``[smtpd]``, and sends through the other's as its relay) and over an AMQP 1.0
    broker (each partner consumes its own new address; ``--amqp-url``, RabbitMQ with its AMQP 1.0 plugin by
    default), on SQLite stores, interleaved with the HTTP runs, and prints each beside HTTP's figure of the
    same submit mode and security as a ratio. Acknowledgments travel back over the binding (asynchronously:
    the agreement's syncReplyMode becomes none, ebMS2 B.3.3); HTTP keeps its synchronous ones.

How to read the output: msgs/s is completed messages (acknowledged at A) per wall-clock second of the timed
part; p50/p99 are latency percentiles in milliseconds. "CPU" is the process CPU time (user+system, all
threads) during the timed part, in ms per message, and as a share of wall time (1.00 = one core busy); on
a 2-core machine A+B near 2.0 means the exchange is CPU-bound. "reliable/bare" is the price of reliability
(store commits with fsync, ebXML compose/parse, acknowledgment) relative to the transport alone. The
"targets" table puts each figure beside the targets of issue 24 (unsigned at least 2,000 msgs/s and 0.2 of
the bare loop, signed at least 1,000 msgs/s, CPU at most 0.5 ms per message on each side) and says "met" or
"MISSED" from the figures of the run. "CPU by thread" splits each side's CPU by the part of the MSH that spent
it (its event loop, its store writer, its work pool; read per thread from /proc by the names the MSH gives its
threads, ``msh.threadnames``), for the run of median rate; beside the store writer's time per transaction it
prints the CPU its thread spent: the rest of that time it waited, for the disk flush, for a core or for the
interpreter lock.
``--profile`` adds one short run of the reliable exchange with cProfile (CPU time of each thread) on partner
A's event-loop thread and its store writer thread (and the submit thread in executor mode), prints the top
functions by cumulative time, and saves each thread's profile in ``--profile-dir``: ``<thread>.pstats``
(``python -m pstats``, snakeviz, gprof2dot) and ``<thread>.collapsed`` (collapsed stacks for flamegraph.pl,
inferno or speedscope; rebuilt from cProfile's caller/callee pairs, so approximate where a function has
several callers).
Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import logging
import os
import pstats
import re
import select
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

KEYS = ROOT / "samples" / "keys"
CONFIG = ROOT / "samples" / "config"
CPA = ROOT / "samples" / "cpas" / "demo-a-b.xml"
PARTY_B = ("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")
SERVICE, ACTION = "urn:example:services:ordering", "NewOrder"
TARGET = 2000.0  # reliable unsigned msgs/s asked for by issue 24
BARE_TARGET = 0.2  # reliable unsigned / bare loop asked for by issue 24
CPU_TARGET = 0.5  # CPU ms per message on each side asked for by issue 24
SIGNED_RATE_TARGET = 1000.0  # reliable signed msgs/s asked for by issue 24
SIGNED_TARGET = 0.5  # signed / unsigned reliable throughput asked for by issue 13
PREFILL_TARGET = 0.9  # prefilled / empty store throughput asked for by issue 24 ("within 10%")
PG_URL = os.environ.get("MSH_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
BACKENDS = ("sqlite", "postgresql")
_T = TypeVar("_T")


# ------------------------------------------------------------------------------------------------ helpers


def payload(size: int = 2048) -> bytes:
    """An XML order of about ``size`` bytes."""
    line = b"<line><item>bench item</item><quantity>3</quantity></line>"
    head, tail = b"<?xml version='1.0'?><order>", b"</order>"
    return head + line * ((size - len(head) - len(tail)) // len(line)) + tail


def new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(coro: Coroutine[Any, Any, _T]) -> _T:
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coro)


def self_cpu() -> float:
    """CPU seconds (user+system, all threads) of this process."""
    t = os.times()
    return t.user + t.system


def child_cpu(pid: int) -> float:
    """CPU seconds (utime+stime) of process ``pid``, from /proc/<pid>/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # fields 14 and 15 of stat(5)


THREAD_PARTS = (
    ("msh-writer", "store writer"),
    ("msh-work", "work pool"),
    ("msh-amqp", "AMQP client"),
    ("bench-submit", "submit thread"),  # --submit-mode executor
)
"""Operating-system thread names (msh.threadnames) and the part of an MSH each belongs to; the main thread is
the event loop; any other thread counts as "other"."""


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds (utime+stime) of each thread of process ``pid``, with its operating-system name, by thread
    id, from /proc/<pid>/task (empty where there is no /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    threads: dict[int, tuple[str, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return threads
    for tid in tids:
        try:
            text = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        fields = text[text.rindex(")") + 2 :].split()
        threads[int(tid)] = (text[text.index("(") + 1 : text.rindex(")")], (int(fields[11]) + int(fields[12])) / tick)
    return threads


def cpu_by_part(
    pid: int, before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
) -> dict[str, float]:
    """The CPU seconds each part of process ``pid`` spent between two :func:`thread_cpu` readings (a thread
    that ended in between is not counted)."""
    parts: dict[str, float] = {}
    for tid, (name, seconds) in after.items():
        part = (
            "event loop" if tid == pid else next((p for prefix, p in THREAD_PARTS if name.startswith(prefix)), "other")
        )
        parts[part] = parts.get(part, 0.0) + seconds - before.get(tid, (name, 0.0))[1]
    return parts


def parts_text(parts: dict[str, float], count: int) -> str:
    """``parts`` in ms per message, in the order of :data:`THREAD_PARTS` (the event loop first)."""
    order = ["event loop", *(p for _prefix, p in THREAD_PARTS), "other"]
    return ", ".join(f"{p} {parts[p] / count * 1000:.2f}" for p in order if parts.get(p, 0.0) > 0) or "not read"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client_context() -> ssl.SSLContext:
    """Party A's TLS client context: trusts B's certificate, presents A's (as msh.transport.tls does)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_verify_locations(cafile=str(KEYS / "party-b.cert.pem"))
    context.load_cert_chain(str(KEYS / "party-a.cert.pem"), str(KEYS / "party-a.key.pem"))
    return context


@dataclass
class Run:
    """One timed run: completed messages, wall seconds, latencies (s), CPU seconds of each side."""

    count: int
    seconds: float
    latencies: list[float]
    cpu_a: float
    cpu_b: float
    failures: int = 0
    mean_batch: float = 0.0
    batch_ms: float = 0.0
    commit_ms: float = 0.0
    submit_ms: float = 0.0  # p50 of submission start -> committed (the call returned)
    exchange_ms: float = 0.0  # p50 of committed -> acknowledged (transmission, B, the acknowledgment's commit)
    signed: int = 0  # messages of the timed part A's journal records as signed
    acks_verified: int = 0  # signatures A verified in the timed part (B's acknowledgments)
    disk: tuple[dict[str, int], dict[str, int]] | None = None  # bytes by table/index at A and B (--disk-usage)
    stored: int = 0  # messages in the stores after the run (warm-up + timed)
    threads_a: dict[str, float] = field(default_factory=dict)  # CPU seconds by part of A (cpu_by_part)
    threads_b: dict[str, float] = field(default_factory=dict)  # the same of B
    batches: int = 0  # transactions of A's store writer in the run

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    def percentile(self, q: int) -> float:
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[q - 1] * 1000


@dataclass
class Figures:
    name: str
    runs: list[Run] = field(default_factory=list)

    def median(self, fn: Callable[[Run], float]) -> float:
        return statistics.median(fn(r) for r in self.runs)

    @property
    def rate(self) -> float:
        return self.median(lambda r: r.rate)

    def line(self) -> str:
        rates = ", ".join(f"{r.rate:,.0f}" for r in self.runs)
        fails = sum(r.failures for r in self.runs)
        return (
            f"{self.name:<28} {self.rate:>7,.0f} msgs/s  p50 {self.median(lambda r: r.percentile(50)):6.1f} ms  "
            f"p99 {self.median(lambda r: r.percentile(99)):6.1f} ms  (runs: {rates})"
            + (f"  FAILED {fails}" if fails else "")
        )

    def cpu_line(self) -> str:
        a = self.median(lambda r: r.cpu_a / r.count * 1000)
        b = self.median(lambda r: r.cpu_b / r.count * 1000)
        ua = self.median(lambda r: r.cpu_a / r.seconds)
        ub = self.median(lambda r: r.cpu_b / r.seconds)
        line = (
            f"{'':<28} CPU: A (this process) {a:.2f} ms/msg ({ua:.2f} cores), "
            f"B (server process) {b:.2f} ms/msg ({ub:.2f} cores)"
            f"\n{'':<28} {ceiling_text(a, b)}"
        )
        if any(r.signed or r.acks_verified for r in self.runs):
            line += (
                f"\n{'':<28} signed by A (its journal): {self.median(lambda r: r.signed):,.0f} of "
                f"{self.median(lambda r: r.count):,.0f} messages; B's acknowledgments verified by A: "
                f"{self.median(lambda r: r.acks_verified):,.0f}"
            )
        if any(r.threads_a or r.threads_b for r in self.runs):
            middle = sorted(self.runs, key=lambda r: r.rate)[len(self.runs) // 2]
            line += (
                f"\n{'':<28} CPU by thread, ms/msg (the run of median rate): A: "
                f"{parts_text(middle.threads_a, middle.count)}; B: {parts_text(middle.threads_b, middle.count)}"
            )
        if any(r.mean_batch for r in self.runs):
            line += (
                f"\n{'':<28} where the time goes (p50): submit -> committed "
                f"{self.median(lambda r: r.submit_ms):.1f} ms, "
                f"committed -> acknowledged {self.median(lambda r: r.exchange_ms):.1f} ms"
                f"\n{'':<28} A's store writer: {self.median(lambda r: r.mean_batch):.1f} steps per transaction, "
                f"{self.median(lambda r: r.batch_ms):.2f} ms per transaction of which "
                f"{self.median(lambda r: r.commit_ms):.2f} ms commit (fsync)"
            )
            if any(r.batches and "store writer" in r.threads_a for r in self.runs):
                cpu = self.median(lambda r: r.threads_a.get("store writer", 0.0) / max(1, r.batches) * 1000)
                line += (
                    f", its thread's CPU {cpu:.2f} ms per transaction (the rest of the transaction's time it waits: "
                    "for the disk, a core, the interpreter lock)"
                )
        return line


def ceilings(cpu_a_ms: float, cpu_b_ms: float, cores: int) -> tuple[float, float, float]:
    """The highest rates these CPU figures allow (msgs/s): A's process, B's process, and both on ``cores``.

    A process's Python code runs one thread at a time (the interpreter lock), so a side cannot use much more
    than one core: its rate is at most about 1,000 / its CPU ms per message. Both sides share the machine's
    cores: together at most cores x 1,000 / (A + B)."""
    a = 1000 / cpu_a_ms if cpu_a_ms > 0 else float("inf")
    b = 1000 / cpu_b_ms if cpu_b_ms > 0 else float("inf")
    both = cores * 1000 / (cpu_a_ms + cpu_b_ms) if cpu_a_ms + cpu_b_ms > 0 else float("inf")
    return a, b, both


def ceiling_text(cpu_a_ms: float, cpu_b_ms: float) -> str:
    """The line under a run's CPU figures: what rate they allow at most, and which side binds first."""
    cores = len(os.sched_getaffinity(0))
    a, b, both = ceilings(cpu_a_ms, cpu_b_ms, cores)
    lowest = min((a, "A's process"), (b, "B's process"), (both, f"the {cores} cores"))
    return (
        f"ceiling at this CPU: A <= {a:,.0f}, B <= {b:,.0f} msgs/s (one core each: one thread of Python at a "
        f"time), both on {cores} cores <= {both:,.0f}; the first bound: {lowest[1]}"
    )


# ------------------------------------------------------------------------------------ bare HTTP loop


async def _echo_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    headers = [(b"content-type", b"text/xml; charset=UTF-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve_echo() -> None:
    """The bare server (child process): uvicorn+httptools+uvloop, mTLS built like msh.transport.tls."""
    import uvicorn

    from msh.transport.server import bind
    from msh.transport.tls import server_context

    config = uvicorn.Config(
        _echo_app,
        http="httptools",
        loop="none",
        lifespan="off",
        access_log=False,
        log_config=None,
        timeout_keep_alive=30,
        server_header=False,
    )
    config.load()
    config.ssl = server_context(
        certificate=KEYS / "party-b.cert.pem",
        private_key=KEYS / "party-b.key.pem",
        client_anchors_pem=(KEYS / "party-a.cert.pem").read_text(),
        require_client_certificate=True,
    )
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(config)

    async def main() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        print(f"listening {sock.getsockname()[1]}", flush=True)
        await task

    run(main())


@contextlib.contextmanager
def echo_server(work: Path) -> Iterator[tuple[int, int]]:
    """Start the bare server process; yield (pid, port); always terminate it."""
    log = open(work / "echo.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve-echo"], stdout=subprocess.PIPE, stderr=log
    )
    try:
        assert proc.stdout is not None
        readable, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline().decode() if readable else ""
        if not line.startswith("listening "):
            raise RuntimeError(f"echo server did not start:\n{(work / 'echo.log').read_text(errors='replace')}")
        yield proc.pid, int(line.split()[1])
    finally:
        _terminate(proc)
        log.close()


async def bare_loop(port: int, pid: int, n: int, in_flight: int, warmup: int, body: bytes) -> Run:
    import aiohttp

    url = f"https://127.0.0.1:{port}/msh"
    context = client_context()
    headers = {"Content-Type": "text/xml; charset=UTF-8", "SOAPAction": '"ebXML"'}
    connector = aiohttp.TCPConnector(limit=in_flight * 2, limit_per_host=in_flight, keepalive_timeout=30)
    timeout = aiohttp.ClientTimeout(total=10, connect=5)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector, auto_decompress=False) as session:

        async def one() -> float:
            start = time.perf_counter()
            async with session.post(url, data=body, headers=headers, ssl=context) as response:
                answer = await response.read()
                if response.status != 200 or len(answer) != len(body):
                    raise RuntimeError(f"echo server answered HTTP {response.status}, {len(answer)} bytes")
            return time.perf_counter() - start

        await asyncio.wait_for(asyncio.gather(*(one() for _ in range(warmup))), 30)
        latencies: list[float] = []
        left = n

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                latencies.append(await one())

        cpu_a, cpu_b = self_cpu(), child_cpu(pid)
        start = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(in_flight))), max(30.0, n / 50))
        seconds = time.perf_counter() - start
        return Run(n, seconds, latencies, self_cpu() - cpu_a, child_cpu(pid) - cpu_b)


# --------------------------------------------------------------------------------- reliable exchange


def write_cpa(
    work: Path, port_a: int, port_b: int, *, signed: bool = True, endpoints: tuple[str, str] | None = None
) -> Path:
    """A copy of the demo agreement with the endpoints on ``port_a``/``port_b`` (the copy itself carries no
    signature); ``signed`` False leaves out its SenderNonRepudiation elements: nothing is signed.
    ``endpoints`` (A's URL, B's URL, and the protocol): another binding's endpoints instead (see
    :func:`transport_settings`)."""
    text = CPA.read_text(encoding="utf-8")
    for old, new in (("https://127.0.0.1:8081/msh", port_a), ("https://127.0.0.1:8082/msh", port_b)):
        if text.count(old) != 1:
            raise RuntimeError(f"{CPA}: expected the endpoint {old} once")
        text = text.replace(old, f"https://127.0.0.1:{new}/msh")
    if not signed:
        text, removed = re.subn(r"\s*<tp:SenderNonRepudiation>.*?</tp:SenderNonRepudiation>", "", text, flags=re.S)
        if not removed:
            raise RuntimeError(f"{CPA}: expected SenderNonRepudiation elements to leave out")
    path = work / "demo-a-b.xml"
    path.write_text(text, encoding="utf-8")
    if endpoints is not None:
        from msh.faults.transport_pair import move_endpoints

        url_a, url_b, protocol = endpoints
        move_endpoints(
            path, {f"https://127.0.0.1:{port_a}/msh": url_a, f"https://127.0.0.1:{port_b}/msh": url_b}, protocol
        )
    return path


def transport_settings(
    transport: str, work: Path, amqp_url: str
) -> tuple[tuple[str, str, str] | None, dict[str, str], dict[str, str]]:
    """For ``transport`` (http, smtp, amqp): the endpoints the agreement gets (None: its HTTPS ones) and the
    MSH_<SECTION>_<KEY> settings of A and of B. Over smtp each partner runs an SMTP listener and sends
    through the other's; over amqp each consumes its own new address on the broker (user guest)."""
    if transport == "http":
        return None, {}, {}
    if transport == "smtp":
        ports = {"a": free_port(), "b": free_port()}
        env: dict[str, dict[str, str]] = {}
        for me, other in (("a", "b"), ("b", "a")):
            env[me] = {
                "MSH_SMTP_HOST": "127.0.0.1",
                "MSH_SMTP_PORT": str(ports[other]),
                "MSH_SMTP_SECURITY": "none",
                "MSH_SMTP_FROM_ADDRESS": f"msh-{me}@party-{me}.test",
                "MSH_SMTPD_ENABLED": "true",
                "MSH_SMTPD_HOST": "127.0.0.1",
                "MSH_SMTPD_PORT": str(ports[me]),
                "MSH_SMTPD_DEAD_LETTERS": str(work / f"dead-letters-{me}"),
            }
        return ("mailto:msh-a@party-a.test", "mailto:msh-b@party-b.test", "SMTP"), env["a"], env["b"]
    secret = work / "amqp.password"
    secret.write_text("guest\n", encoding="utf-8")
    run_id = os.urandom(4).hex()
    urls = {me: f"{amqp_url.rstrip('/')}/queue/bench-{me}-{run_id}" for me in ("a", "b")}
    env = {
        me: {
            "MSH_AMQP_ENABLED": "true",
            "MSH_AMQP_URL": urls[me],
            "MSH_AMQP_USERNAME": "guest",
            "MSH_AMQP_PASSWORD": f"file:{secret}",
        }
        for me in ("a", "b")
    }
    return (urls["a"], urls["b"], "AMQP"), env["a"], env["b"]


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextlib.contextmanager
def partner_b(work: Path, cpa: Path, port: int, store_url: str, extra: dict[str, str] | None = None) -> Iterator[int]:
    """``msh serve`` as partner B (its store at ``store_url``, ``extra`` settings); yield its pid; always
    terminate it."""
    env = {
        **os.environ,
        "MSH_STORE_URL": store_url,
        "MSH_SERVER_PORT": str(port),
        "MSH_AGREEMENTS_PATHS": str(cpa),
        **(extra or {}),
    }
    log_path = work / "b.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    cmd = [sys.executable, "-m", "msh.cli", "serve", "--config", str(CONFIG / "party-b.toml"), "--log-level", "warning"]
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while "listening on" not in log_path.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"partner B did not start:\n{log_path.read_text(errors='replace')}")
            time.sleep(0.05)
        yield proc.pid
    finally:
        _terminate(proc)
        log.close()
        problems = [ln for ln in log_path.read_text(errors="replace").splitlines() if "ERROR" in ln or "Trace" in ln]
        if problems:
            print(f"  partner B logged problems (see {log_path}):\n    " + "\n    ".join(problems[:10]))


class Driver:
    """Keeps ``in_flight`` messages submitted and not yet acknowledged; records submit and delivery times."""

    def __init__(self, mode: str, in_flight: int, body: bytes) -> None:
        from msh.runtime.compose import Payload, Submission
        from msh.threadnames import name_os_thread

        self.mode = mode
        self.in_flight = in_flight
        self.submission = Submission(PARTY_B, SERVICE, ACTION, (Payload(body, "application/xml"),))
        self.pool = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-submit", initializer=name_os_thread)
            if mode == "executor"
            else None
        )
        self.msh: Any = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.started: dict[str, float] = {}
        self.committed_at: dict[str, float] = {}
        self.finished_at: dict[str, float] = {}
        self.failed: dict[str, str] = {}
        self.to_submit = 0
        self.pending = 0
        self.done = asyncio.Event()
        self.error: BaseException | None = None

    # called by the MSH on the event loop
    def on_delivered(self, message_id: str) -> None:
        self._finished(message_id)

    def on_failed(self, message_id: str, issue: object) -> None:
        self.failed[message_id] = str(issue)
        self._finished(message_id)

    def _finished(self, message_id: str) -> None:
        self.finished_at[message_id] = time.perf_counter()
        self.pending -= 1
        if self.to_submit > 0:
            self._next()
        elif self.pending <= 0:
            self.done.set()

    def _submit_one(self) -> None:
        try:
            start = time.perf_counter()
            message_id = self.msh.submit(self.submission)
            self.committed_at[message_id] = time.perf_counter()
            self.started[message_id] = start
        except BaseException as exc:  # surfaced by batch()
            self.error = exc
            assert self.loop is not None
            self.loop.call_soon_threadsafe(self.done.set)

    async def _submit_async(self) -> None:
        try:
            start = time.perf_counter()
            message_id = await self.msh.submit_async(self.submission)
            self.committed_at[message_id] = time.perf_counter()
            self.started[message_id] = start
        except BaseException as exc:  # surfaced by batch()
            self.error = exc
            self.done.set()

    def _next(self) -> None:
        assert self.loop is not None
        self.to_submit -= 1
        self.pending += 1
        if self.mode == "async":
            task = self.loop.create_task(self._submit_async())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        elif self.pool is None:
            self.loop.call_soon(self._submit_one)
        else:
            self.loop.run_in_executor(self.pool, self._submit_one)

    async def batch(self, n: int, timeout: float) -> tuple[float, list[float], int]:
        """Send ``n`` messages; return wall seconds, latencies and the number that failed."""
        self.loop = asyncio.get_running_loop()
        self.started.clear()
        self.committed_at.clear()
        self.finished_at.clear()
        self.failed.clear()
        self.done.clear()
        self.to_submit, self.pending = n, 0
        start = time.perf_counter()
        for _ in range(min(n, self.in_flight)):
            self._next()
        try:
            await asyncio.wait_for(self.done.wait(), timeout)
        except TimeoutError:
            raise RuntimeError(
                f"reliable exchange: only {len(self.finished_at)} of {n} messages final after {timeout:g} s"
            ) from None
        seconds = time.perf_counter() - start
        if self.error is not None:
            raise self.error
        latencies = [self.finished_at[m] - t for m, t in self.started.items() if m in self.finished_at]
        return seconds, latencies, len(self.failed)

    def stage_medians(self) -> tuple[float, float]:
        """p50 in ms of submission -> commit and of commit -> acknowledgment, over the last batch."""
        submit = [self.committed_at[m] - t for m, t in self.started.items() if m in self.committed_at]
        # on_delivered may run before submit() returns to a thread: count such a message as 0 ms.
        rest = [max(0.0, self.finished_at[m] - c) for m, c in self.committed_at.items() if m in self.finished_at]
        return statistics.median(submit) * 1000, statistics.median(rest) * 1000


async def reliable_exchange(
    store_url: str,
    cpa: Path,
    port_a: int,
    b_pid: int,
    args: argparse.Namespace,
    mode: str,
    n: int,
    profile: str | None = None,
    extra: dict[str, str] | None = None,
    step_times: bool = False,
) -> Run:
    from msh.runtime.config import load_settings
    from msh.runtime.msh import Msh
    from msh.runtime.receivers import receivers_from
    from msh.runtime.serving import bind, serve

    env = {
        "MSH_STORE_URL": store_url,
        "MSH_SERVER_PORT": str(port_a),
        "MSH_AGREEMENTS_PATHS": str(cpa),
        **(extra or {}),
    }
    settings = load_settings(CONFIG / "party-a.toml", env=env)
    driver = Driver(mode, args.in_flight, payload())
    msh = Msh(settings, on_delivered=driver.on_delivered, on_failed=driver.on_failed)
    driver.msh = msh
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[int] = loop.create_future()
    stop = asyncio.Event()
    receivers = receivers_from(settings, msh)  # the SMTP listener or broker consumer of another binding
    task = asyncio.create_task(
        serve(settings, msh, sock=bind("127.0.0.1", port_a), ready=ready.set_result, stop=stop, companions=receivers)
    )
    profilers: dict[str, cProfile.Profile] = {}
    try:
        await asyncio.wait_for(asyncio.shield(ready), 30)
        await driver.batch(args.warmup, 60)
        if profile:
            profilers = {name: cProfile.Profile(time.thread_time) for name in ("event loop thread", "store writer")}
            await msh.writer.run(lambda tx: profilers["store writer"].enable())  # on the writer's thread
            if driver.pool is not None:
                profilers["submit thread"] = cProfile.Profile(time.thread_time)
                await loop.run_in_executor(driver.pool, profilers["submit thread"].enable)
            profilers["event loop thread"].enable()
        stats = msh.writer.stats
        batches, units, busy, commit = stats.batches, stats.units, stats.busy_seconds, stats.commit_seconds
        cpu_a, cpu_b = self_cpu(), child_cpu(b_pid)
        threads_a, threads_b = thread_cpu(os.getpid()), thread_cpu(b_pid)
        verified = msh.counters["signatures-verified"]
        with contextlib.ExitStack() as timing:
            steps = None
            if step_times:
                from step_times import timed_steps

                steps = timing.enter_context(timed_steps())
            seconds, latencies, failures = await driver.batch(n, max(60.0, n / 20))
        result = Run(n, seconds, latencies, self_cpu() - cpu_a, child_cpu(b_pid) - cpu_b, failures)
        result.threads_a = cpu_by_part(os.getpid(), threads_a, thread_cpu(os.getpid()))
        result.threads_b = cpu_by_part(b_pid, threads_b, thread_cpu(b_pid))
        result.acks_verified = msh.counters["signatures-verified"] - verified
        result.signed = _signed_submissions(msh, set(driver.started))
        result.batches = stats.batches - batches
        done = max(1, result.batches)
        result.mean_batch = (stats.units - units) / done
        result.batch_ms = (stats.busy_seconds - busy) / done * 1000
        result.commit_ms = (stats.commit_seconds - commit) / done * 1000
        result.submit_ms, result.exchange_ms = driver.stage_medians()
        if profile:
            profilers["event loop thread"].disable()
            await msh.writer.run(lambda tx: profilers["store writer"].disable())
            if driver.pool is not None:
                await loop.run_in_executor(driver.pool, profilers["submit thread"].disable)
            _print_profiles(profilers, n, profile)
        if steps is not None:
            print("\n".join(steps.lines(n, STEP_REPEAT, _close_replayed)))
        return result
    finally:
        stop.set()
        try:
            await asyncio.wait_for(task, 30)
        finally:
            if driver.pool is not None:
                driver.pool.shutdown(wait=True)
            msh.close()


STEP_REPEAT = 300
"""Calls of each step in the loop that --step-times prints beside the run's figure."""


def _close_replayed(result: object) -> None:
    """Release what a step called again by --step-times returned (a prepared submission, a read answer)."""
    inbound = result[0] if isinstance(result, tuple) else result
    close = getattr(inbound, "close", None)
    if close is not None:
        close()


def _signed_submissions(msh: Any, message_ids: set[str]) -> int:
    """How many of ``message_ids`` A's store journal records as submitted signed."""
    signed, after = 0, 0
    while True:
        with msh.store.transaction(readonly=True) as tx:
            events = tx.list_events(after, limit=5000)
        if not events:
            return signed
        signed += sum(
            1
            for e in events
            if e.kind == "submitted" and e.message_id in message_ids and e.detail.get("signed") is True
        )
        after = events[-1].id


def _print_profiles(profilers: dict[str, cProfile.Profile], n: int, directory: str) -> None:
    """Print the top functions of each thread's profile; dump each (pstats) and its collapsed stacks."""
    out_dir = Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, profiler in profilers.items():
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        print(f"\n--- cProfile, partner A, {name}: {stats.total_tt:.2f} s CPU over {n} messages, top 25 by cumulative")
        slug = name.replace(" ", "-")
        stats.dump_stats(out_dir / f"{slug}.pstats")
        (out_dir / f"{slug}.collapsed").write_text(collapsed_stacks(stats), encoding="utf-8")
        stats.strip_dirs().sort_stats("cumulative").print_stats(25)
        text = out.getvalue()
        print(text[text.find("   ncalls") :].rstrip())
        print(
            f"    saved: {out_dir / (slug + '.pstats')} (pstats), {out_dir / (slug + '.collapsed')} (collapsed stacks)"
        )


def collapsed_stacks(stats: pstats.Stats, min_us: int = 200) -> str:
    """The profile as collapsed stacks (``caller;callee microseconds`` a line), for flamegraph.pl, speedscope
    or inferno. cProfile keeps caller -> callee edges, not whole stacks: each stack is rebuilt along the
    heaviest callers, so a function called from several places is split by its callers' share of its time."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]

    def label(func: tuple[str, int, str]) -> str:
        file, line, name = func
        return f"{name}@{Path(file).name}:{line}".replace(";", ",").replace(" ", "_")

    lines: dict[str, float] = {}
    callees: dict[Any, list[tuple[Any, float]]] = {}
    for callee, (_cc, _nc, _tt, _ct, callers) in raw.items():
        for caller, edge in callers.items():
            callees.setdefault(caller, []).append((callee, edge[3]))  # callee's cumulative time from caller

    def walk(func: Any, path: tuple[Any, ...], seconds: float) -> None:
        _cc, _nc, tt, ct, _callers = raw[func]
        if seconds * 1e6 < min_us or len(path) > 60:
            return
        stack = (*path, func)
        share = min(1.0, seconds / ct) if ct else 0.0
        for callee, edge_ct in callees.get(func, ()):
            if callee not in stack:
                walk(callee, stack, edge_ct * share)
        if tt * share * 1e6 >= 1:
            key = ";".join(label(f) for f in stack)
            lines[key] = lines.get(key, 0.0) + tt * share

    roots = [f for f, v in raw.items() if not v[4]]
    for root in roots:
        walk(root, (), raw[root][3])
    return "".join(f"{k} {round(v * 1e6)}\n" for k, v in sorted(lines.items()))


@contextlib.contextmanager
def store_pair(work: Path, backend: str, pg_url: str) -> Iterator[tuple[str, str]]:
    """Fresh stores for A and B: SQLite files in ``work``, or a PostgreSQL schema each (dropped after)."""
    if backend == "sqlite":
        yield str(work / "party-a.sqlite"), str(work / "party-b.sqlite")
        return
    import uuid

    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(pg_url)
    tag = uuid.uuid4().hex[:10]
    schemas = (f"msh_bench_{tag}_a", f"msh_bench_{tag}_b")

    def admin() -> Any:
        return psycopg.connect(
            host=url.host or "127.0.0.1",
            port=url.port or 5432,
            user=url.username or "postgres",
            password=url.password,
            dbname=url.database or "postgres",
            autocommit=True,
            connect_timeout=5,
        )

    with admin() as conn:
        for schema in schemas:
            conn.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in pg_url else "?"
    try:
        a, b = (f"{pg_url}{separator}options=-csearch_path%3D{schema}" for schema in schemas)
        yield a, b
    finally:
        with admin() as conn:
            for schema in schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def disk_use(store_url: str) -> dict[str, int]:
    """Bytes each table and index of the store takes (SQLite: pages by dbstat; PostgreSQL: relation sizes)."""
    from sqlalchemy import text

    from msh.store.sql.connect import connect

    engine = connect(store_url, migrate=False)
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                rows = conn.execute(text("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")).all()
            else:
                rows = conn.execute(
                    text(
                        "SELECT c.relname, "
                        "pg_relation_size(c.oid) + COALESCE(pg_total_relation_size(c.reltoastrelid), 0) "
                        "FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace "
                        "WHERE s.nspname = current_schema() AND c.relkind IN ('r', 'i')"
                    )
                ).all()
            return {str(name): int(size) for name, size in rows}
    finally:
        engine.dispose()


def one_reliable(
    args: argparse.Namespace,
    mode: str,
    n: int,
    profile: str | None = None,
    signed: bool = True,
    backend: str = "sqlite",
    stores: tuple[str, str] | None = None,
    transport: str = "http",
    step_times: bool = False,
) -> Run:
    """One reliable run on fresh stores of ``backend``, or on the given (prefilled) ``stores``, over
    ``transport``."""
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="msh-bench-")))
        store_a, store_b = stores or stack.enter_context(store_pair(work, backend, args.pg_url))
        port_a, port_b = free_port(), free_port()
        while port_b == port_a:
            port_b = free_port()
        endpoints, env_a, env_b = transport_settings(transport, work, args.amqp_url)
        cpa = write_cpa(work, port_a, port_b, signed=signed, endpoints=endpoints)
        with partner_b(work, cpa, port_b, store_b, env_b) as b_pid:
            result = run(reliable_exchange(store_a, cpa, port_a, b_pid, args, mode, n, profile, env_a, step_times))
        result.stored = args.warmup + n
        if args.disk_usage and stores is None:
            result.disk = (disk_use(store_a), disk_use(store_b))
        return result


# ------------------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog="See the module docstring for how to read the output."
    )
    parser.add_argument("--messages", type=int, default=2000, help="messages per timed run (default 2000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure; medians are printed (default 3)")
    parser.add_argument("--in-flight", type=int, default=16, help="messages/requests outstanding (default 16)")
    parser.add_argument("--warmup", type=int, default=32, help="untimed messages before each run (default 32)")
    parser.add_argument(
        "--submit-mode",
        choices=("async", "direct", "executor", "all"),
        default="all",
        help="await Msh.submit_async on the event loop, call Msh.submit on the loop thread, or on a "
        "single-thread executor; default: all three",
    )
    parser.add_argument(
        "--security",
        choices=("both", "signed", "unsigned"),
        default="both",
        help="measure the reliable exchange signed (as the agreement says), unsigned, or both (default)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="add a cProfile run of partner A (see --profile-messages); prints the top functions and saves each "
        "thread's profile (pstats) and collapsed stacks (for flamegraph.pl, speedscope) in --profile-dir",
    )
    parser.add_argument("--profile-messages", type=int, default=500, help="messages in the profiled run (default 500)")
    parser.add_argument(
        "--step-times",
        action="store_true",
        help="add a run that prints the CPU per call of some of A's steps (composing a submission, reading the "
        "acknowledgment, the store writer's commits), beside the same steps called in a loop on the same input",
    )
    parser.add_argument(
        "--profile-dir", default="bench-profile", help="where --profile saves its files (default ./bench-profile)"
    )
    parser.add_argument(
        "--store",
        default="sqlite",
        help="the stores of both partners: sqlite (files, the default), postgresql, or both side by side "
        "(sqlite,postgresql); PostgreSQL is MSH_BENCH_POSTGRES_URL or --pg-url",
    )
    parser.add_argument(
        "--pg-url",
        default=PG_URL,
        help="the PostgreSQL database; each run gets a schema of its own per partner, dropped after "
        f"(default {PG_URL})",
    )
    parser.add_argument(
        "--prefill",
        type=int,
        default=0,
        metavar="N",
        help="also measure on stores that already hold N past messages (A: sent, B: received; bulk-loaded "
        "by scripts/prefill_store.py once per store kind and reused by every run), beside the empty stores",
    )
    parser.add_argument(
        "--disk-usage",
        action="store_true",
        help="print the bytes per message each table and index takes at A and B after the empty-store runs",
    )
    parser.add_argument(
        "--transport",
        default="http",
        help="the bindings measured, side by side: http (the default), smtp, amqp, or a list such as "
        "http,smtp,amqp (SQLite stores; smtp: each partner's own SMTP listener is the other's relay; amqp: the "
        "broker of --amqp-url)",
    )
    parser.add_argument(
        "--amqp-url",
        default="amqp://127.0.0.1:5672",
        help="with --transport amqp: the AMQP 1.0 broker (user guest; default amqp://127.0.0.1:5672)",
    )
    parser.add_argument("--serve-echo", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_echo:
        serve_echo()
        return
    if args.messages < args.in_flight or args.repeats < 1:
        parser.error("--messages must be at least --in-flight, --repeats at least 1")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    try:
        import uvloop

        loop_name = f"uvloop {uvloop.__version__}"
    except ImportError:  # pragma: no cover
        loop_name = "asyncio"
    print(
        f"CPUs: {os.cpu_count()} (usable {len(os.sched_getaffinity(0))}); Python {sys.version.split()[0]}; {loop_name}"
    )
    print(
        f"{args.messages} messages per run, {args.in_flight} in flight, 2 KB payload, {args.repeats} repeats "
        f"(medians), {args.warmup} warm-up messages per run\n"
    )

    backends = tuple(dict.fromkeys(b.strip().lower() for b in args.store.split(",") if b.strip()))
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown or not backends:
        parser.error(f"--store {args.store!r}: expected sqlite, postgresql or sqlite,postgresql")
    transports = tuple(dict.fromkeys(t.strip().lower() for t in args.transport.split(",") if t.strip()))
    if not transports or any(t not in ("http", "smtp", "amqp") for t in transports):
        parser.error(f"--transport {args.transport!r}: expected http, smtp, amqp or a list of them")
    if "amqp" in transports:
        from msh.demos.transports import broker_problem

        problem = broker_problem(args.amqp_url)
        if problem is not None:
            parser.error(f"--transport amqp: {problem}")
    bare = Figures("bare HTTP (uvicorn+aiohttp)")
    body = payload()
    with tempfile.TemporaryDirectory(prefix="msh-bench-") as tmp, echo_server(Path(tmp)) as (pid, port):
        for _ in range(args.repeats):
            bare.runs.append(run(bare_loop(port, pid, args.messages, args.in_flight, args.warmup, body)))
    print(bare.line())
    print(bare.cpu_line())

    modes = ("async", "direct", "executor") if args.submit_mode == "all" else (args.submit_mode,)
    kinds = {"both": (True, False), "signed": (True,), "unsigned": (False,)}[args.security]
    fills = (0, args.prefill) if args.prefill else (0,)
    reliable: dict[tuple[str, int, str, bool], Figures] = {}
    others: dict[tuple[str, str, bool], Figures] = {}  # (transport, mode, signed): the other bindings, on SQLite
    for transport in transports:
        for mode in modes:
            for kind in kinds:
                if transport != "http":
                    others[transport, mode, kind] = Figures(f"{transport} {'signed' if kind else 'unsigned'} {mode}")
    for backend in backends:
        for fill in fills:
            for mode in modes:
                for kind in kinds:
                    name = f"{backend}{f' +{fill:,}' if fill else ''} {'signed' if kind else 'unsigned'} {mode}"
                    reliable[backend, fill, mode, kind] = Figures(name)
    with contextlib.ExitStack() as stack:
        prefilled: dict[str, tuple[str, str]] = {}
        if args.prefill:
            from prefill_store import prefill

            for backend in backends:
                work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="msh-bench-prefill-")))
                store_a, store_b = stack.enter_context(store_pair(work, backend, args.pg_url))
                seconds_a = prefill(store_a, args.prefill, "sender")
                seconds_b = prefill(store_b, args.prefill, "receiver")
                prefilled[backend] = (store_a, store_b)
                print(
                    f"prefilled {backend}: {args.prefill:,} past messages in A's store in {seconds_a:.0f} s, "
                    f"in B's in {seconds_b:.0f} s"
                )
        for _ in range(args.repeats):
            for key in reliable:  # interleaved, so drift on the machine hits every figure alike
                backend, fill, mode, kind = key
                stores = prefilled[backend] if fill else None
                done = one_reliable(args, mode, args.messages, signed=kind, backend=backend, stores=stores)
                reliable[key].runs.append(done)
                print(
                    f"  run {len(reliable[key].runs)}/{args.repeats} {reliable[key].name}: {done.rate:,.0f} msgs/s, "
                    f"p50 {done.percentile(50):.1f} ms",
                    file=sys.stderr,
                    flush=True,
                )
            for (transport, mode, kind), fig in others.items():
                done = one_reliable(args, mode, args.messages, signed=kind, transport=transport)
                fig.runs.append(done)
                print(
                    f"  run {len(fig.runs)}/{args.repeats} {fig.name}: {done.rate:,.0f} msgs/s, "
                    f"p50 {done.percentile(50):.1f} ms",
                    file=sys.stderr,
                    flush=True,
                )
        print()
        for key in reliable:
            print(reliable[key].line())
            print(reliable[key].cpu_line())
        if others:
            print_transports(reliable, others)
        print_targets(reliable, bare)
        if args.prefill:
            print_prefill(reliable, args.prefill)
        if args.disk_usage:
            print_disk_use(reliable)
        if args.profile:
            best = max((k for k in reliable if not k[1]), key=lambda k: reliable[k].rate)
            backend, _fill, mode, kind = best
            print(f"\nprofiled: {reliable[best].name}, {args.profile_messages} messages")
            one_reliable(args, mode, args.profile_messages, profile=args.profile_dir, signed=kind, backend=backend)
        if args.step_times:
            best = max((k for k in reliable if not k[1]), key=lambda k: reliable[k].rate)
            backend, _fill, mode, kind = best
            print(
                f"\nstep times: {reliable[best].name}, {args.messages} messages; CPU of partner A's steps in the run, "
                f"and of the same steps called {STEP_REPEAT} times in a row on the last input (scripts/step_times.py)"
            )
            one_reliable(args, mode, args.messages, signed=kind, backend=backend, step_times=True)


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def print_targets(reliable: dict[tuple[str, int, str, bool], Figures], bare: Figures) -> None:
    """One line per figure: rate, latency, the ratio to the bare loop, CPU per side, each target met or not."""
    print(
        f"\ntargets (issue 24): unsigned >= {TARGET:,.0f} msgs/s and >= {BARE_TARGET} of bare; signed >= "
        f"{SIGNED_RATE_TARGET:,.0f} msgs/s; CPU <= {CPU_TARGET} ms/msg on each side (medians)"
    )
    head = (
        f"{'figure':<40} {'msgs/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'/bare':>6} {'CPU A':>6} {'CPU B':>6}  "
        f"{'rate':<7} {'/bare':<7} {'CPU A':<7} {'CPU B':<7}"
    )
    print(head)
    for (_backend, _fill, _mode, kind), fig in reliable.items():
        rate = fig.rate
        ratio = rate / bare.rate
        cpu_a = fig.median(lambda r: r.cpu_a / r.count * 1000)
        cpu_b = fig.median(lambda r: r.cpu_b / r.count * 1000)
        rate_ok = rate >= (SIGNED_RATE_TARGET if kind else TARGET)
        print(
            f"{fig.name:<40} {rate:>7,.0f} {fig.median(lambda r: r.percentile(50)):>7.1f} "
            f"{fig.median(lambda r: r.percentile(99)):>7.1f} {ratio:>6.3f} {cpu_a:>6.2f} {cpu_b:>6.2f}  "
            f"{_met(rate_ok):<7} {'-' if kind else _met(ratio >= BARE_TARGET):<7} "
            f"{_met(cpu_a <= CPU_TARGET):<7} {_met(cpu_b <= CPU_TARGET):<7}"
        )
    for backend, fill, mode, kind in reliable:
        if kind and (backend, fill, mode, False) in reliable:
            signed, unsigned = reliable[backend, fill, mode, True].rate, reliable[backend, fill, mode, False].rate
            print(
                f"{backend}{f' +{fill:,}' if fill else ''} {mode}: signed/unsigned = {signed:,.0f} / {unsigned:,.0f} "
                f"= {signed / unsigned:.2f}; target >= {SIGNED_TARGET}: {_met(signed / unsigned >= SIGNED_TARGET)}"
            )


def print_transports(
    reliable: dict[tuple[str, int, str, bool], Figures], others: dict[tuple[str, str, bool], Figures]
) -> None:
    """Each other binding's figures beside HTTP's of the same submit mode and security (SQLite, same run)."""
    print("\nother bindings (SQLite stores, same run; acknowledgments asynchronous over the binding):")
    for (transport, mode, kind), fig in others.items():
        print(fig.line())
        print(fig.cpu_line())
        http = reliable.get(("sqlite", 0, mode, kind))
        if http is not None:
            print(f"{'':<28} {transport}/http = {fig.rate:,.0f} / {http.rate:,.0f} = {fig.rate / http.rate:.2f}")


def print_prefill(reliable: dict[tuple[str, int, str, bool], Figures], prefill: int) -> None:
    print(f"\nstore grown to {prefill:,} past messages vs empty (same run; target >= {PREFILL_TARGET} of empty):")
    for (backend, fill, mode, kind), fig in reliable.items():
        if fill:
            empty = reliable[backend, 0, mode, kind]
            ratio = fig.rate / empty.rate
            print(
                f"  {empty.name:<32} empty {empty.rate:>6,.0f} msgs/s, prefilled {fig.rate:>6,.0f} msgs/s = "
                f"{ratio:.2f}  p99 {empty.median(lambda r: r.percentile(99)):.1f} -> "
                f"{fig.median(lambda r: r.percentile(99)):.1f} ms  {_met(ratio >= PREFILL_TARGET)}"
            )


def print_disk_use(reliable: dict[tuple[str, int, str, bool], Figures]) -> None:
    """Bytes per stored message at A and B, whole store and the biggest tables/indexes (medians)."""
    for key, fig in reliable.items():
        runs = [r for r in fig.runs if r.disk is not None]
        if key[1] or not runs:
            continue
        print(f"\ndisk use per message, {fig.name} ({runs[0].stored:,} messages stored; median of {len(runs)} runs):")
        for side, index in (("A (sender)", 0), ("B (receiver)", 1)):
            per = [{k: v / r.stored for k, v in r.disk[index].items()} for r in runs if r.disk]  # type: ignore[index]
            names = set().union(*per)
            medians = {name: statistics.median(p.get(name, 0.0) for p in per) for name in names}
            total = statistics.median(sum(p.values()) for p in per)
            top = sorted(medians.items(), key=lambda kv: -kv[1])
            shown = ", ".join(f"{name} {size:,.0f}" for name, size in top[:8] if size >= 50)
            print(f"  {side}: {total:,.0f} bytes/message; largest: {shown}")


if __name__ == "__main__":
    main()
