"""One transport per URL scheme (docs/transports.md): the agreement's endpoint decides the binding.

An agreement's TransportReceiver Endpoint (CPP/A 2.0 §8.4.29) is a URI; its scheme says how the message
travels: ``http``/``https`` (ebMS2 Appendix B.2), ``mailto`` (ebMS2 Appendix B.3, SMTP) or ``amqp``/``amqps``
(a queuing transport on an AMQP 1.0 broker). :class:`SchemeTransport` is the MSH's one
:class:`~msh.transport.port.Transport`: it hands each request to the transport of its URL's scheme, and a
scheme with no transport configured is a :class:`~msh.transport.port.TransportFailure` that names the
settings to give (the request never left).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from msh.transport.port import Request, Response, Transport, TransportFailure

__all__ = ["SchemeTransport", "scheme_of"]


def scheme_of(url: str) -> str:
    """The lower-cased scheme of ``url`` (``"mailto"`` for ``mailto:b@example.com``); "" without one."""
    head, colon, _ = url.partition(":")
    return head.strip().lower() if colon else ""


class SchemeTransport:
    """:class:`~msh.transport.port.Transport` that sends each request with the transport of its URL's scheme.

    ``transports`` maps a scheme (lower case, e.g. ``"https"``) to its transport; ``missing`` maps a scheme
    that has none to the sentence telling what to configure (e.g. ``"mailto": "set [smtp] host ..."``)."""

    def __init__(self, transports: Mapping[str, Transport], *, missing: Mapping[str, str] | None = None) -> None:
        self.transports = MappingProxyType(dict(transports))
        self._missing = dict(missing or {})

    def for_url(self, url: str) -> Transport:
        """The transport for ``url``; :class:`TransportFailure` (not transmitted) when there is none."""
        scheme = scheme_of(url)
        transport = self.transports.get(scheme)
        if transport is not None:
            return transport
        hint = self._missing.get(scheme)
        if hint is not None:
            raise TransportFailure(f"cannot send to {url}: {hint}", transmitted=False)
        known = ", ".join(sorted(self.transports)) or "none"
        raise TransportFailure(
            f"cannot send to {url}: no transport for the scheme {scheme or '(none)'!r} (this MSH sends to {known})",
            transmitted=False,
        )

    async def send(self, request: Request) -> Response:
        """Send ``request`` with the transport of its URL's scheme."""
        return await self.for_url(request.url).send(request)

    async def close(self) -> None:
        """Close every transport once (one may serve several schemes)."""
        seen: set[int] = set()
        for transport in self.transports.values():
            if id(transport) not in seen:
                seen.add(id(transport))
                await transport.close()
