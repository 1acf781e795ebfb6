"""``msh cpa new``: a CPP/CPA 2.0 agreement written from a few answers (:mod:`cpa.authoring`), given as flags
(:mod:`msh.cli.answers`) or, with ``--interactive``, asked on the terminal (:mod:`msh.cli.questions`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from msh.cli.answers import add_agreement_arguments, build_answers, raw_from_args, write_agreement
from msh.cli.common import Subcommands, add_command
from msh.errors import ConfigurationError

__all__ = ["add_cpa_new_command"]


def _new(args: argparse.Namespace) -> int:
    raw = raw_from_args(args)
    out = args.out
    if args.interactive:
        from msh.cli.questions import ask_answers

        out = ask_answers(raw, out, input_line=input, say=lambda line: print(line, file=sys.stderr))
    if not out:
        raise ConfigurationError("missing --out: name the file to write the agreement to")
    if os.path.exists(out):
        raise ConfigurationError(f"{out} exists; choose another --out or move it away (it is never overwritten)")
    answers = build_answers(raw)
    write_agreement(answers, Path(out))
    print(
        f"wrote {out} (cpaid {answers.cpa_id}, valid until {answers.end.date().isoformat()}); "
        f"check it with: msh cpa validate {out}"
    )
    return 0


def add_cpa_new_command(cpa_sub: Subcommands) -> None:
    """Add ``msh cpa new`` to the ``msh cpa`` subcommands."""
    new = add_command(
        cpa_sub,
        "new",
        _new,
        help="write an agreement from a few answers",
        description=(
            "Write a CPP/CPA 2.0 agreement between our party and a partner from a few answers: both PartyIds, both "
            "endpoint URLs, the service and its actions (who sends which), and whether messages are reliable, "
            "signed, encrypted and acknowledged synchronously. An https URL means TLS with client certificates, so "
            "https, --sign and --encrypt each need both certificates (--cert, --partner-cert). The file is "
            "schema-valid, accepted by 'msh cpa validate' and never written over an existing one. With "
            "--interactive the same questions are asked on the terminal, the flags given being the defaults."
        ),
    )
    new.add_argument("--ours", metavar="PARTYID[:TYPE]", help="our PartyId (and its type, unless the PartyId is a URI)")
    new.add_argument("--our-url", metavar="URL", help="where we receive messages (http:// or https://)")
    add_agreement_arguments(new)
    new.add_argument("--cert", metavar="PEM", help="our certificate (needed for https, --sign, --encrypt)")
    new.add_argument("--out", metavar="FILE", help="the file to write (never overwritten)")
    new.add_argument("--interactive", action="store_true", help="ask the questions on the terminal")
