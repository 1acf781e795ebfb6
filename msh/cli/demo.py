"""``msh demo``: the two-partner reliable-messaging demo (:mod:`msh.demos.exchange`; with ``--transport
smtp|amqp`` over that binding, :mod:`msh.demos.transports`), with ``--multihop`` the demo through an
intermediary (:mod:`msh.demos.multihop`), or with ``--codec`` the codec demo over the sample message files
(:mod:`msh.demos.codec`)."""

from __future__ import annotations

import argparse

from msh.cli.common import Subcommands, add_command, fraction, positive_int
from msh.errors import ConfigurationError

__all__ = ["add_demo_command"]


def _demo(args: argparse.Namespace) -> int:
    if args.transport != "http":
        if args.codec or args.multihop or args.ports is not None:
            raise ConfigurationError(
                f"--transport {args.transport} runs the two-partner demo over that binding; leave out "
                "--codec, --multihop and --ports (it picks free ports itself)"
            )
        from msh.demos.transports import run_transport_demo

        return run_transport_demo(args.transport, messages=args.messages, keep=args.keep, amqp_url=args.amqp_url)
    if args.codec and args.multihop:
        raise ConfigurationError("--codec and --multihop are two different demos; give one of them")
    if args.ports is not None and (args.multihop or args.codec):
        raise ConfigurationError("--ports is for the two-partner demo (the multi-hop demo picks free ports itself)")
    if args.undeliverable is not None and not args.multihop:
        raise ConfigurationError("--undeliverable is for the multi-hop demo; add --multihop")
    if args.codec:
        from msh.demos.codec import run_demo

        return run_demo(args.samples)
    if args.multihop:
        from msh.demos.multihop import run_multihop_demo

        undeliverable = 3 if args.undeliverable is None else args.undeliverable
        return run_multihop_demo(
            messages=args.messages,
            loss=args.loss,
            undeliverable=undeliverable,
            keep=args.keep,
            analytics=not args.no_analytics,
        )
    from msh.demos.exchange import run_exchange_demo

    return run_exchange_demo(
        messages=args.messages, loss=args.loss, keep=args.keep, analytics=not args.no_analytics, ports=args.ports
    )


def _ports(text: str) -> tuple[int, int, int]:
    """An argparse type: ``A,B,PROXY``, three TCP port numbers."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 3 or not all(p.isdigit() and 1 <= int(p) <= 65535 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not three ports A,B,PROXY (e.g. 8081,8082,18082)")
    return int(parts[0]), int(parts[1]), int(parts[2])


def _add_ports(demo: argparse.ArgumentParser) -> None:
    demo.add_argument(
        "--ports",
        type=_ports,
        default=None,
        metavar="A,B,PROXY",
        help=(
            "the two-partner demo's ports on 127.0.0.1: A's endpoint, B's, and the lossy proxy's in front of B "
            "(default: three free ones)"
        ),
    )


def add_demo_command(sub: Subcommands) -> None:
    """Add ``msh demo``."""
    demo = add_command(
        sub,
        "demo",
        _demo,
        help="run the two-partner reliable-messaging demo",
        description=(
            "Start partners A and B of samples/cpas/demo-a-b.xml as two MSH processes (on free ports of 127.0.0.1, "
            "or those of --ports; each with its own SQLite file in a temporary folder), send reliable messages "
            "from A to B through a lossy stretch that loses requests and acknowledgments, and print what each "
            "side saw; then both journals are exported and the delivery report (Spark) runs on them, and the "
            "path of its HTML page is printed (skipped, with the reason, where Spark cannot run). "
            "Exit status 0 when every message was delivered exactly once. With --multihop: A sends to "
            "C through an intermediary instead (three MSH processes, lossy proxies on both hops), then C stops and "
            "A gets DeliveryFailures from the intermediary, and the report reads the three journals. With --codec: "
            "parse, validate and round-trip the sample "
            "message files instead."
        ),
    )
    demo.add_argument(
        "--messages", type=positive_int, default=100, metavar="N", help="how many messages A sends (default 100)"
    )
    demo.add_argument(
        "--loss",
        type=fraction,
        default=0.15,
        metavar="RATE",
        help="share of requests and of responses lost in the lossy stretch, 0 to 1 exclusive (default 0.15)",
    )
    demo.add_argument(
        "--keep", action="store_true", help="keep the work folder (stores, logs) after a successful run too"
    )
    demo.add_argument(
        "--multihop",
        action="store_true",
        help=(
            "the multi-hop demo: parties A and C of samples/cpas/demo-routed-a-c.xml and the intermediary between "
            "them (samples/config/multihop, on free ports), losses on both hops; then C stops and the messages A "
            "sends come back as DeliveryFailures from the intermediary. Exit status 0 when every message was "
            "delivered exactly once and every later one reported failed"
        ),
    )
    demo.add_argument(
        "--undeliverable",
        type=positive_int,
        default=None,
        metavar="N",
        help="with --multihop: how many messages A sends after C stopped (default 3)",
    )
    demo.add_argument(
        "--no-analytics", action="store_true", help="skip exporting the journals and the Spark delivery report"
    )
    _add_ports(demo)
    demo.add_argument(
        "--transport",
        choices=("http", "smtp", "amqp"),
        default="http",
        help=(
            "the binding of the two-partner demo: http (default, HTTPS through the lossy proxy), smtp (ebMS2 "
            "Appendix B.3: each partner runs an SMTP listener and sends through the other's) or amqp (each "
            "partner consumes its own address on the AMQP 1.0 broker of --amqp-url); over smtp and amqp B is "
            "killed and restarted halfway (docs/transports)"
        ),
    )
    demo.add_argument(
        "--amqp-url",
        default="amqp://127.0.0.1:5672",
        metavar="URL",
        help="with --transport amqp: the broker (default amqp://127.0.0.1:5672, user guest)",
    )
    demo.add_argument("--codec", action="store_true", help="run the codec demo over the sample message files")
    demo.add_argument("--samples", default=None, help="with --codec: folder of sample messages")
