"""What each action of the sending machine (:func:`msh.engine.step`) does inside a store transaction: one
small handler per action, found by :data:`HANDLERS` (action type -> handler), as the engine's transitions
are found by its table. A type the table lacks is refused, and a test holds the table against the engine's
:data:`msh.engine.sending.Action` union.

The handlers write rows (timers, the journal) and queue what is done after the commit
(:class:`~msh.runtime.aftercommit.AfterCommit`: transmissions, status questions, application callbacks);
they decide nothing about the protocol.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final

from msh.engine import (
    CancelTimer,
    Evidence,
    NotifyDelivered,
    NotifyFailed,
    NotifyForwarded,
    NotifySent,
    RequestStatus,
    ScheduleTimer,
    Transmit,
)
from msh.errors import ErrorCode
from msh.runtime.aftercommit import AfterCommit
from msh.runtime.core import Core
from msh.runtime.logfields import fields
from msh.store.api import Direction, OutboundKind, TimerKind, Transaction
from msh.store.events import EventKind, ended

__all__ = ["HANDLERS", "SendingRun", "apply"]

log = logging.getLogger("msh.runtime")


@dataclass(frozen=True, slots=True)
class SendingRun:
    """Where the actions of one step of one outbound message are carried out.

    ``fresh``: a new message, which has no timers yet; ``queue_transmit``: another process serves this
    store, so a transmission becomes a timer row; ``kind``: a forward or a routed signal of ours notifies no
    application, it is journaled under its own event names."""

    core: Core
    tx: Transaction
    message_id: str
    now: datetime
    after: AfterCommit
    queue_transmit: bool = False
    fresh: bool = False
    kind: OutboundKind = OutboundKind.OWN

    @property
    def own(self) -> bool:
        return self.kind is OutboundKind.OWN

    def journal(self, kind: EventKind, detail: Mapping[str, object]) -> None:
        self.tx.append_event(
            at=self.now, kind=kind, message_id=self.message_id, direction=Direction.OUTBOUND, detail=detail
        )


def schedule_timer(run: SendingRun, action: ScheduleTimer) -> None:
    run.tx.schedule_timer(run.message_id, TimerKind.RETRY, action.due_at, replace_existing=not run.fresh)


def cancel_timer(run: SendingRun, action: CancelTimer) -> None:
    run.tx.cancel_timers(run.message_id)


def transmit(run: SendingRun, action: Transmit) -> None:
    if run.queue_transmit:
        # Another process serves this store: its timer loop transmits (docs/design.md §5.1).
        run.tx.schedule_timer(run.message_id, TimerKind.TRANSMIT, run.now, replace_existing=not run.fresh)
    else:
        run.after.transmits.append((action.message_id, action.attempt))
    if action.attempt > 1:
        run.core.counters["resent"] += 1
        run.journal(EventKind.RESENT, {"attempt": action.attempt})


def request_status(run: SendingRun, action: RequestStatus) -> None:
    # ebMS2 §7: ask the partner before resending (the status question stands in for the resend).
    run.after.status_requests.append((action.message_id, action.attempt))
    run.journal(EventKind.STATUS_REQUESTED, {"attempt": action.attempt})


def notify_delivered(run: SendingRun, action: NotifyDelivered) -> None:
    counters, label = run.core.counters, ended(run.kind, "delivered")
    counters["acknowledged" if run.own else label.value] += 1
    detail: dict[str, object] = {"evidence": action.evidence.value}
    if action.receipt_problem is not None:
        # ebMS2 §6.3.2.5: delivered, but the signed receipt does not prove what was sent.
        detail["receiptProblem"] = action.receipt_problem
        counters["receipts-invalid"] += 1
    run.journal(label, detail)
    on_delivered = run.core.callbacks.on_delivered
    if run.own and on_delivered is not None:
        run.after.notices.append(functools.partial(on_delivered, run.message_id))


def notify_forwarded(run: SendingRun, action: NotifyForwarded) -> None:
    # ebMS2 §10.1.3: the next MSH has it; the end-to-end acknowledgment is still to come.
    run.core.counters["hop-acknowledged"] += 1
    run.journal(EventKind.HOP_ACKNOWLEDGED, {"evidence": Evidence.HOP_ACKNOWLEDGMENT.value})


def notify_sent(run: SendingRun, action: NotifySent) -> None:
    # ebMS2 §6.6 rows 3, 4, 7, 8: handed over; no acknowledgment will come, by design.
    label = ended(run.kind, "sent")
    run.core.counters[label.value] += 1
    run.journal(label, {"evidence": action.evidence.value})
    on_sent = run.core.callbacks.on_sent
    if run.own and on_sent is not None:
        run.after.notices.append(functools.partial(on_sent, run.message_id))


def notify_failed(run: SendingRun, action: NotifyFailed) -> None:
    label, issue = ended(run.kind, "failed"), action.issue
    run.core.counters[label.value] += 1
    run.journal(
        label,
        {
            "errorCode": issue.error_code.value,
            "severity": issue.severity.value,
            "description": issue.description,
            "evidence": action.evidence.value,
        },
    )
    if action.expired:
        # ebMS2 §3.1.6.4: its TimeToLive ended it: journaled as such beside the DeliveryFailure.
        expired = {"errorCode": ErrorCode.TIME_TO_LIVE_EXPIRED.value, "severity": issue.severity.value}
        run.journal(EventKind.EXPIRED, expired)
    row = run.after.rows.get(run.message_id)
    extra = fields(
        message_id=run.message_id,
        event=label.value,
        cpa_id=row.cpaid if row is not None else None,
        partner=row.to_party if row is not None else None,
    )
    log.warning("%s %s failed: %s", "message" if run.own else run.kind.value, run.message_id, issue, extra=extra)
    on_failed = run.core.callbacks.on_failed
    if run.own and on_failed is not None:
        run.after.notices.append(functools.partial(on_failed, run.message_id, issue))


Handler = Callable[[SendingRun, Any], None]

HANDLERS: Final[Mapping[type, Handler]] = MappingProxyType(
    {
        ScheduleTimer: schedule_timer,
        CancelTimer: cancel_timer,
        Transmit: transmit,
        RequestStatus: request_status,
        NotifyDelivered: notify_delivered,
        NotifyForwarded: notify_forwarded,
        NotifySent: notify_sent,
        NotifyFailed: notify_failed,
    }
)
"""Action type of the sending machine -> its handler."""


def apply(run: SendingRun, actions: tuple[object, ...] | list[object]) -> None:
    """Carry out ``actions`` in order; an action the table does not know is a bug, refused."""
    for action in actions:
        handler = HANDLERS.get(type(action))
        if handler is None:
            raise TypeError(f"no handler for the sending action {type(action).__name__}")
        handler(run, action)
