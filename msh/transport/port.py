"""The transport port (docs/design.md §2): how an MSH sends bytes to a partner's endpoint and gets the answer,
and what the endpoint hands to the MSH for each request it receives.

Two adapters implement :class:`Transport`: :class:`msh.transport.http.HttpTransport` (aiohttp, HTTP(S)
with keep-alive, the production one) and :class:`msh.transport.memory.MemoryTransport` (delivers into
another MSH of the same process, with losses, delays and reordering for the test network). Both raise
:class:`TransportFailure` when no answer came, with the reason in words (connection refused, TLS
failure, timeout, lost), and return any answer that came, whatever its status: what it means is the
engine's decision (:func:`msh.engine.binding.transmission_outcome`).
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import BinaryIO, Final, Protocol, TypeAlias

__all__ = [
    "SOAP_ACTION",
    "Body",
    "BodySource",
    "SOAP_CONTENT_TYPE",
    "HttpReply",
    "InboundHandler",
    "Request",
    "Response",
    "Transport",
    "TransportFailure",
    "body_bytes",
    "body_size",
]

SOAP_CONTENT_TYPE: Final = 'text/xml; charset="UTF-8"'
"""The Content-Type of a bare SOAP envelope the MSH sends (an answer, an asynchronous signal)."""

SOAP_ACTION: Final = '"ebXML"'
"""ebMS2 B.2.2: the SOAPAction header every ebXML request carries."""


@dataclass(frozen=True, slots=True)
class BodySource:
    """A request body read in pieces: ``size`` bytes, read from the start by each stream ``open()`` gives
    (the caller closes it). A transmission opens it once; a resend is a new transmission and opens it
    again, so no body is ever held whole in memory whatever its size (docs/design.md §8)."""

    size: int
    open: Callable[[], BinaryIO]

    def read_whole(self) -> bytes:
        """The whole body in memory: for the in-memory transport of tests, and small bodies only."""
        with self.open() as stream:
            data = stream.read()
        if len(data) != self.size:
            raise OSError(f"body source gave {len(data)} bytes, {self.size} announced")
        return data


Body: TypeAlias = bytes | BodySource
"""A request body: bytes (signals, small messages) or a :class:`BodySource` read as it is sent."""


def body_size(body: Body) -> int:
    """The length of ``body`` in bytes (its Content-Length)."""
    return len(body) if isinstance(body, bytes) else body.size


def body_bytes(body: Body) -> bytes:
    """``body`` whole in memory (see :meth:`BodySource.read_whole`)."""
    return body if isinstance(body, bytes) else body.read_whole()


@dataclass(frozen=True, slots=True)
class Request:
    """One transmission of an ebXML message: where to, its Content-Type and body (bytes, or a
    :class:`BodySource` streamed with its Content-Length), and the TLS client context for an ``https`` URL
    (None: plain HTTP, or the adapter's default); over HTTP a POST."""

    url: str
    content_type: str
    body: Body
    tls: ssl.SSLContext | None = None
    headers: Mapping[str, str] = field(default_factory=lambda: {"SOAPAction": SOAP_ACTION})
    message_id: str | None = None
    """The ebMS MessageId of the message sent (None: unknown, e.g. an answer relayed as it came): a binding
    that carries an id of its own (an e-mail's Message-ID, an AMQP message-id) uses it."""
    time_to_live: datetime | None = None
    """The message's TimeToLive (ebMS2 §6.4.5; None: none): a queuing binding gives the broker the same limit."""

    def in_memory(self) -> Request:
        """This request with its body read whole (the in-memory transport's form)."""
        return self if isinstance(self.body, bytes) else replace(self, body=self.body.read_whole())


@dataclass(frozen=True, slots=True)
class Response:
    """The answer that came back on the connection: HTTP status, Content-Type and body."""

    status: int
    content_type: str | None
    body: bytes


class TransportFailure(Exception):
    """No answer came: ``reason`` says why in words (connection refused by host:port, TLS failure, no
    answer within 30 s, the request was lost ...), including the URL. ``transmitted`` is False only when
    the request certainly never reached the peer (no connection was made: refused, name not found, TLS
    handshake refused, connection timeout); when the exchange broke after the request could have left (no
    answer in time, a reset, a closed connection) it may have arrived, and ``transmitted`` is True
    (ebMS2 §6.5.7 tells the two apart: DeliveryFailure Error or Warning)."""

    def __init__(self, reason: str, *, transmitted: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.transmitted = transmitted


class Transport(Protocol):
    """Sends requests to partners' endpoints (one per MSH; used from its event loop)."""

    async def send(self, request: Request) -> Response:
        """POST ``request`` and return the answer; :class:`TransportFailure` when none came."""
        ...

    async def close(self) -> None:
        """Release connections; no send after this."""
        ...


@dataclass(frozen=True, slots=True)
class HttpReply:
    """What the endpoint answers a request with: HTTP status, Content-Type (None: no body) and body."""

    status: int
    content_type: str | None = None
    body: bytes = b""
    refusal: str | None = None
    """Set when the pipeline refused the message (ebMS2 §4.2.4): the error in words (each Error's severity,
    errorCode, location and description), whatever went back on the connection; a binding that settles
    messages (AMQP) settles a refused one so."""
    unsent_error: bytes | None = None
    """The refusal's error message (a SOAP envelope) when it has no way back of its own: not on the
    connection and no endpoint to send it to (e.g. the CPAId names no agreement); a binding with a reply
    address of its own (AMQP reply-to) sends it there."""


class InboundHandler(Protocol):
    """What the endpoint hands each POSTed request to (the MSH's inbound pipeline), and starts and stops
    with the server."""

    def handle_http(
        self,
        body: BinaryIO | bytes,
        content_type: str | None,
        *,
        size: int | None = None,
        peer_certificate: bytes | None = None,
    ) -> Awaitable[HttpReply]:
        """Process one request body (bytes, or a seekable stream of ``size`` bytes) that came with
        ``content_type`` and the TLS client certificate ``peer_certificate`` (DER), and answer it."""
        ...

    def start(self) -> Awaitable[None]: ...

    def stop(self) -> Awaitable[None]: ...
