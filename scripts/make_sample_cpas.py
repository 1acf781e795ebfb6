#!/usr/bin/env python3
"""Write the sample CPP/CPA 2.0 agreements into samples/cpas/, with their demo keys in samples/keys/.

Run from the checkout: ``python scripts/make_sample_cpas.py``. The keys and certificates are made once
(RSA 2048, self-signed, valid 10 years) and reused on later runs, so the agreements come out byte for
byte the same; ``--new-keys`` replaces them (and so changes the certificates embedded in the agreements).
The private keys are for the demo only: they are published in the repository.

* ``demo-a-b.xml``: party A (Buyer, 123456789) and party B (Seller, 987654321), reliable (acks always,
  duplicate elimination always, 5 retries every 30 s, persisted 1 day), signed with rsa-sha256, over
  HTTPS with TLS client authentication.
* ``demo-routed-a-c.xml``: party A and party C (Seller, 555555555) reached through an intermediary:
  C's endpoint is the intermediary's. A message to C asks for two acknowledgments, so its action binds
  two channels (a MessagingCharacteristics has one actor): one with actor nextMSH (the intermediary's
  ack) and one with actor toPartyMSH (C's end-to-end ack).
"""

from __future__ import annotations

import argparse
import ipaddress
import textwrap
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ROOT = Path(__file__).resolve().parents[1]
CPAS = ROOT / "samples" / "cpas"
KEYS = ROOT / "samples" / "keys"

TP = "http://www.oasis-open.org/committees/ebxml-cppa/schema/cpp-cpa-2_0.xsd"
PARTY_ID_TYPE = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
SERVICE = "urn:example:services:ordering"
NEXT_MSH = "urn:oasis:names:tc:ebxml-msg:actor:nextMSH"
TO_PARTY_MSH = "urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH"
MSG_HEADER_XSD = "http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd"
RSA_SHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
SHA256 = "http://www.w3.org/2001/04/xmlenc#sha256"


# --------------------------------------------------------------------------------------------------
# Keys and certificates
# --------------------------------------------------------------------------------------------------


def make_key_pair(name: str, common_name: str) -> None:
    """An RSA 2048 key and a self-signed certificate valid 10 years, usable for TLS (server and client,
    on 127.0.0.1 and localhost) and for XML signatures, written as PEM into samples/keys/."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pymsh demo (not for production)"),
        ]
    )
    now = datetime.now(UTC).replace(microsecond=0)
    public = key.public_key()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=3650))
        # Self-signed and trusted as its own anchor: a CA certificate that is also the TLS end entity.
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=True,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.IPv4Address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    KEYS.mkdir(parents=True, exist_ok=True)
    (KEYS / f"{name}.key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (KEYS / f"{name}.cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))


def certificate_base64(name: str, indent: str) -> str:
    """The base64 body of samples/keys/NAME.cert.pem, one 64-character line per line of the XML."""
    pem = (KEYS / f"{name}.cert.pem").read_text(encoding="ascii")
    lines = [line for line in pem.splitlines() if line and not line.startswith("-----")]
    return "\n".join(indent + line for line in lines)


def certificate_element(cert_id: str, key_name: str, indent: str) -> str:
    body = certificate_base64(key_name, indent + "      ")
    return (
        f'{indent}<tp:Certificate tp:certId="{cert_id}">\n'
        f"{indent}  <ds:KeyInfo>\n"
        f"{indent}    <ds:X509Data>\n"
        f"{indent}      <ds:X509Certificate>\n{body}\n{indent}      </ds:X509Certificate>\n"
        f"{indent}    </ds:X509Data>\n"
        f"{indent}  </ds:KeyInfo>\n"
        f"{indent}</tp:Certificate>\n"
    )


# --------------------------------------------------------------------------------------------------
# Agreements
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Channel:
    """A DeliveryChannel and its MessagingCharacteristics."""

    channel_id: str
    doc_exchange_id: str
    ack_requested: str
    duplicate_elimination: str
    sync_reply_mode: str
    actor: str


@dataclass(frozen=True)
class Action:
    """A ThisPartyActionBinding with the channels it uses and the other party's matching binding."""

    direction: str  # CanSend / CanReceive
    binding_id: str
    action: str
    channel_ids: tuple[str, ...]
    other_binding_id: str


