"""Message security as the agreement says it: signing and verification policies, payload encryption, and
the refusal of what the MSH does not implement (CPP/A 2.0 §8.4.40-§8.4.50)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cpa.check import check
from cpa.resolve import Exchange, resolve
from msh.ebms.message import read_message_file
from msh.errors import ConfigurationError, SecurityError
from msh.security import (
    DigestAlgorithm,
    SignatureAlgorithm,
    agreement_security_problems,
    check_agreement_security,
    encryption_policy,
    sign,
    signing_policy,
    verification_policy,
    verify_message,
)
from tests.support.agreement_files import demo_bytes, replace_once
from tests.support.security import NOW, certificate, demo_agreement, rsa_key

SAMPLE = Path(__file__).resolve().parents[3] / "samples" / "messages" / "order-request.http"


def _message_and_policy(cpa: Any) -> tuple[Any, Any]:
    message = read_message_file(SAMPLE)
    result = check(message.envelope, cpa, now=message.envelope.message_header.message_data.timestamp)
    assert result.sending_channel_id is not None, result.issues
    return message, verification_policy(cpa, result.sending_channel_id, result.receiving_channel_id)


def test_the_signing_policy_is_the_senders_non_repudiation() -> None:
    a = certificate("party A")
    cpa = demo_agreement({"A_Cert": a})
    header = read_message_file(SAMPLE).envelope.message_header
    params = resolve(cpa, Exchange.of_header(header), now=header.message_data.timestamp)
    policy = signing_policy(params)
    assert policy is not None
    assert (policy.signature_algorithm, policy.digest_algorithm) == (
        SignatureAlgorithm.RSA_SHA256,
        DigestAlgorithm.SHA256,
    )
    assert policy.certificate == a


def _signed(message: Any, key_name: str, cert: Any) -> tuple[bytes, dict[str, Any]]:
    payloads = {p.content_id: p.body for p in message.payloads}
    soap = sign(message.soap, payloads, rsa_key(key_name), cert, SignatureAlgorithm.RSA_SHA256, DigestAlgorithm.SHA256)
    return soap, payloads


def test_a_message_signed_with_the_from_partys_certificate_verifies() -> None:
    a = certificate("party A")
    message, policy = _message_and_policy(demo_agreement({"A_Cert": a}))
    assert policy.required and policy.certificates == (a,) and policy.anchors == (a,)
    soap, payloads = _signed(message, "party A", a)
    verification = verify_message(soap, payloads, policy, at=NOW)
    assert verification is not None and verification.signer == a


def test_a_missing_or_wrong_party_signature_is_a_security_failure() -> None:
    a = certificate("party A")
    message, policy = _message_and_policy(demo_agreement({"A_Cert": a}))
    payloads = {p.content_id: p.body for p in message.payloads}
    with pytest.raises(SecurityError, match="not signed"):
        verify_message(message.soap, payloads, policy, at=NOW)
    soap, payloads = _signed(message, "party C", certificate("party C"))
    with pytest.raises(SecurityError) as caught:
        verify_message(soap, payloads, policy, at=NOW)
    assert "SignatureValue does not verify with the key of CN=party A" in caught.value.description


def test_a_certificate_issued_by_the_ca_the_party_names_is_taken_from_the_keyinfo() -> None:
    ca = certificate("A's CA", ca=True)
    leaf = certificate("A's MSH", issuer=(ca, rsa_key("A's CA")), key_name="party A")
    message, policy = _message_and_policy(demo_agreement({"A_Cert": ca}))
    soap, payloads = _signed(message, "party A", leaf)
    verification = verify_message(soap, payloads, policy, at=NOW)
    assert verification is not None and verification.signer == leaf and verification.chain == (leaf, ca)
    # A certificate from another CA in the KeyInfo is never trusted for being there.
    stranger = certificate("C's MSH", key_name="party C")
    soap, payloads = _signed(message, "party C", stranger)
    with pytest.raises(SecurityError, match="KeyInfo carries the certificate CN=C's MSH"):
        verify_message(soap, payloads, policy, at=NOW)


def test_an_agreement_with_a_digital_envelope_the_msh_lacks_is_refused_naming_the_element() -> None:
    check_agreement_security(demo_agreement({}))
    smime = replace_once(
        demo_bytes(),
        b"</tp:SenderNonRepudiation>\n      </tp:ebXMLSenderBinding>",
        b'</tp:SenderNonRepudiation>\n<tp:SenderDigitalEnvelope><tp:DigitalEnvelopeProtocol tp:version="3.0">S/MIME'
        b"</tp:DigitalEnvelopeProtocol><tp:EncryptionAlgorithm>http://www.w3.org/2001/04/xmlenc#aes128-cbc"
        b"</tp:EncryptionAlgorithm></tp:SenderDigitalEnvelope>\n      </tp:ebXMLSenderBinding>",
    )
    cpa = demo_agreement({}, smime)
    problems = agreement_security_problems(cpa)
    assert len(problems) == 1
    assert (
        "DocExchange A_ReliableSigned, ebXMLSenderBinding/SenderDigitalEnvelope/DigitalEnvelopeProtocol 'S/MIME'"
        in problems[0]
    )
    with pytest.raises(ConfigurationError, match="XMLENC"):
        check_agreement_security(cpa)
    message = read_message_file(SAMPLE)
    result = check(message.envelope, cpa, now=message.envelope.message_header.message_data.timestamp)
    policy = encryption_policy(cpa, result.sending_channel_id, result.receiving_channel_id)
    assert policy is not None and policy.algorithm == "http://www.w3.org/2001/04/xmlenc#aes128-cbc"
    assert policy.certificate is None  # the receiver's binding names no EncryptionCertificateRef
    assert encryption_policy(demo_agreement({}), result.sending_channel_id, result.receiving_channel_id) is None
