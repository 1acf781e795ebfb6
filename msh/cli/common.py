"""What the commands share: exit statuses, argument types, declaring a command, and the MSH of ``--config``."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NoReturn, TypeAlias, TypeVar

from msh.errors import ConfigurationError

if TYPE_CHECKING:
    from msh.runtime.msh import Msh

__all__ = [
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FINAL",
    "EXIT_USAGE",
    "Handler",
    "Parser",
    "Subcommands",
    "add_command",
    "fraction",
    "non_empty",
    "positive_int",
    "readable_files",
    "running_msh",
    "seconds",
]

EXIT_USAGE = 2
"""Exit status of a usage or user error (bad argument, file, setting, busy port, refused submission)."""
EXIT_NOT_FINAL = 3
"""Exit status of ``msh send --wait`` when the message has no final outcome in time."""
EXIT_INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT), except for ``msh serve``, for which stopping is normal."""
EXIT_INTERNAL = 70
"""Exit status of an unexpected failure (a bug: please report it with the ``--debug`` traceback)."""

Handler = Callable[[argparse.Namespace], int]
"""A command: the parsed arguments in, the exit status out (errors are raised, :func:`msh.cli.main` reports them)."""


class Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line: ``msh inbox: error: argument --limit: ... (see msh inbox --help)``."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


Subcommands: TypeAlias = "argparse._SubParsersAction[Parser]"
"""What ``add_subparsers`` returns (argparse does not export its type), for the functions adding commands."""

# ------------------------------------------------------------------------------------------ declaring


def add_command(
    sub: Subcommands, name: str, handler: Handler, *, help: str, description: str, config: bool = False
) -> Parser:
    """Add the command ``name`` (its ``help`` line, its ``--help`` ``description``) run by ``handler``.

    ``config``: the command works on a running MSH and takes ``--config FILE`` (see :func:`running_msh`).
    """
    parser = sub.add_parser(name, help=help, description=description)
    if config:
        parser.add_argument(
            "--config",
            metavar="FILE",
            default=None,
            help="the MSH's TOML settings file (default: $MSH_CONFIG); MSH_<SECTION>_<KEY> variables override it",
        )
    parser.set_defaults(func=handler)
    return parser


@contextlib.contextmanager
def running_msh(args: argparse.Namespace, *, keys: bool = True) -> Iterator[Msh]:
    """The MSH of the settings named by ``--config`` (or ``MSH_CONFIG``), closed on the way out; ``keys``
    False for a command that only reads the store (its keys, and their passphrase, are not needed)."""
    from msh.runtime.config import load_settings
    from msh.runtime.msh import Msh

    msh = Msh(load_settings(args.config), keys=keys)
    try:
        yield msh
    finally:
        msh.close()


def readable_files(paths: Sequence[str]) -> None:
    """Refuse, in one line, a message file that cannot be read (before any report is printed)."""
    for path in paths:
        if os.path.isdir(path):
            raise ConfigurationError(f"{path} is a folder; give the message files in it (e.g. {path}/*.http)")
        if not os.path.exists(path):
            raise ConfigurationError(f"{path}: no such file; check the path")
        if not os.access(path, os.R_OK):
            raise ConfigurationError(f"{path}: permission denied; make the file readable or copy it")


# ------------------------------------------------------------------------------------ argument types

_N = TypeVar("_N", int, float)


def _number(convert: Callable[[str], _N], fits: Callable[[_N], bool], not_one: str, unfit: str) -> Callable[[str], _N]:
    """An argparse type reading a number with ``convert`` that ``fits``; ``not_one`` and ``unfit`` are the
    messages (``{text}``: the argument, ``{value}``: the number read)."""

    def read(text: str) -> _N:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(not_one.format(text=repr(text))) from None
        if not fits(value):
            raise argparse.ArgumentTypeError(unfit.format(text=text, value=value))
        return value

    return read


positive_int = _number(
    int,
    lambda value: value >= 1,
    "{text} is not a whole number; give one of at least 1",
    "{value} is too small; give a whole number of at least 1",
)
"""An argparse type: a whole number of at least 1."""

seconds = _number(
    float,
    lambda value: math.isfinite(value) and value >= 0,
    "{text} is not a number of seconds (e.g. 30 or 2.5)",
    "{text} is not a number of seconds of 0 or more (e.g. 30 or 2.5)",
)
"""An argparse type: a number of seconds, 0 or more."""

fraction = _number(
    float,
    lambda value: 0 <= value < 1,
    "{text} is not a number; give a rate like 0.15",
    "{text} is not a rate from 0 up to 1 (exclusive); give e.g. 0.15",
)
"""An argparse type: a rate from 0 up to (not including) 1."""


def non_empty(value: str) -> str:
    """An argparse type: a value that is not empty (nor only spaces)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value
