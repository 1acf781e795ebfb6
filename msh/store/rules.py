"""The rules every store follows, written once: argument checks and how records change.

The ports (:class:`~msh.store.transaction.Transaction`, :class:`~msh.store.api.Store`) apply them for both
stores (the SQL store and the in-memory twin), so that a rule cannot drift between the two: a bad
argument is refused with the same ``ValueError`` naming it, a record reads back the same on either, an
inbox entry moves forward the same way, a timer becomes claimable at the same moment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import cast

from msh.engine import Evidence, OutboundState, OutboundStatus, Reliability
from msh.errors import ERROR_CODE_CONTEXT, ConfigurationError, ErrorCode, Issue, Severity
from msh.store.blobs import DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE
from msh.store.events import EventKind
from msh.store.records import Direction, InboundMessage, InboxEntry, InboxState, OutboundKind, Timer, TimerKind

__all__ = [
    "acknowledged",
    "aware",
    "chunk_size",
    "claimable_at",
    "delivered",
    "detail",
    "direction",
    "inbox_state",
    "lease",
    "limit",
    "new_entry",
    "outbound_kind",
    "outbound_state",
    "outbound_status",
    "required_aware",
    "text",
    "timer_kind",
]

# --------------------------------------------------------------------------------------------- arguments


def aware(name: str, value: datetime | None) -> datetime | None:
    """``value`` in UTC; ``ValueError`` naming ``name`` for a naive datetime (or a non-datetime)."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ValueError(f"{name} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime (UTC), got the naive {value.isoformat()}")
    return value.astimezone(UTC)


def required_aware(name: str, value: datetime) -> datetime:
    """:func:`aware` for a time that must be given."""
    moment = aware(name, value)
    if moment is None:
        raise ValueError(f"{name} must be a timezone-aware datetime (UTC), not None")
    return moment


def text(name: str, value: object) -> str:
    """``value`` if it is a non-empty string; ``ValueError`` naming ``name`` otherwise."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string")
    return value


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0")
    return value


def sequence_number(name: str, value: object) -> int:
    """``value`` if it is a SequenceNumber (ebMS2 §9.1.1: 0 to 99999999); ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 99_999_999:
        raise ValueError(f"{name} must be a SequenceNumber, an int from 0 to 99999999, not {value!r}")
    return value


def sequence_key(key: object) -> tuple[str, str, str]:
    """``key`` if it names a received sequence: (CPAId, From party, ConversationId), each a non-empty string."""
    if not isinstance(key, tuple) or len(key) != 3:
        raise ValueError("a sequence is named by (cpaid, from_party, conversation_id)")
    return text("cpaid", key[0]), text("from_party", key[1]), text("conversation_id", key[2])


