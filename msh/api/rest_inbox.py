"""``/inbox``: the received messages for applications (Certified HTTP's confirm by DELETE, the AMQP 1.0
broker-behaviour paper's release and reject, leases, long polls, filters, priorities and the TTL report; rules
in :mod:`msh.api.inbox_ops`)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from typing import Annotated, Final, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response, StreamingResponse

from msh.api import inbox_ops
from msh.api.context import ApiContext
from msh.api.deps import Application, Context, no_soarity
from msh.api.models import InboxList, RejectRequest, Settled
from msh.api.problems import Problem
from msh.api.views import batch_message, inbox_item
from msh.ebms.message import ParseMode, parse_message
from msh.store.api import InboundMessage, InboxEntry, Transaction
from msh.store.app_records import AppInboxItem, InboxClaim, InboxQuery, InboxView

__all__ = ["router"]

router = APIRouter(tags=["inbox"], dependencies=[Depends(no_soarity)])

_PROBLEMS: Final[dict[int | str, dict[str, object]]] = {
    401: {"description": "no or a wrong credential"},
    404: {"description": "no such entry"},
    409: {"description": "held by another application's lease, or settled otherwise"},
    410: {"description": "acknowledged or rejected: never offered again"},
}
_CHUNK: Final = 1 << 16


def _settled(entry: InboxEntry, state: str) -> Settled:
    return Settled(id=entry.id, message_id=entry.message_id, state=state)


async def _list(ctx: ApiContext, query: InboxQuery, wait: float) -> InboxList:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(wait, ctx.settings.max_wait.total_seconds())
    while True:
        now = ctx.now()
        current = InboxQuery(
            now=now,
            view=query.view,
            cpaid=query.cpaid,
            service=query.service,
            action=query.action,
            conversation_id=query.conversation_id,
            received_before=query.received_before,
            priorities=ctx.rules,
            limit=query.limit,
        )
        items = await ctx.read(functools.partial(_inbox, current))
        remaining = deadline - loop.time()
        if items or remaining <= 0:
            return InboxList(items=[inbox_item(i, now, ctx.settings.inbox_ttl) for i in items])
        await ctx.arrivals.wait(min(remaining, 1.0))  # woken by an arrival; looks again at least every second


def _inbox(query: InboxQuery, tx: Transaction) -> list[AppInboxItem]:
    return tx.app_inbox(query)


Filters = tuple[str | None, str | None, str | None, str | None]


def _filters(
    cpa_id: Annotated[str | None, Query(alias="cpaId", max_length=1000)] = None,
    service: Annotated[str | None, Query(max_length=1000)] = None,
    action: Annotated[str | None, Query(max_length=1000)] = None,
    conversation_id: Annotated[str | None, Query(alias="conversationId", max_length=1000)] = None,
) -> Filters:
    return cpa_id, service, action, conversation_id


@router.get("/inbox", response_model=InboxList, responses=_PROBLEMS, summary="List (browse) received messages")
async def list_inbox(
    ctx: Context,
    app: Application,
    filters: Annotated[Filters, Depends(_filters)],
    view: Annotated[Literal["available", "leased", "dead", "held", "all"], Query()] = "available",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    wait: Annotated[float, Query(ge=0, le=3600, description="long poll: seconds to wait for a message")] = 0,
) -> InboxList:
    """Messages in ``view`` (available: waiting and not leased), highest priority first, then oldest first.
    Listing takes nothing. With ``wait``, an empty available list waits (up to ``api.max_wait``) for one."""
    cpaid, service, action, conversation = filters
    query = InboxQuery(
        now=ctx.now(),
        view=InboxView(view),
        cpaid=cpaid,
        service=service,
        action=action,
        conversation_id=conversation,
        limit=limit,
    )
    return await _list(ctx, query, wait if view == "available" else 0)


@router.get("/inbox/overdue", response_model=InboxList, responses=_PROBLEMS, summary="Messages not taken in time")
async def overdue(ctx: Context, app: Application, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> InboxList:
    """Available messages received longer than ``api.inbox_ttl`` ago (none when it is unset)."""
    ttl = ctx.settings.inbox_ttl
    if ttl is None:
        return InboxList(items=[])
    now = ctx.now()
    return await _list(ctx, InboxQuery(now=now, received_before=now - ttl, limit=limit), 0)


@router.get(
    "/inbox/{entry_id}",
    responses={
        **_PROBLEMS,
        200: {
            "description": "the message",
            "content": {
                "multipart/related": {},
                "text/xml": {},
                "application/json": {"schema": {"$ref": "#/components/schemas/BatchMessage"}},
            },
        },
    },
    summary="Take (or browse) one received message",
    response_model=None,
)
async def get_entry(
    entry_id: int,
    ctx: Context,
    app: Application,
    browse: Annotated[bool, Query(description="read without taking (no lease)")] = False,
    format: Annotated[Literal["mime", "json"], Query(description="mime: the ebXML message as received")] = "mime",
) -> Response:
    """Takes the message under a lease (``Msh-Lease-Until``) unless ``browse``; ``format=mime`` streams
    the ebXML message as received (SOAP envelope and payloads), ``format=json`` gives header and payloads."""
    now = ctx.now()
    if browse:
        entry, claim, record = await ctx.read(lambda tx: _browse(tx, entry_id))
    else:
        entry, claim, record = await ctx.write(inbox_ops.take_unit(entry_id, app, now, ctx.settings.lease))
    headers = {"Msh-Entry": str(entry_id), "Msh-Message-Id": entry.message_id}
    if not browse and claim is not None and claim.lease_until is not None:
        headers["Msh-Lease-Until"] = claim.lease_until.isoformat()
    store = ctx.msh.store
    if format == "json":
        priority = InboxQuery(now=now, priorities=ctx.rules).priority(record.cpaid, record.service, record.action)
        item = inbox_item(
            AppInboxItem.of(entry, record, claim, priority),
            now,
            ctx.settings.inbox_ttl,
        )

        def document() -> bytes:
            with store.open_blob(record.body_blob_id) as blob:
                message = parse_message(blob, record.content_type, mode=ParseMode.LENIENT)
            try:
                return batch_message(item, message).model_dump_json(by_alias=True).encode("utf-8")
            finally:
                message.close()

        body = await ctx.msh.off_loop(document)
        return Response(body, media_type="application/json", headers=headers)

    def chunks() -> Iterator[bytes]:
        with store.open_blob(record.body_blob_id) as blob:
            while chunk := blob.read(_CHUNK):
                yield chunk

    return StreamingResponse(chunks(), media_type=record.content_type, headers=headers)


def _browse(tx: Transaction, entry_id: int) -> inbox_ops.Taken | tuple[InboxEntry, InboxClaim | None, InboundMessage]:
    entry, claim = inbox_ops.offered_entry(tx, entry_id)  # ebMS2 §9.1.1: a held message is not even read
    record = tx.get_inbound(entry_id)
    if record is None:
        raise Problem(404, "no-such-entry", "No such inbox entry", f"the inbox has no entry {entry_id}")
    return entry, claim, record


@router.delete(
    "/inbox/{entry_id}", response_model=Settled, responses=_PROBLEMS, summary="Acknowledge (confirm receipt)"
)
async def delete_entry(entry_id: int, ctx: Context, app: Application) -> Settled:
    """The application holds the message safely: it is never offered again. Repeating it answers the same."""
    entry = await ctx.write(inbox_ops.ack_unit(entry_id, app, ctx.now()))
    return _settled(entry, "acknowledged")


@router.post("/inbox/{entry_id}/release", response_model=Settled, responses=_PROBLEMS, summary="Put back in the inbox")
async def release_entry(entry_id: int, ctx: Context, app: Application) -> Settled:
    """Give up the lease now: the message is available again (to this or another application)."""
    entry = await ctx.write(inbox_ops.release_unit(entry_id, app, ctx.now()))
    return _settled(entry, "available")


@router.post("/inbox/{entry_id}/reject", response_model=Settled, responses=_PROBLEMS, summary="Reject (dead-letter)")
async def reject_entry(entry_id: int, body: RejectRequest, ctx: Context, app: Application) -> Settled:
    """Move the message to the dead-letter list (``GET /inbox?view=dead``) with a reason; never offered again."""
    entry = await ctx.write(inbox_ops.reject_unit(entry_id, app, ctx.now(), body.reason))
    return _settled(entry, "rejected")
