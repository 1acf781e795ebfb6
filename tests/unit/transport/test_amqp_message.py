"""The AMQP message of a transmission and what the broker's settlement means, without a broker
(AMQP 1.0 §3.2.1 header durable/ttl, §3.4 delivery states; ebMS2 §6.4.5 TimeToLive)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from proton import Message

from msh.transport.amqp import ACCEPTED_RESPONSE, AmqpTransport, _response, amqp_message
from msh.transport.amqp_address import parse_endpoint
from msh.transport.amqp_thread import BrokerAccess, Outcome, Settlement
from msh.transport.port import Request, TransportFailure

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
CT = 'multipart/related; type="text/xml"; boundary="b"'


def request(**fields: object) -> Request:
    return Request("amqp://127.0.0.1:1/queue/q", CT, b"package", message_id="m-1@a.example", **fields)  # type: ignore[arg-type]


def test_the_message_carries_the_package_its_type_id_reply_address_and_soapaction() -> None:
    message = amqp_message(request(), b"package", reply_to="amqp://127.0.0.1:5672/queue/ebms-a", ttl=1.5)
    decoded = Message()
    decoded.decode(message.encode())
    assert decoded.body == b"package" and decoded.inferred  # §3.2.6: one data section
    assert decoded.content_type == CT
    assert decoded.durable is True  # §3.2.1 header durable
    assert decoded.ttl == 1.5  # §3.2.1 header ttl (1500 ms on the wire)
    assert decoded.id == "m-1@a.example"
    assert decoded.reply_to == "amqp://127.0.0.1:5672/queue/ebms-a"
    assert decoded.properties == {"SOAPAction": "ebXML"}  # ebMS2 B.2.2


def test_the_ttl_is_the_time_left_until_the_timetolive_rounded_up_to_the_millisecond() -> None:
    transport = AmqpTransport(BrokerAccess(), clock=lambda: NOW)
    assert transport._ttl(request()) is None
    assert transport._ttl(request(time_to_live=NOW + timedelta(minutes=5))) == 300.0
    assert transport._ttl(request(time_to_live=NOW + timedelta(microseconds=1500))) == 0.002


def test_a_message_past_its_timetolive_is_not_sent() -> None:
    # ebMS2 §6.4.5: a message past its TimeToLive is not to be delivered; the broker never sees it.
    transport = AmqpTransport(BrokerAccess(), clock=lambda: NOW)
    with pytest.raises(TransportFailure, match=r"TimeToLive .* has passed") as caught:
        asyncio.run(transport.send(request(time_to_live=NOW)))
    assert caught.value.transmitted is False


def test_a_package_over_the_limit_is_not_sent() -> None:
    transport = AmqpTransport(BrokerAccess(), max_message_bytes=3, clock=lambda: NOW)
    with pytest.raises(TransportFailure, match=r"more than amqp\.max_message_bytes") as caught:
        asyncio.run(transport.send(request()))
    assert caught.value.transmitted is False


def test_a_bad_url_is_not_sent() -> None:
    transport = AmqpTransport(BrokerAccess(), clock=lambda: NOW)
    bad = Request("amqp://u:p@127.0.0.1/queue/q", CT, b"x")
    with pytest.raises(TransportFailure, match="carries credentials") as caught:
        asyncio.run(transport.send(bad))
    assert caught.value.transmitted is False and ":p@" not in caught.value.reason


def test_accepted_is_a_transmission_without_an_answer() -> None:
    # AMQP 1.0 §3.4.2: accepted, the broker took the message; to the engine a 202 without a body.
    endpoint = parse_endpoint("amqp://127.0.0.1/queue/q")
    assert _response(Settlement(Outcome.ACCEPTED), endpoint, "message m") == ACCEPTED_RESPONSE


@pytest.mark.parametrize(
    ("settlement", "words"),
    [
        # §3.4.3 rejected: the error travels in the reason.
        (
            Settlement(Outcome.REJECTED, "amqp:resource-limit-exceeded", "queue full"),
            "amqp:resource-limit-exceeded: queue full",
        ),
        (Settlement(Outcome.RELEASED), "released"),  # §3.4.4
        (Settlement(Outcome.MODIFIED), "modified"),  # §3.4.5
    ],
)
def test_any_other_outcome_is_a_failure_that_never_reached_the_queue(settlement: Settlement, words: str) -> None:
    endpoint = parse_endpoint("amqp://127.0.0.1/queue/q")
    with pytest.raises(TransportFailure, match=words) as caught:
        _response(settlement, endpoint, "message m")
    assert caught.value.transmitted is False
