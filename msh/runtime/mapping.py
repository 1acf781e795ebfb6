"""The engine's types and the store's records, one to the other (msh.store.api "as the runtime maps them").

Both sides keep durations as :class:`~cpa.duration.XsDuration` (months included); the engine works in
:class:`~msh.errors.Issue`, the store keeps the issue's three fields. Nothing is lost either way:
``to_store(from_store(x)) == x``.
"""

from __future__ import annotations

from msh.engine import OutboundState, OutboundStatus, Reliability
from msh.errors import ErrorCode, Issue, Severity
from msh.store import api as store

__all__ = [
    "TIMER_RETRY",
    "TIMER_TRANSMIT",
    "party_text",
    "reliability_from_store",
    "reliability_to_store",
    "state_from_store",
    "state_to_store",
]

TIMER_RETRY = "retry"
"""Timer kind of the sending state machine (its ``next_due_at``): fires :class:`~msh.engine.TimerDue`."""

TIMER_TRANSMIT = "transmit"
"""Timer kind of a transmission not yet issued by this process: a message submitted by another process
(``msh send`` while ``msh serve`` runs) is picked up and transmitted by the server's timer loop."""


def party_text(value: str, type_: str | None) -> str:
    """One PartyId as one string: ``type:value`` (the ebCore combined form) or the bare value."""
    return f"{type_}:{value}" if type_ else value


def reliability_to_store(r: Reliability) -> store.ReliabilityParameters:
    return store.ReliabilityParameters(
        retries=r.retries,
        retry_interval=r.retry_interval,
        first_resend_timeout=r.first_resend_timeout,
        persist_duration=r.persist_duration,
        time_to_live=r.time_to_live,
        ack_requested=r.ack_requested,
        ack_actor=r.ack_actor,
    )


def reliability_from_store(p: store.ReliabilityParameters) -> Reliability:
    return Reliability(
        retries=p.retries,
        retry_interval=p.retry_interval,
        first_resend_timeout=p.first_resend_timeout,
        persist_duration=p.persist_duration,
        time_to_live=p.time_to_live,
        ack_requested=p.ack_requested,
        ack_actor=p.ack_actor,
    )


def state_to_store(s: OutboundState) -> store.OutboundState:
    failure = s.failure
    return store.OutboundState(
        status=store.OutboundStatus(s.status.value),
        attempts=s.attempts,
        first_sent_at=s.first_sent_at,
        reached_peer=s.reached_peer,
        next_due_at=s.next_due_at,
        failure_code=None if failure is None else failure.error_code.value,
        failure_severity=None if failure is None else failure.severity,
        failure_description=None if failure is None else failure.description,
    )


def state_from_store(message: store.OutboundMessage) -> OutboundState:
    s = message.state
    failure = None
    if s.failure_code is not None:
        failure = Issue(
            ErrorCode(s.failure_code),
            s.failure_severity or Severity.ERROR,
            s.failure_description or "",
        )
    return OutboundState(
        message_id=message.message_id,
        status=OutboundStatus(s.status.value),
        reliability=reliability_from_store(message.parameters),
        attempts=s.attempts,
        first_sent_at=s.first_sent_at,
        reached_peer=s.reached_peer,
        next_due_at=s.next_due_at,
        failure=failure,
    )
