#!/usr/bin/env python3
"""Measure the store writers of a reliable exchange in one process: SQL statements and writer CPU per message.

Partners A and B of the sample configuration (``samples/config/party-a.toml``, ``party-b.toml``, on the
sample agreement without its SenderNonRepudiation: nothing is signed) run as :class:`msh.runtime.msh.Msh`
on one event loop, on the in-memory transport of :mod:`msh.testing.network` and its fake clock (no
socket, no TLS, no timer fires), but each on a real SQL store (an SQLite file in a temporary folder, WAL
and ``synchronous=FULL`` as in production; or, with ``--store postgresql``, a PostgreSQL schema of its
own, dropped after) written by a real :class:`~msh.store.writer.GroupCommitWriter`. A submits
``--messages`` messages, ``--in-flight`` at a time (a new wave when the previous one is acknowledged), so
the writers group a few message steps per commit as under load.

Printed for A and B, as medians over ``--repeats`` runs:

statements/msg
    the SQL statements the store ran per message (SQLite's trace callback, counted in a separate untimed
    run; BEGIN and COMMIT included; PostgreSQL: not counted), without the reads of this script's own
    polling for the messages' status;
writer CPU µs/msg
    the CPU time of the writer's thread (user and system, ``getrusage(RUSAGE_THREAD)`` read on that thread
    before and after), per message: what the store steps cost, without the HTTP, TLS and parsing of the
    real exchange; "in the kernel" is its system part (mostly the disk flushes of the commits);
steps/commit
    units of work per committed transaction (the group-commit factor).

With ``--driver-floor`` (SQLite), one more run records every call each writer makes on its connection (each
statement with its parameters, each commit), and :mod:`driver_floor` runs them again, in order, on a fresh
store through a plain ``sqlite3`` connection: the CPU those statements cost without the Python around them
(the store's transaction port, row conversions, SQLAlchemy's per-transaction work, the group commit),
printed per side as µs per message and as a share of that writer's CPU above.

With ``--transaction-cost``, it also prints what an empty transaction costs on a fresh SQLite store, in a
warm loop (thread CPU µs, medians of ``--repeats`` rounds): a write transaction and a read-only one through
the store (what every group commit and every read pays besides its statements), and ``BEGIN IMMEDIATE`` with
``COMMIT`` on a plain ``sqlite3`` connection with the store's settings; and, for A and B, that write
transaction's cost times the commits per message of the runs above.

The figures leave out the noise of the other processes of the machine (thread CPU time, not wall time);
compare runs of the same ``--messages`` and ``--in-flight``. Not a test: it asserts nothing.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_store_steps.py --messages 1000 --repeats 5
"""

from __future__ import annotations

import argparse
import asyncio
import re
import resource
import statistics
import sys
import tempfile
import threading
import time
import tomllib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import driver_floor  # noqa: E402 (scripts/, beside this script)

from msh.engine import OutboundStatus  # noqa: E402
from msh.runtime.compose import Payload, Submission  # noqa: E402
from msh.runtime.config import Settings, settings_from_mapping  # noqa: E402
from msh.runtime.msh import Msh  # noqa: E402
from msh.store.sql import SqlStore  # noqa: E402
from msh.store.writer import GroupCommitWriter  # noqa: E402
from msh.testing.network import Node, TestNetwork  # noqa: E402

CONFIG = ROOT / "samples" / "config"
B_PARTY = ("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")
SERVICE = "urn:example:services:ordering"
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
WARMUP = 32
"""Messages exchanged before each timed run (first-use caches, compiled statements)."""


def settings(name: str, agreement: Path) -> Settings:
    """The sample settings of party ``name``, on ``agreement``."""
    path = CONFIG / f"party-{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    data["agreements"]["paths"] = [str(agreement)]
    return settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})


