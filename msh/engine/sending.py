"""The sending state machine of a reliable message (ebMS2 §6.5.1, §6.5.4, §6.5.7, §10.1.3), sans-IO.

:func:`step` takes the state of one outbound message, an event and the time, and returns the new state
and the actions the runtime must carry out. It never reads a clock, makes an id or does I/O. The
transitions are data, :data:`TRANSITIONS`, keyed by (status, event type); a pair not in the table raises
:class:`EngineError`, a handler that lands outside the statuses its row declares, or on evidence
:data:`msh.engine.outcomes.STATUSES` does not allow for the status, raises too; and :func:`state_diagram`
draws the table for the documentation.

The runtime commits the returned state together with the timer actions (:class:`ScheduleTimer`,
:class:`CancelTimer`) in one transaction, and only then executes :class:`Transmit`, :class:`RequestStatus`
and the notifications (docs/design.md §5.1: a message is committed before its first transmission; a resend
sends the identical stored bytes). Actions are listed in that order.

Statuses and the evidence each rests on are defined once, in :mod:`msh.engine.outcomes`; a status change
is announced by a notification action carrying its evidence (:class:`NotifyForwarded`,
:class:`NotifyDelivered`, :class:`NotifySent`, :class:`NotifyFailed`), which the runtime journals.

Decisions where the specifications are silent:

* ``attempts`` counts the transmissions issued (a :class:`Transmit` action, or a :class:`RequestStatus`
  asked in place of one), including one whose outcome is not known yet; a timer is armed with every
  transmission, so a process that dies between commit and transmission resumes from the timer row
  (docs/design.md §5.6).
* ``transmitted`` (ebMS2 §6.5.7 "the message was transmitted") is true unless every attempt issued is
  known never to have left: ``refused`` counts those (connection refused, name not found, TLS handshake
  refused, an HTTP 4xx, 502 or 503 that says the message was not taken, a SOAP Server fault). An attempt
  whose outcome is still unknown when the timer gives up, an HTTP answer, a timeout waiting for the answer,
  a reset: any of these may have delivered it. A DeliveryFailure is an Error only when nothing left, else
  a Warning: "it may have been delivered". Telling an application Error for a message that may have
  arrived invites a duplicate business transaction.
* A transport failure does not resend at once: it counts as a lost message and the resend waits for the
  timer (ebMS2 §6.5.4 "same algorithm", §6.4.4 RetryInterval applies after a communications error). For a
  best-effort message with no transmission left the failure is reported at once (no acknowledgment can
  make it a success); with an acknowledgment requested the last timer is awaited, since a timed-out
  exchange may still have reached the peer.
* A timer that fires while a transmission's outcome is still unknown treats it as lost (resend, or give
  up): the runtime's HTTP timeout should be shorter than the first-resend timeout.
* Messages without AckRequested are retried only on transport failures (§6.5.4 speaks of a
  "communications protocol error"); a 2xx answer from the next MSH makes them ``sent`` (§6.6 rows 4 and 8:
  no acknowledgment by design), never ``delivered``.
* An ErrorList from the peer whose highestSeverity is Error fails the message (severity Error: the peer
  refused it). A DeliveryFailure of severity Warning (an intermediary gave up after transmitting) fails it
  with severity Warning. Warnings alone do not change anything (ebMS2 §4.2.3.2.4: processing went on).
* Acknowledgments count by actor (§10.1.3: "MUST differentiate, based upon the actor"): the To Party
  MSH's (actor toPartyMSH, or no actor) delivers the message; the next MSH's, from an intermediary on the
  path (:attr:`AcknowledgmentReceived.by_intermediary`), makes it ``forwarded`` when it asked the next MSH
  (:attr:`Reliability.hop_ack`, or an agreement that asks only the next MSH). A forwarded message that
  asked the To party too is resent *end to end* on its own schedule until the To party's acknowledgment
  comes or the retries end (§6.5.4: resend while the acknowledgment requested has not been received; the
  intermediary's acknowledgment is not it); it then fails with severity Warning (it was transmitted).
* A message that asks only the next MSH (§6.6 rows 3 and 7: no end-to-end notification) is delivered by
  that acknowledgment when the To party itself sent it (a single hop). From an intermediary it is
  ``forwarded``: the hop is done and the resends stop; a DeliveryFailure from the path may still come
  (§6.5.7) until the time its retry schedule would have given up, and then it is ``sent`` (never
  ``delivered``: nothing tells the sender the To party has it).
* A sending machine whose promise ends at the next MSH (:attr:`Reliability.end_to_end` False: a forward
  of an intermediary, a signal sent hop by hop) is delivered by the next MSH's acknowledgment: ebMS2
  §10.1.3 "mark the persisted message as delivered".
* A signed receipt that does not match what was sent (:attr:`AcknowledgmentReceived.receipt_problem`)
  still delivers the message: the partner said it has it; what is missing is proof, recorded beside the
  status (ebMS2 §6.3.2.5).
* Late transmission outcomes and stale timers after a final status are explicit no-ops: they race with
  acknowledgments by nature. An early timer (before ``next_due_at``) re-arms itself.
* After ``delivered`` everything is ignored (ebMS2 §6.3.2.5, §6.5.7 note). After ``failed`` or ``sent`` the
  To party's word still counts: its acknowledgment (or a StatusResponse Received or Processed) records the
  delivery the earlier verdict could not see; after ``sent`` an error message from the receiving side
  still fails it. Nothing is transmitted again either way.
* Status before resend (the REPORT idea of HTTPR; off unless the runtime passes
  :attr:`TimerDue.status_check_after`): a message that may already have reached the partner and whose
  transmissions since have all failed without leaving for at least that long is not resent when the timer
  fires: :class:`RequestStatus` asks the partner first (ebMS2 §7), in place of that resend and within the
  same retry budget. Received or Processed delivers it (evidence ``status-response``); any other answer,
  or none, sends the resend after all; a partner still unreachable counts as that resend failing. ebMS2
  §7 says an MSH SHOULD NOT use the status service to implement reliable messaging: this only avoids
  sending a body twice after an outage, and is off by default.
* An agreement removed from the running MSH (:class:`AgreementWithdrawn`, a reload) fails a message sent under
  it that is not final yet, with evidence ``agreement-removed`` and the usual severity (Error if nothing left,
  else Warning): without the agreement nothing can be resent or checked, and the application is told rather
  than left waiting. A final message is not changed.
* An operator may have a ``failed`` message sent again (:class:`OperatorResend`): a new attempt series of
  the identical stored bytes under the same MessageId, its Retries counted afresh, ``pending`` on evidence
  ``operator-resend``. The receiver's duplicate elimination (ebMS2 §6.4.1) keeps the application from
  getting it twice; whether a resend may go at all (the message asked for it, PersistDuration since the
  first transmission has not passed, §6.4.6) is :func:`msh.engine.resend.resend_refusal`'s to say. The
  series keeps the first transmission's time, so it still ends at PersistDuration and TimeToLive; a
  resend past either leaves the message failed and transmits nothing.
* An event for a message the store does not know raises :class:`UnknownMessage`: the runtime ignores
  such acknowledgments and errors (ebMS2 §6.5.2).

Reliability delegated to a queuing transport (:attr:`Reliability.method` ``Transport``, the *Reliable
Messaging* draft's ReliableMessagingMethod) has a table of its own, :data:`TRANSPORT_TRANSITIONS`; the
draft's section "ebXML Reliable Messaging using Commercial Software Products / Queuing Transports" says
"Implementations should use the facilities of the Queuing Transport to determine if the message was
delivered", and ebMS2 B.4 that on a communications error "the appropriate transport recovery handler will
execute a recovery sequence. Only if the error is unrecoverable, does Reliable Messaging recovery take place":

* Nothing the transport accepted is resent, and the agreement's Retries do not apply. The transport accepting
  the message (:class:`TransmitSucceeded`: an AMQP broker settled it as accepted) makes it ``sent`` when no
  acknowledgment is requested (evidence ``accepted-by-transport``); with one requested it is
  ``awaiting-ack`` on that evidence until the To Party MSH's acknowledgment delivers it, or the message's
  deadline (:func:`msh.engine.timers.transport_deadline`: the earlier of TimeToLive and PersistDuration,
  else the end of the agreement's retry schedule) fails it with severity Warning: it may have arrived.
* A transport failure is the transport's recovery (ebMS2 B.4): the hand-off is tried again when the timer
  fires, a RetryInterval after it was made, as often as it takes until the deadline; then the message
  fails, severity Error when no hand-off ever left (the broker refused it or could not be reached), Warning
  when one may have (lost before the broker settled it). Retrying such a hand-off may put a second copy on
  the queue: the broker eliminates nothing, the receiving MSH's duplicate elimination (ebMS2 §6.4.1) does.
* An acknowledgment from an intermediary is not counted (the transport carries the hop; the draft's rules
  for intermediate acknowledgments do not apply), and nothing asks the partner for a status before a
  hand-off is retried: there is no resend to stand in for. A StatusResponse the operator asked for still
  delivers the message when it says Received or Processed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from msh.ebms.model import ErrorList, MessageStatus
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH
from msh.engine import timers
from msh.engine.outcomes import STATUSES, Evidence, OutboundStatus, explain
from msh.engine.reliability import DEFAULT_ACK_WAIT, Reliability, ReliableMessagingMethod, effective_actor
from msh.errors import ErrorCode, Issue, MshError, Severity

__all__ = [
    "DEFAULT_ACK_WAIT",
    "TRANSITIONS",
    "TRANSPORT_TRANSITIONS",
    "AcknowledgmentReceived",
    "Action",
    "AgreementWithdrawn",
    "CancelTimer",
    "EngineError",
    "ErrorReceived",
    "Event",
    "Evidence",
    "NotifyDelivered",
    "NotifyFailed",
    "NotifyForwarded",
    "NotifySent",
    "OperatorResend",
    "OutboundState",
    "OutboundStatus",
    "Reliability",
    "ReliableMessagingMethod",
    "RequestStatus",
    "ScheduleTimer",
    "SendAgain",
    "StatusReported",
    "StatusUnavailable",
    "Submit",
    "TimerDue",
    "Transition",
    "Transmit",
    "TransmitFailed",
    "TransmitSucceeded",
    "UnknownMessage",
    "explain_state",
    "state_diagram",
    "step",
    "transitions_for",
]


class EngineError(MshError):
    """An event the state machine has no transition for: a bug in the caller, not a protocol error."""


class UnknownMessage(EngineError):
    """An event other than :class:`Submit` for a message that has no state (the store does not know it)."""


@dataclass(frozen=True, slots=True)
class OutboundState:
    """The committed state of one outbound message (one store row).

    ``attempts`` counts the transmissions issued and ``refused`` those of them known never to have left
    (:attr:`transmitted`: any other may have reached the next MSH; it sets the DeliveryFailure severity,
    ebMS2 §6.5.7); ``next_due_at`` is when the timer fires (None in a final status); ``failure`` is the
    issue the application was told; ``evidence`` what the status rests on (:mod:`msh.engine.outcomes`);
    ``receipt_problem`` why the signed receipt that delivered it does not prove what was sent (ebMS2
    §6.3.2.5); ``unreachable_since`` when the next MSH last became unreachable (every attempt since failed
    without leaving; None: reachable as far as known).
    """

    message_id: str
    status: OutboundStatus
    reliability: Reliability
    attempts: int
    first_sent_at: datetime | None
    refused: int
    next_due_at: datetime | None
    failure: Issue | None = None
    evidence: Evidence | None = None
    receipt_problem: str | None = None
    unreachable_since: datetime | None = None

    @property
    def transmitted(self) -> bool:
        """An attempt may have reached the next MSH: not every attempt issued is known to have been refused
        (ebMS2 §6.5.7: "the message was transmitted")."""
        return self.attempts > self.refused


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
    """The next MSH's HTTP server answered 2xx and the answer carried no acknowledgment (ebMS2 B.2.3: the
    posted message was received)."""


@dataclass(frozen=True, slots=True)
class TransmitFailed:
    """No usable answer: the transmission counts as a lost message (ebMS2 §6.5.4). ``transmitted`` False
    only when the message certainly never reached the next MSH (connection refused, name not found, TLS
    refused, an HTTP refusal that says it was not taken); a timeout or a reset after the request could have
    left is ``transmitted`` (it may have arrived)."""

    reason: str
    transmitted: bool = True


@dataclass(frozen=True, slots=True)
class AcknowledgmentReceived:
    """An Acknowledgment element for this message arrived (ebMS2 §6.5.2, §6.3.2); ``by_intermediary``: it
    came from an intermediary on the path, not from the To party (ebMS2 §10.1.3); ``receipt_problem``: it
    was asked as a signed receipt and does not prove what was sent (ebMS2 §6.3.2.5), and why."""

    ref_to_message_id: str
    actor: str | None = ACTOR_TO_PARTY_MSH
    by_intermediary: bool = False
    receipt_problem: str | None = None


@dataclass(frozen=True, slots=True)
class ErrorReceived:
    """An ErrorList referring to this message arrived (ebMS2 §4.2.4, §6.5.7); ``fault``: made from a SOAP
    Fault the peer answered with (no ebXML error message came: nobody else will report it)."""

    error_list: ErrorList
    fault: bool = False


@dataclass(frozen=True, slots=True)
class AgreementWithdrawn:
    """The agreement ``cpaid`` the message was sent under was removed from the running MSH (a reload,
    :mod:`msh.runtime.reload`) before the message's outcome was final."""

    message_id: str
    cpaid: str


