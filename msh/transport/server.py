"""Serving an ASGI endpoint on uvicorn (httptools and, where installed, uvloop), with limits at the door
and an orderly stop on SIGINT/SIGTERM (SIGHUP: the caller's ``on_hangup``, e.g. reload the agreements).

:func:`serve_app` runs any ASGI application on a listening socket (:func:`bind`), with the TLS context it
is given (mutual TLS when that context asks for client certificates) and the :class:`DoorLimits` its
protocol applies (:class:`GuardedProtocol`); the caller's ``start`` runs before it listens and its
``stop`` after it has stopped (the MSH's runtime: :func:`msh.runtime.serving.serve`).

uvicorn's own signal handling is not used: after its shutdown it raises the captured signal again, which
would kill the process (exit status 143 for SIGTERM) before the caller's own shutdown runs.
:func:`serve_app` installs its handlers instead, for its whole run (the caller's stop included), when it
runs on the main thread: the first signal asks uvicorn to exit, a second Ctrl-C stops waiting for open
connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import ssl
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from types import FrameType
from typing import Any, ClassVar, Final

import httptools
import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

__all__ = [
    "DoorLimits",
    "GuardedProtocol",
    "Running",
    "TlsHttpToolsProtocol",
    "bind",
    "guarded_protocol",
    "run_loop",
    "serve_app",
    "start_app",
]

log = logging.getLogger("msh.server")


def bind(host: str, port: int, *, section: str = "server") -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: any free port; read it from ``getsockname()``);
    ``section``: the settings section that names them (``server``, ``api``), said when the port is busy."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        from msh.errors import ConfigurationError

        raise ConfigurationError(
            f"{section}.host/{section}.port: cannot listen on {host}:{port}: {exc.strerror}; stop what uses that "
            f"port or choose another ({section}.port, or MSH_{section.upper()}_PORT)"
        ) from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


class TlsHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with the ASGI TLS extension in each request's scope: the client
    certificate of the connection as ``extensions["tls"]["client_cert_chain"]`` (PEM), so the endpoint can
    bind it to the party the message claims to come from (docs/design.md §7). uvicorn itself does not report
    the client certificate to the application."""

    _tls: dict[str, object] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is None:
            return
        der = ssl_object.getpeercert(binary_form=True)
        chain = [ssl.DER_cert_to_PEM_cert(der)] if der else []
        self._tls = {"client_cert_chain": chain, "tls_version": None, "cipher_suite": None}

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._tls is not None:
            self.scope["extensions"] = {"tls": self._tls}  # type: ignore[dict-item]


_HEAD_END = b"\r\n\r\n"


def _refusal(status: int, text: str) -> bytes:
    """A complete HTTP/1.1 response that closes the connection (for refusals before the application)."""
    body = text.encode("utf-8") + b"\n"
    return b"".join(
        [
            STATUS_LINE[status],
            b"content-type: text/plain; charset=utf-8\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n\r\n",
            body,
        ]
    )


class _TooManyHeaders(Exception):
    """Raised from the parser's header callback to stop the parse."""


class _RepeatedField(Exception):
    """Raised from the parser's headers-complete callback to stop the parse (see ``_SINGLE_FIELDS``)."""


# Header fields a request may carry once. RFC 9110 §5.3: a sender MUST NOT send a field twice unless its
# definition is a comma-separated list; each of these is a single value, so two of them leave the request's
# meaning to whichever one a hop happens to keep (the last one, here, before this check).
_SINGLE_FIELDS: Final = {
    b"content-type": "RFC 9110 §8.3: Content-Type is one media type",
    b"host": "RFC 9112 §3.2: a server MUST answer 400 to a request with more than one Host",
    b"soapaction": "SOAP 1.1 §6.1.1: SOAPAction is one URI",
}

# llhttp's own framing refusals (httptools' parser errors), in words that say what to fix. RFC 9112 §6.3:
# a request whose body length cannot be determined reliably MUST be answered 400 and the connection closed.
_FRAMING_ERRORS: Final = {
    "Duplicate Content-Length": "more than one Content-Length header field: the body's length is ambiguous "
    "(RFC 9112 §6.3, RFC 9110 §8.6); send one",
    "Transfer-Encoding can't be present with Content-Length": "both Transfer-Encoding and Content-Length: the "
    "body's length is ambiguous (RFC 9112 §6.1, §6.3); send one of them",
    "Content-Length can't be present with Transfer-Encoding": "both Transfer-Encoding and Content-Length: the "
    "body's length is ambiguous (RFC 9112 §6.1, §6.3); send one of them",
    "Content-Length overflow": "Content-Length is larger than any body this server takes (RFC 9110 §8.6)",
    "Invalid `Transfer-Encoding` header value": "Transfer-Encoding must name chunked once, last (RFC 9112 §6.1, §6.3)",
    "Request has invalid `Transfer-Encoding`": "Transfer-Encoding must end with chunked (RFC 9112 §6.3)",
    "Invalid character in Content-Length": "Content-Length is not one decimal number (RFC 9110 §8.6)",
}


