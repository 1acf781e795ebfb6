"""Webhooks (``api.webhooks``): an application is called, at least once, when a message arrives for it or
a message it sent reaches a final state.

The source is the store's journal: a webhook reads the events after its cursor (``app_cursors``, named
``webhook:<application>``), POSTs each that concerns it, and commits its cursor only after the call was
answered 2xx, so a crash or a failed call means the call is made again (at least once; ``Msh-Event-Id``
lets the application drop a repeat). A failing URL is retried with exponential backoff (1 s doubling up
to 5 minutes, with jitter) and holds back that application's later events, so they arrive in order.

The call: ``POST URL`` with a JSON body ``{"event", "eventId", "at", "messageId", ...}`` and the headers
``Msh-Event-Id``, ``Msh-Timestamp`` (Unix seconds) and ``Msh-Signature: sha256=<hex>``, the HMAC-SHA256
of ``<timestamp>.<body>`` keyed with the application's bearer token (the secret both sides hold).

Events: ``message-received`` (to every application with a webhook: ``entry``, ``messageId``, ``cpaId``,
``service``, ``action``; under MessageOrder, when the message's turn comes, not while it is held),
``message-abandoned`` (to every application with a webhook, the same fields with ``sequenceNumber`` and
``reason``: a message held for its turn whose predecessor never came, never offered, ebMS2 §9),
``message-delivered``, ``message-sent`` and ``message-failed`` (to the application that submitted the
message through the interfaces, with the evidence and the failure).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

import aiohttp

from msh.api.context import ApiContext
from msh.api.submitting import submitter
from msh.runtime.config.api import webhooks
from msh.store.api import Event, EventKind, Transaction

__all__ = ["Call", "Webhook", "Webhooks", "sign"]

log = logging.getLogger("msh.api.webhooks")

_BATCH: Final = 100
_FIRST_BACKOFF: Final = 1.0
_MAX_BACKOFF: Final = 300.0
_KINDS: Final = {
    "received": "message-received",
    "released": "message-received",  # MessageOrder: its turn came (ebMS2 §9.1.1)
    "abandoned": "message-abandoned",
    "delivered": "message-delivered",
    "sent": "message-sent",
    "failed": "message-failed",
}


_RECEIVING: Final = frozenset({EventKind.RECEIVED, EventKind.RELEASED, EventKind.ABANDONED})
"""Events about a received message: announced to every application with a webhook."""


def sign(secret: bytes, timestamp: str, body: bytes) -> str:
    """The ``Msh-Signature`` value of a call."""
    return "sha256=" + hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Call:
    """One call to make: where, the body, the headers."""

    url: str
    body: bytes
    headers: dict[str, str]


Poster = Callable[[Call], Awaitable[int]]
"""Makes a call; the HTTP status (an exception: no answer)."""


@dataclass(frozen=True, slots=True)
class Webhook:
    """Application ``name``'s URL and secret."""

    name: str
    url: str
    secret: bytes

    @property
    def cursor(self) -> str:
        return f"webhook:{self.name}"


def _move(cursor: str, position: int, tx: Transaction) -> None:
    tx.set_app_cursor(cursor, position)


def _submitter(tx: Transaction, message_id: str) -> str | None:
    return submitter(tx.message_events(message_id, limit=1000))


def _document(event: Event, tx: Transaction) -> dict[str, object] | None:
    """The call's body; None when the event concerns no application (a copy not delivered to the inbox)."""
    assert event.message_id is not None
    doc: dict[str, object] = {
        "event": _KINDS[event.kind],
        "eventId": event.id,
        "at": event.at.isoformat(),
        "messageId": event.message_id,
    }
    if event.kind in _RECEIVING:
        if event.kind == EventKind.RECEIVED and event.detail.get("held"):
            return None  # ebMS2 §9.1.1: not offered before its turn; announced when released
        record = tx.find_inbound(event.message_id)
        if record is None or tx.inbox_entry(record.id) is None:
            return None
        doc.update(entry=record.id, cpaId=record.cpaid, service=record.service, action=record.action)
        if event.kind == EventKind.ABANDONED:
            # ebMS2 §9: a message before it in its sequence never came: it is never offered.
            doc.update(sequenceNumber=event.detail.get("sequenceNumber"), reason=event.detail.get("reason"))
    elif event.kind == EventKind.FAILED:
        keys = ("errorCode", "severity", "description")
        doc["deliveryFailure"] = {k: v for k, v in event.detail.items() if k in keys}
        # ebMS2 §6.5.7: Warning: transmitted, never acknowledged: it may have been delivered.
        doc["mayHaveBeenDelivered"] = event.detail.get("severity") == "Warning"
    ended = event.kind in (EventKind.DELIVERED, EventKind.SENT, EventKind.FAILED)
    if ended and isinstance(event.detail.get("evidence"), str):
        doc["evidence"] = event.detail["evidence"]
    if event.kind == EventKind.DELIVERED and isinstance(event.detail.get("receiptProblem"), str):
        doc["receiptProblem"] = event.detail["receiptProblem"]
    return doc


