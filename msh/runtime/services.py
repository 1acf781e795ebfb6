"""The MSH services from the sending side: the MSH Ping (ebMS2 §8) and the Message Status Request (§7).

:meth:`Services.ping` sends an MSH Ping to a partner and waits for its Pong; :meth:`Services.remote_status`
asks the To party of one of our messages for its status (a StatusRequest) and waits for the
StatusResponse; :meth:`Services.ask_before_resend` does the same in place of a resend, for the sending
state machine (:class:`~msh.engine.RequestStatus`, the ``sending.status_before_resend`` setting).

Where and how a request goes:

* A Ping goes to the partner the application names, under the agreement it names or the only agreement
  in force between us (several: the caller must choose; none: refused, naming the partners there are),
  to the endpoint that agreement gives the partner's MSH signals (CPP/A 2.0 §8.4.1 default MSH channel,
  ``request`` endpoint), or along the routing table's route to the partner (ebMS2 §10), with that
  endpoint's TLS.
* A StatusRequest about a message goes where the message went: the same URL and TLS as its
  transmissions.
* Both are signed as this MSH signs its signals (:meth:`msh.runtime.security.MessageSecurity.sign_signal`:
  when the agreement's channel for our signals signs; ebMS2 §7.1.1 and §8.1 list the ``ds:Signature``),
  carry no payload, ask for no acknowledgment (§6.3.1.4), and carry SyncReply when the agreement's MSH
  channel has a syncReplyMode other than none (§4.3, CPP/A 2.0 §8.4.8.1). The From and To PartyIds are
  those the agreement gives the two parties.

The answer comes back on the connection (when the partner's MSH returns signals synchronously) or later
to our own endpoint. Either way it is committed by the inbound pipeline like any received message
(journaled as ``signal-Pong`` / ``signal-StatusResponse`` under the request's MessageId, with what it
says), and a StatusResponse about our message is handed to that message's sending state machine
(:class:`~msh.engine.StatusReported`) when it comes from the party the message went to, under its
agreement. The one who asked waits for it as a question (:mod:`msh.runtime.questions`): answered by the
runtime of this process when it receives it; found in the journal when another process did (a command
beside ``msh serve`` on the same store: that server receives the asynchronous answer); given up on at the
deadline.

Decisions where the specifications leave room:

* An asynchronous StatusResponse to a question asked in place of a resend is awaited as long as a
  synchronous one would be (``sending.http_timeout``), and never past the message's next timer; an HTTP 202
  with nothing on the connection is then not yet "no answer". A message is resent only once its question
  is settled: a StatusResponse other than Received or Processed, an error message (NotSupported, ebMS2
  §7), or nothing in time. An answer that comes later still counts as the To party's word
  (:class:`~msh.engine.StatusReported` without attempt).
* The question is asked only about our own messages: an intermediary has no agreement to ask the To party
  under (its forwards are resent as they are), and a signal asks for no acknowledgment.
* ebMS2 §7 says an MSH "SHOULD NOT use the Message Status Request Service to implement Reliable
  Messaging": the status before resend is off unless ``sending.status_before_resend`` is set, and only
  spares sending a body twice after an outage; the acknowledgment is still what delivers a message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Final, TypeAlias

from cpa.resolve import (
    PartyKey,
)
from msh.ebms.envelope import serialise_envelope
from msh.ebms.message import EbxmlMessage, ParseMode, parse_message
from msh.ebms.model import (
    Envelope,
    MessageData,
    MessageHeader,
    Service,
    StatusRequest,
    SyncReply,
)
from msh.ebms.namespaces import SERVICE_MSH
from msh.engine import Discard, Event, StatusReported, StatusUnavailable, UnknownMessage
from msh.engine.replies import ACTION_PING, ACTION_PONG, ACTION_STATUS_REQUEST, ACTION_STATUS_RESPONSE
from msh.errors import ConfigurationError, EbmsError, Severity
from msh.runtime.attempts import ReceivedError, answer_kind, received_errors
from msh.runtime.core import PARSE_ON_LOOP, Core
from msh.runtime.executor import AfterCommit, Executor
from msh.runtime.inbound import Inbound, InboundPipeline
from msh.runtime.questions import Answer, Question
from msh.runtime.service_answers import Outcome, await_answer
from msh.runtime.service_results import PingResult, RemoteStatus
from msh.runtime.service_targets import (
    AgreementChoice,
    Target,
    own_message,
    ping_target,
    status_target,
    stored_body,
)
from msh.store.api import OutboundMessage, Transaction
from msh.transport.port import SOAP_CONTENT_TYPE, Request, TransportFailure

__all__ = ["DEFAULT_TIMEOUT", "AgreementChoice", "PingResult", "RemoteStatus", "Services"]

log = logging.getLogger("msh.runtime")

Done: TypeAlias = Callable[[AfterCommit], None]
"""The work of a unit once committed, given by whoever asks (the sender's after-commit work)."""

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds a Ping or StatusRequest of the application waits for its answer, unless told otherwise."""


@dataclass(frozen=True, slots=True)
class _Sent:
    """What came of sending a request: when, the answer on the connection (its status, what it carried,
    the Action of the ebXML message in it), or why none came; ``problem`` when nothing more can come of it."""

    sent_at: datetime
    received_at: datetime | None = None
    http_status: int | None = None
    answer: str | None = None
    problem: str | None = None
    transmitted: bool = True
    errors: tuple[ReceivedError, ...] = ()
    action: str | None = None


class Services:
    """Sends Pings and StatusRequests and waits for their answers (see the module docs).

    Each request takes ``done``, the work of a unit once committed (the sender's
    :meth:`~msh.runtime.sender.Sender.after_commit`), from its caller: the services hold no callback into the
    parts that use them."""

    def __init__(self, core: Core, executor: Executor, inbound: InboundPipeline) -> None:
        self.core = core
        self.executor = executor
        self.inbound = inbound

    async def _request(
        self, target: Target, action: str, conversation_id: str, status_request: StatusRequest | None = None
    ) -> tuple[str, bytes]:
        """The MessageId and the (signed) bytes of a Ping or StatusRequest to ``target``."""
        core = self.core
        now = core.clock()
        message_id = core.ids()
        # ebMS2 §8.1, §7.1.1: From, To, CPAId, ConversationId, the MSH Service, the Action, MessageData; no
        # payload; the StatusRequest names the message asked about (§7.2.1).
        header = MessageHeader(
            from_party=target.from_party,
            to_party=target.to_party,
            cpa_id=target.cpa_id,
            conversation_id=conversation_id,
            service=Service(SERVICE_MSH),
            action=action,
            message_data=MessageData(message_id=message_id, timestamp=now),
        )
        envelope = Envelope(
            message_header=header,
            # ebMS2 §4.3, CPP/A 2.0 §8.4.8.1: SyncReply as the agreement's MSH channel says.
            sync_reply=SyncReply() if target.sync_reply else None,
            status_request=status_request,
        )
        body = serialise_envelope(envelope)
        security = core.security
        if security.in_use:
            signed = await core.off_loop(lambda: security.sign_signal(envelope, body, receipt=False, now=now))
        else:
            signed = security.sign_signal(envelope, body, receipt=False, now=now)
        return message_id, signed

    # -- the exchange

    def _read(self, body: bytes, content_type: str | None) -> tuple[Inbound | None, EbxmlMessage | None, str | None]:
        """The answer on the connection, parsed and checked (for the inbound pipeline); or why it cannot be."""
        try:
            message = parse_message(body, content_type, mode=ParseMode.LENIENT)
        except EbmsError as exc:
            return None, None, f"the answer is not an ebXML message ({exc})"
        if message.envelope.fault is not None:
            return None, message, None
        try:
            return self.inbound.check(message, body, on_connection=True), None, None
        except BaseException:
            message.close()
            raise

    async def _exchange(self, target: Target, body: bytes, done: Done) -> _Sent:
        """Send a request to ``target``; commit what came back on the connection (the inbound pipeline:
        a Pong or StatusResponse there answers its question in that unit)."""
        core = self.core
        sent_at = core.clock()
        core.counters["service-requests"] += 1
        try:
            response = await core.transport.send(Request(target.url, SOAP_CONTENT_TYPE, body, target.tls))
        except TransportFailure as failure:
            return _Sent(sent_at, problem=failure.reason, transmitted=failure.transmitted)
        received_at = core.clock()
        status, raw = response.status, response.body
        ok = 200 <= status < 300
        if not raw.strip():
            problem = None if ok else f"HTTP {status} with no body from {target.url}"
            return _Sent(sent_at, received_at, status, "no body", problem)
        if len(raw) <= PARSE_ON_LOOP and not core.security.in_use:
            inbound, faulted, unreadable = self._read(raw, response.content_type)
        else:
            inbound, faulted, unreadable = await core.off_loop(self._read, raw, response.content_type)
        if unreadable is not None:
            return _Sent(sent_at, received_at, status, "not an ebXML message", f"HTTP {status}: {unreadable}")
        if faulted is not None:
            fault = faulted.envelope.fault
            faulted.close()
            assert fault is not None
            return _Sent(
                sent_at,
                received_at,
                status,
                "SOAP Fault",
                f"HTTP {status}: SOAP Fault {fault.faultcode}: {fault.faultstring}",
            )
        assert inbound is not None
        envelope = inbound.message.envelope
        kind = answer_kind(envelope, raw)
        action = envelope.message_header.action if envelope.message_header is not None else None
        errors = received_errors(envelope.error_list) if envelope.error_list is not None else ()
        try:
            decision, _reply, after = await core.writer.run(self.inbound.unit(inbound, sync_override=False))
        finally:
            inbound.close()
        done(after)
        problem = None
        refused = [e for e in errors if e.severity == Severity.ERROR.value]
        discarded = [a.reason for a in decision.actions if isinstance(a, Discard)]
        if refused:
            # ebMS2 §7, §8: a partner that does not support the service answers NotSupported (an error message).
            problem = "the partner answered with an error: " + "; ".join(str(e) for e in refused)
        elif discarded:
            problem = f"the answer on the connection ({kind}) was refused: {discarded[0]}"
        elif not ok:
            problem = f"HTTP {status} ({kind})"
        return _Sent(sent_at, received_at, status, kind, problem, True, errors, action)

    async def _ask(self, question: Question, target: Target, body: bytes, done: Done) -> tuple[_Sent, Outcome]:
        """Send a request whose question is registered; wait for the answer unless the exchange already
        settled it (an answer on the connection, or a failure after which none can come)."""
        sent = await self._exchange(target, body, done)
        if question.answer is not None:
            # Answered already: on the connection, or (this process serving our endpoint) asynchronously
            # before the answer to the request itself was read.
            self.core.questions.claim(question.request_id)
            answer = replace(question.answer, on_connection=sent.action == question.expects)
            return sent, Outcome(answer, owned=False)
        if sent.problem is not None and self.core.questions.claim(question.request_id) is not None:
            return sent, Outcome(None, owned=True)  # nothing more will come of it
        return sent, await await_answer(self.core, question)

    def _no_answer(self, target: Target, sent: _Sent, what: str, timeout: float) -> str:
        """Why no answer came, in words."""
        if sent.problem is not None:
            return sent.problem
        got = f"HTTP {sent.http_status}" + (f" ({sent.answer})" if sent.answer else "")
        if target.on_connection:
            return (
                f"no {what}: the answer on the connection ({got}) carried none although agreement {target.cpa_id} "
                f"returns signals on the connection (syncReplyMode {target.mode.value}), and none came to our "
                f"endpoint within {timeout:g} s"
            )
        where = (
            "to our endpoint"
            if self.core.running
            else f"to our endpoint, where `msh serve` on this store ({self.core.store.url}) receives it: is it running?"
        )
        return (
            f"no {what} within {timeout:g} s ({got} to the request); under agreement {target.cpa_id} the {what} "
            f"comes asynchronously (syncReplyMode {target.mode.value}), {where}"
        )

    def _question(
        self,
        request_id: str,
        expects: str,
        target: Target,
        timeout: float,
        *,
        message_id: str | None = None,
        attempt: int | None = None,
    ) -> Question:
        """Register the question of a request about to be sent (answered by ``expects`` from ``target``)."""
        deadline = self.core.clock() + timedelta(seconds=timeout)
        question = Question(request_id, expects, target.partner, target.cpa_id, deadline, message_id, attempt)
        return self.core.questions.ask(question)

    @staticmethod
    def _round_trip(sent: _Sent, answer: Answer) -> timedelta:
        end = sent.received_at if answer.on_connection and sent.received_at is not None else answer.at
        return max(end - sent.sent_at, timedelta(0))

    # -- the services

    async def ping(
        self, partner: PartyKey | str, done: Done, *, cpa_id: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> PingResult:
        """Send an MSH Ping to ``partner`` (ebMS2 §8.1) and wait up to ``timeout`` seconds for its Pong (§8.2)."""
        if timeout <= 0:
            raise ConfigurationError(f"timeout {timeout!r}: give a number of seconds above 0")
        target = ping_target(self.core, self.inbound.forwarding, partner, cpa_id)
        message_id, body = await self._request(target, ACTION_PING, self.core.ids())
        question = self._question(message_id, ACTION_PONG, target, timeout)
        try:
            sent, outcome = await self._ask(question, target, body, done)
        finally:
            self.core.questions.claim(message_id)
        answer = outcome.answer
        self.core.counters["pings"] += 1
        if answer is None:
            log.info("ping %s of %s: %s", message_id, target.partner, self._no_answer(target, sent, "Pong", timeout))
            return PingResult(
                message_id,
                target.partner,
                target.cpa_id,
                target.url,
                sent.sent_at,
                False,
                http_status=sent.http_status,
                problem=self._no_answer(target, sent, "Pong", timeout),
                errors=sent.errors,
            )
        self.core.counters["pongs"] += 1
        return PingResult(
            message_id,
            target.partner,
            target.cpa_id,
            target.url,
            sent.sent_at,
            True,
            self._round_trip(sent, answer),
            answer.on_connection,
            answer.message_id,
            sent.http_status,
            errors=sent.errors,
        )

    async def remote_status(self, message_id: str, done: Done, *, timeout: float = DEFAULT_TIMEOUT) -> RemoteStatus:
        """Ask the To party of our message ``message_id`` for its status (a StatusRequest, ebMS2 §7.1.1) and
        wait up to ``timeout`` seconds for the StatusResponse (§7.1.2); what it says is also handed to the
        message's sending state machine when it comes from that party under the message's agreement."""
        if timeout <= 0:
            raise ConfigurationError(f"timeout {timeout!r}: give a number of seconds above 0")
        stored = await self.core.off_loop(own_message, self.core, message_id)
        target = status_target(self.core, self.inbound.forwarding, stored, lambda: stored_body(self.core, stored))
        request_id, body = await self._request(
            target, ACTION_STATUS_REQUEST, stored.conversation_id, StatusRequest(message_id)
        )
        question = self._question(request_id, ACTION_STATUS_RESPONSE, target, timeout, message_id=message_id)
        try:
            sent, outcome = await self._ask(question, target, body, done)
        finally:
            self.core.questions.claim(request_id)
        answer = outcome.answer
        base = RemoteStatus(
            message_id,
            request_id,
            target.partner,
            target.cpa_id,
            target.url,
            sent.sent_at,
            http_status=sent.http_status,
            errors=sent.errors,
        )
        if answer is None:
            return replace(base, problem=self._no_answer(target, sent, "StatusResponse", timeout))
        return replace(
            base,
            message_status=answer.message_status,
            timestamp=answer.timestamp,
            round_trip=self._round_trip(sent, answer),
            on_connection=answer.on_connection,
            response_message_id=answer.message_id,
        )

    async def ask_before_resend(self, message_id: str, attempt: int, done: Done) -> None:
        """Ask the To party for the status of ``message_id`` in place of resend ``attempt``
        (:class:`~msh.engine.RequestStatus`) and feed its answer to the sending machine: the StatusResponse
        (:class:`~msh.engine.StatusReported`), or why none came (:class:`~msh.engine.StatusUnavailable`)."""
        core = self.core
        stored = await core.off_loop(self._current, message_id, attempt)
        if stored is None:
            return  # settled meanwhile, or a later attempt is under way
        try:
            target = status_target(self.core, self.inbound.forwarding, stored, lambda: stored_body(self.core, stored))
        except ConfigurationError as exc:
            # Nothing to ask with: the resend goes as if the partner had not answered.
            await self._feed(
                message_id, StatusUnavailable(attempt, str(exc), True), {"attempt": attempt, "reason": str(exc)}, done
            )
            return
        request_id, body = await self._request(
            target, ACTION_STATUS_REQUEST, stored.conversation_id, StatusRequest(message_id)
        )
        # ebMS2 §7: an asynchronous StatusResponse is awaited as long as a synchronous answer would be, and
        # never past the message's next timer (the question is settled before the next resend is due).
        timeout = core.settings.sending.http_timeout.total_seconds()
        due = stored.state.next_due_at
        if due is not None:
            timeout = max(min(timeout, (due - core.clock()).total_seconds()), 0.001)
        question = self._question(
            request_id, ACTION_STATUS_RESPONSE, target, timeout, message_id=message_id, attempt=attempt
        )
        log.info("message %s: asking %s for its status before resend %d", message_id, target.partner, attempt)
        try:
            sent, outcome = await self._ask(question, target, body, done)
        finally:
            core.questions.claim(request_id)
        if not outcome.owned or (outcome.answer is not None and outcome.answer.fed):
            return  # the unit that received the StatusResponse fed it to the machine (or will, on commit)
        if not core.running and outcome.answer is None and sent.problem is None:
            return  # the runtime is stopping: the timer asks again after the restart
        detail: dict[str, object] = {"attempt": attempt, "requestMessageId": request_id, "url": target.url}
        if sent.http_status is not None:
            detail["httpStatus"] = sent.http_status
        answer = outcome.answer
        if answer is not None and answer.message_status is not None:
            # ebMS2 §7.3.3: the answer another process received and journaled.
            event: Event = StatusReported(answer.message_status, attempt)
            detail["messageStatus"] = answer.message_status.value
        else:
            reason = self._no_answer(target, sent, "StatusResponse", timeout)
            # ebMS2 §7: no StatusResponse (NotSupported, a 202, a failure): the resend goes, or counts as failed.
            event = StatusUnavailable(attempt, reason, sent.transmitted)
            detail.update(reason=reason, transmitted=sent.transmitted)
        await self._feed(message_id, event, detail, done)

    def _current(self, message_id: str, attempt: int) -> OutboundMessage | None:
        """The stored message, if its attempt ``attempt`` is still the one under way."""
        with self.core.store.transaction(readonly=True) as tx:
            stored = tx.get_outbound(message_id)
        if stored is None or stored.state.status.final or stored.state.attempts != attempt:
            return None
        return stored

    async def _feed(self, message_id: str, event: Event, detail: dict[str, object], done: Done) -> None:
        """The answer to a status question, journaled and stepped in one unit of work."""
        core = self.core

        def unit(tx: Transaction) -> AfterCommit:
            after = AfterCommit()
            try:
                self.executor.record_status_answer(tx, message_id, core.clock(), detail)
                self.executor.step_outbound(tx, message_id, event, core.clock(), after)
            except UnknownMessage:
                log.warning("no outbound message %s for the answer to its status question", message_id)
            return after

        done(await core.writer.run(unit))
