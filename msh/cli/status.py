"""``msh status MESSAGE_ID…``: where each sent message stands, each transmission's outcome, what comes next.

Each transmission's outcome is read from the journal (:mod:`msh.runtime.attempts`). With ``--remote`` the
To party of each message is asked too (a StatusRequest, ebMS2 §7), and its StatusResponse is shown beside
our own record (:meth:`msh.runtime.msh.Msh.remote_status`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from msh.cli.common import Subcommands, add_command, running_msh, seconds
from msh.errors import ConfigurationError

if TYPE_CHECKING:
    from msh.runtime.attempts import Attempt, ReceivedError
    from msh.runtime.msh import Msh
    from msh.runtime.services import RemoteStatus
    from msh.store.api import OutboundMessage

__all__ = ["add_status_command", "is_final", "status_line", "when"]


def is_final(stored: OutboundMessage) -> bool:
    """Whether the sending machine of ``stored`` has ended (delivered, sent or failed)."""
    return stored.state.status.final


def when(moment: datetime) -> str:
    """``moment`` in UTC to the second: ``2026-01-01T12:00:00Z``."""
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _next(stored: OutboundMessage) -> tuple[str, datetime] | None:
    """What the sending machine does next and when: ('resend' | 'give-up' | 'end-to-end', time), or None
    when final."""
    s = stored.state
    if is_final(stored) or s.next_due_at is None:
        return None
    if s.status.value == "forwarded" and not s.reliability.hop_ack:
        # ebMS2 §6.6 rows 3 and 7: the hop is done; a DeliveryFailure from the path may still come until then.
        return ("end-to-end", s.next_due_at)
    # ebMS2 §6.5.4: a resend while fewer than Retries resends were made, else giving up when the timer fires.
    return ("resend" if s.attempts < s.reliability.retries + 1 else "give-up", s.next_due_at)


def _attempt_line(a: Attempt) -> str:
    head = f"transmission {a.number}" + (f" at {when(a.at)}" if a.at else "")
    if a.status_request is not None:
        # ebMS2 §7: the partner was asked for the message's status in place of this resend.
        asked = "asked the partner for its status first (StatusRequest)"
        if a.status_request == "asked":
            return f"{head}: {asked}, no answer yet"
        if not a.resent:
            if a.error is not None:
                consequence = "the partner is still unreachable: counts as a failed resend"
            elif a.status_request.endswith((" Received", " Processed")):
                consequence = "not resent: the partner has it (ebMS2 §7.3.3)"
            else:
                consequence = "the resend is due"
            return f"{head}: {asked}: {a.status_request}; {consequence}"
        head = f"{head}: {asked}: {a.status_request}; resent"
        if not a.finished and a.url is None:
            return f"{head}, no outcome yet"
    elif not a.finished and a.url is None and not a.errors:
        return f"transmission {a.number}: started {when(a.at) if a.at else ''}, no outcome yet".rstrip()
    if a.error is not None:
        body = f"failed: {a.error}"
    elif a.http_status is not None:
        body = f"HTTP {a.http_status}" + (f" ({a.answer})" if a.answer else "")
    else:
        body = "no outcome yet"
    for error in a.errors:
        body += f"; {error}"
    return f"{head}: {body}"


def status_line(stored: OutboundMessage) -> str:
    """``MessageId: status (what it rests on), N transmission(s), to PARTY (Action)``, and the failure if it
    failed."""
    from msh.engine import explain_state

    s = stored.state
    line = (
        f"{stored.message_id}: {s.status.value} ({explain_state(s)}), {s.attempts} transmission(s), to "
        f"{stored.to_party} ({stored.action})"
    )
    if stored.kind.value == "forward":
        line += f", forwarded for {stored.from_party} to {stored.endpoint_url}"
    elif stored.kind.value == "signal":
        line += f", our signal sent along a route to {stored.endpoint_url}"
    if s.failure is not None:
        line += f"; {s.failure.severity.value} {s.failure.error_code.value}: {s.failure.description}"
    return line


def _reported(stored: OutboundMessage, attempts: list[Attempt]) -> ReceivedError | None:
    from msh.runtime.attempts import failure_despite_acknowledgment

    return failure_despite_acknowledgment(stored.state.status.value == "delivered", attempts)


def _status_text(stored: OutboundMessage, attempts: list[Attempt]) -> str:
    lines = [status_line(stored)]
    reported = _reported(stored, attempts)
    if reported is not None:
        lines.append(
            f"  acknowledged, but the To party reported it could not deliver it to its application: {reported} "
            "(ebMS2 §6.5.7: the acknowledgment stands)"
        )
    lines += [f"  {_attempt_line(a)}" for a in attempts]
    nxt = _next(stored)
    if nxt is not None:
        what, due = nxt
        if what == "resend":
            lines.append(f"  next attempt at {when(due)}")
        elif what == "end-to-end":
            lines.append(f"  a DeliveryFailure from the path may still come until {when(due)}; then it is sent")
        else:
            lines.append(f"  no resend left: gives up at {when(due)} unless acknowledged")
    return "\n".join(lines)


def _status_json(stored: OutboundMessage, attempts: list[Attempt]) -> dict[str, object]:
    from msh.engine import explain_state

    s = stored.state
    nxt = _next(stored)
    reported = _reported(stored, attempts)
    return {
        "messageId": stored.message_id,
        "status": s.status.value,
        "final": s.status.final,
        "evidence": s.evidence.value if s.evidence is not None else None,
        "explanation": explain_state(s),
        "receiptProblem": s.receipt_problem,
        "deliveryFailureAfterAcknowledgment": None if reported is None else str(reported),
        "mayHaveBeenDelivered": s.failure is not None and s.failure.severity.value == "Warning",
        "kind": stored.kind.value,
        "attempts": s.attempts,
        "cpaId": stored.cpaid,
        "to": stored.to_party,
        "service": stored.service,
        "action": stored.action,
        "firstSentAt": s.first_sent_at.isoformat() if s.first_sent_at else None,
        "nextAttemptAt": nxt[1].isoformat() if nxt is not None and nxt[0] == "resend" else None,
        "givesUpAt": nxt[1].isoformat() if nxt is not None and nxt[0] != "resend" else None,
        "transmissions": [
            {
                "attempt": a.number,
                "at": a.at.isoformat() if a.at else None,
                "url": a.url,
                "finished": a.finished,
                "httpStatus": a.http_status,
                "error": a.error,
                "answer": a.answer,
                "statusRequest": a.status_request,
                "resent": a.resent,
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
        if s.failure is None
        else {
            "errorCode": s.failure.error_code.value,
            "severity": s.failure.severity.value,
            "description": s.failure.description,
        },
    }


def _write_receipt(msh: Msh, message_id: str, path: Path) -> int:
    """``--receipt FILE``: the signed receipt of ``message_id`` written to FILE (never over an existing one)."""
    receipt = msh.receipt(message_id)
    if receipt is None:
        stored = msh.status(message_id)
        why = (
            f"unknown (never submitted to this store, {msh.store.url})"
            if stored is None
            else f"no signed receipt is kept (status {stored.state.status.value}: the agreement asks for no signed "
            "acknowledgment (ackSignatureRequested), or none has come yet)"
        )
        print(f"msh status: error: {message_id}: {why}; nothing written to {path}", file=sys.stderr)
        return 1
    with path.open("xb") as out:
        out.write(receipt)
    print(f"{message_id}: signed receipt ({len(receipt)} bytes, the signed Acknowledgment message) written to {path}")
    return 0


def _remote_text(result: RemoteStatus, stored: OutboundMessage, attempts: list[Attempt]) -> str:
    from msh.cli.ping import milliseconds

    asked = f"  asked {result.partner} at {result.url} (StatusRequest {result.request_message_id})"
    if result.message_status is not None:
        received = f" (it received the message at {when(result.timestamp)})" if result.timestamp is not None else ""
        way = "on the connection" if result.on_connection else "asynchronously (to our endpoint)"
        lines = [
            f"{result.message_id}: the partner says {result.message_status.value}{received}",
            f"{asked}; StatusResponse {result.response_message_id} came {way} after "
            f"{milliseconds(result.round_trip)} ms",
        ]
    else:
        lines = [f"{result.message_id}: no StatusResponse: {result.problem}", asked]
    ours = _status_text(stored, attempts).splitlines()
    first = ours[0].removeprefix(f"{stored.message_id}: ")
    return "\n".join([*lines, f"  our record: {first}", *(f"  {line}" for line in ours[1:])])


def _remote_json(result: RemoteStatus, stored: OutboundMessage, attempts: list[Attempt]) -> dict[str, object]:
    from msh.cli.ping import errors_json, milliseconds

    return {
        "messageId": result.message_id,
        "requestMessageId": result.request_message_id,
        "partner": result.partner,
        "cpaId": result.cpa_id,
        "url": result.url,
        "sentAt": result.sent_at.isoformat(),
        "messageStatus": result.message_status.value if result.message_status is not None else None,
        "timestamp": result.timestamp.isoformat() if result.timestamp is not None else None,
        "roundTripMs": milliseconds(result.round_trip),
        "onConnection": result.on_connection,
        "responseMessageId": result.response_message_id,
        "httpStatus": result.http_status,
        "problem": result.problem,
        "errors": errors_json(result.errors),
        "ours": _status_json(stored, attempts),
    }


async def _ask_remote(msh: Msh, args: argparse.Namespace) -> int:
    """``--remote``: ask each message's To party, then show its answer beside our record."""
    missing = 0
    out = []
    try:
        for message_id in args.message_ids:
            if msh.status(message_id) is None:
                missing += 1
                if not args.json:
                    print(f"{message_id}: unknown (never submitted to this store, {msh.store.url})")
                continue
            result = await msh.remote_status(message_id, timeout=args.timeout)
            stored = msh.status(message_id)
            assert stored is not None
            attempts = msh.attempts(message_id)
            if not result.answered:
                missing += 1
            if args.json:
                out.append(_remote_json(result, stored, attempts))
            else:
                print(_remote_text(result, stored, attempts), flush=True)
    finally:
        await msh.transport.close()
    if args.json:
        print(json.dumps(out, indent=2))
    return 1 if missing else 0


