"""``/messages``: submit a message exactly once (SOA-Rity for HTTP), and see where a sent message stands.

``POST /messages`` takes a JSON :class:`~msh.api.models.SubmitRequest` (payloads inline, base64) or
``multipart/form-data`` (a part ``message`` holding the same JSON without payloads, and one file part
``payload`` per payload, its Content-Type the payload's). With ``Message-ID`` and ``MsgCreate`` headers
it is exactly once (:mod:`msh.api.soarity`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from msh.api import soarity
from msh.api.deps import Application, Context
from msh.api.models import MessageStatus, SubmitRequest, Submitted
from msh.api.problems import Problem
from msh.api.submitting import submit, to_submission, visible_to
from msh.api.views import message_status
from msh.runtime.compose import Payload

__all__ = ["bounded_body", "router"]

router = APIRouter(tags=["messages"])

_PROBLEM: Final[dict[int | str, dict[str, Any]]] = {
    code: {"description": text, "content": {"application/problem+json": {}}}
    for code, text in (
        (400, "bad MsgCreate/Message-ID, or the pair reused for a materially different request"),
        (401, "no or a wrong credential"),
        (
            403,
            "SOARITY: MsgCreate/Message-ID Rejected (outside the time window, another MsgCreate, another application)",
        ),
        (413, "request too large"),
        (422, "the message cannot be submitted (no agreement allows it, a bad value)"),
    )
}
_MAX_BODY: Final = 64 * 1024 * 1024


def _invalid(exc: ValidationError | ValueError) -> Problem:
    if isinstance(exc, ValidationError):
        lines = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:10]]
        detail = "; ".join(lines)
    else:
        detail = str(exc)
    return Problem(422, "invalid-submission", "Invalid submission", detail)


async def bounded_body(request: Request, limit: int) -> bytes:
    """The request's body, read up to ``limit`` bytes (413 beyond, before more is read)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise Problem(413, "too-large", "Too large", f"the request is larger than {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Problem(413, "too-large", "Too large", f"the request is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _read(request: Request) -> tuple[SubmitRequest, list[Payload] | None, bytes]:
    """The request's submission, its payloads (multipart) and its canonical content (the fingerprint's)."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media == "multipart/form-data":
        form = await request.form(max_files=1000, max_fields=10, max_part_size=_MAX_BODY)
        message = form.get("message")
        if not isinstance(message, str):
            raise Problem(422, "invalid-submission", "Invalid submission", "the multipart body has no 'message' field")
        try:
            parsed = SubmitRequest.model_validate_json(message)
        except ValidationError as exc:
            raise _invalid(exc) from None
        payloads, canon = [], [json.loads(message)]
        for item in form.getlist("payload"):
            if not isinstance(item, UploadFile):
                raise Problem(422, "invalid-submission", "Invalid submission", "a 'payload' part is not a file")
            content = await item.read()
            kind = item.content_type or "application/octet-stream"
            payloads.append(Payload(content, kind))
            canon.append([kind, hashlib.sha256(content).hexdigest()])
        return parsed, payloads, json.dumps(canon, sort_keys=True).encode()
    if media not in ("application/json", ""):
        raise Problem(
            415, "unsupported-media-type", "Unsupported media type", "send application/json or multipart/form-data"
        )
    raw = await bounded_body(request, _MAX_BODY)
    try:
        parsed = SubmitRequest.model_validate_json(raw)
        canonical = json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":")).encode()
    except (ValidationError, ValueError) as exc:
        raise _invalid(exc) from None
    return parsed, None, canonical


@router.post(
    "/messages",
    status_code=201,
    response_model=Submitted,
    responses=_PROBLEM,
    summary="Submit a message (exactly once with Message-ID and MsgCreate)",
    openapi_extra={
        "parameters": [
            {
                "name": "Message-ID",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "format": "uri"},
                "description": "a URI chosen by the application for this request (urn:uuid:...), repeated on retries",
            },
            {
                "name": "MsgCreate",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
                "description": "RFC 1123 date (GMT) of the first try, repeated unchanged on retries",
            },
        ],
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/SubmitRequest"}},
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "required": ["message"],
                        "properties": {
                            "message": {"type": "string", "description": "SubmitRequest as JSON, without payloads"},
                            "payload": {"type": "array", "items": {"type": "string", "format": "binary"}},
                        },
                    }
                },
            },
        },
    },
)
async def post_message(request: Request, ctx: Context, app: Application) -> Response:
    """Commit a message for reliable sending; 201 with its MessageId. A repeat of the same
    Message-ID/MsgCreate pair gets the same response and submits nothing."""
    try:
        pair = soarity.parse_pair(request.headers.get("message-id"), request.headers.get("msgcreate"))
    except soarity.BadPair as exc:
        raise Problem(
            400,
            "soarity-bad-headers",
            "Bad MsgCreate/Message-ID",
            str(exc),
            headers={soarity.SOARITY: soarity.SUPPORTED},
        ) from None
    parsed, payloads, canonical = await _read(request)
    answer = await submit(
        ctx,
        app,
        pair,
        soarity.fingerprint("POST", "/messages", canonical),
        to_submission(parsed, payloads, ctx),
    )
    headers = {}
    if pair is not None:
        headers = {soarity.SOARITY: soarity.SUPPORTED, "Vary": "Message-ID, MsgCreate"}
    if answer.status == 201:
        headers["Location"] = json.loads(answer.body)["href"]
    return Response(answer.body, status_code=answer.status, headers=headers, media_type="application/json")


@router.options("/messages", status_code=204, summary="SOA-Rity support (SOA-Rity for HTTP §5)")
async def options_messages(request: Request, ctx: Context) -> Response:
    """``SOARITY: supported`` for an authenticated application, ``unsupported`` otherwise."""
    try:
        ctx.applications.authenticate(request.headers.get("authorization"), None)
        support = soarity.SUPPORTED
    except Problem:
        support = soarity.UNSUPPORTED
    window = int(ctx.settings.window.total_seconds())
    return Response(
        status_code=204,
        headers={
            soarity.SOARITY: support,
            "Allow": "GET, POST, OPTIONS",
            "SOARITY-Window": f"{window}",
        },
    )


@router.get(
    "/messages/{message_id:path}",
    response_model=MessageStatus,
    responses=_PROBLEM,
    summary="Where a sent message stands",
)
async def get_message(message_id: str, ctx: Context, app: Application) -> MessageStatus:
    """Its status, transmissions, DeliveryFailure and receipt (404 for a message another application
    submitted through the interfaces)."""
    stored = await ctx.read(lambda tx: tx.get_outbound(message_id))
    events = await ctx.read(lambda tx: tx.message_events(message_id, limit=1000))
    if stored is None or not visible_to(app, events):
        raise Problem(404, "no-such-message", "No such message", f"no message {message_id!r} was sent from here")
    attempts = await ctx.msh.off_loop(ctx.msh.attempts, message_id)
    return message_status(stored, attempts, events)
