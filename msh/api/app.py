"""The ASGI application of the interfaces (FastAPI): REST under ``api.path``, the OpenAPI 3.1 document at
``{api.path}/openapi.json``, problems as ``application/problem+json``, the SOAP service (:mod:`msh.api.soap`).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from msh.api import rest_batches, rest_inbox, rest_messages, rest_services, soap
from msh.api.context import ApiContext
from msh.api.models import BatchMessage, SubmitRequest
from msh.api.problems import Problem, problem_handler, problem_response

__all__ = ["API_VERSION", "create_app", "openapi_document"]

API_VERSION = "1.0.0"
_TITLE = "pymsh application interfaces"
_DESCRIPTION = (
    "Submit ebXML messages exactly once (Message-ID and MsgCreate headers, SOA-Rity), follow them, ask a "
    "partner for a sent message's status (ebMS2 §7) or ping its MSH (§8), and take received messages from the "
    "inbox one by one or in batches. Authenticate with `Authorization: Bearer <token>`."
)


def _validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    lines = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:10]]
    body = {
        "type": "https://pymsh.invalid/problems/invalid-request",
        "title": "Invalid request",
        "status": 422,
        "detail": "; ".join(lines),
        "instance": request.url.path,
    }
    return problem_response(422, body)


def _http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    body = {
        "type": "about:blank",
        "title": str(exc.detail),
        "status": exc.status_code,
        "detail": str(exc.detail),
        "instance": request.url.path,
    }
    return problem_response(exc.status_code, body, exc.headers)


def _unexpected(request: Request, exc: Exception) -> Response:
    import logging

    logging.getLogger("msh.api").error("%s %s failed", request.method, request.url.path, exc_info=exc)
    body = {
        "type": "https://pymsh.invalid/problems/internal",
        "title": "Internal error",
        "status": 500,
        "detail": f"the request could not be completed ({type(exc).__name__}); nothing was lost: repeat it",
        "instance": request.url.path,
    }
    return problem_response(500, body)


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``app`` (the models used only in hand-written request bodies added)."""
    if app.openapi_schema is None:
        doc = get_openapi(title=_TITLE, version=API_VERSION, description=_DESCRIPTION, routes=app.routes)
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        for model in (SubmitRequest, BatchMessage):
            schema = model.model_json_schema(ref_template="#/components/schemas/{model}", by_alias=True)
            schemas.update(schema.pop("$defs", {}))
            schemas[model.__name__] = schema
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"bearer": []}]
        app.openapi_schema = doc
    return app.openapi_schema


def create_app(ctx: ApiContext) -> FastAPI:
    """The interfaces' ASGI application over ``ctx``."""
    prefix = ctx.settings.path.rstrip("/")
    app = FastAPI(
        title=_TITLE,
        version=API_VERSION,
        description=_DESCRIPTION,
        openapi_url=f"{prefix}/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.ctx = ctx
    app.add_exception_handler(Problem, problem_handler)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)
    # rest_services first: its /messages/{id}/remote-status would otherwise be read as a MessageId by
    # rest_messages' /messages/{id} (a MessageId may hold a slash).
    for router in (rest_services.router, rest_messages.router, rest_inbox.router, rest_batches.router, soap.router):
        app.include_router(router, prefix=prefix)
    app.openapi = lambda: openapi_document(app)  # type: ignore[method-assign]
    return app
