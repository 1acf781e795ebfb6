"""The broker connections of one AMQP client, on a thread of their own (docs/transports/amqp.md).

Proton is not thread-safe: a :class:`BrokerThread` runs one proton ``Container`` on one thread, and every
proton object is touched only there. The event loop hands it work through an ``EventInjector`` (its
:meth:`BrokerThread.call`), and gets each result back through ``call_soon_threadsafe`` on a future: the loop
never blocks on the broker.

Sending (:meth:`BrokerThread.send`): one connection per broker, opened on the first message and opened
again on the next message after it dropped; one sender link per address, its target durable (RabbitMQ then
declares a ``/queue/NAME`` durable). A message's outcome is its delivery state when the broker settles it
(AMQP 1.0 §3.4): accepted, rejected (with its error), released or modified; no settlement within the time
given, or a connection lost first, is a :class:`~msh.transport.port.TransportFailure`.

Receiving (:meth:`BrokerThread.consume`): one connection and one receiver link with at most ``credit``
messages unsettled; each message goes to the loop, which settles it later (:meth:`BrokerThread.settle_message`).
A dropped connection is opened again after a pause that doubles up to 30 s; the broker keeps the messages
that were not settled and delivers them again.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Final

from proton import Condition, Delivery, Disposition, Message, SSLDomain, Terminus
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, Container, EventInjector, LinkOption

from msh.threadnames import name_os_thread
from msh.transport.amqp_address import AmqpEndpoint
from msh.transport.port import TransportFailure

__all__ = ["BrokerAccess", "BrokerThread", "DurableTerminus", "Inbound", "Outcome", "Settlement"]

log = logging.getLogger("msh.transport.amqp")

HEARTBEAT: Final = 30.0
"""The idle time-out asked of each broker connection, in seconds (AMQP 1.0 §2.4.5): the broker's frames keep
it alive, and a connection silent for twice as long is dropped as lost."""

MAX_PAUSE: Final = 30.0
"""The longest pause before a dropped receiving connection is opened again, in seconds."""


class Outcome(Enum):
    """The delivery states that end a delivery (AMQP 1.0 §3.4)."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    RELEASED = "released"
    MODIFIED = "modified"


@dataclass(frozen=True, slots=True)
class Settlement:
    """How the broker settled a message: its outcome and, for a rejection, the error (AMQP 1.0 §3.4.2)."""

    outcome: Outcome
    condition: str | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class BrokerAccess:
    """How to log in to a broker: SASL PLAIN with ``username`` and ``password`` (ANONYMOUS without a user
    name), or the ``mechanisms`` given (space separated); over TLS the CA file ``trusted`` (None: the
    system's) and the broker's host name checked."""

    username: str = ""
    password: str = field(default="", repr=False)
    mechanisms: str = ""
    trusted: Path | None = None


@dataclass(frozen=True, slots=True)
class Inbound:
    """One message taken from the broker and not yet settled (``tag`` names it to
    :meth:`BrokerThread.settle_message`)."""

    tag: int
    body: bytes | None
    content_type: str | None
    reply_to: str | None
    message_id: str | None
    delivery_count: int


class DurableTerminus(LinkOption):
    """The link's terminus is durable (AMQP 1.0 §3.5.5): RabbitMQ declares a ``/queue/NAME`` durable."""

    def apply(self, link: Any) -> None:
        (link.target if link.is_sender else link.source).durability = Terminus.DELIVERIES


@dataclass(eq=False)
class _Send:
    message: Message
    address: str
    resolve: Callable[[Settlement | TransportFailure], None]
    what: str
    transmitted: bool = False
    timer: Any = None


@dataclass(eq=False)
class _Broker:
    endpoint: AmqpEndpoint
    connection: Any
    opened: bool = False
    senders: dict[str, Any] = field(default_factory=dict)
    attached: set[str] = field(default_factory=set)
    """The addresses whose sender link the broker attached (a message on it may have been taken)."""
    waiting: list[_Send] = field(default_factory=list)
    in_flight: dict[bytes, _Send] = field(default_factory=dict)


