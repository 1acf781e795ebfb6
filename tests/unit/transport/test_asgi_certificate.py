"""The TLS client certificate of a request, as the ASGI endpoint reads it from the TLS extension
(:func:`msh.transport.asgi.client_certificate`): the DER bytes the party binding checks (docs/design.md §7)."""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.serialization import Encoding

from msh.transport.asgi import client_certificate
from tests.support.security import certificate


def _scope(chain: list[str] | None) -> dict[str, Any]:
    tls = {} if chain is None else {"client_cert_chain": chain}
    return {"type": "http", "extensions": {"tls": tls}}


def test_the_clients_own_certificate_is_the_first_of_its_chain_as_der() -> None:
    own, ca = certificate("client", ca=False), certificate("client's CA", ca=True)
    chain = [c.public_bytes(Encoding.PEM).decode("ascii") for c in (own, ca)]
    assert client_certificate(_scope(chain)) == own.public_bytes(Encoding.DER)


def test_no_certificate_over_plain_http_or_without_one() -> None:
    assert client_certificate({"type": "http"}) is None
    assert client_certificate({"type": "http", "extensions": {}}) is None
    assert client_certificate(_scope(None)) is None
    assert client_certificate(_scope([])) is None


def test_the_certificate_a_client_presents_on_every_request_is_converted_once() -> None:
    pem = certificate("client").public_bytes(Encoding.PEM).decode("ascii")
    first = client_certificate(_scope([pem]))
    again = client_certificate(_scope(["".join(list(pem))]))  # the same text, another string (another request)
    assert first is not None and again is first
    other = certificate("other client")
    assert client_certificate(_scope([other.public_bytes(Encoding.PEM).decode("ascii")])) == other.public_bytes(
        Encoding.DER
    )
