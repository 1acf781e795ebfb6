"""Running an MSH as a server (``msh serve``): its inbound endpoint on uvicorn, its runtime beside it.

:func:`serve` wires the MSH to the transport: the ASGI endpoint (:class:`msh.transport.asgi.Endpoint`)
over the MSH's inbound pipeline, the TLS context built from the settings and the agreements (mutual TLS
when ``tls.require_client_certificate``), and the limits at the door from ``server.*``; the runtime
starts before the server listens and stops after it has stopped. SIGINT/SIGTERM stop accepting, let
requests and transmissions in flight end and stop the runtime; the caller then closes the store (``msh
serve`` prints ``msh: stopped`` and exits with status 0). A SIGKILL loses nothing committed (DESIGN.md
§5.6).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Sequence
from typing import Protocol

from msh.runtime.config import Settings
from msh.runtime.msh import Msh
from msh.transport.asgi import Endpoint
from msh.transport.server import DoorLimits, bind, run_loop, serve_app
from msh.transport.tls import server_context, trust_anchors_pem

__all__ = ["Companion", "bind", "run", "serve"]


class Companion(Protocol):
    """Something served beside the endpoint by the same process (the application interfaces,
    :mod:`msh.api`): started once the runtime runs, stopped before it stops."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


async def serve(
    settings: Settings,
    msh: Msh,
    *,
    sock: socket.socket | None = None,
    ready: Callable[[int], None] | None = None,
    stop: asyncio.Event | None = None,
    companions: Sequence[Companion] = (),
) -> None:
    """Serve ``msh`` until SIGINT/SIGTERM (or ``stop`` is set); ``ready(port)`` is called once listening;
    ``companions`` start after the runtime and stop before it.

    Returns once the server and the runtime have stopped; the store stays open (:meth:`Msh.close`)."""
    s = settings.server
    app = Endpoint(msh, path=s.path, max_body_bytes=s.max_body_bytes, counters=msh.counters)
    context = None
    if s.tls:
        tls = settings.tls
        context = server_context(
            certificate=tls.certificate,
            private_key=tls.private_key,
            client_anchors_pem=trust_anchors_pem(msh.registry, msh.party),
            trusted=tls.trusted,
            require_client_certificate=tls.require_client_certificate,
        )
    limits = DoorLimits(
        max_header_bytes=s.max_header_bytes,
        max_headers=s.max_headers,
        read_timeout=s.read_timeout.total_seconds(),
        max_connections_per_client=s.max_connections_per_client,
    )
    listener = sock if sock is not None else bind(s.host, s.port)
    started: list[Companion] = []

    async def start() -> None:
        await msh.start()
        for companion in companions:
            await companion.start()
            started.append(companion)

    async def stop_after() -> None:
        try:
            for companion in reversed(started):
                await companion.stop()
        finally:
            await msh.stop()

    await serve_app(
        app,
        listener=listener,
        ssl_context=context,
        limits=limits,
        start=start,
        stop_after=stop_after,
        ready=ready,
        stop=stop,
    )


def run(
    settings: Settings,
    msh: Msh,
    *,
    sock: socket.socket | None = None,
    ready: Callable[[int], None] | None = None,
    companions: Sequence[Companion] = (),
) -> None:
    """Blocking :func:`serve` on a new event loop (uvloop where installed); ``sock``: a listening socket
    from :func:`bind` (default: bound here from the settings)."""
    run_loop(serve(settings, msh, sock=sock, ready=ready, companions=companions))
