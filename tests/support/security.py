"""Keys, certificates and ebXML envelopes for the message-security tests, made at run time (nothing is kept
on disk): RSA keys are costly to make, so each name's key is made once per test session."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import dsa, rsa
from cryptography.x509.oid import NameOID

RSA_SHA1 = "http://www.w3.org/2000/09/xmldsig#rsa-sha1"
RSA_SHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
SHA1 = "http://www.w3.org/2000/09/xmldsig#sha1"
SHA256 = "http://www.w3.org/2001/04/xmlenc#sha256"
NOW = datetime.now(UTC)

PAYLOADS = {"order@a.example": b"<Order><Id>PO-1</Id></Order>", "scan@a.example": bytes(range(256)) * 4}

NEXT_MSH_ACK = (
    '<eb:AckRequested SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH" SOAP:mustUnderstand="1" '
    'eb:version="2.0" eb:signed="false"/>'
)
NEXT_MSH_ACKNOWLEDGMENT = (
    '<eb:Acknowledgment SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH" SOAP:mustUnderstand="1" '
    'eb:version="2.0"><eb:Timestamp>2026-01-01T00:00:00Z</eb:Timestamp>'
    "<eb:RefToMessageId>m-0@b.example</eb:RefToMessageId></eb:Acknowledgment>"
)
NEXT_SYNC_REPLY = (
    '<eb:SyncReply SOAP:actor="http://schemas.xmlsoap.org/soap/actor/next" SOAP:mustUnderstand="1" eb:version="2.0"/>'
)


@functools.cache
def dsa_key(name: str) -> dsa.DSAPrivateKey:
    """The DSA key called ``name``: 1024 bits, the size of the dsa-sha1 of ebMS2 §4.1.3's time (XML-DSig
    §6.4.1: a 160-bit q, SHA-1)."""
    return dsa.generate_private_key(key_size=1024)


@functools.cache
def dsa_certificate(name: str) -> x509.Certificate:
    """A self-signed certificate for ``name``'s DSA key."""
    key = dsa_key(name)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - timedelta(days=1))
        .not_valid_after(NOW + timedelta(days=30))
        .sign(key, hashes.SHA256())
    )


@functools.cache
def rsa_key(name: str) -> rsa.RSAPrivateKey:
    """The RSA key called ``name`` (the same object for the whole session)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def certificate(
    name: str,
    *,
    issuer: tuple[x509.Certificate, rsa.RSAPrivateKey] | None = None,
    ca: bool = False,
    not_before: datetime | None = None,
    not_after: datetime | None = None,
    key_name: str | None = None,
) -> x509.Certificate:
    """A certificate for ``name``'s key (or ``key_name``'s), self-signed or issued by ``issuer``."""
    key = rsa_key(key_name or name)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, signer = (issuer[0].subject, issuer[1]) if issuer is not None else (subject, key)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or NOW - timedelta(days=1))
        .not_valid_after(not_after or NOW + timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .sign(signer, hashes.SHA256())
    )


def envelope(
    *,
    payloads: tuple[str, ...] = tuple(PAYLOADS),
    header_extra: str = NEXT_MSH_ACK,
    message_id: str = "m-1@a.example",
    prefix: str = "SOAP",
) -> bytes:
    """An ebXML SOAP envelope from party A to B with a Manifest naming ``payloads`` and, in the Header,
    ``header_extra`` (by default an AckRequested aimed at the next MSH)."""
    refs = "".join(f'\n      <eb:Reference xlink:href="cid:{cid}" xlink:type="simple"/>' for cid in payloads)
    manifest = f'\n    <eb:Manifest eb:version="2.0">{refs}\n    </eb:Manifest>' if payloads else ""
    text = f"""<?xml version="1.0" encoding="UTF-8"?>
