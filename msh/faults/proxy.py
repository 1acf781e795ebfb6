"""A lossy TCP proxy: loses requests and acknowledgments on purpose, to test reliable messaging.

The proxy sits in front of a receiving MSH: it listens on the address the agreement names and forwards
every TCP connection to the real server. It never looks inside the bytes, so TLS passes through untouched.

Loss is decided per *message*, where a message is a run of chunks in one direction: a chunk flowing the
other way from the connection's previous chunk starts a new message. For HTTP/1.1 (one request at a time
per connection, keep-alive or not) client→server messages are requests and server→client messages are
responses. At the start of each message the proxy draws once:

- ``drop_requests``: the client's message is swallowed and both sides are aborted (a lost request: the
  server never gets a complete request, the client sees the connection reset before any answer);
- ``drop_responses``: the server's message is swallowed and both sides are aborted (a lost
  acknowledgment: the server processed the request, the client never sees the answer).

A message that is not dropped waits ``delay`` before each chunk and, with ``jitter``, a random time up to
``jitter`` seconds before its first: requests sent at once on several connections then arrive in another
order.

Through TLS the first messages of a connection are the handshake records (ClientHello, ServerHello...);
they are drawn for like any other message, so a dropped handshake is also a lost request or a lost
response. A server that speaks first, or an interim ``100 Continue``, also starts a new message.

``drop_next_response_after(N)`` arms a one-shot loss: the next server→client message on a connection
whose client has sent at least N bytes since it was armed is dropped (and both sides aborted), whatever the
loss rates. Through TLS that singles out the answer to a large request (a business message with its
payload) and spares the handshake flights, whose requests are small: the receiving MSH has the message, the
sender never hears so (a lost acknowledgment, on purpose, once). The bytes are counted per connection, not
per message, because a server may speak in the middle of a request (TLS 1.3 sends its session tickets when
it likes) and split it in two; on a kept-alive connection the small requests after the arming count too.

``down`` refuses service: the listener stays bound (so the port stays ours), new connections are accepted
and immediately aborted, and setting it aborts every open connection. A client sees a reset rather than
"connection refused"; for a sender both are the same failed delivery attempt.

Aborts are resets (``SO_LINGER`` 0), so a client fails at once instead of waiting for an answer.

Run it from the command line (``python -m msh.faults.proxy --help``), from asyncio (:class:`LossyProxy`)
or from synchronous code (:func:`run_in_thread`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import enum
import functools
import logging
import math
import random
import signal
import socket
import struct
import sys
import threading
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, fields
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["LossyProxy", "ProxyStats", "RunningProxy", "main", "parse_address", "run_in_thread"]

_log = logging.getLogger(__name__)

_CHUNK = 64 * 1024
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ProxyStats:
    """A snapshot of the proxy's counters (requests and responses are messages, see the module docs).

    ``connections`` counts the connections served; those refused while ``down`` are in
    ``connections_refused``, those whose target could not be reached also in ``target_failures``.
    """

    connections: int = 0
    connections_refused: int = 0
    target_failures: int = 0
    requests_forwarded: int = 0
    requests_dropped: int = 0
    responses_forwarded: int = 0
    responses_dropped: int = 0
    bytes_up: int = 0
    bytes_down: int = 0

    def line(self) -> str:
        """One human-readable line, as the command line prints it."""
        return (
            f"connections={self.connections} refused={self.connections_refused} "
            f"target_failures={self.target_failures} "
            f"requests forwarded={self.requests_forwarded} dropped={self.requests_dropped} "
            f"responses forwarded={self.responses_forwarded} dropped={self.responses_dropped} "
            f"bytes_up={self.bytes_up} bytes_down={self.bytes_down}"
        )


class _Direction(enum.Enum):
    UP = "client->server"
    DOWN = "server->client"


def _probability(field: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{field} must be a number between 0 and 1, got {value!r}")
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{field} must be between 0 and 1, got {value!r}")
    return float(value)


def _seconds(field: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value < math.inf:
        raise ValueError(f"{field} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def _address(field: str, value: tuple[str, int]) -> tuple[str, int]:
    host, port = value
    if not isinstance(host, str) or not host:
        raise ValueError(f"{field} host must be a non-empty string, got {host!r}")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"{field} port must be an integer 0..65535, got {port!r}")
    return host, port


def _abort(writer: asyncio.StreamWriter | None) -> None:
    """Close a connection at once with a reset (SO_LINGER 0), discarding anything not yet sent."""
    if writer is None:
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class _Link:
    """One proxied connection: the client side, the server side and which direction spoke last."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.server: asyncio.StreamWriter | None = None
        self.last: _Direction | None = None
        self.up_bytes = 0  # client->server bytes since drop_next_response_after was armed (or the link opened)
        self.aborted = False

    def abort(self) -> None:
        if not self.aborted:
            self.aborted = True
            _abort(self.client)
            _abort(self.server)

    def close(self) -> None:
        for writer in (self.client, self.server):
            if writer is not None and not writer.transport.is_closing():
                writer.close()


