"""The sending state machine of a reliable message (ebMS2 §6.5.1, §6.5.4, §6.5.7), sans-IO.

:func:`step` takes the state of one outbound message, an event and the time, and returns the new state
and the actions the runtime must carry out. It never reads a clock, makes an id or does I/O. The
transitions are data, :data:`TRANSITIONS`, keyed by (status, event type); a pair not in the table raises
:class:`EngineError`, and :func:`state_diagram` draws the table for the documentation.

The runtime commits the returned state together with the timer actions (:class:`ScheduleTimer`,
:class:`CancelTimer`) in one transaction, and only then executes :class:`Transmit` and the notifications
(DESIGN.md §5.1: a message is committed before its first transmission; a resend sends the identical
stored bytes). Actions are listed in that order.

Statuses (:class:`OutboundStatus`):

``pending``
    committed, first transmission issued, no outcome of it recorded yet.
``awaiting-ack``
    at least one transmission outcome recorded; waiting for the acknowledgment or for the timer (for a
    best-effort message: waiting to resend after a transport failure).
``forwarded``
    the next MSH (an intermediary) acknowledged the message (ebMS2 §10.1.3): no more resends; waiting for
    the To Party MSH's acknowledgment, or a DeliveryFailure, until the end-to-end deadline.
``delivered``
    acknowledged (or, best effort, handed to the peer's HTTP server). Final.
``failed``
    given up, the application was told with a DeliveryFailure. Final.

Decisions where the specifications are silent:

* ``attempts`` counts the transmissions issued (a :class:`Transmit` action), including one whose outcome
  is not known yet; a timer is armed with every transmission, so a process that dies between commit and
  transmission resumes from the timer row (DESIGN.md §5.6).
* A transport failure does not resend at once: it counts as a lost message and the resend waits for the
  timer (ebMS2 §6.5.4 "same algorithm", §6.4.4 RetryInterval applies after a communications error). For a
  best-effort message with no transmission left the failure is reported at once (no acknowledgment can
  make it a success); with an acknowledgment requested the last timer is awaited, since a timed-out
  exchange may still have reached the peer.
* A timer that fires while a transmission's outcome is still unknown treats it as lost (resend, or give
  up): the runtime's HTTP timeout should be shorter than the first-resend timeout.
* Messages without AckRequested are retried only on transport failures (§6.5.4 speaks of a
  "communications protocol error"); an HTTP answer from the peer delivers them.
* An ErrorList from the peer whose highestSeverity is Error fails the message (severity Error: the peer
  refused it). A DeliveryFailure of severity Warning (an intermediary gave up after transmitting) fails it
  with severity Warning. Warnings alone do not change anything (ebMS2 §4.2.3.2.4: processing went on).
* When :attr:`Reliability.ack_actor` records the actor asked, an acknowledgment of the other actor is
  ignored, unless :attr:`Reliability.hop_ack` says the message asked the next MSH too (§10.1.3): then the
  next MSH's acknowledgment makes it ``forwarded`` (the resends stop: the intermediary now resends on its
  hop) and only the To Party MSH's makes it ``delivered``. Without ``ack_actor`` either actor's
  acknowledgment counts (single hop, §6.3.1.1).
* A forwarded message waits for the end-to-end acknowledgment until its *end-to-end deadline*: the time the
  retry schedule would have given up had no acknowledgment come at all
  (:func:`msh.engine.timers.end_to_end_deadline`), so an intermediary changes nothing about how long the
  application waits for an answer. Then it fails with severity Warning (it was transmitted, §6.5.7). A
  DeliveryFailure from the intermediary fails it with the severity the intermediary gave.
* A message that asks only the next MSH for an acknowledgment (§6.6 rows 3 and 7: no end-to-end
  notification) is delivered by that acknowledgment when the To party itself sent it (a single hop); from
  an intermediary (:attr:`AcknowledgmentReceived.by_intermediary`) it is ``forwarded``, and ``delivered``
  at the end-to-end deadline unless a DeliveryFailure came from the path first (§6.5.7: the intermediaries
  report what they cannot deliver; only the To party's acknowledgment makes a later one moot).
* Late transmission outcomes and stale timers after a final status are explicit no-ops: they race with
  acknowledgments by nature. An early timer (before ``next_due_at``) re-arms itself.
* An acknowledgment after a failure is ignored (the failure was reported; its severity Warning already
  says the message may have arrived). An event for a message the store does not know raises
  :class:`UnknownMessage`: the runtime ignores such acknowledgments and errors (ebMS2 §6.5.2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from msh.ebms.model import ErrorList
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH
from msh.engine import timers
from msh.engine.reliability import DEFAULT_ACK_WAIT, Reliability, effective_actor
from msh.errors import ErrorCode, Issue, MshError, Severity

__all__ = [
    "DEFAULT_ACK_WAIT",
    "TRANSITIONS",
    "AcknowledgmentReceived",
    "Action",
    "CancelTimer",
    "EngineError",
    "ErrorReceived",
    "Event",
    "NotifyDelivered",
    "NotifyFailed",
    "NotifyForwarded",
    "OutboundState",
    "OutboundStatus",
    "Reliability",
    "ScheduleTimer",
    "SendAgain",
    "Submit",
    "TimerDue",
    "Transition",
    "Transmit",
    "TransmitFailed",
    "TransmitSucceeded",
    "UnknownMessage",
    "state_diagram",
    "step",
]


class EngineError(MshError):
    """An event the state machine has no transition for: a bug in the caller, not a protocol error."""


class UnknownMessage(EngineError):
    """An event other than :class:`Submit` for a message that has no state (the store does not know it)."""


class OutboundStatus(StrEnum):
    """Where an outbound message stands (see the module docs)."""

    PENDING = "pending"
    AWAITING_ACK = "awaiting-ack"
    FORWARDED = "forwarded"
    DELIVERED = "delivered"
    FAILED = "failed"

    @property
    def final(self) -> bool:
        """Delivered or failed: nothing more happens to the message."""
        return self is OutboundStatus.DELIVERED or self is OutboundStatus.FAILED


@dataclass(frozen=True, slots=True)
class OutboundState:
    """The committed state of one outbound message (one store row).

    ``attempts`` counts the transmissions issued; ``reached_peer`` is true once an attempt got an HTTP
    answer from the peer (it sets the DeliveryFailure severity, ebMS2 §6.5.7); ``next_due_at`` is when
    the timer fires (None in a final status); ``failure`` is the issue the application was told.
    """

    message_id: str
    status: OutboundStatus
    reliability: Reliability
    attempts: int
    first_sent_at: datetime | None
    reached_peer: bool
    next_due_at: datetime | None
    failure: Issue | None = None


# --- events -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Submit:
    """The application hands over a message, built and about to be committed (ebMS2 §6.5.1 steps 1-3)."""

    message_id: str
    reliability: Reliability

    def __post_init__(self) -> None:
        if not self.message_id.strip():
            raise ValueError("Submit needs the message's MessageId")


@dataclass(frozen=True, slots=True)
class TransmitSucceeded:
    """An HTTP exchange finished with an answer and no acknowledgment in it. ``reached_peer`` is false
    when the answer did not come from the peer MSH (e.g. a gateway's 502)."""

    reached_peer: bool = True


@dataclass(frozen=True, slots=True)
class TransmitFailed:
    """Connection refused, reset or timed out: the transmission counts as a lost message (ebMS2 §6.5.4)."""

    reason: str


@dataclass(frozen=True, slots=True)
class AcknowledgmentReceived:
    """An Acknowledgment element for this message arrived (ebMS2 §6.5.2, §6.3.2); ``by_intermediary``: it
    came from an intermediary on the path, not from the To party (ebMS2 §10.1.3)."""

    ref_to_message_id: str
    actor: str | None = ACTOR_TO_PARTY_MSH
    by_intermediary: bool = False


@dataclass(frozen=True, slots=True)
class ErrorReceived:
    """An ErrorList referring to this message arrived (ebMS2 §4.2.4, §6.5.7); ``fault``: made from a SOAP
    Fault the peer answered with (no ebXML error message came: nobody else will report it)."""

    error_list: ErrorList
    fault: bool = False


@dataclass(frozen=True, slots=True)
class TimerDue:
    """The message's timer row came due."""


@dataclass(frozen=True, slots=True)
class SendAgain:
    """Another copy of a message this MSH forwards arrived (an intermediary forwards every copy and
    eliminates no duplicate, ebMS2 §10.1): send it once more now, within the same retry budget."""


Event: TypeAlias = (
    Submit | TransmitSucceeded | TransmitFailed | AcknowledgmentReceived | ErrorReceived | TimerDue | SendAgain
)

# --- actions ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Transmit:
    """Send the stored bytes of the message (the same bytes on every attempt, DESIGN.md §5.1)."""

    message_id: str
    attempt: int


@dataclass(frozen=True, slots=True)
class ScheduleTimer:
    """Set (or replace) the message's timer row to ``due_at``."""

    message_id: str
    due_at: datetime


@dataclass(frozen=True, slots=True)
class CancelTimer:
    """Delete the message's timer row."""

    message_id: str


@dataclass(frozen=True, slots=True)
class NotifyDelivered:
    """Tell the sending application the message was delivered (ebMS2 §6.3.2.5)."""

    message_id: str


@dataclass(frozen=True, slots=True)
class NotifyForwarded:
    """Record that the next MSH acknowledged the message (ebMS2 §10.1.3): it is on its way, not delivered."""

    message_id: str


@dataclass(frozen=True, slots=True)
class NotifyFailed:
    """Tell the sending application the message was not delivered: a DeliveryFailure (ebMS2 §6.5.7);
    ``expired`` when its TimeToLive is what ended it (ebMS2 §3.1.6.4)."""

    message_id: str
    issue: Issue
    expired: bool = False


Action: TypeAlias = Transmit | ScheduleTimer | CancelTimer | NotifyDelivered | NotifyForwarded | NotifyFailed
Step: TypeAlias = tuple[OutboundState, tuple[Action, ...]]
Handler: TypeAlias = Callable[[OutboundState | None, Any, datetime], Step]

# --- handlers -----------------------------------------------------------------------------------------


def _known(state: OutboundState | None) -> OutboundState:
    if state is None:  # pragma: no cover - step() rejects it before any handler runs
        raise UnknownMessage("no state")
    return state


def _ignore(state: OutboundState | None, event: Any, now: datetime) -> Step:
    return _known(state), ()


def _failure(state: OutboundState, description: str, severity: Severity | None = None) -> Issue:
    # ebMS2 §6.5.7: Error if the message could not be transmitted, Warning if it was but no ack came.
    if severity is None:
        severity = Severity.WARNING if state.reached_peer else Severity.ERROR
    return Issue(ErrorCode.DELIVERY_FAILURE, severity, f"message {state.message_id}: {description}")


def _fail(state: OutboundState, issue: Issue, *, cancel: bool = True, expired: bool = False) -> Step:
    failed = replace(state, status=OutboundStatus.FAILED, next_due_at=None, failure=issue)
    actions: tuple[Action, ...] = (NotifyFailed(state.message_id, issue, expired),)
    return failed, ((CancelTimer(state.message_id), *actions) if cancel else actions)


def _deliver(state: OutboundState) -> Step:
    done = replace(state, status=OutboundStatus.DELIVERED, next_due_at=None, reached_peer=True)
    return done, (CancelTimer(state.message_id), NotifyDelivered(state.message_id))


def _submit(state: OutboundState | None, event: Submit, now: datetime) -> Step:
    r = event.reliability
    fresh = OutboundState(event.message_id, OutboundStatus.PENDING, r, 0, None, False, None)
    # ebMS2 §3.1.6.4: a message whose TimeToLive has passed is not sent at all.
    if r.time_to_live is not None and now >= r.time_to_live:
        issue = _failure(fresh, f"TimeToLive {r.time_to_live.isoformat()} had passed when it was submitted")
        return _fail(fresh, issue, cancel=False, expired=True)
    # ebMS2 §6.5.1: save the message (the runtime commits this state), then send it, then wait.
    due = timers.next_due(r, attempts=1, sent_at=now, first_sent_at=now)
    pending = replace(fresh, attempts=1, first_sent_at=now, next_due_at=due)
    return pending, (ScheduleTimer(event.message_id, due), Transmit(event.message_id, 1))


def _no_transmission_left(state: OutboundState, reason: str) -> Step:
    r = state.reliability
    issue = _failure(state, f"could not be transmitted in {state.attempts} attempts (Retries {r.retries}): {reason}")
    return _fail(state, issue)


def _transmit_succeeded(state: OutboundState | None, event: TransmitSucceeded, now: datetime) -> Step:
    s = _known(state)
    s = replace(s, status=OutboundStatus.AWAITING_ACK, reached_peer=s.reached_peer or event.reached_peer)
    if not s.reliability.ack_requested:
        if event.reached_peer:
            # Best effort (ebMS2 §6.6 row 8): handed to the peer is as delivered as it gets.
            return _deliver(s)
        if s.attempts >= s.reliability.retries + 1:
            return _no_transmission_left(s, "the answer did not come from the peer MSH")
    # ebMS2 §6.5.1 step 5: wait for the Acknowledgment; the timer armed with the transmission runs on.
    return s, ()


def _transmit_failed(state: OutboundState | None, event: TransmitFailed, now: datetime) -> Step:
    s = replace(_known(state), status=OutboundStatus.AWAITING_ACK)
    # ebMS2 §6.5.4: a communications error counts as a lost message; the timer resends it.
    if not s.reliability.ack_requested and s.attempts >= s.reliability.retries + 1:
        return _no_transmission_left(s, event.reason)
    return s, ()


def _forward(state: OutboundState) -> Step:
    r = state.reliability
    first = state.first_sent_at
    assert first is not None  # a message with an acknowledgment was transmitted
    due = timers.end_to_end_deadline(r, first)
    forwarded = replace(state, status=OutboundStatus.FORWARDED, next_due_at=due, reached_peer=True)
    return forwarded, (ScheduleTimer(state.message_id, due), NotifyForwarded(state.message_id))


def _acknowledged(state: OutboundState | None, event: AcknowledgmentReceived, now: datetime) -> Step:
    s = _known(state)
    if event.ref_to_message_id != s.message_id:
        raise EngineError(f"acknowledgment of {event.ref_to_message_id} routed to message {s.message_id}")
    r = s.reliability
    actor = effective_actor(event.actor)
    hop_only = effective_actor(r.ack_actor) == ACTOR_NEXT_MSH
    if r.ack_requested and actor == ACTOR_NEXT_MSH and (r.hop_ack or (hop_only and event.by_intermediary)):
        # ebMS2 §10.1.3: the next MSH has it (stored): stop resending; the To Party MSH's acknowledgment (or,
        # asking only the next MSH, §6.6 rows 3 and 7: no DeliveryFailure until the deadline) is due.
        return (s, ()) if s.status is OutboundStatus.FORWARDED else _forward(s)
    # ebMS2 §6.5.2: an unexpected Acknowledgment is ignored, no error sent.
    wanted = r.ack_actor
    other_actor = wanted is not None and actor != effective_actor(wanted)
    if not r.ack_requested or other_actor:
        return s, ()
    # ebMS2 §6.5.2: mark the persisted message as delivered; §6.3.2.5: the application MAY be told.
    return _deliver(s)


def _describe(error_list: ErrorList) -> str:
    parts = []
    for e in error_list.errors:
        where = f" at {e.location}" if e.location else ""
        text = f": {e.description.text}" if e.description is not None else ""
        parts.append(f"{e.severity.value} {e.error_code}{where}{text}")
    return "; ".join(parts)


def _error_received(state: OutboundState | None, event: ErrorReceived, now: datetime) -> Step:
    s = _known(state)
    el = event.error_list
    delivery_failure = any(e.code is ErrorCode.DELIVERY_FAILURE for e in el.errors)
    # ebMS2 §4.2.3.2.4: with Warnings only the message was processed; keep waiting for the acknowledgment.
    if el.highest_severity is Severity.WARNING and not delivery_failure:
        return s, ()
    # ebMS2 §6.5.7: a DeliveryFailure keeps the severity its detector gave it; a refusal is an Error.
    severity = Severity.ERROR if el.highest_severity is Severity.ERROR else Severity.WARNING
    return _fail(s, _failure(s, f"the receiving side reported an error: {_describe(el)}", severity))


def _timer_due(state: OutboundState | None, event: TimerDue, now: datetime) -> Step:
    s = _known(state)
    if s.next_due_at is not None and now < s.next_due_at:
        return s, (ScheduleTimer(s.message_id, s.next_due_at),)
    if s.status is OutboundStatus.FORWARDED and effective_actor(s.reliability.ack_actor) == ACTOR_NEXT_MSH:
        # ebMS2 §6.6 rows 3 and 7: no end-to-end notification; no DeliveryFailure came from the path.
        return _deliver(s)
    if s.status is OutboundStatus.FORWARDED:
        # ebMS2 §6.5.7: transmitted (the next MSH has it) but no Acknowledgment from the To Party MSH: Warning.
        when = s.next_due_at.isoformat() if s.next_due_at is not None else now.isoformat()
        what = "forwarded (the next MSH acknowledged it) but no end-to-end Acknowledgment came by"
        return _fail(s, _failure(s, f"{what} {when}", Severity.WARNING))
    r = s.reliability
    first = s.first_sent_at if s.first_sent_at is not None else now
    reason = timers.give_up(r, attempts=s.attempts, first_sent_at=first, now=now)
    if reason is timers.GiveUp.RETRIES:
        # ebMS2 §6.5.4: no Acknowledgment after the maximum number of retries: notify the application.
        what = "no Acknowledgment after" if r.ack_requested else "no answer from the peer MSH in"
        return _fail(s, _failure(s, f"{what} {s.attempts} transmissions (Retries {r.retries})"))
    if reason is timers.GiveUp.TIME_TO_LIVE and r.time_to_live is not None:
        # ebMS2 §3.1.6.4: past TimeToLive the receiver would refuse it.
        what = f"TimeToLive {r.time_to_live.isoformat()} passed after {s.attempts} transmissions"
        return _fail(s, _failure(s, what), expired=True)
    if reason is timers.GiveUp.PERSIST_DURATION:
        # ebMS2 §6.4.6: PersistDuration has passed since the first transmission: report a delivery failure.
        return _fail(
            s,
            _failure(
                s,
                f"PersistDuration {r.persist_duration} passed since the first transmission at "
                f"{first.isoformat()} after {s.attempts} transmissions",
            ),
        )
    # ebMS2 §6.5.4: resend the identical message; the next wait is RetryInterval.
    attempt = s.attempts + 1
    due = timers.next_due(r, attempts=attempt, sent_at=now, first_sent_at=first)
    resent = replace(s, status=OutboundStatus.AWAITING_ACK, attempts=attempt, first_sent_at=first, next_due_at=due)
    return resent, (ScheduleTimer(s.message_id, due), Transmit(s.message_id, attempt))


def _send_again(state: OutboundState | None, event: SendAgain, now: datetime) -> Step:
    s = _known(state)
    # ebMS2 §10.1: the intermediary forwards the resent copy too; the timer and the budget run on.
    attempt = s.attempts + 1
    again = replace(s, status=OutboundStatus.AWAITING_ACK, attempts=attempt)
    return again, (Transmit(s.message_id, attempt),)


# --- the table ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Transition:
    """One row of :data:`TRANSITIONS`: the handler, the statuses it can lead to, and the rule it follows."""

    handler: Handler
    targets: tuple[OutboundStatus, ...]
    rule: str

    @property
    def ignored(self) -> bool:
        """True for an explicit no-op row (the event is ignored in this status)."""
        return self.handler is _ignore


_P, _W, _D, _F = OutboundStatus.PENDING, OutboundStatus.AWAITING_ACK, OutboundStatus.DELIVERED, OutboundStatus.FAILED
_FW = OutboundStatus.FORWARDED


def _live(status: OutboundStatus) -> dict[tuple[OutboundStatus | None, type[Any]], Transition]:
    return {
        (status, TransmitSucceeded): Transition(_transmit_succeeded, (_W, _D, _F), "ebMS2 §6.5.1 step 5"),
        (status, TransmitFailed): Transition(_transmit_failed, (_W, _F), "ebMS2 §6.5.4 communications error"),
        (status, AcknowledgmentReceived): Transition(_acknowledged, (_D, _FW, status), "ebMS2 §6.5.2, §10.1.3"),
        (status, ErrorReceived): Transition(_error_received, (_F, status), "ebMS2 §6.5.7, §4.2.3.2.4"),
        (status, TimerDue): Transition(_timer_due, (_W, _F, status), "ebMS2 §6.5.4, §6.4.6, §3.1.6.4"),
        (status, SendAgain): Transition(_send_again, (_W,), "ebMS2 §10.1: every copy is forwarded"),
    }


def _final(status: OutboundStatus) -> dict[tuple[OutboundStatus | None, type[Any]], Transition]:
    return {
        (status, AcknowledgmentReceived): Transition(_ignore, (status,), "ebMS2 §6.3.2.5, §6.5.7 note: ignored"),
        (status, ErrorReceived): Transition(_ignore, (status,), "ebMS2 §6.3.2.5, §6.5.7 note: ignored"),
        (status, TransmitSucceeded): Transition(_ignore, (status,), "late outcome of a resend: ignored"),
        (status, TransmitFailed): Transition(_ignore, (status,), "late outcome of a resend: ignored"),
        (status, TimerDue): Transition(_ignore, (status,), "stale timer: ignored"),
        (status, SendAgain): Transition(_ignore, (status,), "a copy of a finished forward is submitted afresh"),
    }


TRANSITIONS: Final[Mapping[tuple[OutboundStatus | None, type[Any]], Transition]] = MappingProxyType(
    {
        (None, Submit): Transition(_submit, (_P, _F), "ebMS2 §6.5.1 steps 3-4, §3.1.6.4"),
        **_live(_P),
        **_live(_W),
        # ebMS2 §10.1.3: forwarded; only the To Party MSH's acknowledgment, a DeliveryFailure or the
        # end-to-end deadline move it on.
        (_FW, AcknowledgmentReceived): Transition(_acknowledged, (_D, _FW), "ebMS2 §6.5.2, §10.1.3"),
        (_FW, ErrorReceived): Transition(_error_received, (_F, _FW), "ebMS2 §6.5.7, §4.2.3.2.4"),
        (_FW, TimerDue): Transition(_timer_due, (_F, _FW), "ebMS2 §6.5.7: end-to-end deadline"),
        (_FW, TransmitSucceeded): Transition(_ignore, (_FW,), "late outcome of a resend: ignored"),
        (_FW, TransmitFailed): Transition(_ignore, (_FW,), "late outcome of a resend: ignored"),
        (_FW, SendAgain): Transition(_ignore, (_FW,), "only forwards are sent again; ours wait here"),
        **_final(_D),
        **_final(_F),
    }
)
"""(status, event type) -> :class:`Transition`; status None is "no state yet" (only :class:`Submit`)."""


def step(state: OutboundState | None, event: Event, now: datetime) -> Step:
    """Apply ``event`` at ``now`` to the state of one outbound message; return the new state and actions.

    ``state`` is None for a message not yet submitted. Raises :class:`UnknownMessage` for any other event
    on a message with no state, and :class:`EngineError` for a (status, event) pair the table lacks (a
    second :class:`Submit` of the same message).
    """
    if now.tzinfo is None:
        raise ValueError(f"now must be timezone-aware (UTC), got {now!r}")
    status = state.status if state is not None else None
    transition = TRANSITIONS.get((status, type(event)))
    if transition is None:
        if state is None:
            raise UnknownMessage(f"{type(event).__name__} for a message with no outbound state")
        raise EngineError(f"no transition from {status} on {type(event).__name__} for message {state.message_id}")
    return transition.handler(state, event, now)


def state_diagram() -> str:
    """The sending state machine as a Mermaid ``stateDiagram-v2``, drawn from :data:`TRANSITIONS`.

    Edges that lead to the same status are merged; ignored events show as self-loops marked "ignored".
    """
    ids = {status: status.value.replace("-", "_") for status in OutboundStatus}
    edges: dict[tuple[str, str], list[str]] = {}
    for (source, event), transition in TRANSITIONS.items():
        src = "[*]" if source is None else ids[source]
        label = event.__name__ + (" (ignored)" if transition.ignored else "")
        for target in dict.fromkeys(transition.targets):
            edges.setdefault((src, ids[target]), []).append(label)
    lines = ["stateDiagram-v2"]
    lines += [f'    state "{status.value}" as {ids[status]}' for status in OutboundStatus]
    lines += [f"    {src} --> {dst} : {', '.join(labels)}" for (src, dst), labels in edges.items()]
    lines += [f"    {ids[status]} --> [*]" for status in (_D, _F)]
    return "\n".join(lines) + "\n"
