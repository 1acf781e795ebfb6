"""Why a transmission failed: each attempt of a sent message, as recorded in the store's journal.

Every transmission of an outbound message ends in one ``transmission`` event (written in the same
transaction as the sending machine's step for its outcome, so no extra commit): the attempt number, the
URL, the HTTP status of the answer if one came, the transport error if none did (connection refused, TLS
failure, timeout, reset) and what the answer carried. An ErrorList about the message, on the connection or
sent later, is an ``error-received`` event with its errors, numbered with the attempt it followed. A
StatusRequest asked in place of a resend (``sending.status_before_resend``, ebMS2 §7) is a
``status-requested`` event and its answer a ``status-answered`` event, numbered with the attempt they stood
in for: the attempt then says what the partner answered, and whether the message was resent after all.
:func:`attempts` reads the journal of one message back as :class:`Attempt` records, for ``msh status``,
``msh send --wait`` and :meth:`msh.runtime.Msh.attempts`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from msh.ebms.model import Envelope, ErrorList
from msh.errors import Severity
from msh.store.api import Event, EventKind

__all__ = [
    "Attempt",
    "ReceivedError",
    "answer_kind",
    "attempts",
    "error_detail",
    "failure_despite_acknowledgment",
    "received_errors",
    "transmission_detail",
]


@dataclass(frozen=True, slots=True)
class ReceivedError:
    """One Error of an ErrorList the partner sent about the message (ebMS2 §4.2.3.2)."""

    error_code: str
    severity: str
    location: str | None
    description: str | None

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        text = f": {self.description}" if self.description else ""
        return f"{self.severity} {self.error_code}{where}{text}"


@dataclass(frozen=True, slots=True)
class Attempt:
    """One transmission of a sent message and what came of it.

    ``at`` is when its outcome was recorded (when it started, for an unfinished one); ``http_status`` the
    status of the answer (None when no answer came); ``error`` why the attempt did not reach the partner's
    MSH or was not accepted by it (None when it was); ``answer`` what the answer carried
    (``Acknowledgment``, ``ErrorList``, ``SOAP Fault``, ``no body``, ...); ``errors`` the ErrorList errors
    received about the message after this attempt. ``finished`` is False for an attempt started but
    without a recorded outcome (in progress, or cut short by a stop). ``status_request`` is what came of
    the StatusRequest asked in place of this resend (ebMS2 §7: the partner's messageStatus, or why no
    StatusResponse came; None: none was asked), and ``resent`` whether the message itself was sent (False
    when the answer made the resend needless, or the partner was still unreachable).
    """

    number: int
    at: datetime | None
    url: str | None
    http_status: int | None = None
    error: str | None = None
    answer: str | None = None
    errors: tuple[ReceivedError, ...] = ()
    finished: bool = True
    status_request: str | None = None
    resent: bool = True

    @property
    def failed(self) -> bool:
        """True when the attempt did not reach the partner or the partner answered with an Error."""
        return self.error is not None or any(e.severity == Severity.ERROR.value for e in self.errors)

    def reason(self) -> str | None:
        """Why the attempt failed, in one phrase (None when it did not)."""
        if self.error is not None:
            return self.error
        refused = [str(e) for e in self.errors if e.severity == Severity.ERROR.value]
        return "; ".join(refused) if refused else None


def answer_kind(envelope: Envelope | None, body: bytes) -> str:
    """What an answer on the connection carried, in the spec's words."""
    if envelope is None:
        return "no body" if not body.strip() else "not an ebXML message"
    if envelope.fault is not None:
        return "SOAP Fault"
    kinds = []
    if envelope.acknowledgments:
        kinds.append("Acknowledgment")
    if envelope.error_list is not None:
        kinds.append("ErrorList")
    if envelope.status_response is not None:
        kinds.append("StatusResponse")
    if not kinds and envelope.message_header is not None:
        kinds.append(f"message {envelope.message_header.action}")
    return ", ".join(kinds) or "an empty envelope"


def transmission_detail(
    attempt: int, url: str, *, http_status: int | None = None, error: str | None = None, answer: str | None = None
) -> dict[str, object]:
    """The detail of a ``transmission`` journal event."""
    return {"attempt": attempt, "url": url, "httpStatus": http_status, "error": error, "answer": answer}


