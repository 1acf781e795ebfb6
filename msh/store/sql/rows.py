"""The row mapping of the SQL store: records to column values and rows back to records, in one place.

A sent message's state is the engine's :class:`~msh.engine.OutboundState`; its columns are those of
``outbound_messages`` (:mod:`msh.store.schema`): the :class:`~msh.engine.Reliability` as ``retries``,
``retry_interval``, ``first_resend_timeout``, ``persist_duration`` (the durations as canonical xs:duration
text, :class:`~msh.store.schema.XsDurationText`), ``time_to_live``, ``ack_requested``, ``ack_actor``,
``hop_ack``, ``reliable_messaging_method`` (its value, ``ebXML`` or ``Transport``); the status and its
evidence as their tokens; the failure :class:`~msh.errors.Issue` as ``failure_code``, ``failure_severity``,
``failure_description``. The message's
:class:`~msh.store.records.OutboundKind` is ``kind``, as its token; the Reliability's ``end_to_end`` is not
stored: it is true exactly for the application's own messages (kind ``own``). Times go through
:class:`~msh.store.schema.UtcDateTime` (aware UTC both ways).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, Final, TypeVar, cast

from msh.engine import Evidence, OutboundState, OutboundStatus, Reliability, ReliableMessagingMethod
from msh.errors import ErrorCode, Issue, Severity
from msh.store import records
from msh.store.errors import StoreError

__all__ = [
    "EVENT_ROW_NAMES",
    "OUTBOUND_STATE_COLUMNS",
    "blob_bytes",
    "event_from_row",
    "event_row",
    "inbound_from_row",
    "inbound_values",
    "inbox_from_row",
    "inbox_values",
    "outbound_from_row",
    "outbound_values",
    "state_from_row",
    "state_values",
    "timer_from_row",
]

Row = Mapping[Any, Any]
_R = TypeVar("_R")

OUTBOUND_STATE_COLUMNS: Final = (
    "message_id",
    "retries",
    "retry_interval",
    "first_resend_timeout",
    "persist_duration",
    "time_to_live",
    "ack_requested",
    "ack_actor",
    "hop_ack",
    "reliable_messaging_method",
    "status",
    "attempts",
    "first_sent_at",
    "refused_attempts",
    "next_due_at",
    "failure_code",
    "failure_severity",
    "failure_description",
    "evidence",
    "receipt_problem",
    "unreachable_since",
)
"""The columns of ``outbound_messages`` that hold the engine's state of the message."""


_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    """The field names of the record class ``cls`` (looked up once)."""
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = tuple(f.name for f in fields(cls))
    return found


def _columns(record: object, *skip: str) -> dict[str, object]:
    """Each field of ``record`` as the column of the same name (but those in ``skip``)."""
    return {name: getattr(record, name) for name in _fields(type(record)) if name not in skip}


def _record(cls: Callable[..., _R], row: Row, **special: object) -> _R:
    """A ``cls`` record from the columns named as its fields; ``special``: the fields read otherwise."""
    names = _fields(cast(type, cls))
    return cls(**{name: row[name] for name in names if name not in special}, **special)


# ----------------------------------------------------------------------------------------------- outbound


def state_values(state: OutboundState) -> dict[str, object]:
    """The columns of ``state`` (:data:`OUTBOUND_STATE_COLUMNS`)."""
    r = state.reliability
    failure = state.failure
    return {
        "message_id": state.message_id,
        "retries": r.retries,
        "retry_interval": r.retry_interval,
        "first_resend_timeout": r.first_resend_timeout,
        "persist_duration": r.persist_duration,
        "time_to_live": r.time_to_live,
        "ack_requested": r.ack_requested,
        "ack_actor": r.ack_actor,
        "hop_ack": r.hop_ack,
        "reliable_messaging_method": r.method.value,
        "status": state.status.value,
        "attempts": state.attempts,
        "first_sent_at": state.first_sent_at,
        "refused_attempts": state.refused,
        "next_due_at": state.next_due_at,
        "failure_code": None if failure is None else failure.error_code.value,
        "failure_severity": None if failure is None else failure.severity.value,
        "failure_description": None if failure is None else failure.description,
        "evidence": None if state.evidence is None else state.evidence.value,
        "receipt_problem": state.receipt_problem,
        "unreachable_since": state.unreachable_since,
    }