class Webhooks:
    """Calls the applications' webhooks from the journal (see the module docs)."""

    def __init__(self, ctx: ApiContext, hooks: list[Webhook], post: Poster | None = None) -> None:
        self.ctx = ctx
        self.hooks = hooks
        self._post = post
        self._session: aiohttp.ClientSession | None = None
        self.backoff = {hook.name: 0.0 for hook in hooks}

    @classmethod
    def from_context(cls, ctx: ApiContext, post: Poster | None = None) -> Webhooks | None:
        """The webhooks of ``ctx``'s settings (None: none); each needs its application's token."""
        hooks = []
        for hook in webhooks(ctx.settings.webhooks):
            secret = ctx.applications.token_of(hook.name)
            if secret is None:
                log.error(
                    "api.webhooks: %r is not one of api.applications (no secret to sign with); not called", hook.name
                )
                continue
            hooks.append(Webhook(hook.name, hook.url, secret))
        return cls(ctx, hooks, post) if hooks else None

    async def _http(self, call: Call) -> int:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        async with self._session.post(call.url, data=call.body, headers=call.headers) as response:
            await response.read()
            return response.status

    async def _calls(self, hook: Webhook) -> tuple[list[tuple[int, Call]], int]:
        """The calls after ``hook``'s cursor (each with its event id), and the position read up to."""

        def read(tx: Transaction) -> tuple[list[tuple[int, Call]], int]:
            cursor = tx.app_cursor(hook.cursor)
            events = tx.list_events(cursor, limit=_BATCH)
            calls = []
            for event in events:
                if event.kind not in _KINDS or event.message_id is None:
                    continue
                if event.kind not in _RECEIVING and _submitter(tx, event.message_id) != hook.name:
                    continue
                doc = _document(event, tx)
                if doc is None:
                    continue
                body = json.dumps(doc, ensure_ascii=False).encode("utf-8")
                stamp = str(int(time.time()))
                headers = {
                    "Content-Type": "application/json",
                    "Msh-Event-Id": str(event.id),
                    "Msh-Timestamp": stamp,
                    "Msh-Signature": sign(hook.secret, stamp, body),
                }
                calls.append((event.id, Call(hook.url, body, headers)))
            return calls, (events[-1].id if events else cursor)

        return await self.ctx.read(read)

    async def step(self, hook: Webhook) -> int:
        """Make ``hook``'s due calls in order, committing the cursor after each answered one; how many
        were made. Stops at the first failure (its backoff then grows)."""
        calls, upto = await self._calls(hook)
        post = self._post or self._http
        made = 0
        for event_id, call in calls:
            try:
                status = await post(call)
            except Exception as exc:  # no answer: the same call again after the backoff
                status, reason = 0, f"{type(exc).__name__}: {exc}"
            else:
                reason = f"HTTP {status}"
            if not 200 <= status < 300:
                previous = self.backoff[hook.name]
                self.backoff[hook.name] = min(_MAX_BACKOFF, previous * 2 if previous else _FIRST_BACKOFF)
                log.warning(
                    "webhook of %s: %s (event %d); again in %.0f s",
                    hook.name,
                    reason,
                    event_id,
                    self.backoff[hook.name],
                )
                return made
            self.backoff[hook.name] = 0.0
            made += 1
            await self.ctx.write(functools.partial(_move, hook.cursor, event_id))
        if upto and (not calls or calls[-1][0] < upto):
            await self.ctx.write(functools.partial(_move, hook.cursor, upto))
        return made

    async def run(self, *, poll: float = 1.0) -> None:
        """Call the webhooks until cancelled."""
        due = {hook.name: 0.0 for hook in self.hooks}
        loop = asyncio.get_running_loop()
        try:
            while True:
                for hook in self.hooks:
                    if loop.time() < due[hook.name]:
                        continue
                    try:
                        await self.step(hook)
                    except Exception:
                        log.exception("webhook of %s: reading the journal failed", hook.name)
                    wait = self.backoff[hook.name]
                    due[hook.name] = loop.time() + (wait * random.uniform(0.8, 1.2) if wait else 0.0)
                await self.ctx.arrivals.wait(poll)
        finally:
            if self._session is not None:
                await self._session.close()
