"""What a sent message's status says, and the evidence each status rests on (ebMS2 §6.5, §6.6, §7.3.3, §10.1.3).

One definition, used by the sending state machine (:mod:`msh.engine.sending`, which refuses to reach a status
on evidence this table does not allow for it), by the store, the command line, the REST interface and the
documentation (``docs/statuses.md`` is drawn from :data:`STATUSES` and kept in sync by a test).

The promise behind them: a status is what happened, never more. ``delivered`` needs the To party's word (its
acknowledgment, or its answer to a StatusRequest); a timer that runs out never delivers anything; a message
that asked for no acknowledgment is ``sent``, not ``delivered``; a DeliveryFailure's severity says whether
the message may have arrived (Warning) or certainly did not leave (Error).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final

__all__ = ["STATUSES", "Evidence", "OutboundStatus", "StatusDefinition", "explain", "status_table"]


class OutboundStatus(StrEnum):
    """Where a sent message stands (see :data:`STATUSES` for what each one means and rests on)."""

    PENDING = "pending"
    AWAITING_ACK = "awaiting-ack"
    FORWARDED = "forwarded"
    DELIVERED = "delivered"
    SENT = "sent"
    FAILED = "failed"

    @property
    def final(self) -> bool:
        """Delivered, sent or failed: nothing is transmitted any more and no timer runs."""
        return self in _FINAL


_FINAL: Final = frozenset({OutboundStatus.DELIVERED, OutboundStatus.SENT, OutboundStatus.FAILED})


class Evidence(StrEnum):
    """What a status rests on: the event that justified it."""

    SUBMITTED = "submitted"
    """Committed to the store before anything left (docs/design.md §5.1)."""
    TRANSMISSION = "transmission"
    """The outcome of a transmission: an HTTP answer, or a transport failure (journaled with it)."""
    HOP_ACKNOWLEDGMENT = "hop-acknowledgment"
    """An Acknowledgment aimed at nextMSH from an intermediary: it stored the message (ebMS2 §10.1.3)."""
    TO_PARTY_ACKNOWLEDGMENT = "to-party-acknowledgment"
    """An Acknowledgment from the To Party MSH (ebMS2 §6.5.2, §6.3.2.5): it has the message."""
    STATUS_RESPONSE = "status-response"
    """The To party's StatusResponse said Received or Processed (ebMS2 §7.3.3)."""
    ACCEPTED_BY_NEXT_MSH = "accepted-by-next-msh"
    """The next MSH's HTTP server answered 2xx (ebMS2 B.2.3) to a message that asked for no acknowledgment."""
    ERROR_MESSAGE = "error-message"
    """An ErrorList of severity Error, or a DeliveryFailure, from the receiving side or the path (§4.2, §6.5.7)."""
    SOAP_FAULT = "soap-fault"
    """The next MSH answered with a SOAP Fault: it could not process the message at all (SOAP 1.1 §4.4)."""
    RETRIES_EXHAUSTED = "retries-exhausted"
    """No acknowledgment (or no answer) after every transmission Retries allows (ebMS2 §6.5.4)."""
    TIME_TO_LIVE = "time-to-live"
    """The message's TimeToLive passed before it was acknowledged (ebMS2 §3.1.6.4)."""
    PERSIST_DURATION = "persist-duration"
    """PersistDuration passed since the first transmission (ebMS2 §6.4.6)."""
    AGREEMENT_REMOVED = "agreement-removed"
    """The agreement it was sent under was removed from the running MSH before its outcome was final (a reload)."""
    OPERATOR_RESEND = "operator-resend"
    """The operator had a failed message sent again: a new attempt series, same MessageId (ebMS2 §6.4.1, §6.4.6)."""
    ACCEPTED_BY_TRANSPORT = "accepted-by-transport"
    """The queuing transport accepted the message (the broker settled it as accepted) on a channel whose
    ReliableMessagingMethod is Transport: the transport now carries it to the To party (the *Reliable Messaging*
    draft, "Queuing Transports")."""
    RETRY_WINDOW_ENDED = "retry-window-ended"
    """ReliableMessagingMethod Transport, no TimeToLive and no PersistDuration: the agreement's retry schedule
    would have given up by now, and the message was neither acknowledged nor, if refused, handed over."""


@dataclass(frozen=True, slots=True)
class StatusDefinition:
    """One status: what it means, on which evidence it may be reached, and what the application should do."""

    status: OutboundStatus
    meaning: str
    evidence: frozenset[Evidence]
    advice: str
    rule: str

    @property
    def final(self) -> bool:
        return self.status.final


