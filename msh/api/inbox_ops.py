"""Taking and settling received messages (Certified HTTP, the AMQP 1.0 broker-behaviour paper's
acknowledge/release/reject, the HTTPR specification's batches): each operation is one unit of store work,
refused with a :class:`Problem`; an entry held for its turn in its sequence (MessageOrder) or abandoned is
never taken or settled.

An entry is *available* while it is waiting (new, or given before and not settled), not rejected and not
held by a lease; taking it gives the taker a lease until ``now + api.lease`` (a lease that runs out puts
it back: nothing has to run for that, the listing looks at the lease's end). Settling it:
acknowledging (``DELETE``: never offered again), releasing (back to the inbox now), rejecting (to the
dead-letter list with a reason; it counts as settled, never offered again). Settling an entry another
application holds under a lease that has not ended is refused (409); settling twice the same way is
answered as the first time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

from msh.api.problems import Problem
from msh.store.api import Direction, EventKind, InboundMessage, InboxEntry, InboxState, Transaction
from msh.store.app_records import InboxBatch, InboxClaim, InboxQuery, InboxView

__all__ = [
    "Taken",
    "ack_unit",
    "batch_state",
    "confirm_unit",
    "fetch_batch_unit",
    "offered_entry",
    "reject_unit",
    "release_unit",
    "take_unit",
]

Taken = tuple[InboxEntry, InboxClaim, InboundMessage]
"""A taken entry: the entry, its new claim, its stored message."""
Confirmed = tuple[InboxBatch, list[int], list[int]]
"""A confirmed batch: the batch, the entries acknowledged, the entries that went back to the inbox."""

_ACKED: Final = InboxState.ACKNOWLEDGED_BY_APP


def offered_entry(tx: Transaction, entry_id: int) -> tuple[InboxEntry, InboxClaim | None]:
    """The entry and its claim; a :class:`Problem` for an entry that does not exist or that the application
    may not be given (held for its turn in its sequence, or abandoned: ebMS2 §9.1.1)."""
    entry = tx.inbox_entry(entry_id)
    if entry is None:
        raise Problem(404, "no-such-entry", "No such inbox entry", f"the inbox has no entry {entry_id}")
    if entry.state is InboxState.HELD:
        # ebMS2 §9.1.1: not passed to the application before every lower SequenceNumber has been.
        raise Problem(
            409,
            "held",
            "Held for its turn",
            f"inbox entry {entry_id} is held: a message before it in its sequence (MessageOrder) has not arrived yet; "
            "it is offered once that one has been",
        )
    if entry.state is InboxState.ABANDONED:
        raise Problem(
            410,
            "abandoned",
            "Abandoned",
            f"inbox entry {entry_id} was abandoned: a message before it in its sequence never arrived (ebMS2 §9); "
            "it is never offered",
        )
    return entry, tx.inbox_claim(entry_id)


def _held_by_other(claim: InboxClaim | None, application: str, now: datetime) -> bool:
    return (
        claim is not None
        and claim.lease_until is not None
        and claim.lease_until > now
        and claim.application != application
    )


def _refuse_held(entry_id: int, claim: InboxClaim) -> Problem:
    return Problem(
        409,
        "leased-by-another",
        "Held by another application",
        f"inbox entry {entry_id} is leased by another application until {claim.lease_until:%Y-%m-%dT%H:%M:%SZ}",
    )


def _gone(entry_id: int, claim: InboxClaim | None) -> Problem:
    if claim is not None and claim.rejected_at is not None:
        return Problem(410, "rejected", "Rejected", f"inbox entry {entry_id} was rejected: {claim.reason}")
    return Problem(410, "acknowledged", "Acknowledged", f"inbox entry {entry_id} was acknowledged: never offered again")


def _take(
    tx: Transaction, entry_id: int, application: str, now: datetime, lease: timedelta, batch: str | None
) -> Taken:
    entry, claim = offered_entry(tx, entry_id)
    if entry.state is _ACKED or (claim is not None and claim.rejected_at is not None):
        raise _gone(entry_id, claim)
    if claim is not None and _held_by_other(claim, application, now):
        raise _refuse_held(entry_id, claim)
    taken = InboxClaim(entry_id, application, now + lease, batch, None, None, (claim.takes if claim else 0) + 1)
    tx.put_inbox_claim(taken)
    entry = tx.inbox_mark_delivered(entry_id, now)
    record = tx.get_inbound(entry_id)
    assert record is not None  # an inbox entry is named by its stored copy
    return entry, taken, record


def take_unit(entry_id: int, application: str, now: datetime, lease: timedelta) -> Callable[[Transaction], Taken]:
    """Take an entry under a lease (its record, to read the message from)."""
    return lambda tx: _take(tx, entry_id, application, now, lease, None)


def ack_unit(entry_id: int, application: str, now: datetime) -> Callable[[Transaction], InboxEntry]:
    """Acknowledge an entry: the application holds it safely; it is never offered again (idempotent)."""

    def unit(tx: Transaction) -> InboxEntry:
        entry, claim = offered_entry(tx, entry_id)
        if claim is not None and claim.rejected_at is not None:
            raise Problem(409, "rejected", "Rejected", f"inbox entry {entry_id} was rejected: {claim.reason}")
        if entry.state is _ACKED:
            return entry
        if claim is not None and _held_by_other(claim, application, now):
            raise _refuse_held(entry_id, claim)
        entry = tx.inbox_ack(entry_id, now)
        if claim is not None:
            tx.put_inbox_claim(InboxClaim(entry_id, application, None, claim.batch_id, None, None, claim.takes))
        return entry

    return unit


def release_unit(entry_id: int, application: str, now: datetime) -> Callable[[Transaction], InboxEntry]:
    """Put a taken entry back in the inbox now (idempotent)."""

    def unit(tx: Transaction) -> InboxEntry:
        entry, claim = offered_entry(tx, entry_id)
        if entry.state is _ACKED or (claim is not None and claim.rejected_at is not None):
            raise Problem(409, "settled", "Already settled", str(_gone(entry_id, claim)))
        if claim is None or claim.lease_until is None:
            return entry
        if _held_by_other(claim, application, now):
            raise _refuse_held(entry_id, claim)
        tx.put_inbox_claim(InboxClaim(entry_id, application, None, None, None, None, claim.takes))
        return entry

    return unit


def reject_unit(entry_id: int, application: str, now: datetime, reason: str) -> Callable[[Transaction], InboxEntry]:
    """Reject an entry to the dead-letter list with ``reason`` (settled: never offered again; idempotent)."""

    def unit(tx: Transaction) -> InboxEntry:
        entry, claim = offered_entry(tx, entry_id)
        if claim is not None and claim.rejected_at is not None:
            return entry
        if entry.state is _ACKED:
            raise Problem(409, "acknowledged", "Already acknowledged", f"inbox entry {entry_id} was acknowledged")
        if claim is not None and _held_by_other(claim, application, now):
            raise _refuse_held(entry_id, claim)
        entry = tx.inbox_ack(entry_id, now)
        takes = claim.takes if claim is not None else 0
        tx.put_inbox_claim(InboxClaim(entry_id, application, None, None, now, reason, takes))
        tx.append_event(
            at=now,
            kind=EventKind.APP_REJECTED,
            message_id=entry.message_id,
            direction=Direction.INBOUND,
            detail={"entry": entry_id, "application": application, "reason": reason},
        )
        return entry

    return unit


# -- batches (the reliable HTTP batch pattern: fetch, then confirm)


def _confirm(tx: Transaction, batch_id: str, application: str, now: datetime) -> Confirmed:
    batch = tx.inbox_batch(batch_id)
    if batch is None:
        raise Problem(404, "no-such-batch", "No such batch", f"there is no batch {batch_id!r}")
    if batch.application != application:
        raise Problem(403, "other-application", "Another application's batch", f"batch {batch_id!r} is not yours")
    acknowledged, returned = [], []
    for entry_id in batch.entry_ids:
        entry, claim = offered_entry(tx, entry_id)
        ours = claim is not None and claim.batch_id == batch_id and claim.rejected_at is None
        if ours and entry.state is _ACKED:
            acknowledged.append(entry_id)
        elif ours and batch.confirmed_at is None:
            assert claim is not None
            tx.inbox_ack(entry_id, now)
            tx.put_inbox_claim(InboxClaim(entry_id, application, None, batch_id, None, None, claim.takes))
            acknowledged.append(entry_id)
        else:
            returned.append(entry_id)
    return tx.confirm_inbox_batch(batch_id, now), acknowledged, returned


def confirm_unit(batch_id: str, application: str, now: datetime) -> Callable[[Transaction], Confirmed]:
    """Confirm a batch: its entries still held by it are acknowledged; the others (their lease ended and
    another take got them) are reported as returned. Confirming again answers the same."""
    return lambda tx: _confirm(tx, batch_id, application, now)


def fetch_batch_unit(
    application: str,
    now: datetime,
    lease: timedelta,
    query: InboxQuery,
    batch_id: str,
    confirm: str | None,
) -> Callable[[Transaction], tuple[InboxBatch | None, list[Taken], Confirmed | None]]:
    """Confirm the previous batch (``confirm``), then take the available entries ``query`` lists as a new
    batch named ``batch_id`` (None when there is nothing to take)."""

    def unit(
        tx: Transaction,
    ) -> tuple[InboxBatch | None, list[Taken], Confirmed | None]:
        previous = _confirm(tx, confirm, application, now) if confirm is not None else None
        items = tx.app_inbox(query)
        if not items:
            return None, [], previous
        taken = [_take(tx, item.entry.id, application, now, lease, batch_id) for item in items]
        batch = InboxBatch(batch_id, application, tuple(t[0].id for t in taken), now, now + lease, None)
        tx.add_inbox_batch(batch)
        return batch, taken, previous

    return unit


def batch_state(batch: InboxBatch, now: datetime) -> str:
    """confirmed, pending (its lease runs) or expired (its unconfirmed entries went back to the inbox)."""
    if batch.confirmed_at is not None:
        return "confirmed"
    return "pending" if batch.lease_until > now else "expired"


def available(now: datetime, **filters: object) -> InboxQuery:
    """The query of the available entries."""
    return InboxQuery(now=now, view=InboxView.AVAILABLE, **filters)  # type: ignore[arg-type]
