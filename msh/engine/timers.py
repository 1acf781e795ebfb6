"""Retry arithmetic of a sending MSH (ebMS2 §6.4.3-§6.4.6, §6.5.4): when to resend, when to give up.

Pure functions of a :class:`~msh.engine.sending.Reliability` and times passed in; nothing here reads a
clock. The rules:

* Durations are xs:durations (:class:`~cpa.duration.XsDuration`, months included): an instant is the
  duration added to the instant it starts from (XML Schema Part 2 Appendix E), never a fixed number of
  seconds; an instant past the year 9999 is the latest representable one (it never comes).
* The first transmission is at ``first_sent_at``. The first resend is due ``first_resend_timeout`` after it
  (the draft's *timeout*, docs/design.md §3), every later one ``retry_interval`` after the previous transmission
  (ebMS2 §6.4.4: "at least" that long, so intervals are measured from the time a resend is actually
  issued, never from a nominal schedule a late timer could compress).
* At most ``retries`` resends: giving up when the timer fires after transmission ``retries + 1``
  (ebMS2 §6.4.3, §6.5.4).
* Never transmit at or after the earliest *deadline*: ``first_sent_at + persist_duration`` (ebMS2 §6.4.6:
  the receiver may have forgotten the MessageId) and ``time_to_live`` (ebMS2 §3.1.6.4: the receiver would
  refuse it). A timer is never scheduled past that deadline, so the failure is reported on time.
* With ReliableMessagingMethod ``Transport`` (a queuing transport makes the message reliable, the *Reliable
  Messaging* draft's "Queuing Transports" section) nothing is resent and Retries does not count: a hand-off
  the transport refused is retried every ``retry_interval`` (ebMS2 B.4: the transport's recovery), and the
  message has until :func:`transport_deadline`: the earlier of its TimeToLive and PersistDuration since the
  first hand-off, or, with neither, the time the agreement's retry schedule would have given up.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cpa.duration import XsDuration
    from msh.engine.reliability import Reliability

__all__ = [
    "GiveUp",
    "deadline",
    "end_to_end_deadline",
    "give_up",
    "handoff_due",
    "last_transmission_before",
    "next_due",
    "nominal_schedule",
    "resend_wait",
    "transport_deadline",
]


class GiveUp(StrEnum):
    """Why a sending MSH stops resending (ebMS2 §6.5.7 then tells the application)."""

    RETRIES = "retries-exhausted"
    PERSIST_DURATION = "persist-duration"
    TIME_TO_LIVE = "time-to-live"


def deadline(reliability: Reliability, first_sent_at: datetime) -> datetime | None:
    """The earliest time no transmission may happen at or after: TimeToLive or first send + PersistDuration."""
    candidates: list[datetime] = []
    if reliability.time_to_live is not None:
        # ebMS2 §3.1.6.4: a message past its TimeToLive is refused by the receiver.
        candidates.append(reliability.time_to_live)
    if reliability.persist_duration is not None:
        # ebMS2 §6.4.6: no resend once PersistDuration has passed since the message was first sent.
        candidates.append(reliability.persist_duration.add_to_or_latest(first_sent_at))
    return min(candidates) if candidates else None


def resend_wait(reliability: Reliability, attempts: int) -> XsDuration:
    """How long to wait after transmission number ``attempts`` before the next one (or before giving up)."""
    if attempts < 1:
        raise ValueError(f"attempts counts transmissions made and starts at 1, got {attempts}")
    # ebMS2 §6.4.4 and docs/design.md §3: the first wait is the first-resend timeout, later ones RetryInterval.
    return reliability.first_resend_timeout if attempts == 1 else reliability.retry_interval


def next_due(reliability: Reliability, *, attempts: int, sent_at: datetime, first_sent_at: datetime) -> datetime:
    """When the timer after transmission ``attempts`` (made at ``sent_at``) fires: the resend wait, capped at
    the deadline so that a failure is reported as soon as no further transmission is allowed."""
    due = resend_wait(reliability, attempts).add_to_or_latest(sent_at)
    limit = deadline(reliability, first_sent_at)
    return due if limit is None else min(due, limit)


def give_up(reliability: Reliability, *, attempts: int, first_sent_at: datetime, now: datetime) -> GiveUp | None:
    """Whether a timer firing at ``now`` after ``attempts`` transmissions ends the message, and why.

    Retries are checked first (the most telling reason when several hold at once), then TimeToLive, then
    PersistDuration.
    """
    # ebMS2 §6.5.4: resend only while it "has been resent less than the number of times specified in Retries".
    if attempts >= reliability.retries + 1:
        return GiveUp.RETRIES
    # ebMS2 §3.1.6.4: a message is not sent once its TimeToLive has passed.
    if reliability.time_to_live is not None and now >= reliability.time_to_live:
        return GiveUp.TIME_TO_LIVE
    # ebMS2 §6.4.6: no resend once PersistDuration has passed since the first transmission.
    persist = reliability.persist_duration
    if persist is not None and now >= persist.add_to_or_latest(first_sent_at):
        return GiveUp.PERSIST_DURATION
    return None


def nominal_schedule(
    reliability: Reliability, first_sent_at: datetime
) -> tuple[tuple[datetime, ...], datetime, GiveUp]:
    """The transmission times and the give-up time (with its reason) when no acknowledgment ever comes and
    every timer fires exactly on time: the schedule the documentation and the tests speak of."""
    sends = [first_sent_at]
    while True:
        due = next_due(reliability, attempts=len(sends), sent_at=sends[-1], first_sent_at=first_sent_at)
        reason = give_up(reliability, attempts=len(sends), first_sent_at=first_sent_at, now=due)
        if reason is not None:
            return tuple(sends), due, reason
        sends.append(due)


def end_to_end_deadline(reliability: Reliability, first_sent_at: datetime) -> datetime:
    """When a message's retry window ends: the time its retry schedule gives up had no acknowledgment come
    at all. The journal's ``deadline`` of a submitted message (what "overdue" is measured against), and how
    long a message the next MSH acknowledged waits for the To Party MSH's acknowledgment (ebMS2 §10.1.3: the
    intermediary resends on its hop; the sender's promise to the application keeps its length). With
    ReliableMessagingMethod ``Transport``: :func:`transport_deadline`."""
    if reliability.by_transport:
        return transport_deadline(reliability, first_sent_at)
    window = _fixed_window(reliability)
    if window is not None:
        # Past the year 9999 the schedule's instants are clamped to the latest one: walked below.
        with contextlib.suppress(OverflowError):
            return first_sent_at + window
    return nominal_schedule(reliability, first_sent_at)[1]


_REFERENCE_INSTANT = datetime(2000, 1, 1, tzinfo=UTC)


@lru_cache(maxsize=256)
def _fixed_window(reliability: Reliability) -> timedelta | None:
    """The length of the retry window (first send to give-up) when it is the same from any first send: no
    TimeToLive (an instant of its own) and only fixed-length, non-negative durations, so every instant of
    :func:`nominal_schedule` is the first send plus a fixed offset. None otherwise (months: P1M from January
    is not P1M from February). Cached per agreement's parameters: the schedule is walked once, not per
    message. None too when the schedule from the reference instant reaches the year 9999, where its instants
    are clamped to the latest representable one rather than offsets."""
    if reliability.time_to_live is not None:
        return None
    durations = [reliability.first_resend_timeout, reliability.retry_interval]
    if reliability.persist_duration is not None:
        durations.append(reliability.persist_duration)
    if any(not d.is_fixed_length or d.is_negative for d in durations):
        return None
    end = nominal_schedule(reliability, _REFERENCE_INSTANT)[1]
    # An end at the year 9999 may be the clamped latest instant, not the reference plus a fixed offset.
    return None if end.year >= 9999 else end - _REFERENCE_INSTANT


def transport_deadline(reliability: Reliability, first_sent_at: datetime) -> datetime:
    """How long a message a queuing transport makes reliable (ReliableMessagingMethod ``Transport``) has: to be
    handed over, and once handed over, for the To party's acknowledgment when one is requested.

    The earlier of TimeToLive (ebMS2 §3.1.6.4) and PersistDuration since the first hand-off (ebMS2 §6.4.6: a
    hand-off retried later could reach a receiver that forgot the MessageId); with neither, the time the
    agreement's retry schedule (Retries, RetryInterval, as for ``ebXML``) would have given up, so that the
    application waits no longer than it would without the transport."""
    limit = deadline(reliability, first_sent_at)
    return limit if limit is not None else nominal_schedule(reliability, first_sent_at)[1]


def handoff_due(reliability: Reliability, *, sent_at: datetime, first_sent_at: datetime) -> datetime:
    """When a hand-off to the queuing transport made at ``sent_at`` is tried again if it has not been accepted
    by then (ReliableMessagingMethod ``Transport``): a RetryInterval later (ebMS2 §6.4.4, B.4), capped at
    :func:`transport_deadline`."""
    due = reliability.retry_interval.add_to_or_latest(sent_at)
    return min(due, transport_deadline(reliability, first_sent_at))


def last_transmission_before(reliability: Reliability, first_sent_at: datetime) -> datetime | None:
    """The time no transmission of the message may happen at or after: :func:`deadline` for ``ebXML``,
    :func:`transport_deadline` for ``Transport`` (None: none but the retries)."""
    if reliability.by_transport:
        return transport_deadline(reliability, first_sent_at)
    return deadline(reliability, first_sent_at)