@dataclass(frozen=True, slots=True)
class TimerDue:
    """The message's timer row came due. ``status_check_after``: the MSH asks the partner for the status of
    a message before resending it once the partner has been unreachable at least this long (see the module
    docs; None: never). ``in_flight``: the last transmission has not ended yet (it waits for a connection,
    or for its answer): no resend is due before it has, and it is not given up on for want of retries."""

    status_check_after: timedelta | None = None
    in_flight: bool = False


@dataclass(frozen=True, slots=True)
class SendAgain:
    """Another copy of a message this MSH forwards arrived (an intermediary forwards every copy and
    eliminates no duplicate, ebMS2 §10.1): send it once more now, within the same retry budget."""


@dataclass(frozen=True, slots=True)
class StatusReported:
    """The To party's StatusResponse about this message (ebMS2 §7.3.3); ``attempt``: the attempt a
    :class:`RequestStatus` asked it in place of (None: asked for another reason, e.g. by the operator)."""

    message_status: MessageStatus
    attempt: int | None = None


@dataclass(frozen=True, slots=True)
class StatusUnavailable:
    """The StatusRequest of :class:`RequestStatus` for ``attempt`` got no StatusResponse: ``transmitted``
    False when it could not reach the partner at all, True when the partner answered otherwise (a 202, an
    error message such as NotSupported, ebMS2 §7)."""

    attempt: int
    reason: str
    transmitted: bool