class GuardedProtocol(TlsHttpToolsProtocol):
    """:class:`TlsHttpToolsProtocol` with limits at the door, set per server by :func:`guarded_protocol`:

    * the request head (request line and header fields) is counted as it arrives, before the parser
      buffers it: past ``max_header_bytes`` the answer is 431 and the connection closes (httptools would
      otherwise hold a header line of any length in memory); more than ``max_headers`` fields: 431 too;
    * a request whose head or body stops arriving (no byte for ``read_timeout`` seconds while it is
      incomplete, and not because the application is slow to read) gets 408 and the connection closes;
    * a request whose head and body have not all arrived ``request_timeout`` seconds after its first byte
      (however steadily it drips) gets 408 and the connection closes too; a body announced by its
      Content-Length gets ``length / min_rate`` seconds more, so the deadline follows the transfer (a large
      document over a slow link is not cut, a trickle is); should the application be the one not reading
      at that moment, the request gets ``read_timeout`` more each time;
    * a header field that must be single (Content-Type, Host, SOAPAction: ``_SINGLE_FIELDS``) sent twice,
      or a body length that cannot be determined reliably (two Content-Length fields, Content-Length with
      Transfer-Encoding, a Transfer-Encoding that does not end with chunked), gets 400 naming the field
      and the rule, and the connection closes: nothing of it reaches the application;
    * ``max_connections_per_client`` connections at once per client address; the next one gets 503.
    """

    max_header_bytes: ClassVar[int] = 64 * 1024
    max_headers: ClassVar[int] = 100
    read_timeout: ClassVar[float] = 30.0
    request_timeout: ClassVar[float] = 600.0
    min_rate: ClassVar[int] = 64 * 1024
    max_connections_per_client: ClassVar[int] = 128
    per_client: ClassVar[Counter[str]] = Counter()

    _in_head = True
    _head_bytes = 0
    _head_tail = b""
    _header_count = 0
    _incomplete = False
    _read_timer: asyncio.TimerHandle | None = None
    _deadline_timer: asyncio.TimerHandle | None = None
    _client_key: str | None = None
    _refused = False
    _repeated: bytes | None = None
    _single_seen: frozenset[bytes] = frozenset()
    _content_length = 0
    _allowed = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        key = self.client[0] if self.client else "unknown"
        self._client_key = key
        self.per_client[key] += 1
        if self.per_client[key] > self.max_connections_per_client:
            log.warning(
                "refused a connection from %s: %d open (server.max_connections_per_client)",
                key,
                self.per_client[key] - 1,
            )
            self._refuse(503, f"too many connections from {key}; close some and try again")

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_read_timer()
        self._cancel_deadline()
        key = self._client_key
        if key is not None:
            self._client_key = None
            self.per_client[key] -= 1
            if self.per_client[key] <= 0:
                del self.per_client[key]
        super().connection_lost(exc)

    def _refuse(self, status: int, text: str) -> None:
        self._refused = True
        self._cancel_read_timer()
        self._cancel_deadline()
        if not self.transport.is_closing():
            self.transport.write(_refusal(status, text))
            self.transport.close()

    # -- the request head, counted before the parser holds it

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._in_head:
            seen = self._head_tail + data
            end = seen.find(_HEAD_END)
            counted = len(data) if end < 0 else max(0, end + len(_HEAD_END) - len(self._head_tail))
            self._head_bytes += counted
            self._head_tail = seen[-(len(_HEAD_END) - 1) :]
            if self._head_bytes > self.max_header_bytes:
                log.warning("refused a request head over %d bytes from %s", self.max_header_bytes, self._client_key)
                self._refuse(431, f"request head over {self.max_header_bytes} bytes (server.max_header_bytes)")
                return
        self._incomplete = True
        self._arm_read_timer()
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError:
            if self._header_count > self.max_headers:
                log.warning("refused a request with over %d header fields from %s", self.max_headers, self._client_key)
                self._refuse(431, f"more than {self.max_headers} header fields (server.max_headers)")
                return
            if self._repeated is not None:
                name = self._repeated.decode("latin-1")
                log.warning("refused a request with two %s header fields from %s", name, self._client_key)
                self._refuse(400, f"more than one {name} header field; send it once ({_SINGLE_FIELDS[self._repeated]})")
                return
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
        except httptools.HttpParserError as exc:
            framing = _FRAMING_ERRORS.get(str(exc))
            if framing is not None:
                log.warning("refused a request from %s: %s", self._client_key, exc)
                self._refuse(400, framing)
                return
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
        except httptools.HttpParserUpgrade:
            self._unsupported_upgrade_warning()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_count = 0
        self._repeated, self._single_seen = None, frozenset()
        self._content_length, self._allowed = 0, self.request_timeout
        self._arm_deadline(self.request_timeout)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.max_headers:
            raise _TooManyHeaders()
        lowered = name.lower()
        if lowered in _SINGLE_FIELDS:
            if lowered in self._single_seen and self._repeated is None:
                self._repeated = lowered
            self._single_seen |= {lowered}
        if lowered == b"content-length" and value.strip().isdigit():
            self._content_length = int(value)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._repeated is not None:
            raise _RepeatedField()  # before the application sees the request
        if self._content_length and self.min_rate > 0:
            # The deadline follows the transfer: the announced body gets length / min_rate seconds more.
            self._allowed = self.request_timeout + self._content_length / self.min_rate
            self._arm_deadline(self._allowed)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head, self._head_bytes, self._head_tail = True, 0, b""
        self._incomplete = False
        self._cancel_read_timer()
        self._cancel_deadline()
        super().on_message_complete()

    # -- a request that stops arriving

    def _arm_read_timer(self) -> None:
        self._cancel_read_timer()
        self._read_timer = self.loop.call_later(self.read_timeout, self._read_timed_out)

    def _cancel_read_timer(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if not self._incomplete or self.transport.is_closing():
            return
        if self.flow is not None and self.flow.read_paused:
            self._arm_read_timer()  # the application is slow to read, not the client slow to send
            return
        log.warning("closed a request from %s that stopped arriving (server.read_timeout)", self._client_key)
        self._time_out(f"the request stopped arriving for {self.read_timeout:g} s (server.read_timeout)")

    # -- a request that takes too long to arrive, however steadily

    def _arm_deadline(self, seconds: float) -> None:
        self._cancel_deadline()
        self._deadline_timer = self.loop.call_later(seconds, self._deadline_passed)

    def _cancel_deadline(self) -> None:
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None

    def _deadline_passed(self) -> None:
        self._deadline_timer = None
        if self.transport.is_closing():
            return
        if self.flow is not None and self.flow.read_paused:
            self._arm_deadline(self.read_timeout)  # the application is not reading: not the client's time
            return
        log.warning(
            "closed a request from %s that had not arrived whole after %g s (server.request_timeout, server.min_rate)",
            self._client_key,
            self._allowed,
        )
        self._time_out(
            f"the request had not arrived whole {self._allowed:g} s after it began "
            "(server.request_timeout, plus its Content-Length at server.min_rate)"
        )

    def _time_out(self, text: str) -> None:
        """Answer 408 and close (RFC 9110 §15.5.9), or only close once an answer has begun."""
        if self.cycle is not None and not self.cycle.response_complete and self.cycle.response_started:
            self.transport.close()
            return
        if self.cycle is not None:
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self._refuse(408, text)


@dataclass(frozen=True, slots=True)
class DoorLimits:
    """What :class:`GuardedProtocol` allows one request and one client (the ``server.*`` settings)."""

    max_header_bytes: int = 64 * 1024
    max_headers: int = 100
    read_timeout: float = 30.0
    request_timeout: float = 600.0
    min_rate: int = 64 * 1024
    max_connections_per_client: int = 128


def guarded_protocol(limits: DoorLimits) -> type[GuardedProtocol]:
    """The protocol class of one server: :class:`GuardedProtocol` with ``limits`` and a count of open
    connections per client address of its own."""
    return type(
        "GuardedProtocol",
        (GuardedProtocol,),
        {
            "max_header_bytes": limits.max_header_bytes,
            "max_headers": limits.max_headers,
            "read_timeout": limits.read_timeout,
            "request_timeout": limits.request_timeout,
            "min_rate": limits.min_rate,
            "max_connections_per_client": limits.max_connections_per_client,
            "per_client": Counter(),
        },
    )


class _Server(uvicorn.Server):
    """uvicorn's server without its signal handling (see the module docs): :func:`serve` stops it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _uvicorn_server(
    app: Callable[..., Awaitable[None]], ssl_context: ssl.SSLContext | None, limits: DoorLimits
) -> _Server:
    """The uvicorn server both :func:`serve_app` and :func:`start_app` run: the guarded protocol, no loop,
    lifespan, access log or logging set-up of uvicorn's own, the TLS context as given."""
    config = uvicorn.Config(
        app,
        http=guarded_protocol(limits),
        loop="none",
        lifespan="off",
        access_log=False,
        log_config=None,
        timeout_keep_alive=30,
        server_header=False,
    )
    config.load()
    config.ssl = ssl_context
    return _Server(config)


@contextlib.contextmanager
def _stop_on_signals(
    server: uvicorn.Server, on_hangup: Callable[[], None] | None = None
) -> Generator[None, None, None]:
    """SIGINT/SIGTERM ask ``server`` to exit (a second SIGINT: without waiting for open connections),
    SIGHUP calls ``on_hangup`` (when given; the server goes on), until the block ends; the previous handlers
    are restored then. Only on the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if server.should_exit and signum == signal.SIGINT:
            server.force_exit = True
        server.should_exit = True
        log.info("%s: stopping", signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    if on_hangup is not None:
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, lambda signum, frame: on_hangup())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


async def serve_app(
    app: Callable[..., Awaitable[None]],
    *,
    listener: socket.socket,
    ssl_context: ssl.SSLContext | None = None,
    limits: DoorLimits = DoorLimits(),
    start: Callable[[], Awaitable[None]] | None = None,
    stop_after: Callable[[], Awaitable[None]] | None = None,
    ready: Callable[[int], None] | None = None,
    stop: asyncio.Event | None = None,
    on_hangup: Callable[[], None] | None = None,
) -> None:
    """Serve the ASGI ``app`` on ``listener`` until SIGINT/SIGTERM (or ``stop`` is set): ``start()`` runs
    before it listens, ``ready(port)`` once it listens, ``stop_after()`` once it has stopped; the listener
    is closed at the end; ``on_hangup()`` is called (in the signal handler: keep it short) on each SIGHUP.
    Returns (the signal does not end the process; see the module docs)."""
    server = _uvicorn_server(app, ssl_context, limits)
    port = int(listener.getsockname()[1])
    with _stop_on_signals(server, on_hangup):
        if start is not None:
            await start()
        try:
            task = asyncio.create_task(server.serve(sockets=[listener]))
            while not server.started and not task.done():
                await asyncio.sleep(0.01)
            if task.done():
                await task
                return
            if ready is not None:
                ready(port)
            if stop is not None:
                waiter = asyncio.create_task(stop.wait())
                await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
                server.should_exit = True
                waiter.cancel()
            await task
        finally:
            if stop_after is not None:
                await stop_after()
            with contextlib.suppress(OSError):
                listener.close()


class Running:
    """An ASGI application served by :func:`start_app`; :meth:`stop` ends it (open connections finish)."""

    def __init__(self, server: uvicorn.Server, task: asyncio.Task[None], listener: socket.socket) -> None:
        self.server = server
        self.task = task
        self.listener = listener
        self.port = int(listener.getsockname()[1])

    async def stop(self) -> None:
        self.server.should_exit = True
        try:
            await self.task
        finally:
            with contextlib.suppress(OSError):
                self.listener.close()


async def start_app(
    app: Callable[..., Awaitable[None]],
    *,
    listener: socket.socket,
    ssl_context: ssl.SSLContext | None = None,
    limits: DoorLimits = DoorLimits(),
) -> Running:
    """Serve ``app`` on ``listener`` beside what :func:`serve_app` serves (no signal handling of its own:
    the caller stops it); returns once it listens."""
    server = _uvicorn_server(app, ssl_context, limits)
    task = asyncio.create_task(server.serve(sockets=[listener]))
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if task.done():
        await task
        raise OSError(f"the server on port {listener.getsockname()[1]} stopped while starting")
    return Running(server, task, listener)


def run_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` to its end on a new event loop (uvloop where installed)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is not available on Windows
        asyncio.run(main)
    else:
        uvloop.run(main)