@dataclass(eq=False)
class _Consumer:
    endpoint: AmqpEndpoint
    credit: int
    on_message: Callable[[Inbound], object]
    on_state: Callable[[str | None], object]
    connection: Any = None
    receiver: Any = None
    deliveries: dict[int, Any] = field(default_factory=dict)
    pause: float = 1.0
    stopped: bool = False


class _Call:
    """A scheduled call on the container's thread (a proton timer handler)."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn

    def on_timer_task(self, _event: Any) -> None:
        self.fn()


class BrokerThread(MessagingHandler):
    """One proton container on its own thread (see the module docs); ``name`` names the thread."""

    def __init__(self, access: BrokerAccess, *, name: str = "msh-amqp") -> None:
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.access = access
        self.name = name
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._injector: Any = None
        self._container: Any = None
        self._thread: threading.Thread | None = None
        self._brokers: dict[AmqpEndpoint, _Broker] = {}
        self._tags = itertools.count(1)
        self._consumer: _Consumer | None = None
        self._closed = False
        self._closing: list[Any] | None = None

    # -- from the event loop

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is not None:
            return
        self._injector = EventInjector()
        self._container = Container(self)
        self._container.container_id = self.name
        self._container.selectable(self._injector)
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the container's thread."""
        if self._closed:
            raise TransportFailure("the AMQP client is closed", transmitted=False)
        self.start()
        self._calls.put(fn)
        self._injector.trigger(ApplicationEvent("msh_calls"))

    async def send(self, endpoint: AmqpEndpoint, message: Message, *, timeout: float, what: str) -> Settlement:
        """Send ``message`` to ``endpoint`` and return how the broker settled it; :class:`TransportFailure`
        when it did not within ``timeout`` seconds, or the connection failed (``what`` names the message in
        the reasons)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Settlement] = loop.create_future()

        def resolve(result: Settlement | TransportFailure) -> None:
            loop.call_soon_threadsafe(_settle_future, future, result)

        self.call(lambda: self._send(endpoint, _Send(message, endpoint.address, resolve, what), timeout))
        # The thread answers within ``timeout``; the margin covers a thread that died.
        try:
            return await asyncio.wait_for(future, timeout + 10)
        except TimeoutError:
            raise TransportFailure(f"{what}: the AMQP client thread did not answer", transmitted=True) from None

    def consume(
        self,
        endpoint: AmqpEndpoint,
        *,
        credit: int,
        on_message: Callable[[Inbound], object],
        on_state: Callable[[str | None], object],
    ) -> None:
        """Take messages from ``endpoint`` (at most ``credit`` unsettled), each handed to ``on_message`` on the
        thread (the caller passes it to its loop); ``on_state`` hears None once the link is attached and the
        reason each time the connection is lost."""
        consumer = _Consumer(endpoint, credit, on_message, on_state)
        self.call(lambda: self._open_consumer(consumer))

    def settle_message(self, tag: int, settlement: Settlement) -> None:
        """Settle the received message ``tag`` with ``settlement`` (nothing when its connection was lost
        since, or the client stopped: the broker delivers it again)."""
        if self._closed:
            return
        self.call(lambda: self._settle(tag, settlement))

    def stop(self, *, timeout: float = 10.0) -> None:
        """Release the unsettled messages, close every connection and end the thread (blocks up to
        ``timeout`` seconds: call it off the loop)."""
        if self._closed or self._thread is None:
            self._closed = True
            return
        self.call(self._shutdown)
        self._closed = True
        self._thread.join(timeout)

    # -- on the container's thread

    def _run(self) -> None:
        name_os_thread()  # for top -H and /proc (docs/operating.md, "Threads")
        try:
            self._container.run()
        except Exception:
            log.exception("the AMQP client thread %s stopped", self.name)

    def on_msh_calls(self, _event: Any) -> None:
        while True:
            try:
                fn = self._calls.get_nowait()
            except queue.Empty:
                return
            try:
                fn()
            except Exception:
                log.exception("an AMQP client call failed")

    def _connect(self, endpoint: AmqpEndpoint) -> Any:
        access = self.access
        # No automatic reconnection (a failure is reported at once); heartbeats find a silently dead peer.
        options: dict[str, Any] = {"reconnect": False, "heartbeat": HEARTBEAT, "allow_insecure_mechs": not endpoint.tls}
        if access.username:
            options.update(user=access.username, password=access.password)
        mechanisms = access.mechanisms or ("PLAIN" if access.username else "ANONYMOUS")
        options["allowed_mechs"] = mechanisms
        if endpoint.tls:
            domain = SSLDomain(SSLDomain.MODE_CLIENT)
            if access.trusted is not None:
                domain.set_trusted_ca_db(str(access.trusted))
            domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
            options["ssl_domain"] = domain
        return self._container.connect(endpoint.broker, **options)

    def _send(self, endpoint: AmqpEndpoint, send: _Send, timeout: float) -> None:
        broker_key = endpoint.at("")
        broker = self._brokers.get(broker_key)
        if broker is None:
            try:
                connection = self._connect(endpoint)
            except Exception as exc:
                reason = f"{send.what}: cannot connect to {endpoint.broker}: {exc}"
                send.resolve(TransportFailure(reason, transmitted=False))
                return
            broker = _Broker(broker_key, connection)
            self._brokers[broker_key] = broker
        send.timer = self._container.schedule(timeout, _Call(lambda: self._expire(broker, send, timeout)))
        if broker.opened:
            self._transfer(broker, send)
        else:
            broker.waiting.append(send)

    def _transfer(self, broker: _Broker, send: _Send) -> None:
        sender = broker.senders.get(send.address)
        if sender is None:
            sender = self._container.create_sender(broker.connection, send.address, options=DurableTerminus())
            broker.senders[send.address] = sender
        tag = str(next(self._tags))
        delivery = sender.send(send.message, tag=tag)
        send.transmitted = True
        broker.in_flight[bytes(delivery.tag, "ascii") if isinstance(delivery.tag, str) else delivery.tag] = send

    def _expire(self, broker: _Broker, send: _Send, timeout: float) -> None:
        if send in broker.waiting:
            broker.waiting.remove(send)
        elif send in broker.in_flight.values():
            broker.in_flight = {t: s for t, s in broker.in_flight.items() if s is not send}
        else:
            return
        where = f"{broker.endpoint.broker}, address {send.address}"
        if send.transmitted:
            reason = f"{send.what}: {where} did not settle it within {timeout:g} s (it may have arrived)"
        else:
            reason = f"{send.what}: no connection to {where} within {timeout:g} s"
        send.resolve(TransportFailure(reason, transmitted=send.transmitted))

    def _done(self, event: Any) -> tuple[_Broker, _Send] | None:
        tag = event.delivery.tag
        key = bytes(tag, "ascii") if isinstance(tag, str) else bytes(tag)
        for broker in self._brokers.values():
            send = broker.in_flight.pop(key, None)
            if send is not None:
                if send.timer is not None:
                    send.timer.cancel()
                return broker, send
        return None

    def on_accepted(self, event: Any) -> None:
        found = self._done(event)
        if found is not None:
            found[1].resolve(Settlement(Outcome.ACCEPTED))

    def on_rejected(self, event: Any) -> None:
        found = self._done(event)
        if found is not None:
            condition = event.delivery.remote.condition
            found[1].resolve(
                Settlement(
                    Outcome.REJECTED,
                    str(condition.name) if condition is not None else None,
                    str(condition.description) if condition is not None and condition.description else None,
                )
            )

    def on_released(self, event: Any) -> None:
        found = self._done(event)
        if found is not None:
            modified = event.delivery.remote_state == Delivery.MODIFIED
            found[1].resolve(Settlement(Outcome.MODIFIED if modified else Outcome.RELEASED))

    def on_connection_opened(self, event: Any) -> None:
        broker = self._broker_of(event.connection)
        if broker is not None:
            broker.opened = True
            waiting, broker.waiting = broker.waiting, []
            for send in waiting:
                self._transfer(broker, send)

    def on_link_opened(self, event: Any) -> None:
        if event.sender is not None:
            broker = self._broker_of(event.connection)
            if broker is not None:
                broker.attached.add(event.sender.target.address)
            return
        consumer = self._consumer
        if consumer is not None and event.receiver is not None and event.link == consumer.receiver:
            consumer.pause = 1.0
            event.receiver.flow(consumer.credit)
            consumer.on_state(None)

    def on_link_error(self, event: Any) -> None:
        link = event.link
        condition = link.remote_condition
        reason = _condition_text(condition, "the broker refused the link")
        consumer = self._consumer
        if consumer is not None and link == consumer.receiver:
            self._consumer_lost(consumer, f"the broker refused to deliver from {consumer.endpoint.address}: {reason}")
            return
        for broker in self._brokers.values():
            for address, sender in list(broker.senders.items()):
                if sender == link:
                    del broker.senders[address]
                    failed = {t: s for t, s in broker.in_flight.items() if s.address == address}
                    for tag, send in failed.items():
                        del broker.in_flight[tag]
                        if send.timer is not None:
                            send.timer.cancel()
                        send.resolve(
                            TransportFailure(
                                f"{send.what}: {broker.endpoint.broker} refused the address {address}: {reason}",
                                transmitted=False,
                            )
                        )
        link.close()

    def on_transport_error(self, event: Any) -> None:
        self._lost(event.connection, _condition_text(event.transport.condition, "connection lost"))

    def on_connection_error(self, event: Any) -> None:
        self._lost(event.connection, _condition_text(event.connection.remote_condition, "the broker closed it"))
        event.connection.close()

    def on_session_error(self, event: Any) -> None:
        # RabbitMQ ends the session when it refuses an address (e.g. a queue declared otherwise).
        self._lost(event.connection, _condition_text(event.session.remote_condition, "the broker ended the session"))
        event.connection.close()

    def on_connection_closing(self, event: Any) -> None:
        self._lost(event.connection, _condition_text(event.connection.remote_condition, "the broker closed it"))
        event.connection.close()

    def on_disconnected(self, event: Any) -> None:
        transport = event.transport
        self._lost(event.connection, _condition_text(transport.condition if transport else None, "connection lost"))

    def _broker_of(self, connection: Any) -> _Broker | None:
        for broker in self._brokers.values():
            if broker.connection == connection:
                return broker
        return None

    def _lost(self, connection: Any, reason: str) -> None:
        consumer = self._consumer
        if consumer is not None and connection is not None and connection == consumer.connection:
            self._consumer_lost(consumer, f"connection to {consumer.endpoint.broker} lost: {reason}")
            return
        broker = self._broker_of(connection)
        if broker is None:
            return
        del self._brokers[broker.endpoint]
        where = broker.endpoint.broker
        for send in broker.waiting:
            if send.timer is not None:
                send.timer.cancel()
            send.resolve(TransportFailure(f"{send.what}: cannot connect to {where}: {reason}", transmitted=False))
        for send in broker.in_flight.values():
            if send.timer is not None:
                send.timer.cancel()
            if send.address in broker.attached:
                failure = TransportFailure(
                    f"{send.what}: the connection to {where} was lost before the broker settled it ({reason}); "
                    "it may have arrived",
                    transmitted=True,
                )
            else:  # the broker never attached the link: the message cannot have reached the address
                failure = TransportFailure(f"{send.what}: {where} refused {send.address}: {reason}", transmitted=False)
            send.resolve(failure)
        broker.waiting, broker.in_flight = [], {}

    # -- receiving

    def _open_consumer(self, consumer: _Consumer) -> None:
        self._consumer = consumer
        if consumer.stopped:
            return
        try:
            consumer.connection = self._connect(consumer.endpoint)
        except Exception as exc:
            self._consumer_lost(consumer, f"cannot connect to {consumer.endpoint.broker}: {exc}")
            return
        consumer.receiver = self._container.create_receiver(
            consumer.connection, consumer.endpoint.address, options=DurableTerminus()
        )

    def _consumer_lost(self, consumer: _Consumer, reason: str) -> None:
        if consumer.connection is None:
            return
        consumer.deliveries.clear()  # the broker keeps what was not settled and delivers it again
        try:
            consumer.connection.close()
        except Exception:
            log.debug("closing a lost AMQP connection failed", exc_info=True)
        consumer.connection = consumer.receiver = None
        if consumer.stopped:
            return
        consumer.on_state(f"{reason}; connecting again in {consumer.pause:g} s")
        self._container.schedule(consumer.pause, _Call(lambda: self._open_consumer(consumer)))
        consumer.pause = min(consumer.pause * 2, MAX_PAUSE)

    def on_message(self, event: Any) -> None:
        consumer = self._consumer
        if consumer is None or event.receiver != consumer.receiver:
            return
        message = event.message
        tag = next(self._tags)
        consumer.deliveries[tag] = event.delivery
        body = message.body
        data: bytes | None
        if isinstance(body, bytes | bytearray | memoryview):
            data = bytes(body)
        elif isinstance(body, str):
            data = body.encode("utf-8")
        else:
            data = None
        consumer.on_message(
            Inbound(
                tag,
                data,
                str(message.content_type) if message.content_type else None,
                str(message.reply_to) if message.reply_to else None,
                str(message.id) if message.id is not None else None,
                int(message.delivery_count or 0),
            )
        )

    def _settle(self, tag: int, settlement: Settlement) -> None:
        consumer = self._consumer
        if consumer is None:
            return
        delivery = consumer.deliveries.pop(tag, None)
        if delivery is None:
            log.info("message %d was not settled: its connection was lost since (the broker delivers it again)", tag)
            return
        _set_outcome(delivery, settlement)
        delivery.settle()
        if consumer.receiver is not None and not consumer.stopped:
            consumer.receiver.flow(1)

    def _shutdown(self) -> None:
        consumer = self._consumer
        closing = []
        if consumer is not None:
            consumer.stopped = True
            for delivery in consumer.deliveries.values():
                _set_outcome(delivery, Settlement(Outcome.RELEASED))  # §3.4.4: the broker offers it again
                delivery.settle()
            consumer.deliveries.clear()
            if consumer.connection is not None:
                closing.append(consumer.connection)
                consumer.connection.close()
        for broker in list(self._brokers.values()):
            self._lost(broker.connection, "the AMQP client stopped")
            closing.append(broker.connection)
            broker.connection.close()
        self._injector.close()
        # The thread ends once every connection has closed its socket (the broker then knows at once), or
        # after a few seconds whatever the brokers do.
        self._closing = closing
        self._container.schedule(5.0, _Call(self._container.stop))
        self._maybe_end()

    def on_transport_closed(self, event: Any) -> None:
        if self._closing is not None:
            self._closing = [c for c in self._closing if c != event.connection]
            self._maybe_end()

    def _maybe_end(self) -> None:
        if self._closing == []:
            self._container.stop()


def _set_outcome(delivery: Any, settlement: Settlement) -> None:
    """Set ``delivery``'s local state to ``settlement`` (AMQP 1.0 §3.4)."""
    if settlement.outcome is Outcome.REJECTED:
        delivery.local.condition = Condition(settlement.condition or "amqp:internal-error", settlement.description)
        delivery.update(Disposition.REJECTED)
    elif settlement.outcome is Outcome.MODIFIED:
        delivery.local.failed = True  # §3.4.5 delivery-failed: the broker counts it and delivers it again
        delivery.update(Disposition.MODIFIED)
    elif settlement.outcome is Outcome.RELEASED:
        delivery.update(Disposition.RELEASED)
    else:
        delivery.update(Disposition.ACCEPTED)


def _condition_text(condition: Any, default: str) -> str:
    if condition is None:
        return default
    description = f": {condition.description}" if condition.description else ""
    return f"{condition.name}{description}"


def _settle_future(future: asyncio.Future[Settlement], result: Settlement | TransportFailure) -> None:
    if future.done():
        return
    if isinstance(result, TransportFailure):
        future.set_exception(result)
    else:
        future.set_result(result)
