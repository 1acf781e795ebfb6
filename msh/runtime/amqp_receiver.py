"""Receiving ebXML messages from our queue on an AMQP 1.0 broker (docs/transports/amqp.md).

:class:`AmqpReceiver` runs beside the endpoint as a companion of ``msh serve`` when ``amqp.enabled``. It takes
messages from ``amqp.url`` with at most ``amqp.credit`` unsettled, hands each to the same inbound pipeline as
the HTTP endpoint (:meth:`msh.runtime.msh.Msh.handle_http`, which commits before it answers), and settles it
by what the pipeline answered (AMQP 1.0 §3.4):

* taken (a 2xx without an ErrorList of severity Error): **accepted**, only now that it is committed; an
  answer the pipeline gives "on the connection" (an acknowledgment when the agreement asks for synchronous
  signals) goes to the message's reply-to through the MSH's transport.
* refused with an ebXML ErrorList of severity Error (e.g. an unknown CPAId: HTTP answers it with 200, ebMS2
  B.2.3), a SOAP Client Fault or a 4xx: **rejected** with the error's code and description (§3.4.3), and the
  error answer sent to the message's reply-to.
* not taken now (a SOAP Server Fault, a 5xx: nothing was committed): **modified** with delivery-failed
  (§3.4.5), so the broker delivers it again.

A message taken but not settled (the process stopped or crashed, the connection dropped) stays on the broker
and comes again: if it had been committed, the pipeline recognises the duplicate (ebMS2 §6.4.4).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Final

from msh.ebms.message import ParseMode, parse_message
from msh.engine.binding import server_fault
from msh.errors import EbmsError, Severity
from msh.runtime.config import Settings
from msh.runtime.inbound import refusal_text
from msh.runtime.transports import amqp_access
from msh.transport.amqp_address import AmqpEndpoint, parse_endpoint
from msh.transport.amqp_thread import BrokerAccess, BrokerThread, Inbound, Outcome, Settlement
from msh.transport.port import SOAP_CONTENT_TYPE, HttpReply, InboundHandler, Request, Transport, TransportFailure

if TYPE_CHECKING:
    from msh.runtime.msh import Msh

__all__ = ["NOT_EBXML", "REFUSED", "AmqpReceiver", "settlement_of"]

log = logging.getLogger("msh.runtime")

REFUSED: Final = "amqp:precondition-failed"
"""The error condition (AMQP 1.0 §2.8.15) of a message the pipeline refused; its description is the ebMS error."""

NOT_EBXML: Final = "amqp:decode-error"
"""The error condition of a message whose body is not an ebXML package (no data section)."""


def settlement_of(reply: HttpReply) -> Settlement:
    """How to settle a message the pipeline answered with ``reply`` (AMQP 1.0 §3.4), by what the answer says.

    * A refusal (ebMS2 §4.2.4: :attr:`HttpReply.refusal`, whether its ErrorList went back on the connection, to
      the agreement's endpoint or nowhere), or an ErrorList of severity Error on the connection (ebMS2 §4.2.3):
      **rejected** with each Error's severity, errorCode, location and description. HTTP answers such a
      readable-header refusal with 200 (ebMS2 B.2.3), e.g. of an unknown CPAId.
    * A SOAP Fault (SOAP 1.1 §4.4.1): Client, the message cannot be processed as sent: **rejected**; Server,
      our own trouble (nothing was committed): **modified** with delivery-failed, delivered again.
    * Otherwise a 2xx: **accepted** (the pipeline committed it); 4xx **rejected**; 5xx **modified**.
    """
    if reply.refusal is not None:
        return Settlement(Outcome.REJECTED, REFUSED, f"ebMS {reply.refusal}")  # §3.4.3
    envelope = None
    if reply.body.strip():
        try:
            message = parse_message(reply.body, reply.content_type, mode=ParseMode.LENIENT)
        except EbmsError:
            message = None
        if message is not None:
            envelope = message.envelope
            message.close()
    if envelope is not None and envelope.fault is not None:
        fault = envelope.fault
        text = refusal_text(envelope)
        if server_fault(fault):
            return Settlement(Outcome.MODIFIED, None, text)  # §3.4.5: not taken now, comes again
        return Settlement(Outcome.REJECTED, NOT_EBXML, text)  # §3.4.3: resending the same bytes cannot help
    if envelope is not None and envelope.error_list is not None:
        errors = envelope.error_list
        if errors.highest_severity is Severity.ERROR:
            return Settlement(Outcome.REJECTED, REFUSED, f"ebMS {refusal_text(envelope)}")  # §3.4.3
    if 200 <= reply.status < 300:
        return Settlement(Outcome.ACCEPTED)  # §3.4.2: committed, ours now
    if 400 <= reply.status < 500:
        return Settlement(Outcome.REJECTED, REFUSED, f"refused with status {reply.status}")
    return Settlement(Outcome.MODIFIED, None, f"not taken now (status {reply.status})")


class AmqpReceiver:
    """Takes our messages from the broker into ``handler``'s pipeline; answers go out through ``transport``
    (see the module docs). ``access`` defaults to the ``[amqp]`` credentials."""

    def __init__(
        self,
        settings: Settings,
        handler: InboundHandler,
        transport: Transport,
        *,
        access: BrokerAccess | None = None,
    ) -> None:
        a = settings.amqp
        self.endpoint: AmqpEndpoint = parse_endpoint(a.url)
        self.handler = handler
        self.transport = transport
        self.credit = a.credit
        self.max_message_bytes = a.max_message_bytes
        self.stop_timeout = a.timeout.total_seconds()
        self.attached = asyncio.Event()
        """Set while the receiving link is attached (cleared when the connection is lost)."""
        self.received = 0
        """Messages handed to the pipeline (redeliveries included)."""
        self._thread = BrokerThread(access if access is not None else amqp_access(settings), name="msh-amqp-recv")
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False

    @classmethod
    def for_msh(cls, settings: Settings, msh: Msh) -> AmqpReceiver:
        """The receiver of ``msh`` (its pipeline, its transport for the answers)."""
        return cls(settings, msh, msh.transport)

    @property
    def announce(self) -> str:
        """The line ``msh serve`` prints once started."""
        return f"receiving ebXML messages from {self.endpoint.url} (AMQP 1.0, credit {self.credit})"

    async def start(self) -> None:
        """Attach to our queue (the broker may be down: the receiver keeps trying, see the log)."""
        loop = asyncio.get_running_loop()
        self._thread.consume(
            self.endpoint,
            credit=self.credit,
            on_message=lambda message: loop.call_soon_threadsafe(self._arrived, message),
            on_state=lambda problem: loop.call_soon_threadsafe(self._state, problem),
        )

    async def stop(self) -> None:
        """Let the messages being processed finish and settle (bounded by ``amqp.timeout``), release the others
        to the broker, close the connection."""
        self._stopping = True
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self.stop_timeout)
        await asyncio.to_thread(self._thread.stop)
        self.attached.clear()

    def _state(self, problem: str | None) -> None:
        if problem is None:
            self.attached.set()
            log.info("receiving from %s", self.endpoint.url)
        else:
            self.attached.clear()
            log.warning("AMQP receiving from %s interrupted: %s", self.endpoint.url, problem)

    def _arrived(self, message: Inbound) -> None:
        if self._stopping:
            return  # released to the broker when the connection closes
        task = asyncio.get_running_loop().create_task(self._handle(message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, message: Inbound) -> None:
        self.received += 1
        if message.body is None:
            why = "the message body is not a data section holding an ebXML package"
            self._thread.settle_message(message.tag, Settlement(Outcome.REJECTED, NOT_EBXML, why))
            return
        if len(message.body) > self.max_message_bytes:
            why = f"{len(message.body)} bytes, more than amqp.max_message_bytes ({self.max_message_bytes})"
            self._thread.settle_message(
                message.tag, Settlement(Outcome.REJECTED, "amqp:link:message-size-exceeded", why)
            )
            return
        try:
            reply = await self.handler.handle_http(message.body, message.content_type, size=len(message.body))
        except Exception:
            log.exception("message %s from %s could not be processed", message.message_id, self.endpoint.url)
            # §3.4.5: delivery-failed, the broker delivers it again.
            self._thread.settle_message(message.tag, Settlement(Outcome.MODIFIED))
            return
        settlement = settlement_of(reply)
        if settlement.outcome is Outcome.REJECTED:
            log.warning("message %s from %s refused: %s", message.message_id, self.endpoint.url, settlement.description)
        elif settlement.outcome is not Outcome.ACCEPTED:
            log.warning(
                "message %s from %s not taken now (%s): the broker delivers it again",
                message.message_id,
                self.endpoint.url,
                settlement.description,
            )
        if settlement.outcome is not Outcome.MODIFIED:
            self._answer(message, reply)  # an acknowledgment or the error, to the sender's reply-to
        self._thread.settle_message(message.tag, settlement)

    def _reply_url(self, message: Inbound) -> str | None:
        """Where the message's answers go: its reply-to, an amqp URL, or an address on our broker."""
        if not message.reply_to:
            return None
        try:
            return parse_endpoint(message.reply_to).url
        except ValueError:
            return self.endpoint.at(message.reply_to).url

    def _answer(self, message: Inbound, reply: HttpReply) -> None:
        """Send the pipeline's answer "on the connection", or the error of a refusal that had no way back of its
        own, to the message's reply-to (a task: a lost one is not resent, the sender resends its message and
        gets the stored answer again, ebMS2 §6.5.5)."""
        if reply.body and reply.content_type is not None:
            content_type, body = reply.content_type, reply.body
        elif reply.unsent_error is not None:
            content_type, body = SOAP_CONTENT_TYPE, reply.unsent_error
        else:
            return
        url = self._reply_url(message)
        if url is None:
            log.info("the answer to %s was dropped: the message gave no reply-to", message.message_id)
            return
        task = asyncio.get_running_loop().create_task(
            self._send_answer(Request(url, content_type, body), message.message_id)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_answer(self, request: Request, message_id: str | None) -> None:
        try:
            await self.transport.send(request)
        except TransportFailure as failure:
            log.info("the answer to %s for %s was lost: %s", message_id, request.url, failure.reason)
