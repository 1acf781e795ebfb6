"""What the parts of the runtime share: settings, time and ids, agreements, store and writer, transport,
counters, the application's callbacks, and the event loop the runtime runs on.

One :class:`Core` per MSH, made by :class:`msh.runtime.msh.Msh` and handed to each part: the inbound
pipeline (:mod:`msh.runtime.inbound`), the executor of the engine's actions (:mod:`msh.runtime.executor`),
the transmissions (:mod:`msh.runtime.sender`), the timer loop (:mod:`msh.runtime.timerloop`) and the
submissions (:mod:`msh.runtime.submission`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, TypeVar

from cpa.registry import CpaRegistry
from cpa.resolve import PartyKey
from msh.engine.routing import Route
from msh.errors import Issue
from msh.runtime.compose import new_message_id
from msh.runtime.config import Settings
from msh.runtime.questions import Questions
from msh.runtime.relays import SyncRelays
from msh.runtime.security import MessageSecurity
from msh.runtime.transports import transports_from
from msh.store.api import Store
from msh.store.writer import GroupCommitWriter, Writer
from msh.threadnames import name_os_thread
from msh.transport.port import Transport
from msh.transport.tls import ClientContexts

__all__ = ["PARSE_ON_LOOP", "Callbacks", "Core", "wire"]

log = logging.getLogger("msh.runtime")

PARSE_ON_LOOP: Final = 32 << 10
"""Bytes: a message this small is parsed on the event loop (a few ms at most: the limits of
:mod:`msh.safexml` and the codec keep its work linear); a larger one on the work pool."""
_POOL_THREADS: Final = 2  # parsing, agreement checks, reads beside the writer
_GROUP_COMMIT: Final = 64  # units of work (message steps) at most in one store transaction
_T = TypeVar("_T")

DeliveredCallback = Callable[[str], object]
SentCallback = Callable[[str], object]
FailedCallback = Callable[[str, Issue], object]
MessageCallback = Callable[[int, str], object]


@dataclass
class Callbacks:
    """The application's callbacks, called after the commit that decided them (see :class:`Msh`)."""

    on_delivered: DeliveredCallback | None = None
    on_failed: FailedCallback | None = None
    on_message: MessageCallback | None = None
    on_sent: SentCallback | None = None
    arrivals: list[MessageCallback] = field(default_factory=list)
    """Listeners of the layers above (the application interfaces) told of each message given to the
    application, before ``on_message``; the application's own callback stays its own to set."""

    def message_given(self) -> MessageCallback | None:
        """What to call after the commit that gave a message to the application (None: nobody listens)."""
        listeners = [*self.arrivals, *([self.on_message] if self.on_message is not None else [])]
        if not listeners:
            return None

        def tell(entry_id: int, message_id: str) -> None:
            for listener in listeners:
                listener(entry_id, message_id)

        return tell


def _owner() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{os.urandom(4).hex()}"


@dataclass(slots=True)
class Lifecycle:
    """What changes while an MSH runs: the event loop it runs on, the work pool, whether it is running, the
    tasks it started. ``offload`` False runs parsing and reads on the event loop instead of the work pool (the
    deterministic test network)."""

    offload: bool = True
    loop: asyncio.AbstractEventLoop | None = None
    pool: ThreadPoolExecutor | None = None
    running: bool = False
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    def begin(self) -> None:
        """The runtime starts on the running event loop."""
        self.loop = asyncio.get_running_loop()
        if self.offload:
            self.pool = ThreadPoolExecutor(
                max_workers=_POOL_THREADS, thread_name_prefix="msh-work", initializer=name_os_thread
            )
        self.running = True

    def stop(self) -> None:
        """The runtime is stopping: nothing new is started."""
        self.running = False

    def end(self) -> None:
        """The runtime has stopped: the work pool goes."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None

    async def off_loop(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn`` on the work pool (parsing, checks, reads), not on the event loop (unless not offloading)."""
        if not self.offload:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    def spawn(self, make: Callable[[], Awaitable[None]]) -> None:
        """Start ``make()`` as a task on the runtime's loop (from any thread); nothing when not running."""
        loop = self.loop
        if loop is None or not self.running:
            return

        def start() -> None:
            task = asyncio.ensure_future(make())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            start()
        else:
            loop.call_soon_threadsafe(start)


