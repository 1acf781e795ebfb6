"""Whether a sent message may be sent again at the operator's request (ebMS2 §6.4.1, §6.4.6, §3.1.6.4), sans-IO.

:func:`resend_refusal` says why an operator's resend of one stored message is refused, or None when the
sending state machine may take :class:`~msh.engine.sending.OperatorResend` (its row in
:data:`msh.engine.sending.TRANSITIONS`). The facts come from the stored message: its state, its kind, whether
it asked for DuplicateElimination (as its header says) and whether it was sent with MessageOrder.

Decisions where the specifications are silent:

* Only a ``failed`` message is resent: any other status is either still being sent (the timer resends it)
  or has an outcome that a resend could only repeat.
* Only the application's own messages: a forward is resent by the From party's MSH (ebMS2 §10.1), and a
  signal of ours answers a message of the partner's, which resends it.
* A message sent with MessageOrder is not: its failure started its sequence again (ebMS2 §9.1.1), and a copy
  with the old SequenceNumber would be out of turn. Submit it again.
* Without DuplicateElimination the partner may hand the message to its application a second time (ebMS2
  §6.4.1: "duplicate messages might be delivered"): refused unless the operator forces it.
* Past PersistDuration since the first transmission a Sending MSH SHOULD NOT resend the same MessageId
  (ebMS2 §6.4.6: the receiver may have forgotten it, so duplicate elimination no longer protects), and past
  TimeToLive the receiver refuses it (§3.1.6.4): refused, forced or not; submit it again as a new message.
* A message a queuing transport makes reliable (ReliableMessagingMethod ``Transport``) has until its
  :func:`~msh.engine.timers.transport_deadline`; with neither TimeToLive nor PersistDuration that is the end
  of the agreement's retry schedule counted from the first hand-off, and a resend after it is refused too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from msh.engine import timers
from msh.engine.outcomes import OutboundStatus
from msh.engine.sending import OutboundState

__all__ = ["ResendFacts", "ResendRefusal", "resend_refusal"]


class ResendRefusal(StrEnum):
    """Why a resend is refused (the value is the token the interfaces print)."""

    NOT_FAILED = "not-failed"
    NOT_OWN = "not-own"
    ORDERED = "ordered"
    NO_DUPLICATE_ELIMINATION = "no-duplicate-elimination"
    EXPIRED = "expired"

    @property
    def forceable(self) -> bool:
        """Whether the operator may insist (``--force``)."""
        return self is ResendRefusal.NO_DUPLICATE_ELIMINATION


@dataclass(frozen=True, slots=True)
class ResendFacts:
    """What the decision needs of one stored message: its sending ``state``, whether it is the
    application's ``own`` message, whether its header asked for ``duplicate_elimination``, and whether it
    was sent with MessageOrder (``ordered``)."""

    state: OutboundState
    own: bool
    duplicate_elimination: bool
    ordered: bool


def resend_refusal(facts: ResendFacts, now: datetime, *, force: bool = False) -> ResendRefusal | None:
    """Why the operator's resend of this message is refused at ``now`` (None: it may go); ``force`` lifts
    only the refusal for want of DuplicateElimination."""
    if now.tzinfo is None:
        raise ValueError(f"now must be timezone-aware (UTC), got {now!r}")
    state = facts.state
    if state.status is not OutboundStatus.FAILED:
        return ResendRefusal.NOT_FAILED
    if not facts.own:
        # ebMS2 §10.1: a forward is resent by its From party's MSH.
        return ResendRefusal.NOT_OWN
    if facts.ordered:
        # ebMS2 §9.1.1: its failure started its sequence again; an old SequenceNumber is out of turn.
        return ResendRefusal.ORDERED
    first = state.first_sent_at if state.first_sent_at is not None else now
    limit = timers.last_transmission_before(state.reliability, first)
    if limit is not None and now >= limit:
        # ebMS2 §6.4.6: SHOULD NOT resend after PersistDuration; §3.1.6.4: refused after TimeToLive; Transport:
        # the message's time is over (timers.transport_deadline).
        return ResendRefusal.EXPIRED
    if not facts.duplicate_elimination and not force:
        # ebMS2 §6.4.1: without DuplicateElimination the partner may deliver it twice.
        return ResendRefusal.NO_DUPLICATE_ELIMINATION
    return None