@dataclass(frozen=True)
class Party:
    """What differs between the PartyInfo elements of the samples."""

    key: str  # A, B, C
    name: str
    party_id: str
    role: str
    endpoint: str
    actions: tuple[Action, ...]
    channels: tuple[Channel, ...]
    certificates: tuple[tuple[str, str], ...]  # (certId, key file name)
    server_certificate: str  # certId of the certificate the endpoint presents in TLS
    trusted: tuple[str, ...]  # certIds of the certificates this party trusts (its peers')
    comment: str = ""


def reliable_messaging(indent: str) -> str:
    return (
        f"{indent}<tp:ReliableMessaging>\n"
        f"{indent}  <tp:Retries>5</tp:Retries>\n"
        f"{indent}  <tp:RetryInterval>PT5S</tp:RetryInterval>\n"
        f"{indent}  <tp:MessageOrderSemantics>NotGuaranteed</tp:MessageOrderSemantics>\n"
        f"{indent}</tp:ReliableMessaging>\n"
        f"{indent}<tp:PersistDuration>P1D</tp:PersistDuration>\n"
    )


def non_repudiation(side: str, ref: str, indent: str) -> str:
    return (
        f"{indent}<tp:{side}NonRepudiation>\n"
        f"{indent}  <tp:NonRepudiationProtocol>http://www.w3.org/2000/09/xmldsig#</tp:NonRepudiationProtocol>\n"
        f"{indent}  <tp:HashFunction>{SHA256}</tp:HashFunction>\n"
        f"{indent}  <tp:SignatureAlgorithm>{RSA_SHA256}</tp:SignatureAlgorithm>\n"
        f"{indent}  {ref}\n"
        f"{indent}</tp:{side}NonRepudiation>\n"
    )


def doc_exchange(party: Party, doc_exchange_id: str, reliable: bool) -> str:
    i = "    "
    rm = reliable_messaging(i + "    ") if reliable else ""
    signing = non_repudiation("Sender", f'<tp:SigningCertificateRef tp:certId="{party.key}_Cert"/>', i + "    ")
    trusting = non_repudiation(
        "Receiver", f'<tp:SigningSecurityDetailsRef tp:securityId="{party.key}_TrustedPeers"/>', i + "    "
    )
    return (
        f'{i}<tp:DocExchange tp:docExchangeId="{doc_exchange_id}">\n'
        f'{i}  <tp:ebXMLSenderBinding tp:version="2.0">\n'
        f"{rm}{signing}"
        f"{i}  </tp:ebXMLSenderBinding>\n"
        f'{i}  <tp:ebXMLReceiverBinding tp:version="2.0">\n'
        f"{rm}{trusting}"
        f"{i}  </tp:ebXMLReceiverBinding>\n"
        f"{i}</tp:DocExchange>\n"
    )


