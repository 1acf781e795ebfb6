"""When the running MSH counts an agreement as asking for key work (``MessageSecurity.in_use``: its messages
are then composed and parsed on the work pool, beside the event loop), and that a signature is checked
whether or not the agreement counts.

CPP/A 2.0 §8.4.40: a SenderNonRepudiation says the sending party signs its messages; §8.4.47/§8.4.49: a
DigitalEnvelope says the payloads are encrypted. A ReceiverNonRepudiation (§8.4.44) names how the receiver
checks a signature the sender makes: on its own it asks for no signature. The decision (which work goes to
the pool) is the project's; it is written in docs/design.md §8."""

from __future__ import annotations

import io

from lxml import etree

from cpa import load
from cpa.registry import CpaRegistry
from cpa.resolve import Exchange
from msh.ebms.envelope import serialise_envelope
from msh.ebms.message import write_message
from msh.runtime.compose import compose
from msh.runtime.msh import Msh
from msh.runtime.security import MessageSecurity
from msh.security import load_certificates, load_private_key, sign
from msh.testing.network import TestNetwork
from tests.support.endpoint import PARTY_A, RSA_SHA256, SHA256
from tests.support.secure_network import (
    ACTION,
    DEMO_CPA,
    KEYS,
    PARTY_B,
    SERVICE,
    TP,
    encrypted,
    nobody_signs,
    order,
    run_pair,
    settings,
)


def _in_use(cpa: bytes) -> bool:
    b = settings("b")
    party = (b.identity.party_id, b.identity.party_id_type)
    return MessageSecurity(b.security, CpaRegistry([load(cpa)]), party, with_keys=False).in_use


def _receiver_non_repudiation_count(cpa: bytes) -> int:
    return len(etree.fromstring(cpa).findall(f".//{{{TP}}}ReceiverNonRepudiation"))


def test_an_agreement_whose_channels_sign_asks_for_key_work() -> None:
    assert _in_use(DEMO_CPA)


def test_receiver_non_repudiation_alone_asks_for_no_key_work() -> None:
    # CPP/A 2.0 §8.4.44: ReceiverNonRepudiation describes the checking of the sender's signature; with no
    # SenderNonRepudiation left, nobody signs.
    cpa = nobody_signs()
    assert _receiver_non_repudiation_count(cpa) > 0, "the variant must keep its ReceiverNonRepudiation"
    assert not _in_use(cpa)


def test_a_digital_envelope_asks_for_key_work_even_when_nobody_signs() -> None:
    # CPP/A 2.0 §8.4.47-§8.4.49: the payloads are encrypted for the receiver.
    assert _in_use(encrypted(nobody_signs()))


def _signed_as_a(b: Msh, message_id: str, *, tamper: bool) -> tuple[str, bytes]:
    now = b.clock()
    params = b.registry.resolve("cpa-demo-a-b", Exchange(PARTY_A, PARTY_B, SERVICE, ACTION), now=now)
    composed = compose(
        params, order(1), message_id=message_id, now=now, conversation_id="c-1", content_id_domain="a.example"
    )
    key = load_private_key(KEYS / "party-a.key.pem")
    [certificate] = load_certificates(KEYS / "party-a.cert.pem")
    payloads = {spec.content_id: spec.body for spec in composed.attachments}
    soap = sign(serialise_envelope(composed.envelope), payloads, key, certificate, RSA_SHA256, SHA256)
    out = io.BytesIO()
    content_type = write_message(out, composed.envelope, composed.attachments, soap=soap)
    body = out.getvalue()
    if tamper:
        assert b"<item>bolts</item>" in body
        body = body.replace(b"<item>bolts</item>", b"<item>nails</item>")
    return content_type, body


def test_a_signature_the_agreement_does_not_ask_for_is_still_checked() -> None:
    """ebMS2 §4.1.3: a signed message is verified; that the agreement does not ask for the signature (and
    so counts as asking for no key work) does not skip the check: a changed payload is refused."""

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        assert not b.core.security.in_use
        content_type, body = _signed_as_a(b, "voluntary-1@a.example", tamper=True)
        reply = await b.handle_http(body, content_type)
        assert b"SecurityFailure" in reply.body
        assert b"<eb:Acknowledgment" not in reply.body
        with b.store.transaction(readonly=True) as tx:
            assert tx.find_inbound("voluntary-1@a.example") is None
        content_type, body = _signed_as_a(b, "voluntary-2@a.example", tamper=False)
        reply = await b.handle_http(body, content_type)
        assert b"<eb:Acknowledgment" in reply.body
        assert [e.message_id for e in b.inbox(None, limit=10)] == ["voluntary-2@a.example"]

    run_pair(scenario, cpa=nobody_signs())
