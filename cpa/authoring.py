"""A CPP/CPA 2.0 agreement written from a few answers (``msh cpa new``, ``msh init``): pure, answers in, tree out.

:class:`Answers` holds what an operator knows about a partnership: both parties' PartyIds and endpoint URLs,
the service and its actions (who sends which), and four switches (reliable, signed, encrypted, synchronous
acknowledgments). :func:`answer_problems` lists what is wrong with them, one sentence each; :func:`agreement_tree`
builds the agreement, shaped like the samples (``samples/cpas/demo-a-b.xml``):

* each party's PartyInfo has one CollaborationRole with one ServiceBinding: a CanSend for each action it sends,
  a CanReceive for each it receives, each bound to the other party's matching binding (CPP/A 2.0 §8.4.9);
* one business DeliveryChannel per party (the actions' channel) and one signal channel, the PartyInfo's
  defaultMshChannelId (CPP/A 2.0 §8.4.3): acknowledgments and errors, never themselves acknowledged;
* reliable: ackRequested and duplicateElimination ``always`` (CPP/A 2.0 §8.4.8; ebMS2 §6.3.1, §6.4.1) and a
  ReliableMessaging with Retries, RetryInterval and PersistDuration on both bindings (CPP/A 2.0 §8.4.36-38);
  not reliable: ``never``, so the header settles nothing on its own (cpa/precedence.py);
* an ``https`` endpoint: TLS on that party's TransportReceiver and on the other party's TransportSender, with
  client authentication (each names its certificate and trusts the other's, CPP/A 2.0 §8.4.24-27);
* signed: SenderNonRepudiation with the party's certificate and ReceiverNonRepudiation trusting the other's
  (CPP/A 2.0 §8.4.40-41), rsa-sha256 over sha256, on business messages and signals alike;
* encrypted: SenderDigitalEnvelope and ReceiverDigitalEnvelope naming the receiver's certificate (CPP/A 2.0
  §8.4.44, §8.4.50), XMLENC aes256-gcm;
* synchronous acknowledgments: syncReplyMode ``mshSignalsOnly`` on the business channels (ebMS2 §6.4.7), else
  ``none`` (acknowledgments come back as requests of their own to the sender's endpoint).
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from lxml import etree

from cpa.document import TP, XLINK

__all__ = ["Answers", "Direction", "Exchange", "PartyAnswers", "agreement_bytes", "agreement_tree", "answer_problems"]

DS: Final = "http://www.w3.org/2000/09/xmldsig#"
TO_PARTY_MSH: Final = "urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH"
MSG_HEADER_XSD: Final = "http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd"
RSA_SHA256: Final = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
SHA256: Final = "http://www.w3.org/2001/04/xmlenc#sha256"
AES256_GCM: Final = "http://www.w3.org/2009/xmlenc11#aes256-gcm"
XMLDSIG: Final = "http://www.w3.org/2000/09/xmldsig#"
_KEYS: Final = ("A", "B")  # ours, theirs: the prefix of every id in each PartyInfo
_URI_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_NOT_XML: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


class Direction(StrEnum):
    """Which way an action goes, seen from our party."""

    SEND = "send"  # we send it: our CanSend, their CanReceive
    RECEIVE = "receive"  # they send it: our CanReceive, their CanSend


@dataclass(frozen=True, slots=True)
class Exchange:
    """One action of the service and who sends it."""

    action: str
    direction: Direction = Direction.SEND


@dataclass(frozen=True, slots=True)
class PartyAnswers:
    """One party: its PartyId (and type), where it receives messages, and its certificate if any."""

    party_id: str
    party_id_type: str | None
    url: str
    certificate: x509.Certificate | None = None


@dataclass(frozen=True, slots=True)
class Answers:
    """Everything :func:`agreement_tree` needs (see the module docs)."""

    ours: PartyAnswers
    theirs: PartyAnswers
    service: str
    exchanges: tuple[Exchange, ...]
    cpa_id: str
    start: datetime
    end: datetime
    service_type: str | None = None
    reliable: bool = False
    sign: bool = False
    encrypt: bool = False
    sync_acks: bool = False
    retries: int = 5
    retry_interval: str = "PT30S"
    persist_duration: str = "P1D"

    @property
    def tls(self) -> bool:
        """True when either endpoint is ``https``: then both sides authenticate with their certificates."""
        return any(urlsplit(p.url).scheme == "https" for p in (self.ours, self.theirs))


def _certificate_problems(answers: Answers) -> list[str]:
    """TLS, signing and encryption each need both parties' certificates."""
    needs = [
        why
        for why, wanted in (("https", answers.tls), ("signing", answers.sign), ("encryption", answers.encrypt))
        if wanted
    ]
    missing = [
        whose
        for whose, party in (("ours", answers.ours), ("the partner's", answers.theirs))
        if party.certificate is None
    ]
    if needs and missing:
        # CPP/A 2.0 §8.4.27, §8.4.40, §8.4.50: TLS, signatures and envelopes each name the parties' certificates.
        verb = "is" if len(missing) == 1 else "are"
        return [f"{' and '.join(needs)} need both parties' certificates, and {' and '.join(missing)} {verb} missing"]
    return []


