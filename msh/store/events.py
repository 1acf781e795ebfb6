"""The kinds of journal event: one name for each thing the journal records, read and written by the runtime,
the store, the application interfaces, the analytics and the demos alike.

An event (:class:`~msh.store.records.Event`) is appended with :meth:`Transaction.append_event
<msh.store.journal_steps.JournalSteps.append_event>` in the transaction of the change it records; its
``kind`` is one of :class:`EventKind` (stored as the member's text, so a journal exported to Parquet or read
with SQL shows the same names). What each kind's ``detail`` holds is said beside the member.
"""

from __future__ import annotations

from enum import StrEnum

from msh.store.records import OutboundKind

__all__ = ["EventKind", "ended", "signal_received"]


class EventKind(StrEnum):
    """What a journal event records."""

    # -- a message our application sends (this MSH is its From party's MSH)
    SUBMITTED = "submitted"
    """Accepted from the application and stored (``signed``; the typed ``deadline`` is when its retries end)."""
    API_SUBMITTED = "api-submitted"
    """Submitted through the REST or SOAP interface, under the client's idempotency key."""
    TRANSMISSION = "transmission"
    """One attempt on the wire and how it ended (``attempt``, ``outcome``, ``httpStatus``, ``error``)."""
    RESENT = "resent"
    """A resend started (ebMS2 §6.5.4; ``attempt``)."""
    STATUS_REQUESTED = "status-requested"
    """A StatusRequest asked in place of a resend (ebMS2 §7; ``attempt``)."""
    STATUS_ANSWERED = "status-answered"
    """The answer to that StatusRequest (``messageStatus`` per ebMS2 §7.3.3, or ``reason`` when none came)."""
    DELIVERED = "delivered"
    """The To party acknowledged it (ebMS2 §6.3.2; ``evidence``, ``receiptProblem`` when the receipt failed)."""
    HOP_ACKNOWLEDGED = "hop-acknowledged"
    """The next MSH acknowledged it; the end-to-end word is still to come (ebMS2 §10.1.3)."""
    SENT = "sent"
    """Handed over; no acknowledgment by design (ebMS2 §6.6 rows 3, 4, 7, 8; ``evidence``)."""
    FAILED = "failed"
    """A DeliveryFailure told to the application (ebMS2 §6.5.7; ``errorCode``, ``severity``, ``evidence``)."""
    EXPIRED = "expired"
    """Beside a DeliveryFailure or a refusal: its TimeToLive ended it (ebMS2 §3.1.6.4)."""
    RECEIPT = "receipt"
    """A signed receipt kept (``blob`` holds the Acknowledgment message; ebMS2 §6.3.2.5)."""
    RECEIPT_REFUSED = "receipt-refused"
    """A signed receipt that does not prove what was sent (the message stays delivered)."""
    ERROR_RECEIVED = "error-received"
    """An ErrorList about it came back (ebMS2 §4.2; ``errors``)."""
    RESEND_REQUESTED = "resend-requested"
    """The operator had the failed message sent again as a new attempt series, same MessageId (ebMS2 §6.4.1;
    ``requestedBy``, ``reason``, ``force``, ``duplicateElimination``, ``previousAttempts``); the attempts after
    it are numbered from 1 again."""
    # -- forwards (ebMS2 §10) and signals of ours sent hop by hop: how their sending ended
    FORWARD_DELIVERED = "forward-delivered"
    FORWARD_SENT = "forward-sent"
    FORWARD_FAILED = "forward-failed"
    SIGNAL_DELIVERED = "signal-delivered"
    SIGNAL_SENT = "signal-sent"
    SIGNAL_FAILED = "signal-failed"
    # -- messages received
    RECEIVED = "received"
    """Stored for the application (``held`` under MessageOrder while its predecessor is missing, ebMS2 §9)."""
    DUPLICATE = "duplicate"
    """A copy of a MessageId already received, eliminated (ebMS2 §6.4.1, §6.5.6)."""
    CONFLICTING_DUPLICATE = "conflicting-duplicate"
    """The same MessageId with other content: not delivered, shown to the operator (ebMS2 §6.5.6)."""
    REJECTED = "rejected"
    """Refused with an ErrorList (``errors``)."""
    FORWARD = "forward"
    """Received for another party and stored to be forwarded (ebMS2 §10.1)."""
    RELEASED = "released"
    """A held message whose turn came, passed to the application (ebMS2 §9.1.1)."""
    ABANDONED = "abandoned"
    """A held message whose predecessor never came, never passed on (ebMS2 §9.1.1)."""
    SEQUENCE_BROKEN = "sequence-broken"
    """A MessageOrder gap that did not fill; a DeliveryFailure goes back for each held message (ebMS2 §9.1.1)."""
    PONG_RECEIVED = "signal-Pong"
    """A Pong for one of our Pings (ebMS2 §8.2), under the Ping's MessageId."""
    STATUS_RESPONSE_RECEIVED = "signal-StatusResponse"
    """A StatusResponse for one of our StatusRequests (ebMS2 §7.1.2), under the request's MessageId."""
    DELIVERY_FAILURE_QUEUED = "delivery-failure-queued"
    """A DeliveryFailure for a message we could not deliver, queued to its From party (ebMS2 §6.5.7)."""
    DELIVERY_FAILURE_UNSENT = "delivery-failure-unsent"
    """A DeliveryFailure that has no way back to its From party (ebMS2 §6.5.7, last paragraph)."""
    DELIVERY_REPORT = "delivery-report"
    """A mail delivery status notification about one of our messages sent by mail (ebMS2 B.3.3; ``action``,
    ``diagnostic``, ``recipients``); without a MessageId when none it names is ours."""
    DEAD_LETTER = "dead-letter"
    """A received mail that is neither an ebXML message nor a delivery status notification, kept in a dead-letter
    folder (ebMS2 B.3.3; ``where``, ``reason``, ``mailId``); it has no MessageId."""
    # -- the receiving application
    APP_DELIVERED = "app-delivered"
    """Passed to the application (it is in its inbox, or its handler took it)."""
    APP_TAKEN = "app-taken"
    """The application settled it (taken from the inbox)."""
    APP_REJECTED = "app-rejected"
    """The application refused it."""
    INBOX_OVERDUE = "inbox-overdue"
    """Waited in the inbox past the configured time."""
    # -- retention
    PURGED = "purged"
    """The message and its payloads were removed from the store after its outcome was final and its
    PersistDuration had passed (ebMS2 §6.4.6; ``bytes``, ``status``, ``keptUntil``); the journal stays."""