@dataclass(frozen=True, slots=True)
class OperatorResend:
    """The operator asks for a failed message to be sent again as a new attempt series, same MessageId and
    identical bytes (the partner's duplicate elimination protects its application, ebMS2 §6.4.1). Who asked
    and why is the runtime's to journal; the engine needs neither."""


Event: TypeAlias = (
    Submit
    | OperatorResend
    | TransmitSucceeded
    | TransmitFailed
    | AcknowledgmentReceived
    | ErrorReceived
    | TimerDue
    | SendAgain
    | StatusReported
    | StatusUnavailable
    | AgreementWithdrawn
)

# --- actions ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Transmit:
    """Send the stored bytes of the message (the same bytes on every attempt, docs/design.md §5.1)."""

    message_id: str
    attempt: int


@dataclass(frozen=True, slots=True)
class RequestStatus:
    """Ask the To party for the status of the message (a StatusRequest, ebMS2 §7.1.1) in place of resend
    number ``attempt``; its answer comes back as :class:`StatusReported` or :class:`StatusUnavailable`."""

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
    """Tell the sending application the message was delivered (ebMS2 §6.3.2.5), on ``evidence``; a
    ``receipt_problem`` says why the signed receipt does not prove what was sent."""

    message_id: str
    evidence: Evidence = Evidence.TO_PARTY_ACKNOWLEDGMENT
    receipt_problem: str | None = None


@dataclass(frozen=True, slots=True)
class NotifyForwarded:
    """Record that the next MSH acknowledged the message (ebMS2 §10.1.3): it is on its way, not delivered."""

    message_id: str


@dataclass(frozen=True, slots=True)
class NotifySent:
    """Tell the sending application the message was handed over and no acknowledgment will come, by design
    (ebMS2 §6.6 rows 3, 4, 7 and 8), on ``evidence``."""

    message_id: str
    evidence: Evidence


@dataclass(frozen=True, slots=True)
class NotifyFailed:
    """Tell the sending application the message was not delivered: a DeliveryFailure (ebMS2 §6.5.7) on
    ``evidence``; ``expired`` when its TimeToLive is what ended it (ebMS2 §3.1.6.4)."""

    message_id: str
    issue: Issue
    expired: bool = False
    evidence: Evidence = Evidence.RETRIES_EXHAUSTED


Action: TypeAlias = (
    Transmit
    | RequestStatus
    | ScheduleTimer
    | CancelTimer
    | NotifyDelivered
    | NotifyForwarded
    | NotifySent
    | NotifyFailed
)
Step: TypeAlias = tuple[OutboundState, tuple[Action, ...]]
Handler: TypeAlias = Callable[[OutboundState | None, Any, datetime], Step]

# --- handlers -----------------------------------------------------------------------------------------

_P, _W, _D, _F = OutboundStatus.PENDING, OutboundStatus.AWAITING_ACK, OutboundStatus.DELIVERED, OutboundStatus.FAILED
_FW, _S = OutboundStatus.FORWARDED, OutboundStatus.SENT
# ebMS2 §7.3.3: the answers that say the To party has the message.
_HAS_IT: Final = frozenset({MessageStatus.RECEIVED, MessageStatus.PROCESSED})


def _known(state: OutboundState | None) -> OutboundState:
    if state is None:  # pragma: no cover - step() rejects it before any handler runs
        raise UnknownMessage("no state")
    return state


def _ignore(state: OutboundState | None, event: Any, now: datetime) -> Step:
    return _known(state), ()


def _failure(state: OutboundState, description: str, severity: Severity | None = None) -> Issue:
    # ebMS2 §6.5.7: Error if the message could not be transmitted, Warning if it was but no ack came.
    if severity is None:
        severity = Severity.WARNING if state.transmitted else Severity.ERROR
    if severity is Severity.WARNING and state.transmitted:
        description += "; it was transmitted, so it may have been delivered"
    return Issue(ErrorCode.DELIVERY_FAILURE, severity, f"message {state.message_id}: {description}")


def _fail(
    state: OutboundState, issue: Issue, evidence: Evidence, *, cancel: bool = True, expired: bool = False
) -> Step:
    failed = replace(state, status=_F, next_due_at=None, failure=issue, evidence=evidence)
    actions: tuple[Action, ...] = (NotifyFailed(state.message_id, issue, expired, evidence),)
    return failed, ((CancelTimer(state.message_id), *actions) if cancel else actions)


def _deliver(state: OutboundState, evidence: Evidence, receipt_problem: str | None = None) -> Step:
    done = replace(state, status=_D, next_due_at=None, evidence=evidence, receipt_problem=receipt_problem)
    return done, (CancelTimer(state.message_id), NotifyDelivered(state.message_id, evidence, receipt_problem))


def _sent(state: OutboundState, evidence: Evidence) -> Step:
    done = replace(state, status=_S, next_due_at=None, evidence=evidence)
    return done, (CancelTimer(state.message_id), NotifySent(state.message_id, evidence))


def _hop_only(r: Reliability) -> bool:
    """The message asks only the next MSH for an acknowledgment (ebMS2 §6.6 rows 3 and 7)."""
    return (
        r.ack_requested and not r.hop_ack and r.ack_actor is not None and effective_actor(r.ack_actor) == ACTOR_NEXT_MSH
    )


