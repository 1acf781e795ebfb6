"""amqp: endpoint URLs: the broker and the node address they name (docs/transports/amqp.md)."""

from __future__ import annotations

import pytest

from msh.transport.amqp_address import AmqpEndpoint, parse_endpoint


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # RabbitMQ 3.x address forms keep their leading slash.
        ("amqp://127.0.0.1:5672/queue/ebms-b", AmqpEndpoint(False, "127.0.0.1", 5672, "/queue/ebms-b")),
        ("amqp://mq.example/amq/queue/in", AmqpEndpoint(False, "mq.example", 5672, "/amq/queue/in")),
        ("amqp://mq.example/exchange/ebxml/b", AmqpEndpoint(False, "mq.example", 5672, "/exchange/ebxml/b")),
        ("amqp://mq.example/topic/orders", AmqpEndpoint(False, "mq.example", 5672, "/topic/orders")),
        ("amqp://mq.example/queues/in", AmqpEndpoint(False, "mq.example", 5672, "/queues/in")),
        # Qpid, Artemis, Service Bus: a plain queue name.
        ("amqp://mq.example/ebms-b", AmqpEndpoint(False, "mq.example", 5672, "ebms-b")),
        ("amqps://ns.servicebus.example/ebms-b", AmqpEndpoint(True, "ns.servicebus.example", 5671, "ebms-b")),
        ("amqps://mq.example:5000/a.b/c", AmqpEndpoint(True, "mq.example", 5000, "a.b/c")),
        # Any other slashed address: two slashes; a plain "queue/x": the slash escaped.
        ("amqp://mq.example//other/x", AmqpEndpoint(False, "mq.example", 5672, "/other/x")),
        ("amqp://mq.example/queue%2Fx", AmqpEndpoint(False, "mq.example", 5672, "queue/x")),
        ("AMQP://[::1]:5672/queue/q", AmqpEndpoint(False, "::1", 5672, "/queue/q")),
    ],
)
def test_the_path_names_the_address_in_both_forms(url: str, expected: AmqpEndpoint) -> None:
    endpoint = parse_endpoint(url)
    assert endpoint == expected
    assert parse_endpoint(endpoint.url) == endpoint  # the canonical URL names the same address


def test_the_broker_url_has_no_address() -> None:
    assert parse_endpoint("amqp://mq.example/queue/x").broker == "amqp://mq.example:5672"
    assert parse_endpoint("amqps://[::1]/x").broker == "amqps://[::1]:5671"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("amqp://guest:secret@mq.example/queue/x", "carries credentials"),
        ("http://mq.example/queue/x", "is not an amqp: or amqps: URL"),
        ("amqp:///queue/x", "names no broker host"),
        ("amqp://mq.example", "names no address"),
        ("amqp://mq.example/", "names no address"),
        ("amqp://mq.example/x?durable=1", "query or fragment"),
        ("amqp://mq.example:99999/x", "is not an amqp URL"),
    ],
)
def test_a_bad_url_is_refused_in_words(url: str, words: str) -> None:
    with pytest.raises(ValueError, match=words) as caught:
        parse_endpoint(url)
    assert "secret" not in str(caught.value)