_E = Evidence
STATUSES: Final[Mapping[OutboundStatus, StatusDefinition]] = MappingProxyType(
    {
        d.status: d
        for d in (
            StatusDefinition(
                OutboundStatus.PENDING,
                "committed to the store; its first transmission is issued, no outcome of it is known yet (also the "
                "first transmission of a new attempt series the operator asked for after a failure)",
                frozenset({_E.SUBMITTED, _E.OPERATOR_RESEND}),
                "wait",
                "ebMS2 §6.5.1 steps 3-4, §6.4.1",
            ),
            StatusDefinition(
                OutboundStatus.AWAITING_ACK,
                "transmitted at least once, or tried; waiting for the acknowledgment, or for the timer to resend "
                "(a best-effort message: to resend after a transport failure). ReliableMessagingMethod Transport: "
                "the queuing transport accepted it and the To party's acknowledgment is awaited until the "
                "message's deadline, never resent; or the transport refused it and the hand-off is tried again",
                frozenset({_E.TRANSMISSION, _E.ACCEPTED_BY_TRANSPORT}),
                "wait",
                "ebMS2 §6.5.1 step 5, §6.5.4, B.4",
            ),
            StatusDefinition(
                OutboundStatus.FORWARDED,
                "an intermediary (the next MSH) acknowledged it: it stored the message. The To party's "
                "acknowledgment is still awaited and the message is resent end to end until it comes or the "
                "retries end; when the agreement asks only the next MSH, no end-to-end notification will come and "
                "only a DeliveryFailure from the path can still change it",
                frozenset({_E.HOP_ACKNOWLEDGMENT}),
                "wait",
                "ebMS2 §10.1.3, §6.5.4, §6.6",
            ),
            StatusDefinition(
                OutboundStatus.DELIVERED,
                "the To Party MSH has it: its acknowledgment came (ebMS2 §6.5.2), or it answered a StatusRequest "
                "with Received or Processed (§7.3.3). A signed receipt that does not match what was sent is "
                "recorded beside it (receipt invalid): the partner has the message, what is missing is proof. For "
                "a message this MSH forwards as an intermediary: the next MSH acknowledged it (§10.1.3)",
                frozenset({_E.TO_PARTY_ACKNOWLEDGMENT, _E.STATUS_RESPONSE, _E.HOP_ACKNOWLEDGMENT}),
                "done",
                "ebMS2 §6.5.2, §6.3.2.5, §7.3.3, §10.1.3",
            ),
            StatusDefinition(
                OutboundStatus.SENT,
                "handed over and not acknowledged, by design: the message asked for no acknowledgment and the next "
                "MSH's HTTP server accepted it (ebMS2 §6.6 rows 4 and 8), or it asked only the next MSH, an "
                "intermediary acknowledged it and no DeliveryFailure came from the path within its retry window "
                "(rows 3 and 7: no end-to-end notification); or, with ReliableMessagingMethod Transport, the "
                "queuing transport accepted it (it carries it on). Nothing says the To party got it; an error message "
                "from the partner later still turns it into failed",
                frozenset({_E.ACCEPTED_BY_NEXT_MSH, _E.HOP_ACKNOWLEDGMENT, _E.ACCEPTED_BY_TRANSPORT}),
                "done, unless the partner reports an error",
                "ebMS2 §6.6 rows 3, 4, 7 and 8, B.2.3",
            ),
            StatusDefinition(
                OutboundStatus.FAILED,
                "the application was told a DeliveryFailure (ebMS2 §6.5.7). Severity Error: the message could not "
                "be transmitted, or the receiving side refused it, or its agreement was removed before anything "
                "left: it was not delivered. Severity Warning: it was transmitted but never acknowledged: it may "
                "have been delivered",
                frozenset(
                    {
                        _E.ERROR_MESSAGE,
                        _E.SOAP_FAULT,
                        _E.RETRIES_EXHAUSTED,
                        _E.TIME_TO_LIVE,
                        _E.PERSIST_DURATION,
                        _E.AGREEMENT_REMOVED,
                        _E.RETRY_WINDOW_ENDED,
                    }
                ),
                "Error: fix the cause and submit again; Warning: ask the partner (msh status --remote) before "
                "submitting again, or a duplicate business transaction may follow",
                "ebMS2 §6.5.7, §6.5.4, §6.4.6, §3.1.6.4",
            ),
        )
    }
)
"""Every status a sent message can have, with its meaning, the evidence it rests on and what to do."""


