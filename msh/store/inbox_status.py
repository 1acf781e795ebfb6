"""The one vocabulary of a received message's state for people and applications: where its inbox entry stands.

The store keeps an inbox entry's state (:class:`~msh.store.records.InboxState`: new, delivered-to-app,
acknowledged-by-app, held, abandoned) and, beside it, what an application did with it through the
application interfaces (:class:`~msh.store.app_records.InboxClaim`: a lease, or a rejection to the
dead-letter list). A rejected entry is settled like an acknowledged one (its stored state is then
acknowledged-by-app, so it is never offered again), which the stored state alone cannot tell apart.
:func:`inbox_status` reads both and names the result once, for the REST and SOAP interfaces, ``msh inbox``,
``msh messages`` and the console alike:

- ``available``: waiting for the application (new, or given to it before and not settled), not leased now;
- ``leased``: taken by an application whose lease has not ended, not settled yet;
- ``acknowledged``: the application confirmed it holds it (never offered again);
- ``rejected``: the application refused it to the dead-letter list with a reason (never offered again);
- ``held``: stored and acknowledged to the sender, not offered yet: a message before it in its sequence has
  not arrived (MessageOrder, ebMS2 §9.1.1);
- ``abandoned``: never offered: a message before it in its sequence never arrived (ebMS2 §9.1.1).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from msh.store.app_records import InboxClaim
from msh.store.records import InboxEntry, InboxState

__all__ = ["InboxStatus", "inbox_status"]


class InboxStatus(StrEnum):
    """Where a received message stands for the application (see the module docs)."""

    AVAILABLE = "available"
    LEASED = "leased"
    ACKNOWLEDGED = "acknowledged"
    REJECTED = "rejected"
    HELD = "held"
    ABANDONED = "abandoned"


def inbox_status(entry: InboxEntry, claim: InboxClaim | None, now: datetime) -> InboxStatus:
    """The status of ``entry`` with its ``claim`` at ``now`` (a lease that ended before ``now`` holds nothing)."""
    if entry.state is InboxState.HELD:
        return InboxStatus.HELD
    if entry.state is InboxState.ABANDONED:
        return InboxStatus.ABANDONED
    if claim is not None and claim.rejected_at is not None:
        return InboxStatus.REJECTED
    if entry.state is InboxState.ACKNOWLEDGED_BY_APP:
        return InboxStatus.ACKNOWLEDGED
    if claim is not None and claim.lease_until is not None and claim.lease_until > now:
        return InboxStatus.LEASED
    return InboxStatus.AVAILABLE
