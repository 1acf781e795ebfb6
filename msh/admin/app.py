"""The ASGI application of the admin port: ``/health``, ``/ready``, ``/metrics``, and the web console (or any
other ``extra`` application) at ``/``, all behind the operators' authentication.

Operators authenticate like the applications on the interfaces (:mod:`msh.api.auth`): ``Authorization:
Bearer <token>`` with a token of ``admin.operators``, or over mutual TLS a client certificate whose subject
CN names an operator; a browser (the console) signs in with HTTP Basic authentication (RFC 7617): the
operator's name and token as user name and password, asked for by the browser's own dialog. Anything else
gets 401 as an ``application/problem+json`` document carrying ``WWW-Authenticate: Basic`` (so a browser
asks; the console's forms are protected against cross-site requests by their own CSRF token). With
``admin.open_probes``, ``/health`` and ``/ready`` answer anyone. The authenticated operator's name is in
``scope["state"]["operator"]`` for the mounted application (``request.state.operator`` in Starlette).

``/health`` says the process answers (200 ``{"alive": true, ...}``); ``/ready`` runs the readiness checks
(:mod:`msh.admin.readiness`): 200 when all pass, else 503, each check with its reason, in camelCase JSON.
``/metrics`` is the Prometheus text format (:mod:`msh.admin.metrics`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any, Final

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from msh.admin.metrics import MshMetrics, build_version
from msh.admin.readiness import Readiness
from msh.api.auth import Applications, load_applications
from msh.api.problems import Problem
from msh.runtime.certificates import certificates_in_use
from msh.runtime.config import Settings
from msh.runtime.config.api import credentials
from msh.runtime.msh import Msh
from msh.transport.asgi import client_certificate

__all__ = ["ASGIApp", "build_admin_app", "load_operators"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_PROBES: Final = ("/health", "/ready")
_CHALLENGE: Final = (b"www-authenticate", b'Basic realm="msh admin", charset="UTF-8"')


def _bearer(authorization: str | None) -> str | None:
    """``authorization`` with HTTP Basic credentials (RFC 7617: name and token) turned into the bearer form
    the operators' check reads (the name is checked by :func:`_basic_name_is`); others unchanged."""
    if authorization is None or authorization[:6].lower() != "basic ":
        return authorization
    try:
        name, _, token = base64.b64decode(authorization[6:].strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return "Bearer "  # malformed: refused as a missing token would be
    return f"Bearer {token}" if name else "Bearer "


def _basic_name_is(authorization: str, operator: str) -> bool:
    """Whether the Basic credentials name ``operator`` (their token authenticated it)."""
    name = base64.b64decode(authorization[6:].strip()).decode("utf-8").partition(":")[0]
    return name == operator


def _challenging(send: Send) -> Send:
    """``send`` that adds the Basic challenge to a 401 response (so that a browser asks for a sign-in)."""

    async def wrapped(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start" and message.get("status") == 401:
            message = {**message, "headers": [_CHALLENGE, *message.get("headers", [])]}
        await send(message)

    return wrapped


def load_operators(settings: Settings, env: dict[str, str] | None = None) -> Applications:
    """The operators of ``admin.operators`` with their tokens (read now; :class:`ConfigurationError` naming
    the operator and where, never the token, when one cannot be read)."""
    admin = settings.admin
    base = Path(settings.source).parent if settings.source not in ("", "<defaults>", "<environment>") else None
    return load_applications(
        credentials(admin.operators),
        certificates=bool(admin.client_ca),
        env=env,
        base_dir=base,
        setting="admin.operators",
    )


class _Authenticated:
    """The operators' authentication in front of ``app`` (see the module docs)."""

    def __init__(self, app: ASGIApp, operators: Applications, *, open_probes: bool) -> None:
        self.app = app
        self.operators = operators
        self.open_probes = open_probes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (self.open_probes and scope.get("path") in _PROBES):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        try:
            given = headers.get("authorization")
            name = self.operators.authenticate(_bearer(given), client_certificate(scope))
            if given is not None and given[:6].lower() == "basic " and not _basic_name_is(given, name):
                raise Problem(401, "unauthorized", "Unauthorized", "the user name is not the token's operator")
        except Problem as problem:
            await problem.response(scope.get("path"))(scope, receive, _challenging(send))
            return
        scope.setdefault("state", {})["operator"] = name
        await self.app(scope, receive, send)


def build_admin_app(
    msh: Msh,
    settings: Settings,
    *,
    extra: ASGIApp | None = None,
    operators: Applications | None = None,
    metrics: MshMetrics | None = None,
) -> ASGIApp:
    """The admin port's application for ``msh`` (see the module docs): ``extra`` (the web console) is
    mounted at ``/`` behind the same authentication; ``operators`` default to :func:`load_operators`;
    ``metrics`` to new ones counting from now on."""
    if metrics is None:
        metrics = MshMetrics(msh, lambda: certificates_in_use(settings, msh.registry))
        metrics.watch()
    readiness = Readiness(msh, settings.admin.stall_after)

    async def health(request: Request) -> Response:
        return JSONResponse({"alive": True, "party": msh.party[0], "version": build_version(), "running": msh.running})

    async def ready(request: Request) -> Response:
        checks = await msh.off_loop(readiness.checks)
        ok = all(c.ok for c in checks)
        body = {"ready": ok, "checks": [c.as_json() for c in checks]}
        return JSONResponse(body, status_code=200 if ok else 503)

    async def scrape(request: Request) -> Response:
        text = await msh.off_loop(metrics.text)
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    routes: list[Route | Mount] = [
        Route("/health", health, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        Route("/metrics", scrape, methods=["GET"]),
    ]
    if extra is not None:
        routes.append(Mount("/", app=extra))
    app = Starlette(routes=routes)
    chosen = operators if operators is not None else load_operators(settings)
    return _Authenticated(app, chosen, open_probes=settings.admin.open_probes)