<SOAP:Envelope xmlns:SOAP="http://schemas.xmlsoap.org/soap/envelope/"
    xmlns:eb="http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd"
    xmlns:xlink="http://www.w3.org/1999/xlink">
  <SOAP:Header>
    <eb:MessageHeader SOAP:mustUnderstand="1" eb:version="2.0">
      <eb:From><eb:PartyId eb:type="urn:duns">123456789</eb:PartyId><eb:Role>Buyer</eb:Role></eb:From>
      <eb:To><eb:PartyId eb:type="urn:duns">987654321</eb:PartyId><eb:Role>Seller</eb:Role></eb:To>
      <eb:CPAId>cpa-a-b</eb:CPAId>
      <eb:ConversationId>conv-1</eb:ConversationId>
      <eb:Service eb:type="string">urn:example:services:ordering</eb:Service>
      <eb:Action>NewOrder</eb:Action>
      <eb:MessageData>
        <eb:MessageId>{message_id}</eb:MessageId>
        <eb:Timestamp>{NOW.strftime("%Y-%m-%dT%H:%M:%SZ")}</eb:Timestamp>
      </eb:MessageData>
      <eb:DuplicateElimination/>
    </eb:MessageHeader>
    {header_extra}
  </SOAP:Header>
  <SOAP:Body>{manifest}
  </SOAP:Body>
</SOAP:Envelope>
"""
    if prefix != "SOAP":
        text = text.replace("SOAP:", f"{prefix}:").replace("xmlns:SOAP=", f"xmlns:{prefix}=")
    return text.encode("utf-8")


def demo_agreement_bytes(certificates: dict[str, x509.Certificate], data: bytes | None = None) -> bytes:
    """The demo agreement (``samples/cpas/demo-a-b.xml``, or ``data``) with the certificates of the given
    certIds replaced (e.g. ``{"A_Cert": ...}``)."""
    import base64

    from cryptography.hazmat.primitives.serialization import Encoding
    from lxml import etree

    from tests.support.agreement_files import DEMO_A_B, DS, TP

    root = etree.fromstring(data if data is not None else DEMO_A_B.read_bytes())
    for cert_id, cert in certificates.items():
        path = (
            f".//{{{TP}}}Certificate[@{{{TP}}}certId='{cert_id}']"
            f"/{{{DS}}}KeyInfo/{{{DS}}}X509Data/{{{DS}}}X509Certificate"
        )
        node = root.find(path)
        assert node is not None, cert_id
        node.text = base64.b64encode(cert.public_bytes(Encoding.DER)).decode()
    return etree.tostring(root)


def demo_agreement(certificates: dict[str, x509.Certificate], data: bytes | None = None) -> object:
    """:func:`demo_agreement_bytes`, loaded."""
    from cpa.loader import load

    return load(demo_agreement_bytes(certificates, data))


def signed_sample_capture(key_name: str, cert: x509.Certificate, *, change: tuple[bytes, bytes] | None = None) -> bytes:
    """``samples/messages/order-request.http`` with its Timestamp and TimeToLive moved to now, signed with
    ``key_name``'s key (``cert`` in its KeyInfo), as a raw HTTP capture; ``change`` replaces bytes after
    signing (tampering on the way)."""
    import io
    from pathlib import Path

    from msh.ebms.message import read_message_file
    from msh.ebms.mime import AttachmentSpec, write_package
    from msh.security import sign

    sample = Path(__file__).resolve().parents[2] / "samples" / "messages" / "order-request.http"
    message = read_message_file(sample)
    try:
        soap = message.soap.replace(b"2026-11-01T09:30:00Z", NOW.strftime("%Y-%m-%dT%H:%M:%SZ").encode())
        soap = soap.replace(b"2026-11-02T09:30:00Z", (NOW + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ").encode())
        payloads = {p.content_id or "": p.body for p in message.payloads}
        signed = sign(soap, payloads, rsa_key(key_name), cert, RSA_SHA256, SHA256)
        out = io.BytesIO()
        specs = [
            AttachmentSpec(p.content_id or "", p.content_type, p.body, p.transfer_encoding) for p in message.payloads
        ]
        content_type = write_package(out, signed, specs, start_id="soap@a.example")
    finally:
        message.close()
    capture = b"POST /msh HTTP/1.1\r\nContent-Type: " + content_type.encode() + b'\r\nSOAPAction: "ebXML"\r\n\r\n'
    capture += out.getvalue()
    return capture.replace(*change) if change is not None else capture
