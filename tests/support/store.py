"""Tests of the durable store (msh.store), run on SQLite, PostgreSQL and the in-memory twin.

Shared helpers for the store tests live here; the fixtures are in ``conftest.py``.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from cpa.duration import XsDuration
from msh.engine import OutboundState, OutboundStatus, Reliability
from msh.store import InboundMessage, OutboundMessage, Transaction

T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
"""The fake clock's start."""


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


RELIABILITY = Reliability(
    retries=3,
    retry_interval=XsDuration.parse("PT30S"),
    first_resend_timeout=XsDuration.parse("PT1M"),
    persist_duration=XsDuration.parse("PT1H"),
    time_to_live=T0 + timedelta(hours=2),
    ack_requested=True,
    ack_actor="urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH",
)


def outbound_state(message_id: str, reliability: Reliability = RELIABILITY, **changes: Any) -> OutboundState:
    """The engine's state of a sent message: pending, no attempt, unless ``changes`` say otherwise."""
    state = OutboundState(message_id, OutboundStatus.PENDING, reliability, 0, None, 0, None)
    return replace(state, **changes)


def add_outbound(
    tx: Transaction,
    message_id: str,
    body: bytes = b"<soap/>",
    *,
    reliability: Reliability = RELIABILITY,
    state: OutboundState | None = None,
    **overrides: Any,
) -> OutboundMessage:
    """Insert an outbound message with a body blob, as the runtime does before the first send (``state``
    defaults to :func:`outbound_state` of ``message_id`` and ``reliability``)."""
    blob_id = tx.put_blob(io.BytesIO(body))
    values: dict[str, Any] = {
        "state": outbound_state(message_id, reliability) if state is None else state,
        "cpaid": "cpa-1",
        "conversation_id": "conv-1",
        "service": "urn:services:Orders",
        "action": "NewOrder",
        "from_party": "urn:duns:123",
        "to_party": "urn:duns:456",
        "endpoint_url": "https://partner.example/msh",
        "content_type": 'multipart/related; type="text/xml"; boundary="b1"; start="<soap@msh>"',
        "body_blob_id": blob_id,
    }
    values.update(overrides)
    return tx.insert_outbound(**values)


def add_inbound(
    tx: Transaction,
    message_id: str,
    *,
    received_at: datetime = T0,
    deliver: bool = True,
    ack: bytes | None = b"<ack/>",
    body: bytes = b"<soap/>",
    duplicate_elimination: bool = True,
    digest: str | None = None,
    hold: bool = False,
    sequence_number: int | None = None,
) -> InboundMessage:
    """Insert a received message (duplicate-elimination record, and inbox entry with ``deliver``, or held
    with ``hold``)."""
    blob_id = tx.put_blob(body)
    return tx.insert_inbound(
        message_id=message_id,
        from_party="urn:duns:456",
        to_party="urn:duns:123",
        cpaid="cpa-1",
        conversation_id="conv-9",
        service="urn:services:Orders",
        action="OrderAck",
        received_at=received_at,
        content_type="text/xml",
        body_blob_id=blob_id,
        ack_envelope=ack,
        deliver=deliver,
        duplicate_elimination=duplicate_elimination,
        content_digest=digest,
        hold=hold,
        sequence_number=sequence_number,
    )


class PatternStream(io.RawIOBase):
    """``size`` bytes of a deterministic pattern, produced as read (never held whole), with their SHA-256.

    Reads return at most ``max_read`` bytes, to exercise short reads.
    """

    def __init__(self, size: int, max_read: int = 256 * 1024) -> None:
        super().__init__()
        self.remaining = size
        self.max_read = max_read
        self.sha256 = hashlib.sha256()
        block = hashlib.sha256(b"pattern").digest() * 2048  # 64 KiB
        self._block = block
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        n = min(len(view), self.remaining, self.max_read)
        written = 0
        while written < n:
            start = self._pos % len(self._block)
            take = min(n - written, len(self._block) - start)
            view[written : written + take] = self._block[start : start + take]
            written += take
            self._pos += take
        self.sha256.update(view[:n])
        self.remaining -= n
        return n
