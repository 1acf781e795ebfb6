#!/usr/bin/env python3
"""The long crash test: two MSH processes exchange messages (1,000 by default) while each is killed with
SIGKILL at random moments and restarted; then the receiving application must hold each message exactly
once and the sender every message as acknowledged. Prints the outcome; exit status 0 when it held.

With --multihop: A sends to C through an intermediary I (three MSH processes, the multi-hop samples on free
ports) while I and C are killed at random moments and restarted; then C's application must hold each
message exactly once and A every message as delivered (C's end-to-end acknowledgment). Prints the kills,
the time, the duplicates C eliminated and the resends on each hop.

With --nodes N: party A runs as N `msh serve` nodes on one store (--store postgresql: a fresh schema of the
PostgreSQL at MSH_TEST_POSTGRES_URL, dropped afterwards; or sqlite: one file) and sends to B while its nodes
are killed at random moments and restarted (10,000 messages unless --messages says); then B's application
must hold each message exactly once, A every message as acknowledged and no timer or lease left; prints the
kills, lost/duplicated counts and the latency percentiles (docs/cluster.md).

    .venv/bin/python scripts/crash_test.py [--multihop] [--messages 1000] [--kill-for 60] [--seed N] [--keep DIR]
    .venv/bin/python scripts/crash_test.py --nodes 3 --store postgresql [--messages 10000] [--kill-for 300]

With --transport smtp|amqp: A sends to B over that binding (docs/transports) while B is killed at random
moments (at least twice) and restarted; with --mailbox (smtp) B reads an IMAP mailbox (a private Dovecot)
that is killed and restarted too; with --drop-connections (amqp) the broker closes every connection at
random moments. 500 messages unless --messages says.

    .venv/bin/python scripts/crash_test.py --transport smtp [--mailbox] [--messages 500] [--kill-for 30]
    .venv/bin/python scripts/crash_test.py --transport amqp [--drop-connections] [--amqp-url URL]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from msh.cli.common import positive_int, seconds
from msh.errors import ConfigurationError
from msh.faults.crash import run_crash_test
from msh.faults.crash_cluster import run_cluster_crash_test
from msh.faults.crash_multihop import run_multihop_crash_test
from msh.faults.crash_transport import run_transport_crash_test
from msh.faults.killer import DeliveryOutcome


def _say(text: str) -> None:
    print(text, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--messages",
        type=positive_int,
        default=None,
        metavar="N",
        help="how many messages (default 1000; with --nodes 10000)",
    )
    parser.add_argument(
        "--kill-for",
        type=seconds,
        default=60.0,
        metavar="S",
        help="seconds during which processes are killed (default 60)",
    )
    parser.add_argument(
        "--mean-gap", type=seconds, default=1.0, metavar="S", help="mean seconds between kills (default 1)"
    )
    parser.add_argument(
        "--seed", type=int, default=None, metavar="N", help="seed of the random kill moments (default: a new one)"
    )
    parser.add_argument("--keep", metavar="DIR", default=None, help="work in DIR and keep it (stores and logs)")
    parser.add_argument(
        "--multihop",
        action="store_true",
        help="A sends to C through an intermediary; the intermediary and C are killed (not A)",
    )
    parser.add_argument(
        "--nodes",
        type=positive_int,
        default=None,
        metavar="N",
        help="run party A as N nodes on one store, killing the nodes (not B)",
    )
    parser.add_argument(
        "--store",
        choices=("postgresql", "sqlite"),
        default="postgresql",
        help="with --nodes: the store the nodes share (default postgresql)",
    )
    parser.add_argument(
        "--lease",
        default="PT3S",
        metavar="DURATION",
        help="with --nodes: the nodes' timers.lease (default PT3S; timers.renew_interval is PT1S)",
    )
    parser.add_argument(
        "--transport",
        choices=("smtp", "amqp"),
        default=None,
        help="A sends to B over SMTP or AMQP 1.0 instead of HTTPS; B is killed (not A)",
    )
    parser.add_argument(
        "--mailbox",
        action="store_true",
        help="with --transport smtp: B reads an IMAP mailbox, killed and restarted too",
    )
    parser.add_argument(
        "--drop-connections",
        action="store_true",
        help="with --transport amqp: the broker closes every connection at random moments too",
    )
    parser.add_argument(
        "--amqp-url", default="amqp://127.0.0.1:5672", metavar="URL", help="with --transport amqp: the broker"
    )
    args = parser.parse_args()
    if sum(map(bool, (args.multihop, args.nodes, args.transport))) > 1:
        parser.error("--multihop, --nodes and --transport are separate tests; give one")
    if args.mailbox and args.transport != "smtp":
        parser.error("--mailbox goes with --transport smtp")
    if args.drop_connections and args.transport != "amqp":
        parser.error("--drop-connections goes with --transport amqp")
    if args.messages is None:
        args.messages = 10_000 if args.nodes else 500 if args.transport else 1000
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="msh-crash-"))
    stack = contextlib.ExitStack()
    try:
        run: Callable[..., DeliveryOutcome] = run_multihop_crash_test if args.multihop else run_crash_test
        more: dict[str, object] = {}
        if args.nodes:
            run = run_cluster_crash_test
            more = {"nodes": args.nodes, "store": args.store, "lease": args.lease}
        if args.transport:
            run = run_transport_crash_test
            more = {"transport": args.transport, "drop_connections": args.drop_connections, "amqp_url": args.amqp_url}
        try:
            if args.mailbox:
                from msh.faults.dovecot import private_dovecot

                more["mailbox"] = stack.enter_context(private_dovecot())
            report = run(
                work / "run",
                messages=args.messages,
                kill_for=args.kill_for,
                mean_gap=args.mean_gap,
                seed=args.seed,
                settle_timeout=300,
                progress=_say,
                **more,
            )
        except ConfigurationError as exc:
            print(f"crash_test.py: error: {exc}", file=sys.stderr)
            return 2
        print(report.summary())
        return 0 if report.ok else 1
    finally:
        stack.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
