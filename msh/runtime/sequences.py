"""Received sequences (MessageOrder, ebMS2 §9) in the runtime: what the engine's :class:`KeepOrder` and a gap
timer do to the store. The rules are :mod:`msh.engine.ordering`'s; the records :mod:`msh.store.order_port`'s.

* A message delivered in its turn releases the messages held for the numbers after it, in order: each inbox
  entry goes from ``held`` to ``new`` (offered to the application; journaled ``released``, the application's
  ``on_message`` called after the commit), until a number is missing again.
* While messages are held, one ``order-gap`` timer per sequence is due when the oldest gap has been open
  longer than the sender's retries of the missing message take (:func:`msh.engine.ordering.gap_window` of
  the agreement) plus the setting ``receiving.order_gap_grace`` (a sender under load retries late); it is
  moved or removed as the sequence moves.
* When it fires (:meth:`Sequences.close_gap`) every held message is abandoned (inbox state ``abandoned``,
  journaled, never offered) and its sender told by a DeliveryFailure of severity Error (ebMS2 §9.1.1) about
  that message, sent as our other signals are (:meth:`~msh.runtime.executor.Executor.send_delivery_failure`);
  the sequence is broken until the sender starts it again with SequenceNumber 0 and status Reset.
* A Reset while messages of the old sequence are held abandons them the same way, each with its
  DeliveryFailure: the sender had them acknowledged (they were stored) and learns only so that they were
  never presented.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from msh.ebms.errorlist import error_message
from msh.ebms.message import ParseMode, parse_message
from msh.ebms.model import Envelope, MessageHeader
from msh.engine.inbound import KeepOrder
from msh.engine.ordering import (
    OrderPosition,
    gap_expired,
    offer_time,
    sequence_restarted,
    successor,
)
from msh.engine.signals import party_text
from msh.errors import EbmsError, Issue
from msh.runtime.aftercommit import AfterCommit
from msh.runtime.core import Core
from msh.store.api import Direction, EventKind, InboxEntry, TimerKind, Transaction
from msh.store.order_port import SequenceKey, sequence_key

__all__ = ["Sequences", "sequence_of_header"]

log = logging.getLogger("msh.runtime")

SendFailure = Callable[[Transaction, Envelope, str, Direction, datetime, AfterCommit], None]
"""Sends a DeliveryFailure about a message (:meth:`msh.runtime.executor.Executor.send_delivery_failure`)."""


def sequence_of_header(header: MessageHeader) -> SequenceKey:
    """The sequence a received message belongs to: its agreement, From party and conversation (ebMS2 §9.1.1:
    "The SequenceNumber element MUST have a value that is unique within the ConversationId")."""
    first = header.from_party.party_ids[0]
    return header.cpa_id, party_text(first.value, first.type), header.conversation_id


class Sequences:
    """Carries out the ordering of received sequences (see the module docs)."""

    def __init__(self, core: Core, send_failure: SendFailure) -> None:
        self.core = core
        self.send_failure = send_failure

    def keep(self, tx: Transaction, key: SequenceKey, action: KeepOrder, now: datetime, after: AfterCommit) -> None:
        """Carry out :class:`KeepOrder` for the message just stored (or refused) in ``tx``."""
        position = action.position
        if action.abandon:
            # ebMS2 §9.1.1 case 2: the sequence started again; what the old one held can never be presented.
            issue = sequence_restarted()
            for number, entry in tx.held_entries(key):
                self._abandon(tx, entry, number, issue.description, now)
                self._tell_sender(tx, entry, issue, now, after)
        held_before = position.held
        if action.release and held_before:
            position = self._release(tx, key, position, now, after)
        tx.set_order_position(key, position)
        # The gap timer moves only when the gap does: opened by this message, or moved or closed by a release.
        timer = sequence_key(key)
        window = action.gap_window
        moved = action.release and held_before > 0
        opened = not action.release and not action.abandon and position.held == 1
        if position.held and (opened or moved) and position.gap_since is not None and window is not None:
            # ebMS2 §9.1.1: a gap that outlasts the sender's retries of the missing message will not fill.
            due = window.add_to_or_latest(position.gap_since) + self.core.settings.receiving.order_gap_grace
            tx.schedule_timer(timer, TimerKind.ORDER_GAP, due, replace_existing=True)
        elif not position.held and (moved or action.abandon):
            tx.cancel_timers(timer, TimerKind.ORDER_GAP)

    def _release(
        self, tx: Transaction, key: SequenceKey, position: OrderPosition, now: datetime, after: AfterCommit
    ) -> OrderPosition:
        """Offer the held messages whose turn has come (ebMS2 §9.1.1: every lower number was passed to the
        application); return the sequence's position after them."""
        held = dict(tx.held_entries(key))
        number = position.next_number if position.next_number is not None else 0
        callbacks = self.core.callbacks
        while number in held:
            entry = held.pop(number)
            # Offered after the message that released it, in sequence order (the inbox offers by this time).
            position = replace(position, offered_at=offer_time(position, now))
            assert position.offered_at is not None
            tx.release_held(entry.id, position.offered_at)
            self.core.counters["released"] += 1
            self.core.counters["delivered-to-inbox"] += 1
            tx.append_event(
                at=now,
                kind=EventKind.RELEASED,
                message_id=entry.message_id,
                direction=Direction.INBOUND,
                detail={"sequenceNumber": number},
            )
            on_message = callbacks.message_given()
            if on_message is not None:
                after.notices.append(functools.partial(on_message, entry.id, entry.message_id))
            number = successor(number)
        # The gap left (if any) has been open since the oldest message still held arrived.
        since = min((e.received_at for e in held.values()), default=None)
        return OrderPosition(number, len(held), since, position.broken, position.offered_at)

    def close_gap(self, tx: Transaction, key: SequenceKey, now: datetime, after: AfterCommit) -> None:
        """The sequence's gap timer came due: abandon what it holds and tell the sender (see the module docs)."""
        position = tx.order_position(key)
        if position is None or not position.held:
            return
        broken, issue = gap_expired(position)
        held = tx.held_entries(key)
        log.warning(
            "conversation %s from %s: SequenceNumber %s never arrived; %d held message(s) abandoned and the sender "
            "told (DeliveryFailure, ebMS2 §9.1.1)",
            key[2],
            key[1],
            position.next_number,
            len(held),
        )
        for number, entry in held:
            self._abandon(tx, entry, number, issue.description, now)
            self._tell_sender(tx, entry, issue, now, after)
        tx.set_order_position(key, broken)

    def _abandon(self, tx: Transaction, entry: InboxEntry, number: int, reason: str, now: datetime) -> None:
        tx.abandon_held(entry.id)
        self.core.counters["abandoned"] += 1
        tx.append_event(
            at=now,
            kind=EventKind.ABANDONED,
            message_id=entry.message_id,
            direction=Direction.INBOUND,
            detail={"sequenceNumber": number, "reason": reason},
        )

    def _tell_sender(self, tx: Transaction, entry: InboxEntry, issue: Issue, now: datetime, after: AfterCommit) -> None:
        record = tx.find_inbound(entry.message_id)
        if record is None:
            return
        try:
            with tx.open_blob(record.body_blob_id) as blob:
                message = parse_message(blob, record.content_type, mode=ParseMode.LENIENT)
            message.close()
        except EbmsError as exc:  # it was read when it came; kept as it came
            log.error("DeliveryFailure about %s not sent: its stored copy cannot be read (%s)", entry.message_id, exc)
            return
        header = message.envelope.message_header
        if header is None:
            return
        # ebMS2 §9.1.1, §4.2.4.2: the DeliveryFailure names the message (RefToMessageId) and goes to its sender.
        failure = error_message(issue, in_reply_to=header, message_id=self.core.ids(), timestamp=now)
        self.send_failure(tx, failure, entry.message_id, Direction.INBOUND, now, after)
