"""Payload encryption for an XMLENC digital envelope (ebMS2 §4.1.4.5): round trips, the EncryptedData form,
and failures as SecurityFailure."""

from __future__ import annotations

import re

import pytest
import xmlsec
from lxml import etree

from msh.errors import ConfigurationError, SecurityError
from msh.security import (
    ENCRYPTED_CONTENT_TYPE,
    EncryptionAlgorithm,
    decrypt_payload,
    encrypt_payload,
    sign,
    verify,
)
from msh.security.encryption import XMLENC
from msh.security.library import private_key, public_key
from tests.support.security import PAYLOADS, RSA_SHA256, SHA256, certificate, envelope, rsa_key

CONTENT = bytes(range(256)) * 3 + b"end"


@pytest.mark.parametrize("algorithm", list(EncryptionAlgorithm))
def test_round_trip_for_every_encryption_algorithm(algorithm: EncryptionAlgorithm) -> None:
    document = encrypt_payload(CONTENT, certificate("party B"), algorithm, content_type="application/pdf")
    plain = decrypt_payload(document, rsa_key("party B"), algorithms={algorithm})
    assert (plain.content, plain.content_type) == (CONTENT, "application/pdf")


def test_the_encrypted_data_names_its_algorithm_recipient_and_content_type() -> None:
    cert = certificate("party B")
    root = etree.fromstring(encrypt_payload(CONTENT, cert, EncryptionAlgorithm.AES256_CBC, content_type="text/xml"))
    xenc = {"xenc": XMLENC, "ds": "http://www.w3.org/2000/09/xmldsig#"}
    assert root.tag == f"{{{XMLENC}}}EncryptedData" and root.get("Type") is None and root.get("MimeType") == "text/xml"
    assert root.find("xenc:EncryptionMethod", xenc).get("Algorithm") == EncryptionAlgorithm.AES256_CBC
    key = root.find("ds:KeyInfo/xenc:EncryptedKey", xenc)
    assert key.find("xenc:EncryptionMethod", xenc).get("Algorithm") == f"{XMLENC}rsa-oaep-mgf1p"
    assert key.findtext("ds:KeyInfo/ds:KeyName", namespaces=xenc) == "CN=party B"
    assert key.findtext("ds:KeyInfo/ds:X509Data/ds:X509IssuerSerial/ds:X509SerialNumber", namespaces=xenc) == str(
        cert.serial_number
    )
    assert ENCRYPTED_CONTENT_TYPE == "application/xml"


def test_two_encryptions_of_one_payload_differ() -> None:
    cert = certificate("party B")
    assert encrypt_payload(CONTENT, cert, EncryptionAlgorithm.AES128_GCM) != encrypt_payload(
        CONTENT, cert, EncryptionAlgorithm.AES128_GCM
    )


def _other_form(content: bytes, transport: object, element_type: bool) -> bytes:
    """EncryptedData as ebms-core and PHIN-MS write it: Type Element and RSA PKCS#1 v1.5 key transport."""
    holder = etree.Element("holder")
    data = xmlsec.template.encrypted_data_create(
        holder,
        xmlsec.constants.TransformAes256Cbc,
        type=f"{XMLENC}Element" if element_type else None,
        mime_type="application/octet-stream",
        ns="xenc",
    )
    xmlsec.template.encrypted_data_ensure_cipher_value(data)
    info = xmlsec.template.encrypted_data_ensure_key_info(data, ns="ds")
    key = xmlsec.template.add_encrypted_key(info, transport)
    xmlsec.template.encrypted_data_ensure_cipher_value(key)
    manager = xmlsec.KeysManager()
    manager.add_key(public_key(certificate("party B")))
    context = xmlsec.EncryptionContext(manager)
    context.key = xmlsec.Key.generate(xmlsec.constants.KeyDataAes, 256, xmlsec.constants.KeyDataTypeSession)
    return etree.tostring(context.encrypt_binary(data, content))


def test_the_forms_other_implementations_send_are_read() -> None:
    for transport in (xmlsec.constants.TransformRsaPkcs1, xmlsec.constants.TransformRsaOaep):
        document = _other_form(CONTENT, transport, element_type=True)
        assert decrypt_payload(document, rsa_key("party B")).content == CONTENT


def test_a_payload_for_another_key_or_changed_is_a_security_failure() -> None:
    document = encrypt_payload(CONTENT, certificate("party B"), EncryptionAlgorithm.AES256_CBC)
    with pytest.raises(SecurityError) as caught:
        decrypt_payload(document, rsa_key("party C"), content_id="scan@a.example")
    assert caught.value.location == "cid:scan@a.example"
    assert "do not decrypt with our key" in caught.value.description
    # GCM authenticates the ciphertext; a CBC payload changed on the way is caught by the signature's digest.
    document = encrypt_payload(CONTENT, certificate("party B"), EncryptionAlgorithm.AES128_GCM)
    value = etree.fromstring(document).find(f"{{{XMLENC}}}CipherData/{{{XMLENC}}}CipherValue")
    broken = document.replace(value.text.encode()[:40], b"A" * 40)
    with pytest.raises(SecurityError):
        decrypt_payload(broken, rsa_key("party B"))


def test_a_plain_payload_or_another_algorithm_is_refused_where_encryption_is_agreed() -> None:
    with pytest.raises(SecurityError, match="not xenc:EncryptedData"):
        decrypt_payload(b"<Order/>", rsa_key("party B"), content_id="o@x")
    with pytest.raises(SecurityError, match="not XML Encryption's EncryptedData"):
        decrypt_payload(b"%PDF-1.4", rsa_key("party B"), content_id="o@x")
    document = encrypt_payload(CONTENT, certificate("party B"), EncryptionAlgorithm.TRIPLEDES_CBC)
    with pytest.raises(
        SecurityError, match=re.escape("the agreement says http://www.w3.org/2001/04/xmlenc#aes256-cbc")
    ):
        decrypt_payload(document, rsa_key("party B"), algorithms={EncryptionAlgorithm.AES256_CBC})


def test_an_unknown_algorithm_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="EncryptionAlgorithm 'urn:rc4'"):
        encrypt_payload(CONTENT, certificate("party B"), "urn:rc4")


def test_sign_then_encrypt_then_decrypt_then_verify() -> None:
    # ebMS2 §4.1.4.5: sign first, then encrypt; the receiver decrypts, then verifies.
    signed = sign(envelope(), PAYLOADS, rsa_key("party A"), certificate("party A"), RSA_SHA256, SHA256)
    sent = {
        cid: encrypt_payload(data, certificate("party B"), EncryptionAlgorithm.AES256_CBC)
        for cid, data in PAYLOADS.items()
    }
    received = {cid: decrypt_payload(data, rsa_key("party B"), content_id=cid).content for cid, data in sent.items()}
    verify(signed, received, certificate("party A"))
    with pytest.raises(SecurityError):
        verify(signed, sent, certificate("party A"))
    assert private_key(rsa_key("party B")) is not None
