"""The runtime's command-line commands: ``msh serve``, ``send``, ``status``, ``inbox`` and ``cpa list``.

Each takes ``--config FILE`` (or the file named by ``MSH_CONFIG``); every setting can be overridden by an
environment variable (see :mod:`msh.runtime.config`). ``send``, ``status`` and ``inbox`` work on the store
directly: they need no running server (a message sent while no server runs waits in the store and goes
out when ``msh serve`` starts).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from msh.errors import ConfigurationError, MshError

if TYPE_CHECKING:
    from msh.runtime.compose import Payload
    from msh.runtime.config import Settings
    from msh.runtime.msh import Msh
    from msh.store.api import OutboundMessage

__all__ = ["add_commands"]


def _settings(args: argparse.Namespace) -> Settings:
    from msh.runtime.config import load_settings

    return load_settings(args.config)


def _msh(args: argparse.Namespace) -> Msh:
    from msh.runtime.msh import Msh

    return Msh(_settings(args))


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _guarded(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            result: int = func(args)
            return result
        except (ConfigurationError, MshError) as exc:
            return _fail(str(exc))

    run.__doc__ = func.__doc__
    return run


@_guarded
def _cmd_serve(args: argparse.Namespace) -> int:
    from msh.runtime.config import describe
    from msh.runtime.msh import Msh
    from msh.runtime.server import run

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = _settings(args)
    if args.print_settings:
        print(describe(settings))
        return 0
    msh = Msh(settings)
    scheme = "https" if settings.server.tls else "http"
    agreements = ", ".join(c.cpaid for c in msh.registry)

    def ready(port: int) -> None:
        print(
            f"msh: party {settings.identity.party_id} listening on {scheme}://{settings.server.host}:{port}"
            f"{settings.server.path} (store {msh.store.url}; agreements {agreements})",
            flush=True,
        )

    try:
        run(settings, msh, ready=ready)
    finally:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(msh.counters.items()))
        print(f"msh: stopped ({counts or 'no traffic'})", flush=True)
        msh.close()
    return 0


def _to_party(msh: Msh, value: str, type_: str | None) -> tuple[str, str | None]:
    """The (value, type) of the party named ``value``: its type from the agreements when not given."""
    if type_ is not None:
        return (value, type_)
    types = {
        pid.type for cpa in msh.registry for info in cpa.party_infos for pid in info.party_ids if pid.value == value
    }
    if len(types) == 1:
        return (value, types.pop())
    if not types:
        raise ConfigurationError(f"--to {value}: no party of the loaded agreements has that PartyId")
    raise ConfigurationError(f"--to {value}: the agreements know it with several types ({types}); add --to-type")


def _payload(spec: str) -> Payload:
    from msh.runtime.compose import Payload

    path, _, media = spec.partition("=")
    file = Path(path)
    if not file.is_file():
        raise ConfigurationError(f"--payload {spec}: {file} is not a readable file")
    if not media:
        media = "application/xml" if file.suffix.lower() == ".xml" else "application/octet-stream"
    return Payload(file, media)


@_guarded
def _cmd_send(args: argparse.Namespace) -> int:
    from msh.ebms.envelope import parse_datetime
    from msh.runtime.compose import Submission

    msh = _msh(args)
    try:
        ttl = None
        if args.ttl is not None:
            ttl = parse_datetime(args.ttl, "--ttl")
        submission = Submission(
            to_party=_to_party(msh, args.to, args.to_type),
            service=args.service,
            action=args.action,
            payloads=tuple(_payload(p) for p in args.payload),
            cpa_id=args.cpa_id,
            conversation_id=args.conversation_id,
            time_to_live=ttl,
        )
        message_id = msh.submit(submission)
        print(message_id, flush=True)
        if args.wait <= 0:
            return 0
        deadline = time.monotonic() + args.wait
        while time.monotonic() < deadline:
            stored = msh.status(message_id)
            if stored is not None and stored.state.status.value in ("delivered", "failed"):
                print(_status_line(stored))
                return 0 if stored.state.status.value == "delivered" else 1
            time.sleep(0.2)
        print(f"{message_id}: not final after {args.wait:g} s (is msh serve running on this store?)", file=sys.stderr)
        return 3
    except ValueError as exc:
        return _fail(str(exc))
    finally:
        msh.close()


def _status_line(stored: OutboundMessage) -> str:
    s = stored.state
    line = (
        f"{stored.message_id}: {s.status.value}, {s.attempts} transmission(s), to {stored.to_party} ({stored.action})"
    )
    if s.failure_code:
        line += f"; {s.failure_severity} {s.failure_code}: {s.failure_description}"
    return line


def _status_json(stored: OutboundMessage) -> dict[str, object]:
    s = stored.state
    return {
        "messageId": stored.message_id,
        "status": s.status.value,
        "attempts": s.attempts,
        "cpaid": stored.cpaid,
        "to": stored.to_party,
        "service": stored.service,
        "action": stored.action,
        "firstSentAt": s.first_sent_at.isoformat() if s.first_sent_at else None,
        "failure": None
        if s.failure_code is None
        else {"errorCode": s.failure_code, "severity": str(s.failure_severity), "description": s.failure_description},
    }


@_guarded
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
                    print(f"{message_id}: unknown (never submitted to this store)")
                continue
            out.append(_status_json(stored))
            if not args.json:
                print(_status_line(stored))
        if args.json:
            print(json.dumps(out, indent=2))
        return 1 if unknown else 0
    finally:
        msh.close()


@_guarded
def _cmd_inbox(args: argparse.Namespace) -> int:
    from msh.store.api import InboxState

    msh = _msh(args)
    try:
        if args.take is not None:
            return _take(msh, Path(args.take))
        entries = msh.inbox(None if args.all else InboxState.NEW, limit=args.limit)
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


def _take(msh: Msh, folder: Path) -> int:
    """Save every new message's payloads under ``folder/<entry id>/`` and acknowledge it (after fsync)."""
    from msh.store.api import InboxState

    folder.mkdir(parents=True, exist_ok=True)
    taken = 0
    while True:
        entries = msh.inbox(InboxState.NEW, limit=100)
        if not entries:
            break
        for entry in entries:
            received = msh.fetch(entry.id)
            try:
                target = folder / str(entry.id)
                target.mkdir(exist_ok=True)
                (target / "message-id").write_text(entry.message_id + "\n")
                for i, part in enumerate(received.message.payloads, start=1):
                    name = f"payload-{i}"
                    with open(target / name, "wb") as out:
                        part.body.copy_to(out)
                        out.flush()
                        os.fsync(out.fileno())
            finally:
                received.close()
            msh.ack(entry.id)
            taken += 1
            print(f"{entry.id}: {entry.message_id} -> {target}")
    print(f"{taken} message(s) taken into {folder}")
    return 0


