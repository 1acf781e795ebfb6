"""The queuing transport against a real AMQP 1.0 broker (RabbitMQ with its AMQP 1.0 plugin on 127.0.0.1:5672,
or the broker MSH_TEST_AMQP_URL names, e.g. ``amqp://user:password@host:5672``): two MSHs exchange ebXML
messages through their queues, with the ebMS reliable-messaging protocol (ebMS2 §6) running over the
broker as over HTTP. Each test uses queues of its own (deleted afterwards where rabbitmqctl is at hand).

Skipped, with the reason, when no AMQP 1.0 broker answers. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import pytest
from proton import Message
from proton.utils import BlockingConnection

from cpa.model import CollaborationProtocolAgreement, DeliveryChannel, PartyId
from msh.engine import OutboundStatus
from msh.errors import ErrorCode
from msh.runtime.amqp_receiver import REFUSED, AmqpReceiver
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import AgreementSettings, IdentitySettings, ServerSettings, Settings, StoreSettings
from msh.runtime.config.amqp import AmqpSettings
from msh.runtime.msh import Msh
from msh.runtime.transports import amqp_access
from msh.store.api import InboxState
from msh.transport.amqp import AmqpTransport
from msh.transport.amqp_thread import BrokerAccess, DurableTerminus, Outcome, Settlement
from msh.transport.port import HttpReply, Request, TransportFailure
from tests.support.cpa_factory import A_ID, B_ID, SERVICE, channel, make_cpa

DEMO_CPA = Path(__file__).resolve().parents[2] / "samples" / "cpas" / "demo-a-b.xml"
_BROKER = urlsplit(os.environ.get("MSH_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672"))
HOST, PORT = _BROKER.hostname or "127.0.0.1", _BROKER.port or 5672
USER, PASSWORD = _BROKER.username or "", _BROKER.password or ""
PREFIX = os.environ.get("MSH_TEST_AMQP_PREFIX", "queue/")  # RabbitMQ 3.x: /queue/NAME; others: NAME ("")
LIMIT = 30.0  # seconds any one wait may take


def _broker_answers() -> str | None:
    """None when an AMQP 1.0 broker takes a connection at HOST:PORT, else why not."""
    try:
        connection = BlockingConnection(
            f"amqp://{HOST}:{PORT}", timeout=5, user=USER or None, password=PASSWORD or None, allowed_mechs=None
        )
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    connection.close()
    return None


@pytest.fixture(scope="module")
def broker() -> None:
    problem = _broker_answers()
    if problem is not None:
        pytest.skip(
            f"no AMQP 1.0 broker answers on {HOST}:{PORT} ({problem}); start RabbitMQ with the rabbitmq_amqp1_0 "
            "plugin (scripts/test enables it) or set MSH_TEST_AMQP_URL"
        )


@pytest.fixture
def queues(broker: None) -> Iterator[Callable[[str], str]]:
    """Names queues unique to the test; deletes them afterwards (RabbitMQ, where rabbitmqctl is at hand)."""
    made: list[str] = []
    run = uuid.uuid4().hex[:10]

    def name(role: str) -> str:
        made.append(f"msh-test-{run}-{role}")
        return made[-1]

    yield name
    if shutil.which("rabbitmqctl") and HOST in ("127.0.0.1", "localhost") and os.geteuid() == 0:
        for queue in made:
            subprocess.run(["rabbitmqctl", "-q", "delete_queue", queue], capture_output=True, timeout=60, check=False)


def url(queue: str, port: int = PORT) -> str:
    return f"amqp://{HOST}:{port}/{PREFIX}{queue}"


def amqp_channel(prefix: str, endpoint: str, **options: Any) -> DeliveryChannel:
    """A delivery channel whose TransportReceiver Endpoint is ``endpoint`` with TransportProtocol AMQP 1.0."""
    made = channel(prefix, endpoint=endpoint, **options)
    transport = made.transport
    assert transport.sender is not None and transport.receiver is not None
    amqp = replace(
        transport,
        sender=replace(transport.sender, protocol="AMQP", protocol_version="1.0"),
        receiver=replace(transport.receiver, protocol="AMQP", protocol_version="1.0"),
    )
    return replace(made, transport=amqp)


def agreement(url_a: str, url_b: str, *, cpaid: str = "cpa-amqp") -> CollaborationProtocolAgreement:
    best_effort: dict[str, Any] = {"retries": None}
    return make_cpa(
        cpaid=cpaid,
        a_channel=amqp_channel("A", url_a),
        b_channel=amqp_channel("B", url_b),
        a_msh=amqp_channel("A", url_a, channel_id="A_msh", **best_effort),
        b_msh=amqp_channel("B", url_b, channel_id="B_msh", **best_effort),
    )


def settings(party: PartyId, own_url: str, password_file: Path, *, timeout: float = 10.0) -> Settings:
    return Settings(
        IdentitySettings(party.value, party_id_type=party.type),
        AgreementSettings((DEMO_CPA,)),  # in the settings only; the test hands the agreements in
        StoreSettings("memory:"),
        ServerSettings(tls=False),
        amqp=AmqpSettings(
            enabled=True,
            url=own_url,
            username=USER,
            password=f"file:{password_file}" if PASSWORD else "",
            timeout=timedelta(seconds=timeout),
            credit=4,
        ),
    )


def order(n: int = 1, *, time_to_live: datetime | None = None) -> Submission:
    return Submission(
        (B_ID.value, B_ID.type),
        SERVICE,
        "NewOrder",
        (Payload(f"<order n='{n}'/>".encode(), "application/xml"),),
        time_to_live=time_to_live,
    )


async def until(check: Callable[[], bool], what: str) -> None:
    """Wait until ``check()`` holds; fail naming ``what`` after LIMIT seconds."""
    for _ in range(int(LIMIT / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"not within {LIMIT:g} s: {what}")


def status(msh: Msh, message_id: str) -> OutboundStatus | None:
    stored = msh.status(message_id)
    return stored.state.status if stored is not None else None


def inbox_count(msh: Msh, message_id: str) -> int:
    return sum(1 for e in msh.inbox(None, limit=1000) if e.message_id == message_id)


@dataclass
class Party:
    msh: Msh
    settings: Settings
    receiver: AmqpReceiver | None = None

    async def receive(self, handler: Any = None) -> AmqpReceiver:
        """Start a receiver on this party's queue (into ``handler``, default its MSH) and wait until attached."""
        self.receiver = AmqpReceiver(self.settings, handler or self.msh, self.msh.transport)
        await self.receiver.start()
        await asyncio.wait_for(self.receiver.attached.wait(), LIMIT)
        return self.receiver


