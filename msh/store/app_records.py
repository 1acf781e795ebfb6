"""Records of the application interfaces (:mod:`msh.api`) kept by the store (revision 0006).

:class:`AppRequest`
    An application's exactly-once request (SOA-Rity for HTTP, Certified HTTP): its
    ``Message-ID``/``MsgCreate`` pair, the application that sent it, a fingerprint of what it asked and
    the response it got, recorded in the transaction that did the work, so a repeat gets that response.
:class:`InboxClaim`
    What an application did with an inbox entry beyond the inbox states: the lease of the application
    that took it (until when; in which batch), or its rejection to the dead-letter list with a reason.
:class:`InboxBatch`
    A batch of inbox entries fetched in one request (the HTTPR specification), confirmed in a later one.
:class:`InboxQuery`, :class:`AppInboxItem`
    A listing of the inbox for applications (filters, priorities, the TTL report) and its items.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from msh.store.records import InboundMessage, InboxEntry, InboxState

__all__ = [
    "AppInboxItem",
    "AppRequest",
    "InboxBatch",
    "InboxClaim",
    "InboxQuery",
    "InboxView",
    "PriorityRule",
    "in_view",
]


@dataclass(frozen=True, slots=True)
class AppRequest:
    """A recorded exactly-once request and its response (status and body), as first answered."""

    message_id: str
    application: str
    msg_create: datetime
    fingerprint: str
    status: int
    response: bytes
    created_at: datetime


@dataclass(frozen=True, slots=True)
class InboxClaim:
    """An application's hold on an inbox entry: leased until ``lease_until`` (by ``application``, in
    ``batch_id`` when fetched in a batch), or rejected (dead-lettered) at ``rejected_at`` for ``reason``;
    ``takes`` counts how often it was taken."""

    entry_id: int
    application: str | None
    lease_until: datetime | None
    batch_id: str | None
    rejected_at: datetime | None
    reason: str | None
    takes: int


@dataclass(frozen=True, slots=True)
class InboxBatch:
    """A batch of inbox entries an application fetched in one request (the HTTPR specification)."""

    batch_id: str
    application: str
    entry_ids: tuple[int, ...]
    created_at: datetime
    lease_until: datetime
    confirmed_at: datetime | None


@dataclass(frozen=True, slots=True)
class PriorityRule:
    """Entries received under this agreement/service/action (None: any) come first by ``priority``."""

    cpaid: str | None
    service: str | None
    action: str | None
    priority: int

    def matches(self, cpaid: str, service: str, action: str) -> bool:
        return (
            (self.cpaid is None or self.cpaid == cpaid)
            and (self.service is None or self.service == service)
            and (self.action is None or self.action == action)
        )


class InboxView(StrEnum):
    """Which entries a listing shows."""

    AVAILABLE = "available"  # waiting (new or given before), not leased now, not rejected
    LEASED = "leased"  # taken, lease not yet expired, not settled
    DEAD = "dead"  # rejected to the dead-letter list
    HELD = "held"  # held for its turn in its sequence, or abandoned (ebMS2 §9): never offered
    ALL = "all"  # every entry (browse)


@dataclass(frozen=True, slots=True)
class InboxQuery:
    """A listing of the inbox: ``view`` at ``now``, filtered, at most ``limit`` items, ordered by priority
    (highest first, by ``priorities``: the first rule that matches), then oldest received first;
    ``received_before`` keeps only entries received before it (the TTL report)."""

    now: datetime
    view: InboxView = InboxView.AVAILABLE
    cpaid: str | None = None
    service: str | None = None
    action: str | None = None
    conversation_id: str | None = None
    received_before: datetime | None = None
    priorities: tuple[PriorityRule, ...] = ()
    limit: int = 100

    def priority(self, cpaid: str, service: str, action: str) -> int:
        """The priority of an entry received under ``cpaid``/``service``/``action`` (0: no rule)."""
        for rule in self.priorities:
            if rule.matches(cpaid, service, action):
                return rule.priority
        return 0


@dataclass(frozen=True, slots=True)
class AppInboxItem:
    """An inbox entry with what the listing shows of its message, its claim and its priority."""

    entry: InboxEntry
    cpaid: str
    service: str
    action: str
    conversation_id: str
    from_party: str
    claim: InboxClaim | None
    priority: int

    @classmethod
    def of(cls, entry: InboxEntry, record: InboundMessage, claim: InboxClaim | None, priority: int) -> AppInboxItem:
        """The item of ``entry`` whose stored message is ``record``."""
        return cls(
            entry,
            record.cpaid,
            record.service,
            record.action,
            record.conversation_id,
            record.from_party,
            claim,
            priority,
        )


def in_view(view: InboxView, entry: InboxEntry, claim: InboxClaim | None, now: datetime) -> bool:
    """Whether ``entry`` (with its ``claim``) belongs to ``view`` at ``now`` (the SQL store says the same
    in SQL): a lease that ended before ``now`` no longer holds the entry (it is back in the inbox)."""
    if view is InboxView.ALL:
        return True
    rejected = claim is not None and claim.rejected_at is not None
    if view is InboxView.DEAD:
        return rejected
    if view is InboxView.HELD:
        return not entry.state.offered
    waiting = entry.state in (InboxState.NEW, InboxState.DELIVERED_TO_APP) and not rejected
    leased = claim is not None and claim.lease_until is not None and claim.lease_until > now
    return waiting and (leased if view is InboxView.LEASED else not leased)