class LossyProxy:
    """An asyncio TCP forwarder from ``listen`` to ``target`` that loses requests and responses.

    Not thread-safe: use it from its event loop, or through :class:`RunningProxy`.
    """

    def __init__(
        self,
        listen: tuple[str, int],
        target: tuple[str, int],
        *,
        drop_requests: float = 0.0,
        drop_responses: float = 0.0,
        delay: float = 0.0,
        jitter: float = 0.0,
        seed: int | None = None,
    ) -> None:
        self._listen = _address("listen", listen)
        self._target = _address("target", target)
        self._drop_requests = _probability("drop_requests", drop_requests)
        self._drop_responses = _probability("drop_responses", drop_responses)
        self._delay = _seconds("delay", delay)
        self._jitter = _seconds("jitter", jitter)
        self._random = random.Random(seed)
        self._drop_after: int | None = None
        self._down = False
        self._closing = False
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._links: set[_Link] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self._counts: dict[str, int] = {f.name: 0 for f in fields(ProxyStats)}

    # -- settings -------------------------------------------------------------------------------

    @property
    def listen(self) -> tuple[str, int]:
        return self._listen

    @property
    def target(self) -> tuple[str, int]:
        return self._target

    @property
    def port(self) -> int:
        """The bound port (the real one when ``listen`` asked for port 0)."""
        if self._port is None:
            raise RuntimeError("the proxy is not started")
        return self._port

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
    def delay(self) -> float:
        return self._delay

    @delay.setter
    def delay(self, value: float) -> None:
        self._delay = _seconds("delay", value)

    def drop_next_response_after(self, request_bytes: int) -> None:
        """Drop the next response on a connection whose client has sent at least ``request_bytes`` bytes from
        now on (once). Arming it again before that loss happened changes the size and keeps the counts."""
        if request_bytes < 1:
            raise ValueError(f"request_bytes must be at least 1, got {request_bytes}")
        if self._drop_after is None:  # what was sent before the arming does not count (a re-arming keeps it)
            for link in self._links:
                link.up_bytes = 0
        self._drop_after = request_bytes

    @property
    def jitter(self) -> float:
        """Each message waits a random time up to this many seconds before it is passed on (so messages sent
        at once on several connections arrive in another order)."""
        return self._jitter

    @jitter.setter
    def jitter(self, value: float) -> None:
        self._jitter = _seconds("jitter", value)

    @property
    def down(self) -> bool:
        """Refusing service: new connections are accepted and aborted; setting it aborts open ones."""
        return self._down

    @down.setter
    def down(self, value: bool) -> None:
        self._down = bool(value)
        if self._down:
            for link in list(self._links):
                link.abort()

    def stats(self) -> ProxyStats:
        return ProxyStats(**self._counts)

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind the listening socket (on the ``listen`` host only); connections are served from then on."""
        if self._server is not None:
            raise RuntimeError("the proxy is already started")
        host, port = self._listen
        self._closing = False
        self._server = await asyncio.start_server(self._accept, host, port)
        self._port = int(self._server.sockets[0].getsockname()[1])
        _log.info("lossy proxy on %s:%d -> %s:%d", host, self._port, *self._target)

    async def stop(self) -> None:
        """Close the listener and abort every open connection; idempotent."""
        self._closing = True
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for link in list(self._links):
            link.abort()
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    async def __aenter__(self) -> LossyProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- forwarding -----------------------------------------------------------------------------

    def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        """The listener's callback: refuse the connection, or serve it in a task tracked from its creation.

        The callback is synchronous on purpose. For a coroutine callback asyncio creates the task itself
        and adds a done-callback that calls ``task.exception()``, which on Python 3.11 raises for a
        cancelled task: every handler :meth:`stop` cancels would be logged as "Exception in callback ...
        CancelledError". Tracking the task here also lets :meth:`stop` cancel one that has not started.
        """
        if self._down or self._closing:
            self._counts["connections_refused"] += 1
            _abort(client_writer)
            return
        task = asyncio.get_running_loop().create_task(self._handle(client_reader, client_writer))
        self._handlers.add(task)
        task.add_done_callback(functools.partial(self._handled, client_writer))

    def _handled(self, client_writer: asyncio.StreamWriter, task: asyncio.Task[None]) -> None:
        """A handler task ended: forget it, and make sure its client is closed whatever the ending."""
        self._handlers.discard(task)
        if task.cancelled():  # by stop(), possibly before _handle's first step, so before its finally
            _abort(client_writer)
            return
        exc = task.exception()  # retrieved, so asyncio does not report it again when the task is freed
        if exc is not None:
            _log.error("proxied connection failed", exc_info=exc)
            _abort(client_writer)

    async def _handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self._counts["connections"] += 1
        link = _Link(client_writer)
        self._links.add(link)
        try:
            try:
                server_reader, link.server = await asyncio.open_connection(*self._target)
            except OSError as exc:
                self._counts["target_failures"] += 1
                _log.info("target %s:%d unreachable: %s", *self._target, exc)
                link.abort()
                return
            if self._down or self._closing:
                link.abort()
                return
            await asyncio.gather(
                self._pump(link, _Direction.UP, client_reader, link.server),
                self._pump(link, _Direction.DOWN, server_reader, client_writer),
            )
        finally:
            self._links.discard(link)
            link.close()

    def _lose(self, direction: _Direction, link: _Link) -> bool:
        """Draw for the start of a new message; count it as forwarded or dropped."""
        up = direction is _Direction.UP
        probability = self._drop_requests if up else self._drop_responses
        dropped = probability > 0.0 and self._random.random() < probability
        armed = self._drop_after
        if not up and armed is not None and link.up_bytes >= armed:
            self._drop_after = None  # the one-shot loss of drop_next_response_after
            dropped = True
        kind = "requests" if up else "responses"
        self._counts[f"{kind}_{'dropped' if dropped else 'forwarded'}"] += 1
        return dropped

    async def _pump(
        self,
        link: _Link,
        direction: _Direction,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
    ) -> None:
        counter = "bytes_up" if direction is _Direction.UP else "bytes_down"
        try:
            while data := await source.read(_CHUNK):
                if link.aborted:
                    return
                if link.last is not direction:
                    link.last = direction
                    if self._lose(direction, link):
                        _log.debug("dropping a %s message", direction.value)
                        link.abort()
                        return
                    if self._jitter:
                        await asyncio.sleep(self._random.uniform(0.0, self._jitter))
                        if link.aborted:
                            return
                if self._delay:
                    await asyncio.sleep(self._delay)
                    if link.aborted:
                        return
                sink.write(data)
                self._counts[counter] += len(data)
                if direction is _Direction.UP:
                    link.up_bytes += len(data)
                await sink.drain()
            if not link.aborted and sink.can_write_eof():
                sink.write_eof()  # pass a half-close on
        except OSError:  # a reset on one side resets the other
            link.abort()


# -- synchronous hosting --------------------------------------------------------------------------


class RunningProxy:
    """A :class:`LossyProxy` served by an event loop in a daemon thread; every method is thread-safe.

    Each call waits (up to ``timeout`` seconds) until the proxy's loop has carried it out, so a
    ``set_down(True)`` or ``set_loss(...)`` is in force when it returns.
    """

    def __init__(self, proxy: LossyProxy, *, timeout: float = 10.0) -> None:
        self.proxy = proxy
        self._timeout = timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.proxy.port

    def start(self) -> RunningProxy:
        if self._loop is not None:
            raise RuntimeError("the proxy thread is already started")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="lossy-proxy", daemon=True)
        self._thread.start()
        try:
            self._call(self.proxy.start())
        except BaseException:
            self._shutdown()
            raise
        return self

    def stop(self) -> None:
        """Stop the proxy and its thread; idempotent."""
        if self._loop is None:
            return
        try:
            self._call(self.proxy.stop())
        finally:
            self._shutdown()

    close = stop

    def stats(self) -> ProxyStats:
        return self._run(self.proxy.stats)

    def set_down(self, down: bool) -> None:
        def apply() -> None:
            self.proxy.down = down

        self._run(apply)

    def drop_next_response_after(self, request_bytes: int) -> None:
        """:meth:`LossyProxy.drop_next_response_after`, from any thread."""
        self._run(lambda: self.proxy.drop_next_response_after(request_bytes))

    def set_loss(self, drop_requests: float, drop_responses: float) -> None:
        _probability("drop_requests", drop_requests)
        _probability("drop_responses", drop_responses)

        def apply() -> None:
            self.proxy.drop_requests = drop_requests
            self.proxy.drop_responses = drop_responses

        self._run(apply)

    def set_jitter(self, jitter: float) -> None:
        """:attr:`LossyProxy.jitter`, from any thread."""
        _seconds("jitter", jitter)

        def apply() -> None:
            self.proxy.jitter = jitter

        self._run(apply)

    def __enter__(self) -> RunningProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        if self._loop is None:
            coro.close()
            raise RuntimeError("the proxy thread is not started")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self._timeout)

    def _run(self, fn: Callable[[], _T]) -> _T:
        async def in_loop() -> _T:
            return fn()

        return self._call(in_loop())

    def _shutdown(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(self._timeout)
        if thread is None or not thread.is_alive():
            loop.close()


def run_in_thread(
    listen: tuple[str, int],
    target: tuple[str, int],
    *,
    drop_requests: float = 0.0,
    drop_responses: float = 0.0,
    delay: float = 0.0,
    jitter: float = 0.0,
    seed: int | None = None,
) -> RunningProxy:
    """A proxy for synchronous code: ``with run_in_thread(...) as proxy:`` serves it in a daemon thread."""
    return RunningProxy(
        LossyProxy(
            listen,
            target,
            drop_requests=drop_requests,
            drop_responses=drop_responses,
            delay=delay,
            jitter=jitter,
            seed=seed,
        )
    )


# -- command line ---------------------------------------------------------------------------------


def parse_address(text: str, *, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or a bare ``port`` (on ``default_host``)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host = default_host
    host = host.strip("[]") or default_host
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"not a host:port address: {text!r}") from None
    return _address("address", (host, number))


def _argument_parser() -> argparse.ArgumentParser:
    def address(text: str) -> tuple[str, int]:
        try:
            return parse_address(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    def checked(check: Callable[[str, float], float], what: str) -> Callable[[str], float]:
        def convert(text: str) -> float:
            try:
                return check(what, float(text))
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None

        return convert

    parser = argparse.ArgumentParser(
        prog="python -m msh.faults.proxy",
        description=(
            "A lossy TCP proxy: forwards connections from --listen to --target, losing requests and "
            "responses with the given probabilities. TLS passes through untouched. Prints counters "
            "every --stats-every seconds and on exit. On POSIX, SIGUSR1 toggles 'down' (refuse service); "
            "Ctrl-C or SIGTERM stops."
        ),
    )
    add = parser.add_argument
    add(
        "--listen",
        type=address,
        default=("127.0.0.1", 8082),
        metavar="HOST:PORT",
        help="where to listen (default 127.0.0.1:8082; a bare PORT binds 127.0.0.1 only)",
    )
    add("--target", type=address, required=True, metavar="HOST:PORT", help="the real server")
    add("--drop-requests", type=checked(_probability, "--drop-requests"), default=0.0, metavar="P", help="0..1")
    add("--drop-responses", type=checked(_probability, "--drop-responses"), default=0.0, metavar="P", help="0..1")
    add("--delay", type=checked(_seconds, "--delay"), default=0.0, metavar="S", help="added before each chunk")
    add(
        "--jitter",
        type=checked(_seconds, "--jitter"),
        default=0.0,
        metavar="S",
        help="each message waits a random 0..S seconds first (reorders messages sent at once)",
    )
    add("--seed", type=int, default=None, help="seed for repeatable losses")
    add("--stats-every", type=checked(_seconds, "--stats-every"), default=5.0, metavar="S", help="default 5")
    add("--down", action="store_true", help="start refusing service")
    return parser


async def _serve(args: argparse.Namespace) -> None:
    proxy = LossyProxy(
        args.listen,
        args.target,
        drop_requests=args.drop_requests,
        drop_responses=args.drop_responses,
        delay=args.delay,
        jitter=args.jitter,
        seed=args.seed,
    )
    proxy.down = args.down
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()

    def toggle() -> None:
        proxy.down = not proxy.down
        print(f"down={proxy.down}", flush=True)

    handlers: list[tuple[int, Callable[[], object]]] = [(signal.SIGINT, stopping.set)]
    if sys.platform != "win32":
        handlers += [(signal.SIGTERM, stopping.set), (signal.SIGUSR1, toggle)]
    for signum, handler in handlers:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, handler)

    await proxy.start()
    print(f"listening on {proxy.listen[0]}:{proxy.port} -> {args.target[0]}:{args.target[1]}", flush=True)
    try:
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), args.stats_every or None)
            if not stopping.is_set():
                print(proxy.stats().line(), flush=True)
    finally:
        await proxy.stop()
        print(f"final: {proxy.stats().line()}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m msh.faults.proxy``: run a lossy proxy until Ctrl-C or SIGTERM."""
    args = _argument_parser().parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