def party_info(party: Party) -> str:
    i = "    "
    k = party.key
    parts: list[str] = []
    if party.comment:
        parts.append(f"  <!-- {party.comment} -->\n")
    parts.append(
        f'  <tp:PartyInfo tp:partyName="{party.name}" tp:defaultMshChannelId="{k}_SignalChannel"'
        f' tp:defaultMshPackageId="MshSignalPackage">\n'
        f'{i}<tp:PartyId tp:type="{PARTY_ID_TYPE}">{party.party_id}</tp:PartyId>\n'
        f'{i}<tp:PartyRef xlink:type="simple" xlink:href="urn:example:parties:{party.party_id}"/>\n'
        f"{i}<tp:CollaborationRole>\n"
        f'{i}  <tp:ProcessSpecification tp:name="Ordering" tp:version="1.0" xlink:type="simple"'
        f' xlink:href="urn:example:processes:ordering"/>\n'
        f'{i}  <tp:Role tp:name="{party.role}" xlink:type="simple"'
        f' xlink:href="urn:example:processes:ordering#{party.role}"/>\n'
        f"{i}  <tp:ServiceBinding>\n"
        f"{i}    <tp:Service>{SERVICE}</tp:Service>\n"
    )
    # The schema wants every CanSend before every CanReceive.
    for direction in ("CanSend", "CanReceive"):
        for action in (a for a in party.actions if a.direction == direction):
            channels = "".join(f"{i}        <tp:ChannelId>{c}</tp:ChannelId>\n" for c in action.channel_ids)
            parts.append(
                f"{i}    <tp:{direction}>\n"
                f'{i}      <tp:ThisPartyActionBinding tp:id="{action.binding_id}" tp:action="{action.action}"'
                f' tp:packageId="BusinessPackage">\n'
                f'{i}        <tp:BusinessTransactionCharacteristics tp:isNonRepudiationRequired="true"'
                f' tp:isNonRepudiationReceiptRequired="false" tp:isAuthenticated="persistent"'
                f' tp:isTamperProof="persistent" tp:isConfidential="transient" tp:isAuthorizationRequired="true"'
                f' tp:timeToPerform="P1D"/>\n'
                f"{channels}"
                f"{i}      </tp:ThisPartyActionBinding>\n"
                f"{i}      <tp:OtherPartyActionBinding>{action.other_binding_id}</tp:OtherPartyActionBinding>\n"
                f"{i}    </tp:{direction}>\n"
            )
    parts.append(f"{i}  </tp:ServiceBinding>\n{i}</tp:CollaborationRole>\n")
    for cert_id, key_name in party.certificates:
        parts.append(certificate_element(cert_id, key_name, i))
    anchors = "".join(f'{i}    <tp:AnchorCertificateRef tp:certId="{c}"/>\n' for c in party.trusted)
    parts.append(
        f'{i}<tp:SecurityDetails tp:securityId="{k}_TrustedPeers">\n'
        f"{i}  <tp:TrustAnchors>\n{anchors}{i}  </tp:TrustAnchors>\n"
        f"{i}</tp:SecurityDetails>\n"
    )
    for c in party.channels:
        parts.append(
            f'{i}<tp:DeliveryChannel tp:channelId="{c.channel_id}" tp:transportId="{k}_Transport"'
            f' tp:docExchangeId="{c.doc_exchange_id}">\n'
            f'{i}  <tp:MessagingCharacteristics tp:syncReplyMode="{c.sync_reply_mode}"'
            f' tp:ackRequested="{c.ack_requested}" tp:ackSignatureRequested="never"'
            f' tp:duplicateElimination="{c.duplicate_elimination}" tp:actor="{c.actor}"/>\n'
            f"{i}</tp:DeliveryChannel>\n"
        )
    parts.append(
        f'{i}<tp:Transport tp:transportId="{k}_Transport">\n'
        f"{i}  <tp:TransportSender>\n"
        f'{i}    <tp:TransportProtocol tp:version="1.1">HTTP</tp:TransportProtocol>\n'
        f"{i}    <tp:TransportClientSecurity>\n"
        f'{i}      <tp:TransportSecurityProtocol tp:version="1.2">TLS</tp:TransportSecurityProtocol>\n'
        f'{i}      <tp:ClientCertificateRef tp:certId="{k}_Cert"/>\n'
        f'{i}      <tp:ServerSecurityDetailsRef tp:securityId="{k}_TrustedPeers"/>\n'
        f"{i}    </tp:TransportClientSecurity>\n"
        f"{i}  </tp:TransportSender>\n"
        f"{i}  <tp:TransportReceiver>\n"
        f'{i}    <tp:TransportProtocol tp:version="1.1">HTTP</tp:TransportProtocol>\n'
        f'{i}    <tp:Endpoint tp:uri="{party.endpoint}" tp:type="allPurpose"/>\n'
        f"{i}    <tp:TransportServerSecurity>\n"
        f'{i}      <tp:TransportSecurityProtocol tp:version="1.2">TLS</tp:TransportSecurityProtocol>\n'
        f'{i}      <tp:ServerCertificateRef tp:certId="{party.server_certificate}"/>\n'
        f'{i}      <tp:ClientSecurityDetailsRef tp:securityId="{k}_TrustedPeers"/>\n'
        f"{i}    </tp:TransportServerSecurity>\n"
        f"{i}  </tp:TransportReceiver>\n"
        f"{i}</tp:Transport>\n"
    )
    parts.append(doc_exchange(party, f"{k}_ReliableSigned", reliable=True))
    parts.append(doc_exchange(party, f"{k}_Signals", reliable=False))
    parts.append("  </tp:PartyInfo>\n")
    return "".join(parts)


