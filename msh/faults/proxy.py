"""A lossy TCP proxy: loses requests and responses between two MSHs, as a bad network would.

It listens where the agreement says the receiver is and forwards each connection to the real server,
untouched (TLS passes through; nothing is decrypted). Per connection it sees "messages": a run of bytes in
one direction after bytes in the other (HTTP/1.1 sends one request at a time per connection and the
answer after it; with TLS the handshake records count too). At the start of each message it may:

* lose a request (``drop_requests``): the bytes are swallowed and the connection aborted: the server never
  got it, the client sees the connection die;
* lose a response (``drop_responses``): the server processed the request but its answer is swallowed and
  the connection aborted: the acknowledgment never arrives.

``down`` aborts open connections and accepts new ones only to close them at once (a dead receiver).
``seed`` makes the losses repeatable. :func:`run_in_thread` hosts a proxy for synchronous code; ``python -m
msh.faults.proxy --help`` runs one from the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import random
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

__all__ = ["LossyProxy", "ProxyStats", "RunningProxy", "main", "run_in_thread"]

_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class ProxyStats:
    """What the proxy did so far."""

    connections: int = 0
    requests_forwarded: int = 0
    requests_dropped: int = 0
    responses_forwarded: int = 0
    responses_dropped: int = 0
    bytes_up: int = 0
    bytes_down: int = 0


def _probability(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a probability between 0 and 1, got {value}")
    return float(value)


class _Link:
    """One proxied connection: which direction spoke last, and both transports to abort."""

    def __init__(self, client: asyncio.StreamWriter, server: asyncio.StreamWriter) -> None:
        self.client = client
        self.server = server
        self.last: Literal["up", "down"] | None = None
        self.dead = False

    def abort(self) -> None:
        self.dead = True
        for writer in (self.client, self.server):
            with contextlib.suppress(Exception):
                writer.transport.abort()


class LossyProxy:
    """The proxy (asyncio); see the module docs."""

    def __init__(
        self,
        listen: tuple[str, int],
        target: tuple[str, int],
        *,
        drop_requests: float = 0.0,
        drop_responses: float = 0.0,
        delay: float = 0.0,
        seed: int | None = None,
    ) -> None:
        self.listen = listen
        self.target = target
        self._drop_requests = _probability("drop_requests", drop_requests)
        self._drop_responses = _probability("drop_responses", drop_responses)
        if delay < 0:
            raise ValueError(f"delay must not be negative, got {delay}")
        self.delay = delay
        self._random = random.Random(seed)
        self._down = False
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._counts: dict[str, int] = {f.name: 0 for f in dataclasses.fields(ProxyStats)}

    @property
    def drop_requests(self) -> float:
        return self._drop_requests

    @drop_requests.setter
    def drop_requests(self, value: float) -> None:
        self._drop_requests = _probability("drop_requests", value)

    @property
    def drop_responses(self) -> float:
        return self._drop_responses

    @drop_responses.setter
    def drop_responses(self, value: float) -> None:
        self._drop_responses = _probability("drop_responses", value)

    @property
    def down(self) -> bool:
        return self._down

    @down.setter
    def down(self, value: bool) -> None:
        self._down = bool(value)
        if self._down:
            for link in list(self._links):
                link.abort()

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            raise RuntimeError("the proxy is not started")
        return int(self._server.sockets[0].getsockname()[1])

    def stats(self) -> ProxyStats:
        return ProxyStats(**self._counts)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.listen[0], self.listen[1], reuse_address=True)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for link in list(self._links):
                link.abort()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._counts["connections"] += 1
        if self._down:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()  # the real server is not there: the client sees a dead connection
            return
        link = _Link(writer, up_writer)
        self._links.add(link)
        try:
            await asyncio.gather(self._pump(link, reader, up_writer, "up"), self._pump(link, up_reader, writer, "down"))
        finally:
            self._links.discard(link)
            link.abort()

    async def _pump(
        self, link: _Link, source: asyncio.StreamReader, sink: asyncio.StreamWriter, way: Literal["up", "down"]
    ) -> None:
        while not link.dead:
            try:
                data = await source.read(_CHUNK)
            except (ConnectionError, OSError):
                break
            if not data or link.dead:
                break
            if link.last != way:
                link.last = way
                kind = "requests" if way == "up" else "responses"
                chance = self._drop_requests if way == "up" else self._drop_responses
                if chance and self._random.random() < chance:
                    self._counts[f"{kind}_dropped"] += 1
                    link.abort()
                    break
                self._counts[f"{kind}_forwarded"] += 1
            self._counts["bytes_up" if way == "up" else "bytes_down"] += len(data)
            if self.delay:
                await asyncio.sleep(self.delay)
            try:
                sink.write(data)
                await sink.drain()
            except (ConnectionError, OSError):
                break
        if not link.dead:
            with contextlib.suppress(Exception):
                sink.write_eof()


class RunningProxy:
    """A :class:`LossyProxy` on an event loop in a daemon thread (for synchronous tests and scripts)."""

    def __init__(self, proxy: LossyProxy) -> None:
        self.proxy = proxy
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="lossy-proxy", daemon=True)

    def _call(self, coro: object) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)  # type: ignore[arg-type]

    def start(self) -> None:
        self._thread.start()
        self._call(self.proxy.start())

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._call(self.proxy.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    @property
    def port(self) -> int:
        return self.proxy.port

    def stats(self) -> ProxyStats:
        return self.proxy.stats()

    def set_down(self, down: bool) -> None:
        self._loop.call_soon_threadsafe(setattr, self.proxy, "down", down)

    def set_loss(self, drop_requests: float, drop_responses: float) -> None:
        _probability("drop_requests", drop_requests)
        _probability("drop_responses", drop_responses)

        def apply() -> None:
            self.proxy.drop_requests = drop_requests
            self.proxy.drop_responses = drop_responses

        self._loop.call_soon_threadsafe(apply)


@contextlib.contextmanager
def run_in_thread(
    listen: tuple[str, int],
    target: tuple[str, int],
    *,
    drop_requests: float = 0.0,
    drop_responses: float = 0.0,
    delay: float = 0.0,
    seed: int | None = None,
) -> Iterator[RunningProxy]:
    """Run a proxy in a thread for the duration of the ``with`` block."""
    running = RunningProxy(
        LossyProxy(listen, target, drop_requests=drop_requests, drop_responses=drop_responses, delay=delay, seed=seed)
    )
    running.start()
    try:
        yield running
    finally:
        running.stop()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return (host or "127.0.0.1", int(port))


async def _serve(args: argparse.Namespace) -> None:
    proxy = LossyProxy(
        args.listen,
        args.target,
        drop_requests=args.drop_requests,
        drop_responses=args.drop_responses,
        delay=args.delay,
        seed=args.seed,
    )
    await proxy.start()
    print(f"lossy proxy {args.listen[0]}:{proxy.port} -> {args.target[0]}:{args.target[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    while not stop.is_set():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), args.report_every)
        print(proxy.stats(), flush=True)
    await proxy.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m msh.faults.proxy``: run a lossy proxy until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m msh.faults.proxy",
        description="Forward TCP connections from LISTEN to TARGET, losing requests and responses at random.",
    )
    parser.add_argument("--listen", type=_address, required=True, metavar="HOST:PORT")
    parser.add_argument("--target", type=_address, required=True, metavar="HOST:PORT")
    parser.add_argument("--drop-requests", type=float, default=0.0, metavar="P", help="probability, 0..1")
    parser.add_argument("--drop-responses", type=float, default=0.0, metavar="P", help="probability, 0..1")
    parser.add_argument("--delay", type=float, default=0.0, metavar="SECONDS", help="added before each chunk")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--report-every", type=float, default=5.0, metavar="SECONDS")
    args = parser.parse_args(argv)
    asyncio.run(_serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