@_guarded
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
            "send submitted messages and resend them until acknowledged or given up. Stops cleanly on "
            "Ctrl-C or SIGTERM; a hard kill loses nothing that was committed."
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
            "Prints the MessageId. With --wait, waits for the outcome: exit 0 delivered, 1 failed, 3 not final."
        ),
    )
    config(send)
    send.add_argument("--to", required=True, metavar="PARTYID", help="the partner's PartyId value")
    send.add_argument("--to-type", default=None, metavar="TYPE", help="its PartyId type (default: from the agreement)")
    send.add_argument("--service", required=True)
    send.add_argument("--action", required=True)
    send.add_argument(
        "--payload", action="append", default=[], metavar="FILE[=MIME]", help="a payload file, repeatable"
    )
    send.add_argument("--cpa-id", default=None, help="the agreement to send under (default: the only one that fits)")
    send.add_argument("--conversation-id", default=None)
    send.add_argument("--ttl", default=None, metavar="DATETIME", help="TimeToLive, e.g. 2026-12-01T12:00:00Z")
    send.add_argument("--wait", type=float, default=0, metavar="SECONDS", help="wait this long for the outcome")
    send.set_defaults(func=_cmd_send)

    status = sub.add_parser(
        "status",
        help="show the delivery status of sent messages",
        description="Print the status of each MESSAGE_ID sent from this store (exit 1 if one is unknown).",
    )
    config(status)
    status.add_argument("message_ids", nargs="+", metavar="MESSAGE_ID")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=_cmd_status)

    inbox = sub.add_parser(
        "inbox",
        help="list or take received messages",
        description=(
            "List the messages received for the application (new ones; --all for every one). With --take "
            "DIR, save each new message's payloads under DIR/<entry id>/ and acknowledge it, so it is "
            "offered once."
        ),
    )
    config(inbox)
    inbox.add_argument("--all", action="store_true", help="list delivered and acknowledged messages too")
    inbox.add_argument("--limit", type=int, default=100)
    inbox.add_argument("--take", metavar="DIR", default=None, help="save and acknowledge every new message")
    inbox.add_argument("--json", action="store_true")
    inbox.set_defaults(func=_cmd_inbox)

    cpa_list = cpa_sub.add_parser(
        "list",
        help="list the agreements the MSH is configured with",
        description="List the agreements named by agreements.paths that this party is in: status, window, partner.",
    )
    config(cpa_list)
    cpa_list.set_defaults(func=_cmd_cpa_list)
