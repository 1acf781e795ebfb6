"""The journal's typed columns: who, under which agreement, what, how big, which attempt, how bad, why.

Every journal event (:class:`~msh.store.records.Event`) carries, besides its free-form ``detail``, the facts
the delivery reports group and count by, in columns of their own: this MSH's ``role`` for the message, the
agreement (``cpa_id``), both parties, service, action, conversation, the message's ``size`` in bytes, the
``attempt`` number, and for failures the ``severity`` and ``cause``; a ``submitted`` event also has the
``deadline`` by which the agreement's retry window ends (what "overdue" is measured against).

:class:`MessageFacts` are the facts of the message itself, read from its stored row (or given by the
runtime, which has the row at hand); :func:`attempt_of`, :func:`severity_of` and :func:`cause_of` read the
rest from the event's ``detail`` as the runtime writes it. The same readings bring old stores forward
(revision 0005 spells out its own copy, as migrations are frozen).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from msh.engine.timers import end_to_end_deadline
from msh.store.records import InboundMessage, OutboundKind, OutboundMessage

__all__ = [
    "MessageFacts",
    "Role",
    "attempt_of",
    "cause_of",
    "facts_of_inbound",
    "facts_of_outbound",
    "severity_of",
]


class Role(StrEnum):
    """What this MSH is for the message an event is about (ebMS2 §10: From Party MSH, To Party MSH or
    intermediary)."""

    SENDER = "sender"
    RECEIVER = "receiver"
    INTERMEDIARY = "intermediary"


@dataclass(frozen=True, slots=True)
class MessageFacts:
    """The facts of one message that each of its journal events repeats in typed columns."""

    role: Role | None = None
    cpa_id: str | None = None
    from_party: str | None = None
    to_party: str | None = None
    service: str | None = None
    action: str | None = None
    conversation_id: str | None = None
    size: int | None = None
    deadline: datetime | None = None


def facts_of_outbound(record: OutboundMessage, size: int | None, *, deadline: bool = True) -> MessageFacts:
    """The facts of a sent message (``size``: its stored body's bytes): this MSH sends its own messages and
    signals, and forwards the others as an intermediary. ``deadline`` False leaves the deadline out (only a
    ``submitted`` event carries it, and working it out is not free)."""
    role = Role.INTERMEDIARY if record.kind is OutboundKind.FORWARD else Role.SENDER
    return MessageFacts(
        role=role,
        cpa_id=record.cpaid,
        from_party=record.from_party,
        to_party=record.to_party,
        service=record.service,
        action=record.action,
        conversation_id=record.conversation_id,
        size=size,
        deadline=end_to_end_deadline(record.state.reliability, record.created_at) if deadline else None,
    )


def facts_of_inbound(record: InboundMessage, size: int | None) -> MessageFacts:
    """The facts of a received message, this MSH being its To Party MSH."""
    return MessageFacts(
        role=Role.RECEIVER,
        cpa_id=record.cpaid,
        from_party=record.from_party,
        to_party=record.to_party,
        service=record.service,
        action=record.action,
        conversation_id=record.conversation_id,
        size=size,
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def attempt_of(detail: Mapping[str, object]) -> int | None:
    """The transmission attempt an event is about (``transmission``, ``resent``, ``error-received``)."""
    return _int(detail.get("attempt"))


def _errors(detail: Mapping[str, object]) -> list[Mapping[str, object]]:
    raw = detail.get("errors")
    return [e for e in raw if isinstance(e, Mapping)] if isinstance(raw, list) else []


def severity_of(detail: Mapping[str, object]) -> str | None:
    """``Error`` or ``Warning`` for an event that reports a failure (a DeliveryFailure, an ErrorList)."""
    severity = _text(detail.get("severity"))
    if severity is not None:
        return severity
    severities = [_text(e.get("severity")) for e in _errors(detail)]
    if "Error" in severities:
        return "Error"
    found = next((s for s in severities if s is not None), None)
    if found is not None:
        return found
    first = _first_issue(detail)
    return None if first is None else first[0]


def cause_of(detail: Mapping[str, object]) -> str | None:
    """Why, in one token or phrase: the ebMS errorCode of a failure or of an ErrorList's first Error, the
    transport error of a failed transmission, or the first issue of a refused message."""
    code = _text(detail.get("errorCode"))
    if code is not None:
        return code
    errors = _errors(detail)
    chosen = next((e for e in errors if e.get("severity") == "Error"), errors[0] if errors else None)
    if chosen is not None:
        return _text(chosen.get("errorCode"))
    error = _text(detail.get("error"))
    if error is not None:
        return error
    first = _first_issue(detail)
    return None if first is None else first[1]


def _first_issue(detail: Mapping[str, object]) -> tuple[str, str] | None:
    """(severity, errorCode) of the first issue of a refused message, as ``str(Issue)`` wrote it:
    ``"Error Inconsistent at //Header/...: description"``."""
    issues = detail.get("issues")
    if not isinstance(issues, list) or not issues or not isinstance(issues[0], str):
        return None
    words = issues[0].split(" ", 2)
    if len(words) < 2:
        return None
    return words[0], words[1].rstrip(":")
