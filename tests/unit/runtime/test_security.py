"""Message security in the running MSH, on the test network (ebMS2 §4.1, §6.3.1.2, §6.3.2.5): partners A
and B of the sample agreement (which has both sign with rsa-sha256 / sha256) with their demo keys.

Signed messages verify and are delivered once; a message changed on the way, unsigned, or signed by
another party is refused with SecurityFailure and neither acknowledged nor delivered; signed
acknowledgments are checked against what was sent and kept as receipts; encrypted payloads arrive
decrypted; an agreement needing a key the settings lack is refused when loaded.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import Encoding
from lxml import etree

from cpa.model import (
    ActionBinding,
    Certificate,
    CollaborationProtocolAgreement,
    DeliveryChannel,
    NonRepudiation,
    PerMessage,
)
from cpa.resolve import Exchange
from msh.ebms.envelope import serialise_envelope
from msh.ebms.message import ParseMode, build_message, parse_message
from msh.ebms.mime import AttachmentSpec
from msh.ebms.model import Envelope
from msh.engine import OutboundStatus
from msh.engine.replies import acknowledgment_message
from msh.errors import ConfigurationError, ErrorCode
from msh.runtime.compose import compose
from msh.runtime.config import load_settings
from msh.runtime.msh import Msh
from msh.security import check_receipt, load_certificates, load_private_key, receipt_references, sign
from msh.store.api import Direction
from msh.testing.network import TestNetwork
from tests.support.endpoint import PARTY_A, RSA_SHA256, SHA256, signed_as_a
from tests.support.multihop import multihop, routed_cpa
from tests.support.multihop import order as multihop_order
from tests.support.secure_network import (
    ACTION,
    B_URL,
    CONFIG,
    KEYS,
    PARTY_B,
    SERVICE,
    agreement,
    encrypted,
    events,
    nobody_signs,
    order,
    run_pair,
    settings,
    signed_acks,
    stored_body,
    unsigned_messages,
)

DS = "http://www.w3.org/2000/09/xmldsig#"
SOAP = "http://schemas.xmlsoap.org/soap/envelope/"
XPATH = "http://www.w3.org/TR/1999/REC-xpath-19991116"
EB = "http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd"


def _soap(body: bytes, content_type: str) -> etree._Element:
    message = parse_message(body, content_type, mode=ParseMode.LENIENT)
    message.close()
    return etree.fromstring(message.soap)


def _received(msh: Msh, message_id: str) -> list[dict[str, object]]:
    return [e.detail for e in events(msh, message_id, Direction.INBOUND) if e.kind == "received"]


def _delivered(msh: Msh) -> list[str]:
    return [entry.message_id for entry in msh.inbox(None, limit=1000)]


# ------------------------------------------------------------------------------------------- signing


def test_a_signed_message_is_verified_delivered_once_and_resent_with_the_same_signed_bytes() -> None:
    sent: list[bytes] = []

    def record(url: str, body: bytes) -> bytes:
        if url == B_URL:
            sent.append(body)
        return body

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.tamper = record
        net.faults.lose_next_answers = 1  # the acknowledgment of the first transmission is lost: A resends
        message_id = await a.submit_async(order(1))
        await net.run_until(lambda: a.status(message_id).state.status.final)  # type: ignore[union-attr]
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        assert stored.state.attempts == 2
        body = stored_body(a, message_id)
        # docs/design.md §5.1: every transmission sends the stored signed bytes.
        assert sent == [body, body]
        signature = _soap(body, stored.content_type).find(f".//{{{DS}}}Signature")
        assert signature is not None
        method = signature.find(f"{{{DS}}}SignedInfo/{{{DS}}}SignatureMethod")
        assert method is not None and method.get("Algorithm") == RSA_SHA256
        assert len(signature.findall(f"{{{DS}}}SignedInfo/{{{DS}}}Reference")) == 2  # envelope + payload
        # B verified both copies, delivered the first, answered the second from its store.
        assert _delivered(b) == [message_id]
        assert [d["signed"] for d in _received(b, message_id)] == [True]
        assert b.counters["signatures-verified"] == 2
        # B's acknowledgments travel on its signal channel, which signs too: A verified them.
        assert a.counters["signatures-verified"] >= 1
        submitted = [e.detail for e in events(a, message_id, Direction.OUTBOUND) if e.kind == "submitted"]
        assert submitted[0]["signed"] is True and submitted[0]["encrypted"] is False
        assert a.receipt(message_id) is None  # no signed acknowledgment was asked for: no receipt kept

    run_pair(scenario)


@pytest.mark.parametrize(
    ("what", "old", "new"),
    [
        ("a payload byte", b"<item>bolts</item>", b"<item>nails</item>"),
        ("a header element", b"<eb:Action>NewOrder</eb:Action>", b"<eb:Action>NewOrder </eb:Action>"),
    ],
)
def test_a_message_changed_on_the_way_is_refused_with_security_failure_and_not_delivered(
    what: str, old: bytes, new: bytes
) -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        def tamper(url: str, body: bytes) -> bytes:
            assert url != B_URL or old in body, what
            return body.replace(old, new) if url == B_URL else body

        net.faults.tamper = tamper
        message_id = await a.submit_async(order(1))
        await net.settle()
        assert _delivered(b) == []
        with b.store.transaction(readonly=True) as tx:
            assert tx.find_inbound(message_id) is None  # nothing stored as received
        assert b.counters["security-failures"] == 1
        [rejected] = [e for e in events(b, message_id, Direction.INBOUND) if e.kind == "rejected"]
        assert "SecurityFailure" in str(rejected.detail["issues"])
        # The SecurityFailure went back to A in an ErrorList (signed by B): A's message failed with it.
        [attempt] = a.attempts(message_id)
        assert [e.error_code for e in attempt.errors] == [ErrorCode.SECURITY_FAILURE.value]
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.FAILED

    run_pair(scenario)


def _unsigned_message(b: Msh, message_id: str) -> tuple[Envelope, tuple[AttachmentSpec, ...]]:
    now = b.clock()
    params = b.registry.resolve("cpa-demo-a-b", Exchange(PARTY_A, PARTY_B, SERVICE, ACTION), now=now)
    composed = compose(
        params, order(1), message_id=message_id, now=now, conversation_id="c-1", content_id_domain="a.example"
    )
    return composed.envelope, composed.attachments


def test_an_unsigned_message_under_a_signing_agreement_is_refused() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        envelope, attachments = _unsigned_message(b, "unsigned-1@a.example")
        content_type, body = build_message(envelope, attachments)
        reply = await b.handle_http(body, content_type)
        assert b"SecurityFailure" in reply.body and b"is not signed" in reply.body
        assert b"<eb:Acknowledgment" not in reply.body
        assert _delivered(b) == []
        with b.store.transaction(readonly=True) as tx:
            assert tx.find_inbound("unsigned-1@a.example") is None

    run_pair(scenario)


def test_a_message_signed_by_another_party_is_refused() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        envelope, attachments = _unsigned_message(b, "forged-1@a.example")
        payloads = {x.content_id: x.body for x in attachments}
        # Party C's key, its certificate in KeyInfo: not the certificate the agreement names for A.
        key = load_private_key(KEYS / "party-c.key.pem")
        [certificate] = load_certificates(KEYS / "party-c.cert.pem")
        soap = sign(serialise_envelope(envelope), payloads, key, certificate, RSA_SHA256, SHA256)
        content_type, body = build_message(envelope, attachments)
        body = body.replace(serialise_envelope(envelope), soap)
        reply = await b.handle_http(body, content_type)
        assert b"SecurityFailure" in reply.body
        assert _delivered(b) == []
        # The same message signed with A's key goes through.
        good_type, good = signed_as_a(envelope, attachments)
        reply = await b.handle_http(good, good_type)
        assert b"<eb:Acknowledgment" in reply.body
        assert _delivered(b) == ["forged-1@a.example"]

    run_pair(scenario)


def test_an_agreement_that_has_us_sign_is_refused_when_loaded_without_a_signing_key() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        with pytest.raises(ConfigurationError) as caught:
            net.add("a2", settings("a", signing_key=None, signing_certificate=None))
        text = str(caught.value)
        assert "agreement cpa-demo-a-b, Party A, DeliveryChannel A_Channel: its SenderNonRepudiation" in text
        assert "security.signing_key" in text

    run_pair(scenario)


def test_a_signing_key_that_is_not_the_agreements_certificate_is_refused_when_loaded() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        with pytest.raises(ConfigurationError, match="SigningCertificateRef names certificate 'A_Cert'"):
            net.add(
                "a2",
                settings("a", signing_key=KEYS / "party-c.key.pem", signing_certificate=KEYS / "party-c.cert.pem"),
            )

    run_pair(scenario)


# ------------------------------------------------------------------------------------------- receipts


def test_a_signed_acknowledgment_is_checked_against_what_was_sent_and_kept_as_the_receipt() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.run_until(lambda: a.status(message_id).state.status.final)  # type: ignore[union-attr]
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        sent = stored_body(a, message_id)
        asked = _soap(sent, stored.content_type).find(f".//{{{EB}}}AckRequested")
        assert asked is not None and asked.get(f"{{{EB}}}signed") == "true"
        receipt = a.receipt(message_id)
        assert receipt is not None
        root = etree.fromstring(receipt)
        assert root.find(f".//{{{DS}}}Signature") is not None  # the acknowledgment is signed
        references = root.findall(f".//{{{EB}}}Acknowledgment/{{{DS}}}Reference")
        assert len(references) == 2
        texts = [etree.tostring(r, encoding="unicode") for r in references]
        sent_message = parse_message(sent, stored.content_type, mode=ParseMode.LENIENT)
        try:
            assert len(check_receipt(texts, sent_message.soap)) == 2
        finally:
            sent_message.close()
        assert a.counters["receipts"] == 1
        [kept] = [e for e in events(a, message_id, Direction.OUTBOUND) if e.kind == "receipt"]
        assert kept.detail["references"] == 2

    run_pair(scenario, cpa=signed_acks())


def test_the_receipt_of_an_unsigned_message_carries_references_derived_from_it() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.run_until(lambda: a.status(message_id).state.status.final)  # type: ignore[union-attr]
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        sent = stored_body(a, message_id)
        assert _soap(sent, stored.content_type).find(f".//{{{DS}}}Signature") is None
        receipt = a.receipt(message_id)
        assert receipt is not None
        # ebMS2 §6.3.2.5: derived from the original message as the profile would sign it.
        references = etree.fromstring(receipt).findall(f".//{{{EB}}}Acknowledgment/{{{DS}}}Reference")
        assert [r.get("URI", "")[:4] for r in references] == ["", "cid:"]
        assert [d["signed"] for d in _received(b, message_id)] == [False]

    run_pair(scenario, cpa=signed_acks(unsigned_messages()))


def _ack_from_b(a: Msh, message_id: str, *, references: tuple[str, ...], signed: bool = True) -> bytes:
    stored = a.status(message_id)
    assert stored is not None
    sent = parse_message(stored_body(a, message_id), stored.content_type, mode=ParseMode.LENIENT)
    sent.close()
    ack = acknowledgment_message(
        sent.envelope, message_id="ack-1@party-b.example", now=a.clock(), references=references
    )
    body = serialise_envelope(ack)
    if not signed:
        return body
    key = load_private_key(KEYS / "party-b.key.pem")
    [certificate] = load_certificates(KEYS / "party-b.cert.pem")
    return sign(body, {}, key, certificate, RSA_SHA256, SHA256)


@pytest.mark.parametrize("problem", ["digest", "unsigned"])
def test_a_receipt_that_does_not_match_what_was_sent_delivers_the_message_with_the_receipt_problem(
    problem: str,
) -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.down.add(B_URL)
        message_id = await a.submit_async(order(1))
        await net.settle()
        stored = a.status(message_id)
        assert stored is not None
        sent = parse_message(stored_body(a, message_id), stored.content_type, mode=ParseMode.LENIENT)
        sent.close()
        references = list(receipt_references(sent.soap))
        # The payload's digest as B would have computed it over other content.
        references[1] = references[1].replace("<ds:DigestValue>", "<ds:DigestValue>AAAA", 1)
        body = _ack_from_b(a, message_id, references=tuple(references), signed=problem != "unsigned")
        if problem == "unsigned":
            # B's signal channel signs: an unsigned acknowledgment is refused before it is a receipt at all.
            await a.handle_http(body, "text/xml")
            assert a.status(message_id).state.status is OutboundStatus.AWAITING_ACK  # type: ignore[union-attr]
            assert a.receipt(message_id) is None
            return
        await a.handle_http(body, "text/xml")
        stored = a.status(message_id)
        # ebMS2 §6.3.2.5: "Receipt of an Acknowledgment Message, indicates the original message reached its
        # destination"; the digests say whether it "arrived intact". B has it: delivered; the receipt proves
        # nothing about its content, and says why, beside the status (not a DeliveryFailure).
        assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        assert stored.state.failure is None
        problem_text = stored.state.receipt_problem
        assert problem_text is not None and problem_text.startswith("SecurityFailure at //Header/Acknowledgment")
        assert "differs from the message sent" in problem_text
        assert a.receipt(message_id) is None
        [delivered] = [e for e in events(a, message_id, Direction.OUTBOUND) if e.kind == "delivered"]
        assert delivered.detail["receiptProblem"] == problem_text
        [refused] = [e for e in events(a, message_id, Direction.OUTBOUND) if e.kind == "receipt-refused"]
        assert "cid:" in str(refused.detail["location"])

    run_pair(scenario, cpa=signed_acks())


# ------------------------------------------------------------------------------------------ encryption


def test_encrypted_payloads_travel_encrypted_and_arrive_decrypted() -> None:
    payload = b"<order n='7'><item>confidential bolts</item></order>"

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(7, payload))
        await net.run_until(lambda: a.status(message_id).state.status.final)  # type: ignore[union-attr]
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        body = stored_body(a, message_id)
        assert b"confidential bolts" not in body and b"EncryptedData" in body
        [entry] = b.inbox(None)
        received = b.fetch(entry.id)
        try:
            [part] = received.message.payloads
            assert part.body.read_bytes() == payload
            assert part.media_type == "application/xml"
        finally:
            received.close()
        assert b.counters["decrypted"] == 1 and b.counters["signatures-verified"] >= 1
        submitted = [e.detail for e in events(a, message_id, Direction.OUTBOUND) if e.kind == "submitted"]
        assert submitted[0]["encrypted"] is True

    run_pair(scenario, cpa=encrypted())


def test_a_payload_that_does_not_decrypt_is_refused_with_security_failure() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.settle()
        assert _delivered(b) == []
        assert b.counters["security-failures"] == 1
        [attempt] = a.attempts(message_id)
        assert [e.error_code for e in attempt.errors] == [ErrorCode.SECURITY_FAILURE.value]
        assert any("cannot be decrypted" in (e.description or "") for e in attempt.errors)

    # B decrypts with another key than the one of the certificate A encrypts for.
    run_pair(scenario, cpa=encrypted(), b=settings("b", decryption_key=KEYS / "party-c.key.pem"))


def test_an_agreement_encrypting_for_us_is_refused_when_loaded_without_a_decryption_key() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        unset = {"signing_key": None, "signing_certificate": None, "decryption_key": None}
        with pytest.raises(ConfigurationError, match="SenderDigitalEnvelope encrypts payloads for us"):
            net.add("b2", settings("b", **unset), agreements=[agreement(encrypted())])

    run_pair(scenario)


def test_keys_are_read_from_encrypted_pem_with_the_passphrase_from_the_named_variable(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    from cryptography.hazmat.primitives import serialization

    from msh.runtime.config import SecuritySettings
    from msh.runtime.keys import load_keys

    folder = Path(str(tmp_path))
    key = load_private_key(KEYS / "party-a.key.pem")
    locked = folder / "a.key.pem"
    locked.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"s3cret"),
        )
    )
    chosen = SecuritySettings(locked, KEYS / "party-a.cert.pem", None, "TEST_MSH_PASSPHRASE")
    monkeypatch.delenv("TEST_MSH_PASSPHRASE", raising=False)
    with pytest.raises(ConfigurationError, match="TEST_MSH_PASSPHRASE holds no passphrase"):
        load_keys(chosen)
    monkeypatch.setenv("TEST_MSH_PASSPHRASE", "wrong")
    with pytest.raises(ConfigurationError, match="passphrase is wrong"):
        load_keys(chosen)
    monkeypatch.setenv("TEST_MSH_PASSPHRASE", "s3cret")
    keys = load_keys(chosen)
    assert keys.signing_key is not None and keys.decryption_key is not None
    mismatch = SecuritySettings(KEYS / "party-b.key.pem", KEYS / "party-a.cert.pem")
    with pytest.raises(ConfigurationError, match=r"is not the private key of security\.signing_certificate"):
        load_keys(mismatch)


# ------------------------------------------------------------------------------------------ multi-hop


def _signing_a(cpa: CollaborationProtocolAgreement, *, hop_receipt: bool = False) -> CollaborationProtocolAgreement:
    """``cpa`` (from tests.support.multihop) with A's business channels signing with A's demo certificate;
    ``hop_receipt``: A's nextMSH channel asks the intermediary for a signed acknowledgment."""
    [certificate] = load_certificates(KEYS / "party-a.cert.pem")
    named = Certificate("A_Sign", (certificate.public_bytes(Encoding.DER),))
    nr = NonRepudiation("http://www.w3.org/2000/09/xmldsig#", SHA256, RSA_SHA256, certificate=named)

    def signing(channel: DeliveryChannel) -> DeliveryChannel:
        if not channel.channel_id.startswith("A_") or channel.channel_id == "A_msh":
            return channel
        exchange = channel.doc_exchange
        assert exchange.sender_binding is not None
        sender = dataclasses.replace(exchange.sender_binding, non_repudiation=nr)
        channel = dataclasses.replace(channel, doc_exchange=dataclasses.replace(exchange, sender_binding=sender))
        if hop_receipt and channel.channel_id == "A_next":
            characteristics = dataclasses.replace(
                channel.messaging_characteristics, ack_signature_requested=PerMessage.ALWAYS
            )
            channel = dataclasses.replace(channel, messaging_characteristics=characteristics)
        return channel

    def bindings(actions: tuple[ActionBinding, ...]) -> tuple[ActionBinding, ...]:
        return tuple(dataclasses.replace(b, channels=tuple(signing(c) for c in b.channels)) for b in actions)

    infos = []
    for info in cpa.party_infos:
        roles = tuple(
            dataclasses.replace(
                r,
                service_binding=dataclasses.replace(
                    r.service_binding,
                    can_send=bindings(r.service_binding.can_send),
                    can_receive=bindings(r.service_binding.can_receive),
                ),
            )
            for r in info.collaboration_roles
        )
        infos.append(
            dataclasses.replace(
                info,
                collaboration_roles=roles,
                delivery_channels=tuple(signing(c) for c in info.delivery_channels),
            )
        )
    first, second = infos
    return dataclasses.replace(cpa, party_infos=(first, second))


