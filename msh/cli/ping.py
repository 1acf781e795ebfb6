"""``msh ping PARTNER``: MSH Pings to a partner (ebMS2 §8) and the round-trip time of each Pong.

The Pings are sent by this command itself (it is not the server): to the endpoint the agreement gives the
partner's MSH signals, or along the routing table, with the agreement's TLS, signed as our signals are. A
Pong that comes back on the connection is read here; one that comes later to our own endpoint (the
agreement's MSH channel is asynchronous) is received by ``msh serve`` on the same store, which journals it,
and this command finds it there (:meth:`msh.runtime.msh.Msh.ping`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import timedelta
from typing import TYPE_CHECKING

from msh.cli.common import Subcommands, add_command, non_empty, positive_int, running_msh, seconds
from msh.errors import ConfigurationError

if TYPE_CHECKING:
    from msh.runtime.attempts import ReceivedError
    from msh.runtime.msh import Msh
    from msh.runtime.services import PingResult

__all__ = ["add_ping_command", "errors_json", "milliseconds"]


def milliseconds(round_trip: timedelta | None) -> float | None:
    """A round-trip time in milliseconds, to the microsecond; None stays None."""
    return None if round_trip is None else round(round_trip.total_seconds() * 1000, 3)


def errors_json(errors: tuple[ReceivedError, ...]) -> list[dict[str, object]]:
    """The Errors of an ErrorList the partner answered with, as the JSON the commands print."""
    return [
        {"errorCode": e.error_code, "severity": e.severity, "location": e.location, "description": e.description}
        for e in errors
    ]


def _result_json(number: int, result: PingResult) -> dict[str, object]:
    return {
        "ping": number,
        "messageId": result.message_id,
        "partner": result.partner,
        "cpaId": result.cpa_id,
        "url": result.url,
        "sentAt": result.sent_at.isoformat(),
        "pong": result.pong,
        "roundTripMs": milliseconds(result.round_trip),
        "onConnection": result.on_connection,
        "pongMessageId": result.pong_message_id,
        "httpStatus": result.http_status,
        "problem": result.problem,
        "errors": errors_json(result.errors),
    }


def _header(result: PingResult) -> str:
    return f"PING {result.partner} under {result.cpa_id} at {result.url}"


def _result_line(number: int, result: PingResult) -> str:
    if result.pong:
        way = "on the connection" if result.on_connection else "asynchronously, to our endpoint"
        return (
            f"ping {number}: Pong after {milliseconds(result.round_trip)} ms ({way}; Ping {result.message_id}, "
            f"Pong {result.pong_message_id})"
        )
    return f"ping {number}: no Pong (Ping {result.message_id}): {result.problem}"


def _summary(results: list[PingResult]) -> str:
    pongs = [r for r in results if r.pong and r.round_trip is not None]
    line = f"{len(results)} Ping(s), {len(pongs)} Pong(s)"
    if pongs:
        times = [r.round_trip.total_seconds() * 1000 for r in pongs if r.round_trip is not None]
        line += f"; round trip min/avg/max {min(times):.1f}/{sum(times) / len(times):.1f}/{max(times):.1f} ms"
    return line


async def _pings(msh: Msh, args: argparse.Namespace, partner: tuple[str, str | None] | str) -> list[PingResult]:
    results: list[PingResult] = []
    try:
        for number in range(1, args.count + 1):
            if number > 1 and args.interval > 0:
                await asyncio.sleep(args.interval)
            result = await msh.ping(partner, cpa_id=args.cpa_id, timeout=args.timeout)
            results.append(result)
            if not args.json:
                if number == 1:
                    print(_header(result))
                print(_result_line(number, result), flush=True)
    finally:
        await msh.transport.close()
    return results


def _ping(args: argparse.Namespace) -> int:
    if args.timeout <= 0:
        raise ConfigurationError(f"--timeout {args.timeout:g}: give a number of seconds above 0, e.g. 10")
    partner: tuple[str, str | None] | str = (
        (args.partner, args.partner_type) if args.partner_type is not None else args.partner
    )
    with running_msh(args) as msh:
        results = asyncio.run(_pings(msh, args, partner))
    if args.json:
        print(json.dumps([_result_json(n, r) for n, r in enumerate(results, start=1)], indent=2))
    else:
        print(_summary(results))
    return 0 if all(r.pong for r in results) else 1


def add_ping_command(sub: Subcommands) -> None:
    """Add ``msh ping``."""
    ping = add_command(
        sub,
        "ping",
        _ping,
        help="ping a partner's MSH (ebMS2 §8) and show each Pong's round-trip time",
        description=(
            "Send COUNT MSH Ping messages (ebMS2 §8.1: Service urn:oasis:names:tc:ebxml-msg:service, Action Ping, "
            "no payload) from our party to PARTNER under the agreement between us (--cpa-id, or the only one in "
            "force), to the endpoint it gives the partner's MSH signals (or along the routing table), with its "
            "TLS, signed as our signals are, and print for each the round-trip time of its Pong (§8.2) or what "
            "went wrong: connection refused, TLS failure, an HTTP status, an error message such as NotSupported, "
            "no Pong within --timeout. The Pong comes back on the connection, or (when the agreement's MSH channel "
            "is asynchronous, syncReplyMode none) later to our own endpoint: then `msh serve` running on the same "
            "store receives it and this command finds it in the store. Exit status 0 when every Ping got its "
            "Pong, 1 otherwise, 2 for a partner or agreement that cannot be pinged (saying which can)."
        ),
        config=True,
    )
    ping.add_argument("partner", type=non_empty, metavar="PARTNER", help="the partner's PartyId value")
    ping.add_argument(
        "--partner-type",
        type=non_empty,
        default=None,
        metavar="TYPE",
        help="the partner's PartyId type (default: from the agreements)",
    )
    ping.add_argument(
        "--cpa-id",
        type=non_empty,
        default=None,
        metavar="ID",
        help="the agreement to ping under (needed when several agreements in force name the partner)",
    )
    ping.add_argument(
        "--count", type=positive_int, default=1, metavar="N", help="how many Pings, one after the other (default 1)"
    )
    ping.add_argument(
        "--timeout",
        type=seconds,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for each Pong (default 10)",
    )
    ping.add_argument(
        "--interval",
        type=seconds,
        default=1.0,
        metavar="SECONDS",
        help="the pause between one Pong (or its timeout) and the next Ping (default 1)",
    )
    ping.add_argument(
        "--json",
        action="store_true",
        help="print the results as JSON (camelCase keys: messageId, pong, roundTripMs, onConnection, problem, ...)",
    )
