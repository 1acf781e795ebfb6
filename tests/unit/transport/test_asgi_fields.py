"""The ASGI endpoint refuses a header field it reads that comes twice, whatever server runs it (the door of
:mod:`msh.transport.server` refuses it first when that is the server)."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

import pytest

from msh.transport.asgi import Endpoint, repeated_field


class _NoHandler:
    """An inbound handler that must not be reached."""

    async def handle_http(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the request reached the MSH")

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def _post(headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    sent: list[MutableMapping[str, Any]] = []
    requests = [{"type": "http.request", "body": b"<a/>", "more_body": False}]

    async def receive() -> MutableMapping[str, Any]:
        return requests.pop(0) if requests else {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/msh", "method": "POST", "headers": headers}
    asyncio.run(Endpoint(_NoHandler())(scope, receive, send))  # type: ignore[arg-type]
    return sent[0]["status"], sent[1]["body"]


@pytest.mark.parametrize(
    ("headers", "name"),
    [
        # RFC 9110 §5.3 and §8.3: Content-Type is one media type, sent once.
        (
            [(b"content-type", b"text/xml"), (b"soapaction", b'"ebXML"'), (b"Content-Type", b"multipart/related")],
            "content-type",
        ),
        # SOAP 1.1 §6.1.1: SOAPAction is one URI.
        ([(b"content-type", b"text/xml"), (b"soapaction", b'"a"'), (b"SOAPAction", b'"b"')], "soapaction"),
    ],
)
def test_a_field_the_endpoint_reads_sent_twice_is_400(headers: list[tuple[bytes, bytes]], name: str) -> None:
    status, body = _post(headers)
    assert status == 400
    assert f"more than one {name} header field".encode() in body and b"RFC 9110" in body


def test_other_fields_may_repeat() -> None:
    # RFC 9110 §5.3: a list field (Accept, Via) may come as several lines.
    assert repeated_field([(b"accept", b"a"), (b"Accept", b"b"), (b"content-type", b"text/xml")]) is None
