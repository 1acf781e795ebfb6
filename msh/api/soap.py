"""The SOAP 1.1 interface (WSDL 1.1, document/literal wrapped) for applications that integrate by WSDL:
Send (exactly once with ``requestId`` and ``msgCreate``), GetStatus, ListInbox, FetchMessage, Confirm,
Release, Reject, with the rules of the REST interface (the same functions do the work).

``GET {api.path}/soap?wsdl`` serves ``schemas/msh-api.wsdl`` with ``soap:address`` set to where it was
asked for; ``POST {api.path}/soap`` takes a SOAP 1.1 envelope. The request is parsed by the hardened
parser (:mod:`msh.safexml`), its Body element validated against the WSDL's schema, and the operation
dispatched by the element's name. Refusals are SOAP faults (HTTP 500, SOAP 1.1 §6.2): ``soap:Client``
for the client's mistakes, ``soap:Server`` otherwise, with a ``tns:Problem`` detail (the REST problem's
status and type, and the SOARITY answer where there is one).

Why hand-written: spyne, the Python SOAP server library, had its last release in 2022 and speaks WSGI,
not ASGI; the WSDL is small, written once and checked by zeep (the tests build their client from the
served WSDL), and dispatching seven operations with lxml is less code than adapting a framework.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import cache
from typing import Final

from fastapi import APIRouter, Request
from fastapi.responses import Response
from lxml import etree

from msh.api import inbox_ops, soarity
from msh.api.context import ApiContext
from msh.api.models import SubmitRequest
from msh.api.problems import Problem
from msh.api.rest_messages import bounded_body
from msh.api.submitting import submit, to_submission, visible_to
from msh.api.views import inbox_item
from msh.ebms.message import ParseMode, parse_message
from msh.engine import explain_state
from msh.errors import MshError
from msh.resources import schema_path
from msh.runtime.attempts import attempts as attempts_of
from msh.runtime.attempts import failure_despite_acknowledgment
from msh.runtime.compose import Payload
from msh.safexml import parse_xml
from msh.store.api import EventKind, InboxEntry, Transaction
from msh.store.app_records import AppInboxItem, InboxQuery, InboxView
from msh.transport.asgi import client_certificate

__all__ = ["SOAP_ENV", "TNS", "router", "wsdl"]

SOAP_ENV: Final = "http://schemas.xmlsoap.org/soap/envelope/"
TNS: Final = "urn:pymsh:api:soap:1"
_WSDL_SOAP: Final = "http://schemas.xmlsoap.org/wsdl/soap/"
_XS: Final = "http://www.w3.org/2001/XMLSchema"
_MAX: Final = 64 * 1024 * 1024

router = APIRouter(include_in_schema=False)


@cache
def _wsdl() -> etree._ElementTree:
    return etree.parse(str(schema_path("msh-api.wsdl")))


@cache
def _schema() -> etree.XMLSchema:
    element = _wsdl().find(f".//{{{_XS}}}schema")
    assert element is not None
    return etree.XMLSchema(etree.ElementTree(copy.deepcopy(element)))


def wsdl(location: str) -> bytes:
    """The WSDL with its ``soap:address`` at ``location``."""
    tree = copy.deepcopy(_wsdl())
    address = tree.find(f".//{{{_WSDL_SOAP}}}address")
    assert address is not None
    address.set("location", location)
    return bytes(etree.tostring(tree, xml_declaration=True, encoding="UTF-8"))


# -- building the answers


def _add(parent: etree._Element, name: str, value: object) -> etree._Element:
    child = etree.SubElement(parent, f"{{{TNS}}}{name}")
    if value is not None:
        child.text = (
            value.isoformat()
            if isinstance(value, datetime)
            else ("true" if value is True else "false" if value is False else str(value))
        )
    return child


def _item(parent: etree._Element, name: str, item: AppInboxItem, ctx: ApiContext) -> None:
    shown = inbox_item(item, ctx.now(), ctx.settings.inbox_ttl)
    node = _add(parent, name, None)
    for key, value in (
        ("entryId", shown.id),
        ("messageId", shown.message_id),
        ("state", shown.state),
        ("cpaId", shown.cpa_id),
        ("service", shown.service),
        ("action", shown.action),
        ("conversationId", shown.conversation_id),
        ("from", shown.from_party),
        ("receivedAt", shown.received_at),
        ("priority", shown.priority),
        ("takes", shown.takes),
        ("leaseUntil", shown.lease_until),
        ("overdue", shown.overdue),
        ("rejectedReason", shown.rejected_reason),
    ):
        if value is not None or key not in ("leaseUntil", "rejectedReason"):
            _add(node, key, value)


def _settlement(name: str, entry: InboxEntry, state: str) -> etree._Element:
    out = etree.Element(f"{{{TNS}}}{name}", nsmap={"tns": TNS})
    _add(out, "entryId", entry.id)
    _add(out, "messageId", entry.message_id)
    _add(out, "state", state)
    return out


# -- reading the requests


def _text(op: etree._Element, name: str) -> str | None:
    child = op.find(f"{{{TNS}}}{name}")
    return None if child is None or child.text is None else child.text.strip()


def _bool(op: etree._Element, name: str) -> bool:
    return _text(op, name) in ("true", "1")


def _datetime(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise Problem(400, "invalid-request", "Invalid request", f"{text!r} is not an xs:dateTime") from None


# -- the operations


async def _send(ctx: ApiContext, app: str, op: etree._Element) -> etree._Element:
    try:
        pair = soarity.pair_of(_text(op, "requestId"), _datetime(_text(op, "msgCreate")))
    except soarity.BadPair as exc:
        raise Problem(400, "soarity-bad-headers", "Bad requestId/msgCreate", str(exc)) from None
    to = op.find(f"{{{TNS}}}to")
    assert to is not None  # the schema requires it
    payloads, canon = [], []
    for part in op.findall(f"{{{TNS}}}payload"):
        content = base64.b64decode(_text(part, "data") or "")
        kind = _text(part, "contentType") or "application/octet-stream"
        payloads.append(Payload(content, kind, _text(part, "contentId")))
        canon.append([kind, _text(part, "contentId"), hashlib.sha256(content).hexdigest()])
    fields = {
        "to": {"partyId": _text(to, "partyId"), "type": _text(to, "type")},
        "service": _text(op, "service"),
        "action": _text(op, "action"),
        "cpaId": _text(op, "cpaId"),
        "conversationId": _text(op, "conversationId"),
    }
    try:
        request = SubmitRequest.model_validate(fields)
    except ValueError as exc:
        raise Problem(422, "invalid-submission", "Invalid submission", str(exc)) from None
    canonical = json.dumps([fields, canon], sort_keys=True).encode()
    answer = await submit(
        ctx, app, pair, soarity.fingerprint("SOAP", "Send", canonical), to_submission(request, payloads, ctx)
    )
    doc = json.loads(answer.body)
    out = etree.Element(f"{{{TNS}}}SendResponse", nsmap={"tns": TNS})
    _add(out, "messageId", doc["messageId"])
    if doc.get("requestId") is not None:
        _add(out, "requestId", doc["requestId"])
    _add(out, "status", doc["status"])
    return out


async def _status(ctx: ApiContext, app: str, op: etree._Element) -> etree._Element:
    message_id = _text(op, "messageId") or ""
    stored = await ctx.read(lambda tx: tx.get_outbound(message_id))
    events = await ctx.read(lambda tx: tx.message_events(message_id, limit=1000))
    if stored is None or not visible_to(app, events):
        raise Problem(404, "no-such-message", "No such message", f"no message {message_id!r} was sent from here")
    out = etree.Element(f"{{{TNS}}}GetStatusResponse", nsmap={"tns": TNS})
    state = stored.state
    _add(out, "messageId", stored.message_id)
    _add(out, "status", state.status.value)
    _add(out, "final", state.status.final)
    if state.evidence is not None:
        _add(out, "evidence", state.evidence.value)
    _add(out, "explanation", explain_state(state))
    _add(out, "attempts", state.attempts)
    if state.failure is not None:
        _add(out, "deliveryFailure", str(state.failure))
    if state.receipt_problem is not None:
        _add(out, "receiptProblem", state.receipt_problem)
    reported = failure_despite_acknowledgment(state.status.value == "delivered", attempts_of(events))
    if reported is not None:
        # ebMS2 §6.5.7: the acknowledgment stands; what the To party reported besides is said.
        _add(out, "deliveryFailureAfterAcknowledgment", str(reported))
    delivered = [e for e in events if e.kind == EventKind.DELIVERED]
    if delivered:
        _add(out, "acknowledgedAt", delivered[-1].at)
    return out


async def _list(ctx: ApiContext, app: str, op: etree._Element) -> etree._Element:
    import asyncio

    view = _text(op, "view") or "available"
    if view not in {v.value for v in InboxView}:
        views = "available, leased, dead, held or all"
        raise Problem(400, "invalid-request", "Invalid request", f"view {view!r}: use {views}")
    limit = int(_text(op, "limit") or 100)
    if not 1 <= limit <= 1000:
        raise Problem(400, "invalid-request", "Invalid request", f"limit {limit}: use 1 to 1000")
    wait = min(float(_text(op, "waitSeconds") or 0), ctx.settings.max_wait.total_seconds())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(wait, 0.0)
    while True:
        query = InboxQuery(
            now=ctx.now(),
            view=InboxView(view),
            cpaid=_text(op, "cpaId"),
            service=_text(op, "service"),
            action=_text(op, "action"),
            conversation_id=_text(op, "conversationId"),
            priorities=ctx.rules,
            limit=limit,
        )
        items = await ctx.read(lambda tx, q=query: tx.app_inbox(q))  # type: ignore[misc]
        remaining = deadline - loop.time()
        if items or remaining <= 0 or view != "available":
            break
        await ctx.arrivals.wait(min(remaining, 1.0))
    out = etree.Element(f"{{{TNS}}}ListInboxResponse", nsmap={"tns": TNS})
    for item in items:
        _item(out, "item", item, ctx)
    return out


async def _fetch(ctx: ApiContext, app: str, op: etree._Element) -> etree._Element:
    entry_id = int(_text(op, "entryId") or 0)
    now = ctx.now()
    if _bool(op, "browse"):

        def read(tx: Transaction) -> inbox_ops.Taken:
            entry = tx.inbox_entry(entry_id)
            record = tx.get_inbound(entry_id) if entry is not None else None
            if entry is None or record is None:
                raise Problem(404, "no-such-entry", "No such inbox entry", f"the inbox has no entry {entry_id}")
            return entry, tx.inbox_claim(entry_id), record  # type: ignore[return-value]

        entry, claim, record = await ctx.read(read)
    else:
        entry, claim, record = await ctx.write(inbox_ops.take_unit(entry_id, app, now, ctx.settings.lease))
    priority = InboxQuery(now=now, priorities=ctx.rules).priority(record.cpaid, record.service, record.action)
    item = AppInboxItem.of(entry, record, claim, priority)
    store = ctx.msh.store

    def build() -> etree._Element:
        with store.open_blob(record.body_blob_id) as blob:
            message = parse_message(blob, record.content_type, mode=ParseMode.LENIENT)
        try:
            out = etree.Element(f"{{{TNS}}}FetchMessageResponse", nsmap={"tns": TNS})
            _item(out, "item", item, ctx)
            for part in message.payloads:
                with part.body.open() as source:
                    content = source.read()
                node = _add(out, "payload", None)
                _add(node, "contentType", part.content_type)
                if part.content_id is not None:
                    _add(node, "contentId", part.content_id)
                _add(node, "data", base64.b64encode(content).decode("ascii"))
            return out
        finally:
            message.close()

    return await ctx.msh.off_loop(build)


async def _confirm(ctx: ApiContext, app: str, op: etree._Element) -> etree._Element:
    entry = await ctx.write(inbox_ops.ack_unit(int(_text(op, "entryId") or 0), app, ctx.now()))
    return _settlement("ConfirmResponse", entry, "acknowledged")


async def _release(ctx: ApiContext, app: str, op: etree._Element) -> etree._Element:
    entry = await ctx.write(inbox_ops.release_unit(int(_text(op, "entryId") or 0), app, ctx.now()))
    return _settlement("ReleaseResponse", entry, "available")


async def _reject(ctx: ApiContext, app: str, op: etree._Element) -> etree._Element:
    reason = _text(op, "reason") or ""
    if not reason or len(reason) > 2000:
        raise Problem(400, "invalid-request", "Invalid request", "reason: give why (1 to 2000 characters)")
    entry = await ctx.write(inbox_ops.reject_unit(int(_text(op, "entryId") or 0), app, ctx.now(), reason))
    return _settlement("RejectResponse", entry, "rejected")


_OPERATIONS: Final[dict[str, Callable[[ApiContext, str, etree._Element], Awaitable[etree._Element]]]] = {
    "Send": _send,
    "GetStatus": _status,
    "ListInbox": _list,
    "FetchMessage": _fetch,
    "Confirm": _confirm,
    "Release": _release,
    "Reject": _reject,
}


# -- the envelope


def _envelope(content: etree._Element) -> bytes:
    envelope = etree.Element(f"{{{SOAP_ENV}}}Envelope", nsmap={"soap": SOAP_ENV, "tns": TNS})
    body = etree.SubElement(envelope, f"{{{SOAP_ENV}}}Body")
    body.append(content)
    return bytes(etree.tostring(envelope, xml_declaration=True, encoding="UTF-8"))


def _fault(problem: Problem) -> Response:
    fault = etree.Element(f"{{{SOAP_ENV}}}Fault", nsmap={"soap": SOAP_ENV})
    code = etree.SubElement(fault, "faultcode")
    code.text = "soap:Client" if problem.status < 500 else "soap:Server"
    etree.SubElement(fault, "faultstring").text = problem.detail
    detail = etree.SubElement(fault, "detail")
    info = etree.SubElement(detail, f"{{{TNS}}}Problem", nsmap={"tns": TNS})
    _add(info, "status", problem.status)
    _add(info, "type", problem.slug)
    if soarity.SOARITY in problem.headers:
        _add(info, "soarity", problem.headers[soarity.SOARITY])
    return Response(_envelope(fault), status_code=500, media_type="text/xml; charset=utf-8")


def _client(detail: str) -> Problem:
    return Problem(400, "invalid-request", "Invalid request", detail)


@router.get("/soap")
async def get_wsdl(request: Request) -> Response:
    """The WSDL (``?wsdl``)."""
    if "wsdl" not in {k.lower() for k in request.query_params}:
        return _fault(_client("POST a SOAP 1.1 envelope here; the WSDL is at ?wsdl"))
    location = str(request.url.replace(query=""))
    return Response(wsdl(location), media_type="text/xml; charset=utf-8")


@router.post("/soap")
async def post_soap(request: Request) -> Response:
    """One SOAP 1.1 request: parse, validate, authenticate, dispatch (see the module docs)."""
    ctx = request.app.state.ctx
    assert isinstance(ctx, ApiContext)
    try:
        body = await bounded_body(request, _MAX)
        try:
            root = parse_xml(body, what="SOAP request")
        except MshError as exc:
            raise _client(f"the request is not a usable XML document: {exc}") from None
        if root.tag != f"{{{SOAP_ENV}}}Envelope":
            raise _client(f"the document is not a SOAP 1.1 Envelope ({root.tag}); use {SOAP_ENV}")
        soap_body = root.find(f"{{{SOAP_ENV}}}Body")
        op = next(iter(soap_body.iterchildren(etree.Element)), None) if soap_body is not None else None
        if op is None:
            raise _client("the SOAP Body is empty or missing; put one operation's element in it")
        name = etree.QName(op)
        if name.namespace != TNS or name.localname not in _OPERATIONS:
            raise _client(f"unknown operation {op.tag}; the operations are {', '.join(_OPERATIONS)} in {TNS}")
        schema = _schema()
        if not schema.validate(etree.ElementTree(copy.deepcopy(op))):
            errors = [e.message for e in schema.error_log]  # type: ignore[attr-defined]
            raise _client(f"{name.localname} does not follow the WSDL's schema: {'; '.join(errors[:3]) or '?'}")
        app = ctx.applications.authenticate(request.headers.get("authorization"), client_certificate(request.scope))
        result = await _OPERATIONS[name.localname](ctx, app, op)
    except Problem as problem:
        return _fault(problem)
    return Response(_envelope(result), media_type="text/xml; charset=utf-8")
