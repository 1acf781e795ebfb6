"""Dependencies of the REST handlers: the context, the authenticated application, and the refusal of
SOA-Rity headers where they are not honoured (SOA-Rity for HTTP §4: 412 ``SOARITY: unsupported``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from msh.api import soarity
from msh.api.context import ApiContext
from msh.api.problems import Problem
from msh.transport.asgi import client_certificate

__all__ = ["Application", "Context", "application", "context", "no_soarity"]


def context(request: Request) -> ApiContext:
    """The interfaces' context (set by :func:`msh.api.app.create_app`)."""
    ctx = request.app.state.ctx
    assert isinstance(ctx, ApiContext)
    return ctx


def application(request: Request) -> str:
    """The authenticated application's name (401 otherwise)."""
    ctx = context(request)
    return ctx.applications.authenticate(request.headers.get("authorization"), client_certificate(request.scope))


def no_soarity(request: Request) -> None:
    """412 ``SOARITY: unsupported`` for a reliable request to a resource that does not honour it (its
    operation is idempotent by itself: repeat it as it is)."""
    if "msgcreate" in request.headers:
        raise Problem(
            412,
            "soarity-unsupported",
            "SOA-Rity not supported here",
            f"{request.method} {request.url.path} does not honour MsgCreate/Message-ID (it is idempotent by itself: "
            "repeat it without them); only POST /messages does",
            headers={soarity.SOARITY: soarity.UNSUPPORTED},
        )


Context = Annotated[ApiContext, Depends(context)]
Application = Annotated[str, Depends(application)]