def _submit(state: OutboundState | None, event: Submit, now: datetime) -> Step:
    r = event.reliability
    fresh = OutboundState(event.message_id, _P, r, 0, None, 0, None, evidence=Evidence.SUBMITTED)
    # ebMS2 §3.1.6.4: a message whose TimeToLive has passed is not sent at all.
    if r.time_to_live is not None and now >= r.time_to_live:
        issue = _failure(fresh, f"TimeToLive {r.time_to_live.isoformat()} had passed when it was submitted")
        return _fail(fresh, issue, Evidence.TIME_TO_LIVE, cancel=False, expired=True)
    # ebMS2 §6.5.1: save the message (the runtime commits this state), then send it, then wait.
    due = timers.next_due(r, attempts=1, sent_at=now, first_sent_at=now)
    pending = replace(fresh, attempts=1, first_sent_at=now, next_due_at=due)
    return pending, (ScheduleTimer(event.message_id, due), Transmit(event.message_id, 1))


def _no_transmission_left(state: OutboundState, reason: str) -> Step:
    r = state.reliability
    issue = _failure(state, f"could not be transmitted in {state.attempts} attempts (Retries {r.retries}): {reason}")
    return _fail(state, issue, Evidence.RETRIES_EXHAUSTED)


def _reached(state: OutboundState, maybe: bool, now: datetime) -> OutboundState:
    """The state after an attempt's outcome: ``maybe`` it reached the next MSH, else it certainly did not."""
    if maybe:
        return state if state.unreachable_since is None else replace(state, unreachable_since=None)
    refused = min(state.refused + 1, state.attempts)
    return replace(state, refused=refused, unreachable_since=state.unreachable_since or now)


def _transmit_succeeded(state: OutboundState | None, event: TransmitSucceeded, now: datetime) -> Step:
    s = replace(_reached(_known(state), True, now), status=_W, evidence=Evidence.TRANSMISSION)
    if not s.reliability.ack_requested:
        # ebMS2 §6.6 rows 4 and 8, B.2.3: the next MSH took it and no acknowledgment was asked: sent.
        return _sent(s, Evidence.ACCEPTED_BY_NEXT_MSH)
    # ebMS2 §6.5.1 step 5: wait for the Acknowledgment; the timer armed with the transmission runs on.
    return s, ()


def _transmit_failed(state: OutboundState | None, event: TransmitFailed, now: datetime) -> Step:
    s = replace(_reached(_known(state), event.transmitted, now), status=_W, evidence=Evidence.TRANSMISSION)
    # ebMS2 §6.5.4: a communications error counts as a lost message; the timer resends it.
    if not s.reliability.ack_requested and s.attempts >= s.reliability.retries + 1:
        return _no_transmission_left(s, event.reason)
    return s, ()


def _outcome_while_forwarded(
    state: OutboundState | None, event: TransmitSucceeded | TransmitFailed, now: datetime
) -> Step:
    # ebMS2 §6.5.4: an end-to-end resend of a forwarded message; only whether the next MSH is reachable changes.
    maybe = isinstance(event, TransmitSucceeded) or event.transmitted
    return _reached(_known(state), maybe, now), ()


def _forward(state: OutboundState) -> Step:
    r = state.reliability
    forwarded = replace(state, status=_FW, unreachable_since=None, evidence=Evidence.HOP_ACKNOWLEDGMENT)
    if r.hop_ack:
        # ebMS2 §6.5.4, §10.1.3: the To Party MSH's acknowledgment is still due: the resends go on.
        return forwarded, (NotifyForwarded(state.message_id),)
    # ebMS2 §6.6 rows 3 and 7: the hop is done; a DeliveryFailure from the path may come until the deadline.
    first = state.first_sent_at
    assert first is not None  # a message with an acknowledgment was transmitted
    due = timers.end_to_end_deadline(r, first)
    return replace(forwarded, next_due_at=due), (
        ScheduleTimer(state.message_id, due),
        NotifyForwarded(state.message_id),
    )


def _acknowledged(state: OutboundState | None, event: AcknowledgmentReceived, now: datetime) -> Step:
    s = _known(state)
    if event.ref_to_message_id != s.message_id:
        raise EngineError(f"acknowledgment of {event.ref_to_message_id} routed to message {s.message_id}")
    r = s.reliability
    if not r.ack_requested:
        # ebMS2 §6.5.2: "If an Acknowledgment Message is received unexpectedly, it should be ignored."
        return s, ()
    actor = effective_actor(event.actor)
    problem = event.receipt_problem
    if not r.end_to_end:
        # ebMS2 §10.1.3: the next MSH has it: "mark the persisted message as delivered".
        if actor != ACTOR_NEXT_MSH and r.ack_actor is not None:
            return s, ()
        return _deliver(s, Evidence.HOP_ACKNOWLEDGMENT, problem)
    if actor == ACTOR_NEXT_MSH and event.by_intermediary:
        # ebMS2 §10.1.3: an intermediary's acknowledgment, counted only when the message asked the next MSH.
        if (r.hop_ack or _hop_only(r)) and s.status in (_P, _W):
            return _forward(s)
        return s, ()
    if actor == ACTOR_NEXT_MSH and r.ack_actor is not None and not _hop_only(r):
        # ebMS2 §10.1.3: the next MSH's acknowledgment does not answer the To Party MSH's request; with both
        # asked (the To party acting as next MSH too) it is the hop's, and the end-to-end one is awaited.
        return _forward(s) if r.hop_ack and s.status in (_P, _W) else (s, ())
    if actor == ACTOR_TO_PARTY_MSH and _hop_only(r):
        # ebMS2 §6.5.2: an acknowledgment of an actor that was not asked is unexpected: ignored.
        return s, ()
    # ebMS2 §6.5.2: mark the persisted message as delivered; §6.3.2.5: the application MAY be told.
    return _deliver(s, Evidence.TO_PARTY_ACKNOWLEDGMENT, problem)


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
    evidence = Evidence.SOAP_FAULT if event.fault else Evidence.ERROR_MESSAGE
    issue = Issue(
        ErrorCode.DELIVERY_FAILURE,
        severity,
        f"message {s.message_id}: the receiving side reported an error: {_describe(el)}",
    )
    return _fail(s, issue, evidence, cancel=s.next_due_at is not None)


