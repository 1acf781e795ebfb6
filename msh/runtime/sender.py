"""Transmissions: our messages out to partners, their answers back into the sending machine (docs/design.md §5.1).

A transmission sends the stored bytes of a message unchanged (the first one straight from memory, since
they were just committed; a resend reads them back from the store) through the MSH's transport, to the
endpoint its agreement gives, with the TLS context the agreement asks for. Its outcome is one unit of
work: the sending machine's step for it (:func:`msh.engine.binding.transmission_outcome` says what the
answer means), its journal entry (why it failed, what came back), and, when the answer carries an ebXML
signal (an acknowledgment, an ErrorList), that signal decided and committed by the inbound pipeline in
the same transaction. Replies the receiving side sends asynchronously go out here too.

:meth:`Sender.after_commit` is where every unit's after-commit work is done: callbacks first, then the
transmissions and asynchronous replies it started, and the StatusRequests asked in place of resends
(:meth:`msh.runtime.services.Services.ask_before_resend`, ebMS2 §7), as tasks on the runtime's loop.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from cpa.resolve import AgreementRefused, Exchange, SendingParameters
from msh.ebms.message import message_id_of
from msh.engine import EndpointRef, ErrorReceived, Event, TransmitFailed, UnknownMessage
from msh.engine.intermediary import hop_answer
from msh.runtime import attempts
from msh.runtime.core import PARSE_ON_LOOP, Core
from msh.runtime.executor import AfterCommit, Executor
from msh.runtime.inbound import InboundPipeline
from msh.runtime.logfields import fields
from msh.runtime.service_targets import client_context, sent_parameters
from msh.runtime.services import Services
from msh.runtime.submission import KEEP_FOR_FIRST_SEND
from msh.store.api import OutboundKind, OutboundMessage, StoreError, Transaction
from msh.transport.port import SOAP_CONTENT_TYPE, Body, BodySource, HttpReply, Request, TransportFailure

__all__ = ["Sender"]

log = logging.getLogger("msh.runtime")


@dataclass(frozen=True, slots=True)
class FirstSend:
    """The bytes of one transmission kept in memory since they were just committed (identical to the stored
    ones), so transmission ``attempt`` need not read them back."""

    content_type: str
    endpoint_url: str
    body: bytes
    params: SendingParameters | None
    kind: OutboundKind
    attempt: int
    time_to_live: datetime | None = None


class Sender:
    """Transmits our messages and carries their outcomes into the store (see the module docs)."""

    def __init__(self, core: Core, executor: Executor, inbound: InboundPipeline, services: Services) -> None:
        self.core = core
        self.executor = executor
        self.inbound = inbound
        self._routes: dict[tuple[str, str, str, str], SendingParameters] = {}
        self._first_send: dict[str, FirstSend] = {}
        self._in_flight: Counter[str] = Counter()
        self.services = services
        """Asks the status questions in place of resends (ebMS2 §7)."""

    def keep_for_first_send(
        self,
        message_id: str,
        content_type: str,
        body: bytes,
        params: SendingParameters | None,
        *,
        endpoint_url: str,
        kind: OutboundKind = OutboundKind.OWN,
        attempt: int = 1,
        time_to_live: datetime | None = None,
    ) -> None:
        """Transmission ``attempt`` of ``message_id`` (the first, or the one a new copy of a forward
        asked for) sends these bytes, identical to the stored ones, without reading them back."""
        self._first_send[message_id] = FirstSend(content_type, endpoint_url, body, params, kind, attempt, time_to_live)

    # -- after a commit

    def after_commit(self, after: AfterCommit) -> None:
        """Do the work a committed unit decided: call the callbacks, start its transmissions and replies."""
        for notice in after.notices:
            try:
                notice()
            except Exception:
                log.exception("an application callback raised")
        if self.core.running:
            due = dict(after.transmits)
            for message_id, (content_type, body) in after.bodies.items():
                row = after.rows.get(message_id)
                if row is not None and message_id in due:
                    self.keep_for_first_send(
                        message_id,
                        content_type,
                        body,
                        None,
                        endpoint_url=row.endpoint_url,
                        kind=row.kind,
                        attempt=due[message_id],
                        time_to_live=row.state.reliability.time_to_live,
                    )
        for message_id, attempt in after.transmits:
            self.core.spawn(functools.partial(self.transmit, message_id, attempt))
        for body, ref in after.async_replies:
            self.core.spawn(functools.partial(self.send_async_reply, body, ref))
        for message_id, attempt in after.status_requests:
            # ebMS2 §7: ask the To party for the message's status in place of this resend.
            self.core.spawn(functools.partial(self.services.ask_before_resend, message_id, attempt, self.after_commit))

    # -- transmitting

    def _load_for_send(self, message_id: str) -> tuple[OutboundMessage, Body] | None:
        """The stored message and its body: small bodies read whole, larger ones as a source the transport
        streams from the store at each transmission, never held whole in memory (docs/design.md §8)."""
        store = self.core.store
        try:
            with store.transaction(readonly=True) as tx:
                stored = tx.get_outbound(message_id)
                if stored is None or stored.state.status.final:
                    return None
                blob_id = stored.body_blob_id
                size = tx.blob_size(blob_id)
                if size <= KEEP_FOR_FIRST_SEND:
                    with tx.open_blob(blob_id) as blob:
                        return stored, blob.read()
        except (OSError, StoreError) as exc:
            # A forward's body replaced by a newer copy meanwhile (ebMS2 §10.1): the timer sends that one.
            log.warning("message %s not transmitted now: its stored body could not be read (%s)", message_id, exc)
            return None
        # A committed blob never changes; one replaced meanwhile fails the read, and the timer sends the new one.
        return stored, BodySource(size, functools.partial(store.open_blob, blob_id))

    def _params_of(self, stored: OutboundMessage, body: Body) -> SendingParameters | None:
        """The sending parameters of a stored message's route (resolved once per route, not per message, unless
        they depend on the message: :func:`~msh.runtime.service_targets.sent_parameters`): of our own messages and of
        our signals sent to an agreement's endpoint, not of forwards."""
        if stored.kind is OutboundKind.FORWARD:
            return None
        route = (stored.cpaid, stored.to_party, stored.service, stored.action)
        params = self._routes.get(route)
        if params is not None:
            return params
        params, per_message = sent_parameters(
            self.core, stored, lambda: body if isinstance(body, bytes) else body.open()
        )
        if params is not None and not per_message:
            self._routes[route] = params
        return params

    def in_flight(self, message_id: str) -> bool:
        """Whether a transmission of ``message_id`` started in this process has not ended yet (it waits for a
        connection slot, or for its answer): its timer then neither resends nor gives up (ebMS2 §6.4.4)."""
        return self._in_flight[message_id] > 0

    @property
    def transmissions_in_flight(self) -> int:
        """Transmissions started in this process that have not ended yet."""
        return sum(self._in_flight.values())

    async def transmit(self, message_id: str, attempt: int) -> None:
        """Transmission number ``attempt`` of ``message_id``, and its outcome committed."""
        self._in_flight[message_id] += 1
        try:
            await self._transmit(message_id, attempt)
        finally:
            self._in_flight[message_id] -= 1
            if self._in_flight[message_id] <= 0:
                del self._in_flight[message_id]

    async def _transmit(self, message_id: str, attempt: int) -> None:
        core = self.core
        first = self._first_send.pop(message_id, None)
        params: SendingParameters | None
        body: Body
        if first is not None and attempt == first.attempt:
            content_type, endpoint_url, body, params, kind, time_to_live = (
                first.content_type,
                first.endpoint_url,
                first.body,
                first.params,
                first.kind,
                first.time_to_live,
            )
        else:
            loaded = await core.off_loop(self._load_for_send, message_id)
            if loaded is None:
                return
            stored, body = loaded
            content_type, endpoint_url, kind = stored.content_type, stored.endpoint_url, stored.kind
            time_to_live = stored.state.reliability.time_to_live
            params = self._params_of(stored, body)
        # ebMS2 §10: the next hop of a route is reached with the route's TLS trust, else the agreement's.
        ssl_context = client_context(core, self.inbound.forwarding, endpoint_url, params)
        core.counters["transmissions"] += 1
        try:
            request = Request(
                endpoint_url, content_type, body, ssl_context, message_id=message_id, time_to_live=time_to_live
            )
            response = await core.transport.send(request)
        except TransportFailure as failure:
            core.counters["transmit-failures"] += 1
            extra = fields(message_id=message_id, event="transmission")
            log.warning("transmission %d of %s failed: %s", attempt, message_id, failure.reason, extra=extra)
            core.relays.deliver(message_id, None)  # a connection waiting for its answer gets none (ebMS2 §4.3)
            record = attempts.transmission_detail(attempt, endpoint_url, error=failure.reason)
            await self.step(message_id, TransmitFailed(failure.reason, failure.transmitted), record=record)
            return
        await self.outcome(
            message_id, attempt, endpoint_url, response.status, response.content_type, response.body, kind
        )

    async def step(self, message_id: str, *events: Event, record: dict[str, object] | None = None) -> None:
        """Steps of the sending machine in a unit of work of their own; ``record`` (the detail of a
        transmission's outcome) is journaled with them."""

        def unit(tx: Transaction) -> AfterCommit:
            after = AfterCommit()
            try:
                if record is not None:
                    self.executor.record_transmission(tx, message_id, record)
                for event in events:
                    self.executor.step_outbound(tx, message_id, event, self.core.clock(), after)
            except UnknownMessage:
                log.warning("no outbound message %s to apply %s to", message_id, type(events[0]).__name__)
            return after

        self.after_commit(await self.core.writer.run(unit))

    async def outcome(
        self,
        message_id: str,
        attempt: int,
        url: str,
        status: int,
        content_type: str | None,
        body: bytes,
        kind: OutboundKind = OutboundKind.OWN,
    ) -> None:
        """Commit the outcome of a transmission whose answer came back (``status``, ``content_type``,
        ``body``), with the signal it carries; for a forward (``kind``), what the next hop answered means
        for it and what in the answer is for another party (:func:`msh.engine.intermediary.hop_answer`)."""
        core = self.core
        if len(body) <= PARSE_ON_LOOP and not core.security.in_use:
            inbound, event = self.inbound.read_answer(message_id, status, content_type, body)
        else:
            inbound, event = await core.off_loop(self.inbound.read_answer, message_id, status, content_type, body)
        events: tuple[Event, ...] = (event,)
        if inbound is not None and kind is not OutboundKind.OWN:
            # ebMS2 §10.1.3: the next hop's acknowledgment ends a forward; the rest goes on to its party.
            on_hop = hop_answer(inbound.message.envelope, message_id)
            if on_hop.event is not None:
                events = (event, on_hop.event)
            # ebMS2 §4.3: the previous hop waits on its connection (SyncReply): the answer goes back on it.
            waited = on_hop.relay and core.relays.deliver(message_id, HttpReply(status, content_type, body))
            if not on_hop.relay or waited:
                inbound.close()
                inbound = None
        envelope = inbound.message.envelope if inbound is not None else None
        answer = (
            "SOAP Fault"
            if envelope is None and isinstance(event, ErrorReceived)
            else attempts.answer_kind(envelope, body)
        )
        error = event.reason if isinstance(event, TransmitFailed) else None
        if error is not None:
            extra = fields(message_id=message_id, event="transmission")
            log.warning(
                "transmission %d of %s failed: %s (answer: %s)", attempt, message_id, error, answer, extra=extra
            )
        record = attempts.transmission_detail(attempt, url, http_status=status, error=error, answer=answer)
        if inbound is None:
            await self.step(message_id, *events, record=record)
            return

        def outcome(tx: Transaction, after: AfterCommit) -> None:
            try:
                self.executor.record_transmission(tx, message_id, record)
                for each in events:
                    self.executor.step_outbound(tx, message_id, each, core.clock(), after)
            except UnknownMessage:
                log.warning("no outbound message %s for the outcome of its transmission", message_id)

        try:
            # The answer on the connection (acknowledgment, ErrorList) commits with the exchange's outcome.
            _decision, _reply, after = await core.writer.run(
                self.inbound.unit(inbound, sync_override=False, then=outcome)
            )
        finally:
            inbound.close()
        self.after_commit(after)

    async def send_async_reply(self, body: bytes, ref: EndpointRef) -> None:
        """Send a reply (acknowledgment, ErrorList, Pong, StatusResponse) that goes asynchronously to the
        endpoint the agreement gives for it (ebMS2 §4.2.4.2); a lost one is not resent: the sender resends
        its message and gets the stored answer again (ebMS2 §6.5.5)."""
        core = self.core
        try:
            exchange = Exchange(ref.from_party, ref.to_party, ref.service, ref.action)
            params = core.registry.resolve(ref.cpa_id, exchange, now=core.clock())
        except AgreementRefused as exc:
            # ebMS2 §4.2.4.2: no endpoint to report to: log it.
            log.warning("asynchronous %s not sent: %s", ref.action, exc)
            return
        url = params.transport.endpoint_url
        # A binding with message ids of its own (an e-mail's Message-ID) carries the reply's MessageId, so
        # that a delivery report about it can be matched (ebMS2 B.3.3); HTTP needs none.
        message_id = None if url[:5].lower() in ("http:", "https") else message_id_of(body, SOAP_CONTENT_TYPE)
        request = Request(url, SOAP_CONTENT_TYPE, body, core.tls.for_parameters(params), message_id=message_id)
        try:
            await core.transport.send(request)
            core.counters["async-replies"] += 1
        except TransportFailure as failure:
            log.info("asynchronous %s to %s lost: %s", ref.action, params.transport.endpoint_url, failure.reason)
