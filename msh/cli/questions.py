"""``msh cpa new --interactive``: the answers of :mod:`msh.cli.cpa_new` asked one by one on the terminal.

Each question shows its default in brackets (the flag given, else a sensible value); an empty line takes it.
A bad answer gets one line saying what is wrong and the question again; the end of the input before every
question is answered is a :class:`ConfigurationError`. Reading and writing go through the functions given,
so a test feeds the answers as lines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from msh.cli.answers import RawAnswers, parse_exchange, parse_party
from msh.errors import ConfigurationError

__all__ = ["ask_answers"]

_T = TypeVar("_T")
_ATTEMPTS = 5  # bad answers in a row to one question before giving up


class _Asker:
    def __init__(self, input_line: Callable[[str], str], say: Callable[[str], None]) -> None:
        self.input_line = input_line
        self.say = say

    def ask(self, question: str, default: str | None, read: Callable[[str], _T]) -> _T:
        """``read`` of the answer (or of ``default`` for an empty one); a ValueError or ConfigurationError from
        ``read`` is said in one line and the question asked again."""
        shown = f" [{default}]" if default else ""
        for _ in range(_ATTEMPTS):
            try:
                line = self.input_line(f"{question}{shown}: ").strip()
            except EOFError:
                raise ConfigurationError(f"the input ended before the question {question!r} was answered") from None
            text = line or default or ""
            try:
                return read(text)
            except (ValueError, ConfigurationError) as exc:
                self.say(f"  {exc}")
        raise ConfigurationError(f"no usable answer to {question!r} after {_ATTEMPTS} tries")

    def yes(self, question: str, default: bool) -> bool:
        return self.ask(f"{question} (y/n)", "y" if default else "n", _yes_no)


def _yes_no(text: str) -> bool:
    if text.lower() in ("y", "yes"):
        return True
    if text.lower() in ("n", "no"):
        return False
    raise ValueError(f"{text!r} is not y or n")


def _needed(what: str) -> Callable[[str], str]:
    def read(text: str) -> str:
        if not text:
            raise ValueError(f"{what} is needed")
        return text

    return read


def _party(flag: str) -> Callable[[str], str]:
    def read(text: str) -> str:
        parse_party(text, flag)
        return text

    return read


def _url(text: str) -> str:
    if not text.startswith(("http://", "https://")):
        raise ValueError(f"{text!r} is not an http:// or https:// URL")
    return text


def _actions(text: str) -> list[str]:
    actions = [a.strip() for a in text.split(",") if a.strip()]
    if not actions:
        raise ValueError("name at least one action")
    for action in actions:
        parse_exchange(action)
    return actions


def _days(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def _certificate(text: str) -> str:
    from msh.security.keys import load_certificates

    if not text:
        raise ValueError("a certificate file is needed")
    load_certificates(text)  # ConfigurationError: no such file, not a certificate
    return text


def ask_answers(
    raw: RawAnswers, out: str | None, *, input_line: Callable[[str], str], say: Callable[[str], None]
) -> str:
    """Ask every answer of ``raw`` (updated in place; its values are the defaults) and the file to write;
    return that file's name."""
    q = _Asker(input_line, say)
    say("A new agreement: answer each question (Enter takes the value in brackets).")
    raw.ours = q.ask("our PartyId (PARTYID:TYPE, or a URI)", raw.ours, _party("our PartyId"))
    raw.our_url = q.ask("our endpoint URL", raw.our_url, _url)
    raw.theirs = q.ask("the partner's PartyId (PARTYID:TYPE, or a URI)", raw.theirs, _party("the partner's PartyId"))
    raw.their_url = q.ask("the partner's endpoint URL", raw.their_url, _url)
    raw.service = q.ask("the service (a URI)", raw.service, _needed("a service"))
    raw.actions = q.ask(
        "actions, comma-separated (ACTION for one we send, ACTION:receive for one the partner sends)",
        ",".join(raw.actions) or None,
        _actions,
    )
    raw.reliable = q.yes("reliable (acknowledgments, duplicate elimination, resends)?", raw.reliable)
    raw.sign = q.yes("signed?", raw.sign)
    raw.encrypt = q.yes("payloads encrypted?", raw.encrypt)
    raw.sync_acks = q.yes("acknowledgments on the same connection (sync)?", raw.sync_acks)
    tls = any(url.startswith("https://") for url in (raw.our_url, raw.their_url))
    if tls or raw.sign or raw.encrypt or raw.cert or raw.partner_cert:
        say("https, signing and encryption need both certificates (PEM files).")
        raw.cert = q.ask("our certificate file", raw.cert, _certificate)
        raw.partner_cert = q.ask("the partner's certificate file", raw.partner_cert, _certificate)
    default_id = f"cpa-{parse_party(raw.ours, 'our PartyId')[0]}-{parse_party(raw.theirs, 'their PartyId')[0]}"
    raw.cpa_id = q.ask("the agreement's cpaid", raw.cpa_id or default_id, _needed("a cpaid"))
    raw.days = q.ask("valid for how many days", str(raw.days), _days)
    return q.ask("write it to which file", out, _needed("a file name"))