def _status(args: argparse.Namespace) -> int:
    if args.receipt is not None and len(args.message_ids) != 1:
        raise ConfigurationError("--receipt FILE takes one MESSAGE_ID: the message whose receipt to write")
    if args.remote and args.receipt is not None:
        raise ConfigurationError("--remote and --receipt FILE do not go together: ask, or write the receipt")
    if args.timeout <= 0:
        raise ConfigurationError(f"--timeout {args.timeout:g}: give a number of seconds above 0, e.g. 10")
    if args.remote:
        with running_msh(args) as msh:
            return asyncio.run(_ask_remote(msh, args))
    with running_msh(args, keys=False) as msh:
        if args.receipt is not None:
            return _write_receipt(msh, args.message_ids[0], Path(args.receipt))
        unknown = failed = 0
        out = []
        for message_id in args.message_ids:
            stored = msh.status(message_id)
            if stored is None:
                unknown += 1
                if not args.json:
                    print(f"{message_id}: unknown (never submitted to this store, {msh.store.url})")
                continue
            failed += stored.state.status.value == "failed"
            attempts = msh.attempts(message_id)
            out.append(_status_json(stored, attempts))
            if not args.json:
                print(_status_text(stored, attempts))
        if args.json:
            print(json.dumps(out, indent=2))
        return 1 if unknown or failed else 0  # the command's own "no": a message unknown or failed


