"""The JSON documents of the REST interface (pydantic models: they validate requests and draw the OpenAPI
document's schemas)."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "BatchConfirmation",
    "BatchDocument",
    "BatchMessage",
    "ErrorReported",
    "InboxItem",
    "InboxList",
    "MessageStatus",
    "PartyRef",
    "PayloadIn",
    "PayloadOut",
    "PingOutcome",
    "PingRequest",
    "RejectRequest",
    "RemoteStatusDocument",
    "Settled",
    "SubmitRequest",
    "Submitted",
    "Transmission",
]

_STRICT = ConfigDict(extra="forbid", populate_by_name=True)
_OUT = ConfigDict(populate_by_name=True)


class PartyRef(BaseModel):
    """A party: its PartyId value and type (the type may be left to the agreement)."""

    model_config = _STRICT
    party_id: Annotated[str, Field(alias="partyId", min_length=1, max_length=1000)]
    type: Annotated[str | None, Field(max_length=1000)] = None


class PayloadIn(BaseModel):
    """A payload given inline: its content in base64, its MIME type, optionally its Content-ID."""

    model_config = _STRICT
    content_type: Annotated[str, Field(alias="contentType", pattern=r"^[!-~]+/[!-~]+.*$", max_length=1000)] = (
        "application/octet-stream"
    )
    content_id: Annotated[str | None, Field(alias="contentId", max_length=1000)] = None
    data: Annotated[str, Field(description="the content, base64 (RFC 4648)")]

    @field_validator("data")
    @classmethod
    def _base64(cls, value: str) -> str:
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("not base64 (RFC 4648 §4, with padding)") from None
        return value

    def content(self) -> bytes:
        return base64.b64decode(self.data, validate=True)


class SubmitRequest(BaseModel):
    """A message to send: to whom, under which Service/Action, with which payloads (see ``msh send``)."""

    model_config = _STRICT
    to: PartyRef
    service: Annotated[str, Field(min_length=1, max_length=1000)]
    action: Annotated[str, Field(min_length=1, max_length=1000)]
    service_type: Annotated[str | None, Field(alias="serviceType", max_length=1000)] = None
    cpa_id: Annotated[str | None, Field(alias="cpaId", max_length=1000)] = None
    conversation_id: Annotated[str | None, Field(alias="conversationId", max_length=1000)] = None
    ref_to_message_id: Annotated[str | None, Field(alias="refToMessageId", max_length=1000)] = None
    time_to_live: Annotated[datetime | None, Field(alias="timeToLive", description="with its time zone")] = None
    ack_requested: Annotated[bool | None, Field(alias="ackRequested")] = None
    duplicate_elimination: Annotated[bool | None, Field(alias="duplicateElimination")] = None
    from_role: Annotated[str | None, Field(alias="fromRole", max_length=1000)] = None
    to_role: Annotated[str | None, Field(alias="toRole", max_length=1000)] = None
    payloads: list[PayloadIn] = []


class Submitted(BaseModel):
    """The answer to a submission: the ebXML MessageId the MSH gave the message, and the request's pair."""

    model_config = _OUT

    message_id: Annotated[str, Field(alias="messageId")]
    request_id: Annotated[str | None, Field(alias="requestId", description="the request's Message-ID header")]
    status: str
    href: str


class Transmission(BaseModel):
    """One transmission of a sent message and how it ended."""

    model_config = _OUT

    at: datetime
    outcome: Annotated[
        str,
        Field(
            description="sent, failed, in progress, or not resent (a StatusRequest asked in place of the resend "
            "found the partner has the message, ebMS2 §7)"
        ),
    ]
    reason: str | None = None
    status_request: Annotated[
        str | None,
        Field(
            alias="statusRequest",
            description="when the partner was asked for the message's status in place of this resend "
            "(sending.status_before_resend, ebMS2 §7): its StatusResponse, or why none came",
        ),
    ] = None


