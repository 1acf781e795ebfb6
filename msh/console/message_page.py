"""One message's page (``/messages/{MessageId}``): what is stored of it in each direction, its history (every
journal event in order), its transmissions, its payloads (download links) and the actions that apply to it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from msh.console.payloads import PayloadInfo, download, payloads_of
from msh.console.web import Console
from msh.runtime.attempts import Attempt
from msh.store.api import Event, InboundMessage, InboxEntry, OutboundMessage, Transaction
from msh.store.app_records import AppInboxItem, InboxClaim
from msh.store.events import EventKind

__all__ = ["download_payload", "message_page"]

_GOOD: Final = frozenset({"delivered", "sent", "app-taken", "forward-delivered", "hop-acknowledged"})
_BAD: Final = frozenset(
    {"failed", "rejected", "app-rejected", "expired", "error-received", "conflicting-duplicate", "forward-failed"}
)


@dataclass(frozen=True, slots=True)
class Stored:
    outbound: OutboundMessage | None
    inbound: InboundMessage | None
    entry: InboxEntry | None
    claim: InboxClaim | None
    events: list[Event]


def _stored(message_id: str, tx: Transaction) -> Stored:
    outbound = tx.get_outbound(message_id)
    inbound = tx.find_inbound(message_id)
    entry = tx.inbox_entry(inbound.id) if inbound is not None else None
    claim = tx.inbox_claim(inbound.id) if inbound is not None else None
    return Stored(outbound, inbound, entry, claim, [])


def tone(event: Event) -> str:
    """How an event reads at a glance: good (an end reached), bad (a failure or refusal), or neutral."""
    if event.kind == EventKind.TRANSMISSION and event.detail.get("error"):
        return "bad"
    return "good" if event.kind in _GOOD else "bad" if event.kind in _BAD else ""


def detail_text(event: Event) -> str:
    """An event's detail as ``key: value`` pairs (empty values left out)."""
    return ", ".join(f"{k}: {v}" for k, v in event.detail.items() if v not in (None, "", [], {}))


async def message_page(request: Request) -> Response:
    console: Console = request.app.state.console
    message_id = request.path_params["message_id"]
    stored = await console.read(lambda tx: _stored(message_id, tx))
    stored = dataclasses.replace(stored, events=await console.msh.off_loop(console.msh.history, message_id))
    if stored.outbound is None and stored.inbound is None and not stored.events:
        return console.render(
            request, "not_found.html", status=404, title="No such message", what=f"no message {message_id!r} is stored"
        )
    store = console.msh.store
    sent_payloads: list[PayloadInfo] = []
    received_payloads: list[PayloadInfo] = []
    attempts: list[Attempt] = []
    if stored.outbound is not None:
        o = stored.outbound
        sent_payloads = await console.msh.off_loop(payloads_of, store, o.body_blob_id, o.content_type)
        attempts = await console.msh.off_loop(console.msh.attempts, message_id)
    if stored.inbound is not None:
        i = stored.inbound
        received_payloads = await console.msh.off_loop(payloads_of, store, i.body_blob_id, i.content_type)
    item = None
    if stored.inbound is not None and stored.entry is not None:
        i = stored.inbound
        item = AppInboxItem(
            stored.entry, i.cpaid, i.service, i.action, i.conversation_id, i.from_party, stored.claim, 0
        )
    return console.render(
        request,
        "message.html",
        title=message_id,
        message_id=message_id,
        stored=stored,
        item=item,
        attempts=attempts,
        sent_payloads=sent_payloads,
        received_payloads=received_payloads,
        tone=tone,
        detail_text=detail_text,
        now=console.now(),
    )


async def download_payload(request: Request) -> Response:
    """``/payloads/{out|in}/{index}?message=ID``: one payload of the message as stored, as an attachment."""
    console: Console = request.app.state.console
    message_id = request.query_params.get("message", "")
    direction = request.path_params["direction"]
    index = int(request.path_params["index"])

    def body(tx: Transaction) -> tuple[int, str] | None:
        if direction == "out":
            o = tx.get_outbound(message_id)
            return None if o is None else (o.body_blob_id, o.content_type)
        i = tx.find_inbound(message_id)
        return None if i is None else (i.body_blob_id, i.content_type)

    found = await console.read(body) if message_id else None
    got = await console.msh.off_loop(download, console.msh.store, *found, index) if found else None
    if got is None:
        what = f"message {message_id!r} has no {'sent' if direction == 'out' else 'received'} payload {index + 1}"
        return console.render(request, "not_found.html", status=404, title="No such payload", what=what)
    disposition = f'attachment; filename="{got.filename}"'
    headers = {"Content-Disposition": disposition, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
    return StreamingResponse(got.chunks, media_type=got.content_type, headers=headers)
