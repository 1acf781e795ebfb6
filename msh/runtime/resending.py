"""The operator's resend of failed messages (``msh resend``, :meth:`msh.runtime.Msh.resend`; ebMS2 §6.4.1).

Each MessageId is one unit of work: its row is read for update, the facts the engine's rule needs are read
from it (its kind, its SequenceNumber, and whether its header asked for DuplicateElimination: the stored
bytes say what the partner was told), :func:`msh.engine.resend.resend_refusal` decides, and when it may go the
journal gets a ``resend-requested`` event (who asked, why, forced or not) and the sending machine takes
:class:`~msh.engine.OperatorResend` (a new attempt series, same MessageId, identical bytes) in the same
transaction. The DeliveryFailure reported before stays in the journal; the timers are set for the new series.

The transmission goes from this process when its runtime runs; otherwise it becomes a ``transmit`` timer row
that the timer loop of ``msh serve`` on the same store picks up (within ``timers.poll_interval``), as a message
``msh send`` submits without a server does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from msh.ebms.message import ParseMode, parse_message
from msh.engine import OperatorResend, step
from msh.engine.resend import ResendFacts, ResendRefusal, resend_refusal
from msh.runtime.aftercommit import AfterCommit
from msh.runtime.core import Core
from msh.runtime.executor import Executor
from msh.store.api import Direction, OutboundKind, OutboundMessage, Transaction
from msh.store.events import EventKind

__all__ = ["ResendOutcome", "ResendResult", "Resending"]

log = logging.getLogger("msh.runtime")


class ResendOutcome(StrEnum):
    """What became of one MessageId of a resend request."""

    RESENT = "resent"
    REFUSED = "refused"
    UNKNOWN = "unknown"


_WHY = {
    ResendRefusal.NOT_FAILED: "it is {status}, not failed: only a failed message is resent",
    ResendRefusal.NOT_OWN: (
        "it is a {kind} of this MSH, not the application's own message: its From party's MSH resends it (ebMS2 §10.1)"
    ),
    ResendRefusal.ORDERED: (
        "it was sent with MessageOrder and its failure started its sequence again (ebMS2 §9.1.1); submit it again"
    ),
    ResendRefusal.NO_DUPLICATE_ELIMINATION: (
        "it was sent without DuplicateElimination, so the partner may deliver it to its application twice "
        "(ebMS2 §6.4.1); resend with --force (force=True) if that is acceptable"
    ),
    ResendRefusal.EXPIRED: (
        "its PersistDuration since the first transmission or its TimeToLive has passed, so the partner may have "
        "forgotten it and no longer eliminates a duplicate (ebMS2 §6.4.6, §3.1.6.4); submit it again as a new message"
    ),
}


@dataclass(frozen=True, slots=True)
class ResendResult:
    """The answer for one MessageId: ``outcome``, the ``status`` it has now (None: unknown), the ``refusal``
    when refused, and ``detail``, one line for a person."""

    message_id: str
    outcome: ResendOutcome
    status: str | None
    detail: str
    refusal: ResendRefusal | None = None

    def to_json(self) -> dict[str, object]:
        """The result with camelCase keys, as the command line prints it."""
        refusal = None if self.refusal is None else self.refusal.value
        return {
            "messageId": self.message_id,
            "outcome": self.outcome.value,
            "status": self.status,
            "refusal": refusal,
            "detail": self.detail,
        }


def asked_duplicate_elimination(tx: Transaction, stored: OutboundMessage) -> bool:
    """Whether the stored message's header carries DuplicateElimination (ebMS2 §3.1.4): what the partner was
    told, whatever the agreement says today."""
    with tx.open_blob(stored.body_blob_id) as blob:
        parsed = parse_message(blob, stored.content_type, mode=ParseMode.LENIENT)
    try:
        header = parsed.envelope.message_header
    finally:
        parsed.close()
    return header is not None and header.duplicate_elimination


class Resending:
    """Carries out resend requests (see the module docs)."""

    def __init__(self, core: Core, executor: Executor) -> None:
        self.core = core
        self.executor = executor

    def unit(
        self, message_id: str, *, reason: str, requested_by: str, force: bool
    ) -> Callable[[Transaction], tuple[ResendResult, AfterCommit]]:
        """The unit of work resending ``message_id`` (for the writer): its result and its after-commit work."""

        def run(tx: Transaction) -> tuple[ResendResult, AfterCommit]:
            after = AfterCommit()
            now = self.core.clock()
            stored = tx.get_outbound(message_id, for_update=True)
            if stored is None:
                return ResendResult(message_id, ResendOutcome.UNKNOWN, None, "no message of ours has it"), after
            return self._resend(tx, stored, now, after, reason, requested_by, force), after

        return run

    def _resend(
        self,
        tx: Transaction,
        stored: OutboundMessage,
        now: datetime,
        after: AfterCommit,
        reason: str,
        requested_by: str,
        force: bool,
    ) -> ResendResult:
        state, own = stored.state, stored.kind is OutboundKind.OWN
        de = own and asked_duplicate_elimination(tx, stored)
        facts = ResendFacts(state, own, de, stored.sequence_number is not None)
        refusal = resend_refusal(facts, now, force=force)
        status = state.status.value
        if refusal is not None:
            why = _WHY[refusal].format(status=status, kind=stored.kind.value)
            return ResendResult(stored.message_id, ResendOutcome.REFUSED, status, why, refusal)
        detail: dict[str, object] = {
            "requestedBy": requested_by,
            "reason": reason,
            "force": force,
            "duplicateElimination": de,
            "previousAttempts": state.attempts,
        }
        # ebMS2 §6.4.1: journaled before the new series' first transmission, in the same transaction.
        tx.append_event(
            at=now,
            kind=EventKind.RESEND_REQUESTED,
            message_id=stored.message_id,
            direction=Direction.OUTBOUND,
            detail=detail,
        )
        new, actions = step(state, OperatorResend(), now)
        tx.update_outbound_state(new)
        # Without a runtime in this process the transmission becomes a timer row for msh serve's timer loop.
        self.executor.apply_sending_actions(
            tx, stored.message_id, actions, now, after, queue_transmit=not self.core.running
        )
        self.core.counters["operator-resends"] += 1
        log.info(
            "message %s resent at the request of %s (%s)%s",
            stored.message_id,
            requested_by,
            reason or "no reason given",
            " (forced)" if force else "",
        )
        text = "sent again as a new attempt series" + ("" if de else " (forced: no DuplicateElimination)")
        return ResendResult(stored.message_id, ResendOutcome.RESENT, new.status.value, text)
