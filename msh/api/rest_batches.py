"""``/inbox/batches``: pull in batches (the HTTPR specification), for applications behind a firewall.

``POST /inbox/batches`` takes up to ``max`` available messages under one lease as a new batch and returns
them with their payloads; the application stores them, then confirms the batch, either by
``POST /inbox/batches/{id}/confirm`` or by naming it in ``confirm=`` on its next fetch (one round trip).
A batch whose confirmation was lost is *in doubt*: ``GET /inbox/batches/{id}`` says whether it was
confirmed (and which messages were acknowledged), is still pending, or expired (its unconfirmed
messages went back to the inbox); confirming again is answered as the first time. Nothing is guessed:
a message leaves the inbox only through a confirmation the MSH committed.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from msh.api import inbox_ops
from msh.api.context import ApiContext
from msh.api.deps import Application, Context, no_soarity
from msh.api.models import BatchConfirmation, BatchDocument, BatchMessage
from msh.api.problems import Problem
from msh.api.views import batch_message, inbox_item
from msh.ebms.message import ParseMode, parse_message
from msh.store.app_records import AppInboxItem, InboxBatch, InboxQuery

__all__ = ["router"]

router = APIRouter(tags=["batches"], dependencies=[Depends(no_soarity)])


def _confirmation(confirmed: inbox_ops.Confirmed) -> BatchConfirmation:
    batch, acknowledged, returned = confirmed
    return BatchConfirmation(
        batch_id=batch.batch_id,
        state="confirmed",
        confirmed_at=batch.confirmed_at,
        acknowledged=acknowledged,
        returned=returned,
    )


def _messages(ctx: ApiContext, taken: list[inbox_ops.Taken], query: InboxQuery) -> list[BatchMessage]:
    store = ctx.msh.store
    out = []
    for entry, claim, record in taken:
        priority = query.priority(record.cpaid, record.service, record.action)
        item = AppInboxItem.of(entry, record, claim, priority)
        with store.open_blob(record.body_blob_id) as blob:
            message = parse_message(blob, record.content_type, mode=ParseMode.LENIENT)
        try:
            out.append(batch_message(inbox_item(item, query.now, ctx.settings.inbox_ttl), message))
        finally:
            message.close()
    return out


@router.post("/inbox/batches", response_model=BatchDocument, summary="Fetch a batch (and confirm the previous one)")
async def fetch_batch(
    ctx: Context,
    app: Application,
    max: Annotated[int, Query(ge=1, le=10_000, description="messages at most (capped by api.max_batch)")] = 100,
    confirm: Annotated[str | None, Query(max_length=200, description="the previous batch, confirmed first")] = None,
    wait: Annotated[float, Query(ge=0, le=3600, description="long poll: seconds to wait for a message")] = 0,
) -> BatchDocument:
    """A new batch of the available messages (highest priority, then oldest first), each leased until the
    batch's ``leaseUntil``; ``batchId`` null when there was nothing to take (after ``wait``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(wait, ctx.settings.max_wait.total_seconds())
    previous: inbox_ops.Confirmed | None = None
    while True:
        now = ctx.now()
        query = inbox_ops.available(now, priorities=ctx.rules, limit=min(max, ctx.settings.max_batch))
        batch_id = f"batch-{uuid.uuid4()}"
        unit = inbox_ops.fetch_batch_unit(app, now, ctx.settings.lease, query, batch_id, confirm)
        batch, taken, confirmed = await ctx.write(unit)
        previous = confirmed if confirmed is not None else previous
        confirm = None  # confirmed once; the next rounds only look for messages
        remaining = deadline - loop.time()
        if batch is not None or remaining <= 0:
            break
        await ctx.arrivals.wait(min(remaining, 1.0))
    prior = _confirmation(previous) if previous is not None else None
    if batch is None:
        return BatchDocument(batch_id=None, state="empty", lease_until=None, entries=[], previous=prior)
    messages = await ctx.msh.off_loop(_messages, ctx, taken, query)
    return _document(batch, now, messages, prior)


def _document(
    batch: InboxBatch, now: datetime, messages: list[BatchMessage], prior: BatchConfirmation | None
) -> BatchDocument:
    return BatchDocument(
        batch_id=batch.batch_id,
        state=inbox_ops.batch_state(batch, now),
        lease_until=batch.lease_until,
        confirmed_at=batch.confirmed_at,
        entries=list(batch.entry_ids),
        messages=messages,
        previous=prior,
    )


@router.post("/inbox/batches/{batch_id}/confirm", response_model=BatchConfirmation, summary="Confirm a batch")
async def confirm_batch(batch_id: str, ctx: Context, app: Application) -> BatchConfirmation:
    """Acknowledge the batch's messages (those still held by it); answered the same when repeated."""
    return _confirmation(await ctx.write(inbox_ops.confirm_unit(batch_id, app, ctx.now())))


@router.get("/inbox/batches/{batch_id}", response_model=BatchDocument, summary="Ask about a batch (in doubt)")
async def get_batch(batch_id: str, ctx: Context, app: Application) -> BatchDocument:
    """Whether the batch was confirmed (when), is pending, or expired; its entries (no payloads)."""
    batch = await ctx.read(lambda tx: tx.inbox_batch(batch_id))
    if batch is None:
        raise Problem(404, "no-such-batch", "No such batch", f"there is no batch {batch_id!r}")
    if batch.application != app:
        raise Problem(403, "other-application", "Another application's batch", f"batch {batch_id!r} is not yours")
    return _document(batch, ctx.now(), [], None)