def state_from_row(row: Row) -> OutboundState:
    """The engine's state of a sent message from its row (:data:`OUTBOUND_STATE_COLUMNS` and ``kind``)."""
    code = row["failure_code"]
    failure = None
    if code is not None:
        severity = row["failure_severity"]
        failure = Issue(
            ErrorCode(code),
            Severity.ERROR if severity is None else Severity(severity),
            row["failure_description"] or "",
        )
    return OutboundState(
        message_id=row["message_id"],
        status=OutboundStatus(row["status"]),
        reliability=Reliability(
            retries=row["retries"],
            retry_interval=row["retry_interval"],
            first_resend_timeout=row["first_resend_timeout"],
            persist_duration=row["persist_duration"],
            time_to_live=row["time_to_live"],
            ack_requested=bool(row["ack_requested"]),
            ack_actor=row["ack_actor"],
            hop_ack=bool(row["hop_ack"]),
            end_to_end=row["kind"] == records.OutboundKind.OWN.value,
            method=ReliableMessagingMethod(row["reliable_messaging_method"]),
        ),
        attempts=row["attempts"],
        first_sent_at=row["first_sent_at"],
        refused=row["refused_attempts"],
        next_due_at=row["next_due_at"],
        failure=failure,
        evidence=None if row["evidence"] is None else Evidence(row["evidence"]),
        receipt_problem=row["receipt_problem"],
        unreachable_since=row["unreachable_since"],
    )


def outbound_values(record: records.OutboundMessage) -> dict[str, object]:
    """Every column of the row of ``record``."""
    return {**_columns(record, "state", "kind"), "kind": record.kind.value, **state_values(record.state)}


def outbound_from_row(row: Row) -> records.OutboundMessage:
    return _record(
        records.OutboundMessage,
        row,
        body_blob_id=int(row["body_blob_id"]),
        state=state_from_row(row),
        kind=records.OutboundKind(row["kind"]),
    )


# ------------------------------------------------------------------------------------ inbound and inbox


def inbound_values(record: records.InboundMessage) -> dict[str, object]:
    """The columns of a new stored copy (its ``id`` is the database's)."""
    return _columns(record, "id")


def inbound_from_row(row: Row) -> records.InboundMessage:
    ack = row["ack_envelope"]
    return _record(
        records.InboundMessage,
        row,
        id=int(row["id"]),
        duplicate_elimination=bool(row["duplicate_elimination"]),
        body_blob_id=int(row["body_blob_id"]),
        ack_envelope=None if ack is None else bytes(ack),
    )


def inbox_values(entry: records.InboxEntry) -> dict[str, object]:
    """The columns of an inbox entry (its id is its stored copy's, ``inbound_id``)."""
    return {**_columns(entry, "id", "state"), "inbound_id": entry.id, "state": entry.state.value}


def inbox_from_row(row: Row) -> records.InboxEntry:
    return _record(records.InboxEntry, row, id=int(row["inbound_id"]), state=records.InboxState(row["state"]))


# ----------------------------------------------------------------------------------------- timers, events


def timer_from_row(row: Row) -> records.Timer:
    return _record(records.Timer, row, id=int(row["id"]), kind=records.TimerKind(row["kind"]))


EVENT_ROW_NAMES: Final = tuple(f.name for f in fields(records.Event))
"""The columns of a journal entry in the order :func:`event_row` gives them (the event's fields, which the
``events`` table's columns are named after)."""
_EVENT_AFTER_ID: Final = operator.attrgetter(*EVENT_ROW_NAMES[1:])
_DIRECTION: Final = EVENT_ROW_NAMES.index("direction")


def event_row(event: records.Event, event_id: int) -> list[object]:
    """The columns of a new journal entry with the id ``event_id``, in the order of :data:`EVENT_ROW_NAMES`."""
    row: list[object] = [event_id, *_EVENT_AFTER_ID(event)]
    direction = event.direction
    if direction is not None:
        row[_DIRECTION] = direction.value
    return row


def event_from_row(row: Row) -> records.Event:
    direction = row["direction"]
    return _record(
        records.Event,
        row,
        id=int(row["id"]),
        direction=None if direction is None else records.Direction(direction),
        detail=dict(row["detail"]),
    )


def blob_bytes(value: object) -> bytes | None:
    """A chunk as read back (drivers give bytes, memoryview or bytearray)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise StoreError(f"a blob chunk was read back as {type(value).__name__}, not bytes")
