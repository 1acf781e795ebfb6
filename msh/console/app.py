"""The console's ASGI application (Starlette): its routes, its one stylesheet, and its error pages."""

from __future__ import annotations

import logging

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from msh.console import actions, message_list, message_page, pages
from msh.console.web import HERE, Console
from msh.runtime.config import Settings
from msh.runtime.msh import Msh

__all__ = ["build_console"]

log = logging.getLogger("msh.console")


def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    console: Console = request.app.state.console
    what = "no such page" if exc.status_code == 404 else str(exc.detail)
    return console.render(request, "refused.html", status=exc.status_code, title=f"{exc.status_code}", what=what)


def _unexpected(request: Request, exc: Exception) -> Response:
    log.error("console: %s %s failed", request.method, request.url.path, exc_info=exc)
    console: Console = request.app.state.console
    what = f"the page could not be made ({type(exc).__name__}); nothing was changed: reload to try again"
    return console.render(request, "refused.html", status=500, title="Internal error", what=what)


def build_console(msh: Msh, settings: Settings) -> Starlette:
    """The web console of ``msh`` as an ASGI application (served on the admin port, behind its authentication).

    Pages: ``/`` (dashboard), ``/messages`` (list with filters), ``/messages/{MessageId}`` (history, payloads,
    actions), ``/inbox``, ``/agreements`` (with the routing table), ``/settings``; ``/payloads/{out|in}/{n}``
    downloads a payload; ``POST /actions/resend`` and ``POST /actions/inbox`` act; ``/static/console.css``."""
    console = Console.build(msh, settings)
    routes = [
        Route("/", pages.dashboard, name="dashboard"),
        Route("/messages", message_list.messages_page, name="messages"),
        Route("/messages/{message_id:path}", message_page.message_page, name="message"),
        Route("/payloads/{direction:str}/{index:int}", message_page.download_payload, name="payload"),
        Route("/inbox", pages.inbox_page, name="inbox"),
        Route("/agreements", pages.agreements_page, name="agreements"),
        Route("/settings", pages.settings_page, name="settings"),
        Route("/actions/resend", actions.resend_action, methods=["POST"], name="resend"),
        Route("/actions/inbox", actions.inbox_action, methods=["POST"], name="inbox-action"),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error, Exception: _unexpected})
    app.state.console = console
    return app