class MessageStatus(BaseModel):
    """Where a sent message stands."""

    model_config = _OUT

    message_id: Annotated[str, Field(alias="messageId")]
    status: Annotated[
        str,
        Field(
            description="pending, awaiting-ack, forwarded, delivered (the To party has it), sent (no acknowledgment "
            "by design) or failed (deliveryFailure: Error, not delivered; Warning, it may have been delivered)"
        ),
    ]
    final: bool
    evidence: Annotated[
        str | None,
        Field(
            description="what the status rests on: submitted, transmission, hop-acknowledgment, "
            "to-party-acknowledgment, status-response, accepted-by-next-msh, error-message, soap-fault, "
            "retries-exhausted, time-to-live, persist-duration, agreement-removed, operator-resend, "
            "accepted-by-transport, retry-window-ended"
        ),
    ] = None
    explanation: Annotated[str, Field(description="what the status means for this message, in a phrase")] = ""
    receipt_problem: Annotated[
        str | None,
        Field(alias="receiptProblem", description="delivered, but the signed receipt does not match what was sent"),
    ] = None
    cpa_id: Annotated[str, Field(alias="cpaId")]
    service: str
    action: str
    to: str
    conversation_id: Annotated[str, Field(alias="conversationId")]
    attempts: int
    first_sent_at: Annotated[datetime | None, Field(alias="firstSentAt")]
    next_attempt_at: Annotated[datetime | None, Field(alias="nextAttemptAt")]
    time_to_live: Annotated[datetime | None, Field(alias="timeToLive")]
    delivery_failure: Annotated[dict[str, str] | None, Field(alias="deliveryFailure")] = None
    delivery_failure_after_acknowledgment: Annotated[
        str | None,
        Field(
            alias="deliveryFailureAfterAcknowledgment",
            description="delivered, but the To party reported a DeliveryFailure (Error) about it as well, e.g. it "
            "could not present it in order (MessageOrder): the acknowledgment stands (ebMS2 §6.5.7)",
        ),
    ] = None
    receipt: Annotated[dict[str, object] | None, Field(description="the acknowledgment, when one arrived")] = None
    transmissions: list[Transmission]


class InboxItem(BaseModel):
    """A received message as the inbox lists it."""

    model_config = _OUT

    id: Annotated[int, Field(description="the inbox entry (use it in /inbox/{id})")]
    message_id: Annotated[str, Field(alias="messageId")]
    state: Annotated[
        str,
        Field(
            description="available, leased, acknowledged or rejected; held (MessageOrder: waiting for a message before "
            "it in its sequence, not offered yet) or abandoned (that message never arrived: never offered)"
        ),
    ]
    cpa_id: Annotated[str, Field(alias="cpaId")]
    service: str
    action: str
    conversation_id: Annotated[str, Field(alias="conversationId")]
    from_party: Annotated[str, Field(alias="from")]
    received_at: Annotated[datetime, Field(alias="receivedAt")]
    priority: int
    takes: int
    lease_until: Annotated[datetime | None, Field(alias="leaseUntil")] = None
    overdue: Annotated[bool, Field(description="not taken within api.inbox_ttl")] = False
    rejected_reason: Annotated[str | None, Field(alias="rejectedReason")] = None


class InboxList(BaseModel):
    """A page of the inbox."""

    model_config = _OUT

    items: list[InboxItem]


class RejectRequest(BaseModel):
    """Why a received message is rejected (it goes to the dead-letter list)."""

    model_config = _STRICT
    reason: Annotated[str, Field(min_length=1, max_length=2000)]


class Settled(BaseModel):
    """An inbox entry after a settlement."""

    model_config = _OUT

    id: int
    message_id: Annotated[str, Field(alias="messageId")]
    state: str


class PayloadOut(BaseModel):
    """A payload of a fetched message."""

    model_config = _OUT

    content_type: Annotated[str, Field(alias="contentType")]
    content_id: Annotated[str | None, Field(alias="contentId")]
    data: Annotated[str, Field(description="base64")]


class BatchMessage(BaseModel):
    """One message of a fetched batch: its inbox entry, header and payloads."""

    model_config = _OUT

    entry: InboxItem
    header: dict[str, object]
    payloads: list[PayloadOut]


