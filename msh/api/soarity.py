"""Exactly-once requests (SOA-Rity for HTTP; Certified HTTP): the rules, as pure functions.

A reliable request carries ``Message-ID`` (a URI the application chooses, unique for all time) and
``MsgCreate`` (the RFC 1123 date, in GMT, of its first try, repeated unchanged on every retry). The
resource remembers each pair for ``window`` with the application that sent it and the response it gave.
:func:`decide` says what a request gets, from the pair, the record of its Message-ID (if any) and now:

=======================================================  =========================================================
request                                                  answer (SOA-Rity for HTTP §4, §7)
=======================================================  =========================================================
MsgCreate without Message-ID, or either unreadable        400, ``SOARITY: supported``
Message-ID without MsgCreate                              not a reliable request: processed as an ordinary one
MsgCreate outside the time window                         403, ``SOARITY: MsgCreate/Message-ID Rejected``
known Message-ID, another MsgCreate                       403, ``SOARITY: MsgCreate/Message-ID Rejected``
known pair from another authenticated application         403, ``SOARITY: MsgCreate/Message-ID Rejected``
known pair, materially different request                  400 (the pair may not be reused)
known pair, same request                                  the recorded response (status and body), no new work
new pair                                                  processed; response recorded in the same transaction
resource that does not honour the headers                 412, ``SOARITY: unsupported``
=======================================================  =========================================================

The time window is ``[now - window, now + clock_skew]``. "Materially different" compares a fingerprint
of the method, the path and the request's content (:func:`fingerprint`), not headers such as Date,
User-Agent or Authorization.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Final

from cpa.duration import XsDuration
from msh.store.app_records import AppRequest

__all__ = [
    "REJECTED",
    "SOARITY",
    "SUPPORTED",
    "UNSUPPORTED",
    "Decision",
    "Outcome",
    "Pair",
    "decide",
    "fingerprint",
    "format_msg_create",
    "pair_of",
    "parse_pair",
]

SOARITY: Final = "SOARITY"
SUPPORTED: Final = "supported"
UNSUPPORTED: Final = "unsupported"
REJECTED: Final = "MsgCreate/Message-ID Rejected"

_MONTHS: Final = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# RFC 2616 §3.3.1 rfc1123-date, in GMT; the weekday may be left out (SOA-Rity for HTTP's own example has none).
_RFC1123: Final = re.compile(
    r"(?:(Mon|Tue|Wed|Thu|Fri|Sat|Sun), )?(\d{1,2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) "
    r"(\d{2}):(\d{2}):(\d{2}) GMT"
)
_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[!-~]+")  # RFC 2396 absoluteURI: a scheme, no spaces
_MAX_ID: Final = 1000


@dataclass(frozen=True, slots=True)
class Pair:
    """A request's Message-ID and MsgCreate."""

    message_id: str
    msg_create: datetime


class Outcome(Enum):
    """What :func:`decide` says."""

    PROCESS = "process"  # new pair: do the work, record the response
    REPEAT = "repeat"  # known pair, same request: the recorded response
    REJECTED = "rejected"  # 403 MsgCreate/Message-ID Rejected
    DIFFERENT = "different"  # 400: the pair was used for another request


@dataclass(frozen=True, slots=True)
class Decision:
    """:func:`decide`'s answer and, for a refusal, why (one line for the problem's detail)."""

    outcome: Outcome
    why: str = ""


class BadPair(ValueError):
    """The SOA-Rity headers cannot be read (400)."""


def format_msg_create(moment: datetime) -> str:
    """``moment`` as an RFC 1123 date in GMT (what a client sends as MsgCreate)."""
    m = moment.astimezone(UTC)
    return f"{_DAYS[m.weekday()]}, {m.day:02d} {_MONTHS[m.month - 1]} {m.year:04d} {m:%H:%M:%S} GMT"


