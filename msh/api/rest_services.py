"""The MSH services for applications: ``POST /ping`` (an MSH Ping, ebMS2 §8) and
``GET /messages/{MessageId}/remote-status`` (a StatusRequest about a sent message, ebMS2 §7).

Each waits for the partner's answer (the Pong, the StatusResponse) up to ``timeout`` seconds, at most
``api.max_wait``, and answers 200 with what came of it, the answer or what went wrong (connection refused,
TLS failure, an HTTP status, an error message such as NotSupported, no answer in time): the request
itself succeeded. Refusals are problem documents: 422 for a partner no agreement in force names or an
agreement to choose (``candidates``), 404 for a message that is not one of ours (or that another
application submitted).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Final

from fastapi import APIRouter, Query

from msh.api.deps import Application, Context
from msh.api.models import ErrorReported, PingOutcome, PingRequest, RemoteStatusDocument
from msh.api.problems import Problem
from msh.api.submitting import visible_to
from msh.api.views import message_status
from msh.errors import ConfigurationError
from msh.runtime.attempts import ReceivedError
from msh.runtime.services import DEFAULT_TIMEOUT, AgreementChoice, PingResult, RemoteStatus

__all__ = ["router"]

router = APIRouter(tags=["services"])

_PROBLEMS: Final[dict[int | str, dict[str, Any]]] = {
    code: {"description": text, "content": {"application/problem+json": {}}}
    for code, text in (
        (401, "no or a wrong credential"),
        (404, "no such message was sent from here (or another application submitted it)"),
        (422, "a bad value, a partner no agreement in force names, or several agreements to choose from"),
    )
}


def _milliseconds(value: timedelta | None) -> float | None:
    return None if value is None else round(value.total_seconds() * 1000, 3)


def _errors(errors: tuple[ReceivedError, ...]) -> list[ErrorReported]:
    return [
        ErrorReported(error_code=e.error_code, severity=e.severity, location=e.location, description=e.description)
        for e in errors
    ]


def _refused(exc: ConfigurationError) -> Problem:
    if isinstance(exc, AgreementChoice):
        return Problem(
            422, "choose-agreement", "Choose an agreement", str(exc), extra={"candidates": list(exc.candidates)}
        )
    return Problem(422, "not-possible", "Not possible", str(exc))


@router.post("/ping", response_model=PingOutcome, responses=_PROBLEMS, summary="Ping a partner's MSH (ebMS2 §8)")
async def post_ping(request: PingRequest, ctx: Context, app: Application) -> PingOutcome:
    """Send an MSH Ping to the partner and wait for its Pong: 200 with the round-trip time, or with what went
    wrong (``pong`` false, ``problem``)."""
    timeout = min(request.timeout, ctx.settings.max_wait.total_seconds())
    partner = (request.partner.party_id, request.partner.type)
    try:
        result: PingResult = await ctx.msh.ping(
            partner if partner[1] is not None else partner[0], cpa_id=request.cpa_id, timeout=timeout
        )
    except ConfigurationError as exc:
        raise _refused(exc) from None
    return PingOutcome(
        message_id=result.message_id,
        partner=result.partner,
        cpa_id=result.cpa_id,
        url=result.url,
        sent_at=result.sent_at,
        pong=result.pong,
        round_trip_ms=_milliseconds(result.round_trip),
        on_connection=result.on_connection,
        pong_message_id=result.pong_message_id,
        http_status=result.http_status,
        problem=result.problem,
        errors=_errors(result.errors),
    )


@router.get(
    "/messages/{message_id:path}/remote-status",
    response_model=RemoteStatusDocument,
    responses=_PROBLEMS,
    summary="Ask the To party for a sent message's status (ebMS2 §7)",
)
async def get_remote_status(
    message_id: str,
    ctx: Context,
    app: Application,
    timeout: Annotated[
        float, Query(gt=0, le=3600, description="seconds to wait for the StatusResponse (at most api.max_wait)")
    ] = DEFAULT_TIMEOUT,
) -> RemoteStatusDocument:
    """Send a StatusRequest about the message to its To party and wait for the StatusResponse: 200 with what
    it says (Received or Processed also make the message delivered) beside our own record, or with why no
    answer came."""
    stored = await ctx.read(lambda tx: tx.get_outbound(message_id))
    events = await ctx.read(lambda tx: tx.message_events(message_id, limit=1000))
    if stored is None or not visible_to(app, events) or stored.kind.value != "own":
        raise Problem(404, "no-such-message", "No such message", f"no message {message_id!r} was sent from here")
    try:
        result: RemoteStatus = await ctx.msh.remote_status(
            message_id, timeout=min(timeout, ctx.settings.max_wait.total_seconds())
        )
    except ConfigurationError as exc:
        raise _refused(exc) from None
    after = await ctx.read(lambda tx: tx.get_outbound(message_id))
    assert after is not None
    attempts = await ctx.msh.off_loop(ctx.msh.attempts, message_id)
    events = await ctx.read(lambda tx: tx.message_events(message_id, limit=1000))
    return RemoteStatusDocument(
        message_id=result.message_id,
        request_message_id=result.request_message_id,
        partner=result.partner,
        cpa_id=result.cpa_id,
        url=result.url,
        sent_at=result.sent_at,
        message_status=result.message_status.value if result.message_status is not None else None,
        timestamp=result.timestamp,
        round_trip_ms=_milliseconds(result.round_trip),
        on_connection=result.on_connection,
        response_message_id=result.response_message_id,
        http_status=result.http_status,
        problem=result.problem,
        errors=_errors(result.errors),
        ours=message_status(after, attempts, events),
    )
