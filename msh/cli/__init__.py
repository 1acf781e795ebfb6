"""The ``msh`` command line.

Subcommands:

- ``msh message inspect FILE…``: summarise ebXML message files (raw HTTP capture, header dump, MIME
  package, or bare SOAP envelope) with their validation verdict, a rejected one with what could be read of
  it; ``--json`` for machines (camelCase keys, as all JSON the command line prints). Exit status 0 when every
  file is valid, 1 when any is only accepted leniently or rejected, 2 on bad usage.
- ``msh message verify FILE… --cpa FILE | --cert PEM | --keyinfo``: check their ebMS signatures
  (:mod:`msh.cli.verify`); exit status 0 only when every file verifies.
- ``msh keys generate PARTY --host NAME``: a key pair, a self-signed certificate for TLS and signing and
  the agreement's Certificate element; ``msh keys show FILE``: what a certificate is and fits; ``msh keys
  import CERT``: the Certificate element of a CA-issued certificate (:mod:`msh.cli.keys`).
- ``msh demo``: the two-partner reliable-messaging demo (``--codec``: round-trip the sample messages).
- ``msh init DIR``: a party set up in a folder: settings, keys, an agreement, a free port (:mod:`msh.cli.init`).
- ``msh cpa new``: an agreement from a few answers (:mod:`msh.cli.cpa_new`; ``--interactive`` asks them).
- ``msh cpa validate FILE…``, ``msh cpa show FILE``: check agreements and summarise one; ``msh cpa list``:
  the agreements of the running MSH (:mod:`msh.cli.agreements`); ``msh cpa add FILE | remove CPAID |
  reload``: change the agreements of a running MSH without a restart (:mod:`msh.cli.agreement_changes`).
- ``msh export``, ``msh report``, ``msh journal generate`` (:mod:`msh.cli.analytics`) and ``msh revalidate``
  (:mod:`msh.cli.revalidate`): delivery analytics on Spark (the ``analytics`` extra).
- ``msh serve`` (:mod:`msh.cli.serve`), ``send`` (:mod:`msh.cli.send`), ``status`` (:mod:`msh.cli.status`;
  ``--remote`` asks the partner, ebMS2 §7), ``ping`` (:mod:`msh.cli.ping`, ebMS2 §8), ``inbox``
  (:mod:`msh.cli.inbox`): the running MSH. Each takes ``--config FILE`` (or the file named by
  ``MSH_CONFIG``); every setting can be overridden by an environment variable (:mod:`msh.runtime.config`).
  ``send``, ``status`` and ``inbox`` work on the store directly: they need no running server (a message
  sent while no server runs waits in the store and goes out when ``msh serve`` starts).
- ``msh messages`` (sent and received messages, newest first, paged) and ``msh history MESSAGE_ID`` (every
  journal event of one message): :mod:`msh.cli.listing`, on the store through the MSH. ``msh --version``
  prints the installed version.
- ``msh resend MESSAGE_ID…`` (a failed message again, same MessageId, ebMS2 §6.4.1) and ``msh purge`` (remove
  what retention allows, ebMS2 §6.4.6): :mod:`msh.cli.operate`, on the store directly like ``send``.

Bad input never ends in a traceback: a usage error, a bad file or setting, a busy port, a refused
submission print one line on stderr, ``msh <command>: error: <what is wrong, where, what to do>``, and
exit with status 2; Ctrl-C prints ``msh: interrupted`` and exits with 130; an unexpected failure (a bug)
prints one line and exits with 70. ``msh --debug COMMAND`` adds the traceback to each of them. A
command raises its errors (:class:`~msh.errors.ConfigurationError` with one line saying what is wrong and
what to do) and :func:`main` reports them; a command's own "no" (an invalid file, a failed message, an
unknown MessageId, a message not taken) is its return value 1.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
import traceback
from collections.abc import Sequence

from msh.cli.agreements import add_cpa_commands
from msh.cli.analytics import add_analytics_commands
from msh.cli.common import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, Parser
from msh.cli.demo import add_demo_command
from msh.cli.inbox import add_inbox_command
from msh.cli.init import add_init_command
from msh.cli.keys import add_keys_command
from msh.cli.listing import add_history_command, add_messages_command
from msh.cli.messages import add_message_commands
from msh.cli.operate import add_operate_commands
from msh.cli.ping import add_ping_command
from msh.cli.send import add_send_command
from msh.cli.serve import add_serve_command
from msh.cli.status import add_status_command
from msh.errors import MshError

__all__ = ["build_parser", "main"]

_EPILOG = """\
exit status: 0 success; 1 the command's own "no" (see its --help: an invalid file, a failed or unknown
message, a message not taken); 2 a usage or user error, explained in one line on stderr; 3 msh send --wait
without a final outcome; 70 an unexpected failure (a bug); 130 interrupted (Ctrl-C).
--debug (before or after COMMAND) adds the Python traceback to any error line."""


def _version() -> str:
    """The installed package's version (its metadata), or why there is none."""
    try:
        return importlib.metadata.version("pymsh")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (pymsh is not installed; run it from an installed package for its version)"


def _add_debug(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "--debug", action="store_true", default=default, help="show the Python traceback of an error (for reports)"
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``msh`` parser: every command, each with ``--help`` and ``--debug``."""
    parser = Parser(
        prog="msh",
        description=(
            "ebXML Messaging 2.0 Message Service Handler: run an MSH (serve), send messages and follow them\n"
            "(send, status; status --remote asks the partner), ping a partner's MSH (ping), take the received\n"
            "ones (inbox), list every message and read one's journal (messages, history); tools for message\n"
            "files, CPP/CPA agreements and keys (message, cpa, keys), the two-partner demo (demo) and delivery\n"
            "analytics on Spark (export, report, journal, revalidate).\n"
            "Every command has --help."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_debug(parser, False)
    parser.add_argument("--version", action="version", version=f"msh (pymsh) {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (
        add_message_commands,
        add_demo_command,
        add_cpa_commands,
        add_init_command,
        add_serve_command,
        add_send_command,
        add_status_command,
        add_ping_command,
        add_inbox_command,
        add_messages_command,
        add_history_command,
        add_operate_commands,
        add_keys_command,
        add_analytics_commands,
    ):
        add(sub)
    for leaf in _leaves(parser):
        if leaf is not parser:
            _add_debug(leaf, argparse.SUPPRESS)  # also after COMMAND; SUPPRESS keeps a --debug given before it
    return parser


def _leaves(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every subcommand parser under it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += _leaves(child)
    return found


def _command(args: argparse.Namespace) -> str:
    words = ["msh"] + [
        getattr(args, name)
        for name in ("command", "message_command", "cpa_command", "keys_command", "journal_command")
        if getattr(args, name, None)
    ]
    return " ".join(words)


def _say(args: argparse.Namespace, line: str) -> None:
    if getattr(args, "debug", False):
        traceback.print_exc(file=sys.stderr)
    print(f"{_command(args)}: {line}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``msh`` console script: the exit status (see the module docs)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
        sys.stdout.flush()
        return result
    except KeyboardInterrupt:
        _say(args, "interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of our output went away (e.g. `| head`): nothing more to say, to anyone.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except MshError as exc:
        _say(args, f"error: {exc}")
        return EXIT_USAGE
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        _say(args, f"error:{where}: {exc.strerror or exc}")
        return EXIT_USAGE
    except Exception as exc:
        hint = "" if getattr(args, "debug", False) else "; run it again with --debug for the traceback"
        _say(args, f"internal error: {type(exc).__name__}: {exc}{hint} and report it")
        return EXIT_INTERNAL
