"""The inbound endpoint as an ASGI application (docs/design.md §2: an ASGI server for inbound).

``POST <path>`` with an ebXML message (``multipart/related`` or ``text/xml``) is handed to the MSH's
inbound pipeline (:meth:`~msh.transport.port.InboundHandler.handle_http`); its answer (acknowledgment,
ErrorList, SOAP Fault, or nothing) goes back on the response. A POST without the SOAPAction header
(mandatory, ebMS2 B.2.2, SOAP 1.1 §6.1.1; any value is taken) is read to its end and refused with HTTP
400 and a SOAP Fault (faultcode Client): it is not a SOAP HTTP request, so nothing of it is processed or
stored, and a sender that understands SOAP takes the Fault as final instead of resending. The TLS client
certificate, from the ASGI TLS extension (which :mod:`msh.transport.server` adds to uvicorn), goes with
the message, to be checked against the party it claims to come from. The body is spooled (memory up to
1 MiB, then a temporary file), never held whole in memory, and refused with 413 past ``max_body_bytes``.
Other paths get 404, other methods 405 (``GET`` on the path answers a one-line description, handy for a
load balancer's health check). A Content-Type or SOAPAction field sent twice is refused with 400 before the
body is read (RFC 9110 §5.3). Whatever fails inside, a 500 always carries a SOAP Fault.
"""

from __future__ import annotations

import functools
import logging
import ssl
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from msh.ebms.envelope import serialise_envelope
from msh.ebms.errorlist import soap_fault
from msh.ebms.message import soap_action_issue
from msh.errors import ErrorCode, Issue, Severity
from msh.transport.port import SOAP_CONTENT_TYPE, HttpReply, InboundHandler

__all__ = ["Endpoint", "repeated_field", "server_fault"]

log = logging.getLogger("msh.http")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_SPOOL_IN_MEMORY = 1 << 20


# SOAP 1.1 §6.2: a 500 carries a SOAP Fault. Built once, so the last resort below has nothing left to fail.
_LAST_RESORT_FAULT = serialise_envelope(
    soap_fault(Issue(ErrorCode.UNKNOWN, Severity.ERROR, "the receiving MSH could not process the message"), server=True)
)


def server_fault(description: str) -> HttpReply:
    """HTTP 500 with a SOAP Fault (faultcode Server) saying ``description``; never raises: should the fault
    itself fail to build, the fixed one goes back instead."""
    try:
        body = serialise_envelope(soap_fault(Issue(ErrorCode.UNKNOWN, Severity.ERROR, description), server=True))
    except Exception:
        log.exception("could not build the SOAP Fault for: %r", description)
        body = _LAST_RESORT_FAULT
    return HttpReply(500, SOAP_CONTENT_TYPE, body)


class Endpoint:
    """ASGI 3 application serving one MSH's inbound ``handler`` at ``path``."""

    def __init__(
        self,
        handler: InboundHandler,
        *,
        path: str = "/msh",
        max_body_bytes: int = 2 << 30,
        counters: Counter[str] | None = None,
    ) -> None:
        self.handler = handler
        self.counters: Counter[str] = counters if counters is not None else Counter()
        self.path = path
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["path"] != self.path:
            await _respond(send, HttpReply(404, "text/plain", f"no MSH endpoint here; POST to {self.path}\n".encode()))
            return
        method = scope["method"]
        if method in ("GET", "HEAD"):
            await _respond(
                send, HttpReply(200, "text/plain", b"ebXML Messaging 2.0 MSH endpoint: POST messages here\n")
            )
            return
        if method != "POST":
            await _respond(send, HttpReply(405, "text/plain", b"POST ebXML messages here\n"), (b"allow", b"POST"))
            return
        repeated = repeated_field(scope["headers"])
        if repeated is not None:
            # RFC 9110 §5.3: neither is a list, so two of them leave the message's meaning to chance.
            text = f"more than one {repeated} header field; send it once (RFC 9110 §5.3)\n"
            await _respond(send, HttpReply(400, "text/plain", text.encode()))
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await _respond(send, _too_large(self.max_body_bytes))
            return
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY) as spool:
            size = 0
            more = True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return  # the client gave up: nothing was processed, it will resend
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_body_bytes:
                    await _respond(send, _too_large(self.max_body_bytes))
                    return
                spool.write(chunk)
                more = message.get("more_body", False)
            issue = soap_action_issue(headers.get("soapaction"))
            if issue is not None:
                self.counters["no-soapaction"] += 1
                log.info("request without SOAPAction refused: %s", issue.description)
                # RFC 9110 §15.5.1: the request is malformed for its binding, not a SOAP processing error
                # (SOAP 1.1 §6.2's 500); the SOAP Fault says why to any SOAP sender.
                await _respond(send, HttpReply(400, SOAP_CONTENT_TYPE, serialise_envelope(soap_fault(issue))))
                return
            spool.seek(0)
            try:
                reply = await self.handler.handle_http(
                    spool,  # type: ignore[arg-type]
                    headers.get("content-type"),
                    size=size,
                    peer_certificate=client_certificate(scope),
                )
            except Exception as exc:  # never a bare 500: SOAP 1.1 §6.2 wants a Fault with it
                log.exception("the endpoint failed on a request")
                reply = server_fault(f"the receiving MSH failed on the request: {type(exc).__name__}")
        await _respond(send, reply)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.handler.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.handler.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return


# The header fields the endpoint reads that may come once only (RFC 9110 §8.3 Content-Type is one media type,
# SOAP 1.1 §6.1.1 SOAPAction one URI). The door (msh.transport.server) refuses them too, with Host and the
# body-length fields; this keeps the rule for the endpoint served by any other ASGI server.
_SINGLE_FIELDS = (b"content-type", b"soapaction")


def repeated_field(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The name of the first field of ``_SINGLE_FIELDS`` that ``headers`` (ASGI: name, value) carry twice."""
    seen: set[bytes] = set()
    for name, _value in headers:
        lowered = name.lower()
        if lowered in _SINGLE_FIELDS:
            if lowered in seen:
                return lowered.decode("latin-1")
            seen.add(lowered)
    return None


def client_certificate(scope: Scope) -> bytes | None:
    """The TLS client certificate (DER) of the connection, from the ASGI TLS extension's
    ``client_cert_chain`` (PEM, the client's own certificate first); None over plain HTTP or without one."""
    tls = scope.get("extensions", {}).get("tls")
    chain = tls.get("client_cert_chain") if isinstance(tls, dict) else None
    if not chain:
        return None
    return _der(chain[0])


@functools.lru_cache(maxsize=64)
def _der(pem: str) -> bytes:
    """The DER bytes of a PEM certificate: each partner presents the same one on every request, so each is
    converted once (and the same bytes object, whose hash Python keeps, goes to the certificate checks)."""
    return ssl.PEM_cert_to_DER_cert(pem)


def _too_large(limit: int) -> HttpReply:
    return HttpReply(413, "text/plain", f"message larger than server.max_body_bytes ({limit} bytes)\n".encode())


async def _respond(send: Send, reply: HttpReply, *extra: tuple[bytes, bytes]) -> None:
    headers = [(b"content-length", str(len(reply.body)).encode())]
    if reply.content_type is not None:
        headers.append((b"content-type", reply.content_type.encode("latin-1")))
    headers += list(extra)
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})
