"""Payload encryption for an agreement whose DigitalEnvelope says XMLENC (ebMS2 §4.1.4.5, CPP/A 2.0 §8.4.44).

ebMS 2.0 leaves the form of an encrypted payload to XML Encryption and the parties; the one here is the
form the implementation that wrote the shared XMLENC agreements (ebms-core) sends and reads, which the
PHIN-MS captures also show:

* each payload MIME part keeps its Content-ID; its content becomes an XML document whose root is an
  ``xenc:EncryptedData`` (XML Encryption 1.0; AES-GCM from 1.1), sent as ``application/xml``;
* ``EncryptionMethod`` is the agreement's EncryptionAlgorithm, the session key fresh for every part;
* ``MimeType`` keeps the payload's own Content-Type, so the receiver restores it;
* no ``Type``: the plaintext is the payload's octets, not an XML element (a received ``Type`` of Element or
  Content is ignored: ebms-core and PHIN-MS write Element for any payload);
* ``ds:KeyInfo/xenc:EncryptedKey`` carries the session key encrypted for the receiver's encryption
  certificate (the agreement's EncryptionCertificateRef) with RSA-OAEP (``rsa-oaep-mgf1p``), its own
  ``ds:KeyInfo`` naming that certificate by KeyName (its subject) and X509IssuerSerial. RSA PKCS#1 v1.5
  (``rsa-1_5``), which both other implementations send, is read but never written.

Sign first, then encrypt (ebMS2 §4.1.4.5 note): the signature's ``cid:`` digests are of the payloads as
the application gave them, so a receiver decrypts (:func:`decrypt_payload`) before it verifies.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from lxml import etree

from msh.errors import ConfigurationError, EnvelopeError, SecurityError
from msh.safexml import XmlLimits, parse_xml
from msh.security.algorithms import EncryptionAlgorithm, KeyTransport, encryption_algorithm
from msh.security.library import private_key, public_key, transform, xmlsec
from msh.security.profile import ds

__all__ = ["ENCRYPTED_CONTENT_TYPE", "XMLENC", "DecryptedPayload", "decrypt_payload", "encrypt_payload"]

XMLENC: Final = "http://www.w3.org/2001/04/xmlenc#"
ENCRYPTED_CONTENT_TYPE: Final = "application/xml"
"""The Content-Type of an encrypted payload part."""


def _xenc(name: str) -> str:
    return f"{{{XMLENC}}}{name}"


@dataclass(frozen=True, slots=True)
class DecryptedPayload:
    """A payload as it was before encryption: its content and, when the sender said it, its Content-Type."""

    content: bytes
    content_type: str | None


def _session_key(algorithm: EncryptionAlgorithm) -> xmlsec.Key:
    klass = (
        xmlsec.constants.KeyDataDes if algorithm is EncryptionAlgorithm.TRIPLEDES_CBC else xmlsec.constants.KeyDataAes
    )
    return xmlsec.Key.generate(klass, algorithm.key_bits, xmlsec.constants.KeyDataTypeSession)


def _recipient_key_info(encrypted_key: etree._Element, certificate: x509.Certificate) -> None:
    key_info = etree.Element(ds("KeyInfo"))
    etree.SubElement(key_info, ds("KeyName")).text = certificate.subject.rfc4514_string()
    serial = etree.SubElement(etree.SubElement(key_info, ds("X509Data")), ds("X509IssuerSerial"))
    etree.SubElement(serial, ds("X509IssuerName")).text = certificate.issuer.rfc4514_string()
    etree.SubElement(serial, ds("X509SerialNumber")).text = str(certificate.serial_number)
    # XML Encryption §3.5.1: EncryptedKey's KeyInfo comes right after its EncryptionMethod.
    encrypted_key.insert(1, key_info)


def encrypt_payload(
    content: bytes,
    certificate: x509.Certificate,
    algorithm: str | EncryptionAlgorithm,
    *,
    content_type: str | None = None,
) -> bytes:
    """``content`` (a payload part's octets) as an ``xenc:EncryptedData`` document for the holder of
    ``certificate`` (the receiver's encryption certificate), with ``algorithm`` (the agreement's
    EncryptionAlgorithm URI); ``content_type`` is kept as its MimeType. Send it as
    :data:`ENCRYPTED_CONTENT_TYPE` under the part's Content-ID.

    Raises :class:`~msh.errors.ConfigurationError` when ``algorithm`` is not one the MSH implements or the
    certificate's key is not RSA.
    """
    method = encryption_algorithm(algorithm)
    if not isinstance(certificate.public_key(), rsa.RSAPublicKey):
        raise ConfigurationError(
            f"the encryption certificate {certificate.subject.rfc4514_string()} has no RSA key; XML Encryption "
            "key transport (rsa-oaep-mgf1p) needs one: name an RSA certificate in EncryptionCertificateRef"
        )
    holder = etree.Element("holder")
    data = xmlsec.template.encrypted_data_create(holder, transform(method), mime_type=content_type, ns="xenc")
    xmlsec.template.encrypted_data_ensure_cipher_value(data)
    key_info = xmlsec.template.encrypted_data_ensure_key_info(data, ns="ds")
    encrypted_key = xmlsec.template.add_encrypted_key(key_info, transform(KeyTransport.RSA_OAEP_MGF1P))
    xmlsec.template.encrypted_data_ensure_cipher_value(encrypted_key)
    manager = xmlsec.KeysManager()
    manager.add_key(public_key(certificate))
    context = xmlsec.EncryptionContext(manager)
    context.key = _session_key(method)
    result = context.encrypt_binary(data, content)
    _recipient_key_info(encrypted_key, certificate)
    return etree.tostring(result, xml_declaration=True, encoding="UTF-8")


def _fail(content_id: str, problem: str) -> SecurityError:
    where = f"cid:{content_id}" if content_id else ""
    name = f"payload part cid:{content_id}" if content_id else "the payload"
    return SecurityError(f"{name} cannot be decrypted: {problem}", location=where)


def decrypt_payload(
    document: bytes,
    key: rsa.RSAPrivateKey,
    *,
    content_id: str = "",
    algorithms: Collection[str] | None = None,
) -> DecryptedPayload:
    """The payload in the ``xenc:EncryptedData`` ``document`` (a received part's content), decrypted with
    ``key`` (the private key of our encryption certificate). ``algorithms``, when given, are the only
    EncryptionMethods accepted (the agreement's); ``content_id`` names the part in errors.

    Raises :class:`~msh.errors.SecurityError` (location ``cid:<content_id>``) when the part is not an
    EncryptedData, uses another algorithm, or does not decrypt with ``key`` (encrypted for another key, or
    changed on the way).
    """
    try:
        root = parse_xml(document, what="encrypted payload", limits=XmlLimits(max_bytes=max(len(document), 1)))
    except EnvelopeError as exc:
        raise _fail(content_id, f"it is not XML Encryption's EncryptedData ({exc.description})") from exc
    if root.tag != _xenc("EncryptedData"):
        raise _fail(content_id, f"its content is a {etree.QName(root).localname} element, not xenc:EncryptedData")
    method = root.find(_xenc("EncryptionMethod"))
    used = method.get("Algorithm", "") if method is not None else ""
    if algorithms is not None and used not in algorithms:
        raise _fail(
            content_id,
            f"it is encrypted with {used or 'no EncryptionMethod'}; the agreement says "
            f"{' or '.join(sorted(algorithms))}",
        )
    if used not in set(EncryptionAlgorithm):
        raise _fail(content_id, f"its EncryptionMethod {used or '(none)'} is not one the MSH implements")
    transports = {
        m.get("Algorithm", "") for m in root.iterfind(f".//{_xenc('EncryptedKey')}/{_xenc('EncryptionMethod')}")
    }
    if not transports or not transports <= set(KeyTransport):
        raise _fail(
            content_id, f"its session key is not sent with RSA key transport ({', '.join(transports) or 'none'})"
        )
    mime_type = root.get("MimeType")
    # The plaintext is the payload's octets whatever Type says (see the module docs).
    root.attrib.pop("Type", "")
    manager = xmlsec.KeysManager()
    manager.add_key(private_key(key))
    context = xmlsec.EncryptionContext(manager)
    try:
        plain: object = context.decrypt(root)
    except xmlsec.Error as exc:
        raise _fail(
            content_id,
            f"the session key or the data do not decrypt with our key ({exc}): it was encrypted for "
            "another certificate, or changed on the way",
        ) from exc
    if not isinstance(plain, bytes):
        raise _fail(content_id, "its plaintext is not octets")
    return DecryptedPayload(plain, mime_type)