def _give_up(s: OutboundState, reason: timers.GiveUp, first: datetime) -> Step:
    r = s.reliability
    done = "forwarded (the next MSH acknowledged it) but no end-to-end Acknowledgment" if s.status is _FW else None
    if reason is timers.GiveUp.RETRIES:
        # ebMS2 §6.5.4: no Acknowledgment after the maximum number of retries: notify the application.
        what = done or ("no Acknowledgment" if r.ack_requested else "no answer from the peer MSH")
        return _fail(
            s,
            _failure(s, f"{what} after {s.attempts} transmissions (Retries {r.retries})"),
            Evidence.RETRIES_EXHAUSTED,
        )
    if reason is timers.GiveUp.TIME_TO_LIVE and r.time_to_live is not None:
        # ebMS2 §3.1.6.4: past TimeToLive the receiver would refuse it.
        what = f"TimeToLive {r.time_to_live.isoformat()} passed after {s.attempts} transmissions"
        return _fail(s, _failure(s, f"{done}; {what}" if done else what), Evidence.TIME_TO_LIVE, expired=True)
    # ebMS2 §6.4.6: PersistDuration has passed since the first transmission: report a delivery failure.
    what = (
        f"PersistDuration {r.persist_duration} passed since the first transmission at {first.isoformat()} after "
        f"{s.attempts} transmissions"
    )
    return _fail(s, _failure(s, f"{done}; {what}" if done else what), Evidence.PERSIST_DURATION)


def _status_check_due(s: OutboundState, event: TimerDue, now: datetime) -> bool:
    after = event.status_check_after
    return (
        after is not None
        and s.reliability.ack_requested
        and s.transmitted
        and s.unreachable_since is not None
        and now - s.unreachable_since >= after
    )


def _timer_due(state: OutboundState | None, event: TimerDue, now: datetime) -> Step:
    s = _known(state)
    if s.next_due_at is not None and now < s.next_due_at:
        return s, (ScheduleTimer(s.message_id, s.next_due_at),)
    r = s.reliability
    if s.status is _FW and not r.hop_ack:
        # ebMS2 §6.6 rows 3 and 7: no end-to-end notification, and no DeliveryFailure came from the path.
        return _sent(s, Evidence.HOP_ACKNOWLEDGMENT)
    first = s.first_sent_at if s.first_sent_at is not None else now
    reason = timers.give_up(r, attempts=s.attempts, first_sent_at=first, now=now)
    if event.in_flight and reason in (None, timers.GiveUp.RETRIES) and s.attempts > 0:
        # ebMS2 §6.4.4: RetryInterval is the time between retries, and §6.5.4 counts resends: the last
        # transmission has not even ended, so nothing is resent or given up yet; look again a RetryInterval on.
        due = timers.next_due(r, attempts=s.attempts, sent_at=now, first_sent_at=first)
        return replace(s, next_due_at=due), (ScheduleTimer(s.message_id, due),)
    if reason is not None:
        return _give_up(s, reason, first)
    # ebMS2 §6.5.4: resend the identical message; the next wait is RetryInterval. A forwarded message stays
    # forwarded (the end-to-end acknowledgment is what is awaited).
    attempt = s.attempts + 1
    due = timers.next_due(r, attempts=attempt, sent_at=now, first_sent_at=first)
    status = _FW if s.status is _FW else _W
    evidence = s.evidence if s.status is _FW else Evidence.TRANSMISSION
    resent = replace(s, status=status, attempts=attempt, first_sent_at=first, next_due_at=due, evidence=evidence)
    if _status_check_due(s, event, now):
        # HTTPR's REPORT: after an outage, ask before sending the body again (see the module docs).
        return resent, (ScheduleTimer(s.message_id, due), RequestStatus(s.message_id, attempt))
    return resent, (ScheduleTimer(s.message_id, due), Transmit(s.message_id, attempt))


def _send_again(state: OutboundState | None, event: SendAgain, now: datetime) -> Step:
    s = _known(state)
    # ebMS2 §10.1: the intermediary forwards the resent copy too; the timer and the budget run on.
    attempt = s.attempts + 1
    again = replace(s, status=_W, attempts=attempt, evidence=Evidence.TRANSMISSION)
    return again, (Transmit(s.message_id, attempt),)


def _status_reported(state: OutboundState | None, event: StatusReported, now: datetime) -> Step:
    s = _known(state)
    if event.message_status in _HAS_IT:
        # ebMS2 §7.3.3: Received / Processed: the To party's MSH has the message.
        return _deliver(s, Evidence.STATUS_RESPONSE)
    if event.attempt is not None and event.attempt == s.attempts and not s.status.final:
        # ebMS2 §7.3.3 NotRecognized (or no usable answer): the resend the question stood in for goes now.
        return s, (Transmit(s.message_id, s.attempts),)
    return s, ()


def _status_unavailable(state: OutboundState | None, event: StatusUnavailable, now: datetime) -> Step:
    s = _known(state)
    if event.attempt != s.attempts or s.status.final:
        return s, ()  # a later attempt is under way: this answer is stale
    if not event.transmitted:
        # The partner is still unreachable: as if the resend had failed without leaving (ebMS2 §6.5.4).
        return _reached(s, False, now), ()
    return s, (Transmit(s.message_id, s.attempts),)


def _withdrawn(state: OutboundState | None, event: AgreementWithdrawn, now: datetime) -> Step:
    s = _known(state)
    # ebMS2 §6.5.7: no resend is possible without the agreement; the application is told, never left waiting.
    issue = _failure(s, f"agreement {event.cpaid} was removed from this MSH before the message was acknowledged")
    return _fail(s, issue, Evidence.AGREEMENT_REMOVED, cancel=s.next_due_at is not None)


def _operator_resend(state: OutboundState | None, event: OperatorResend, now: datetime) -> Step:
    s = _known(state)
    r = s.reliability
    first = s.first_sent_at if s.first_sent_at is not None else now
    limit = timers.deadline(r, first)
    if limit is not None and now >= limit:
        # ebMS2 §6.4.6, §3.1.6.4: past PersistDuration since the first send, or past TimeToLive: no resend.
        return s, ()
    # ebMS2 §6.4.1, §6.5.4: the identical message again, a new series of Retries; the first send's time stays.
    due = timers.next_due(r, attempts=1, sent_at=now, first_sent_at=first)
    return _sent_again(s, first, due)


def _late_delivery(state: OutboundState | None, event: AcknowledgmentReceived | StatusReported, now: datetime) -> Step:
    """After ``failed`` or ``sent``: the To party's acknowledgment or StatusResponse still records delivery."""
    s = _known(state)
    r = s.reliability
    if isinstance(event, StatusReported):
        # ebMS2 §7.3.3: Received / Processed: the To party's MSH has the message.
        return _deliver(s, Evidence.STATUS_RESPONSE) if event.message_status in _HAS_IT else (s, ())
    actor = effective_actor(event.actor)
    to_party = not event.by_intermediary and (actor == ACTOR_TO_PARTY_MSH or _hop_only(r) or r.ack_actor is None)
    if not r.ack_requested or not r.end_to_end or not to_party:
        return s, ()
    # ebMS2 §6.5.2: the To party has it; the DeliveryFailure said "may have been delivered" or could not know.
    return _deliver(s, Evidence.TO_PARTY_ACKNOWLEDGMENT, event.receipt_problem)


