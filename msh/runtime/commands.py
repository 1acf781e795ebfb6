"""The runtime's command-line commands: ``msh serve``, ``send``, ``status``, ``inbox`` and ``cpa list``.

Each takes ``--config FILE`` (or the file named by ``MSH_CONFIG``); every setting can be overridden by an
environment variable (see :mod:`msh.runtime.config`). ``send``, ``status`` and ``inbox`` work on the store
directly: they need no running server (a message sent while no server runs waits in the store and goes
out when ``msh serve`` starts).

Errors are raised (:class:`~msh.errors.ConfigurationError` with one line saying what is wrong and what to
do) and reported by :func:`msh.cli.main`, which owns the exit statuses; a command's own "no" (a failed
message, an unknown MessageId, a message not taken) is its return value 1. ``status`` reads each
transmission's outcome from the journal (:mod:`msh.runtime.attempts`); ``inbox --take`` is
:mod:`msh.runtime.take`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from msh.errors import ConfigurationError

if TYPE_CHECKING:
    from msh.runtime.attempts import Attempt
    from msh.runtime.compose import Payload
    from msh.runtime.config import Settings
    from msh.runtime.msh import Msh
    from msh.store.api import OutboundMessage

__all__ = ["add_commands", "fraction", "positive_int", "non_empty", "seconds"]


def _settings(args: argparse.Namespace) -> Settings:
    from msh.runtime.config import load_settings

    return load_settings(args.config)


def _msh(args: argparse.Namespace) -> Msh:
    from msh.runtime.msh import Msh

    return Msh(_settings(args))


# ------------------------------------------------------------------------------------ argument types


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give one of at least 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is too small; give a whole number of at least 1")
    return value


def non_empty(value: str) -> str:
    """An argparse type: a value that is not empty (nor only spaces)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def seconds(text: str) -> float:
    """An argparse type: a number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (e.g. 30 or 2.5)") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds of 0 or more (e.g. 30 or 2.5)")
    return value


def fraction(text: str) -> float:
    """An argparse type: a rate from 0 up to (not including) 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give a rate like 0.15") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a rate from 0 up to 1 (exclusive); give e.g. 0.15")
    return value


# ------------------------------------------------------------------------------------------- serve


@contextlib.contextmanager
def _signals_raise_interrupt() -> Iterator[None]:
    """Until ``serve`` takes the signals over: SIGTERM ends start-up like Ctrl-C (KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _sigterm_ignored() -> Iterator[None]:
    """While the last transaction commits: a repeated SIGTERM must not cut it short (a second Ctrl-C
    still can: the user insists)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _cmd_serve(args: argparse.Namespace) -> int:
    from msh.runtime.config import describe
    from msh.runtime.msh import Msh
    from msh.runtime.serving import bind, run

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with _signals_raise_interrupt():
        try:
            settings = _settings(args)
            if args.print_settings:
                print(describe(settings))
                return 0
            sock = bind(settings.server.host, settings.server.port)  # a busy port fails before the store opens
            try:
                msh = Msh(settings)
            except BaseException:
                sock.close()
                raise
        except KeyboardInterrupt:
            print("msh: stopped while starting (nothing was served)", flush=True)
            return 0
    scheme = "https" if settings.server.tls else "http"
    agreements = ", ".join(c.cpaid for c in msh.registry)

    def ready(port: int) -> None:
        print(
            f"msh: party {settings.identity.party_id} listening on {scheme}://{settings.server.host}:{port}"
            f"{settings.server.path} (store {msh.store.url}; agreements {agreements})",
            flush=True,
        )

    try:
        # SIGINT and SIGTERM stop the server in order (msh.runtime.serving.serve); the process then ends here.
        run(settings, msh, sock=sock, ready=ready)
    finally:
        with _sigterm_ignored():
            msh.close()
            counts = ", ".join(f"{k} {v}" for k, v in sorted(msh.counters.items()))
            print(f"msh: stopped ({counts or 'no traffic'})", flush=True)
    return 0


# -------------------------------------------------------------------------------------------- send


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


def _cmd_send(args: argparse.Namespace) -> int:
    from msh.runtime.compose import Submission

    msh = _msh(args)
    try:
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
    finally:
        msh.close()