def limit(value: int) -> int:
    """``value`` if it is an int of at least 1; ``ValueError`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("limit must be an int >= 1")
    return value


def lease(value: timedelta) -> timedelta:
    """``value`` if it is a positive timedelta; ``ValueError`` otherwise."""
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise ValueError("lease must be a positive timedelta")
    return value


def chunk_size(value: int | None) -> int:
    """The blob chunk size in bytes (the default for None); :class:`ConfigurationError` out of range."""
    if value is None:
        return DEFAULT_CHUNK_SIZE
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CHUNK_SIZE:
        raise ConfigurationError(f"blob_chunk_size must be a number of bytes from 1 to {MAX_CHUNK_SIZE} (1 MiB)")
    return value


def timer_kind(value: str) -> TimerKind:
    """``value`` as a :class:`TimerKind` (its member or its text); ``ValueError`` naming ``kind``."""
    try:
        return TimerKind(value)
    except ValueError:
        raise ValueError(f"kind must be one of {[k.value for k in TimerKind]}, not {value!r}") from None


def inbox_state(value: str) -> InboxState:
    """``value`` as an :class:`InboxState`; ``ValueError`` naming ``state``."""
    try:
        return InboxState(value)
    except ValueError:
        raise ValueError(f"state must be one of {[s.value for s in InboxState]}, not {value!r}") from None


def outbound_kind(value: str) -> OutboundKind:
    """``value`` as an :class:`OutboundKind` (its member or its text); ``ValueError`` naming ``kind``."""
    try:
        return OutboundKind(value)
    except ValueError:
        raise ValueError(f"kind must be one of {[k.value for k in OutboundKind]}, not {value!r}") from None


def outbound_status(value: str) -> OutboundStatus:
    """``value`` as an :class:`~msh.engine.OutboundStatus` (its member or its text); ``ValueError`` naming
    ``status``."""
    try:
        return OutboundStatus(value)
    except ValueError:
        raise ValueError(f"status must be one of {[s.value for s in OutboundStatus]}, not {value!r}") from None


def direction(value: str | None) -> Direction | None:
    """``value`` as a :class:`Direction` (None stays None); ``ValueError`` naming ``direction``."""
    if value is None:
        return None
    try:
        return Direction(value)
    except ValueError:
        raise ValueError(f"direction must be one of {[d.value for d in Direction]}, not {value!r}") from None


def event_kind(value: str) -> EventKind:
    """``value`` as an :class:`EventKind`; ``ValueError`` naming ``kind`` otherwise (the journal has one list of
    names, :mod:`msh.store.events`)."""
    try:
        return EventKind(value)
    except ValueError:
        raise ValueError(f"kind must be a journal event kind (msh.store.events.EventKind), not {value!r}") from None


_PLAIN: frozenset[type] = frozenset({str, int, bool})
"""Detail values that read back from JSON exactly as given (not float: NaN is refused, not subclasses)."""
_PLAIN_NOT_TEXT: frozenset[type] = frozenset({int, bool})


def detail(value: Mapping[str, object] | None) -> dict[str, object]:
    """``value`` as it will read back from JSON (``ValueError`` if it cannot be stored as JSON); a NUL
    character in its text (a peer's words quoted in a cause, say) is kept as U+FFFD, as neither PostgreSQL's
    text nor its jsonb can hold one (and the events of a transaction are written together when it commits,
    where a refusal would fail every unit of the group commit: msh.store.sql.transaction)."""
    if value is None:
        return {}
    # The usual detail (text, whole numbers, flags, and lists of them: a received message's issues) reads
    # back as it is: no JSON round trip for it (the store's JSON column converts it once, when written).
    if all(type(k) is str and "\x00" not in k and _reads_back(v) for k, v in value.items()):
        return {k: list(v) if type(v) is list else v for k, v in value.items()}
    try:
        result: dict[str, object] = json.loads(json.dumps(dict(value), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"event detail must be JSON-serialisable: {exc}") from None
    return cast(dict[str, object], _without_nul(result))


def _reads_back(value: object) -> bool:
    """Whether ``value`` reads back from JSON as it is: None, text without NUL, a whole number, a flag, or a
    list of those."""
    if type(value) is str:
        return "\x00" not in value
    if type(value) is list:
        return all(v is None or (type(v) is str and "\x00" not in v) or type(v) in _PLAIN_NOT_TEXT for v in value)
    return value is None or type(value) in _PLAIN


def _without_nul(value: object) -> object:
    """``value`` (read from JSON) with each NUL character of its text replaced by U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    return value


def _reliability(value: object) -> Reliability:
    if not isinstance(value, Reliability):
        raise ValueError("state.reliability must be a Reliability (msh.engine)")
    _count("state.reliability.retries", value.retries)
    time_to_live = aware("state.reliability.time_to_live", value.time_to_live)
    if time_to_live is value.time_to_live and isinstance(value.ack_requested, bool) and isinstance(value.hop_ack, bool):
        return value
    return replace(
        value, time_to_live=time_to_live, ack_requested=bool(value.ack_requested), hop_ack=bool(value.hop_ack)
    )


def _failure(value: object) -> Issue | None:
    """The failure as stored: its code, severity and description (where and under which code context
    it was found do not belong to a message's failure, and are not kept)."""
    if value is None:
        return None
    if (
        not isinstance(value, Issue)
        or not isinstance(value.error_code, ErrorCode)
        or not isinstance(value.severity, Severity)
        or not isinstance(value.description, str)
    ):
        raise ValueError("state.failure must be an Issue with an ErrorCode, a Severity and a description")
    if not value.location and value.code_context == ERROR_CODE_CONTEXT:
        return value
    return Issue(value.error_code, value.severity, value.description)


def outbound_state(state: object, kind: OutboundKind | None = None) -> OutboundState:
    """``state`` as a store keeps it: checked (``ValueError`` naming the field), times in UTC.

    What the store keeps is what it reads back, on every store: the engine's state, its times as aware
    UTC datetimes, its failure as code, severity and description, its evidence as the token, and, given the
    row's ``kind``, the Reliability's ``end_to_end`` that kind implies (:func:`with_kind`).
    """
    if not isinstance(state, OutboundState):
        raise ValueError("state must be an OutboundState (msh.engine)")
    text("message_id", state.message_id)
    if not isinstance(state.status, OutboundStatus):
        raise ValueError(f"state.status must be one of {[s.value for s in OutboundStatus]}, not {state.status!r}")
    if state.evidence is not None and not isinstance(state.evidence, Evidence):
        raise ValueError(f"state.evidence must be one of {[e.value for e in Evidence]} or None, not {state.evidence!r}")
    _count("state.attempts", state.attempts)
    _count("state.refused", state.refused)
    if state.refused > state.attempts:
        raise ValueError(
            f"state.refused ({state.refused}) counts attempts and cannot exceed state.attempts ({state.attempts})"
        )
    reliability = _reliability(state.reliability)
    if kind is not None and reliability.end_to_end != (kind is OutboundKind.OWN):
        reliability = replace(reliability, end_to_end=kind is OutboundKind.OWN)
    first_sent_at = aware("state.first_sent_at", state.first_sent_at)
    next_due_at = aware("state.next_due_at", state.next_due_at)
    unreachable_since = aware("state.unreachable_since", state.unreachable_since)
    failure = _failure(state.failure)
    if (
        reliability is state.reliability
        and first_sent_at is state.first_sent_at
        and next_due_at is state.next_due_at
        and unreachable_since is state.unreachable_since
        and failure is state.failure
    ):
        return state
    return replace(
        state,
        reliability=reliability,
        first_sent_at=first_sent_at,
        next_due_at=next_due_at,
        unreachable_since=unreachable_since,
        failure=failure,
    )


def with_kind(state: OutboundState, kind: OutboundKind) -> OutboundState:
    """``state`` with the Reliability's ``end_to_end`` the row's ``kind`` implies, as every store reads it back:
    only the application's own messages are sent end to end; a forward or a signal ends at the next MSH."""
    end_to_end = kind is OutboundKind.OWN
    if state.reliability.end_to_end == end_to_end:
        return state
    return replace(state, reliability=replace(state.reliability, end_to_end=end_to_end))


# ----------------------------------------------------------------------------------------------- records


def new_entry(record: InboundMessage, *, hold: bool = False, offered_at: datetime | None = None) -> InboxEntry:
    """The inbox entry of a stored copy, written with it (docs/design.md §5.3): new, as received (or entering the
    inbox ``offered_at``), or ``hold``: held until its turn in its sequence comes (ebMS2 §9.1.1)."""
    state = InboxState.HELD if hold else InboxState.NEW
    return InboxEntry(record.id, record.message_id, state, offered_at or record.received_at, None, None)


def _not_offered(entry: InboxEntry) -> str:
    if entry.state is InboxState.HELD:
        why = "its turn in its sequence has not come (MessageOrder, ebMS2 §9.1.1); it is offered once the messages "
        return f"inbox entry {entry.id} is held: {why}before it have been"
    return (
        f"inbox entry {entry.id} was abandoned: a message before it in its sequence never arrived (ebMS2 §9); it is "
        "never offered"
    )


def delivered(entry: InboxEntry, at: datetime) -> InboxEntry:
    """The application has been given the message: new -> delivered-to-app; any other entry unchanged.
    ``ValueError`` for an entry the application may not be given (held or abandoned: ebMS2 §9.1.1)."""
    if not entry.state.offered:
        raise ValueError(_not_offered(entry))
    if entry.state is not InboxState.NEW:
        return entry
    return replace(entry, state=InboxState.DELIVERED_TO_APP, delivered_at=at)


def acknowledged(entry: InboxEntry, at: datetime) -> InboxEntry:
    """The application holds the message: -> acknowledged-by-app, once (an entry acknowledged while
    still new is delivered ``at`` as well). ``ValueError`` for an entry the application was never offered
    (held or abandoned: ebMS2 §9.1.1)."""
    if entry.state is InboxState.ACKNOWLEDGED_BY_APP:
        return entry
    if not entry.state.offered:
        raise ValueError(_not_offered(entry))
    return replace(
        entry,
        state=InboxState.ACKNOWLEDGED_BY_APP,
        acknowledged_at=at,
        delivered_at=entry.delivered_at or at,
    )


def claimable_at(timer: Timer) -> datetime:
    """When ``timer`` can be claimed: when it is due, or when its lease ends if that is later (a lease
    that ended means its owner died: the timer is due again for anyone)."""
    if timer.lease_until is not None and timer.lease_until > timer.due_at:
        return timer.lease_until
    return timer.due_at