def add_status_command(sub: Subcommands) -> None:
    """Add ``msh status``."""
    status = add_command(
        sub,
        "status",
        _status,
        help="show the delivery status of sent messages",
        description=(
            "Print the status of each MESSAGE_ID sent from this store and the evidence it rests on: delivered (the "
            "To party acknowledged it, or said so in a StatusResponse; 'receipt invalid' when its signed receipt "
            "does not match what was sent), sent (no acknowledgment by design), forwarded (an intermediary "
            "acknowledged it; the To party's acknowledgment is awaited), awaiting-ack, pending or failed (with "
            "the DeliveryFailure: Error, not delivered; Warning, it may have been delivered), whether it is our "
            "own message, one forwarded for another party or a "
            "signal of ours sent along a route, each transmission with its outcome (the HTTP status and what the "
            "answer carried, or why it failed: connection refused, TLS failure, timeout; and any ErrorList the partner "
            "sent back; a StatusRequest asked in place of a resend, sending.status_before_resend, with its answer), "
            "and when the next attempt is due. Exit status 1 if one MESSAGE_ID is unknown or failed. "
            "With --receipt FILE, write the signed receipt of one MESSAGE_ID instead. With --remote, ask each "
            "message's To party for its status (a StatusRequest, ebMS2 §7.1.1, sent where the message went) and "
            "print its StatusResponse (Received, Processed, Forwarded, NotRecognized or UnAuthorized, and when it "
            "received the message, §7.3) beside our own record; Received or Processed also make the message "
            "delivered. The answer comes on the connection, or later to our endpoint, where `msh serve` on the "
            "same store receives it. Exit status 1 then when a StatusResponse did not come."
        ),
        config=True,
    )
    status.add_argument("message_ids", nargs="+", metavar="MESSAGE_ID")
    status.add_argument("--json", action="store_true", help="print the same as JSON")
    status.add_argument(
        "--remote",
        action="store_true",
        help="ask each message's To party for its status (StatusRequest, ebMS2 §7) and show its StatusResponse "
        "beside our record",
    )
    status.add_argument(
        "--timeout",
        type=seconds,
        default=10.0,
        metavar="SECONDS",
        help="with --remote: how long to wait for each StatusResponse (default 10)",
    )
    status.add_argument(
        "--receipt",
        metavar="FILE",
        help="write the signed receipt kept for MESSAGE_ID (the signed Acknowledgment whose ds:References matched "
        "what was sent, ebMS2 §6.3.2.5) to FILE, which must not exist; exit status 1 when none is kept",
    )
