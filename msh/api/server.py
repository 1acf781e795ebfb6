"""The application interfaces served by ``msh serve`` beside the endpoint, on their own address and port
(``[api]``): a :class:`~msh.runtime.serving.Companion` of the server, on the same event loop and MSH.

:class:`ApiServer` reads the applications' tokens and binds its port when it is made (so that ``msh
serve`` fails before serving anything when a token or the port is missing), starts uvicorn once the
runtime runs, with the TTL reporter (:mod:`msh.api.overdue`) and the webhook deliverer
(:mod:`msh.api.webhooks`) beside it, and stops them before the runtime stops.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from pathlib import Path

from msh.api.app import create_app
from msh.api.auth import load_applications
from msh.api.context import ApiContext
from msh.runtime.config import Settings
from msh.runtime.config.admin import AdminSettings
from msh.runtime.config.api import ApiSettings, credentials
from msh.runtime.msh import Msh
from msh.transport.server import Running, bind, start_app
from msh.transport.tls import server_context

__all__ = ["ApiServer", "interface_context"]

log = logging.getLogger("msh.api")


def interface_context(settings: Settings, section: ApiSettings | AdminSettings) -> ssl.SSLContext | None:
    """The TLS server context of an operators' or applications' port (``section``: ``settings.api`` or
    ``settings.admin``): our ``[tls]`` certificate, client certificates from the section's ``client_ca``
    asked for when it names any; None when the section serves plain HTTP."""
    if not section.tls:
        return None
    return server_context(
        certificate=settings.tls.certificate,
        private_key=settings.tls.private_key,
        client_anchors_pem="",
        trusted=section.client_ca,
        require_client_certificate=bool(section.client_ca),
    )


class ApiServer:
    """The interfaces of ``msh`` as ``settings.api`` describes them (see the module docs)."""

    def __init__(self, settings: Settings, msh: Msh, *, sock: socket.socket | None = None) -> None:
        api = settings.api
        base = Path(settings.source).parent if settings.source not in ("", "<defaults>") else None
        applications = load_applications(credentials(api.applications), certificates=bool(api.client_ca), base_dir=base)
        self.context = ApiContext(msh, api, applications)
        self.app = create_app(self.context)
        self.ssl = interface_context(settings, settings.api)
        self.listener = sock if sock is not None else bind(api.host, api.port, section="api")
        self.port = int(self.listener.getsockname()[1])
        self.scheme = "https" if self.ssl is not None else "http"
        self._running: Running | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def url(self) -> str:
        """Where the interfaces are, e.g. ``http://127.0.0.1:8090/api``."""
        host = self.context.settings.host
        return f"{self.scheme}://{host}:{self.port}{self.context.settings.path.rstrip('/')}"

    @property
    def announce(self) -> str:
        """The line ``msh serve`` prints once serving."""
        return f"msh: application interfaces at {self.url} (OpenAPI: {self.url}/openapi.json)"

    async def start(self) -> None:
        from msh.api.overdue import report_overdue
        from msh.api.webhooks import Webhooks

        self._running = await start_app(self.app, listener=self.listener, ssl_context=self.ssl)
        self._tasks.append(asyncio.create_task(report_overdue(self.context)))
        hooks = Webhooks.from_context(self.context)
        if hooks is not None:
            self._tasks.append(asyncio.create_task(hooks.run()))
        log.info("application interfaces at %s", self.url)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:  # a background task that failed was logged; stopping goes on
                log.exception("application interfaces: a background task failed")
        self._tasks.clear()
        if self._running is not None:
            await self._running.stop()
            self._running = None