def unsigned_agreement(folder: Path) -> Path:
    """A copy of the sample agreement without its SenderNonRepudiation elements: nothing is signed (the
    store's steps, not message security, are measured here; ``scripts/bench_exchange.py`` measures both)."""
    source = ROOT / "samples" / "cpas" / "demo-a-b.xml"
    text, removed = re.subn(
        r"\s*<tp:SenderNonRepudiation>.*?</tp:SenderNonRepudiation>", "", source.read_text("utf-8"), flags=re.S
    )
    if not removed:
        raise RuntimeError(f"{source}: expected SenderNonRepudiation elements to leave out")
    path = folder / "demo-a-b.xml"
    path.write_text(text, encoding="utf-8")
    return path


class WriterNetwork(TestNetwork):
    """The test network, with a group-commit writer on each MSH's store (instead of the inline one)."""

    __test__ = False

    def __init__(self) -> None:
        super().__init__(seed=1)
        self.writers: dict[str, GroupCommitWriter] = {}

    def _make(self, node: Node) -> Msh:
        writer = GroupCommitWriter(node.store, name=f"writer-{node.name}")
        self.writers[node.name] = writer
        msh = Msh(
            node.settings,
            store=node.store,
            agreements=node.agreements,
            clock=self.clock,
            transport=self.network.transport(),
            writer=writer,
            ids=node.ids,
            offload=False,
            routes=node.routes,
        )
        for url in node.urls:
            self.network.attach(url, msh)
        return msh


@contextmanager
def stores(kind: str, folder: Path, pg_url: str) -> Iterator[tuple[str, str]]:
    """The store URLs of A and B: two SQLite files, or two fresh PostgreSQL schemas (dropped after)."""
    if kind == "sqlite":
        yield str(folder / "a.db"), str(folder / "b.db")
        return
    from sqlalchemy import create_engine

    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    schemas = [f"bench_steps_{uuid.uuid4().hex[:10]}_{side}" for side in "ab"]
    with admin.connect() as connection:
        for schema in schemas:
            connection.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield tuple(f"{pg_url}?options=-csearch_path%3D{schema}" for schema in schemas)  # type: ignore[misc]
    finally:
        with admin.connect() as connection:
            for schema in schemas:
                connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def thread_cpu(writer: GroupCommitWriter) -> tuple[float, float]:
    """The CPU seconds of the writer's thread so far, in all and in the kernel (read on that thread)."""

    def read(_tx: object) -> tuple[float, float]:
        if hasattr(resource, "RUSAGE_THREAD"):
            usage = resource.getrusage(resource.RUSAGE_THREAD)
            return usage.ru_utime + usage.ru_stime, usage.ru_stime
        return time.thread_time(), 0.0

    return writer.call(read)


def submission(n: int) -> Submission:
    return Submission(B_PARTY, SERVICE, "NewOrder", (Payload(f"<order n='{n}'/>".encode() * 40, "application/xml"),))


async def exchange(a: Msh, net: WriterNetwork, n: int, in_flight: int) -> None:
    """Submit ``n`` messages, ``in_flight`` at a time, each wave until all of it is acknowledged."""
    done = 0
    while done < n:
        wave = min(in_flight, n - done)
        ids = await asyncio.gather(*(a.submit_async(submission(done + i)) for i in range(wave)))
        for _ in range(100_000):
            await net.settle()
            if all(_delivered(a, message_id) for message_id in ids):
                break
            await asyncio.sleep(0.0005)  # the writers' commits land on the loop from their threads
        else:
            raise RuntimeError("the messages were not acknowledged")
        done += wave


_polling = threading.local()
"""``active`` while this thread reads a status for the script itself: those statements are not the MSH's."""


def _delivered(a: Msh, message_id: str) -> bool:
    _polling.active = True
    try:
        stored = a.status(message_id)
    finally:
        _polling.active = False
    return stored is not None and stored.state.status is OutboundStatus.DELIVERED