def answer_problems(answers: Answers) -> list[str]:
    """What is wrong with ``answers``, one sentence each (empty when an agreement can be written)."""
    problems: list[str] = []
    for label, party in (("our", answers.ours), ("their", answers.theirs)):
        if not party.party_id.strip():
            problems.append(f"{label} PartyId is empty")
        parts = urlsplit(party.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append(f"{label} URL {party.url!r} is not an http:// or https:// URL with a host")
    # ebMS2 §3.1.4: a Service without a type attribute must be a URI.
    if answers.service_type is None and not _URI_SCHEME.match(answers.service):
        problems.append(f"service {answers.service!r} is not a URI (e.g. urn:example:orders): give its type too")
    if not answers.exchanges:
        problems.append("no action given: name at least one")
    seen = {(e.action, e.direction) for e in answers.exchanges}
    if len(seen) != len(answers.exchanges):
        problems.append("an action is given twice in the same direction")
    if any(not e.action.strip() for e in answers.exchanges):
        problems.append("an action name is empty")
    problems += _certificate_problems(answers)
    texts = (
        answers.ours.party_id,
        answers.theirs.party_id,
        answers.service,
        answers.cpa_id,
        answers.ours.url,
        answers.theirs.url,
        answers.service_type or "",
        answers.ours.party_id_type or "",
        answers.theirs.party_id_type or "",
        *(e.action for e in answers.exchanges),
    )
    if any(_NOT_XML.search(text) for text in texts):
        problems.append("an answer holds a control character, which XML cannot carry; retype it")
    if not answers.cpa_id.strip():
        problems.append("the cpaid is empty")
    if (answers.ours.party_id, answers.ours.party_id_type) == (answers.theirs.party_id, answers.theirs.party_id_type):
        problems.append("our PartyId and the partner's are the same; an agreement is between two parties")
    if answers.end <= answers.start:
        problems.append("the agreement ends before it starts: give a positive number of days")
    if answers.retries < 0:
        problems.append("retries must be 0 or more")
    return problems


def _e(parent: etree._Element, tag: str, text: str | None = None, **attributes: str) -> etree._Element:
    """A ``tp:`` child of ``parent`` with ``tp:`` attributes (``xlink_href`` -> ``xlink:href``)."""
    element = etree.SubElement(parent, f"{{{TP}}}{tag}")
    for name, value in attributes.items():
        namespace, _, local = name.partition("_") if name.startswith("xlink_") else ("tp", "", name)
        element.set(f"{{{XLINK if namespace == 'xlink' else TP}}}{local}", value)
    if text is not None:
        element.text = text
    return element


def _ncname(value: str) -> str:
    """``value`` made usable inside an xs:ID (letters, digits, ``_``, ``-``, ``.``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", value)


def _binding_id(key: str, direction: str, index: int, action: str) -> str:
    return f"{key}_{direction}_{index}_{_ncname(action)}"


def _service_binding(role: etree._Element, answers: Answers, key: str, other: str, ours: bool) -> None:
    binding = _e(role, "ServiceBinding")
    service = _e(binding, "Service", answers.service)
    if answers.service_type is not None:
        service.set(f"{{{TP}}}type", answers.service_type)
    sends = [(i, e) for i, e in enumerate(answers.exchanges) if (e.direction is Direction.SEND) == ours]
    receives = [(i, e) for i, e in enumerate(answers.exchanges) if (e.direction is Direction.SEND) != ours]
    # CPP/A 2.0 §8.4.9: every CanSend before every CanReceive; each names the other party's binding.
    for element, this_dir, other_dir, items in (
        ("CanSend", "Send", "Receive", sends),
        ("CanReceive", "Receive", "Send", receives),
    ):
        for index, exchange in items:
            can = _e(binding, element)
            this = _e(
                can,
                "ThisPartyActionBinding",
                id=_binding_id(key, this_dir, index, exchange.action),
                action=exchange.action,
                packageId="BusinessPackage",
            )
            _e(
                this,
                "BusinessTransactionCharacteristics",
                isNonRepudiationRequired=str(answers.sign).lower(),
                isNonRepudiationReceiptRequired="false",
                isAuthenticated="persistent" if answers.sign else "none",
                isTamperProof="persistent" if answers.sign else "none",
                isConfidential="persistent" if answers.encrypt else ("transient" if answers.tls else "none"),
                isAuthorizationRequired="false",
            )
            _e(this, "ChannelId", f"{key}_Channel")
            _e(can, "OtherPartyActionBinding", _binding_id(other, other_dir, index, exchange.action))


def _certificate(info: etree._Element, key: str, certificate: x509.Certificate) -> None:
    element = _e(info, "Certificate", certId=f"{key}_Cert")
    data = etree.SubElement(etree.SubElement(element, f"{{{DS}}}KeyInfo"), f"{{{DS}}}X509Data")
    der = base64.b64encode(certificate.public_bytes(Encoding.DER)).decode("ascii")
    etree.SubElement(data, f"{{{DS}}}X509Certificate").text = "\n".join(der[i : i + 64] for i in range(0, len(der), 64))


def _channel(info: etree._Element, key: str, name: str, exchange: str, characteristics: dict[str, str]) -> None:
    channel = _e(
        info, "DeliveryChannel", channelId=f"{key}_{name}", transportId=f"{key}_Transport", docExchangeId=exchange
    )
    _e(channel, "MessagingCharacteristics", ackSignatureRequested="never", actor=TO_PARTY_MSH, **characteristics)


def _transport(info: etree._Element, key: str, party: PartyAnswers, other: PartyAnswers) -> None:
    transport = _e(info, "Transport", transportId=f"{key}_Transport")
    sender = _e(transport, "TransportSender")
    _e(sender, "TransportProtocol", "HTTP", version="1.1")
    if urlsplit(other.url).scheme == "https":  # CPP/A 2.0 §8.4.25: TLS to the partner, our client certificate
        client = _e(sender, "TransportClientSecurity")
        _e(client, "TransportSecurityProtocol", "TLS", version="1.2")
        _e(client, "ClientCertificateRef", certId=f"{key}_Cert")
        _e(client, "ServerSecurityDetailsRef", securityId=f"{key}_TrustedPeers")
    receiver = _e(transport, "TransportReceiver")
    _e(receiver, "TransportProtocol", "HTTP", version="1.1")
    _e(receiver, "Endpoint", uri=party.url, type="allPurpose")
    if urlsplit(party.url).scheme == "https":  # CPP/A 2.0 §8.4.27: TLS server, client certificates checked
        server = _e(receiver, "TransportServerSecurity")
        _e(server, "TransportSecurityProtocol", "TLS", version="1.2")
        _e(server, "ServerCertificateRef", certId=f"{key}_Cert")
        _e(server, "ClientSecurityDetailsRef", securityId=f"{key}_TrustedPeers")


def _non_repudiation(binding: etree._Element, side: str, key: str) -> None:
    element = _e(binding, f"{side}NonRepudiation")
    _e(element, "NonRepudiationProtocol", XMLDSIG)
    _e(element, "HashFunction", SHA256)
    _e(element, "SignatureAlgorithm", RSA_SHA256)
    if side == "Sender":
        _e(element, "SigningCertificateRef", certId=f"{key}_Cert")
    else:
        _e(element, "SigningSecurityDetailsRef", securityId=f"{key}_TrustedPeers")


def _doc_exchange(info: etree._Element, key: str, exchange_id: str, answers: Answers, business: bool) -> None:
    exchange = _e(info, "DocExchange", docExchangeId=exchange_id)
    for side in ("Sender", "Receiver"):
        binding = _e(exchange, f"ebXML{side}Binding", version="2.0")
        if business and answers.reliable:  # CPP/A 2.0 §8.4.36-38
            rm = _e(binding, "ReliableMessaging")
            _e(rm, "Retries", str(answers.retries))
            _e(rm, "RetryInterval", answers.retry_interval)
            _e(rm, "MessageOrderSemantics", "NotGuaranteed")
            _e(binding, "PersistDuration", answers.persist_duration)
        if answers.sign:
            _non_repudiation(binding, side, key)
        if business and answers.encrypt:  # CPP/A 2.0 §8.4.44, §8.4.50: encrypted for the receiver's certificate
            envelope = _e(binding, f"{side}DigitalEnvelope")
            _e(envelope, "DigitalEnvelopeProtocol", "XMLENC", version="1.0")
            _e(envelope, "EncryptionAlgorithm", AES256_GCM)
            if side == "Receiver":
                _e(envelope, "EncryptionCertificateRef", certId=f"{key}_Cert")


def _collaboration_role(info: etree._Element, answers: Answers, key: str, other_key: str, ours: bool) -> None:
    """CPP/A 2.0 §8.4.5-8: the role in the process the service stands for, with the service's bindings."""
    role = _e(info, "CollaborationRole")
    _e(
        role,
        "ProcessSpecification",
        name=answers.service,
        version="1.0",
        xlink_type="simple",
        xlink_href=answers.service
        if _URI_SCHEME.match(answers.service)
        else f"urn:pymsh:process:{_ncname(answers.service)}",
    )
    _e(
        role,
        "Role",
        name="initiator" if ours else "responder",
        xlink_type="simple",
        xlink_href=f"urn:pymsh:role:{'initiator' if ours else 'responder'}",
    )
    _service_binding(role, answers, key, other_key, ours)


def _party_info(root: etree._Element, answers: Answers, ours: bool) -> None:
    key, other_key = _KEYS if ours else _KEYS[::-1]
    party, other = (answers.ours, answers.theirs) if ours else (answers.theirs, answers.ours)
    info = _e(
        root,
        "PartyInfo",
        partyName=party.party_id,
        defaultMshChannelId=f"{key}_SignalChannel",
        defaultMshPackageId="MshSignalPackage",
    )
    party_id = _e(info, "PartyId", party.party_id)
    if party.party_id_type is not None:
        party_id.set(f"{{{TP}}}type", party.party_id_type)
    _e(info, "PartyRef", xlink_type="simple", xlink_href=f"urn:pymsh:party:{_ncname(party.party_id)}")
    _collaboration_role(info, answers, key, other_key, ours)
    if party.certificate is not None:
        _certificate(info, key, party.certificate)
    if other.certificate is not None:  # what this party trusts: the other's certificate, as its own anchor
        details = _e(info, "SecurityDetails", securityId=f"{key}_TrustedPeers")
        _e(_e(details, "TrustAnchors"), "AnchorCertificateRef", certId=f"{other_key}_Cert")
    always = "always" if answers.reliable else "never"
    business = {
        "syncReplyMode": "mshSignalsOnly" if answers.sync_acks else "none",
        "ackRequested": always,
        "duplicateElimination": always,
    }
    _channel(info, key, "Channel", f"{key}_Business", business)
    # The default MSH channel carries signals (acknowledgments, errors): never acknowledged themselves.
    _channel(
        info,
        key,
        "SignalChannel",
        f"{key}_Signals",
        {"syncReplyMode": "none", "ackRequested": "never", "duplicateElimination": "never"},
    )
    _transport(info, key, party, other)
    _doc_exchange(info, key, f"{key}_Business", answers, business=True)
    _doc_exchange(info, key, f"{key}_Signals", answers, business=False)


def _packaging(root: etree._Element) -> None:
    header = _e(root, "SimplePart", id="MsgHdr", mimetype="text/xml")
    _e(header, "NamespaceSupported", MSG_HEADER_XSD, location=MSG_HEADER_XSD, version="2.0")
    _e(root, "SimplePart", id="XmlPayload", mimetype="application/xml")
    _e(root, "SimplePart", id="Attachment", mimetype="application/octet-stream")
    for package, composite, parts in (
        ("MshSignalPackage", "MshSignal", ()),
        ("BusinessPackage", "BusinessMessage", (("XmlPayload", "1"), ("Attachment", "9"))),
    ):
        packaging = _e(root, "Packaging", id=package)
        _e(packaging, "ProcessingCapabilities", parse="true", generate="true")
        element = _e(
            _e(packaging, "CompositeList"),
            "Composite",
            id=composite,
            mimetype="multipart/related",
            mimeparameters="type=text/xml",
        )
        _e(element, "Constituent", idref="MsgHdr")
        for idref, most in parts:
            _e(element, "Constituent", idref=idref, minOccurs="0", maxOccurs=most)


def agreement_tree(answers: Answers) -> etree._Element:
    """The agreement the answers describe (see the module docs); call :func:`answer_problems` first."""
    root = etree.Element(f"{{{TP}}}CollaborationProtocolAgreement", nsmap={"tp": TP, "ds": DS, "xlink": XLINK})
    root.set(f"{{{TP}}}cpaid", answers.cpa_id)
    root.set(f"{{{TP}}}version", "1.0")
    _e(root, "Status", value="agreed")
    _e(root, "Start", answers.start.strftime("%Y-%m-%dT%H:%M:%SZ"))
    _e(root, "End", answers.end.strftime("%Y-%m-%dT%H:%M:%SZ"))
    _party_info(root, answers, ours=True)
    _party_info(root, answers, ours=False)
    _packaging(root)
    comment = _e(root, "Comment", "Written by msh cpa new from a few answers; read it before agreeing to it.")
    comment.set("{http://www.w3.org/XML/1998/namespace}lang", "en")
    return root


def agreement_bytes(answers: Answers) -> bytes:
    """:func:`agreement_tree` as an indented UTF-8 document with its XML declaration."""
    return etree.tostring(agreement_tree(answers), xml_declaration=True, encoding="UTF-8", pretty_print=True)
