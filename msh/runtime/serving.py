"""Running an MSH as a server (``msh serve``): its inbound endpoint on uvicorn, its runtime beside it.

:func:`serve` wires the MSH to the transport: the ASGI endpoint (:class:`msh.transport.asgi.Endpoint`)
over the MSH's inbound pipeline, the TLS context built from the settings and the agreements (mutual TLS
when ``tls.require_client_certificate``), and the limits at the door from ``server.*``; the runtime
starts before the server listens and stops after it has stopped. SIGINT/SIGTERM stop accepting, let
requests and transmissions in flight end and stop the runtime; the caller then closes the store (``msh
serve`` prints ``msh: stopped`` and exits with status 0). A SIGKILL loses nothing committed (docs/design.md
§5.6). SIGHUP reloads the agreements and the server goes on (:mod:`msh.runtime.reload`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable, Sequence
from typing import Protocol

from cpa.registry import CpaRegistry
from msh.runtime.config import Settings
from msh.runtime.msh import Msh
from msh.runtime.reload import AgreementReloader, SignalledReloads
from msh.transport.asgi import Endpoint
from msh.transport.server import DoorLimits, bind, run_loop, serve_app
from msh.transport.tls import server_context, trust_anchors_pem

__all__ = ["Companion", "bind", "run", "serve"]

log = logging.getLogger("msh.runtime")


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
        request_timeout=s.request_timeout.total_seconds(),
        min_rate=s.min_rate,
        max_connections_per_client=s.max_connections_per_client,
    )
    listener = sock if sock is not None else bind(s.host, s.port)
    started: list[Companion] = []
    reloads = SignalledReloads(AgreementReloader(msh, pid_file=s.pid_file), asyncio.get_running_loop())
    if context is not None:
        reloads.reloader.on_loaded.append(lambda registry: _trust_new_partners(context, registry, msh))

    async def start() -> None:
        await msh.start()
        for companion in companions:
            await companion.start()
            started.append(companion)

    async def stop_after() -> None:
        await reloads.drain()  # a reload under way ends before the runtime stops
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
        on_hangup=reloads.hangup,
    )


def _trust_new_partners(context: ssl.SSLContext, registry: CpaRegistry, msh: Msh) -> None:
    """The partner certificates of the reloaded agreements become trust anchors of the running endpoint
    (added: an SSL context cannot forget an anchor; see :mod:`msh.runtime.reload`)."""
    anchors = trust_anchors_pem(registry, msh.party)
    if anchors:
        try:
            context.load_verify_locations(cadata=anchors)
        except ssl.SSLError as exc:
            log.error("the certificates of the reloaded agreements could not be trusted for TLS: %s", exc)


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
