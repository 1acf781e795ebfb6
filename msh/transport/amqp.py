"""The queuing transport: ebXML messages as AMQP 1.0 messages through a broker (docs/transports/amqp.md).

:class:`AmqpTransport` is the :class:`~msh.transport.port.Transport` of ``amqp:`` and ``amqps:`` endpoint
URLs (:mod:`msh.transport.amqp_address`). Each request becomes one AMQP message: the whole ebXML package
(SOAP envelope and payloads, as on HTTP) in one data section, its Content-Type as ``content-type``, durable
(AMQP 1.0 §3.2.1), the ebMS MessageId as ``message-id``, the time left until the message's TimeToLive as
``ttl`` (§3.2.1, in milliseconds; ebMS2 §6.4.5), our reply address as ``reply-to``, and the application
property ``SOAPAction: ebXML`` (ebMS2 B.2.2's header, kept for receivers that look for it).

A transmission succeeds when the broker settles the message **accepted** (§3.4.2): the answer is then
``Response(202, None, b"")``, a transmission without an answer on the connection, as an HTTP 202 is
(:func:`msh.engine.binding.transmission_outcome`). A rejected, released or modified message (§3.4.3-3.4.5)
never reached the queue: :class:`~msh.transport.port.TransportFailure` with ``transmitted`` False (a
rejection's error in the reason). No settlement within the timeout, or a connection lost before it, is a
failure with ``transmitted`` True: the broker may have stored it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from proton import Message

from msh.transport.amqp_address import AmqpEndpoint, parse_endpoint
from msh.transport.amqp_thread import BrokerAccess, BrokerThread, Outcome, Settlement
from msh.transport.port import Request, Response, TransportFailure, body_size

__all__ = ["ACCEPTED_RESPONSE", "SOAP_ACTION_PROPERTY", "AmqpTransport", "amqp_message"]

SOAP_ACTION_PROPERTY: Final = ("SOAPAction", "ebXML")
"""ebMS2 B.2.2's SOAPAction, as an application property of every message."""

ACCEPTED_RESPONSE: Final = Response(202, None, b"")
"""What an accepted message is to the engine: delivered to the next party, no answer on the connection."""


def amqp_message(request: Request, body: bytes, *, reply_to: str | None, ttl: float | None) -> Message:
    """The AMQP message of ``request`` whose body is ``body`` (see the module docs); ``ttl`` in seconds."""
    message = Message(
        body=body,
        content_type=request.content_type,
        durable=True,  # AMQP 1.0 §3.2.1: the broker keeps it across its restarts
        id=request.message_id,
        reply_to=reply_to,
        properties=dict([SOAP_ACTION_PROPERTY]),
    )
    message.inferred = True  # the body is a data section (§3.2.6), not an amqp-value
    if ttl is not None:
        message.ttl = ttl  # §3.2.1: milliseconds on the wire
    return message


class AmqpTransport:
    """Sends requests to ``amqp:``/``amqps:`` endpoints (see the module docs).

    ``access`` logs in to the brokers; ``reply_to`` is the address our partners' signals come back to (None:
    none given); ``timeout`` the seconds a message may wait for its connection and its settlement;
    ``max_message_bytes`` the largest package sent (bodies are read whole); ``clock`` gives now (for the
    ttl)."""

    def __init__(
        self,
        access: BrokerAccess,
        *,
        reply_to: str | None = None,
        timeout: float = 30.0,
        max_message_bytes: int = 64 * 1024 * 1024,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.reply_to = reply_to
        self.timeout = timeout
        self.max_message_bytes = max_message_bytes
        self._clock = clock or (lambda: datetime.now(UTC))
        self._thread = BrokerThread(access, name="msh-amqp-send")

    def _ttl(self, request: Request) -> float | None:
        """Seconds left until the request's TimeToLive, rounded up to the millisecond (None: none)."""
        if request.time_to_live is None:
            return None
        left = (request.time_to_live - self._clock()).total_seconds()
        if left <= 0:
            # ebMS2 §6.4.5: a message past its TimeToLive is not delivered; it is not sent either.
            raise TransportFailure(
                f"cannot send {request.message_id or 'the message'} to {request.url}: its TimeToLive "
                f"{request.time_to_live.isoformat()} has passed",
                transmitted=False,
            )
        return max(math.ceil(left * 1000), 1) / 1000

    async def send(self, request: Request) -> Response:
        """Send ``request`` and wait until the broker settles it (see the module docs)."""
        try:
            endpoint: AmqpEndpoint = parse_endpoint(request.url)
        except ValueError as exc:
            raise TransportFailure(f"cannot send: {exc}", transmitted=False) from None  # the URL may hold a password
        size = body_size(request.body)
        if size > self.max_message_bytes:
            raise TransportFailure(
                f"cannot send {size} bytes to {endpoint.url}: more than amqp.max_message_bytes "
                f"({self.max_message_bytes}); raise it up to the broker's largest message",
                transmitted=False,
            )
        ttl = self._ttl(request)
        if isinstance(request.body, bytes):
            body = request.body
        else:
            body = await asyncio.to_thread(request.body.read_whole)  # a stored body, read off the loop
        message = amqp_message(request, body, reply_to=self.reply_to, ttl=ttl)
        what = f"message {request.message_id}" if request.message_id else "the message"
        settlement = await self._thread.send(endpoint, message, timeout=self.timeout, what=f"{what} to {endpoint.url}")
        return _response(settlement, endpoint, what)

    async def close(self) -> None:
        """Close the broker connections (waits for the client thread off the loop)."""
        await asyncio.to_thread(self._thread.stop)


def _response(settlement: Settlement, endpoint: AmqpEndpoint, what: str) -> Response:
    """The answer a settlement means (AMQP 1.0 §3.4), or the failure."""
    if settlement.outcome is Outcome.ACCEPTED:
        return ACCEPTED_RESPONSE  # §3.4.2: the broker took it
    if settlement.outcome is Outcome.REJECTED:
        error = settlement.condition or "no condition"
        if settlement.description:
            error = f"{error}: {settlement.description}"
        reason = f"{endpoint.broker} rejected {what} for {endpoint.address} ({error})"
    else:
        reason = f"{endpoint.broker} {settlement.outcome.value} {what} for {endpoint.address} (not taken)"
    raise TransportFailure(reason, transmitted=False)  # §3.4.3-3.4.5: not on the queue
