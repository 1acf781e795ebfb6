"""A network of MSHs in one process (docs/design.md §2): memory stores, the in-memory transport, one fake clock.

:class:`TestNetwork` runs any number of :class:`~msh.runtime.msh.Msh` on one asyncio event loop, each on
its own :class:`~msh.store.memory.MemoryStore` with an :class:`~msh.store.inline.InlineWriter`, parsing
on the loop, MessageIds from a counter, time from the network's :class:`FakeClock`, and a transport into
one :class:`~msh.transport.memory.MemoryNetwork` (each MSH is attached at the endpoint URLs its agreements
give its party). Nothing sleeps and no socket is opened: the test moves the network
(:meth:`TestNetwork.settle` delivers until nothing moves) and the clock (:meth:`TestNetwork.advance` fires
the timers that came due), so a scenario with losses, delays and restarts is deterministic and runs in
milliseconds. :meth:`TestNetwork.restart` throws an MSH away without any shutdown and starts a new one on
its store: what was committed survives, what was in memory does not, as after ``kill -9``.

    net = TestNetwork(seed=1)
    a = net.add("a", settings_a)
    b = net.add("b", settings_b)
    await net.start()
    net.faults.lose_requests = 0.2
    message_id = await a.submit_async(submission)
    await net.run_until(lambda: a.status(message_id).state.status is OutboundStatus.DELIVERED)
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cpa.model import CollaborationProtocolAgreement
from cpa.resolve import party_keys
from msh.engine.routing import Route
from msh.runtime.agreements import load_agreements
from msh.runtime.config import Settings
from msh.runtime.msh import Msh
from msh.store.api import Store
from msh.store.inline import InlineWriter
from msh.store.memory import MemoryStore
from msh.transport.memory import MemoryNetwork, NetworkFaults

__all__ = ["FakeClock", "Node", "SequentialIds", "TestNetwork"]


class FakeClock:
    """Time that moves only when told (aware UTC datetimes)."""

    def __init__(self, start: datetime = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> datetime:
        if delta < timedelta(0):
            raise ValueError("time does not go back")
        self.now += delta
        return self.now

    def set(self, moment: datetime) -> datetime:
        if moment < self.now:
            raise ValueError("time does not go back")
        self.now = moment
        return self.now


class SequentialIds:
    """MessageIds ``<name>-<n>@<domain>``: unique, repeatable from run to run."""

    def __init__(self, name: str, domain: str = "testnet") -> None:
        self.name = name
        self.domain = domain
        self._numbers = itertools.count(1)

    def __call__(self) -> str:
        return f"{self.name}-{next(self._numbers)}@{self.domain}"


@dataclass
class Node:
    """One MSH of the network: its name, settings, agreements, store (kept across restarts) and the
    running :class:`Msh`."""

    name: str
    settings: Settings
    agreements: tuple[CollaborationProtocolAgreement, ...]
    store: Store
    ids: SequentialIds
    msh: Msh
    urls: tuple[str, ...]
    routes: tuple[Route, ...] = ()


def _endpoint_urls(agreements: Iterable[CollaborationProtocolAgreement], party: tuple[str, str | None]) -> set[str]:
    """The endpoint URIs the agreements give ``party`` (where partners send it messages)."""
    urls: set[str] = set()
    for cpa in agreements:
        for info in cpa.party_infos:
            if party not in party_keys(info):
                continue
            for channel in (*info.delivery_channels, info.default_msh_channel):
                receiver = channel.transport.receiver
                if receiver is not None:
                    urls.update(e.uri for e in receiver.endpoints)
    return urls


class TestNetwork:
    """MSHs on one event loop, one in-memory network and one fake clock (see the module docs)."""

    __test__ = False  # not a pytest test class

    def __init__(self, *, seed: int = 0, start: datetime | None = None) -> None:
        self.clock = FakeClock(start) if start is not None else FakeClock()
        self.network = MemoryNetwork(clock=self.clock, seed=seed)
        self.nodes: dict[str, Node] = {}
        self._started = False

    @property
    def faults(self) -> NetworkFaults:
        """The network's switches: losses, delay, reordering, endpoints down."""
        return self.network.faults

    def add(
        self,
        name: str,
        settings: Settings,
        *,
        agreements: Iterable[CollaborationProtocolAgreement] | None = None,
        store: Store | None = None,
        urls: Iterable[str] | None = None,
        routes: Iterable[Route] | None = None,
    ) -> Msh:
        """Add an MSH named ``name`` with ``settings`` (its store, server and TLS settings are not used):
        on a memory store of its own, or on ``store`` (e.g. an SQLite file a command then reads). It is
        attached at ``urls``, by default the endpoints its agreements give its party (an intermediary,
        or a party reached through one, names its own); ``routes`` is its routing table (default: the
        settings')."""
        if name in self.nodes:
            raise ValueError(f"the network already has an MSH named {name!r}")
        loaded = tuple(
            agreements
            if agreements is not None
            else load_agreements(settings.agreements.files(), verify_signatures=settings.agreements.verify_signatures)
        )
        party = (settings.identity.party_id, settings.identity.party_id_type)
        node = Node(
            name=name,
            settings=settings,
            agreements=loaded,
            store=store if store is not None else MemoryStore(clock=self.clock),
            ids=SequentialIds(name),
            msh=None,  # type: ignore[arg-type]  # made just below
            urls=tuple(sorted(urls if urls is not None else _endpoint_urls(loaded, party))),
            routes=tuple(routes) if routes is not None else settings.routing.routes,
        )
        node.msh = self._make(node)
        self.nodes[name] = node
        return node.msh

    def _make(self, node: Node) -> Msh:
        msh = Msh(
            node.settings,
            store=node.store,
            agreements=node.agreements,
            clock=self.clock,
            transport=self.network.transport(),
            writer=InlineWriter(node.store),
            ids=node.ids,
            offload=False,
            routes=node.routes,
        )
        for url in node.urls:
            self.network.attach(url, msh)
        return msh

    def msh(self, name: str) -> Msh:
        return self.nodes[name].msh

    async def start(self) -> None:
        """Start every MSH's runtime (without its timer loop: :meth:`advance` fires the timers)."""
        self._started = True
        for node in self.nodes.values():
            await node.msh.start(timers=False)

    async def settle(self, *, max_rounds: int = 100_000) -> None:
        """Let every MSH run and the network deliver until nothing moves any more (work left waiting only
        on the clock: a delayed delivery, a timer)."""
        quiet_rounds = 0
        for _ in range(max_rounds):
            for _ in range(8):
                await asyncio.sleep(0)
            delivered = await self.network.pump()
            busy = any(not t.done() and not _waits_on_network(t) for n in self.nodes.values() for t in n.msh.core.tasks)
            if delivered or busy:
                quiet_rounds = 0
                continue
            quiet_rounds += 1
            if quiet_rounds >= 3:
                return
        raise RuntimeError(f"the network did not settle within {max_rounds} rounds")

    async def fire_timers(self) -> None:
        """Fire, in every MSH, the timers due at the current time, and settle."""
        for node in self.nodes.values():
            await node.msh.run_due_timers()
        await self.settle()

    async def advance(self, delta: timedelta) -> None:
        """Move the clock by ``delta`` (in steps, stopping at every timer or delayed delivery on the way)."""
        end = self.clock() + delta
        while True:
            await self.settle()
            upcoming = [t for t in (self.next_due(), self.network.next_due()) if t is not None and t <= end]
            target = min(upcoming) if upcoming else end
            self.clock.set(max(target, self.clock()))
            await self.fire_timers()
            if target >= end:
                return

    def next_due(self) -> datetime | None:
        """The earliest timer of any MSH, or the end of a wait for a Pong or StatusResponse
        (:mod:`msh.runtime.questions`)."""
        dues = []
        for node in self.nodes.values():
            with node.store.transaction(readonly=True) as tx:
                due = tx.next_timer_due()
            if due is not None:
                dues.append(due)
            deadline = node.msh.core.questions.next_deadline()
            if deadline is not None:
                dues.append(deadline)
        return min(dues) if dues else None

    async def run_until(
        self, done: Callable[[], bool], *, limit: timedelta = timedelta(days=1), step: timedelta | None = None
    ) -> None:
        """Settle, then move the clock to the next timer or delivery (or by ``step``) until ``done()`` is
        true; ``TimeoutError`` once ``limit`` of network time has passed without it."""
        end = self.clock() + limit
        await self.settle()
        while not done():
            dues = [t for t in (self.next_due(), self.network.next_due()) if t is not None]
            if step is not None:
                target = self.clock() + step
            elif dues:
                target = max(min(dues), self.clock())
            else:
                raise TimeoutError("nothing is left to happen and the condition is still false")
            if target > end:
                raise TimeoutError(f"the condition was still false after {limit} of network time")
            self.clock.set(target)
            await self.fire_timers()

    async def restart(self, name: str) -> Msh:
        """Throw the MSH ``name`` away as ``kill -9`` would (nothing in memory survives, no shutdown runs)
        and start a new one on its store; returns the new one (started when the network is)."""
        node = self.nodes[name]
        for task in list(node.msh.core.tasks):
            task.cancel()
        for url in node.urls:
            self.network.detach(url)
        node.msh = self._make(node)
        if self._started:
            await node.msh.start(timers=False)
        return node.msh

    async def close(self) -> None:
        for node in self.nodes.values():
            await node.msh.stop()
            node.msh.close()


def _waits_on_network(task: asyncio.Task[object]) -> bool:
    """Whether ``task`` is blocked (on the test network, only a send the network has not delivered yet
    can block a task: the writer and the parsing run inline)."""
    waiter = getattr(task, "_fut_waiter", None)
    return waiter is not None and not waiter.done()