# --- ReliableMessagingMethod Transport: a queuing transport makes the message reliable -------------------

_QUEUING: Final = 'the Reliable Messaging draft, "Queuing Transports"'


def _submit_by_transport(state: OutboundState | None, event: Submit, now: datetime) -> Step:
    r = event.reliability
    fresh = OutboundState(event.message_id, _P, r, 0, None, 0, None, evidence=Evidence.SUBMITTED)
    # ebMS2 §3.1.6.4: a message whose TimeToLive has passed is not sent at all.
    if r.time_to_live is not None and now >= r.time_to_live:
        issue = _failure(fresh, f"TimeToLive {r.time_to_live.isoformat()} had passed when it was submitted")
        return _fail(fresh, issue, Evidence.TIME_TO_LIVE, cancel=False, expired=True)
    # ebMS2 §6.5.1: committed, then handed to the transport; B.4: the timer tries the hand-off again if refused.
    due = timers.handoff_due(r, sent_at=now, first_sent_at=now)
    pending = replace(fresh, attempts=1, first_sent_at=now, next_due_at=due)
    return pending, (ScheduleTimer(event.message_id, due), Transmit(event.message_id, 1))


def _handed_over(state: OutboundState | None, event: TransmitSucceeded, now: datetime) -> Step:
    s = replace(_reached(_known(state), True, now), status=_W, evidence=Evidence.ACCEPTED_BY_TRANSPORT)
    if not s.reliability.ack_requested:
        # Queuing Transports rule 1: the transport's facilities say it is delivered; no acknowledgment was asked.
        return _sent(s, Evidence.ACCEPTED_BY_TRANSPORT)
    # ebMS2 §6.5.1 step 5: wait for the To Party MSH's acknowledgment, never resending, until the deadline.
    due = timers.transport_deadline(s.reliability, s.first_sent_at or now)
    return replace(s, next_due_at=due), (ScheduleTimer(s.message_id, due),)


def _handoff_failed(state: OutboundState | None, event: TransmitFailed, now: datetime) -> Step:
    s = _known(state)
    if s.evidence is Evidence.ACCEPTED_BY_TRANSPORT:
        return s, ()  # the outcome of an earlier hand-off, after the transport accepted one: nothing to retry
    # ebMS2 B.4: the transport's recovery: the timer armed with the hand-off tries it again.
    return replace(_reached(s, event.transmitted, now), status=_W, evidence=Evidence.TRANSMISSION), ()


def _acknowledged_by_transport(state: OutboundState | None, event: AcknowledgmentReceived, now: datetime) -> Step:
    s = _known(state)
    if event.ref_to_message_id != s.message_id:
        raise EngineError(f"acknowledgment of {event.ref_to_message_id} routed to message {s.message_id}")
    r = s.reliability
    actor = effective_actor(event.actor)
    if not r.ack_requested or event.by_intermediary:
        # ebMS2 §6.5.2: unexpected acknowledgments are ignored; the transport, not an intermediary, has the hop.
        return s, ()
    if actor == ACTOR_NEXT_MSH and r.ack_actor is not None and not _hop_only(r):
        # ebMS2 §10.1.3: the next MSH's acknowledgment does not answer the To Party MSH's request.
        return s, ()
    if actor == ACTOR_TO_PARTY_MSH and _hop_only(r):
        # ebMS2 §6.5.2: an acknowledgment of an actor that was not asked is unexpected: ignored.
        return s, ()
    # ebMS2 §6.5.2: mark the persisted message as delivered.
    return _deliver(s, Evidence.TO_PARTY_ACKNOWLEDGMENT, event.receipt_problem)


def _transport_gives_up(s: OutboundState, limit: datetime) -> Step:
    r = s.reliability
    first = s.first_sent_at
    assert first is not None  # a message past Submit was handed over at least once
    if s.evidence is Evidence.ACCEPTED_BY_TRANSPORT:
        done = (
            f"the queuing transport accepted it, but the To party's acknowledgment did not come by {limit.isoformat()}"
        )
    else:
        done = f"the queuing transport did not accept it in {s.attempts} hand-offs by {limit.isoformat()}"
    if r.time_to_live is not None and limit >= r.time_to_live:
        # ebMS2 §3.1.6.4: past TimeToLive the receiver would refuse it.
        return _fail(s, _failure(s, f"{done} (its TimeToLive)"), Evidence.TIME_TO_LIVE, expired=True)
    if r.persist_duration is not None:
        # ebMS2 §6.4.6: PersistDuration has passed since the first hand-off.
        what = f"{done} (PersistDuration {r.persist_duration} since the first hand-off at {first.isoformat()})"
        return _fail(s, _failure(s, what), Evidence.PERSIST_DURATION)
    # timers.transport_deadline: no TimeToLive or PersistDuration, the agreement's retry schedule has ended.
    what = f"{done} (the end of the agreement's retry schedule; Retries {r.retries} do not apply to it)"
    return _fail(s, _failure(s, what), Evidence.RETRY_WINDOW_ENDED)


def _transport_timer_due(state: OutboundState | None, event: TimerDue, now: datetime) -> Step:
    s = _known(state)
    if s.next_due_at is not None and now < s.next_due_at:
        return s, (ScheduleTimer(s.message_id, s.next_due_at),)
    r = s.reliability
    first = s.first_sent_at if s.first_sent_at is not None else now
    limit = timers.transport_deadline(r, first)
    if now >= limit:
        # ebMS2 §6.5.7: the message's time is over; Warning if a hand-off may have arrived, else Error.
        return _transport_gives_up(replace(s, first_sent_at=first), limit)
    if s.evidence is Evidence.ACCEPTED_BY_TRANSPORT:
        # Queuing Transports rule 1: accepted; nothing is resent, the acknowledgment is awaited until the deadline.
        return replace(s, next_due_at=limit), (ScheduleTimer(s.message_id, limit),)
    due = timers.handoff_due(r, sent_at=now, first_sent_at=first)
    if event.in_flight and s.attempts > 0:
        # ebMS2 §6.4.4: the last hand-off has not ended yet; look again a RetryInterval on.
        return replace(s, next_due_at=due), (ScheduleTimer(s.message_id, due),)
    # ebMS2 B.4: the transport's recovery: hand the identical message over again.
    attempt = s.attempts + 1
    again = replace(
        s, status=_W, attempts=attempt, first_sent_at=first, next_due_at=due, evidence=Evidence.TRANSMISSION
    )
    return again, (ScheduleTimer(s.message_id, due), Transmit(s.message_id, attempt))