def test_a_signed_message_passes_an_intermediary_unchanged_and_verifies_at_the_to_party() -> None:
    cpa = _signing_a(routed_cpa(de=True, e2e=True, hop=True))

    async def scenario(net: TestNetwork) -> None:
        path = multihop(net, cpa, keys={"a": (KEYS / "party-a.key.pem", KEYS / "party-a.cert.pem")})
        await net.start()
        message_id = await path.a.submit_async(multihop_order(1))
        await net.run_until(lambda: path.a.status(message_id).state.status.final)  # type: ignore[union-attr]
        assert path.a.status(message_id).state.status is OutboundStatus.DELIVERED  # type: ignore[union-attr]
        # C verified A's signature: the intermediary changed only the elements aimed at the next MSH,
        # which the signature leaves out (ebMS2 §4.1.3, §10.1.5), and signed nothing itself.
        assert [d["signed"] for d in _received(path.c, message_id)] == [True]
        assert path.c.counters["signatures-verified"] == 1
        [intermediary] = path.hops
        assert intermediary.counters["signatures-verified"] == 0
        sent = stored_body(path.a, message_id)
        forwarded = stored_body(intermediary, message_id)
        a_type = path.a.status(message_id).content_type  # type: ignore[union-attr]
        i_type = intermediary.status(message_id).content_type  # type: ignore[union-attr]
        signatures = [_soap(body, t).find(f".//{{{DS}}}Signature") for body, t in ((sent, a_type), (forwarded, i_type))]
        assert signatures[0] is not None and signatures[1] is not None
        assert etree.tostring(signatures[0], method="c14n") == etree.tostring(signatures[1], method="c14n")
        assert len(_soap(forwarded, i_type).findall(f".//{{{DS}}}Signature")) == 1  # never re-signed
        assert _delivered(path.c) == [message_id]

    async def main() -> None:
        net = TestNetwork(seed=2)
        try:
            await scenario(net)
        finally:
            await net.close()

    asyncio.run(main())