def one_run(kind: str, pg_url: str, n: int, in_flight: int, count: bool) -> dict[str, dict[str, float]]:
    """One exchange of ``n`` messages on fresh stores; per side: writer CPU µs/msg, steps/commit, and
    (``count``) statements/msg."""
    with tempfile.TemporaryDirectory(prefix="bench-steps-") as tmp, stores(kind, Path(tmp), pg_url) as urls:
        net = WriterNetwork()
        counts = {"a": 0, "b": 0}
        opened: dict[str, SqlStore] = {}
        for side, url in zip("ab", urls, strict=True):
            store = SqlStore.open(url, clock=net.clock)
            opened[side] = store
            if count and kind == "sqlite":

                def traced(dbapi: Any, _record: Any, side: str = side) -> None:
                    def trace(_sql: str) -> None:
                        if not getattr(_polling, "active", False):
                            counts[side] += 1

                    dbapi.set_trace_callback(trace)

                event.listen(store.engine, "connect", traced)
                store.engine.dispose()  # connections made from now on are traced
        agreement = unsigned_agreement(Path(tmp))
        a = net.add("a", settings("a", agreement), store=opened["a"])
        net.add("b", settings("b", agreement), store=opened["b"])

        async def main() -> dict[str, dict[str, float]]:
            await net.start()
            try:
                await exchange(a, net, WARMUP, in_flight)  # warm-up: first-use caches, compiled statements
                before = {side: thread_cpu(w) for side, w in net.writers.items()}
                stats = {side: (w.stats.batches, w.stats.units) for side, w in net.writers.items()}
                counted = dict(counts)
                await exchange(a, net, n, in_flight)
                result: dict[str, dict[str, float]] = {}
                for side, writer in net.writers.items():
                    batches = writer.stats.batches - stats[side][0]
                    units = writer.stats.units - stats[side][1]
                    cpu, kernel = thread_cpu(writer)
                    result[side] = {
                        "cpu_us": (cpu - before[side][0]) / n * 1e6,
                        "sys_us": (kernel - before[side][1]) / n * 1e6,
                        "steps": units / batches if batches else 0.0,
                        "commits": batches / n,
                        "statements": (counts[side] - counted[side]) / n,
                    }
                return result
            finally:
                await net.close()
                for store in opened.values():
                    store.close()

        return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1000, help="messages per timed run (default 1000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs; medians are printed (default 5)")
    parser.add_argument("--in-flight", type=int, default=16, help="messages submitted per wave (default 16)")
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite", help="default: sqlite")
    parser.add_argument("--pg-url", default=PG_URL, help=f"the PostgreSQL database (default {PG_URL})")
    parser.add_argument(
        "--driver-floor",
        action="store_true",
        help="SQLite: one more run in which each writer's statements are recorded, then run again through the "
        "driver alone on a fresh store (scripts/driver_floor.py): what the statements cost without the Python "
        "around them",
    )
    parser.add_argument(
        "--transaction-cost",
        action="store_true",
        help="also print the CPU of an empty write and read-only transaction on a fresh SQLite store (warm loop), "
        "and of BEGIN IMMEDIATE/COMMIT through sqlite3 alone",
    )
    args = parser.parse_args()
    if args.driver_floor and args.store != "sqlite":
        parser.error("--driver-floor replays on SQLite only")
    counted = one_run(args.store, args.pg_url, min(args.messages, 200), args.in_flight, count=True)
    runs = [one_run(args.store, args.pg_url, args.messages, args.in_flight, count=False) for _ in range(args.repeats)]
    print(f"{args.store}, {args.messages} messages per run, {args.in_flight} in flight, {args.repeats} runs (medians)")
    for side in "ab":
        cpu = [r[side]["cpu_us"] for r in runs]
        kernel = statistics.median(r[side]["sys_us"] for r in runs)
        steps = statistics.median(r[side]["steps"] for r in runs)
        statements = f"{counted[side]['statements']:5.1f}" if args.store == "sqlite" else "    -"
        print(
            f"  {side.upper()}: statements/msg {statements}  writer CPU {statistics.median(cpu):6.0f} µs/msg "
            f"(runs: {', '.join(f'{c:.0f}' for c in cpu)}; in the kernel {kernel:.0f})  steps/commit {steps:4.1f}"
        )
    if args.transaction_cost:
        costs = transaction_costs(rounds=args.repeats)
        print(
            f"  an empty transaction (SQLite, warm loop): write {costs['write']:.1f} µs, read-only "
            f"{costs['readonly']:.1f} µs; BEGIN IMMEDIATE + COMMIT through sqlite3 alone {costs['driver']:.1f} µs"
        )
        for side in "ab":
            per_message = statistics.median(r[side]["commits"] for r in runs)
            print(
                f"  {side.upper()}: {per_message:.2f} commits/msg x {costs['write']:.1f} µs = "
                f"{per_message * costs['write']:.1f} µs/msg of write transactions around the statements"
            )
    if args.driver_floor:
        floors, messages = driver_floor_run(args.messages, args.in_flight)
        print("  the writers' statements through the driver alone (one more run, recorded, replayed on a fresh store):")
        for side in "ab":
            replayed = floors[side]
            writer = statistics.median(r[side]["cpu_us"] for r in runs)
            floor = replayed.cpu_seconds / messages * 1e6
            print(
                f"  {side.upper()}: {replayed.calls / messages:4.1f} calls/msg, CPU {floor:6.0f} µs/msg (in the kernel "
                f"{replayed.kernel_seconds / messages * 1e6:.0f}; {replayed.failed} calls failed): "
                f"{floor / writer:.0%} of the writer's {writer:.0f} µs/msg above"
            )