def _msg_create(text: str) -> datetime:
    match = _RFC1123.fullmatch(text.strip())
    if match is None:
        raise BadPair(
            f"MsgCreate {text!r} is not an RFC 1123 date in GMT; write e.g. {format_msg_create(datetime.now(UTC))!r}"
        )
    weekday, day, month, year, hour, minute, second = match.groups()
    try:
        moment = datetime(
            int(year), _MONTHS.index(month) + 1, int(day), int(hour), int(minute), int(second), tzinfo=UTC
        )
    except ValueError as exc:
        raise BadPair(f"MsgCreate {text!r} is not a valid date ({exc})") from None
    if weekday is not None and _DAYS[moment.weekday()] != weekday:
        raise BadPair(f"MsgCreate {text!r}: {day} {month} {year} is a {_DAYS[moment.weekday()]}, not a {weekday}")
    return moment


def parse_pair(message_id: str | None, msg_create: str | None) -> Pair | None:
    """The pair of a request's headers; None when it is not a reliable request (no MsgCreate);
    :class:`BadPair` for MsgCreate without Message-ID or a value that cannot be read."""
    if msg_create is None:
        return None
    if message_id is None or not message_id.strip():
        raise BadPair("MsgCreate was sent without Message-ID; send both (Message-ID: a URI such as urn:uuid:...)")
    mid = message_id.strip()
    if len(mid) > _MAX_ID or not _URI.fullmatch(mid):
        raise BadPair(
            f"Message-ID {mid[:80]!r} is not a URI (at most {_MAX_ID} characters); send e.g. urn:uuid:<a new UUID>"
        )
    return Pair(mid, _msg_create(msg_create))


def pair_of(message_id: str | None, msg_create: datetime | None) -> Pair | None:
    """The pair of a request that carries it as values (the SOAP interface: ``requestId`` and
    ``msgCreate``); None when it has no MsgCreate; :class:`BadPair` as :func:`parse_pair`."""
    if msg_create is None:
        return None
    if message_id is None or not message_id.strip():
        raise BadPair("msgCreate was sent without requestId; send both (requestId: a URI such as urn:uuid:...)")
    mid = message_id.strip()
    if len(mid) > _MAX_ID or not _URI.fullmatch(mid):
        raise BadPair(f"requestId {mid[:80]!r} is not a URI (at most {_MAX_ID} characters)")
    if msg_create.tzinfo is None or msg_create.utcoffset() is None:
        raise BadPair("msgCreate needs its time zone (Z for UTC)")
    return Pair(mid, msg_create.astimezone(UTC).replace(microsecond=0))


def fingerprint(method: str, path: str, content: bytes) -> str:
    """What makes a request materially itself: its method, its path and its content (canonical form)."""
    digest = hashlib.sha256()
    for piece in (method.upper().encode(), path.encode("utf-8", "surrogateescape"), content):
        digest.update(len(piece).to_bytes(8, "big"))
        digest.update(piece)
    return "sha256:" + digest.hexdigest()


def decide(
    pair: Pair,
    application: str,
    request_fingerprint: str,
    known: AppRequest | None,
    *,
    now: datetime,
    window: timedelta,
    clock_skew: timedelta,
) -> Decision:
    """What a reliable request gets (see the module docs)."""
    if pair.msg_create < now - window:
        return Decision(
            Outcome.REJECTED,
            f"MsgCreate {format_msg_create(pair.msg_create)} is older than the time window "
            f"({XsDuration.from_timedelta(window)}, api.window): the pair "
            "cannot be remembered that long; do not repeat it, send a new Message-ID with a new MsgCreate",
        )
    if pair.msg_create > now + clock_skew:
        return Decision(
            Outcome.REJECTED,
            f"MsgCreate {format_msg_create(pair.msg_create)} is in the future (now is {format_msg_create(now)}); "
            "check the client's clock",
        )
    if known is None:
        return Decision(Outcome.PROCESS)
    if known.application != application:
        return Decision(Outcome.REJECTED, f"Message-ID {pair.message_id} was sent by another application")
    if known.msg_create != pair.msg_create:
        return Decision(
            Outcome.REJECTED,
            f"Message-ID {pair.message_id} was first sent with MsgCreate {format_msg_create(known.msg_create)}; "
            "a repeat must carry the same MsgCreate",
        )
    if known.fingerprint != request_fingerprint:
        return Decision(
            Outcome.DIFFERENT,
            f"Message-ID {pair.message_id} with this MsgCreate was used for a materially different request; "
            "use a new Message-ID for a new request",
        )
    return Decision(Outcome.REPEAT)