# ----------------------------------------------------------------------------------------------- demo


def test_the_demo_signs_with_fresh_key_pairs_its_agreement_copy_names(tmp_path: Path) -> None:
    from msh.demos.exchange import signing_agreement

    env = signing_agreement(tmp_path)
    copy = agreement(Path(env["A"]["MSH_AGREEMENTS_PATHS"]).read_bytes())
    a_info = copy.party_infos[0]
    assert {c.cert_id for c in a_info.certificates} == {"A_Cert", "A_SigningCert"}
    [mine] = load_certificates(env["A"]["MSH_SECURITY_SIGNING_CERTIFICATE"])
    named = {c.cert_id: c.x509[0] for c in a_info.certificates}["A_SigningCert"]
    assert named == mine.public_bytes(Encoding.DER)
    chosen = {
        name: load_settings(CONFIG / f"party-{name.lower()}.toml", env={**env[name], "MSH_STORE_URL": "memory:"})
        for name in ("A", "B")
    }

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.run_until(lambda: a.status(message_id).state.status.final)  # type: ignore[union-attr]
        assert a.status(message_id).state.status is OutboundStatus.DELIVERED  # type: ignore[union-attr]
        assert [d["signed"] for d in _received(b, message_id)] == [True]

    # The clock of the network must be within the new certificates' validity.
    run_pair(
        scenario,
        cpa=Path(env["A"]["MSH_AGREEMENTS_PATHS"]).read_bytes(),
        a=chosen["A"],
        b=chosen["B"],
        start=mine.not_valid_before_utc + timedelta(minutes=10),
    )