def transaction_costs(rounds: int, count: int = 2000) -> dict[str, float]:
    """CPU µs per empty transaction on a fresh SQLite store, medians of ``rounds`` loops of ``count``: a write
    transaction (``write``) and a read-only one (``readonly``) through :class:`SqlStore`, and ``BEGIN
    IMMEDIATE``/``COMMIT`` on a plain ``sqlite3`` connection with the store's settings (``driver``)."""
    with tempfile.TemporaryDirectory(prefix="bench-transactions-") as tmp:
        path = Path(tmp) / "store.db"
        store = SqlStore.open(str(path))
        connection = driver_floor.plain_connection(path)
        try:

            def write() -> None:
                with store.transaction():
                    pass

            def readonly() -> None:
                with store.transaction(readonly=True):
                    pass

            def driver() -> None:
                connection.execute("BEGIN IMMEDIATE")
                connection.execute("COMMIT")

            figures: dict[str, list[float]] = {"write": [], "readonly": [], "driver": []}
            for _ in range(rounds):
                for name, step in (("write", write), ("readonly", readonly), ("driver", driver)):
                    for _ in range(count // 10):  # warm-up: the connections opened, the code in the caches
                        step()
                    started = time.thread_time()
                    for _ in range(count):
                        step()
                    figures[name].append((time.thread_time() - started) / count * 1e6)
            return {name: statistics.median(values) for name, values in figures.items()}
        finally:
            connection.close()
            store.close()


def driver_floor_run(n: int, in_flight: int) -> tuple[dict[str, driver_floor.Replayed], int]:
    """One more SQLite run with each writer's calls recorded, then replayed through the driver alone on a fresh
    store: the replays by side, and the messages their records hold."""
    with driver_floor.recording(lambda thread: thread in ("writer-a", "writer-b")) as record:
        one_run("sqlite", PG_URL, n, in_flight, count=False)
    fresh = lambda path: SqlStore.open(str(path)).close()  # noqa: E731
    floors = {side: driver_floor.replay(record.calls[f"writer-{side}"], fresh) for side in "ab"}
    return floors, n + WARMUP  # the records start with the stores: the warm-up's statements are in them


if __name__ == "__main__":
    main()