@contextlib.asynccontextmanager
async def pair(
    tmp_path: Path, url_a: str, url_b: str, *, b_cpaid: str = "cpa-amqp", timeout: float = 10.0
) -> AsyncIterator[tuple[Party, Party]]:
    """MSH A and MSH B on memory stores, their agreements' endpoints ``url_a`` and ``url_b``; stopped after."""
    password_file = tmp_path / "amqp-password"
    password_file.write_text(PASSWORD + "\n", encoding="utf-8")
    s_a = settings(A_ID, url_a, password_file, timeout=timeout)
    s_b = settings(B_ID, url_b, password_file, timeout=timeout)
    a = Party(Msh(s_a, agreements=[agreement(url_a, url_b)]), s_a)
    b = Party(Msh(s_b, agreements=[agreement(url_a, url_b, cpaid=b_cpaid)]), s_b)
    await a.msh.start()
    await b.msh.start()
    try:
        yield a, b
    finally:
        for party in (a, b):
            if party.receiver is not None:
                await party.receiver.stop()
            await party.msh.stop()
            party.msh.close()


def take(queue_url: str, *, timeout: float = 5.0) -> Message | None:
    """One message taken (and accepted) from ``queue_url`` with a plain client; None when none came."""
    address = url_address(queue_url)
    connection = BlockingConnection(
        f"amqp://{HOST}:{PORT}", timeout=timeout, user=USER or None, password=PASSWORD or None
    )
    try:
        receiver = connection.create_receiver(address, credit=1, options=DurableTerminus())  # as the MSH declares it
        try:
            message = receiver.receive(timeout=timeout)
        except Exception:
            return None
        receiver.accept()
        return message
    finally:
        with contextlib.suppress(Exception):
            connection.close()


def url_address(queue_url: str) -> str:
    from msh.transport.amqp_address import parse_endpoint

    return parse_endpoint(queue_url).address


def settlements_of(receiver: AmqpReceiver) -> list[Settlement]:
    """Records every settlement ``receiver`` makes (the real ones still go to the broker)."""
    seen: list[Settlement] = []
    thread = receiver._thread
    real = thread.settle_message

    def spy(tag: int, settlement: Settlement) -> None:
        seen.append(settlement)
        real(tag, settlement)

    thread.settle_message = spy  # type: ignore[method-assign]
    return seen


# ------------------------------------------------------------------------------------------------ tests