def test_an_intermediary_asked_for_a_signed_hop_acknowledgment_signs_it_over_the_whole_envelope() -> None:
    cpa = _signing_a(routed_cpa(de=True, e2e=True, hop=True), hop_receipt=True)

    async def scenario(net: TestNetwork) -> None:
        keys = {
            "a": (KEYS / "party-a.key.pem", KEYS / "party-a.cert.pem"),
            "i1": (KEYS / "intermediary.key.pem", KEYS / "intermediary.cert.pem"),
        }
        path = multihop(net, cpa, keys=keys)
        await net.start()
        message_id = await path.a.submit_async(multihop_order(1))
        await net.run_until(lambda: path.a.status(message_id).state.status.final)  # type: ignore[union-attr]
        assert path.a.status(message_id).state.status is OutboundStatus.DELIVERED  # type: ignore[union-attr]
        sent = _soap(stored_body(path.a, message_id), path.a.status(message_id).content_type)  # type: ignore[union-attr]
        asked = [a for a in sent.iter(f"{{{EB}}}AckRequested") if a.get(f"{{{SOAP}}}actor", "").endswith("nextMSH")]
        assert [a.get(f"{{{EB}}}signed") for a in asked] == ["true"]
        [intermediary] = path.hops
        assert intermediary.counters["signals-signed"] == 1  # its hop acknowledgment, signed; nothing else
        assert path.c.counters["signatures-verified"] == 1  # the forwarded message still verifies at C

    async def main() -> None:
        net = TestNetwork(seed=2)
        try:
            await scenario(net)
        finally:
            await net.close()

    asyncio.run(main())