def _wait(msh: Msh, message_id: str, wait: float) -> int:
    """``send --wait``: 0 delivered, 1 failed, 3 not final in time (with what is known of why)."""
    deadline = time.monotonic() + wait
    try:
        while True:
            stored = msh.status(message_id)
            if stored is not None and stored.state.status.value in ("delivered", "failed"):
                print(_status_line(stored))
                return 0 if stored.state.status.value == "delivered" else 1
            if time.monotonic() >= deadline:
                break
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    except KeyboardInterrupt:
        print(
            f"{message_id}: no longer waiting (interrupted); it stays queued: msh status {message_id}", file=sys.stderr
        )
        return 130
    print(f"{message_id}: {_not_final(msh, message_id, wait)}", file=sys.stderr)
    return 3


def _not_final(msh: Msh, message_id: str, wait: float) -> str:
    """Why a message is not final after ``wait`` seconds, from its recorded attempts."""
    attempts = [a for a in msh.attempts(message_id) if a.finished]
    stored = msh.status(message_id)
    nxt = ""
    if stored is not None and stored.state.next_due_at is not None:
        nxt = f", next attempt at {_when(stored.state.next_due_at)}"
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


# ------------------------------------------------------------------------------------------ status


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _next(stored: OutboundMessage) -> tuple[str, datetime] | None:
    """What the sending machine does next and when: ('resend' | 'give-up', time), or None when final."""
    s = stored.state
    if s.status.value in ("delivered", "failed") or s.next_due_at is None:
        return None
    # ebMS2 §6.5.4: a resend while fewer than Retries resends were made, else giving up when the timer fires.
    return ("resend" if s.attempts < stored.parameters.retries + 1 else "give-up", s.next_due_at)


def _attempt_line(a: Attempt) -> str:
    if not a.finished and a.url is None and not a.errors:
        return f"transmission {a.number}: started {_when(a.at) if a.at else ''}, no outcome yet".rstrip()
    head = f"transmission {a.number}" + (f" at {_when(a.at)}" if a.at else "")
    if a.error is not None:
        body = f"failed: {a.error}"
    elif a.http_status is not None:
        body = f"HTTP {a.http_status}" + (f" ({a.answer})" if a.answer else "")
    else:
        body = "no outcome yet"
    for error in a.errors:
        body += f"; {error}"
    return f"{head}: {body}"


def _status_line(stored: OutboundMessage) -> str:
    s = stored.state
    line = (
        f"{stored.message_id}: {s.status.value}, {s.attempts} transmission(s), to {stored.to_party} ({stored.action})"
    )
    if s.failure_code:
        line += f"; {s.failure_severity} {s.failure_code}: {s.failure_description}"
    return line


def _status_text(stored: OutboundMessage, attempts: list[Attempt]) -> str:
    lines = [_status_line(stored)]
    lines += [f"  {_attempt_line(a)}" for a in attempts]
    nxt = _next(stored)
    if nxt is not None:
        what, when = nxt
        if what == "resend":
            lines.append(f"  next attempt at {_when(when)}")
        else:
            lines.append(f"  no resend left: gives up at {_when(when)} unless acknowledged")
    return "\n".join(lines)


def _status_json(stored: OutboundMessage, attempts: list[Attempt]) -> dict[str, object]:
    s = stored.state
    nxt = _next(stored)
    return {
        "messageId": stored.message_id,
        "status": s.status.value,
        "attempts": s.attempts,
        "cpaid": stored.cpaid,
        "to": stored.to_party,
        "service": stored.service,
        "action": stored.action,
        "firstSentAt": s.first_sent_at.isoformat() if s.first_sent_at else None,
        "nextAttemptAt": nxt[1].isoformat() if nxt is not None and nxt[0] == "resend" else None,
        "givesUpAt": nxt[1].isoformat() if nxt is not None and nxt[0] == "give-up" else None,
        "transmissions": [
            {
                "attempt": a.number,
                "at": a.at.isoformat() if a.at else None,
                "url": a.url,
                "finished": a.finished,
                "httpStatus": a.http_status,
                "error": a.error,
                "answer": a.answer,
                "errors": [
                    {
                        "errorCode": e.error_code,
                        "severity": e.severity,
                        "location": e.location,
                        "description": e.description,
                    }
                    for e in a.errors
                ],
            }
            for a in attempts
        ],
        "failure": None
        if s.failure_code is None
        else {"errorCode": s.failure_code, "severity": str(s.failure_severity), "description": s.failure_description},
    }


