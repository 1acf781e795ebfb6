"""``msh send``: submit a business message for reliable sending, and with ``--wait`` wait for its outcome.

The message is committed to the store and sent by ``msh serve`` running on the same store (it waits there
while no server runs). A message that cannot be submitted is refused with what this party can send.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from msh.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_NOT_FINAL,
    Subcommands,
    add_command,
    non_empty,
    running_msh,
    seconds,
)
from msh.cli.status import is_final, status_line, when
from msh.errors import ConfigurationError

if TYPE_CHECKING:
    from msh.runtime.compose import Payload
    from msh.runtime.msh import Msh

__all__ = ["add_send_command"]


def _party_label(value: str, type_: str | None) -> str:
    return f"{value} (type {type_})" if type_ else value


def _partners(msh: Msh) -> dict[tuple[str, str | None], list[str]]:
    """The partners of the loaded agreements: (PartyId value, type) -> the CPAIds naming them."""
    from cpa.resolve import party_keys

    out: dict[tuple[str, str | None], list[str]] = {}
    for cpa in msh.registry:
        for info in cpa.party_infos:
            keys = party_keys(info)
            if msh.party in keys:
                continue
            for key in keys:
                out.setdefault(key, []).append(cpa.cpaid)
    return out


def _to_party(msh: Msh, value: str, type_: str | None) -> tuple[str, str | None]:
    """The (value, type) of the party named ``value``: its type from the agreements when not given."""
    partners = _partners(msh)
    if type_ is not None and (value, type_) in partners:
        return (value, type_)
    types = sorted({t or "" for (v, t) in partners if v == value})
    known = "; ".join(f"{_party_label(v, t)} in {', '.join(c)}" for (v, t), c in sorted(partners.items(), key=str))
    if type_ is not None:
        raise ConfigurationError(
            f"--to {value} --to-type {type_}: no partner of the loaded agreements has that PartyId and type; "
            f"they know: {known or 'no partner'}"
        )
    if len(types) == 1:
        return (value, types[0] or None)
    if not types:
        raise ConfigurationError(
            f"--to {value}: no partner of the loaded agreements has that PartyId; the partners are: "
            f"{known or 'none'} (agreements.paths names the agreements)"
        )
    raise ConfigurationError(
        f"--to {value}: the agreements know it with several types ({', '.join(types)}); add --to-type"
    )


def _sendable(msh: Msh, to_party: tuple[str, str | None], now: datetime) -> list[str]:
    """What this party may send to ``to_party``: one 'CPAId: service/action' line per route."""
    from cpa.resolve import in_force, party_keys, routes

    lines = []
    for cpa in msh.registry:
        state = (
            "" if in_force(cpa, now) else f" (NOT in force: {cpa.status.value}, {cpa.start.date()}..{cpa.end.date()})"
        )
        for route in routes(cpa):
            if msh.party in party_keys(route.from_party) and to_party in party_keys(route.to_party):
                lines.append(f"{cpa.cpaid}{state}: --service {route.service} --action {route.action}")
    return list(dict.fromkeys(lines))


def _ttl(text: str, now: datetime) -> datetime:
    """``--ttl``: an xsd:dateTime with its time zone, or an xs:duration from now."""
    from cpa.duration import XsDuration

    value = text.strip()
    how = "give a date and time with its zone, like 2026-12-01T12:00:00Z, or a duration from now, like PT1H or P2D"
    if value.upper().startswith(("P", "-P")):
        try:
            duration = XsDuration.parse(value)
            # XML Schema Part 2 Appendix E: a duration counting months is added to the instant it starts from.
            moment = duration.add_to(now)
        except (ValueError, OverflowError) as exc:
            raise ConfigurationError(f"--ttl {text}: not a usable duration ({exc}); {how}") from None
        if moment <= now:
            raise ConfigurationError(f"--ttl {text}: the duration must be positive; {how}")
        return moment
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigurationError(f"--ttl {text}: not a date and time; {how}") from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ConfigurationError(f"--ttl {text}: the time zone is missing (Z for UTC, or +01:00); {how}")
    moment = moment.astimezone(UTC)
    if moment <= now:
        raise ConfigurationError(f"--ttl {text}: that time has passed (now is {now:%Y-%m-%dT%H:%M:%SZ}); {how}")
    return moment


def _payload(spec: str) -> Payload:
    from msh.runtime.compose import Payload

    path, _, media = spec.partition("=")
    file = Path(path)
    if not file.is_file():
        what = "does not exist" if not file.exists() else "is not a file"
        raise ConfigurationError(f"--payload {spec}: {file} {what}; give the path of the file to send")
    if not os.access(file, os.R_OK):
        raise ConfigurationError(f"--payload {spec}: {file} cannot be read by this user")
    if not media:
        media = "application/xml" if file.suffix.lower() == ".xml" else "application/octet-stream"
    elif "/" not in media:
        raise ConfigurationError(f"--payload {spec}: {media!r} is not a MIME type; write FILE=type/subtype")
    return Payload(file, media)


def _send(args: argparse.Namespace) -> int:
    from msh.runtime.compose import Submission

    with running_msh(args) as msh:
        now = datetime.now(UTC)
        ttl = _ttl(args.ttl, now) if args.ttl is not None else None
        to_party = _to_party(msh, args.to, args.to_type)
        payloads = tuple(_payload(p) for p in args.payload)
        if args.cpa_id is not None and msh.registry.get(args.cpa_id) is None:
            loaded = ", ".join(c.cpaid for c in msh.registry)
            raise ConfigurationError(
                f"--cpa-id {args.cpa_id}: no such agreement is loaded; the agreements are: {loaded}"
            )
        try:
            submission = Submission(
                to_party=to_party,
                service=args.service,
                action=args.action,
                payloads=payloads,
                cpa_id=args.cpa_id,
                conversation_id=args.conversation_id,
                time_to_live=ttl,
            )
        except ValueError as exc:  # the arguments are checked above; this names what slipped through
            raise ConfigurationError(f"the message cannot be composed: {exc}") from None
        try:
            message_id = msh.submit(submission)
        except ConfigurationError as exc:
            options = _sendable(msh, to_party, now)
            allowed = (
                "; what this party can send to it: " + "; ".join(options)
                if options
                else "; no loaded agreement lets this party send anything to it"
            )
            raise ConfigurationError(f"{exc}{allowed}") from exc
        print(message_id, flush=True)
        if args.wait <= 0:
            return 0
        return _wait(msh, message_id, args.wait)


def _wait(msh: Msh, message_id: str, wait: float) -> int:
    """``send --wait``: 0 delivered or sent (no acknowledgment by design), 1 failed, 3 not final in time (with
    what is known of why)."""
    from msh.engine import OutboundStatus

    deadline = time.monotonic() + wait
    try:
        while True:
            stored = msh.status(message_id)
            if stored is not None and is_final(stored):
                print(status_line(stored))
                return 1 if stored.state.status is OutboundStatus.FAILED else 0
            if time.monotonic() >= deadline:
                break
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    except KeyboardInterrupt:
        print(
            f"{message_id}: no longer waiting (interrupted); it stays queued: msh status {message_id}", file=sys.stderr
        )
        return EXIT_INTERRUPTED
    print(f"{message_id}: {_not_final(msh, message_id, wait)}", file=sys.stderr)
    return EXIT_NOT_FINAL


def _not_final(msh: Msh, message_id: str, wait: float) -> str:
    """Why a message is not final after ``wait`` seconds, from its recorded attempts."""
    attempts = [a for a in msh.attempts(message_id) if a.finished]
    stored = msh.status(message_id)
    nxt = ""
    if stored is not None and stored.state.next_due_at is not None:
        nxt = f", next attempt at {when(stored.state.next_due_at)}"
    if not attempts:
        return (
            f"not transmitted within {wait:g} s: is msh serve running on this store ({msh.store.url})? "
            f"The message waits there and goes out when it runs"
        )
    last = attempts[-1]
    if last.failed:
        return (
            f"partner not reachable ({last.reason()}); still queued after {len(attempts)} transmission(s){nxt}: "
            f"msh status {message_id}"
        )
    return (
        f"transmitted {len(attempts)} time(s), not acknowledged within {wait:g} s; still being resent{nxt}: "
        f"msh status {message_id}"
    )


def add_send_command(sub: Subcommands) -> None:
    """Add ``msh send``."""
    send = add_command(
        sub,
        "send",
        _send,
        help="submit a message for reliable sending",
        description=(
            "Submit a business message: it is committed to the store and sent by the running MSH (msh serve on "
            "the same store) under the agreement that lets this party send SERVICE/ACTION to the partner. "
            "Prints the MessageId. With --wait, waits for the outcome: exit 0 delivered (or sent, for an agreement "
            "that asks for no acknowledgment), 1 failed (the DeliveryFailure is printed: Error, not delivered; "
            "Warning, it may have been delivered), 3 not final in time (the line says why: the partner not reachable, "
            "with the last error, or nothing transmitted because no msh serve runs on this store). Exit status "
            "2 when the message cannot be submitted (the line says why and what this party can send)."
        ),
        config=True,
    )
    send.add_argument("--to", required=True, type=non_empty, metavar="PARTYID", help="the partner's PartyId value")
    send.add_argument(
        "--to-type", default=None, type=non_empty, metavar="TYPE", help="its PartyId type (default: from the agreement)"
    )
    send.add_argument("--service", required=True, type=non_empty, help="the Service, as the agreement names it")
    send.add_argument("--action", required=True, type=non_empty, help="the Action, as the agreement names it")
    send.add_argument(
        "--payload", action="append", default=[], metavar="FILE[=MIME]", help="a payload file, repeatable"
    )
    send.add_argument(
        "--cpa-id", default=None, type=non_empty, help="the agreement to send under (default: the only one that fits)"
    )
    send.add_argument("--conversation-id", default=None, type=non_empty, help="the ConversationId (default: a new one)")
    send.add_argument(
        "--ttl",
        default=None,
        metavar="TIME",
        help="TimeToLive: a date and time with its zone (2026-12-01T12:00:00Z) or a duration from now (PT1H, P2D)",
    )
    send.add_argument(
        "--wait", type=seconds, default=0, metavar="SECONDS", help="wait this long for the outcome (default: not)"
    )
