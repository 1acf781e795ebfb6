"""A route's next hop may be any binding's endpoint (docs/transports): http(s), mailto (SMTP), amqp(s)."""

from __future__ import annotations

import pytest

from msh.runtime.config.rules import endpoint_url


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1:8092/msh",
        "http://partner.example/msh",
        "mailto:msh@partner.example",
        "amqp://broker.example:5672/queue/partner",
        "amqps://bus.example/partner",
    ],
)
def test_endpoints_of_every_binding_are_accepted(url: str) -> None:
    assert endpoint_url(url) is None


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://partner.example/in", "is not an http(s)://, mailto: or amqp(s):// URL"),
        ("mailto:nobody", "is not mailto:LOCAL@DOMAIN"),
        ("amqp://broker.example:5672", "names no address on the broker"),
        ("https:///msh", "names no host"),
        ("https://partner.example/m sh", "contains white space"),
    ],
)
def test_other_values_are_refused_with_the_reason_and_examples(url: str, why: str) -> None:
    problem = endpoint_url(url)
    assert problem is not None and why in problem and "mailto:msh@partner.example" in problem
