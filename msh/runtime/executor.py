"""The executor: carries out the engine's decisions inside a store transaction (docs/design.md §2, §5).

Every step of every message is a *unit of work*: a function of a store transaction that the writer runs
and commits. The executor turns the engine's actions into what such a unit does: rows written (the message
and its state, timers, the inbox entry, the acknowledgment, the journal), and the work to do once the
transaction has committed (:class:`AfterCommit`: transmissions to start, replies to send asynchronously,
callbacks to call), so that nothing leaves the MSH on the strength of a change that could still be lost.

Decisions here are the runtime's bookkeeping only; the protocol decisions are the engine's
(:func:`msh.engine.step`, :func:`msh.engine.receive`, :func:`msh.engine.signals.foreign_signal`, and
:func:`msh.engine.after_step` for what follows a failure: a DeliveryFailure to report, one that was lost, a
sequence to start again). The actions are carried out by two tables, :mod:`msh.runtime.sending_actions` and
:mod:`msh.runtime.inbound_actions` (action type -> handler).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime
from typing import BinaryIO

from msh.ebms.envelope import serialise_envelope
from msh.ebms.errorlist import ACTION_MESSAGE_ERROR
from msh.ebms.message import EbxmlMessage, ParseMode, parse_message
from msh.ebms.model import Envelope, MessageHeader
from msh.engine import (
    AcknowledgmentReceived,
    ErrorReceived,
    Event,
    InboundDecision,
    OutboundEvent,
    OutboundStatus,
    ReportDeliveryFailure,
    RestartSequence,
    SignalReceived,
    StatusReported,
    UnknownMessage,
    after_step,
    step,
)
from msh.engine.reliability import effective_actor
from msh.engine.signals import foreign_signal, party_text_of
from msh.errors import ErrorCode, Issue
from msh.runtime import attempts, inbound_actions, sending_actions
from msh.runtime.aftercommit import AfterCommit
from msh.runtime.core import Core
from msh.runtime.forwarding import Forwarding
from msh.runtime.hop_jobs import HopJobs
from msh.runtime.inbound_actions import RaceLost
from msh.runtime.logfields import fields
from msh.runtime.questions import Answer, Question
from msh.runtime.security import ReceiptVerdict
from msh.runtime.sequences import Sequences
from msh.security.algorithms import DigestAlgorithm
from msh.store.api import Direction, OutboundKind, OutboundMessage, Transaction
from msh.store.events import EventKind, signal_received
from msh.store.journal import MessageFacts, Role

__all__ = ["AfterCommit", "Executor", "RaceLost"]

log = logging.getLogger("msh.runtime")


class Executor(HopJobs):
    """Carries out the engine's actions in a transaction (see the module docs)."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.forwarding = Forwarding(core)
        self.sequences = Sequences(core, self.send_delivery_failure)

    # -- the sending machine

    def apply_sending_actions(
        self,
        tx: Transaction,
        message_id: str,
        actions: Iterable[object],
        now: datetime,
        after: AfterCommit,
        *,
        queue_transmit: bool = False,
        fresh: bool = False,
        kind: OutboundKind = OutboundKind.OWN,
    ) -> None:
        """Execute the sending machine's actions in ``tx`` (``fresh``: a new message, which has no timers;
        ``queue_transmit``: another process serves this store, so a transmission becomes a timer row;
        ``kind``: a forward or a routed signal of ours notifies no application, it is journaled)."""
        run = sending_actions.SendingRun(
            self.core, tx, message_id, now, after, queue_transmit=queue_transmit, fresh=fresh, kind=kind
        )
        sending_actions.apply(run, list(actions))

    def refused_facts(self, header: MessageHeader) -> MessageFacts:
        """The journal's facts of a refused message, from its header: this MSH is its To Party MSH when the
        message is addressed here, else the intermediary it came through (ebMS2 §10)."""
        return MessageFacts(
            role=Role.RECEIVER if self.forwarding.addressed_here(header) else Role.INTERMEDIARY,
            cpa_id=header.cpa_id,
            from_party=party_text_of(header.from_party),
            to_party=party_text_of(header.to_party),
            service=header.service.value,
            action=header.action,
            conversation_id=header.conversation_id,
        )

    def step_outbound(
        self,
        tx: Transaction,
        message_id: str,
        event: Event,
        now: datetime,
        after: AfterCommit,
        stored: OutboundMessage | None = None,
    ) -> OutboundStatus | None:
        """One step of the sending machine of ``message_id``, committed with the caller's transaction
        (``stored``: its row, already read for update in this transaction)."""
        stored = stored or after.rows.get(message_id) or tx.get_outbound(message_id, for_update=True)
        if stored is None:
            raise UnknownMessage(f"no outbound message {message_id}")
        state = stored.state
        if isinstance(event, ErrorReceived):
            # ebMS2 §4.2.4: the partner's ErrorList says why it refused the message: kept with the attempt.
            tx.append_event(
                at=now,
                kind=EventKind.ERROR_RECEIVED,
                message_id=message_id,
                direction=Direction.OUTBOUND,
                detail=attempts.error_detail(state.attempts, event.error_list),
            )
            log.warning(
                "ErrorList about %s (after transmission %d): %s",
                message_id,
                state.attempts,
                "; ".join(str(e) for e in attempts.received_errors(event.error_list)),
                extra=fields(
                    message_id=message_id,
                    event=EventKind.ERROR_RECEIVED.value,
                    cpa_id=stored.cpaid,
                    partner=stored.to_party,
                ),
            )
        new, actions = step(state, event, now)
        if new != state:
            tx.update_outbound_state(new)
            stored = replace(stored, state=new)
        after.rows[message_id] = stored
        self.apply_sending_actions(tx, message_id, actions, now, after, kind=stored.kind)
        ordered = stored.sequence_number is not None
        message_error = stored.action == ACTION_MESSAGE_ERROR
        for follow in after_step(stored.kind, state, new, event, ordered=ordered, message_error=message_error):
            if isinstance(follow, RestartSequence):
                self._restart_sequence(tx, stored, follow.gave_up, now)
            elif isinstance(follow, ReportDeliveryFailure):
                self.report_delivery_failure(tx, stored, follow.issue, now, after)
            else:
                self._delivery_failure_lost(tx, stored, follow.issue)
        return new.status

    def _delivery_failure_lost(self, tx: Transaction, stored: OutboundMessage, failure: Issue | None) -> None:
        """A DeliveryFailure of ours that could not be delivered: logged at error level, for the operator to
        tell the From party by other means (ebMS2 §6.5.7); the journal's ``signal-failed`` records it."""
        with tx.open_blob(stored.body_blob_id) as blob:
            parsed = parse_message(blob, stored.content_type, mode=ParseMode.LENIENT)
        try:
            envelope = parsed.envelope
        finally:
            parsed.close()
        header = envelope.message_header
        errors = envelope.error_list.errors if envelope.error_list is not None else ()
        if header is None or not any(e.code is ErrorCode.DELIVERY_FAILURE for e in errors):
            return
        # ebMS2 §6.5.7: the From party "MUST be informed of the problem by other means".
        log.error(
            "DeliveryFailure %s about %s for %s could not be delivered: %s; tell the From party by other means",
            stored.message_id,
            header.message_data.ref_to_message_id,
            party_text_of(header.to_party),
            failure.description if failure is not None else "given up",
        )

    def _restart_sequence(self, tx: Transaction, stored: OutboundMessage, gave_up: bool, now: datetime) -> None:
        """The next message of ``stored``'s conversation starts its sequence again (ebMS2 §9.1.1, decided by
        :func:`msh.engine.after_step`): the sequence is marked broken, once, and journaled."""
        counter = tx.sequence_counter(stored.cpaid, stored.conversation_id)
        if counter is None or counter.broken:
            return
        tx.break_sequence(stored.cpaid, stored.conversation_id)
        tx.append_event(
            at=now,
            kind=EventKind.SEQUENCE_BROKEN,
            message_id=stored.message_id,
            direction=Direction.OUTBOUND,
            detail={"sequenceNumber": stored.sequence_number, "conversationId": stored.conversation_id},
        )
        log.warning(
            "conversation %s: message %s (SequenceNumber %s) %s; the next message of the conversation starts its "
            "sequence again (ebMS2 §9.1.1)",
            stored.conversation_id,
            stored.message_id,
            stored.sequence_number,
            "failed" if gave_up else "could not be presented by the To party",
        )

    def signal_bytes(
        self, envelope: Envelope, message: EbxmlMessage, decision: InboundDecision, now: datetime
    ) -> bytes:
        """The bytes of a signal the decision sends: signed when the agreement's channel for our signals
        signs, or as a signed receipt (ebMS2 §6.3.1.2), its ds:References derived from the message when it
        was not signed (§6.3.2.5)."""
        # ebMS2 §6.3.1.2: a reply is a signed receipt when it carries an Acknowledgment asked for signed.
        receipt = decision.signs(envelope)
        if receipt and decision.derive_references:
            references = self.core.security.derived_references(message, DigestAlgorithm.SHA256)
            envelope = replace(
                envelope,
                acknowledgments=tuple(
                    replace(a, references=references) if effective_actor(a.actor) in decision.signed_actors else a
                    for a in envelope.acknowledgments
                ),
            )
        body = serialise_envelope(envelope)
        signed = self.core.security.sign_signal(envelope, body, receipt=receipt, now=now)
        if signed is not body:
            self.core.counters["signals-signed"] += 1
        return signed

    def _keep_receipt(
        self, tx: Transaction, event: AcknowledgmentReceived, verdict: ReceiptVerdict, message_id: str, now: datetime
    ) -> AcknowledgmentReceived:
        """Keep a signed receipt that matches what we sent (ebMS2 §6.3.2.5); one that does not is recorded as
        the acknowledgment's receipt problem: the partner has the message, what is missing is proof."""
        if verdict.receipt is not None:
            blob = tx.put_blob(verdict.receipt)
            self.core.counters["receipts"] += 1
            tx.append_event(
                at=now,
                kind=EventKind.RECEIPT,
                message_id=message_id,
                direction=Direction.OUTBOUND,
                detail={"blob": blob, "references": verdict.references},
            )
            return event
        issue = verdict.issue
        assert issue is not None
        self.core.counters["receipts-refused"] += 1
        log.warning("acknowledgment of %s refused as a receipt: %s", message_id, issue.description)
        tx.append_event(
            at=now,
            kind=EventKind.RECEIPT_REFUSED,
            message_id=message_id,
            direction=Direction.OUTBOUND,
            detail={"description": issue.description, "location": issue.location},
        )
        where = f" at {issue.location}" if issue.location else ""
        return replace(event, receipt_problem=f"{issue.error_code.value}{where}: {issue.description}")

    def route_to_outbound(
        self,
        tx: Transaction,
        routed: OutboundEvent,
        now: datetime,
        after: AfterCommit,
        receipt: ReceiptVerdict | None = None,
        *,
        attempt: int | None = None,
    ) -> None:
        """Hand an acknowledgment, error or StatusResponse about one of our messages to its sending machine,
        if it counts; ``receipt``: the check of the acknowledgment as a signed receipt (kept, or a
        SecurityFailure); ``attempt``: the resend a StatusResponse's question stood in for (ebMS2 §7)."""
        counters = self.core.counters
        stored = after.rows.get(routed.message_id) or tx.get_outbound(routed.message_id, for_update=True)
        if stored is None:
            # ebMS2 §6.5.2: an Acknowledgment (or error) for a message we do not know is ignored.
            counters["unknown-signals"] += 1
            log.info("signal for unknown message %s ignored", routed.message_id)
            return
        reason = foreign_signal(routed, sent_to=stored.to_party, sent_under=stored.cpaid)
        if reason is None and routed.relay and stored.kind is not OutboundKind.OWN:
            # ebMS2 §10.1.3: a hop acknowledgment of our forward (or signal) counts from its next hop only.
            reason = self.forwarding.not_the_next_hop(stored, routed.from_party)
        if reason is not None:
            # docs/design.md §7: only the party the message went to, under its agreement, may report on it.
            counters["foreign-signals"] += 1
            log.warning("signal about %s ignored: %s", routed.message_id, reason)
            return
        event: Event = routed.event
        if receipt is not None and isinstance(event, AcknowledgmentReceived):
            event = self._keep_receipt(tx, event, receipt, routed.message_id, now)
        if routed.relay and isinstance(event, AcknowledgmentReceived):
            # ebMS2 §10.1.3: the next MSH's acknowledgment, from an intermediary on the path.
            event = replace(event, by_intermediary=True)
        if isinstance(event, StatusReported):
            # ebMS2 §7.3.3: the To party's word on the message, journaled with the question it answers.
            event = replace(event, attempt=attempt)
            detail = {"attempt": attempt, "requestMessageId": routed.in_reply_to}
            self.record_status_answer(
                tx, routed.message_id, now, {**detail, "messageStatus": event.message_status.value}
            )
        self.step_outbound(tx, routed.message_id, event, now, after, stored)

    def record_status_answer(self, tx: Transaction, message_id: str, now: datetime, detail: dict[str, object]) -> None:
        """Journal the answer to a StatusRequest about our message ``message_id`` (``status-answered``),
        in the transaction of the step it causes."""
        self.core.counters[EventKind.STATUS_ANSWERED.value] += 1
        tx.append_event(
            at=now, kind=EventKind.STATUS_ANSWERED, message_id=message_id, direction=Direction.OUTBOUND, detail=detail
        )

    def record_signal(
        self, tx: Transaction, signal: SignalReceived, now: datetime, after: AfterCommit
    ) -> Question | None:
        """Journal a Pong or StatusResponse answering a request of ours (ebMS2 §8.2, §7.1.2) under the
        request's MessageId, with what it says; claim the question it answers when one is open in this
        process and comes from the party asked (:mod:`msh.runtime.questions`), and hand it the answer after
        the commit. The question is returned (its ``attempt`` goes with the StatusResponse's routing)."""
        envelope = signal.envelope
        header = envelope.message_header
        response = envelope.status_response
        detail: dict[str, object] = {}
        facts = None
        if header is not None:
            sender = party_text_of(header.from_party)
            detail = {"messageId": header.message_id, "from": sender}
            facts = MessageFacts(
                cpa_id=header.cpa_id,
                from_party=sender,
                to_party=party_text_of(header.to_party),
                service=header.service.value,
                action=header.action,
                conversation_id=header.conversation_id,
            )
        if response is not None:
            # ebMS2 §7.3.1-§7.3.3: the message asked about, its status and when it was received.
            detail["refToMessageId"] = response.ref_to_message_id
            detail["messageStatus"] = response.message_status.value
            detail["timestamp"] = response.timestamp.isoformat() if response.timestamp is not None else None
        tx.append_event(
            at=now,
            kind=signal_received(signal.action),
            message_id=signal.ref_to_message_id,
            direction=Direction.INBOUND,
            detail=detail,
            facts=facts,
        )
        if header is None:
            return None
        about = response.ref_to_message_id if response is not None else None
        question = self.core.questions.claim_answered(
            signal.ref_to_message_id, signal.action, sender, header.cpa_id, about
        )
        if question is None:
            return None
        answer = Answer(
            signal.action,
            header.message_id,
            sender,
            header.cpa_id,
            now,
            response.message_status if response is not None else None,
            response.timestamp if response is not None else None,
            fed=question.message_id is not None,
        )
        after.notices.append(functools.partial(question.answered, answer))
        return question

    def record_transmission(self, tx: Transaction, message_id: str, detail: dict[str, object]) -> None:
        """Journal the outcome of one transmission (why it failed, what came back), in the transaction
        of the step it causes: no commit of its own."""
        tx.append_event(
            at=self.core.clock(),
            kind=EventKind.TRANSMISSION,
            message_id=message_id,
            direction=Direction.OUTBOUND,
            detail=detail,
        )

    # -- a received message

    def apply_inbound(
        self,
        tx: Transaction,
        message: EbxmlMessage,
        raw: BinaryIO | bytes,
        decision: InboundDecision,
        now: datetime,
        after: AfterCommit,
        *,
        forwarded: tuple[BinaryIO | bytes, str] | None = None,
        verified: bool = False,
        receipts: Iterable[ReceiptVerdict] = (),
    ) -> bytes | None:
        """Carry out the receiving decision for ``message`` (whose body as received is ``raw``) in ``tx``;
        return the reply to put on the connection (None: nothing). ``forwarded`` is the body to forward
        and its Content-Type, for a decision that forwards the message (:class:`StoreForward`);
        ``verified``: its signature was verified; ``receipts``: the checks of the signed acknowledgments
        it carries (:meth:`route_to_outbound`)."""
        run = inbound_actions.InboundRun(
            self,
            tx,
            message,
            raw,
            decision,
            now,
            after,
            forwarded=forwarded,
            verified=verified,
            receipts={r.message_id: r for r in receipts},
        )
        return inbound_actions.apply(run, decision.actions)
