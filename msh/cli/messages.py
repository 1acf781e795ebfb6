"""``msh message inspect FILE…``: a readable summary of ebXML message files and their validation verdict;
``msh message verify`` (:mod:`msh.cli.verify`) checks their signatures."""

from __future__ import annotations

import argparse
import json

from msh.cli.common import Subcommands, add_command, readable_files
from msh.cli.verify import add_verify_command

__all__ = ["add_message_commands"]


def _inspect(args: argparse.Namespace) -> int:
    """0 when every file is valid, 1 when any is only accepted leniently or rejected."""
    from msh.ebms.inspect import inspect_file, render_text

    readable_files(args.files)
    results = [inspect_file(path) for path in args.files]
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2))
    else:
        print("\n\n".join(render_text(r) for r in results))
    return 0 if all(r["verdict"] == "valid" for r in results) else 1


def add_message_commands(sub: Subcommands) -> None:
    """Add ``msh message`` and its subcommands ``inspect`` and ``verify``."""
    message = sub.add_parser(
        "message", help="work with ebXML message files", description="Work with ebXML message files."
    )
    message_sub = message.add_subparsers(dest="message_command", metavar="SUBCOMMAND", required=True)
    inspect = add_command(
        message_sub,
        "inspect",
        _inspect,
        help="summarise message files and their validation verdict",
        description=(
            "Print a readable summary of each ebXML message FILE (a raw HTTP capture; a header dump: header "
            "lines without a request line, 'Name:value' with no space after the colon, the first MIME boundary "
            "right after the last header; a MIME package with or without its Content-Type line; or a bare SOAP "
            "envelope) and its verdict: 'valid' (strict parsing "
            "accepts it), 'accepted-with-warnings' (only lenient parsing does; the warnings say why, e.g. a "
            "capture whose headers say chunked over a body saved de-chunked), or 'rejected' (with the ebMS "
            "errorCode, severity and location of each problem, how far reading got, e.g. the line and column "
            "where the SOAP envelope stops being XML, and everything that could still be read: the header "
            "fields as written, the other ebXML elements, the payload parts). --json prints the same with "
            "camelCase keys. Exit status 0 if every file is valid, 1 otherwise."
        ),
    )
    inspect.add_argument("files", nargs="+", metavar="FILE", help="message file(s) to inspect")
    inspect.add_argument("--json", action="store_true", help="print the result as JSON")
    add_verify_command(message_sub)
