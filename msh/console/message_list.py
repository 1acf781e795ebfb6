"""``/messages``: sent and received messages, newest first, filtered by direction, status, partner,
agreement, service, action and time, a page at a time (the MSH's own listing, :meth:`Msh.messages`).

The listing's cursor only goes forward; the page keeps the cursors of the pages before it in its address
(``trail``), so "Newer" goes back one page and a page's address can be bookmarked and shared."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final
from urllib.parse import urlencode

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response

from msh.console.partners import known_partners, resolve_partner
from msh.console.web import Console
from msh.store.api import Direction
from msh.store.listing import STATUSES, MessageFilter, MessagePage

__all__ = ["Filters", "messages_page", "parse_filters"]

PAGE: Final = 50
_MAX_TRAIL: Final = 50
_TEXT: Final = ("partner", "cpa_id", "service", "action")
_FIRST: Final = "-"
"""In the trail: the first page (no cursor)."""


@dataclass(frozen=True, slots=True)
class Filters:
    """The filters of the page as given (text, to fill the form again), what was wrong with them, and the query."""

    given: dict[str, str]
    problems: tuple[str, ...]
    query: MessageFilter


def _time(name: str, text: str, problems: list[str]) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        problems.append(f"{name}: {text!r} is not a time; write e.g. 2026-12-01T09:00 (UTC)")
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse_filters(params: QueryParams, cursor: str | None, partners: dict[str, str] | None = None) -> Filters:
    """The listing's filter from the page's query parameters; a bad value is left out and reported. A partner
    given by its bare PartyId value is looked for as the agreements' ``partners`` name it (with its type)."""
    given = {k: params.get(k, "").strip()[:500] for k in ("direction", "status", *_TEXT, "since", "until")}
    problems: list[str] = []
    direction = None
    if given["direction"] in ("out", "in"):
        direction = Direction.OUTBOUND if given["direction"] == "out" else Direction.INBOUND
    elif given["direction"]:
        problems.append(f"direction: {given['direction']!r} is neither out nor in")
    status = given["status"] or None
    if status is not None and status not in STATUSES:
        problems.append(f"status: {status!r} is not one of {', '.join(STATUSES)}")
        status = None
    elif status is not None and direction is not None and STATUSES[status] is not direction:
        problems.append(f"status: {status!r} is a state of {STATUSES[status].value} messages only")
        status = None
    text = {k: (given[k] or None) for k in _TEXT}
    if text["partner"] is not None:
        text["partner"] = resolve_partner(text["partner"], partners or {})
    query = MessageFilter(
        direction=direction,
        status=status,
        since=_time("since", given["since"], problems),
        until=_time("until", given["until"], problems),
        limit=PAGE,
        cursor=cursor,
        **text,
    )
    return Filters(given, tuple(problems), query)


def _link(base: str, given: dict[str, str], cursor: str | None, trail: list[str]) -> str:
    params = {k: v for k, v in given.items() if v}
    if cursor:
        params["cursor"] = cursor
    if trail:
        params["trail"] = ",".join(trail)
    return f"{base}/messages" + ("?" + urlencode(params) if params else "")


async def messages_page(request: Request) -> Response:
    console: Console = request.app.state.console
    cursor = request.query_params.get("cursor") or None
    trail = [c for c in request.query_params.get("trail", "").split(",") if c][-_MAX_TRAIL:]
    partners = known_partners(console.msh.registry)
    filters = parse_filters(request.query_params, cursor, partners)
    problems = list(filters.problems)
    try:
        page: MessagePage = await console.msh.off_loop(console.msh.messages, filters.query)
    except ValueError as exc:
        problems.append(str(exc))
        page = await console.msh.off_loop(console.msh.messages, MessageFilter(limit=PAGE))
        cursor, trail = None, []
    base = console.base(request)
    older = _link(base, filters.given, page.next_cursor, [*trail, cursor or _FIRST]) if page.next_cursor else None
    newer = None
    if cursor is not None:
        previous = trail[-1] if trail else _FIRST
        newer = _link(base, filters.given, None if previous == _FIRST else previous, trail[:-1])
    return console.render(
        request,
        "messages.html",
        title="Messages",
        rows=page.rows,
        given=filters.given,
        problems=problems,
        statuses=list(STATUSES),
        partners=partners,
        older=older,
        newer=newer,
        page_number=len(trail) + (1 if cursor else 0) + 1,
        now=console.now(),
    )