class BatchDocument(BaseModel):
    """A fetched batch (the HTTPR specification): confirm it (``POST /inbox/batches/{id}/confirm`` or ``confirm=`` on
    the next fetch) once its messages are safe."""

    model_config = _OUT

    batch_id: Annotated[str | None, Field(alias="batchId", description="null: nothing to take")]
    state: Annotated[str, Field(description="pending, confirmed, expired, or empty (nothing to take)")]
    lease_until: Annotated[datetime | None, Field(alias="leaseUntil")]
    confirmed_at: Annotated[datetime | None, Field(alias="confirmedAt")] = None
    entries: list[int]
    messages: list[BatchMessage] = []
    previous: Annotated[BatchConfirmation | None, Field(description="the batch confirmed by this request")] = None


class BatchConfirmation(BaseModel):
    """What confirming a batch did: which entries are acknowledged, which went back to the inbox meanwhile."""

    model_config = _OUT

    batch_id: Annotated[str, Field(alias="batchId")]
    state: str
    confirmed_at: Annotated[datetime | None, Field(alias="confirmedAt")]
    acknowledged: list[int]
    returned: Annotated[list[int], Field(description="lease ended and taken again before the confirmation")]


class PingRequest(BaseModel):
    """Whom to ping, under which agreement (needed when several agreements in force name the partner), and
    how long to wait for the Pong."""

    model_config = _STRICT
    partner: PartyRef
    cpa_id: Annotated[str | None, Field(alias="cpaId", max_length=1000)] = None
    timeout: Annotated[
        float, Field(gt=0, le=3600, description="seconds to wait for the Pong (at most api.max_wait)")
    ] = 10.0


class ErrorReported(BaseModel):
    """One Error of the ErrorList the partner answered with (ebMS2 §4.2.3.2)."""

    model_config = _OUT
    error_code: Annotated[str, Field(alias="errorCode")]
    severity: str
    location: str | None = None
    description: str | None = None


class PingOutcome(BaseModel):
    """What came of an MSH Ping (ebMS2 §8): the Pong and the round-trip time, or what went wrong."""

    model_config = _OUT
    message_id: Annotated[str, Field(alias="messageId", description="the Ping's MessageId")]
    partner: str
    cpa_id: Annotated[str, Field(alias="cpaId")]
    url: str
    sent_at: Annotated[datetime, Field(alias="sentAt")]
    pong: bool
    round_trip_ms: Annotated[float | None, Field(alias="roundTripMs")] = None
    on_connection: Annotated[
        bool | None,
        Field(alias="onConnection", description="the Pong came back on the connection (else to our endpoint)"),
    ] = None
    pong_message_id: Annotated[str | None, Field(alias="pongMessageId")] = None
    http_status: Annotated[int | None, Field(alias="httpStatus")] = None
    problem: str | None = None
    errors: list[ErrorReported] = []


class RemoteStatusDocument(BaseModel):
    """What the To party said about a sent message (ebMS2 §7.3), beside our own record of it."""

    model_config = _OUT
    message_id: Annotated[str, Field(alias="messageId")]
    request_message_id: Annotated[str, Field(alias="requestMessageId", description="the StatusRequest's MessageId")]
    partner: str
    cpa_id: Annotated[str, Field(alias="cpaId")]
    url: str
    sent_at: Annotated[datetime, Field(alias="sentAt")]
    message_status: Annotated[
        str | None,
        Field(
            alias="messageStatus",
            description="Received, Processed, Forwarded, NotRecognized or UnAuthorized (ebMS2 §7.3.3); null when "
            "no StatusResponse came (problem says why)",
        ),
    ] = None
    timestamp: Annotated[datetime | None, Field(description="when the partner received the message (ebMS2 §7.3.2)")] = (
        None
    )
    round_trip_ms: Annotated[float | None, Field(alias="roundTripMs")] = None
    on_connection: Annotated[bool | None, Field(alias="onConnection")] = None
    response_message_id: Annotated[str | None, Field(alias="responseMessageId")] = None
    http_status: Annotated[int | None, Field(alias="httpStatus")] = None
    problem: str | None = None
    errors: list[ErrorReported] = []
    ours: Annotated[MessageStatus, Field(description="our record of the message, after the answer")]
