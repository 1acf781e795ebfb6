"""Partners A and B of the sample agreement on the test network with their demo keys, and variants of the
agreement for the message-security scenarios (signed acknowledgments, payload encryption)."""

from __future__ import annotations

import asyncio
import dataclasses
import tomllib
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from lxml import etree

from cpa import load
from cpa.model import CollaborationProtocolAgreement
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.msh import Msh
from msh.store.api import Direction, Event
from msh.testing.network import TestNetwork

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "samples" / "config"
KEYS = ROOT / "samples" / "keys"
DEMO_CPA = (ROOT / "samples" / "cpas" / "demo-a-b.xml").read_bytes()
PARTY_B = ("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")
B_URL = "https://127.0.0.1:8082/msh"
SERVICE, ACTION = "urn:example:services:ordering", "NewOrder"
TP = "http://www.oasis-open.org/committees/ebxml-cppa/schema/cpp-cpa-2_0.xsd"
AES256 = "http://www.w3.org/2001/04/xmlenc#aes256-cbc"


def settings(name: str, **security: Any) -> Settings:
    """The sample settings of party ``name`` (a or b) on a memory store; ``security`` replaces keys of
    its ``[security]`` section (a path, or None to unset it)."""
    path = CONFIG / f"party-{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    loaded = settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})
    if not security:
        return loaded
    return dataclasses.replace(loaded, security=dataclasses.replace(loaded.security, **security))


def order(n: int = 1, payload: bytes | None = None) -> Submission:
    body = payload if payload is not None else f"<order n='{n}'><item>bolts</item></order>".encode()
    return Submission(PARTY_B, SERVICE, ACTION, (Payload(body, "application/xml"),))


def signed_acks(cpa: bytes = DEMO_CPA) -> bytes:
    """The agreement with signed acknowledgments asked for on the reliable channels (ackSignatureRequested
    always, CPP/A 2.0 §8.4.8)."""
    old = b'tp:ackRequested="always" tp:ackSignatureRequested="never"'
    assert old in cpa
    return cpa.replace(old, b'tp:ackRequested="always" tp:ackSignatureRequested="always"')


def encrypted(cpa: bytes = DEMO_CPA, algorithm: str = AES256) -> bytes:
    """The agreement with payloads encrypted on the reliable channels: a SenderDigitalEnvelope (XMLENC) on
    each party's sending side and a ReceiverDigitalEnvelope naming its own certificate on its receiving
    side (CPP/A 2.0 §8.4.44, §8.4.50)."""
    root = etree.fromstring(cpa)
    for party, cert_id in (("A", "A_Cert"), ("B", "B_Cert")):
        exchange = root.find(f".//{{{TP}}}DocExchange[@{{{TP}}}docExchangeId='{party}_ReliableSigned']")
        assert exchange is not None
        for side, extra in (("Sender", None), ("Receiver", cert_id)):
            binding = exchange.find(f"{{{TP}}}ebXML{side}Binding")
            assert binding is not None
            envelope = etree.SubElement(binding, f"{{{TP}}}{side}DigitalEnvelope")
            protocol = etree.SubElement(envelope, f"{{{TP}}}DigitalEnvelopeProtocol")
            protocol.set(f"{{{TP}}}version", "1.0")
            protocol.text = "XMLENC"
            etree.SubElement(envelope, f"{{{TP}}}EncryptionAlgorithm").text = algorithm
            if extra is not None:
                etree.SubElement(envelope, f"{{{TP}}}EncryptionCertificateRef").set(f"{{{TP}}}certId", extra)
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


def agreement(cpa: bytes) -> CollaborationProtocolAgreement:
    return load(cpa)


def run_pair(
    scenario: Callable[[TestNetwork, Msh, Msh], Awaitable[None]],
    *,
    cpa: bytes | None = None,
    a: Settings | None = None,
    b: Settings | None = None,
    seed: int = 3,
    start: datetime | None = None,
) -> None:
    """Run ``scenario`` with A and B on a test network (the sample agreement, or ``cpa``; its clock from
    ``start``, by default the network's)."""

    async def main() -> None:
        net = TestNetwork(seed=seed, start=start)
        agreements = [load(cpa)] if cpa is not None else None
        msh_a = net.add("a", a or settings("a"), agreements=agreements)
        msh_b = net.add("b", b or settings("b"), agreements=agreements)
        await net.start()
        try:
            await scenario(net, msh_a, msh_b)
        finally:
            await net.close()

    asyncio.run(main())


def events(msh: Msh, message_id: str, direction: Direction) -> list[Event]:
    with msh.store.transaction(readonly=True) as tx:
        return tx.message_events(message_id, direction=direction)


def stored_body(msh: Msh, message_id: str) -> bytes:
    """The bytes stored (and sent) for our message ``message_id``."""
    stored = msh.status(message_id)
    assert stored is not None
    with msh.store.open_blob(stored.body_blob_id) as blob:
        return blob.read()


def unsigned_messages(cpa: bytes = DEMO_CPA) -> bytes:
    """The agreement with A's business messages unsigned (no SenderNonRepudiation on A's reliable channel);
    signals stay signed."""
    root = etree.fromstring(cpa)
    path = f".//{{{TP}}}DocExchange[@{{{TP}}}docExchangeId='A_ReliableSigned']/{{{TP}}}ebXMLSenderBinding"
    binding = root.find(path)
    assert binding is not None
    element = binding.find(f"{{{TP}}}SenderNonRepudiation")
    assert element is not None
    binding.remove(element)
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


def nobody_signs(cpa: bytes = DEMO_CPA) -> bytes:
    """The agreement with no SenderNonRepudiation anywhere: neither party signs what it sends (so a party
    without a signing key can load it)."""
    root = etree.fromstring(cpa)
    for element in root.findall(f".//{{{TP}}}SenderNonRepudiation"):
        parent = element.getparent()
        assert parent is not None
        parent.remove(element)
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")