@dataclass(frozen=True)
class Core:
    """The MSH's shared parts, wired once (see the module docs): ``routes`` is the routing table
    (:mod:`msh.engine.routing`); ``security`` applies the MSH's keys where the agreements ask
    (:mod:`msh.runtime.security`); ``questions`` are the Pings and StatusRequests this process awaits an
    answer to (:mod:`msh.runtime.questions`); ``life`` is what changes while it runs (:class:`Lifecycle`).
    ``counters`` is the one mutable value here: the counts the parts add to."""

    settings: Settings
    clock: Callable[[], datetime]
    ids: Callable[[], str]
    party: PartyKey
    registry: CpaRegistry
    store: Store
    writer: Writer
    transport: Transport
    tls: ClientContexts
    callbacks: Callbacks
    security: MessageSecurity
    life: Lifecycle = field(default_factory=Lifecycle)
    routes: tuple[Route, ...] = ()
    counters: Counter[str] = field(default_factory=Counter)
    owner: str = field(default_factory=_owner)
    relays: SyncRelays = field(default_factory=SyncRelays)
    """Connections waiting for the answer to a forward (an intermediary relaying SyncReply, ebMS2 §4.3)."""
    questions: Questions = field(default_factory=Questions)

    def party_label(self) -> str:
        value, type_ = self.party
        return f"{value!r}" + (f" (type {type_})" if type_ else "")

    @property
    def running(self) -> bool:
        return self.life.running

    @property
    def offload(self) -> bool:
        return self.life.offload

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self.life.loop

    @property
    def tasks(self) -> set[asyncio.Task[Any]]:
        return self.life.tasks

    async def off_loop(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn`` on the work pool (:meth:`Lifecycle.off_loop`)."""
        return await self.life.off_loop(fn, *args)

    def spawn(self, make: Callable[[], Awaitable[None]]) -> None:
        """Start ``make()`` as a task on the runtime's loop (:meth:`Lifecycle.spawn`)."""
        self.life.spawn(make)


def wire(
    settings: Settings,
    *,
    party: PartyKey,
    registry: CpaRegistry,
    security: MessageSecurity,
    store: Store,
    clock: Callable[[], datetime],
    ids: Callable[[], str] | None,
    transport: Transport | None,
    writer: Writer | None,
    callbacks: Callbacks,
    offload: bool,
    routes: Iterable[Route] | None,
) -> Core:
    """The :class:`Core` of an MSH, each part not given made as ``settings`` say: new MessageIds in
    ``identity.message_id_domain``, a group-commit writer on ``store``, the transports of
    :func:`msh.runtime.transports.transports_from` (HTTP(S) with the ``sending`` timeouts and limit, and the
    others), the ``tls`` client keys, the ``routing.routes`` table."""
    return Core(
        settings=settings,
        clock=clock,
        ids=ids if ids is not None else functools.partial(new_message_id, settings.identity.message_id_domain),
        party=party,
        registry=registry,
        store=store,
        writer=writer if writer is not None else GroupCommitWriter(store, max_batch=_GROUP_COMMIT, name="msh-writer"),
        transport=transport if transport is not None else transports_from(settings),
        tls=ClientContexts(
            certificate=settings.tls.certificate, private_key=settings.tls.private_key, trusted=settings.tls.trusted
        ),
        callbacks=callbacks,
        security=security,
        life=Lifecycle(offload=offload),
        routes=tuple(routes) if routes is not None else settings.routing.routes,
    )