def _status_reported_by_transport(state: OutboundState | None, event: StatusReported, now: datetime) -> Step:
    s = _known(state)
    # ebMS2 §7.3.3: Received / Processed: the To party's MSH has the message; any other answer changes nothing.
    return _deliver(s, Evidence.STATUS_RESPONSE) if event.message_status in _HAS_IT else (s, ())


def _operator_resend_by_transport(state: OutboundState | None, event: OperatorResend, now: datetime) -> Step:
    s = _known(state)
    r = s.reliability
    first = s.first_sent_at if s.first_sent_at is not None else now
    if now >= timers.transport_deadline(r, first):
        # ebMS2 §6.4.6, §3.1.6.4: the message's time is over: no new hand-off.
        return s, ()
    # ebMS2 §6.4.1: the identical message handed over again; the receiver eliminates a duplicate.
    due = timers.handoff_due(r, sent_at=now, first_sent_at=first)
    return _sent_again(s, first, due)


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


def _live(status: OutboundStatus) -> dict[tuple[OutboundStatus | None, type[Any]], Transition]:
    return {
        (status, TransmitSucceeded): Transition(_transmit_succeeded, (_W, _S), "ebMS2 §6.5.1 step 5, §6.6, B.2.3"),
        (status, TransmitFailed): Transition(_transmit_failed, (_W, _F), "ebMS2 §6.5.4 communications error"),
        (status, AcknowledgmentReceived): Transition(_acknowledged, (_D, _FW, status), "ebMS2 §6.5.2, §10.1.3"),
        (status, ErrorReceived): Transition(_error_received, (_F, status), "ebMS2 §6.5.7, §4.2.3.2.4"),
        (status, TimerDue): Transition(_timer_due, (_W, _F, status), "ebMS2 §6.5.4, §6.4.6, §3.1.6.4"),
        (status, SendAgain): Transition(_send_again, (_W,), "ebMS2 §10.1: every copy is forwarded"),
        (status, StatusReported): Transition(_status_reported, (_D, status), "ebMS2 §7.3.3"),
        (status, StatusUnavailable): Transition(_status_unavailable, (status,), "ebMS2 §7, §6.5.4"),
        (status, AgreementWithdrawn): Transition(_withdrawn, (_F,), "ebMS2 §6.5.7: agreement removed"),
    }


def _after(status: OutboundStatus) -> dict[tuple[OutboundStatus | None, type[Any]], Transition]:
    """``failed`` and ``sent``: nothing is sent any more; the To party's word still records delivery."""
    late = Transition(_late_delivery, (_D, status), "ebMS2 §6.5.2, §7.3.3: the To party has it after all")
    return {
        (status, AcknowledgmentReceived): late,
        (status, StatusReported): late,
        (status, TransmitSucceeded): Transition(_ignore, (status,), "late outcome of a resend: ignored"),
        (status, TransmitFailed): Transition(_ignore, (status,), "late outcome of a resend: ignored"),
        (status, TimerDue): Transition(_ignore, (status,), "stale timer: ignored"),
        (status, SendAgain): Transition(_ignore, (status,), "a copy of a finished forward is submitted afresh"),
        (status, StatusUnavailable): Transition(_ignore, (status,), "a stale status question: ignored"),
        (status, AgreementWithdrawn): Transition(_ignore, (status,), "already final: the removal changes nothing"),
    }


_AFTER_SUBMIT: Final = (
    TransmitSucceeded,
    TransmitFailed,
    AcknowledgmentReceived,
    ErrorReceived,
    TimerDue,
    SendAgain,
    StatusReported,
    StatusUnavailable,
    AgreementWithdrawn,
)

TRANSITIONS: Final[Mapping[tuple[OutboundStatus | None, type[Any]], Transition]] = MappingProxyType(
    {
        (None, Submit): Transition(_submit, (_P, _F), "ebMS2 §6.5.1 steps 3-4, §3.1.6.4"),
        **_live(_P),
        **_live(_W),
        # ebMS2 §10.1.3, §6.5.4: forwarded; resent end to end until the To Party MSH's acknowledgment, a
        # DeliveryFailure or the end of the retries (rows 3 and 7: no resend, sent at the deadline).
        (_FW, AcknowledgmentReceived): Transition(_acknowledged, (_D, _FW), "ebMS2 §6.5.2, §10.1.3"),
        (_FW, ErrorReceived): Transition(_error_received, (_F, _FW), "ebMS2 §6.5.7, §4.2.3.2.4"),
        (_FW, TimerDue): Transition(_timer_due, (_FW, _F, _S), "ebMS2 §6.5.4, §6.6 rows 3 and 7"),
        (_FW, TransmitSucceeded): Transition(_outcome_while_forwarded, (_FW,), "ebMS2 §6.5.4: an end-to-end resend"),
        (_FW, TransmitFailed): Transition(_outcome_while_forwarded, (_FW,), "ebMS2 §6.5.4: an end-to-end resend"),
        (_FW, SendAgain): Transition(_ignore, (_FW,), "only forwards are sent again; ours are resent by the timer"),
        (_FW, StatusReported): Transition(_status_reported, (_D, _FW), "ebMS2 §7.3.3"),
        (_FW, StatusUnavailable): Transition(_status_unavailable, (_FW,), "ebMS2 §7, §6.5.4"),
        (_FW, AgreementWithdrawn): Transition(_withdrawn, (_F,), "ebMS2 §6.5.7: agreement removed"),
        # ebMS2 §6.3.2.5, §6.5.7 note: after the end-to-end acknowledgment, everything else is ignored.
        **{(_D, e): Transition(_ignore, (_D,), "ebMS2 §6.3.2.5, §6.5.7 note: ignored") for e in _AFTER_SUBMIT},
        **_after(_S),
        (_S, ErrorReceived): Transition(_error_received, (_F, _S), "ebMS2 §4.2.4: the partner refused it after all"),
        **_after(_F),
        (_F, ErrorReceived): Transition(_ignore, (_F,), "ebMS2 §6.5.7: already reported"),
        # ebMS2 §6.4.1, §6.4.6: the operator resends a failed message; the receiver eliminates a duplicate.
        (_F, OperatorResend): Transition(_operator_resend, (_P, _F), "ebMS2 §6.4.1, §6.4.6: operator resend"),
    }
)
"""(status, event type) -> :class:`Transition`; status None is "no state yet" (only :class:`Submit`).
The table of ReliableMessagingMethod ``ebXML``; ``Transport`` has :data:`TRANSPORT_TRANSITIONS`."""


