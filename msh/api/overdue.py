"""The TTL report (``api.inbox_ttl``): a received message not taken within the TTL is reported, never
silently kept: listed by ``GET /inbox/overdue`` (and flagged ``overdue`` in listings), and logged at
warning level once per message while this process runs, with an ``inbox-overdue`` event in the journal.
Beside it, the exactly-once records past ``api.window`` are forgotten (:func:`forget_old_requests`)."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from msh.api.context import ApiContext
from msh.store.api import Direction, EventKind, Transaction
from msh.store.app_records import AppInboxItem, InboxQuery

__all__ = ["forget_old_requests", "overdue_now", "report_overdue"]

log = logging.getLogger("msh.api")


async def overdue_now(ctx: ApiContext, reported: set[int], *, limit: int = 1000) -> list[AppInboxItem]:
    """The overdue entries not in ``reported`` yet: logged, journaled, added to ``reported``."""
    ttl = ctx.settings.inbox_ttl
    if ttl is None:
        return []
    now = ctx.now()
    query = InboxQuery(now=now, received_before=now - ttl, priorities=ctx.rules, limit=limit)
    items = [i for i in await ctx.read(lambda tx: tx.app_inbox(query)) if i.entry.id not in reported]
    if not items:
        return []

    def journal(tx: Transaction) -> None:
        for item in items:
            tx.append_event(
                at=now,
                kind=EventKind.INBOX_OVERDUE,
                message_id=item.entry.message_id,
                direction=Direction.INBOUND,
                detail={"entry": item.entry.id, "receivedAt": item.entry.received_at.isoformat()},
            )

    await ctx.write(journal)
    for item in items:
        reported.add(item.entry.id)
        log.warning(
            "inbox entry %d (%s, %s/%s) received %s has not been taken within api.inbox_ttl (%s)",
            item.entry.id,
            item.entry.message_id,
            item.service,
            item.action,
            item.entry.received_at.isoformat(),
            ttl,
        )
    return items


async def forget_old_requests(ctx: ApiContext) -> int:
    """Forget the exactly-once records no repeat can use any more: created longer ago than the window and
    the clock skew (a repeat of their pair carries a MsgCreate before the window and is refused anyway)."""
    before = ctx.now() - ctx.settings.window - ctx.settings.clock_skew
    return await ctx.write(lambda tx: tx.purge_app_requests(before))


async def report_overdue(ctx: ApiContext) -> None:
    """Until cancelled: look for overdue entries every tenth of the TTL (between 1 s and 5 min), and
    forget the exactly-once records past the window once an hour."""
    ttl = ctx.settings.inbox_ttl
    period = min(max(ttl / 10, timedelta(seconds=1)), timedelta(minutes=5)).total_seconds() if ttl else 300.0
    reported: set[int] = set()
    loop = asyncio.get_running_loop()
    next_purge = loop.time()
    while True:
        try:
            if ttl is not None:
                await overdue_now(ctx, reported)
            if loop.time() >= next_purge:
                forgotten = await forget_old_requests(ctx)
                if forgotten:
                    log.info("forgot %d exactly-once request record(s) past api.window", forgotten)
                next_purge = loop.time() + 3600
        except Exception:
            log.exception("the TTL report or the clean-up failed; trying again in %.0f s", period)
        await asyncio.sleep(period)