def test_a_signal_aimed_only_at_the_next_msh_is_signed_without_the_xpath_filter() -> None:
    from msh.engine.intermediary import hop_acknowledgment
    from msh.runtime.security import MessageSecurity

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        envelope, _ = _unsigned_message(b, "hop-1@a.example")
        header = envelope.message_header
        assert header is not None
        hop = hop_acknowledgment(envelope, own_party=header.to_party, message_id="ack-hop@b", now=b.clock())
        end = acknowledgment_message(envelope, message_id="ack-end@b", now=b.clock())
        security: MessageSecurity = b.core.security
        for ack, filtered in ((hop, False), (end, True)):
            signed = security.sign_signal(ack, serialise_envelope(ack), receipt=True, now=b.clock())
            transforms = [t.get("Algorithm") for t in etree.fromstring(signed).iter(f"{{{DS}}}Transform")]
            assert (XPATH in transforms) is filtered

    run_pair(scenario)


def test_an_agreement_with_a_digital_envelope_the_msh_lacks_is_refused_when_loaded_naming_the_element() -> None:
    smime = encrypted().replace(b">XMLENC</", b">S/MIME</")

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        with pytest.raises(ConfigurationError) as caught:
            net.add("a2", settings("a"), agreements=[agreement(smime)])
        text = str(caught.value)
        assert "ebXMLSenderBinding/SenderDigitalEnvelope/DigitalEnvelopeProtocol 'S/MIME'" in text
        assert "is not implemented" in text

    run_pair(scenario)


