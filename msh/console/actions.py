"""The console's actions: resend a failed message, and release, reject or acknowledge an inbox entry.

Each is a POST form carrying the session's CSRF token (:mod:`msh.console.session`); each answers with a 303
redirect back to the page it came from and a flash message saying what was done, or why nothing was (a
refusal names the state that forbids it: "not failed: awaiting-ack"). The inbox actions are the application
interfaces' own units of store work (:mod:`msh.api.inbox_ops`), run through the MSH's store writer, acting
as the application ``console``.
"""

from __future__ import annotations

import functools
from typing import Final
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from msh.api import inbox_ops
from msh.api.problems import Problem
from msh.console.session import CsrfRefused, Level
from msh.console.web import Console
from msh.runtime.resending import ResendOutcome
from msh.store.api import InboxEntry

__all__ = ["APPLICATION", "inbox_action", "operator", "resend_action"]

APPLICATION: Final = "console"
"""The application name the console's inbox actions are taken under (leases and the journal show it)."""
_MAX_REASON: Final = 500


def operator(request: Request) -> str:
    """Who asked: ``console:<name>`` with the operator the admin port authenticated (``scope["state"]["operator"]``,
    :mod:`msh.admin`), else ``console``."""
    state = request.scope.get("state")
    who = state.get("operator") if isinstance(state, dict) else None
    return f"console:{who}" if isinstance(who, str) and who else "console"


def _back(form: FormData, fallback: str, base: str) -> str:
    """The page to return to (a path of this console only: never an address elsewhere)."""
    back = form.get("back")
    if isinstance(back, str) and back.startswith("/") and not back.startswith("//"):
        return back[len(base) :] if base and back.startswith(base) else back
    return fallback


async def _form(console: Console, request: Request) -> FormData:
    form = await request.form(max_files=0, max_fields=20)
    console.session(request).check(request, form.get("csrf"))
    return form


def _text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip()[:_MAX_REASON] if isinstance(value, str) else ""


def _refused_csrf(console: Console, request: Request, exc: CsrfRefused) -> Response:
    return console.render(request, "refused.html", status=403, title="Refused", what=str(exc))


async def inbox_action(request: Request) -> Response:
    """``POST /actions/inbox`` (``entry``, ``op`` release|reject|ack, ``reason`` for reject)."""
    console: Console = request.app.state.console
    try:
        form = await _form(console, request)
    except CsrfRefused as exc:
        return _refused_csrf(console, request, exc)
    session = console.session(request)
    back = _back(form, "/inbox", console.base(request))
    op, reason = _text(form, "op"), _text(form, "reason")
    try:
        entry_id = int(_text(form, "entry"))
    except ValueError:
        session.flash("refused", "no inbox entry was named")
        return console.redirect(request, back)
    now = console.now()
    if op == "release":
        unit = inbox_ops.release_unit(entry_id, APPLICATION, now)
        done = "released: it is available to the applications again"
    elif op == "ack":
        unit = inbox_ops.ack_unit(entry_id, APPLICATION, now)
        done = "acknowledged: it is never offered again"
    elif op == "reject":
        if not reason:
            session.flash("refused", f"inbox entry {entry_id}: give a reason to reject it")
            return console.redirect(request, back)
        unit = inbox_ops.reject_unit(entry_id, APPLICATION, now, f"{reason} (by {operator(request)})")
        done = f"rejected to the dead-letter list: {reason}"
    else:
        session.flash("refused", f"unknown inbox action {op!r}: release, reject or ack")
        return console.redirect(request, back)
    try:
        entry: InboxEntry = await console.msh.writer.run(unit)
    except Problem as problem:
        session.flash("refused", f"inbox entry {entry_id} not {_past(op)}: {problem.detail}")
    else:
        session.flash("ok", f"inbox entry {entry.id} ({entry.message_id}) {done}")
    return console.redirect(request, back)


def _past(op: str) -> str:
    return {"release": "released", "ack": "acknowledged", "reject": "rejected"}.get(op, op)


async def resend_action(request: Request) -> Response:
    """``POST /actions/resend`` (``message``, ``reason``, ``force``): send a failed message again."""
    console: Console = request.app.state.console
    try:
        form = await _form(console, request)
    except CsrfRefused as exc:
        return _refused_csrf(console, request, exc)
    session = console.session(request)
    message_id, reason = _text(form, "message"), _text(form, "reason")
    back = f"/messages/{_quote(message_id)}" if message_id else "/messages"
    if not message_id or not reason:
        session.flash("refused", "give the MessageId and a reason to resend a message")
        return console.redirect(request, back)
    force = form.get("force") == "1"
    for level, text in await resend(console, [message_id], reason=reason, requested_by=operator(request), force=force):
        session.flash(level, text)
    return console.redirect(request, back)


def _quote(text: str) -> str:
    return quote(text, safe="")


async def resend(
    console: Console, message_ids: list[str], *, reason: str, requested_by: str, force: bool
) -> list[tuple[Level, str]]:
    """Resend through the MSH (:meth:`Msh.resend`, blocking: on the work pool); one (level, text) per message."""
    msh = console.msh
    results = await msh.off_loop(
        functools.partial(msh.resend, message_ids, reason=reason, requested_by=requested_by, force=force)
    )
    lines: list[tuple[Level, str]] = []
    for result in results:
        if result.outcome is ResendOutcome.RESENT:
            lines.append(
                ("ok", f"{result.message_id} resent as a new attempt series ({result.status}): {result.detail}")
            )
        else:
            lines.append(("refused", f"{result.message_id} not resent: {result.detail}"))
    return lines