def received_errors(error_list: ErrorList) -> tuple[ReceivedError, ...]:
    """The Errors of an ErrorList, as recorded."""
    return tuple(
        ReceivedError(
            e.error_code, e.severity.value, e.location, e.description.text if e.description is not None else None
        )
        for e in error_list.errors
    )


def error_detail(attempt: int, error_list: ErrorList) -> dict[str, object]:
    """The detail of an ``error-received`` journal event: the attempt it followed and each Error."""
    return {
        "attempt": attempt,
        "errors": [
            {"errorCode": e.error_code, "severity": e.severity, "location": e.location, "description": e.description}
            for e in received_errors(error_list)
        ],
    }


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _status_answered(number: int, event: Event) -> Attempt:
    """The attempt a StatusRequest stood in for, with its answer (ebMS2 §7.3.3) or why none came; the
    partner still unreachable is a failed attempt (it counts as a failed resend)."""
    status = _str(event.detail.get("messageStatus"))
    url = _str(event.detail.get("url"))
    if status is not None:
        return Attempt(
            number,
            event.at,
            url,
            _int(event.detail.get("httpStatus")),
            answer=f"StatusResponse {status}",
            status_request=f"StatusResponse {status}",
            resent=False,
        )
    reason = _str(event.detail.get("reason")) or "no StatusResponse"
    unreachable = event.detail.get("transmitted") is False
    return Attempt(
        number,
        event.at,
        url,
        _int(event.detail.get("httpStatus")),
        error=reason if unreachable else None,
        status_request=f"no StatusResponse: {reason}",
        resent=False,
    )


def attempts(events: Iterable[Event]) -> list[Attempt]:
    """The attempts recorded in the journal of one message (its events, oldest first), by attempt number.

    A ``resent`` event without an outcome yet is an attempt in progress (``finished`` False). The attempts of
    a new series the operator asked for (after a ``resend-requested`` event) are numbered on from the last
    attempt before it."""
    by_number: dict[int, Attempt] = {}
    received: dict[int, list[ReceivedError]] = {}
    series = 0  # the attempts before the operator's last resend: a new series counts from 1 again
    for event in events:
        if event.kind == EventKind.RESEND_REQUESTED:
            series = max([series, *by_number, *received])
            continue
        number = _int(event.detail.get("attempt"))
        if number is None:
            continue
        number += series
        asked = by_number.get(number)
        if event.kind == EventKind.TRANSMISSION:
            by_number[number] = Attempt(
                number,
                event.at,
                _str(event.detail.get("url")),
                _int(event.detail.get("httpStatus")),
                _str(event.detail.get("error")),
                _str(event.detail.get("answer")),
                status_request=asked.status_request if asked is not None else None,
            )
        elif event.kind == EventKind.RESENT and (
            number not in by_number or by_number[number].status_request is not None
        ):
            question = asked.status_request if asked is not None else None
            by_number[number] = Attempt(number, event.at, None, finished=False, status_request=question)
        elif event.kind == EventKind.STATUS_REQUESTED:
            by_number[number] = Attempt(number, event.at, None, finished=False, status_request="asked", resent=False)
        elif event.kind == EventKind.STATUS_ANSWERED:
            by_number[number] = _status_answered(number, event)
        elif event.kind == EventKind.ERROR_RECEIVED:
            raw = event.detail.get("errors")
            for item in raw if isinstance(raw, list) else []:
                if isinstance(item, dict):
                    received.setdefault(number, []).append(
                        ReceivedError(
                            _str(item.get("errorCode")) or "?",
                            _str(item.get("severity")) or "?",
                            _str(item.get("location")),
                            _str(item.get("description")),
                        )
                    )
    for number, errors in received.items():
        found = by_number.get(number) or Attempt(number, None, None, finished=False)
        by_number[number] = replace(found, errors=tuple(errors))
    return [by_number[n] for n in sorted(by_number)]


def failure_despite_acknowledgment(delivered: bool, found: Iterable[Attempt]) -> ReceivedError | None:
    """For a ``delivered`` message, a DeliveryFailure of severity Error its To party reported as well (e.g. it
    could not present a message it had acknowledged because one before it in its sequence never came, ebMS2
    §9.1.1): the status stays delivered (§6.5.7 note: after the To party's Acknowledgment "it should ignore
    all other DeliveryFailure"), and this says what the To party reported. None otherwise."""
    if not delivered:
        return None
    for attempt in found:
        for error in attempt.errors:
            if error.error_code == "DeliveryFailure" and error.severity == Severity.ERROR.value:
                return error
    return None