def _live_by_transport(status: OutboundStatus) -> dict[tuple[OutboundStatus | None, type[Any]], Transition]:
    q = _QUEUING
    return {
        (status, TransmitSucceeded): Transition(_handed_over, (_W, _S), f"{q} rule 1; ebMS2 §6.5.1 step 5"),
        (status, TransmitFailed): Transition(_handoff_failed, (_W, status), "ebMS2 B.4: the transport's recovery"),
        (status, AcknowledgmentReceived): Transition(_acknowledged_by_transport, (_D, status), "ebMS2 §6.5.2"),
        (status, ErrorReceived): Transition(_error_received, (_F, status), "ebMS2 §6.5.7, §4.2.3.2.4"),
        (status, TimerDue): Transition(
            _transport_timer_due, (_W, _F, status), f"ebMS2 B.4; {q}: no resend; §3.1.6.4, §6.4.6"
        ),
        (status, StatusReported): Transition(_status_reported_by_transport, (_D, status), "ebMS2 §7.3.3"),
        (status, AgreementWithdrawn): Transition(_withdrawn, (_F,), "ebMS2 §6.5.7: agreement removed"),
    }


TRANSPORT_TRANSITIONS: Final[Mapping[tuple[OutboundStatus | None, type[Any]], Transition]] = MappingProxyType(
    {
        (None, Submit): Transition(_submit_by_transport, (_P, _F), "ebMS2 §6.5.1 steps 3-4, §3.1.6.4"),
        # The transport carries the message (the Reliable Messaging draft, "Queuing Transports"); the MSH retries
        # only a hand-off the transport did not accept (ebMS2 B.4). No forwarded status: intermediaries'
        # acknowledgments are not counted; no SendAgain (only forwards) and no StatusUnavailable (no status
        # question stands in for a resend): those pairs are refused.
        **_live_by_transport(_P),
        **_live_by_transport(_W),
        **{(_D, e): Transition(_ignore, (_D,), "ebMS2 §6.3.2.5, §6.5.7 note: ignored") for e in _AFTER_SUBMIT},
        **_after(_S),
        (_S, ErrorReceived): Transition(_error_received, (_F, _S), "ebMS2 §4.2.4: the partner refused it after all"),
        **_after(_F),
        (_F, ErrorReceived): Transition(_ignore, (_F,), "ebMS2 §6.5.7: already reported"),
        # ebMS2 §6.4.1: the operator has a failed message handed over again, before its deadline.
        (_F, OperatorResend): Transition(
            _operator_resend_by_transport, (_P, _F), "ebMS2 §6.4.1, §6.4.6: operator resend"
        ),
    }
)
"""The transitions of a message a queuing transport makes reliable (ReliableMessagingMethod ``Transport``):
the same keys as :data:`TRANSITIONS`, and no row for a forwarded message, :class:`SendAgain` or
:class:`StatusUnavailable`."""


def transitions_for(method: ReliableMessagingMethod) -> Mapping[tuple[OutboundStatus | None, type[Any]], Transition]:
    """The transition table of messages sent with ``method``."""
    return TRANSPORT_TRANSITIONS if method is ReliableMessagingMethod.TRANSPORT else TRANSITIONS


def step(state: OutboundState | None, event: Event, now: datetime) -> Step:
    """Apply ``event`` at ``now`` to the state of one outbound message; return the new state and actions.

    ``state`` is None for a message not yet submitted. Raises :class:`UnknownMessage` for any other event
    on a message with no state, and :class:`EngineError` for a (status, event) pair the table lacks (a
    second :class:`Submit` of the same message), or for a handler that lands where its row does not say or
    on evidence its status does not rest on (a bug).
    """
    if now.tzinfo is None:
        raise ValueError(f"now must be timezone-aware (UTC), got {now!r}")
    status = state.status if state is not None else None
    reliability = state.reliability if state is not None else event.reliability if isinstance(event, Submit) else None
    method = ReliableMessagingMethod.EBXML if reliability is None else reliability.method
    transition = transitions_for(method).get((status, type(event)))
    if transition is None:
        if state is None:
            raise UnknownMessage(f"{type(event).__name__} for a message with no outbound state")
        raise EngineError(f"no transition from {status} on {type(event).__name__} for message {state.message_id}")
    new, actions = transition.handler(state, event, now)
    if new.status not in transition.targets:
        raise EngineError(
            f"{type(event).__name__} took message {new.message_id} from {status} to {new.status}, which the table "
            f"row ({transition.rule}) does not list"
        )
    if new is not state and new.evidence is not None and new.evidence not in STATUSES[new.status].evidence:
        raise EngineError(f"status {new.status} of message {new.message_id} cannot rest on evidence {new.evidence}")
    return new, actions


def explain_state(state: OutboundState) -> str:
    """What ``state``'s status means for this message, in a phrase (:func:`msh.engine.outcomes.explain`)."""
    failure = state.failure
    return explain(
        state.status,
        state.evidence,
        severity=None if failure is None else failure.severity.value,
        receipt_problem=state.receipt_problem,
        end_to_end_awaited=not _hop_only(state.reliability),
        end_to_end=state.reliability.end_to_end,
    )


def state_diagram(method: ReliableMessagingMethod = ReliableMessagingMethod.EBXML) -> str:
    """The sending state machine of messages sent with ``method`` as a Mermaid ``stateDiagram-v2``, drawn from
    its table (:data:`TRANSITIONS`, :data:`TRANSPORT_TRANSITIONS`).

    Edges that lead to the same status are merged; ignored events show as self-loops marked "ignored"; a
    status no row of the table reaches or leaves is not drawn.
    """
    table = transitions_for(method)
    used = {source for source, _ in table} | {target for t in table.values() for target in t.targets}
    statuses = [status for status in OutboundStatus if status in used]
    ids = {status: status.value.replace("-", "_") for status in statuses}
    edges: dict[tuple[str, str], list[str]] = {}
    for (source, event), transition in table.items():
        src = "[*]" if source is None else ids[source]
        label = event.__name__ + (" (ignored)" if transition.ignored else "")
        for target in dict.fromkeys(transition.targets):
            edges.setdefault((src, ids[target]), []).append(label)
    lines = ["stateDiagram-v2"]
    lines += [f'    state "{status.value}" as {ids[status]}' for status in statuses]
    lines += [f"    {src} --> {dst} : {', '.join(labels)}" for (src, dst), labels in edges.items()]
    lines += [f"    {ids[status]} --> [*]" for status in statuses if status.final]
    return "\n".join(lines) + "\n"


def _sent_again(s: OutboundState, first: datetime | None, due: datetime) -> tuple[OutboundState, tuple[Action, ...]]:
    """An operator's resend (ebMS2 §6.4.1: the identical message): pending again, one transmission counted,
    the first send's time kept, the next timer at ``due``."""
    again = replace(
        s,
        status=_P,
        attempts=1,
        refused=0,
        first_sent_at=first,
        next_due_at=due,
        failure=None,
        evidence=Evidence.OPERATOR_RESEND,
        receipt_problem=None,
        unreachable_since=None,
    )
    return again, (ScheduleTimer(s.message_id, due), Transmit(s.message_id, 1))