_ENDED = {
    (OutboundKind.OWN, "delivered"): EventKind.DELIVERED,
    (OutboundKind.OWN, "sent"): EventKind.SENT,
    (OutboundKind.OWN, "failed"): EventKind.FAILED,
    (OutboundKind.FORWARD, "delivered"): EventKind.FORWARD_DELIVERED,
    (OutboundKind.FORWARD, "sent"): EventKind.FORWARD_SENT,
    (OutboundKind.FORWARD, "failed"): EventKind.FORWARD_FAILED,
    (OutboundKind.SIGNAL, "delivered"): EventKind.SIGNAL_DELIVERED,
    (OutboundKind.SIGNAL, "sent"): EventKind.SIGNAL_SENT,
    (OutboundKind.SIGNAL, "failed"): EventKind.SIGNAL_FAILED,
}

_SIGNALS = {"Pong": EventKind.PONG_RECEIVED, "StatusResponse": EventKind.STATUS_RESPONSE_RECEIVED}


def ended(kind: OutboundKind, how: str) -> EventKind:
    """The event that ends the sending of an outbound message of ``kind``: ``how`` is ``delivered``,
    ``sent`` or ``failed`` (a forward's or signal's end has a name of its own, so an application's
    messages are counted apart)."""
    return _ENDED[(kind, how)]


def signal_received(action: str) -> EventKind:
    """The event of an MSH signal received for a question we asked (``Pong`` or ``StatusResponse``)."""
    return _SIGNALS[action]
