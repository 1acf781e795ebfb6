"""Running an MSH: the ASGI endpoint on uvicorn, the runtime beside it, clean shutdown (``msh serve``).

uvicorn (with httptools and, where installed, uvloop) serves :class:`~msh.runtime.asgi.Endpoint`; TLS uses
the context :mod:`msh.runtime.tls` builds from the settings and agreements (mutual TLS when
``tls.require_client_certificate``). SIGINT/SIGTERM stop accepting, let requests and transmissions in
flight end and stop the runtime; the caller then closes the store (``msh serve`` prints ``msh: stopped``
and exits with status 0). A SIGKILL loses nothing committed (DESIGN.md §5.6).

uvicorn's own signal handling is not used: after its shutdown it raises the captured signal again, which
would kill the process (exit status 143 for SIGTERM) before the MSH's own shutdown runs. :func:`serve`
installs its handlers instead, for its whole run (the runtime's stop included), when it runs on the main
thread: the first signal asks uvicorn to exit, a second Ctrl-C stops waiting for open connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import ssl
import threading
from collections.abc import Callable, Generator
from types import FrameType

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from msh.runtime.asgi import Endpoint
from msh.runtime.config import Settings
from msh.runtime.msh import Msh
from msh.runtime.tls import server_context, trust_anchors_pem

__all__ = ["TlsHttpToolsProtocol", "bind", "serve", "run"]

log = logging.getLogger("msh.server")


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: any free port; read it from ``getsockname()``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        from msh.errors import ConfigurationError

        raise ConfigurationError(
            f"server.host/server.port: cannot listen on {host}:{port}: {exc.strerror}; stop what uses that port or "
            f"choose another (server.port, or MSH_SERVER_PORT)"
        ) from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


class TlsHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with the ASGI TLS extension in each request's scope: the client
    certificate of the connection as ``extensions["tls"]["client_cert_chain"]`` (PEM), so the endpoint can
    bind it to the party the message claims to come from (DESIGN.md §7). uvicorn itself does not report
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


class _Server(uvicorn.Server):
    """uvicorn's server without its signal handling (see the module docs): :func:`serve` stops it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


@contextlib.contextmanager
def _stop_on_signals(server: uvicorn.Server) -> Generator[None, None, None]:
    """SIGINT/SIGTERM ask ``server`` to exit (a second SIGINT: without waiting for open connections),
    until the block ends; the previous handlers are restored then. Only on the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if server.should_exit and signum == signal.SIGINT:
            server.force_exit = True
        server.should_exit = True
        log.info("%s: stopping", signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _uvicorn_config(settings: Settings, msh: Msh) -> uvicorn.Config:
    s = settings.server
    app = Endpoint(msh, path=s.path, max_body_bytes=s.max_body_bytes)
    config = uvicorn.Config(
        app,
        host=s.host,
        port=s.port,
        http=TlsHttpToolsProtocol,
        loop="none",
        lifespan="off",
        access_log=False,
        log_config=None,
        timeout_keep_alive=30,
        server_header=False,
    )
    config.load()
    if s.tls:
        tls = settings.tls
        config.ssl = server_context(
            certificate=tls.certificate,
            private_key=tls.private_key,
            client_anchors_pem=trust_anchors_pem(msh.registry, msh.party),
            trusted=tls.trusted,
            require_client_certificate=tls.require_client_certificate,
        )
    return config


async def serve(
    settings: Settings,
    msh: Msh,
    *,
    sock: socket.socket | None = None,
    ready: Callable[[int], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve ``msh`` until SIGINT/SIGTERM (or ``stop`` is set); ``ready(port)`` is called once listening.

    Returns once the server and the runtime have stopped (the signal does not end the process; see the
    module docs); the store stays open (:meth:`Msh.close`)."""
    config = _uvicorn_config(settings, msh)
    listener = sock if sock is not None else bind(settings.server.host, settings.server.port)
    port = int(listener.getsockname()[1])
    server = _Server(config)
    with _stop_on_signals(server):
        await _serve(msh, server, listener, port, ready, stop)


async def _serve(
    msh: Msh,
    server: uvicorn.Server,
    listener: socket.socket,
    port: int,
    ready: Callable[[int], None] | None,
    stop: asyncio.Event | None,
) -> None:
    await msh.start()
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
        await msh.stop()
        with contextlib.suppress(OSError):
            listener.close()


def run(
    settings: Settings, msh: Msh, *, sock: socket.socket | None = None, ready: Callable[[int], None] | None = None
) -> None:
    """Blocking :func:`serve` on a new event loop (uvloop where installed); ``sock``: a listening socket
    from :func:`bind` (default: bound here from the settings)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is not available on Windows
        asyncio.run(serve(settings, msh, sock=sock, ready=ready))
    else:
        uvloop.run(serve(settings, msh, sock=sock, ready=ready))