def agreement(cpaid: str, comment: str, first: Party, second: Party) -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<!-- {comment} -->\n"
        f'<tp:CollaborationProtocolAgreement xmlns:tp="{TP}"\n'
        '    xmlns:ds="http://www.w3.org/2000/09/xmldsig#" xmlns:xlink="http://www.w3.org/1999/xlink"\n'
        f'    tp:cpaid="{cpaid}" tp:version="1.0">\n'
        '  <tp:Status tp:value="agreed"/>\n'
        "  <tp:Start>2026-01-01T00:00:00Z</tp:Start>\n"
        "  <tp:End>2036-01-01T00:00:00Z</tp:End>\n"
        f"{party_info(first)}"
        f"{party_info(second)}"
        '  <tp:SimplePart tp:id="MsgHdr" tp:mimetype="text/xml">\n'
        f'    <tp:NamespaceSupported tp:location="{MSG_HEADER_XSD}" tp:version="2.0">{MSG_HEADER_XSD}'
        "</tp:NamespaceSupported>\n"
        "  </tp:SimplePart>\n"
        '  <tp:SimplePart tp:id="XmlPayload" tp:mimetype="application/xml"/>\n'
        '  <tp:SimplePart tp:id="Attachment" tp:mimetype="application/octet-stream"/>\n'
        '  <tp:Packaging tp:id="MshSignalPackage">\n'
        '    <tp:ProcessingCapabilities tp:parse="true" tp:generate="true"/>\n'
        "    <tp:CompositeList>\n"
        '      <tp:Composite tp:id="MshSignal" tp:mimetype="multipart/related" tp:mimeparameters="type=text/xml">\n'
        '        <tp:Constituent tp:idref="MsgHdr"/>\n'
        "      </tp:Composite>\n"
        "    </tp:CompositeList>\n"
        "  </tp:Packaging>\n"
        '  <tp:Packaging tp:id="BusinessPackage">\n'
        '    <tp:ProcessingCapabilities tp:parse="true" tp:generate="true"/>\n'
        "    <tp:CompositeList>\n"
        '      <tp:Composite tp:id="BusinessMessage" tp:mimetype="multipart/related"'
        ' tp:mimeparameters="type=text/xml">\n'
        '        <tp:Constituent tp:idref="MsgHdr"/>\n'
        '        <tp:Constituent tp:idref="XmlPayload" tp:minOccurs="0" tp:maxOccurs="1"/>\n'
        '        <tp:Constituent tp:idref="Attachment" tp:minOccurs="0" tp:maxOccurs="9"/>\n'
        "      </tp:Composite>\n"
        "    </tp:CompositeList>\n"
        "  </tp:Packaging>\n"
        '  <tp:Comment xml:lang="en">Demo agreement of pymsh. The private keys of its certificates are published'
        " in samples/keys/: never use them outside the demo.</tp:Comment>\n"
        "</tp:CollaborationProtocolAgreement>\n"
    )


def reliable(channel_id: str, doc_exchange_id: str, actor: str, sync_reply_mode: str) -> Channel:
    return Channel(channel_id, doc_exchange_id, "always", "always", sync_reply_mode, actor)


def signals(key: str) -> Channel:
    # The default MSH channel carries signals (acknowledgments, errors, status): never acknowledged.
    return Channel(f"{key}_SignalChannel", f"{key}_Signals", "never", "never", "none", TO_PARTY_MSH)


def demo_a_b() -> str:
    a = Party(
        key="A",
        name="Party A",
        party_id="123456789",
        role="Buyer",
        endpoint="https://127.0.0.1:8081/msh",
        actions=(
            Action("CanSend", "A_Send_NewOrder", "NewOrder", ("A_Channel",), "B_Receive_NewOrder"),
            Action("CanReceive", "A_Receive_OrderResponse", "OrderResponse", ("A_Channel",), "B_Send_OrderResponse"),
        ),
        channels=(reliable("A_Channel", "A_ReliableSigned", TO_PARTY_MSH, "mshSignalsOnly"), signals("A")),
        certificates=(("A_Cert", "party-a"),),
        server_certificate="A_Cert",
        trusted=("B_Cert",),
    )
    b = Party(
        key="B",
        name="Party B",
        party_id="987654321",
        role="Seller",
        endpoint="https://127.0.0.1:8082/msh",
        actions=(
            Action("CanSend", "B_Send_OrderResponse", "OrderResponse", ("B_Channel",), "A_Receive_OrderResponse"),
            Action("CanReceive", "B_Receive_NewOrder", "NewOrder", ("B_Channel",), "A_Send_NewOrder"),
        ),
        channels=(reliable("B_Channel", "B_ReliableSigned", TO_PARTY_MSH, "mshSignalsOnly"), signals("B")),
        certificates=(("B_Cert", "party-b"),),
        server_certificate="B_Cert",
        trusted=("A_Cert",),
    )
    return agreement(
        "cpa-demo-a-b",
        "pymsh demo: Party A (Buyer) and Party B (Seller) order over HTTPS with TLS client authentication, "
        "reliably (acknowledgments and duplicate elimination always, 5 retries every 30 s, kept 1 day) and "
        "signed (rsa-sha256). Written by scripts/make_sample_cpas.py.",
        a,
        b,
    )


