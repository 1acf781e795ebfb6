"""``msh messages``: the sent and received messages, newest first and paged; ``msh history MESSAGE_ID``: every
journal event of one message, in order. Both read the store through the MSH (:meth:`Msh.messages
<msh.runtime.queries.MessageQueries.messages>`, :meth:`Msh.history <msh.runtime.queries.MessageQueries.history>`);
no server needs to run.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from msh.cli.analytics import moment
from msh.cli.common import Subcommands, add_command, non_empty, positive_int, running_msh
from msh.errors import ConfigurationError

if TYPE_CHECKING:
    from msh.store.api import Event
    from msh.store.listing import MessageFilter, MessagePage, MessageRow

__all__ = ["add_history_command", "add_messages_command", "camel_keys", "event_json", "row_json"]

_WAYS = {"out": "outbound", "in": "inbound"}
_SHORT = {"outbound": "out", "inbound": "in"}


def _when(at: datetime | None) -> str | None:
    return None if at is None else at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def row_json(row: MessageRow) -> dict[str, object]:
    """A listed message as JSON (camelCase keys; times ISO 8601 in UTC)."""
    return {
        "messageId": row.message_id,
        "direction": _SHORT[row.direction.value],
        "status": row.status,
        "partner": row.partner,
        "cpaId": row.cpa_id,
        "service": row.service,
        "action": row.action,
        "conversationId": row.conversation_id,
        "createdAt": _when(row.created_at),
        "updatedAt": _when(row.updated_at),
        "attempts": row.attempts,
        "duplicates": row.duplicates,
        "lastError": row.last_error,
        "size": row.size,
        "kind": None if row.kind is None else row.kind.value,
        "entryId": row.entry_id,
    }


def _size(size: int | None) -> str:
    if size is None:
        return "-"
    for unit, scale in (("MB", 1 << 20), ("kB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _table(page: MessagePage) -> list[str]:
    """The rows as aligned columns, a message's last error on the line below it."""
    head = ("CREATED", "DIR", "STATUS", "PARTNER", "CPA", "SERVICE / ACTION", "TRIES", "SIZE", "MESSAGE ID")
    cells = []
    for r in page.rows:
        tries = "-" if r.attempts is None else str(r.attempts)
        if r.duplicates:
            tries = f"{r.duplicates} dup"
        kind = "" if r.kind is None or r.kind.value == "own" else f" ({r.kind.value})"
        cells.append(
            (
                _when(r.created_at) or "",
                _SHORT[r.direction.value],
                r.status + kind,
                r.partner or "-",
                r.cpa_id,
                f"{r.service} / {r.action}",
                tries,
                _size(r.size),
                r.message_id,
            )
        )
    widths = [max(len(c[i]) for c in [head, *cells]) for i in range(len(head))]
    lines = []
    for n, c in enumerate([head, *cells]):
        lines.append("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)).rstrip())
        error = page.rows[n - 1].last_error if n else None
        if error:
            lines.append(f"    last error: {error}")
    return lines


def _filter_of(args: argparse.Namespace) -> MessageFilter:
    from msh.store.api import Direction
    from msh.store.listing import STATUSES, MessageFilter

    if args.status is not None and args.status not in STATUSES:
        sent = ", ".join(s for s, d in STATUSES.items() if d is Direction.OUTBOUND)
        received = ", ".join(s for s, d in STATUSES.items() if d is Direction.INBOUND)
        raise ConfigurationError(
            f"--status {args.status}: no such status; a sent message is {sent}; a received one is {received}"
        )
    if args.since is not None and args.until is not None and args.since >= args.until:
        raise ConfigurationError(
            f"--since {_when(args.since)} is not before --until {_when(args.until)}: nothing can be in between"
        )
    return MessageFilter(
        direction=None if args.direction is None else Direction(_WAYS[args.direction]),
        status=args.status,
        partner=args.partner,
        cpa_id=args.cpa_id,
        service=args.service,
        action=args.action,
        since=args.since,
        until=args.until,
        limit=args.limit,
        cursor=args.cursor,
    )


def _messages(args: argparse.Namespace) -> int:
    """0: the listing (an empty one too)."""
    from msh.store.listing import decode_cursor

    query = _filter_of(args)
    if query.cursor is not None:
        try:
            decode_cursor(query.cursor)
        except ValueError as exc:
            raise ConfigurationError(f"--cursor: {exc}") from None
    with running_msh(args, keys=False) as msh:
        page = msh.messages(query)
    if args.json:
        print(json.dumps({"messages": [row_json(r) for r in page.rows], "nextCursor": page.next_cursor}, indent=2))
        return 0
    if page.rows:
        print("\n".join(_table(page)))
    print(f"{len(page.rows)} message(s), newest first")
    if page.next_cursor is not None:
        print(f"more: the same command with --cursor {page.next_cursor}")
    return 0


def add_messages_command(sub: Subcommands) -> None:
    """Add ``msh messages``."""
    messages = add_command(
        sub,
        "messages",
        _messages,
        help="list sent and received messages, newest first",
        description=(
            "List the messages of this MSH's store, newest first: those sent (out: the application's own, "
            "forwards and signals of this MSH) and those received (in), each with its status, partner (the To "
            "party of a sent message, the From party of a received one), agreement, service and action, "
            "transmissions (a received message: duplicates eliminated), size, MessageId, and the last error "
            "(why it failed, or why its last transmission failed; a received message: why the application "
            "rejected it). Statuses: a sent message is pending, awaiting-ack, forwarded, delivered, sent or "
            "failed; a received one is available, leased, acknowledged, rejected, held or abandoned (the same "
            "words as msh inbox and the REST interface). At most --limit a page; the last line says how to ask "
            "for the next one (--cursor). msh history MESSAGE_ID shows one message's journal."
        ),
        config=True,
    )
    messages.add_argument("--direction", choices=("out", "in"), help="only sent (out) or received (in) messages")
    messages.add_argument("--status", metavar="S", help="only messages in this status (see above)")
    messages.add_argument(
        "--partner",
        type=non_empty,
        metavar="P",
        help="only those with this partner, as listed (type:value) or its PartyId alone",
    )
    messages.add_argument("--cpa-id", type=non_empty, metavar="ID", help="only those under this agreement")
    messages.add_argument("--service", type=non_empty, metavar="S", help="only those of this service")
    messages.add_argument("--action", type=non_empty, metavar="A", help="only those of this action")
    messages.add_argument(
        "--since",
        type=moment,
        metavar="T",
        help="only those sent or received at or after T (ISO 8601: 2026-11-01 or 2026-11-01T12:00:00Z; UTC "
        "when no offset)",
    )
    messages.add_argument("--until", type=moment, metavar="T", help="only those sent or received before T")
    messages.add_argument(
        "--limit", type=positive_int, default=50, metavar="N", help="at most N messages a page (default 50)"
    )
    messages.add_argument("--cursor", metavar="C", help="the page after the one whose last line named C")
    messages.add_argument("--json", action="store_true", help="print the page as JSON (messages, nextCursor)")


# ------------------------------------------------------------------------------------------- history


# Journal detail keys written before the JSON convention, spelt as the rest of the JSON the project prints.
_SPELLINGS = {"cpaid": "cpaId", "messageid": "messageId"}


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return _SPELLINGS.get(key, head + "".join(word[:1].upper() + word[1:] for word in rest))


def camel_keys(value: object) -> object:
    """``value`` (a journal event's detail) with every key in camelCase, at any depth."""
    if isinstance(value, dict):
        return {_camel(str(k)): camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel_keys(v) for v in value]
    return value


def event_json(event: Event) -> dict[str, object]:
    """A journal event as JSON (camelCase keys, also those of its ``detail``)."""
    return {
        "id": event.id,
        "at": _when(event.at),
        "kind": event.kind,
        "direction": None if event.direction is None else _SHORT[event.direction.value],
        "role": event.role,
        "cpaId": event.cpa_id,
        "fromParty": event.from_party,
        "toParty": event.to_party,
        "service": event.service,
        "action": event.action,
        "conversationId": event.conversation_id,
        "size": event.size,
        "attempt": event.attempt,
        "severity": event.severity,
        "cause": event.cause,
        "deadline": _when(event.deadline),
        "detail": camel_keys(event.detail),
    }


def _facts(event: Event) -> str:
    """The typed facts of an event worth a glance: its attempt, severity and cause."""
    found = []
    if event.attempt is not None:
        found.append(f"attempt {event.attempt}")
    if event.severity is not None:
        found.append(event.severity)
    if event.cause is not None:
        found.append(f"cause: {event.cause}")
    return ", ".join(found)


def _value(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _history_text(message_id: str, events: list[Event]) -> list[str]:
    first = events[0]
    about = [f"{message_id}: {len(events)} event(s)"]
    if first.cpa_id is not None:
        about.append(f"under {first.cpa_id}")
    if first.from_party is not None or first.to_party is not None:
        about.append(f"from {first.from_party or '?'} to {first.to_party or '?'}")
    if first.service is not None:
        about.append(f"{first.service} / {first.action}")
    lines = [", ".join(about)]
    width = max(len(e.kind) for e in events)
    for e in events:
        way = "" if e.direction is None else _SHORT[e.direction.value]
        lines.append(f"  {_when(e.at)}  {way:<3} {e.kind.ljust(width)}  {_facts(e)}".rstrip())
        detail = camel_keys(e.detail)
        assert isinstance(detail, dict)
        lines += [f"      {key}: {_value(value)}" for key, value in detail.items()]
    return lines


def _history(args: argparse.Namespace) -> int:
    """0, or 1 for a MessageId with no journal event in this store."""
    with running_msh(args, keys=False) as msh:
        events = msh.history(args.message_id)
        url = msh.store.url
    if args.json:
        print(json.dumps({"messageId": args.message_id, "events": [event_json(e) for e in events]}, indent=2))
    elif events:
        print("\n".join(_history_text(args.message_id, events)))
    else:
        print(f"{args.message_id}: no journal event (never sent or received through this store, {url})")
    return 0 if events else 1


def add_history_command(sub: Subcommands) -> None:
    """Add ``msh history``."""
    history = add_command(
        sub,
        "history",
        _history,
        help="show every journal event of one message",
        description=(
            "Print every journal event of MESSAGE_ID in the order it happened: submitted, each transmission with "
            "its outcome and error, acknowledgments and signed receipts, ErrorLists received, forwards, "
            "duplicates, delivery to and settlement by the application (taken, rejected), DeliveryFailures; each "
            "with its time, direction (out: about a message sent, in: about one received), attempt, severity and "
            "cause, and the fields it carries. Exit status 1 when the store holds no event of MESSAGE_ID."
        ),
        config=True,
    )
    history.add_argument("message_id", metavar="MESSAGE_ID")
    history.add_argument("--json", action="store_true", help="print the events as JSON (camelCase keys)")
