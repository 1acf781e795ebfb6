"""A service bound under several service types (ebMS2 §3.1.4.1, CPP/A 2.0 §8.4.11-§8.4.15: the Service's
``type`` tells the bindings apart), as the compliance agreements of ``shared/interop/cpas`` (cpa-cv-http/https) bind
``EchoService$1.0`` six times: a message sent under one of them is resent (and asked about, ebMS2 §7) under
that binding, with the TLS trust of its agreement; before, the stored row (which keeps the Service, not
its type) resolved to an ambiguity, and the resend went without the agreement's trust anchors (a TLS
failure against a partner whose certificate the agreement names).
"""

from __future__ import annotations

import asyncio
import ssl
import tomllib
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from lxml import etree

from msh.engine import OutboundStatus
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.service_targets import status_target
from msh.testing.network import TestNetwork
from msh.transport.memory import MemoryTransport
from msh.transport.port import Request, Response
from tests.support.agreement_files import DEMO_A_B, TP

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "samples" / "config"
B_PARTY = ("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")
B_URL = "https://127.0.0.1:8082/msh"
SERVICE, TYPED = "urn:example:services:ordering", "urn:example:service-types:second"


def with_a_second_service_type() -> bytes:
    """The demo agreement with each party's ordering role bound a second time, under the service type
    TYPED (the action binding ids suffixed ``_Typed``): NewOrder from A to B is then bound twice."""
    root = etree.fromstring(DEMO_A_B.read_bytes())
    for info in root.iterfind(f"{{{TP}}}PartyInfo"):
        role = info.find(f"{{{TP}}}CollaborationRole")
        assert role is not None
        copy = etree.fromstring(etree.tostring(role))
        service = copy.find(f".//{{{TP}}}Service")
        assert service is not None
        service.set(f"{{{TP}}}type", TYPED)
        for binding in copy.iter(f"{{{TP}}}ThisPartyActionBinding"):
            binding.set(f"{{{TP}}}id", binding.get(f"{{{TP}}}id", "") + "_Typed")
        for other in copy.iter(f"{{{TP}}}OtherPartyActionBinding"):
            other.text = (other.text or "").strip() + "_Typed"
        role.addnext(copy)
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


def settings(name: str, agreement: Path) -> Settings:
    path = CONFIG / f"party-{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    data["agreements"] = {**data["agreements"], "paths": [str(agreement)]}
    return settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})


def trusts_b(context: ssl.SSLContext | None) -> bool:
    b = x509.load_pem_x509_certificate((ROOT / "samples" / "keys" / "party-b.cert.pem").read_bytes())
    der = b.public_bytes(serialization.Encoding.DER)
    return context is not None and der in context.get_ca_certs(binary_form=True)


def test_a_resend_under_one_of_several_service_types_goes_with_the_agreements_tls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agreement = tmp_path / "agreement.xml"
    agreement.write_bytes(with_a_second_service_type())
    sent: list[Request] = []
    send = MemoryTransport.send

    async def recording(self: MemoryTransport, request: Request) -> Response:
        if request.url == B_URL:
            sent.append(request)
        return await send(self, request)

    monkeypatch.setattr(MemoryTransport, "send", recording)

    async def main() -> None:
        net = TestNetwork(seed=1)
        a, b = net.add("a", settings("a", agreement)), net.add("b", settings("b", agreement))
        await net.start()
        try:
            net.faults.lose_next_requests = 1  # the first transmission is lost: the message is resent
            payload = (Payload(b"<order n='1'/>", "application/xml"),)
            message_id = await a.submit_async(Submission(B_PARTY, SERVICE, "NewOrder", payload, service_type=TYPED))
            await net.run_until(lambda: a.status(message_id).state.status.final, limit=timedelta(minutes=5))  # type: ignore[union-attr]
            stored = a.status(message_id)
            assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
            [entry] = b.inbox(None)
            received = b.fetch(entry.id, mark_delivered=False)
            assert received.envelope.message_header.service.type == TYPED  # type: ignore[union-attr]
            received.close()
            # ebMS2 §7.1.1: a StatusRequest about it goes where it went, with the same TLS.
            with a.store.transaction(readonly=True) as tx:
                row = tx.get_outbound(message_id)
            assert row is not None
            with a.store.open_blob(row.body_blob_id) as blob:
                body = blob.read()
            assert trusts_b(status_target(a.core, a.inbound.forwarding, row, lambda: body).tls)
        finally:
            await net.close()

    asyncio.run(main())
    assert len(sent) == 2  # the first transmission (lost) and the resend
    # CPP/A 2.0 §8.4.26: the client trusts the server certificates the agreement names for B's endpoint.
    assert [trusts_b(r.tls) for r in sent] == [True, True]