def test_commands_that_only_read_the_store_need_no_key_passphrase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cryptography.hazmat.primitives import serialization

    from msh.cli import main

    locked = tmp_path / "a.key.pem"
    locked.write_bytes(
        load_private_key(KEYS / "party-a.key.pem").private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"s3cret"),
        )
    )
    config = tmp_path / "a.toml"
    config.write_text(
        "\n".join(
            [
                "[identity]",
                'party_id = "123456789"',
                'party_id_type = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"',
                "[agreements]",
                f"paths = [{str(CONFIG.parent / 'cpas' / 'demo-a-b.xml')!r}]",
                "[store]",
                f"url = {str(tmp_path / 'a.sqlite')!r}",
                "[server]",
                "tls = false",
                "[security]",
                f"signing_key = {str(locked)!r}",
                f"signing_certificate = {str(KEYS / 'party-a.cert.pem')!r}",
                'key_passphrase_env = "PYMSH_TEST_LOCKED"',
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    monkeypatch.delenv("PYMSH_TEST_LOCKED", raising=False)
    monkeypatch.delenv("MSH_CONFIG", raising=False)
    # Sending (and serving) needs the key: refused, saying which variable to set.
    assert main(["send", "--config", str(config), "--to", "987654321", "--service", SERVICE, "--action", ACTION]) == 2
    assert "PYMSH_TEST_LOCKED holds no passphrase" in capsys.readouterr().err
    # Reading the store does not.
    assert main(["status", "--config", str(config), "nope@a.example"]) == 1
    captured = capsys.readouterr()
    assert "nope@a.example: unknown" in captured.out and "passphrase" not in captured.err
    assert main(["inbox", "--config", str(config)]) == 0
    reader = Msh(load_settings(config, env={}), keys=False)
    try:
        with pytest.raises(ConfigurationError, match="opened without its keys"):
            asyncio.run(reader.start())
    finally:
        reader.close()


def test_a_signed_acknowledgment_asked_of_an_msh_without_a_signing_key_is_reported_as_a_warning() -> None:
    # ebMS2 §6.3.1.2: "If the Receiving MSH cannot return an Acknowledgment Message as requested it MUST report
    # the error to the Sending MSH using an errorCode of Inconsistent and a severity of ... Warning if not
    # supported": B takes the message and says so, rather than refusing it or answering unsigned in silence.
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.run_until(lambda: a.status(message_id).state.status.final)  # type: ignore[union-attr]
        assert _delivered(b) == [message_id]
        stored = a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.DELIVERED
        # A was told: the Warning came with the (unsigned) acknowledgment, and no receipt proves the content.
        found = {e.kind: e.detail for e in events(a, message_id, Direction.OUTBOUND)}
        [error] = found["error-received"]["errors"]  # type: ignore[misc]
        assert (error["errorCode"], error["severity"], error["location"]) == (
            "Inconsistent",
            "Warning",
            "//Header/AckRequested/@signed",
        )
        assert found["transmission"]["answer"] == "Acknowledgment, ErrorList"
        problem = stored.state.receipt_problem
        assert problem is not None and "not signed" in problem
        assert a.receipt(message_id) is None
        assert b.counters["signals-signed"] == 0

    run_pair(
        scenario,
        cpa=signed_acks(nobody_signs()),
        b=settings("b", signing_key=None, signing_certificate=None),
    )