def status_table() -> str:
    """:data:`STATUSES` as a Markdown table (``docs/statuses.md`` holds it; a test keeps the two equal)."""
    lines = [
        "| status | final | what it means | evidence it rests on | what the application does | rule |",
        "|---|---|---|---|---|---|",
    ]
    for d in STATUSES.values():
        evidence = ", ".join(f"`{e.value}`" for e in Evidence if e in d.evidence)
        lines.append(
            f"| `{d.status.value}` | {'yes' if d.final else 'no'} | {d.meaning} | {evidence} | {d.advice} | {d.rule} |"
        )
    return "\n".join(lines) + "\n"


_SAYS: Final[Mapping[Evidence, str]] = MappingProxyType(
    {
        Evidence.SUBMITTED: "committed; its first transmission is under way",
        Evidence.TRANSMISSION: "transmitted; waiting for the acknowledgment",
        Evidence.TO_PARTY_ACKNOWLEDGMENT: "the To party acknowledged it",
        Evidence.STATUS_RESPONSE: "the To party's StatusResponse says it has it",
        Evidence.ACCEPTED_BY_NEXT_MSH: "handed to the next MSH; no acknowledgment by design",
        Evidence.ERROR_MESSAGE: "the receiving side or the path reported an error",
        Evidence.SOAP_FAULT: "the next MSH answered with a SOAP Fault",
        Evidence.RETRIES_EXHAUSTED: "no acknowledgment after every retry",
        Evidence.TIME_TO_LIVE: "its TimeToLive passed",
        Evidence.PERSIST_DURATION: "its PersistDuration passed",
        Evidence.AGREEMENT_REMOVED: "its agreement was removed from this MSH",
        Evidence.OPERATOR_RESEND: "sent again at the operator's request; its first transmission is under way",
        Evidence.ACCEPTED_BY_TRANSPORT: "the queuing transport accepted it; waiting for the To party's acknowledgment",
        Evidence.RETRY_WINDOW_ENDED: "the agreement's retry window ended",
    }
)


def explain(
    status: OutboundStatus,
    evidence: Evidence | None,
    *,
    severity: str | None = None,
    receipt_problem: str | None = None,
    end_to_end_awaited: bool = True,
    end_to_end: bool = True,
) -> str:
    """What a status means for this message, in a phrase (the command line, the REST interface and the
    webhooks say the same): ``severity`` of its DeliveryFailure, ``receipt_problem`` of its receipt,
    ``end_to_end_awaited`` whether a forwarded message still waits for the To party (False: the agreement
    asks only the next MSH), ``end_to_end`` False for a forward or a signal (its promise ends at the next MSH)."""
    if status is OutboundStatus.FORWARDED:
        # ebMS2 §10.1.3, §6.6 rows 3 and 7.
        if end_to_end_awaited:
            return "an intermediary acknowledged it; waiting for the To party's acknowledgment"
        return "an intermediary acknowledged it; no end-to-end notification comes, by design"
    if status is OutboundStatus.FAILED:
        # ebMS2 §6.5.7: Error: not transmitted (or refused); Warning: transmitted, not acknowledged.
        cause = _SAYS.get(evidence, "it was given up") if evidence is not None else "it was given up"
        if severity == "Warning":
            return f"may have been delivered: {cause}, though it was transmitted"
        return f"not delivered: {cause}"
    if evidence is None:
        return STATUSES[status].meaning.split(";", 1)[0]
    if status is OutboundStatus.DELIVERED and evidence is Evidence.HOP_ACKNOWLEDGMENT and not end_to_end:
        said = "the next MSH acknowledged it"
    elif status is OutboundStatus.SENT and evidence is Evidence.ACCEPTED_BY_TRANSPORT:
        said = "the queuing transport accepted it; no acknowledgment by design"
    elif status is OutboundStatus.SENT and evidence is Evidence.HOP_ACKNOWLEDGMENT:
        said = "an intermediary acknowledged it; no end-to-end notification by design, and no DeliveryFailure came"
    else:
        said = _SAYS[evidence]
    if receipt_problem:
        # ebMS2 §6.3.2.5: the partner has it; the receipt does not prove what it got.
        said += f"; receipt invalid: {receipt_problem}"
    return said
