"""``msh inbox``: list the received messages waiting for the application, or take them into folders
(``--take DIR``: :mod:`msh.runtime.take`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from msh.cli.common import Subcommands, add_command, positive_int, running_msh

__all__ = ["add_inbox_command"]


def _inbox(args: argparse.Namespace) -> int:
    """0, or with ``--take``: what :func:`_take` returns."""
    from msh.store.api import InboxState

    if args.take is not None:
        return _take(args, Path(args.take))
    with running_msh(args, keys=False) as msh:
        held = msh.inbox(InboxState.HELD, limit=args.limit)
        if args.all:
            entries = msh.inbox(None, limit=args.limit)
        elif args.held:  # MessageOrder (ebMS2 §9.1.1): kept, not offered (held for their turn, or abandoned)
            abandoned = msh.inbox(InboxState.ABANDONED, limit=args.limit)
            entries = sorted(held + abandoned, key=lambda e: (e.received_at, e.id))[: args.limit]
        else:  # waiting for the application: new, or fetched but not acknowledged
            waiting = msh.inbox(InboxState.NEW, limit=args.limit) + msh.inbox(
                InboxState.DELIVERED_TO_APP, limit=args.limit
            )
            entries = sorted(waiting, key=lambda e: (e.received_at, e.id))[: args.limit]
        # One vocabulary with the REST interface and msh messages (msh.store.inbox_status).
        statuses = msh.inbox_statuses(entries)
        if args.json:
            print(
                json.dumps(
                    [
                        {
                            "id": e.id,
                            "messageId": e.message_id,
                            "state": status.value,
                            "receivedAt": e.received_at.isoformat(),
                            "deliveredAt": None if e.delivered_at is None else e.delivered_at.isoformat(),
                        }
                        for e, status in zip(entries, statuses, strict=True)
                    ],
                    indent=2,
                )
            )
        else:
            for e, status in zip(entries, statuses, strict=True):
                print(f"{e.id:>6}  {status.value:<12} {e.received_at.isoformat()}  {e.message_id}")
            print(f"{len(entries)} message(s)")
            if held and not (args.held or args.all):
                print(
                    f"{len(held)} more held for their turn: a message before each in its sequence has not arrived "
                    "yet (MessageOrder); msh inbox --held lists them"
                )
        return 0


def _take(args: argparse.Namespace, folder: Path) -> int:
    """``inbox --take``: 0 when every waiting message was taken, 1 when one was refused (its folder exists)."""
    from msh.runtime.take import Outcome, Taken, prepare_folder, take_inbox

    as_json = args.json
    prepare_folder(folder)  # before opening the store: a bad folder is a usage error

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

    with running_msh(args, keys=False) as msh:
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
            noted = f", {refused} refused" if refused else ""
            print(f"{len(results) - refused} message(s) taken into {folder}{noted}")
        return 1 if refused else 0


def add_inbox_command(sub: Subcommands) -> None:
    """Add ``msh inbox``."""
    inbox = add_command(
        sub,
        "inbox",
        _inbox,
        help="list or take received messages",
        description=(
            "List the messages waiting for the application: new ones, and those an application fetched but did "
            "not acknowledge (--all: every one), each with its state: available, leased (taken through the REST "
            "interface, lease running), acknowledged, rejected (refused by an application to the dead-letter list), "
            "held or abandoned (the same words as the REST interface and msh messages). With --take DIR, "
            "write each waiting message into its own folder DIR/<MessageId made safe>/ (its payloads and "
            "message.json: MessageId, From, To, CPAId, Service, Action, ConversationId, RefToMessageId and each "
            "payload's file, Content-ID, content type, size and SHA-256), written atomically, and acknowledge it "
            "once the folder is on disk, so it is offered once. A folder that already exists is never "
            "overwritten: that message is not taken and not acknowledged (exit status 1; it stays in the inbox) "
            "unless the folder holds this very message complete (an earlier take stopped before acknowledging: "
            "acknowledged now). Under an agreement that guarantees message order, a message whose turn has not "
            "come (one before it in its sequence has not arrived) is held: stored and acknowledged to the "
            "sender, but neither listed as waiting nor taken until that one comes; --held lists those, and those "
            "abandoned because it never came."
        ),
        config=True,
    )
    inbox.add_argument("--all", action="store_true", help="list delivered and acknowledged messages too")
    inbox.add_argument(
        "--held",
        action="store_true",
        help="list the messages held for their turn in a sequence (MessageOrder) and those abandoned",
    )
    inbox.add_argument(
        "--limit", type=positive_int, default=100, metavar="N", help="list at most N messages (default 100)"
    )
    inbox.add_argument(
        "--take", metavar="DIR", default=None, help="write every waiting message into DIR and acknowledge it"
    )
    inbox.add_argument("--json", action="store_true", help="print the list (or what --take did) as JSON")
