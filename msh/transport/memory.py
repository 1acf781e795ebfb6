"""An in-memory network of MSHs in one process (docs/design.md §2: every adapter has an in-memory twin).

:class:`MemoryNetwork` routes each :class:`~msh.transport.port.Request` to the inbound handler attached
at its URL (another MSH of the same process, on the same event loop). Nothing moves by itself: a send
waits in the network's queue until :meth:`MemoryNetwork.pump` delivers it, so a test decides when the
network moves and sees a deterministic order. Switches (:class:`NetworkFaults`) lose requests (the
receiver never sees them) or answers (the receiver processed the request, the sender hears nothing),
delay deliveries on the network's clock, reorder what is deliverable, or take an endpoint down; losses
are drawn from a seeded random source, or forced for the next requests or answers.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from msh.transport.port import HttpReply, InboundHandler, Request, Response, TransportFailure, body_bytes

__all__ = ["MemoryNetwork", "MemoryTransport", "NetworkFaults"]

_YIELDS = 50
"""Turns of the event loop a delivery waits, with nothing else to deliver, before it just awaits its answer."""


@dataclass
class NetworkFaults:
    """What the network does wrong: each request is lost with probability ``lose_requests``, each answer
    with ``lose_answers``; the next ``lose_next_requests``/``lose_next_answers`` are lost for sure; every
    delivery waits ``delay`` on the network's clock; ``reorder`` delivers what is due in random order;
    an endpoint URL in ``down`` refuses connections; ``lose_requests_to`` / ``lose_answers_from`` map an
    endpoint URL to the probability of losing a request to it / an answer from it (one hop of a path);
    ``tamper``, when set, is a man in the middle: it gets each request's URL and body and returns the
    body delivered (a test of what message security detects); ``drop``, when set, loses every request for
    which it returns True (given the URL and body: a particular message that never arrives)."""

    lose_requests: float = 0.0
    lose_answers: float = 0.0
    lose_requests_to: dict[str, float] = field(default_factory=dict)
    lose_answers_from: dict[str, float] = field(default_factory=dict)
    lose_next_requests: int = 0
    lose_next_answers: int = 0
    delay: timedelta = timedelta(0)
    reorder: bool = False
    down: set[str] = field(default_factory=set)
    tamper: Callable[[str, bytes], bytes] | None = None
    drop: Callable[[str, bytes], bool] | None = None


@dataclass
class _Delivery:
    request: Request
    due: datetime | None
    future: asyncio.Future[Response]
    number: int


class MemoryNetwork:
    """Endpoints by URL and the requests in flight between them (see the module docs).

    ``clock`` is the time deliveries are delayed against (the test network's fake clock); ``seed`` makes
    the random losses and orders repeatable. ``stats`` counts requests sent, delivered and lost, and
    answers lost. ``observers`` are called with each request as it is sent (a test sees what went over the
    wire, headers included, without replacing an MSH's transport).
    """

    def __init__(self, *, clock: Callable[[], datetime] | None = None, seed: int = 0) -> None:
        self.clock = clock
        self.rng = random.Random(seed)
        self.faults = NetworkFaults()
        self.stats: Counter[str] = Counter()
        self._endpoints: dict[str, InboundHandler] = {}
        self._queue: list[_Delivery] = []
        self._sent = 0
        self.observers: list[Callable[[Request], object]] = []

    def attach(self, url: str, handler: InboundHandler) -> None:
        """Deliver requests for ``url`` to ``handler`` (an MSH's inbound pipeline)."""
        self._endpoints[url] = handler

    def detach(self, url: str) -> None:
        self._endpoints.pop(url, None)

    def transport(self) -> MemoryTransport:
        """A transport that sends into this network (one per MSH)."""
        return MemoryTransport(self)

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet delivered, lost or refused."""
        return sum(1 for d in self._queue if not d.future.done())

    def next_due(self) -> datetime | None:
        """When the earliest delayed delivery becomes deliverable (None: none is waiting on the clock)."""
        waiting = [d.due for d in self._queue if d.due is not None and not d.future.done()]
        return min(waiting) if waiting else None

    def _enqueue(self, request: Request) -> asyncio.Future[Response]:
        request = request.in_memory()  # a twin for tests: a streamed body is read whole here
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        due = None
        if self.faults.delay > timedelta(0) and self.clock is not None:
            due = self.clock() + self.faults.delay
        self._sent += 1
        self.stats["requests"] += 1
        for observe in self.observers:
            observe(request)
        self._queue.append(_Delivery(request, due, future, self._sent))
        return future

    def _deliverable(self) -> list[_Delivery]:
        now = self.clock() if self.clock is not None else None
        ready = [
            d for d in self._queue if not d.future.done() and (d.due is None or (now is not None and now >= d.due))
        ]
        if self.faults.reorder:
            self.rng.shuffle(ready)
        return ready

    def _lose(self, what: str, url: str) -> bool:
        forced = f"lose_next_{what}"
        if getattr(self.faults, forced) > 0:
            setattr(self.faults, forced, getattr(self.faults, forced) - 1)
            return True
        per_url = self.faults.lose_requests_to if what == "requests" else self.faults.lose_answers_from
        probability: float = per_url.get(url, getattr(self.faults, f"lose_{what}"))
        return probability > 0 and self.rng.random() < probability

    async def pump(self) -> int:
        """Deliver every request that is due, one after the other, and hand each sender its answer (or
        its failure); return how many requests were settled."""
        settled = 0
        for delivery in self._deliverable():
            if delivery not in self._queue:  # delivered meanwhile, while another delivery waited on it
                continue
            self._queue.remove(delivery)
            if delivery.future.done():  # the sender gave up (cancelled)
                continue
            settled += 1
            await self._deliver(delivery)
        self._queue = [d for d in self._queue if not d.future.done()]
        return settled

    async def _answer(self, handler: InboundHandler, body: bytes, request: Request) -> HttpReply:
        """The handler's answer to ``request``; while the handler waits, the requests it (or the transmissions
        it started) sent meanwhile are delivered: an intermediary relaying a synchronous reply keeps the
        connection open until its own forward is answered (ebMS2 §4.3)."""
        answering = asyncio.ensure_future(handler.handle_http(body, request.content_type, size=len(body)))
        idle = 0
        while not answering.done() and idle < _YIELDS:
            await asyncio.sleep(0)
            waiting = [d for d in self._deliverable() if d in self._queue]
            if not waiting:
                idle += 1
                continue
            idle = 0
            for delivery in waiting:
                if delivery in self._queue:
                    self._queue.remove(delivery)
                    if not delivery.future.done():
                        await self._deliver(delivery)
        return await answering

    async def _deliver(self, delivery: _Delivery) -> None:
        request = delivery.request
        handler = self._endpoints.get(request.url)
        if handler is None or request.url in self.faults.down:
            self.stats["refused"] += 1
            delivery.future.set_exception(TransportFailure(f"connection refused ({request.url})", transmitted=False))
            return
        sent = body_bytes(request.body)  # already bytes: see _enqueue
        dropped = self.faults.drop is not None and self.faults.drop(request.url, sent)
        if dropped or self._lose("requests", request.url):
            self.stats["requests-lost"] += 1
            delivery.future.set_exception(TransportFailure(f"the request to {request.url} was lost"))
            return
        body = sent if self.faults.tamper is None else self.faults.tamper(request.url, sent)
        reply = await self._answer(handler, body, request)
        self.stats["delivered"] += 1
        if delivery.future.done():
            return
        if self._lose("answers", request.url):
            self.stats["answers-lost"] += 1
            delivery.future.set_exception(TransportFailure(f"the answer from {request.url} was lost"))
            return
        delivery.future.set_result(Response(reply.status, reply.content_type, reply.body))


class MemoryTransport:
    """:class:`~msh.transport.port.Transport` into a :class:`MemoryNetwork`: a send waits until the
    network delivers it (:meth:`MemoryNetwork.pump`)."""

    def __init__(self, network: MemoryNetwork) -> None:
        self.network = network

    async def send(self, request: Request) -> Response:
        return await self.network._enqueue(request)

    async def close(self) -> None:
        return None
