"""The admin port served by ``msh serve`` beside the endpoint and the application interfaces, on its own
address and port (``[admin]``): a :class:`~msh.runtime.serving.Companion` of the server.

:class:`AdminServer` reads the operators' tokens, builds the application (:func:`msh.admin.app.build_admin_app`:
the metrics count from then on) and binds its port when it is made, so that ``msh serve`` fails before
serving anything when a token or the port is missing; it starts uvicorn once the runtime runs and stops it
before the runtime stops.
"""

from __future__ import annotations

import logging
import socket

from msh.admin.app import ASGIApp, build_admin_app
from msh.api.server import interface_context
from msh.runtime.config import Settings
from msh.runtime.msh import Msh
from msh.transport.server import Running, bind, start_app

__all__ = ["AdminServer"]

log = logging.getLogger("msh.admin")


class AdminServer:
    """The admin port of ``msh`` as ``settings.admin`` describes it; ``extra``: the web console."""

    def __init__(
        self, settings: Settings, msh: Msh, *, extra: ASGIApp | None = None, sock: socket.socket | None = None
    ) -> None:
        admin = settings.admin
        self.app = build_admin_app(msh, settings, extra=extra)
        self.ssl = interface_context(settings, settings.admin)
        self.listener = sock if sock is not None else bind(admin.host, admin.port, section="admin")
        self.port = int(self.listener.getsockname()[1])
        self.scheme = "https" if self.ssl is not None else "http"
        self.host = admin.host
        self._running: Running | None = None

    @property
    def url(self) -> str:
        """Where the admin port is, e.g. ``http://127.0.0.1:8091``."""
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def announce(self) -> str:
        """The line ``msh serve`` prints once serving."""
        return f"msh: admin port at {self.url} (/health, /ready, /metrics)"

    async def start(self) -> None:
        self._running = await start_app(self.app, listener=self.listener, ssl_context=self.ssl)
        log.info("admin port at %s (/health, /ready, /metrics)", self.url)

    async def stop(self) -> None:
        if self._running is not None:
            await self._running.stop()
            self._running = None
