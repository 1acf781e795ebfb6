"""``msh resend`` and ``msh purge``: the operator's actions on the store of the MSH of ``--config``.

Both work on the store directly, with or without ``msh serve`` running on it: a resent message waits there as
a queued transmission, which the server's timer loop picks up (within ``timers.poll_interval``), or which goes
out when ``msh serve`` starts.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
from datetime import UTC, datetime

from msh.cli.common import Subcommands, add_command, running_msh
from msh.errors import ConfigurationError

__all__ = ["add_operate_commands", "os_user"]


def os_user() -> str:
    """Who runs the command: the OS user's name (its uid when it has none)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def _resend(args: argparse.Namespace) -> int:
    from msh.runtime.resending import ResendOutcome

    with running_msh(args, keys=False) as msh:
        results = msh.resend(args.message_id, reason=args.reason, requested_by=os_user(), force=args.force)
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=2))
    else:
        for r in results:
            print(f"{r.message_id}: {r.outcome.value}: {r.detail}")
    return 0 if all(r.outcome is ResendOutcome.RESENT for r in results) else 1


def _moment(text: str) -> datetime:
    """``--before``: an xsd:dateTime with its zone, or a date (midnight UTC)."""
    how = "give a date (2026-05-01) or a date and time with its zone (2026-05-01T00:00:00Z)"
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date; {how}") from None
    if moment.tzinfo is None and "T" in text:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone (Z for UTC, or +01:00); {how}")
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _size(count: int) -> str:
    size = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{count} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{count} bytes"  # pragma: no cover


def _purge(args: argparse.Namespace) -> int:
    with running_msh(args, keys=False) as msh:
        now = msh.clock()
        if args.before is not None and args.before > now:
            raise ConfigurationError(
                f"--before {args.before.isoformat()}: that is in the future (now is {now:%Y-%m-%dT%H:%M:%SZ}); "
                "only messages settled before a past time can be purged"
            )
        report = msh.purge(before=args.before, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 0
    verb = "would remove" if report.dry_run else "removed"
    print(
        f"{verb} {report.removed['outbound']} sent and {report.removed['inbound']} received messages settled before "
        f"{report.cutoff:%Y-%m-%dT%H:%M:%SZ}; {_size(report.bytes_freed)} "
        f"{'would come' if report.dry_run else 'came'} back"
    )
    if report.kept_for_persist_duration:
        print(f"kept {report.kept_for_persist_duration} more until their PersistDuration has passed (ebMS2 §6.4.6)")
    return 0


def add_operate_commands(sub: Subcommands) -> None:
    """Add ``msh resend`` and ``msh purge``."""
    resend = add_command(
        sub,
        "resend",
        _resend,
        help="send failed messages again (same MessageId, new attempt series)",
        description=(
            "Send each failed MESSAGE_ID again as a new attempt series with the same MessageId and the identical "
            "stored message: the partner's duplicate elimination keeps its application from getting it twice "
            "(ebMS2 §6.4.1). The resend is journaled with the OS user who asked and --reason; the DeliveryFailure "
            "reported before stays in the journal. Refused, with why: a message that is not failed (its status is "
            "printed), not one of the application's own, sent with MessageOrder, past its PersistDuration or "
            "TimeToLive (submit it again instead), or sent without DuplicateElimination (the partner may deliver "
            "it twice: --force if that is acceptable). Works without a server: msh serve on the same store "
            "transmits it. Exit status 0 when every message was resent, 1 when any was refused or unknown."
        ),
        config=True,
    )
    resend.add_argument("message_id", nargs="+", metavar="MESSAGE_ID", help="the MessageId of a failed message")
    resend.add_argument("--reason", default="", metavar="TEXT", help="why (kept in the journal)")
    resend.add_argument("--force", action="store_true", help="resend a message sent without DuplicateElimination too")
    resend.add_argument("--json", action="store_true", help="one result per message as JSON (camelCase keys)")
    purge = add_command(
        sub,
        "purge",
        _purge,
        help="remove messages whose outcome is final and whose keeping time has passed",
        description=(
            "Remove from the store the messages whose outcome is final (sent messages delivered, sent or failed "
            "with their DeliveryFailure reported; received ones settled by the application) that were settled "
            "before retention.keep ago (or --before T) and whose PersistDuration has passed since they were "
            "first sent or received (ebMS2 §6.4.6; a received message's duplicate-elimination record is kept that "
            "long), with their payloads. A message still being retried, awaiting an acknowledgment or waiting in "
            "the inbox is never removed. The journal stays and records a 'purged' event per message. Prints how "
            "many sent and received messages went and how many bytes came back. msh serve does the same every "
            "retention.interval when retention.enabled."
        ),
        config=True,
    )
    purge.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")
    purge.add_argument(
        "--before",
        type=_moment,
        default=None,
        metavar="T",
        help="only messages settled before T (a date, or a date and time with its zone), instead of retention.keep",
    )
    purge.add_argument("--json", action="store_true", help="the report as JSON (camelCase keys)")
