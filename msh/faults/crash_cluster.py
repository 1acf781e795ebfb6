"""The cluster crash test (docs/cluster.md, docs/design.md §5.6): party A runs as several ``msh serve`` nodes on
one store (a fresh PostgreSQL schema, or one SQLite file) and sends to B while its nodes are killed with
SIGKILL at random moments and restarted; afterwards B's application must hold each message exactly once
(payload intact), A every message as acknowledged, and A's store no timer left and no lease held (every
timer a dead node had claimed was taken over, and the clean stop at the end released what the nodes held).

The messages are submitted to A's store by this process (as ``msh send`` does): each waits for a
``transmit`` timer that any node may claim. A node's claims are kept by its heartbeat
(``timers.renew_interval``) and run out ``timers.lease`` after it died; a transmission it had in flight is
sent again by the message's retry timer, on whichever node claims it. Latency is from the submission's
commit to the acknowledgment's (the message rows' ``created_at`` and ``updated_at``).

:func:`run_cluster_crash_test` is used by the test suite (shortened) and by ``scripts/crash_test.py --nodes N``.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

from msh.errors import ConfigurationError
from msh.faults.killer import DeliveryOutcome, Killer, KillRun
from msh.faults.outcome import inbox_census, submit_orders, wait_final
from msh.faults.pair import PARTY_B, Partner, free_port, make_pair

__all__ = ["DEFAULT_POSTGRES_URL", "ClusterReport", "Latency", "postgres_schema", "run_cluster_crash_test"]

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
"""Where the PostgreSQL form runs unless told (``MSH_TEST_POSTGRES_URL``, as the test suite)."""


@dataclass(frozen=True, slots=True)
class Latency:
    """Seconds from submission to acknowledgment of the messages delivered: median, 99th percentile, most."""

    p50: float
    p99: float
    max: float

    @classmethod
    def of(cls, seconds: list[float]) -> Latency:
        if not seconds:
            return cls(0.0, 0.0, 0.0)
        ordered = sorted(seconds)

        def rank(q: float) -> float:  # nearest rank
            return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))]

        return cls(rank(0.50), rank(0.99), ordered[-1])


@dataclass(frozen=True, slots=True)
class ClusterReport(DeliveryOutcome):
    """What the cluster crash test saw (:class:`~msh.faults.killer.DeliveryOutcome`), the kills of each node,
    the latency, and the timers left in A's store after the clean stop (``timers_left``, of which
    ``leases_left`` still leased); :attr:`ok` is the verdict."""

    store: str
    nodes: int
    kills: tuple[tuple[str, int], ...]
    latency: Latency
    timers_left: int
    leases_left: int

    @property
    def ok(self) -> bool:
        delivered = DeliveryOutcome.ok.fget(self)  # type: ignore[attr-defined]
        return bool(delivered) and self.timers_left == 0 and self.leases_left == 0

    def summary(self) -> str:
        kills = ", ".join(f"{name} {count}x" for name, count in self.kills)
        lost = self.messages - self.delivered_once - self.delivered_twice_or_more
        return (
            f"{self.messages} messages, {self.nodes} nodes of A on one {self.store} store, killed (SIGKILL) "
            f"{sum(c for _, c in self.kills)} times ({kills}) in {self.seconds:.1f} s\n"
            f"sender: {self.acknowledged} acknowledged, {self.failed} failed, {self.pending} pending\n"
            f"receiver: {self.delivered_once} exactly once, {lost} lost, {self.delivered_twice_or_more} duplicated, "
            f"{self.unexpected} unexpected, {self.payloads_intact} payloads intact\n"
            f"timers: {self.timers_left} left, {self.leases_left} leases held after the stop"
            + (" (every timer resumed)" if self.timers_left == 0 and self.leases_left == 0 else "")
            + "\n"
            f"latency submission -> acknowledgment: p50 {self.latency.p50:.2f} s, p99 {self.latency.p99:.2f} s, "
            f"max {self.latency.max:.2f} s\n" + ("OK" if self.ok else "FAILED")
        )


def _payload(i: int) -> bytes:
    return f"<order id='{i}'>{'cluster-test ' * 160}</order>".encode()


@contextlib.contextmanager
def postgres_schema(base_url: str | None = None) -> Iterator[str]:
    """A fresh PostgreSQL schema (``msh_crash_<random>``) at ``base_url`` (default ``MSH_TEST_POSTGRES_URL``
    or :data:`DEFAULT_POSTGRES_URL`), dropped afterwards; yields the store URL whose connections use it.
    :class:`ConfigurationError` when no server answers."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import SQLAlchemyError

    url = base_url or os.environ.get("MSH_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    schema = f"msh_crash_{uuid.uuid4().hex[:12]}"
    engine = create_engine(url, connect_args={"connect_timeout": 3}, isolation_level="AUTOCOMMIT")
    try:
        try:
            with engine.connect() as conn:
                conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        except SQLAlchemyError as exc:
            reason = " ".join(str(getattr(exc, "orig", None) or exc).split())
            raise ConfigurationError(
                f"no PostgreSQL reachable at {engine.url.render_as_string(hide_password=True)} "
                f"(set MSH_TEST_POSTGRES_URL): {reason}"
            ) from exc
        separator = "&" if "?" in url else "?"
        try:
            yield f"{url}{separator}options={quote(f'-csearch_path={schema}', safe='')}"
        finally:
            with engine.connect() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    finally:
        engine.dispose()


def _census_of_timers(store_url: str) -> tuple[int, int, list[float]]:
    """Timers left and leases held in the store at ``store_url``, and the latency of each delivered message."""
    from sqlalchemy import func, select

    from msh.engine import OutboundStatus
    from msh.store import SqlStore, open_store
    from msh.store.schema import timers

    with open_store(store_url, migrate=False) as store:
        assert isinstance(store, SqlStore)
        with store.engine.connect() as conn:
            left, leased = conn.execute(select(func.count(), func.count(timers.c.lease_owner))).one()
        latencies: list[float] = []
        after: str | None = None
        while True:
            with store.transaction(readonly=True) as tx:
                page = tx.list_outbound(after=after, limit=1000)
            if not page:
                break
            after = page[-1].message_id
            latencies.extend(
                (m.updated_at - m.created_at) / timedelta(seconds=1)
                for m in page
                if m.state.status is OutboundStatus.DELIVERED
            )
    return int(left), int(leased), latencies


def run_cluster_crash_test(
    work: Path,
    *,
    nodes: int = 3,
    store: str = "postgresql",
    postgres_url: str | None = None,
    messages: int = 10_000,
    kill_for: float = 60.0,
    min_kills: int = 0,
    mean_gap: float = 1.0,
    lease: str = "PT3S",
    renew: str = "PT1S",
    settle_timeout: float = 300.0,
    seed: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> ClusterReport:
    """Run the cluster crash test in ``work`` (see the module docs): ``nodes`` processes of A on one ``store``
    (``postgresql``: a fresh schema at ``postgres_url``, dropped afterwards; ``sqlite``: one file), B one
    process; ``messages`` submitted while nodes are killed for ``kill_for`` seconds (and on until
    ``min_kills`` kills, bounded by another ``kill_for``); then up to ``settle_timeout`` seconds for every
    message to be final."""
    if nodes < 1:
        raise ConfigurationError(f"--nodes must be at least 1, not {nodes}")
    if store not in ("postgresql", "sqlite"):
        raise ConfigurationError(f"--store must be postgresql or sqlite, not {store!r}")
    say = progress or (lambda _text: None)
    pair = make_pair(
        work,
        retries=100,
        retry_interval="PT1S",
        first_resend="PT1S",
        http_timeout="PT0.8S",
        lease=lease,
        renew=renew,
        proxy=False,
    )
    with contextlib.ExitStack() as stack:
        if store == "postgresql":
            url = stack.enter_context(postgres_schema(postgres_url))
        else:
            url = str(work / "party-a-cluster.sqlite")
        report = _run(pair.a, pair.b, url, store, work, nodes, messages, kill_for, min_kills, mean_gap,
                      settle_timeout, random.Random(seed), say)  # fmt: skip
    return report


def _run(
    a: Partner,
    b: Partner,
    url: str,
    store: str,
    work: Path,
    nodes: int,
    messages: int,
    kill_for: float,
    min_kills: int,
    mean_gap: float,
    settle_timeout: float,
    rng: random.Random,
    say: Callable[[str], None],
) -> ClusterReport:
    from msh.runtime.config import load_settings
    from msh.runtime.msh import Msh

    # Every node: A's settings file, the shared store, a port of its own (partners send to the agreement's,
    # which the first node serves: B answers acknowledgments on the connection, syncReplyMode mshSignalsOnly).
    cluster = [
        Partner(
            f"A{n + 1}",
            a.config,
            work,
            port,
            work / f"party-a-node{n + 1}.log",
            env={"MSH_STORE_URL": url, "MSH_SERVER_PORT": str(port)},
        )
        for n, port in enumerate([a.port] + [free_port() for _ in range(nodes - 1)])
    ]
    started = time.monotonic()
    killer = Killer(cluster, kill_for=kill_for, min_kills=min_kills, mean_gap=mean_gap, rng=rng, say=say)
    sent: dict[str, str] = {}
    try:
        b.start()
        # The nodes start together: the first to take the migration lock creates the schema, the others find
        # it at the newest revision (msh.store.migrations).
        for node in cluster:
            node.start(timeout=60)
        say(f"{nodes} nodes of A serve one {store} store; B listens; submitting {messages} messages")
        sender = Msh(load_settings(a.config, env={"MSH_STORE_URL": url}))
        try:
            killer.start()
            pace = kill_for * 0.8 / max(messages, 1)

            def before(i: int) -> None:
                if i and i % 500 == 0:
                    say(
                        f"{i} submitted; kills so far " + ", ".join(f"{n.name} {killer.kills[n.name]}" for n in cluster)
                    )

            submit_orders(sender, PARTY_B, range(messages), payload=_payload, pace=pace, before=before, into=sent)
            killer.finish()
            say("killing over; waiting for every message to settle")
            final = wait_final(sender, sent, timeout=settle_timeout)
        finally:
            killer.stop()
            sender.close()
    finally:
        for node in cluster:  # a clean stop: each releases the timers it holds
            node.stop()
        b.stop()
    seconds = time.monotonic() - started
    left, leased, latencies = _census_of_timers(url)
    run = KillRun(sent, final, killer.kills, seconds)
    return ClusterReport.of(
        run,
        inbox_census(b.store, sent),
        work,
        store=store,
        nodes=nodes,
        kills=tuple((node.name, killer.kills[node.name]) for node in cluster),
        latency=Latency.of(latencies),
        timers_left=left,
        leases_left=leased,
    )
