"""ReliableMessagingMethod Transport on the test network: a queuing transport makes the message reliable.

The *Reliable Messaging* draft the ebMS 2.0 chapters grew from, "Reliable Messaging Method": ``Transport``,
"a commercial software product is used for reliable delivery of the message"; its section "ebXML Reliable
Messaging using Commercial Software Products / Queuing Transports", rule 1: "Implementations should use the
facilities of the Queuing Transport to determine if the message was delivered". ebMS2 B.4: on a
communications error "the appropriate transport recovery handler will execute a recovery sequence. Only if
the error is unrecoverable, does Reliable Messaging recovery take place".

A sends NewOrder to B at an ``amqp:`` endpoint (the in-memory transport stands for the broker: a delivered
request is the broker's accepted settlement, an endpoint down its refusal); A's settings name A's business
channel ``Transport``. RetryInterval 10 minutes, Retries 3, PersistDuration 1 hour. Memory stores, one fake
clock, no sleep.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cpa.model import CollaborationProtocolAgreement, PerMessage
from msh.engine import Evidence, OutboundStatus, ReliableMessagingMethod
from msh.errors import ConfigurationError, Severity
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.msh import Msh
from msh.testing.network import TestNetwork
from msh.transport.port import Request
from tests.support.cpa_factory import A_ID, B_ID, SERVICE, channel, make_cpa

CONFIG = Path(__file__).resolve().parents[3] / "samples" / "config"
A_URL = "amqp://broker.example:5672/a-inbound"
B_URL = "amqp://broker.example:5672/b-inbound"
B_PARTY = (B_ID.value, B_ID.type)
QUEUED = ["A_channel=Transport"]


def agreement(**options: Any) -> CollaborationProtocolAgreement:
    """A and B, each taking messages at a queue of the broker; ``options`` go to both business channels."""
    return make_cpa(
        a_channel=channel("A", endpoint=A_URL, **options),
        b_channel=channel("B", endpoint=B_URL, **options),
        retry_interval=timedelta(minutes=10),
    )


def settings(party: str, domain: str, methods: list[str] | None = None) -> Settings:
    data: dict[str, Any] = {
        "identity": {"party_id": party, "party_id_type": "urn:duns", "message_id_domain": domain},
        "agreements": {"paths": [str(CONFIG.parent / "cpas" / "demo-a-b.xml")]},  # the network is given its own
        "store": {"url": "memory:"},
        "server": {"tls": False},
    }
    if methods is not None:
        data["sending"] = {"reliable_messaging_method": methods}
    return settings_from_mapping(data, base_dir=Path.cwd(), source=f"<{domain}>", env={})


def run(scenario: Callable[[TestNetwork, Msh, Msh], Awaitable[None]], **options: Any) -> None:
    async def main() -> None:
        cpa = agreement(**options)
        net = TestNetwork(seed=3)
        a = net.add("a", settings(A_ID.value, "a.example", QUEUED), agreements=(cpa,))
        b = net.add("b", settings(B_ID.value, "b.example"), agreements=(cpa,))
        await net.start()
        try:
            await scenario(net, a, b)
        finally:
            await net.close()

    asyncio.run(main())


def sent_to(net: TestNetwork, url: str) -> list[Request]:
    """The requests sent to ``url`` from now on."""
    seen: list[Request] = []
    net.network.observers.append(lambda request: seen.append(request) if request.url == url else None)
    return seen


def order() -> Submission:
    return Submission(B_PARTY, SERVICE, "NewOrder", (Payload(b"<order/>", "application/xml"),))


def final(msh: Msh, message_id: str) -> Callable[[], bool]:
    return lambda: (m := msh.status(message_id)) is not None and m.state.status.final


def test_the_endpoints_are_queues_and_the_channel_is_transport() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        # The business channels take messages at queues; the MSH channels (signals) stay on HTTP.
        assert B_URL in net.nodes["b"].urls and A_URL in net.nodes["a"].urls
        message_id = await a.submit_async(order())
        kept = a.status(message_id)
        assert kept is not None and kept.endpoint_url == B_URL
        assert kept.state.reliability.method is ReliableMessagingMethod.TRANSPORT

    run(scenario)


def test_accepted_then_acknowledged_is_delivered_after_exactly_one_transmission() -> None:
    # Queuing Transports rule 1: the transport carries it; the To party's acknowledgment delivers it (ebMS2 §6.5.2).
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        to_b = sent_to(net, B_URL)
        message_id = await a.submit_async(order())
        await net.run_until(final(a, message_id), limit=timedelta(hours=2))
        done = a.status(message_id)
        assert done is not None
        assert (done.state.status, done.state.evidence) == (OutboundStatus.DELIVERED, Evidence.TO_PARTY_ACKNOWLEDGMENT)
        assert done.state.attempts == 1 and len(to_b) == 1
        await net.advance(timedelta(hours=2))  # nothing is resent afterwards either
        assert len(to_b) == 1

    run(scenario)


def test_accepted_without_an_acknowledgment_requested_is_sent() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        to_b = sent_to(net, B_URL)
        message_id = await a.submit_async(order())
        await net.run_until(final(a, message_id), limit=timedelta(hours=2))
        done = a.status(message_id)
        assert done is not None and not done.state.reliability.ack_requested
        # The broker accepted it: sent (handed over, no acknowledgment by design), never delivered.
        assert (done.state.status, done.state.evidence) == (OutboundStatus.SENT, Evidence.ACCEPTED_BY_TRANSPORT)
        assert done.state.next_due_at is None and len(to_b) == 1

    run(scenario, ack_requested=PerMessage.NEVER)


def test_refused_hand_offs_are_retried_every_retry_interval_then_fail_with_severity_error() -> None:
    # ebMS2 B.4: the transport's recovery, not the Retries of reliable messaging: the hand-off is tried every
    # RetryInterval until PersistDuration (1 hour) has passed since the first; nothing left: Error (§6.5.7).
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.down.add(B_URL)
        start = net.clock()
        message_id = await a.submit_async(order())
        await net.run_until(final(a, message_id), limit=timedelta(hours=2))
        done = a.status(message_id)
        assert done is not None and done.state.failure is not None
        assert (done.state.status, done.state.evidence) == (OutboundStatus.FAILED, Evidence.PERSIST_DURATION)
        assert done.state.failure.severity is Severity.ERROR and not done.state.transmitted
        # At 0, 10, ... 50 minutes: six hand-offs, more than Retries 3 would allow a resend series.
        assert done.state.attempts == 6 and done.state.reliability.retries == 3
        assert net.clock() - start == timedelta(hours=1)

    run(scenario)


def test_a_broker_back_within_the_deadline_takes_the_retried_hand_off() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.down.add(B_URL)
        to_b = sent_to(net, B_URL)
        message_id = await a.submit_async(order())
        await net.advance(timedelta(minutes=25))  # refused at 0, 10 and 20 minutes
        net.faults.down.discard(B_URL)
        await net.run_until(final(a, message_id), limit=timedelta(hours=2))
        done = a.status(message_id)
        assert done is not None and done.state.status is OutboundStatus.DELIVERED
        assert done.state.attempts == 4 and len(to_b) == 4

    run(scenario)


def test_accepted_but_never_acknowledged_fails_with_severity_warning_at_time_to_live_and_is_never_resent() -> None:
    # Queuing Transports rule 1: what the transport accepted is not resent; the acknowledgment is awaited until
    # the TimeToLive (ebMS2 §3.1.6.4); it was transmitted, so it may have been delivered: Warning (§6.5.7).
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.down.update(net.nodes["a"].urls)  # B's acknowledgment never reaches A
        to_b = sent_to(net, B_URL)
        start = net.clock()
        submission = order()
        message_id = await a.submit_async(
            Submission(
                submission.to_party,
                submission.service,
                submission.action,
                submission.payloads,
                time_to_live=start + timedelta(minutes=45),
            )
        )
        await net.run_until(final(a, message_id), limit=timedelta(hours=2))
        done = a.status(message_id)
        assert done is not None and done.state.failure is not None
        assert (done.state.status, done.state.evidence) == (OutboundStatus.FAILED, Evidence.TIME_TO_LIVE)
        assert (
            done.state.failure.severity is Severity.WARNING
            and "may have been delivered" in done.state.failure.description
        )
        assert done.state.attempts == 1 and len(to_b) == 1
        assert net.clock() - start == timedelta(minutes=45)

    run(scenario)


def test_a_channel_that_is_not_ours_or_not_a_queue_is_refused_at_the_start() -> None:
    cpa = agreement()
    http = make_cpa()  # B's endpoint is http://b.example:8443/msh
    with pytest.raises(ConfigurationError, match=r"'Z_channel' is not the channelId of a DeliveryChannel of yours"):
        TestNetwork().add("a", settings(A_ID.value, "a.example", ["Z_channel=Transport"]), agreements=(cpa,))
    with pytest.raises(ConfigurationError, match=r"'B_channel' is not the channelId of a DeliveryChannel of yours"):
        TestNetwork().add("a", settings(A_ID.value, "a.example", ["B_channel=Transport"]), agreements=(cpa,))
    with pytest.raises(ConfigurationError) as not_a_queue:
        TestNetwork().add("a", settings(A_ID.value, "a.example", QUEUED), agreements=(http,))
    assert str(not_a_queue.value) == (
        "sending.reliable_messaging_method: channel 'A_channel' is set to Transport, but in agreement cpa-a-b its "
        f"{SERVICE} NewOrder messages go to http://b.example:8443/msh (channel B_channel), which is not a queuing "
        "transport (an amqp: or amqps: URL); reliability can be left to the transport only where a broker takes the "
        "message: use ebXML for this channel"
    )
    with pytest.raises(ConfigurationError, match="channel 'A_msh' sends no message of yours"):
        TestNetwork().add("a", settings(A_ID.value, "a.example", ["A_msh=ebXML"]), agreements=(cpa,))
    # ebXML needs no queue: the default, said out loud.
    a = TestNetwork().add("a", settings(A_ID.value, "a.example", ["A_channel=ebXML"]), agreements=(http,))
    a.close()


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        (["A_channel"], "'A_channel' is not CHANNEL_ID=METHOD with METHOD one of ebXML, Transport"),
        (["A_channel=transport"], "'A_channel=transport' is not CHANNEL_ID=METHOD"),
        (["=Transport"], "'=Transport' is not CHANNEL_ID=METHOD"),
        (["A_channel=Transport", "A_channel=ebXML"], "channel 'A_channel' is named twice"),
    ],
)
def test_a_malformed_entry_is_refused_when_the_settings_are_read(entries: list[str], problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        settings(A_ID.value, "a.example", entries)
