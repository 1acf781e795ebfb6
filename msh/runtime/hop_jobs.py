"""Forwards and routed signals (ebMS2 §10): the part of the executor (:mod:`msh.runtime.executor`) that stores
a message this MSH sends hop by hop (a forward of an intermediary, or a signal of ours that goes along a
route or to an agreement's endpoint) and starts its sending machine, and that tells a From party of a
DeliveryFailure (ebMS2 §6.5.7).

:class:`HopJobs` is a base of :class:`~msh.runtime.executor.Executor`; the sending machine's actions it
starts are carried out by the executor's :meth:`apply_sending_actions`.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime
from typing import BinaryIO

from cpa.resolve import AgreementRefused, Exchange
from msh.ebms.envelope import serialise_envelope
from msh.ebms.message import ParseMode, parse_message
from msh.ebms.model import Envelope, MessageHeader
from msh.engine import EndpointRef, OutboundState, Reliability, SendAgain, StoredAck, Submit, step
from msh.engine.intermediary import delivery_failure
from msh.engine.routing import DEFAULT_ROUTE_RETRIES, DEFAULT_ROUTE_RETRY_INTERVAL
from msh.engine.signals import party_text_of
from msh.errors import EbmsError, Issue
from msh.runtime.aftercommit import AfterCommit
from msh.runtime.core import Core
from msh.runtime.forwarding import Forwarding
from msh.store.api import Direction, OutboundKind, OutboundMessage, Transaction
from msh.store.events import EventKind
from msh.transport.port import SOAP_CONTENT_TYPE

__all__ = ["HopJobs"]

log = logging.getLogger("msh.runtime")


class HopJobs(ABC):
    """Forwards and routed signals of the executor (see the module docs)."""

    core: Core
    forwarding: Forwarding

    @abstractmethod
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
        """Execute the sending machine's actions in ``tx``."""

    def start_job(
        self,
        tx: Transaction,
        kind: OutboundKind,
        header: MessageHeader,
        reliability: Reliability,
        body: BinaryIO | bytes,
        content_type: str,
        endpoint_url: str,
        now: datetime,
        after: AfterCommit,
    ) -> OutboundMessage | None:
        """Store a forward (or a routed signal of ours) and start its sending machine; a copy of one
        already stored is sent again (an intermediary forwards every copy, ebMS2 §10.1): at once, with the
        stored bytes and within the same retry budget, while the first is under way; afresh, with the new
        bytes, once that one is over.
        None when the MessageId is one of the application's own messages (a loop: nothing is stored)."""
        message_id = header.message_id
        existing = after.rows.get(message_id) or tx.get_outbound(message_id, for_update=True)
        if existing is not None and existing.kind is OutboundKind.OWN:
            log.warning("%s %s not stored: the MessageId is one of our own messages", kind.value, message_id)
            return None
        if existing is not None and not existing.state.status.final:
            # ebMS2 §10.1: another copy while the forward is under way: sent again, same retry budget,
            # with the stored bytes (a transmission may be reading them; the copy is the same message).
            state, actions = step(existing.state, SendAgain(), now)
            tx.update_outbound_state(state)
            record = replace(existing, state=state)
            after.rows[message_id] = record
            self.apply_sending_actions(tx, message_id, actions, now, after, kind=kind)
            return record
        state, actions = step(None, Submit(message_id, reliability), now)
        record = _store_job(tx, existing, state, kind, header, body, content_type, endpoint_url)
        after.rows[message_id] = record
        if isinstance(body, bytes):
            after.bodies[message_id] = (content_type, body)
        self.apply_sending_actions(
            tx,
            message_id,
            actions,
            now,
            after,
            queue_transmit=not self.core.running,
            fresh=existing is None,
            kind=kind,
        )
        return record

    def send_signal(self, tx: Transaction, envelope: Envelope, body: bytes, now: datetime, after: AfterCommit) -> bool:
        """Send a signal of ours (acknowledgment, error message, DeliveryFailure) along the route to its
        To party, stored and resent until the next hop takes it; False when no route matches (it then
        goes to the agreement's endpoint, unstored, as before)."""
        header = envelope.message_header
        if header is None:
            return False
        route = self.forwarding.route(header.to_party, header.cpa_id, header.service.value, header.action)
        if route is None:
            return False
        # ebMS2 §6.3.1.4: a signal asks for no acknowledgment: resent until the next hop answers at all.
        reliability = Reliability.from_route(route, time_to_live=header.message_data.time_to_live, ack_next_msh=False)
        started = self.start_job(
            tx, OutboundKind.SIGNAL, header, reliability, body, SOAP_CONTENT_TYPE, route.next_hop, now, after
        )
        if started is not None:
            self.core.counters["signals-routed"] += 1
        return started is not None

    def report_delivery_failure(
        self, tx: Transaction, stored: OutboundMessage, issue: Issue, now: datetime, after: AfterCommit
    ) -> None:
        """Send the From party of a forward we gave up on its DeliveryFailure (ebMS2 §6.5.7): stored as a
        signal of ours and resent until the next hop takes it, along the reverse route or to the endpoint
        the agreement gives (``delivery-failure-queued``; the signal's own ``signal-sent`` or
        ``signal-failed`` says how that ended). With neither, nothing can be sent: journaled as
        ``delivery-failure-unsent`` with the reason, and logged at error level (§6.5.7: the From party "MUST
        be informed of the problem by other means")."""
        with tx.open_blob(stored.body_blob_id) as blob:
            forwarded = parse_message(blob, stored.content_type, mode=ParseMode.LENIENT)
        try:
            envelope = forwarded.envelope
        finally:
            forwarded.close()
        failure = delivery_failure(
            envelope, issue, own_party=self.forwarding.own_party, message_id=self.core.ids(), now=now
        )
        if failure is None:
            # ebMS2 §6.5.7: no AckRequested (or a signal): the journal's forward-failed is all there is.
            return
        self.send_delivery_failure(tx, failure, stored.message_id, Direction.OUTBOUND, now, after)

    def send_delivery_failure(
        self,
        tx: Transaction,
        failure: Envelope,
        about: str,
        direction: Direction,
        now: datetime,
        after: AfterCommit,
    ) -> None:
        """Send the error message ``failure`` (a DeliveryFailure about the message ``about``, which went the
        way ``direction`` says) to its To party: stored as a signal of ours and resent until the next hop takes
        it, along the reverse route or to the endpoint the agreement gives (``delivery-failure-queued``; the
        signal's own ``signal-sent`` or ``signal-failed`` says how that ended). With neither, nothing can be
        sent: journaled as ``delivery-failure-unsent`` with the reason, and logged at error level (ebMS2
        §6.5.7: the From party "MUST be informed of the problem by other means"). Signed when the agreement's
        channel for our signals signs."""
        body = self.core.security.sign_signal(failure, serialise_envelope(failure), receipt=False, now=now)
        header = failure.message_header
        assert header is not None and failure.error_list is not None
        error = failure.error_list.errors[0]
        detail: dict[str, object] = {
            "to": party_text_of(header.to_party),
            "severity": error.severity.value,
            "description": error.description.text if error.description is not None else None,
            "failureMessageId": header.message_id,
        }
        if self.send_signal(tx, failure, body, now, after):
            detail["routed"] = True
        else:
            endpoint, why_not = self._agreement_endpoint(header)
            if endpoint is None:
                self.core.counters["delivery-failures-unsent"] += 1
                log.error(
                    "DeliveryFailure about %s for %s not sent: %s; tell the From party by other means",
                    about,
                    detail["to"],
                    why_not,
                )
                tx.append_event(
                    at=now,
                    kind=EventKind.DELIVERY_FAILURE_UNSENT,
                    message_id=about,
                    direction=direction,
                    detail={**detail, "reason": why_not},
                )
                return
            reliability, url = endpoint
            self.start_job(tx, OutboundKind.SIGNAL, header, reliability, body, SOAP_CONTENT_TYPE, url, now, after)
            detail["routed"] = False
        self.core.counters["delivery-failures-queued"] += 1
        tx.append_event(
            at=now,
            kind=EventKind.DELIVERY_FAILURE_QUEUED,
            message_id=about,
            direction=direction,
            detail=detail,
        )

    def _agreement_endpoint(self, header: MessageHeader) -> tuple[tuple[Reliability, str] | None, str]:
        """The endpoint the agreement gives for a signal of ours with ``header``, and how it is resent (the
        agreement's retries; ebMS2 §6.3.1.4: a signal asks for no acknowledgment); else None and why not."""
        if self.core.registry.get(header.cpa_id) is None:
            why = f"no route to {party_text_of(header.to_party)} and agreement {header.cpa_id} is not loaded here"
            return None, why
        try:
            params = self.core.registry.resolve(header.cpa_id, Exchange.of_header(header), now=self.core.clock())
        except AgreementRefused as exc:
            return None, f"no route to {party_text_of(header.to_party)} and the agreement gives no endpoint: {exc}"
        rm = params.reliable_messaging
        interval = rm.retry_interval if rm is not None else DEFAULT_ROUTE_RETRY_INTERVAL
        reliability = Reliability(
            retries=rm.retries if rm is not None else DEFAULT_ROUTE_RETRIES,
            retry_interval=interval,
            first_resend_timeout=interval,
            persist_duration=params.doc_exchange.persist_duration,
            time_to_live=header.message_data.time_to_live,
            ack_requested=False,
            end_to_end=False,
        )
        return (reliability, params.transport.endpoint_url), ""

    def _envelope_of(self, stored: StoredAck) -> Envelope | None:
        if isinstance(stored, Envelope):
            return stored
        try:
            parsed = parse_message(stored, SOAP_CONTENT_TYPE, mode=ParseMode.LENIENT)
        except EbmsError:
            return None
        parsed.close()
        return parsed.envelope

    def reply_async(
        self, tx: Transaction, stored: StoredAck, body: bytes, ref: EndpointRef, now: datetime, after: AfterCommit
    ) -> None:
        envelope = self._envelope_of(stored) if self.forwarding.routes else None
        if envelope is None or not self.send_signal(tx, envelope, body, now, after):
            after.async_replies.append((body, ref))


def _store_job(
    tx: Transaction,
    existing: OutboundMessage | None,
    state: OutboundState,
    kind: OutboundKind,
    header: MessageHeader,
    body: BinaryIO | bytes,
    content_type: str,
    endpoint_url: str,
) -> OutboundMessage:
    """The stored row of a new job: inserted, or (a copy after the earlier one is over) the earlier row
    queued again with the new bytes."""
    if not isinstance(body, bytes):
        body.seek(0)
    blob = tx.put_blob(body)
    if existing is not None:
        return tx.requeue_outbound(state=state, body_blob_id=blob, content_type=content_type, endpoint_url=endpoint_url)
    return tx.insert_outbound(
        state=state,
        cpaid=header.cpa_id,
        conversation_id=header.conversation_id,
        service=header.service.value,
        action=header.action,
        from_party=party_text_of(header.from_party),
        to_party=party_text_of(header.to_party),
        endpoint_url=endpoint_url,
        content_type=content_type,
        body_blob_id=blob,
        kind=kind,
    )
