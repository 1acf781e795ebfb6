"""``msh message inspect FILE…``: a readable summary of ebXML message files and their validation verdict."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence

from msh.cli.common import Subcommands, add_command
from msh.errors import ConfigurationError

__all__ = ["add_message_commands"]


def _readable(paths: Sequence[str]) -> None:
    """Refuse, in one line, a message file that cannot be read (before any report is printed)."""
    for path in paths:
        if os.path.isdir(path):
            raise ConfigurationError(f"{path} is a folder; give the message files in it (e.g. {path}/*.http)")
        if not os.path.exists(path):
            raise ConfigurationError(f"{path}: no such file; check the path")
        if not os.access(path, os.R_OK):
            raise ConfigurationError(f"{path}: permission denied; make the file readable or copy it")


def _inspect(args: argparse.Namespace) -> int:
    """0 when every file is valid, 1 when any is only accepted leniently or rejected."""
    from msh.ebms.inspect import inspect_file, render_text

    _readable(args.files)
    results = [inspect_file(path) for path in args.files]
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2))
    else:
        print("\n\n".join(render_text(r) for r in results))
    return 0 if all(r["verdict"] == "valid" for r in results) else 1


def add_message_commands(sub: Subcommands) -> None:
    """Add ``msh message`` and its subcommand ``inspect``."""
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
            "accepts it), 'accepted-with-warnings' (only lenient parsing does; the warnings say why), or "
            "'rejected' (with the ebMS errorCode, severity and location of each problem). Exit status 0 if "
            "every file is valid, 1 otherwise."
        ),
    )
    inspect.add_argument("files", nargs="+", metavar="FILE", help="message file(s) to inspect")
    inspect.add_argument("--json", action="store_true", help="print the result as JSON")
