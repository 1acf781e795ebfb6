"""The answers an agreement is written from (:mod:`cpa.authoring`), as ``msh cpa new`` and ``msh init`` take
them: the flags of :func:`add_agreement_arguments`, read into :class:`RawAnswers`, checked by
:func:`build_answers`, written by :func:`write_agreement`."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from msh.cli.common import positive_int
from msh.errors import ConfigurationError

if TYPE_CHECKING:
    from cryptography import x509

    from cpa.authoring import Answers, Exchange

__all__ = [
    "RawAnswers",
    "add_agreement_arguments",
    "build_answers",
    "parse_exchange",
    "parse_party",
    "raw_from_args",
    "write_agreement",
]

_URI = re.compile(r"^(urn|https?):", re.IGNORECASE)


@dataclass(slots=True)
class RawAnswers:
    """The answers as typed (flags or terminal), before :func:`build_answers` reads them."""

    ours: str | None = None
    theirs: str | None = None
    our_url: str | None = None
    their_url: str | None = None
    service: str | None = None
    service_type: str | None = None
    actions: list[str] = field(default_factory=list)
    reliable: bool = False
    sign: bool = False
    encrypt: bool = False
    sync_acks: bool = False
    cert: str | None = None
    partner_cert: str | None = None
    cpa_id: str | None = None
    days: int = 365


def parse_party(value: str, flag: str) -> tuple[str, str | None]:
    """``PARTYID[:TYPE]`` as (PartyId, type). A value that is itself a URI (``urn:...``, ``http(s):...``) is
    an untyped PartyId (ebMS2 §3.1.1.1: a PartyId without type must be a URI); otherwise the first ``:``
    separates the PartyId from its type (``123456789:urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088``)."""
    value = value.strip()
    if not value:
        raise ConfigurationError(f"{flag} is empty; give PARTYID or PARTYID:TYPE")
    if _URI.match(value):
        return value, None
    party_id, colon, party_type = value.partition(":")
    if colon and not (party_id and party_type):
        raise ConfigurationError(f"{flag} {value!r} has an empty PartyId or type; give PARTYID or PARTYID:TYPE")
    # ebMS2 §3.1.1.1: a PartyId without a type attribute must be a URI.
    if not colon:
        raise ConfigurationError(
            f"{flag} {value!r} is not a URI, so it needs its type: give PARTYID:TYPE "
            "(e.g. 123456789:urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088)"
        )
    return party_id, party_type


def parse_exchange(value: str) -> Exchange:
    """``ACTION[:send|receive]`` (send: our party sends it; the default)."""
    from cpa.authoring import Direction, Exchange

    action, colon, direction = value.strip().rpartition(":")
    if not colon or direction not in {d.value for d in Direction}:
        action, direction = value.strip(), Direction.SEND.value
    if not action:
        raise ConfigurationError(f"--action {value!r} names no action; give ACTION or ACTION:send|receive")
    return Exchange(action, Direction(direction))


def _certificate(path: str | None, flag: str) -> x509.Certificate | None:
    from msh.security.keys import load_certificates

    if path is None:
        return None
    try:
        return load_certificates(path)[0]
    except ConfigurationError as exc:
        raise ConfigurationError(f"{flag}: {exc}") from None


def build_answers(
    raw: RawAnswers, *, now: datetime | None = None, our_certificate: x509.Certificate | None = None
) -> Answers:
    """:class:`~cpa.authoring.Answers` from ``raw``; :class:`ConfigurationError` (one line) naming what is
    missing or wrong. ``our_certificate`` stands for ``--cert`` (``msh init`` makes it)."""
    from cpa.authoring import Answers, PartyAnswers, answer_problems

    missing = [
        flag
        for flag, value in (
            ("--ours", raw.ours),
            ("--theirs", raw.theirs),
            ("--our-url", raw.our_url),
            ("--their-url", raw.their_url),
            ("--service", raw.service),
            ("--action", raw.actions),
        )
        if not value
    ]
    if missing:
        raise ConfigurationError(
            f"missing {', '.join(missing)}: give {'it' if len(missing) == 1 else 'them'} (or use --interactive)"
        )
    assert raw.ours and raw.theirs and raw.our_url and raw.their_url and raw.service  # for mypy: checked above
    ours, theirs = parse_party(raw.ours, "--ours"), parse_party(raw.theirs, "--theirs")
    start = (now or datetime.now(UTC)).replace(hour=0, minute=0, second=0, microsecond=0)
    answers = Answers(
        ours=PartyAnswers(*ours, raw.our_url, our_certificate or _certificate(raw.cert, "--cert")),
        theirs=PartyAnswers(*theirs, raw.their_url, _certificate(raw.partner_cert, "--partner-cert")),
        service=raw.service,
        service_type=raw.service_type,
        exchanges=tuple(parse_exchange(a) for a in raw.actions),
        cpa_id=raw.cpa_id or f"cpa-{ours[0]}-{theirs[0]}",
        start=start,
        end=start + timedelta(days=raw.days),
        reliable=raw.reliable,
        sign=raw.sign,
        encrypt=raw.encrypt,
        sync_acks=raw.sync_acks,
    )
    problems = answer_problems(answers)
    if problems:
        hint = " (--cert and --partner-cert)" if any("certificate" in p for p in problems) else ""
        raise ConfigurationError("; ".join(problems) + hint)
    return answers


def write_agreement(answers: Answers, out: Path) -> None:
    """Write the agreement to ``out``, never over an existing file, and check that it loads as the MSH
    loads agreements (a failure here is a bug of :mod:`cpa.authoring`)."""
    from cpa import load
    from cpa.authoring import agreement_bytes

    data = agreement_bytes(answers)
    load(data)  # raises CpaError, reported as an internal error: the answers were checked already
    try:
        with open(out, "xb") as handle:
            handle.write(data)
    except FileExistsError:
        raise ConfigurationError(
            f"{out} exists; choose another --out or move it away (it is never overwritten)"
        ) from None


def raw_from_args(args: argparse.Namespace) -> RawAnswers:
    """The answers given as flags (see :func:`add_agreement_arguments`)."""
    return RawAnswers(
        ours=getattr(args, "ours", None),
        theirs=args.theirs,
        our_url=getattr(args, "our_url", None),
        their_url=args.their_url,
        service=args.service,
        service_type=args.service_type,
        actions=list(args.action or []),
        reliable=args.reliable,
        sign=args.sign,
        encrypt=args.encrypt,
        sync_acks=args.sync_acks,
        cert=getattr(args, "cert", None),
        partner_cert=args.partner_cert,
        cpa_id=args.cpa_id,
        days=args.days,
    )


def add_agreement_arguments(parser: argparse.ArgumentParser, *, partner_flags: tuple[str, ...] = ("--theirs",)) -> None:
    """The answers about the partner and the exchange, shared by ``msh cpa new`` and ``msh init``."""
    parser.add_argument(
        *partner_flags,
        dest="theirs",
        metavar="PARTYID[:TYPE]",
        help="the partner's PartyId (and its type, unless the PartyId is a URI)",
    )
    parser.add_argument("--their-url", metavar="URL", help="where the partner receives messages (http:// or https://)")
    parser.add_argument("--service", metavar="S", help="the service (a URI, or give --service-type)")
    parser.add_argument(
        "--service-type", metavar="T", help="the service's type attribute, for a service that is not a URI"
    )
    parser.add_argument(
        "--action",
        action="append",
        metavar="A[:send|receive]",
        help=(
            "an action of the service and who sends it (send: we do, the default; receive: the partner does); "
            "repeat for each"
        ),
    )
    parser.add_argument(
        "--reliable", action="store_true", help="acknowledgments, duplicate elimination and resends (5 every 30 s)"
    )
    parser.add_argument(
        "--sign", action="store_true", help="sign messages and signals (rsa-sha256; needs both certificates)"
    )
    parser.add_argument(
        "--encrypt", action="store_true", help="encrypt payloads for the receiver (aes256-gcm; needs both certificates)"
    )
    parser.add_argument(
        "--sync-acks", action="store_true", help="acknowledgments come back on the same HTTP connection"
    )
    parser.add_argument(
        "--partner-cert", metavar="PEM", help="the partner's certificate (needed for https, --sign, --encrypt)"
    )
    parser.add_argument("--cpa-id", metavar="ID", help="the agreement's cpaid (default: cpa-OURS-THEIRS)")
    parser.add_argument(
        "--days", type=positive_int, default=365, metavar="N", help="validity in days from today (default 365)"
    )
