"""What follows when a sending machine's step ends in failure, or when the To party reports one (ebMS2 §6.5.7
Failed Message Delivery, §9.1.1): decisions about *whose* message it was, which the sending machine of
:mod:`msh.engine.sending` does not know, and which the runtime carries out (:mod:`msh.runtime.executor`).

* A forward an intermediary gives up on: "the MSH or process handling the message (as in the case of a
  routing intermediary) SHALL send a delivery failure notification to the From Party" (§6.5.7), unless the
  next hop's own error message, relayed to the From party, already tells it.
* A DeliveryFailure of ours that could not be delivered: the From party "MUST be informed of the problem by
  other means" (§6.5.7): the operator is told.
* A message of ours in order that failed, or that the To party reports it could not present (its
  DeliveryFailure, severity Error): the To party presents no later message of the sequence, so the next one
  starts the sequence again (§9.1.1; :func:`msh.engine.ordering.assign`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

from msh.engine.outcomes import OutboundStatus
from msh.engine.sending import ErrorReceived, Event, OutboundState
from msh.errors import ErrorCode, Issue, Severity

__all__ = ["DeliveryFailureLost", "FollowUp", "OutboundKind", "ReportDeliveryFailure", "RestartSequence", "after_step"]


class OutboundKind(StrEnum):
    """Why this MSH sends an outbound message: whose it is, and so what may be done to its row."""

    OWN = "own"
    """A message our application submitted: this MSH is its From Party's MSH."""

    FORWARD = "forward"
    """A message received for another party, stored and forwarded to the next hop by this MSH acting as an
    intermediary (ebMS2 §10); another copy received later replaces it (ebMS2 §10.1: no duplicate
    elimination at an intermediary)."""

    SIGNAL = "signal"
    """An MSH signal of ours (an Acknowledgment, an error message, a DeliveryFailure) sent hop by hop along a
    route, stored so that it is resent until the next hop takes it."""


@dataclass(frozen=True, slots=True)
class ReportDeliveryFailure:
    """Tell the From party of a forward that it could not be delivered (ebMS2 §6.5.7), with ``issue``."""

    issue: Issue


@dataclass(frozen=True, slots=True)
class DeliveryFailureLost:
    """A DeliveryFailure of ours could not be delivered: the From party must be told by other means (ebMS2
    §6.5.7); ``issue`` is why the signal failed (None: not known)."""

    issue: Issue | None


@dataclass(frozen=True, slots=True)
class RestartSequence:
    """The next message of this message's conversation starts its sequence again (ebMS2 §9.1.1): the message
    failed (``gave_up``), or the To party reported it could not present it."""

    gave_up: bool


FollowUp: TypeAlias = ReportDeliveryFailure | DeliveryFailureLost | RestartSequence


def _refused_in_order(event: Event) -> bool:
    # ebMS2 §9.1.1: the To party's DeliveryFailure (Error) says it could not present the message.
    return isinstance(event, ErrorReceived) and any(
        e.code is ErrorCode.DELIVERY_FAILURE and e.severity is Severity.ERROR for e in event.error_list.errors
    )


def after_step(
    kind: OutboundKind,
    before: OutboundState,
    after: OutboundState,
    event: Event,
    *,
    ordered: bool = False,
    message_error: bool = False,
) -> tuple[FollowUp, ...]:
    """What follows the step of ``event`` that took a message of ``kind`` from ``before`` to ``after`` (see
    the module docs). ``ordered``: the message carries a SequenceNumber; ``message_error``: it is an error
    message of ours (a signal whose Action is MessageError)."""
    gave_up = after.status is OutboundStatus.FAILED and before.status is not OutboundStatus.FAILED
    out: list[FollowUp] = []
    if kind is OutboundKind.OWN and ordered and (gave_up or _refused_in_order(event)):
        out.append(RestartSequence(gave_up))  # ebMS2 §9.1.1
    relayed_error = isinstance(event, ErrorReceived) and not event.fault
    if kind is OutboundKind.FORWARD and gave_up and after.failure is not None and not relayed_error:
        out.append(ReportDeliveryFailure(after.failure))  # ebMS2 §6.5.7: the routing intermediary tells
    if kind is OutboundKind.SIGNAL and gave_up and message_error:
        out.append(DeliveryFailureLost(after.failure))  # ebMS2 §6.5.7: "informed of the problem by other means"
    return tuple(out)
