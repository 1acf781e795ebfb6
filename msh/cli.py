"""The ``msh`` command line.

Subcommands:

- ``msh message inspect FILE…``: summarise ebXML message files (raw HTTP capture, MIME package, or bare
  SOAP envelope) with their validation verdict; ``--json`` for machines. Exit status 0 when every file
  is valid, 1 when any is only accepted leniently or rejected, 2 on bad usage.
- ``msh demo``: parse, validate and round-trip the sample messages and print a summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _cmd_message_inspect(args: argparse.Namespace) -> int:
    from msh.ebms.inspect import inspect_file, render_text

    results = [inspect_file(path) for path in args.files]
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2))
    else:
        print("\n\n".join(render_text(r) for r in results))
    return 0 if all(r["verdict"] == "valid" for r in results) else 1


def _cmd_demo(args: argparse.Namespace) -> int:
    from msh.demo import run_demo

    return run_demo(args.samples)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="msh",
        description="ebXML Messaging 2.0 Message Service Handler: tools for messages and agreements.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    message = sub.add_parser(
        "message", help="work with ebXML message files", description="Work with ebXML message files."
    )
    message_sub = message.add_subparsers(dest="message_command", metavar="SUBCOMMAND", required=True)
    inspect = message_sub.add_parser(
        "inspect",
        help="summarise message files and their validation verdict",
        description=(
            "Print a readable summary of each ebXML message FILE (a raw HTTP capture, a MIME package with or "
            "without its Content-Type line, or a bare SOAP envelope) and its verdict: 'valid' (strict parsing "
            "accepts it), 'accepted-with-warnings' (only lenient parsing does; the warnings say why), or "
            "'rejected' (with the ebMS errorCode, severity and location of each problem). Exit status 0 if "
            "every file is valid, 1 otherwise."
        ),
    )
    inspect.add_argument("files", nargs="+", metavar="FILE", help="message file(s) to inspect")
    inspect.add_argument("--json", action="store_true", help="print the result as JSON")
    inspect.set_defaults(func=_cmd_message_inspect)

    demo = sub.add_parser(
        "demo",
        help="run the demo over the sample messages",
        description="Parse, validate and round-trip every sample message and print a summary.",
    )
    demo.add_argument("--samples", default=None, help="folder of sample messages (default: the project's samples/)")
    demo.set_defaults(func=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``msh`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