def demo_routed_a_c() -> str:
    both = ("A_Channel_ToParty", "A_Channel_NextMsh")
    a = Party(
        key="A",
        name="Party A",
        party_id="123456789",
        role="Buyer",
        endpoint="https://127.0.0.1:8081/msh",
        actions=(
            Action("CanSend", "A_Send_NewOrder", "NewOrder", both, "C_Receive_NewOrder"),
            Action(
                "CanReceive", "A_Receive_OrderResponse", "OrderResponse", ("A_Channel_ToParty",), "C_Send_OrderResponse"
            ),
        ),
        channels=(
            reliable("A_Channel_ToParty", "A_ReliableSigned", TO_PARTY_MSH, "none"),
            reliable("A_Channel_NextMsh", "A_ReliableSigned", NEXT_MSH, "none"),
            signals("A"),
        ),
        certificates=(("A_Cert", "party-a"),),
        server_certificate="A_Cert",
        trusted=("C_Cert", "C_IntermediaryCert"),
    )
    c = Party(
        key="C",
        name="Party C",
        party_id="555555555",
        role="Seller",
        endpoint="https://127.0.0.1:8090/msh",
        actions=(
            Action(
                "CanSend", "C_Send_OrderResponse", "OrderResponse", ("C_Channel_ToParty",), "A_Receive_OrderResponse"
            ),
            Action(
                "CanReceive",
                "C_Receive_NewOrder",
                "NewOrder",
                ("C_Channel_ToParty", "C_Channel_NextMsh"),
                "A_Send_NewOrder",
            ),
        ),
        channels=(
            reliable("C_Channel_ToParty", "C_ReliableSigned", TO_PARTY_MSH, "none"),
            reliable("C_Channel_NextMsh", "C_ReliableSigned", NEXT_MSH, "none"),
            signals("C"),
        ),
        certificates=(("C_Cert", "party-c"), ("C_IntermediaryCert", "intermediary")),
        server_certificate="C_IntermediaryCert",
        trusted=("A_Cert",),
        comment=(
            "Party C is reached through an intermediary: its endpoint is the intermediary's, which presents "
            "C_IntermediaryCert in TLS; messages are signed end to end with C_Cert. A NewOrder binds two channels "
            "so as to ask for both acknowledgments: actor nextMSH (the intermediary's) and toPartyMSH (C's)."
        ),
    )
    return agreement(
        "cpa-demo-routed-a-c",
        "pymsh demo: Party A (Buyer) and Party C (Seller), C reached through an intermediary at "
        "https://127.0.0.1:8090/msh; reliable hop by hop (nextMSH) and end to end (toPartyMSH), signed "
        "(rsa-sha256), HTTPS with TLS client authentication. Written by scripts/make_sample_cpas.py.",
        a,
        c,
    )


KEY_PAIRS = {
    "party-a": "Party A (pymsh demo)",
    "party-b": "Party B (pymsh demo)",
    "party-c": "Party C (pymsh demo)",
    "intermediary": "Intermediary (pymsh demo)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=textwrap.dedent(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("--new-keys", action="store_true", help="replace the demo keys and certificates")
    args = parser.parse_args()
    for name, common_name in KEY_PAIRS.items():
        if args.new_keys or not (KEYS / f"{name}.cert.pem").is_file():
            make_key_pair(name, common_name)
            print(f"wrote {KEYS / name}.key.pem and .cert.pem")
    CPAS.mkdir(parents=True, exist_ok=True)
    for file_name, text in (("demo-a-b.xml", demo_a_b()), ("demo-routed-a-c.xml", demo_routed_a_c())):
        (CPAS / file_name).write_text(text, encoding="utf-8")
        print(f"wrote {CPAS / file_name}")


if __name__ == "__main__":
    main()