def test_a_message_goes_through_the_broker_delivered_once_and_acknowledged_over_amqp(
    tmp_path: Path, queues: Callable[[str], str]
) -> None:
    # ebMS2 §6.3.1/§6.5.3: B acknowledges the message (asynchronously, to A's endpoint: A's queue); §6.5.2: A
    # marks it delivered on the acknowledgment; §6.4.4: B hands it to its application once.
    url_a, url_b = url(queues("a")), url(queues("b"))

    async def main() -> None:
        async with pair(tmp_path, url_a, url_b) as (a, b):
            receiver_a = await a.receive()
            receiver_b = await b.receive()
            message_id = await a.msh.submit_async(order())
            await until(lambda: status(a.msh, message_id) is OutboundStatus.DELIVERED, "A's message delivered")
            assert inbox_count(b.msh, message_id) == 1
            assert receiver_b.received == 1  # once through B's queue
            assert receiver_a.received >= 1  # the acknowledgment came back through A's queue
            assert [e.message_id for e in b.msh.inbox(InboxState.NEW)] == [message_id]

    asyncio.run(main())


def test_the_messages_timetolive_is_its_amqp_ttl(tmp_path: Path, queues: Callable[[str], str]) -> None:
    # AMQP 1.0 §3.2.1: header durable and ttl (milliseconds); ebMS2 §6.4.5: TimeToLive, after which the
    # message is not to be delivered: the broker gets the same limit. Read from B's queue with a plain client.
    url_a, url_b = url(queues("a")), url(queues("b"))

    async def main() -> Message | None:
        async with pair(tmp_path, url_a, url_b) as (a, _b):
            ttl = datetime.now(UTC) + timedelta(hours=2)  # ebMS2 §6.4.5: after (Retries + 1) x RetryInterval
            message_id = await a.msh.submit_async(order(time_to_live=ttl))
            taken = await asyncio.to_thread(take, url_b, timeout=LIMIT)
            assert taken is not None, "the message never reached B's queue"
            assert taken.id == message_id
            return taken
        return None

    taken = asyncio.run(main())
    assert taken is not None
    assert taken.durable is True
    assert 7200 - LIMIT < taken.ttl <= 7200  # seconds left of the 2 hours when it was sent
    assert taken.content_type.startswith("multipart/related")
    assert taken.reply_to == url_a  # our answers come back to A's queue
    assert taken.properties == {"SOAPAction": "ebXML"}  # ebMS2 B.2.2
    assert b"<order n='1'/>" in bytes(taken.body)


def test_a_refused_message_is_rejected_with_the_ebms_error_and_the_error_goes_back(
    tmp_path: Path, queues: Callable[[str], str]
) -> None:
    # B knows no agreement "cpa-amqp": ebMS2 §4.2.3.4.1 refuses the message with an ErrorList; on the broker that
    # is AMQP 1.0 §3.4.3 rejected, its error's description the ebMS error; the ErrorList goes to A's reply-to and
    # fails A's message (ebMS2 §6.5.7, severity Error).
    url_a, url_b = url(queues("a")), url(queues("b"))

    async def main() -> None:
        async with pair(tmp_path, url_a, url_b, b_cpaid="cpa-other") as (a, b):
            await a.receive()
            receiver_b = AmqpReceiver(b.settings, b.msh, b.msh.transport)
            seen = settlements_of(receiver_b)
            b.receiver = receiver_b
            await receiver_b.start()
            message_id = await a.msh.submit_async(order())
            await until(lambda: status(a.msh, message_id) is OutboundStatus.FAILED, "A's message failed")
            assert [s.outcome for s in seen] == [Outcome.REJECTED]
            assert seen[0].condition == REFUSED
            codes = {code.value for code in ErrorCode}
            description = seen[0].description or ""
            assert description.startswith("ebMS Error "), description
            assert description.split()[2] in codes, description
            assert "cpa-amqp" in description or "CPA" in description, description
            assert inbox_count(b.msh, message_id) == 0
            errors = a.msh.attempts(message_id)
            assert any(attempt.errors for attempt in errors), errors

    asyncio.run(main())


class HeldPipeline:
    """B's pipeline with its first message held: before the pipeline (``commit_first`` False) or after its
    commit, before the answer (True): as a process that stops or crashes there."""

    def __init__(self, msh: Msh, *, commit_first: bool) -> None:
        self.msh = msh
        self.commit_first = commit_first
        self.entered = asyncio.Event()
        self.calls = 0

    async def handle_http(
        self, body: BinaryIO | bytes, content_type: str | None, *, size: int | None = None, **_: Any
    ) -> HttpReply:
        self.calls += 1
        if self.commit_first:
            await self.msh.handle_http(body, content_type, size=size)
        self.entered.set()
        await asyncio.Event().wait()  # never answers: the stop below ends it
        raise AssertionError("unreachable")


