"""Message security on material from other implementations (``shared/interop``, read in place; skipped
when absent): the XML-DSig and XMLENC agreements of ebms-core, PHIN-MS's encrypted payload, and a
signature made by jphineas (Apache Santuario) checked by libxmlsec."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import xmlsec
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicNumbers
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from lxml import etree

from cpa.loader import load
from cpa.resolve import routes
from msh.ebms.message import read_message_file
from msh.errors import SecurityError
from msh.security import (
    EncryptionAlgorithm,
    check_agreement_security,
    check_receipt,
    decrypt_payload,
    encrypt_payload,
    encryption_policy,
    receipt_references,
    sign,
    verification_policy,
    verify,
)
from msh.security.library import restrict_transforms
from tests.support.security import NOW, PAYLOADS, certificate, envelope, rsa_key
from tests.support.shared import SHARED, shared_dir

pytestmark = pytest.mark.interop

CPAS = SHARED / "interop" / "cpas"
PHINMS = SHARED / "interop" / "messages" / "phinms"
SIGNED_CPAS = {
    "cpaStubEBF.rm.https.signed.xml": ("rsa-sha1", "#sha1"),
    "cpaStubEBF.rm.https.signed-sha256.xml": ("rsa-sha256", "#sha256"),
    "cpaStubEBF.rm.https.signed.ackSigned.xml": ("rsa-sha1", "#sha1"),
    "cpaStubEBF.rm.https.signed.encrypted.xml": ("rsa-sha1", "#sha1"),
    "cpaStubEBF.be.http.signed.xml": ("rsa-sha1", "#sha1"),
}


def _route(name: str):  # type: ignore[no-untyped-def]
    shared_dir()
    cpa = load(CPAS / name)
    route = next(r for r in routes(cpa) if r.action == "aanleveren")
    return cpa, route


@pytest.mark.parametrize("name", SIGNED_CPAS)
def test_the_signed_agreements_give_their_algorithms_and_certificates(name: str) -> None:
    cpa, route = _route(name)
    check_agreement_security(cpa)
    policy = verification_policy(cpa, route.sending.channel_id, route.receiving.channel_id)
    signature, digest = SIGNED_CPAS[name]
    assert policy.required
    assert [a.rsplit("#", 1)[-1] for a in policy.signature_algorithms or ()] == [signature]
    assert [a[a.index("#") :] for a in policy.digest_algorithms or ()] == [digest]
    assert policy.certificates[0].subject.rfc4514_string().startswith("CN=localhost")
    assert policy.anchors  # the receiver's SigningSecurityDetails
    # A round trip with the agreement's algorithms (our own key: the agreement's private key is not ours).
    (algorithm,), (hash_function,) = policy.signature_algorithms, policy.digest_algorithms  # type: ignore[misc]
    cert = certificate("party A")
    signed = sign(envelope(), PAYLOADS, rsa_key("party A"), cert, algorithm, hash_function)
    verify(signed, PAYLOADS, cert, signature_algorithms={algorithm}, digest_algorithms={hash_function}, at=NOW)


def test_the_encrypted_agreement_encrypts_with_aes256_for_the_receivers_certificate() -> None:
    cpa, route = _route("cpaStubEBF.rm.https.signed.encrypted.xml")
    policy = encryption_policy(cpa, route.sending.channel_id, route.receiving.channel_id)
    assert policy is not None and policy.algorithm is EncryptionAlgorithm.AES256_CBC
    assert policy.certificate is not None and policy.certificate.subject.rfc4514_string().startswith("CN=localhost")
    # For the agreement's certificate (whose key only its owner has): the EncryptedKey names it.
    document = encrypt_payload(b"payload", policy.certificate, policy.algorithm, content_type="text/xml")
    assert b"CN=localhost" in document and b"aes256-cbc" in document
    # And the round trip with the agreement's algorithm, for a certificate whose key we hold.
    mine = encrypt_payload(b"payload", certificate("party B"), policy.algorithm, content_type="text/xml")
    assert decrypt_payload(mine, rsa_key("party B"), algorithms={policy.algorithm}).content == b"payload"
    unencrypted, unencrypted_route = _route("cpaStubEBF.rm.https.signed.xml")
    channels = (unencrypted_route.sending.channel_id, unencrypted_route.receiving.channel_id)
    assert encryption_policy(unencrypted, *channels) is None


def test_a_receipt_for_the_ack_signed_agreement_uses_its_hash_function() -> None:
    cpa, route = _route("cpaStubEBF.rm.https.signed.ackSigned.xml")
    policy = verification_policy(cpa, route.sending.channel_id, route.receiving.channel_id)
    (digest,) = policy.digest_algorithms  # type: ignore[misc]
    references = receipt_references(envelope(), PAYLOADS, digest=digest)
    assert all(digest in r for r in references)
    check_receipt(references, envelope(), PAYLOADS)


def test_phinms_encrypted_payload_is_read_as_xml_encryption() -> None:
    shared_dir()
    message = read_message_file(PHINMS / "examples" / "request2.txt")
    try:
        (part,) = message.payloads
        document = part.body.read_bytes()
    finally:
        message.close()
    assert b"tripledes-cbc" in document and b"rsa-1_5" in document
    # Encrypted for PHIN-MS's own key: the form is understood up to the key, which is not ours.
    with pytest.raises(SecurityError) as caught:
        decrypt_payload(document, rsa_key("party B"), content_id=part.content_id or "")
    assert caught.value.location == f"cid:{part.content_id}"
    assert "do not decrypt with our key" in caught.value.description


def _key_value(signature: etree._Element) -> bytes:
    ns = {"ds": "http://www.w3.org/2000/09/xmldsig#"}

    def number(name: str) -> int:
        text = signature.findtext(f"ds:KeyInfo/ds:KeyValue/ds:RSAKeyValue/ds:{name}", namespaces=ns) or ""
        return int.from_bytes(base64.b64decode("".join(text.split())), "big")

    key = RSAPublicNumbers(number("Exponent"), number("Modulus")).public_key()
    return key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)


def _verify_jphineas(data: bytes) -> None:
    root = etree.fromstring(data)
    signature = root.find("{http://www.w3.org/2000/09/xmldsig#}Signature")
    context = restrict_transforms(xmlsec.SignatureContext())
    context.key = xmlsec.Key.from_memory(_key_value(signature), xmlsec.constants.KeyDataFormatPem)
    context.verify(signature)


def test_libxmlsec_verifies_a_signature_made_by_another_implementation() -> None:
    shared_dir()
    data = Path(PHINMS / "jphineas" / "SignFile.signed.xml").read_bytes()
    _verify_jphineas(data)
    with pytest.raises(xmlsec.Error):
        _verify_jphineas(data.replace(b"John Doe", b"Jane Doe"))