def _cmd_status(args: argparse.Namespace) -> int:
    msh = _msh(args)
    try:
        unknown = 0
        out = []
        for message_id in args.message_ids:
            stored = msh.status(message_id)
            if stored is None:
                unknown += 1
                if not args.json:
                    print(f"{message_id}: unknown (never submitted to this store, {msh.store.url})")
                continue
            attempts = msh.attempts(message_id)
            out.append(_status_json(stored, attempts))
            if not args.json:
                print(_status_text(stored, attempts))
        if args.json:
            print(json.dumps(out, indent=2))
        return 1 if unknown else 0
    finally:
        msh.close()


# ------------------------------------------------------------------------------------------- inbox


def _cmd_inbox(args: argparse.Namespace) -> int:
    from msh.store.api import InboxState

    if args.take is not None:
        from msh.runtime.take import prepare_folder

        prepare_folder(Path(args.take))  # before opening the store: a bad folder is a usage error
    msh = _msh(args)
    try:
        if args.take is not None:
            return _take(msh, Path(args.take), as_json=args.json)
        if args.all:
            entries = msh.inbox(None, limit=args.limit)
        else:  # waiting for the application: new, or fetched but not acknowledged
            waiting = msh.inbox(InboxState.NEW, limit=args.limit) + msh.inbox(
                InboxState.DELIVERED_TO_APP, limit=args.limit
            )
            entries = sorted(waiting, key=lambda e: (e.received_at, e.id))[: args.limit]
        if args.json:
            print(
                json.dumps(
                    [
                        {
                            "id": e.id,
                            "messageId": e.message_id,
                            "state": e.state.value,
                            "receivedAt": e.received_at.isoformat(),
                        }
                        for e in entries
                    ],
                    indent=2,
                )
            )
        else:
            for e in entries:
                print(f"{e.id:>6}  {e.state.value:<20} {e.received_at.isoformat()}  {e.message_id}")
            print(f"{len(entries)} message(s)")
        return 0
    finally:
        msh.close()


def _take(msh: Msh, folder: Path, *, as_json: bool) -> int:
    """``inbox --take``: 0 when every waiting message was taken, 1 when one was refused (its folder exists)."""
    from msh.runtime.take import Outcome, Taken, take_inbox

    def report(t: Taken) -> None:
        if as_json:
            return
        if t.outcome is Outcome.TAKEN:
            print(f"{t.message_id} -> {t.folder}", flush=True)
        elif t.outcome is Outcome.ALREADY_THERE:
            print(f"{t.message_id} -> {t.folder} (was already there, complete: acknowledged now)", flush=True)
        else:
            print(
                f"msh inbox: {t.message_id} not taken, not acknowledged: {t.reason}; it holds something else. "
                f"Move that folder away and take again",
                file=sys.stderr,
                flush=True,
            )

    results = take_inbox(msh, folder, report)
    refused = sum(1 for t in results if t.outcome is Outcome.REFUSED)
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "entry": t.entry_id,
                        "messageId": t.message_id,
                        "folder": str(t.folder),
                        "outcome": t.outcome.value,
                        "reason": t.reason,
                    }
                    for t in results
                ],
                indent=2,
            )
        )
    else:
        print(f"{len(results) - refused} message(s) taken into {folder}" + (f", {refused} refused" if refused else ""))
    return 1 if refused else 0


# --------------------------------------------------------------------------------------- cpa list


def _cmd_cpa_list(args: argparse.Namespace) -> int:
    from cpa.resolve import in_force

    msh = _msh(args)
    try:
        now = datetime.now(UTC)
        for cpa in msh.registry:
            other = [p for p in cpa.party_infos if not any(pid.value == msh.party[0] for pid in p.party_ids)]
            partner = other[0].party_name if other else "?"
            state = "in force" if in_force(cpa, now) else "NOT in force"
            print(
                f"{cpa.cpaid}  {cpa.status.value:<8} {state:<12} with {partner}  "
                f"{cpa.start.date().isoformat()}..{cpa.end.date().isoformat()}  ({cpa.source})"
            )
        return 0
    finally:
        msh.close()