@pytest.mark.parametrize("commit_first", [False, True], ids=["stopped-before-commit", "crashed-after-commit"])
def test_a_message_not_settled_is_delivered_again_and_reaches_the_application_once(
    tmp_path: Path, queues: Callable[[str], str], commit_first: bool
) -> None:
    # AMQP 1.0 §3.4: a delivery never settled stays with the broker, which delivers it again once B attaches
    # anew; ebMS2 §6.4.4: if B had committed it, the copy is a duplicate B does not deliver twice, and B
    # acknowledges it again (§6.5.3), so A's message ends delivered.
    url_a, url_b = url(queues("a")), url(queues("b"))

    async def main() -> None:
        async with pair(tmp_path, url_a, url_b, timeout=2.0) as (a, b):
            await a.receive()
            held = HeldPipeline(b.msh, commit_first=commit_first)
            first = await b.receive(held)
            message_id = await a.msh.submit_async(order())
            await asyncio.wait_for(held.entered.wait(), LIMIT)
            assert inbox_count(b.msh, message_id) == (1 if commit_first else 0)
            await first.stop()  # waits amqp.timeout for the held message, then releases it to the broker
            b.receiver = None
            for task in list(first._tasks):
                task.cancel()
            second = await b.receive()  # B again, its pipeline whole
            await until(lambda: second.received >= 1, "the broker delivered the message again")
            await until(lambda: status(a.msh, message_id) is OutboundStatus.DELIVERED, "A's message delivered")
            assert inbox_count(b.msh, message_id) == 1
            assert held.calls == 1

    asyncio.run(main())


class Cuttable:
    """A TCP relay to the broker whose connections the test cuts (as a broker restart or a network fault)."""

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(HOST, PORT)
        self.writers += [writer, up_writer]

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    def cut(self) -> int:
        """Reset every connection relayed so far; how many there were."""
        cut = len(self.writers)
        for writer in self.writers:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            writer.transport.abort()
        self.writers.clear()
        return cut

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()


def test_after_the_connections_drop_sending_and_receiving_resume(tmp_path: Path, queues: Callable[[str], str]) -> None:
    # A dropped connection loses nothing the broker holds: the receivers attach again (with a pause that
    # grows), the next message opens a new sending connection, and both messages end delivered once.
    qa, qb = queues("a"), queues("b")

    async def main() -> None:
        relay = Cuttable()
        port = await relay.start()
        url_a, url_b = url(qa, port), url(qb, port)
        try:
            async with pair(tmp_path, url_a, url_b) as (a, b):
                receiver_a = await a.receive()
                receiver_b = await b.receive()
                first = await a.msh.submit_async(order(1))
                await until(lambda: status(a.msh, first) is OutboundStatus.DELIVERED, "the first message delivered")
                assert relay.cut() >= 3  # A's and B's receivers, A's and B's senders
                await until(lambda: not receiver_b.attached.is_set(), "B's receiver noticed the cut")
                await asyncio.wait_for(receiver_a.attached.wait(), LIMIT)
                await asyncio.wait_for(receiver_b.attached.wait(), LIMIT)
                second = await a.msh.submit_async(order(2))
                await until(lambda: status(a.msh, second) is OutboundStatus.DELIVERED, "the second message delivered")
                assert (inbox_count(b.msh, first), inbox_count(b.msh, second)) == (1, 1)
        finally:
            await relay.close()

    asyncio.run(main())


def test_sending_to_a_broker_that_is_not_there_never_transmitted(broker: None) -> None:
    # Nothing listens on the port: the connection is refused, the message certainly never left (ebMS2 §6.5.7
    # tells a transmission that may have arrived from one that did not).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    transport = AmqpTransport(BrokerAccess(USER, PASSWORD), timeout=10.0)

    async def main() -> TransportFailure:
        try:
            with pytest.raises(TransportFailure) as caught:
                await transport.send(Request(f"amqp://127.0.0.1:{free}/queue/nowhere", "text/xml", b"<x/>"))
            return caught.value
        finally:
            await transport.close()

    failure = asyncio.run(main())
    assert failure.transmitted is False
    assert f"cannot connect to amqp://127.0.0.1:{free}" in failure.reason


def test_the_settings_give_the_transport_its_credentials(tmp_path: Path) -> None:
    # The password comes from a file:/env: reference, read at start (never in the agreement's URL).
    (tmp_path / "pw").write_text("s3cret\n", encoding="utf-8")
    made = replace(settings(A_ID, url("x"), tmp_path / "pw"), amqp=AmqpSettings(username="msh-a", password="file:pw"))
    made = replace(made, source=str(tmp_path / "msh.toml"))
    access = amqp_access(made)
    assert (access.username, access.password) == ("msh-a", "s3cret")
    assert "s3cret" not in repr(access)
