"""Client TLS contexts (msh.transport.tls.ClientContexts): made one way for every kind of destination, TLS 1.2
or newer (ebMS2 B.2.7 as the conformance notes decide: no SSL 3.0), trusting what the destination's
configuration names."""

from __future__ import annotations

import ssl
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from msh.engine.routing import Route
from msh.transport.tls import ClientContexts
from tests.support.security import certificate


def _pem_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.pem"
    path.write_bytes(certificate(name, ca=True).public_bytes(serialization.Encoding.PEM))
    return path


def _subjects(context: ssl.SSLContext) -> set[str]:
    return {dict(part[0] for part in ca["subject"]).get("commonName", "") for ca in context.get_ca_certs()}


def test_every_client_context_is_tls_1_2_or_newer_and_made_once_per_destination(tmp_path: Path) -> None:
    contexts = ClientContexts(certificate=None, private_key=None, trusted=(_pem_file(tmp_path, "partner-ca"),))
    route = Route("to-c", "c", "https://c.example/msh")
    made = [contexts.for_url("https://b.example/msh"), contexts.for_route(route)]
    for context in made:
        assert context is not None and context.minimum_version is ssl.TLSVersion.TLSv1_2
        assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert contexts.for_url("https://b.example/msh") is made[0] and contexts.for_route(route) is made[1]
    assert contexts.for_url("http://b.example/msh") is None and contexts.for_route(Route("p", "c", "http://c")) is None


def test_a_route_that_names_its_certificates_trusts_only_them(tmp_path: Path) -> None:
    contexts = ClientContexts(certificate=None, private_key=None, trusted=(_pem_file(tmp_path, "everyone"),))
    own = Route("to-c", "c", "https://c.example/msh", trusted=(str(_pem_file(tmp_path, "hop-c")),))
    context = contexts.for_route(own)
    assert context is not None and _subjects(context) == {"hop-c"}  # no tls.trusted, no system CAs
    shared = contexts.for_route(Route("to-d", "d", "https://d.example/msh"))
    assert shared is not None and "everyone" in _subjects(shared)
