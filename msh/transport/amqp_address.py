"""Where an ``amqp:`` endpoint URL points (docs/transports/amqp.md): a broker and a node address on it.

The form is ``amqp://HOST[:PORT]/ADDRESS`` (``amqps://`` over TLS; ports 5672 and 5671 by default). The
ADDRESS is the broker's node address (AMQP 1.0 §3.5.3 target ``address``), written so that both families of
brokers can be named:

* RabbitMQ 3.x names its nodes with a leading slash (``/queue/NAME``, ``/amq/queue/NAME``,
  ``/exchange/X/KEY``, ``/topic/KEY``; RabbitMQ 4 also ``/queues/NAME``, ``/exchanges/X/KEY``): a path that
  begins with one of these words keeps its slash, so ``amqp://mq.example/queue/ebms-b`` is ``/queue/ebms-b``.
* Qpid, ActiveMQ Artemis and Azure Service Bus name a queue plainly: any other path loses its one leading
  slash, so ``amqp://mq.example/ebms-b`` is ``ebms-b``.

An address with a leading slash of another form is written with two (``amqp://h//other/x`` is
``/other/x``); percent-escapes are decoded after the rule, so ``amqp://h/queue%2Fx`` is the plain name
``queue/x``. No credentials, query or fragment: a broker's user name and password come from the settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote, urlsplit

__all__ = ["DEFAULT_PORTS", "SLASHED_PREFIXES", "AmqpEndpoint", "parse_endpoint", "shown_url"]

DEFAULT_PORTS: Final = {"amqp": 5672, "amqps": 5671}
"""The IANA ports of AMQP and of AMQP over TLS."""

SLASHED_PREFIXES: Final = ("queue/", "amq/queue/", "exchange/", "topic/", "queues/", "exchanges/")
"""RabbitMQ's address forms, which keep their leading slash."""


@dataclass(frozen=True, slots=True)
class AmqpEndpoint:
    """A broker (``tls``, ``host``, ``port``) and a node address on it."""

    tls: bool
    host: str
    port: int
    address: str

    @property
    def broker(self) -> str:
        """The broker's URL without an address, e.g. ``amqp://127.0.0.1:5672`` (what a connection opens)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'amqps' if self.tls else 'amqp'}://{host}:{self.port}"

    @property
    def url(self) -> str:
        """The endpoint URL that names this address on this broker (the inverse of :func:`parse_endpoint`)."""
        address = self.address
        if address.startswith("/"):
            tail = address[1:]
            path = tail if tail.startswith(SLASHED_PREFIXES) else address
        else:
            path = address.replace("%", "%25")
            if path.startswith(SLASHED_PREFIXES):
                path = path.replace("/", "%2F", 1)
        return f"{self.broker}/{path}"

    def at(self, address: str) -> AmqpEndpoint:
        """Another address on the same broker."""
        return AmqpEndpoint(self.tls, self.host, self.port, address)


def shown_url(url: str) -> str:
    """``url`` without the password it may carry (for messages)."""
    head, at, tail = url.rpartition("@")
    if not at or "://" not in head:
        return url
    scheme, _, user = head.partition("://")
    return f"{scheme}://{user.partition(':')[0]}:***@{tail}"


def parse_endpoint(url: str) -> AmqpEndpoint:
    """The broker and address ``url`` names; :class:`ValueError` with a sentence saying what is wrong."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{shown_url(url)!r} is not an amqp URL ({exc}); write amqp://HOST[:PORT]/ADDRESS") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ValueError(f"{shown_url(url)!r} is not an amqp: or amqps: URL; write amqp://HOST[:PORT]/ADDRESS")
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"the URL {scheme}://{parts.hostname or ''}/… carries credentials; take them out of the URL and set "
            "amqp.username and amqp.password (the password as env:VARIABLE or file:PATH)"
        )
    if not parts.hostname:
        raise ValueError(f"{url!r} names no broker host; write amqp://HOST[:PORT]/ADDRESS")
    if parts.query or parts.fragment:
        raise ValueError(f"{url!r} has a query or fragment, which an amqp URL does not take; write the address only")
    raw = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not raw:
        raise ValueError(f"{url!r} names no address on the broker; write amqp://HOST[:PORT]/ADDRESS, e.g. /queue/NAME")
    # RabbitMQ's forms keep their slash; any other path is the plain name after the URL's slash.
    address = "/" + unquote(raw) if raw.startswith(SLASHED_PREFIXES) else unquote(raw)
    return AmqpEndpoint(scheme == "amqps", parts.hostname, port or DEFAULT_PORTS[scheme], address)