def add_commands(sub: argparse._SubParsersAction, cpa_sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the runtime's commands on the ``msh`` parser (``cpa_sub``: the ``msh cpa`` subcommands)."""

    def config(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--config",
            metavar="FILE",
            default=None,
            help="the MSH's TOML settings file (default: $MSH_CONFIG); MSH_<SECTION>_<KEY> variables override it",
        )

    serve = sub.add_parser(
        "serve",
        help="run the MSH: the inbound endpoint, sending and retries",
        description=(
            "Run the MSH described by the settings file: load the agreements, open the store, listen for "
            "ebXML messages on server.host:server.port (HTTPS with mutual TLS unless server.tls is false), "
            "send submitted messages and resend them until acknowledged or given up. Each failed transmission "
            "is logged at warning level with its reason (and kept for msh status). Ctrl-C or SIGTERM stops it "
            "in order: no new connections, requests and transmissions in flight end, what is queued is "
            "committed, the line 'msh: stopped (...)' is printed and the exit status is 0. A hard kill "
            "(SIGKILL) loses nothing that was committed. Exit status 2 when it cannot start (the line says why)."
        ),
    )
    config(serve)
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument("--print-settings", action="store_true", help="print the effective settings and exit")
    serve.set_defaults(func=_cmd_serve)

    send = sub.add_parser(
        "send",
        help="submit a message for reliable sending",
        description=(
            "Submit a business message: it is committed to the store and sent by the running MSH (msh serve on "
            "the same store) under the agreement that lets this party send SERVICE/ACTION to the partner. "
            "Prints the MessageId. With --wait, waits for the outcome: exit 0 delivered, 1 failed (the "
            "DeliveryFailure is printed), 3 not final in time (the line says why: the partner not reachable, "
            "with the last error, or nothing transmitted because no msh serve runs on this store). Exit status "
            "2 when the message cannot be submitted (the line says why and what this party can send)."
        ),
    )
    config(send)
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
    send.set_defaults(func=_cmd_send)

    status = sub.add_parser(
        "status",
        help="show the delivery status of sent messages",
        description=(
            "Print the status of each MESSAGE_ID sent from this store: delivered, awaiting-ack, pending or failed "
            "(with the DeliveryFailure), each transmission with its outcome (the HTTP status and what the answer "
            "carried, or why it failed: connection refused, TLS failure, timeout; and any ErrorList the partner "
            "sent back), and when the next attempt is due. Exit status 1 if one MESSAGE_ID is unknown."
        ),
    )
    config(status)
    status.add_argument("message_ids", nargs="+", metavar="MESSAGE_ID")
    status.add_argument("--json", action="store_true", help="print the same as JSON")
    status.set_defaults(func=_cmd_status)

    inbox = sub.add_parser(
        "inbox",
        help="list or take received messages",
        description=(
            "List the messages waiting for the application: new ones, and those an application fetched but did "
            "not acknowledge (--all: every one). With --take DIR, "
            "write each waiting message into its own folder DIR/<MessageId made safe>/ (its payloads and "
            "message.json: MessageId, From, To, CPAId, Service, Action, ConversationId, RefToMessageId and each "
            "payload's file, Content-ID, content type, size and SHA-256), written atomically, and acknowledge it "
            "once the folder is on disk, so it is offered once. A folder that already exists is never "
            "overwritten: that message is not taken and not acknowledged (exit status 1; it stays in the inbox) "
            "unless the folder holds this very message complete (an earlier take stopped before acknowledging: "
            "acknowledged now)."
        ),
    )
    config(inbox)
    inbox.add_argument("--all", action="store_true", help="list delivered and acknowledged messages too")
    inbox.add_argument(
        "--limit", type=positive_int, default=100, metavar="N", help="list at most N messages (default 100)"
    )
    inbox.add_argument(
        "--take", metavar="DIR", default=None, help="write every waiting message into DIR and acknowledge it"
    )
    inbox.add_argument("--json", action="store_true", help="print the list (or what --take did) as JSON")
    inbox.set_defaults(func=_cmd_inbox)

    cpa_list = cpa_sub.add_parser(
        "list",
        help="list the agreements the MSH is configured with",
        description="List the agreements named by agreements.paths that this party is in: status, window, partner.",
    )
    config(cpa_list)
    cpa_list.set_defaults(func=_cmd_cpa_list)
