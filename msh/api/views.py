"""The stored records as the interfaces show them (the documents of :mod:`msh.api.models`)."""

from __future__ import annotations

import base64
from datetime import datetime, timedelta

from msh.api.models import BatchMessage, InboxItem, MessageStatus, PayloadOut, Transmission
from msh.ebms.message import EbxmlMessage
from msh.engine import explain_state
from msh.runtime.attempts import Attempt, failure_despite_acknowledgment
from msh.store.api import Event, EventKind, OutboundMessage
from msh.store.app_records import AppInboxItem
from msh.store.inbox_status import inbox_status

__all__ = ["batch_message", "header", "inbox_item", "message_status", "state_of"]


def state_of(item: AppInboxItem, now: datetime) -> str:
    """available, leased, acknowledged or rejected; or held (waiting for its turn in its sequence, MessageOrder,
    ebMS2 §9.1.1) or abandoned (a message before it never arrived: never offered)."""
    return inbox_status(item.entry, item.claim, now).value  # one vocabulary with the command line


def inbox_item(item: AppInboxItem, now: datetime, ttl: timedelta | None) -> InboxItem:
    """An inbox entry as listed; ``overdue`` when available and received more than ``ttl`` ago."""
    state = state_of(item, now)
    claim = item.claim
    return InboxItem(
        id=item.entry.id,
        message_id=item.entry.message_id,
        state=state,
        cpa_id=item.cpaid,
        service=item.service,
        action=item.action,
        conversation_id=item.conversation_id,
        from_party=item.from_party,
        received_at=item.entry.received_at,
        priority=item.priority,
        takes=claim.takes if claim is not None else 0,
        lease_until=claim.lease_until if state == "leased" and claim is not None else None,
        overdue=ttl is not None and state == "available" and item.entry.received_at < now - ttl,
        rejected_reason=claim.reason if state == "rejected" and claim is not None else None,
    )


def header(message: EbxmlMessage) -> dict[str, object]:
    """The MessageHeader of a received message (as ``msh inbox --take`` writes it in message.json)."""
    h = message.envelope.message_header
    if h is None:  # pragma: no cover - the inbox holds business messages only
        return {}
    data = h.message_data

    def party(p: object) -> dict[str, object]:
        return {
            "partyIds": [{"value": i.value, "type": i.type} for i in p.party_ids],  # type: ignore[attr-defined]
            "role": p.role,  # type: ignore[attr-defined]
        }

    return {
        "messageId": data.message_id,
        "conversationId": h.conversation_id,
        "refToMessageId": data.ref_to_message_id,
        "cpaId": h.cpa_id,
        "service": {"value": h.service.value, "type": h.service.type},
        "action": h.action,
        "from": party(h.from_party),
        "to": party(h.to_party),
        "timestamp": data.timestamp.isoformat(),
        "timeToLive": data.time_to_live.isoformat() if data.time_to_live is not None else None,
    }


def batch_message(item: InboxItem, message: EbxmlMessage) -> BatchMessage:
    """A fetched message with its payloads inline (base64)."""
    payloads = []
    for part in message.payloads:
        with part.body.open() as source:
            content = source.read()
        payloads.append(
            PayloadOut(
                content_type=part.content_type,
                content_id=part.content_id,
                data=base64.b64encode(content).decode("ascii"),
            )
        )
    return BatchMessage(entry=item, header=header(message), payloads=payloads)


def _outcome(attempt: Attempt) -> str:
    if attempt.failed:
        return "failed"
    if not attempt.resent and attempt.status_request is not None and attempt.finished:
        return "not resent"  # ebMS2 §7: the StatusRequest in its place found the partner has the message
    return "sent" if attempt.finished else "in progress"


def message_status(stored: OutboundMessage, attempts: list[Attempt], events: list[Event]) -> MessageStatus:
    """Where a sent message stands, with its transmissions, DeliveryFailure and receipt."""
    state = stored.state
    failure = state.failure
    delivered = [e for e in events if e.kind == EventKind.DELIVERED]
    reported = failure_despite_acknowledgment(state.status.value == "delivered", attempts)
    return MessageStatus(
        message_id=stored.message_id,
        status=state.status.value,
        final=state.status.final,
        evidence=None if state.evidence is None else state.evidence.value,
        explanation=explain_state(state),
        receipt_problem=state.receipt_problem,
        cpa_id=stored.cpaid,
        service=stored.service,
        action=stored.action,
        to=stored.to_party,
        conversation_id=stored.conversation_id,
        attempts=state.attempts,
        first_sent_at=state.first_sent_at,
        next_attempt_at=state.next_due_at,
        time_to_live=state.reliability.time_to_live,
        delivery_failure=(
            {
                "errorCode": failure.error_code.value,
                "severity": failure.severity.value,
                "description": failure.description,
            }
            if failure is not None
            else None
        ),
        delivery_failure_after_acknowledgment=(None if reported is None else str(reported)),
        receipt={"acknowledgedAt": delivered[-1].at.isoformat()} if delivered else None,
        transmissions=[
            Transmission(
                at=a.at or stored.created_at,
                outcome=_outcome(a),
                reason=a.reason(),
                status_request=a.status_request,
            )
            for a in attempts
        ],
    )
