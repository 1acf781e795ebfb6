"""The row mapping of the SQL store: records to column values and rows back to records, in one place.

A sent message's state is the engine's :class:`~msh.engine.OutboundState`; its columns are those of
``outbound_messages`` (:mod:`msh.store.schema`): the :class:`~msh.engine.Reliability` as ``retries``,
``retry_interval``, ``first_resend_timeout``, ``persist_duration`` (the durations as canonical xs:duration
text, :class:`~msh.store.schema.XsDurationText`), ``time_to_live``, ``ack_requested``, ``ack_actor``; the
status as its token; the failure :class:`~msh.errors.Issue` as ``failure_code``, ``failure_severity``,
``failure_description``. Times go through :class:`~msh.store.schema.UtcDateTime` (aware UTC both ways).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from msh.engine import OutboundState, OutboundStatus, Reliability
from msh.errors import ErrorCode, Issue, Severity
from msh.store import records
from msh.store.errors import StoreError

__all__ = [
    "OUTBOUND_STATE_COLUMNS",
    "blob_bytes",
    "event_from_row",
    "event_values",
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

OUTBOUND_STATE_COLUMNS: Final = (
    "message_id",
    "retries",
    "retry_interval",
    "first_resend_timeout",
    "persist_duration",
    "time_to_live",
    "ack_requested",
    "ack_actor",
    "status",
    "attempts",
    "first_sent_at",
    "reached_peer",
    "next_due_at",
    "failure_code",
    "failure_severity",
    "failure_description",
)
"""The columns of ``outbound_messages`` that hold the engine's state of the message."""


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
        "status": state.status.value,
        "attempts": state.attempts,
        "first_sent_at": state.first_sent_at,
        "reached_peer": state.reached_peer,
        "next_due_at": state.next_due_at,
        "failure_code": None if failure is None else failure.error_code.value,
        "failure_severity": None if failure is None else failure.severity.value,
        "failure_description": None if failure is None else failure.description,
    }


def state_from_row(row: Row) -> OutboundState:
    """The engine's state of a sent message from its row (:data:`OUTBOUND_STATE_COLUMNS`)."""
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
        ),
        attempts=row["attempts"],
        first_sent_at=row["first_sent_at"],
        reached_peer=bool(row["reached_peer"]),
        next_due_at=row["next_due_at"],
        failure=failure,
    )


def outbound_values(record: records.OutboundMessage) -> dict[str, object]:
    """Every column of the row of ``record``."""
    return {
        "cpaid": record.cpaid,
        "conversation_id": record.conversation_id,
        "service": record.service,
        "action": record.action,
        "from_party": record.from_party,
        "to_party": record.to_party,
        "endpoint_url": record.endpoint_url,
        "content_type": record.content_type,
        "body_blob_id": record.body_blob_id,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        **state_values(record.state),
    }


def outbound_from_row(row: Row) -> records.OutboundMessage:
    return records.OutboundMessage(
        cpaid=row["cpaid"],
        conversation_id=row["conversation_id"],
        service=row["service"],
        action=row["action"],
        from_party=row["from_party"],
        to_party=row["to_party"],
        endpoint_url=row["endpoint_url"],
        content_type=row["content_type"],
        body_blob_id=int(row["body_blob_id"]),
        state=state_from_row(row),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


# ------------------------------------------------------------------------------------------------ inbound


def inbound_values(record: records.InboundMessage) -> dict[str, object]:
    """The columns of a new stored copy (its ``id`` is the database's)."""
    return {
        "message_id": record.message_id,
        "duplicate_elimination": record.duplicate_elimination,
        "from_party": record.from_party,
        "to_party": record.to_party,
        "cpaid": record.cpaid,
        "conversation_id": record.conversation_id,
        "service": record.service,
        "action": record.action,
        "received_at": record.received_at,
        "content_type": record.content_type,
        "body_blob_id": record.body_blob_id,
        "ack_envelope": record.ack_envelope,
        "duplicate_count": record.duplicate_count,
        "last_duplicate_at": record.last_duplicate_at,
        "content_digest": record.content_digest,
    }


def inbound_from_row(row: Row) -> records.InboundMessage:
    ack = row["ack_envelope"]
    return records.InboundMessage(
        id=int(row["id"]),
        message_id=row["message_id"],
        duplicate_elimination=bool(row["duplicate_elimination"]),
        from_party=row["from_party"],
        to_party=row["to_party"],
        cpaid=row["cpaid"],
        conversation_id=row["conversation_id"],
        service=row["service"],
        action=row["action"],
        received_at=row["received_at"],
        content_type=row["content_type"],
        body_blob_id=int(row["body_blob_id"]),
        ack_envelope=None if ack is None else bytes(ack),
        duplicate_count=row["duplicate_count"],
        last_duplicate_at=row["last_duplicate_at"],
        content_digest=row["content_digest"],
    )


def inbox_values(entry: records.InboxEntry) -> dict[str, object]:
    return {
        "inbound_id": entry.id,
        "message_id": entry.message_id,
        "state": entry.state.value,
        "received_at": entry.received_at,
        "delivered_at": entry.delivered_at,
        "acknowledged_at": entry.acknowledged_at,
    }


def inbox_from_row(row: Row) -> records.InboxEntry:
    return records.InboxEntry(
        id=int(row["inbound_id"]),
        message_id=row["message_id"],
        state=records.InboxState(row["state"]),
        received_at=row["received_at"],
        delivered_at=row["delivered_at"],
        acknowledged_at=row["acknowledged_at"],
    )


# ----------------------------------------------------------------------------------------- timers, events


def timer_from_row(row: Row) -> records.Timer:
    return records.Timer(
        id=int(row["id"]),
        message_id=row["message_id"],
        kind=records.TimerKind(row["kind"]),
        due_at=row["due_at"],
        lease_owner=row["lease_owner"],
        lease_until=row["lease_until"],
    )


def event_values(event: records.Event) -> dict[str, object]:
    """The columns of a new journal entry (its ``id`` is the database's)."""
    return {
        "at": event.at,
        "kind": event.kind,
        "message_id": event.message_id,
        "direction": None if event.direction is None else event.direction.value,
        "detail": event.detail,
    }


def event_from_row(row: Row) -> records.Event:
    direction = row["direction"]
    return records.Event(
        id=int(row["id"]),
        at=row["at"],
        kind=row["kind"],
        message_id=row["message_id"],
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
