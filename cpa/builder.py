"""Step 3 of :func:`cpa.loader.load`: the model of a schema-valid agreement (:mod:`cpa.model`), with every
reference resolved (:mod:`cpa.references`) and every value the MSH acts on checked: durations it waits
(RetryInterval, PersistDuration), the validity window, certificates, algorithms and the agreement's own
signature (:mod:`cpa.signature`)."""

from __future__ import annotations

import binascii
from collections.abc import Iterator
from datetime import UTC, datetime

from cryptography import x509
from lxml import etree

from cpa.algorithms import AlgorithmUse, known_algorithm
from cpa.certificates import bad_base64_message, x509_der
from cpa.document import NS, XLINK, capped, local_name, path_of, text_of, tp_attr, tp_child, tp_children, tp_tag
from cpa.duration import XsDuration
from cpa.errors import CpaError, CpaProblem
from cpa.model import (
    AccessAuthentication,
    ActionBinding,
    Certificate,
    CollaborationProtocolAgreement,
    CollaborationRole,
    CompositePart,
    ConversationConstraints,
    DeliveryChannel,
    DigitalEnvelope,
    DocExchange,
    EbxmlBinding,
    Endpoint,
    EndpointType,
    MessageOrderSemantics,
    MessagingCharacteristics,
    NonRepudiation,
    Packaging,
    PartyId,
    PartyInfo,
    PerMessage,
    ReliableMessaging,
    SecurityDetails,
    ServiceBinding,
    SimplePart,
    Status,
    SyncReplyMode,
    Transport,
    TransportReceiver,
    TransportSecurity,
    TransportSender,
)
from cpa.references import References
from cpa.signature import verify
from msh.xmlpath import Locator
from msh.xsd import DateTimeOutOfRange, date_time, source_line

__all__ = ["Builder"]


class Builder:
    """Builds the model of one schema-valid agreement, collecting every problem on the way.

    A builder method returns None when what it builds cannot be built; it has then recorded a problem,
    so :meth:`build` raises instead of returning a partial agreement.
    """

    def __init__(
        self, name: str, root: etree._Element, data: bytes, verify_signature: bool, warnings: list[CpaProblem]
    ) -> None:
        self.name = name
        self.root = root
        self.data = data
        self.verify_signature = verify_signature
        self.problems: list[CpaProblem] = []
        self.locator = Locator()
        # CPP/A 2.0 references by xs:IDREF, resolved and checked by cpa.references.
        self.resolve = References(root, self.problem).resolve
        self.certificates: dict[etree._Element, Certificate] = {}
        self.security: dict[etree._Element, SecurityDetails] = {}
        self.transports: dict[etree._Element, Transport] = {}
        self.doc_exchanges: dict[etree._Element, DocExchange] = {}
        self.channels: dict[etree._Element, DeliveryChannel] = {}
        # (element, label, text, duration, repeat) of each duration the MSH acts on: see check_spans.
        self.spans: list[tuple[etree._Element, str, str, XsDuration, int]] = []
        self.warnings = warnings

    # -- problems and references (CPP/A 2.0 xs:IDREF: cpa.references) --------------------------------

    def problem(self, element: etree._Element, message: str, attribute: str | None = None) -> None:
        """Record a problem at ``element`` (or at its ``attribute``)."""
        path = path_of(element, self.locator) + (f"/@{attribute}" if attribute else "")
        self.problems.append(CpaProblem(self.name, source_line(element), path, message))

    def certificate_ref(self, ref: etree._Element | None) -> Certificate | None:
        """``ref`` (a ...CertificateRef element, CPP/A 2.0 §8.4.33) resolved through its certId."""
        if ref is None:
            return None
        target = self.resolve(ref, tp_attr(ref, "certId"), "Certificate", "certId")
        return self.certificates.get(target) if target is not None else None

    def security_ref(self, ref: etree._Element | None) -> SecurityDetails | None:
        """``ref`` (a ...SecurityDetailsRef element, CPP/A 2.0 §8.4.35) resolved through its securityId."""
        if ref is None:
            return None
        target = self.resolve(ref, tp_attr(ref, "securityId"), "SecurityDetails", "securityId")
        return self.security.get(target) if target is not None else None

    # -- values -----------------------------------------------------------------------------------

    def duration(
        self, element: etree._Element, text: str, label: str, attribute: str | None = None
    ) -> XsDuration | None:
        """An xs:duration (:meth:`XsDuration.parse`); a problem, labelled ``label``, if it is not one."""
        try:
            return XsDuration.parse(text)
        except ValueError as exc:
            self.problem(element, f"{label} {exc}", attribute)
            return None

    def wait(self, element: etree._Element, label: str, repeat: int | None = 1) -> XsDuration | None:
        """A duration the MSH acts on (RetryInterval, PersistDuration): any xs:duration, months included,
        but not negative. ``repeat`` times it, added to the agreement's End, must stay within the years 1 to
        9999 (checked by :meth:`check_spans` once End is known; None: not checked)."""
        text = text_of(element)
        value = self.duration(element, text, label)
        if value is None:
            return None
        # ebMS2 §6.4.4, §6.4.6: the MSH waits RetryInterval and keeps retrying for PersistDuration: never negative.
        if value.is_negative:
            self.problem(element, f"{label} '{text}' is negative; give a positive duration")
            return None
        if repeat is not None:
            self.spans.append((element, label, text, value, repeat))
        return value

    def check_spans(self, end: datetime) -> None:
        """Refuse a RetryInterval or PersistDuration the MSH could not turn into an instant: a message first
        sent just before End is resent up to (Retries + 1) RetryIntervals later and kept PersistDuration."""
        for element, label, text, value, repeat in self.spans:
            try:
                # XML Schema Part 2 Appendix E: the instant is the duration added to the one it starts from.
                (value * repeat).add_to(end)
            except OverflowError:
                what = f"(Retries + 1) x {label} = {repeat} x '{text}'" if repeat > 1 else f"{label} '{text}'"
                self.problem(
                    element,
                    f"{label} '{text}' is too long to be used: {what} after the agreement's End "
                    f"({end.isoformat()}) is past the year 9999; give a shorter duration",
                )

    def date_time(self, element: etree._Element) -> datetime | None:
        """An xs:dateTime as an aware datetime; without a time zone it is read as UTC."""
        text = text_of(element)
        try:
            # CPP/A 2.0 §9.4.2/§9.4.3: Start and End are in UTC; a value without a time zone is read so.
            return date_time(text, naive=UTC)
        except DateTimeOutOfRange:
            self.problem(element, f"{local_name(element)} '{text}' is outside the years 1 to 9999; correct the date")
            return None
        except ValueError:
            self.problem(
                element, f"{local_name(element)} '{text}' is not an xs:dateTime; write it like 2026-01-01T00:00:00Z"
            )
            return None

    # -- certificates and security details (CPP/A 2.0 §8.4.33-§8.4.35) ----------------------------

    def build_certificate(self, element: etree._Element) -> Certificate:
        cert_id = tp_attr(element, "certId") or ""
        ders: list[bytes] = []
        for node in element.iterfind("ds:KeyInfo/ds:X509Data/ds:X509Certificate", NS):
            label = f"Certificate '{cert_id}': ds:X509Certificate"
            if not text_of(node):
                self.problem(node, f"{label} is empty; put the certificate's base64 (DER) text in it")
                continue
            try:
                der = x509_der(node)
            except (binascii.Error, ValueError) as exc:
                self.problem(node, bad_base64_message(node, f" ({exc})"))
                continue
            try:
                x509.load_der_x509_certificate(der)
            except ValueError:
                self.problem(
                    node,
                    f"{label} is base64 but not a DER X.509 certificate; put the certificate's base64 (DER) text in it",
                )
                continue
            ders.append(der)
        return Certificate(cert_id, tuple(ders))

    def build_security_details(self, element: etree._Element) -> SecurityDetails:
        anchors = [self.certificate_ref(ref) for ref in element.iterfind("tp:TrustAnchors/tp:AnchorCertificateRef", NS)]
        return SecurityDetails(tp_attr(element, "securityId") or "", tuple(a for a in anchors if a is not None))

    # -- transports (CPP/A 2.0 §8.4.23-§8.4.31) ----------------------------------------------------

    def transport_security(
        self, element: etree._Element | None, cert_ref: str, peer_ref: str
    ) -> TransportSecurity | None:
        if element is None:
            return None
        protocol = tp_child(element, "TransportSecurityProtocol")
        return TransportSecurity(
            protocol=text_of(protocol),
            protocol_version=tp_attr(protocol, "version") if protocol is not None else None,
            certificate=self.certificate_ref(tp_child(element, cert_ref)),
            peer_security=self.security_ref(tp_child(element, peer_ref)),
        )

    def access_authentication(self, element: etree._Element) -> AccessAuthentication | None:
        schemes = tuple(text_of(e) for e in tp_children(element, "AccessAuthentication"))
        return AccessAuthentication(schemes) if schemes else None

    def build_transport(self, element: etree._Element) -> Transport:
        sender = receiver = None
        sender_el = tp_child(element, "TransportSender")
        if sender_el is not None:
            protocol = tp_child(sender_el, "TransportProtocol")
            sender = TransportSender(
                protocol=text_of(protocol),
                protocol_version=tp_attr(protocol, "version") if protocol is not None else None,
                access_authentication=self.access_authentication(sender_el),
                client_security=self.transport_security(
                    tp_child(sender_el, "TransportClientSecurity"), "ClientCertificateRef", "ServerSecurityDetailsRef"
                ),
            )
        receiver_el = tp_child(element, "TransportReceiver")
        if receiver_el is not None:
            protocol = tp_child(receiver_el, "TransportProtocol")
            endpoints = tuple(
                Endpoint(tp_attr(e, "uri") or "", EndpointType(tp_attr(e, "type") or EndpointType.ALL_PURPOSE))
                for e in tp_children(receiver_el, "Endpoint")
            )
            receiver = TransportReceiver(
                protocol=text_of(protocol),
                protocol_version=tp_attr(protocol, "version") if protocol is not None else None,
                endpoints=endpoints,
                access_authentication=self.access_authentication(receiver_el),
                server_security=self.transport_security(
                    tp_child(receiver_el, "TransportServerSecurity"), "ServerCertificateRef", "ClientSecurityDetailsRef"
                ),
            )
        return Transport(tp_attr(element, "transportId") or "", sender, receiver)

    # -- document exchange (CPP/A 2.0 §8.4.35-§8.4.50) ---------------------------------------------

    def reliable_messaging(self, element: etree._Element | None) -> ReliableMessaging | None:
        if element is None:
            return None
        retries_el, interval_el = tp_child(element, "Retries"), tp_child(element, "RetryInterval")
        retries = interval = None
        # docs/design.md §4: Retries and RetryInterval have no header form; the MSH takes them from the CPA only.
        if retries_el is None:
            self.problem(element, "ReliableMessaging has no Retries; add one, e.g. <tp:Retries>3</tp:Retries>")
        else:
            retries = int(text_of(retries_el))
            if retries < 0:
                self.problem(retries_el, f"Retries is {retries}; give 0 or more")
                retries = None
        if interval_el is None:
            self.problem(
                element,
                "ReliableMessaging has no RetryInterval; add one, e.g. <tp:RetryInterval>PT30S</tp:RetryInterval>",
            )
        else:
            # ebMS2 §6.4.5: a message is resent up to Retries times, RetryInterval apart.
            interval = self.wait(interval_el, "RetryInterval", None if retries is None else retries + 1)
        order = MessageOrderSemantics(text_of(tp_child(element, "MessageOrderSemantics")))
        if retries is None or interval is None:
            return None
        return ReliableMessaging(retries, interval, order)

    def non_repudiation(self, element: etree._Element | None) -> NonRepudiation | None:
        if element is None:
            return None
        protocol = text_of(tp_child(element, "NonRepudiationProtocol"))
        hash_el = tp_child(element, "HashFunction")
        hash_function = known_algorithm(hash_el, AlgorithmUse.DIGEST, self.problem) if hash_el is not None else None
        algorithm_els = tp_children(element, "SignatureAlgorithm")
        algorithms = [known_algorithm(e, AlgorithmUse.SIGNATURE, self.problem) for e in algorithm_els]
        certificate = self.certificate_ref(tp_child(element, "SigningCertificateRef"))
        security = self.security_ref(tp_child(element, "SigningSecurityDetailsRef"))
        # CPP/A 2.0 §8.4.40: of several SignatureAlgorithm elements the first is used; all must be known.
        signature_algorithm = algorithms[0] if algorithms else None
        if hash_function is None or signature_algorithm is None or None in algorithms:
            return None
        return NonRepudiation(
            protocol=protocol,
            hash_function=hash_function,
            signature_algorithm=signature_algorithm,
            signature_algorithm_oid=tp_attr(algorithm_els[0], "oid"),
            certificate=certificate,
            security_details=security,
        )

    def digital_envelope(self, element: etree._Element | None) -> DigitalEnvelope | None:
        if element is None:
            return None
        protocol = tp_child(element, "DigitalEnvelopeProtocol")
        algorithms = [
            known_algorithm(e, AlgorithmUse.ENCRYPTION, self.problem)
            for e in tp_children(element, "EncryptionAlgorithm")
        ]
        certificate = self.certificate_ref(tp_child(element, "EncryptionCertificateRef"))
        security = self.security_ref(tp_child(element, "EncryptionSecurityDetailsRef"))
        encryption_algorithm = algorithms[0] if algorithms else None
        if encryption_algorithm is None or None in algorithms:
            return None
        return DigitalEnvelope(
            protocol=text_of(protocol),
            protocol_version=tp_attr(protocol, "version") if protocol is not None else None,
            encryption_algorithm=encryption_algorithm,
            certificate=certificate,
            security_details=security,
        )

    def binding(self, element: etree._Element | None, side: str) -> EbxmlBinding | None:
        """ebXMLSenderBinding (``side`` = "Sender") or ebXMLReceiverBinding (``side`` = "Receiver")."""
        if element is None:
            return None
        rm_el = tp_child(element, "ReliableMessaging")
        reliable = self.reliable_messaging(rm_el)
        persist_el = tp_child(element, "PersistDuration")
        persist = self.wait(persist_el, "PersistDuration") if persist_el is not None else None
        nr_el = tp_child(element, f"{side}NonRepudiation")
        non_repudiation = self.non_repudiation(nr_el)
        de_el = tp_child(element, f"{side}DigitalEnvelope")
        envelope = self.digital_envelope(de_el)
        if (
            (rm_el is not None and reliable is None)
            or (persist_el is not None and persist is None)
            or (nr_el is not None and non_repudiation is None)
            or (de_el is not None and envelope is None)
        ):
            return None
        return EbxmlBinding(
            version=tp_attr(element, "version") or "",
            reliable_messaging=reliable,
            persist_duration=persist,
            non_repudiation=non_repudiation,
            digital_envelope=envelope,
            namespaces_supported=tuple(text_of(e) for e in tp_children(element, "NamespaceSupported")),
        )

    def build_doc_exchange(self, element: etree._Element) -> DocExchange | None:
        sender_el, receiver_el = tp_child(element, "ebXMLSenderBinding"), tp_child(element, "ebXMLReceiverBinding")
        sender, receiver = self.binding(sender_el, "Sender"), self.binding(receiver_el, "Receiver")
        if (sender_el is not None and sender is None) or (receiver_el is not None and receiver is None):
            return None
        return DocExchange(tp_attr(element, "docExchangeId") or "", sender, receiver)

    # -- delivery channels (CPP/A 2.0 §8.4.7-§8.4.8) -----------------------------------------------

    def build_channel(self, element: etree._Element) -> DeliveryChannel | None:
        transport_el = self.resolve(element, tp_attr(element, "transportId"), "Transport", "transportId")
        exchange_el = self.resolve(element, tp_attr(element, "docExchangeId"), "DocExchange", "docExchangeId")
        transport = self.transports.get(transport_el) if transport_el is not None else None
        exchange = self.doc_exchanges.get(exchange_el) if exchange_el is not None else None
        mc = tp_child(element, "MessagingCharacteristics")
        characteristics = MessagingCharacteristics()
        if mc is not None:
            characteristics = MessagingCharacteristics(
                sync_reply_mode=SyncReplyMode(tp_attr(mc, "syncReplyMode") or SyncReplyMode.NONE),
                ack_requested=PerMessage(tp_attr(mc, "ackRequested") or PerMessage.PER_MESSAGE),
                ack_signature_requested=PerMessage(tp_attr(mc, "ackSignatureRequested") or PerMessage.PER_MESSAGE),
                duplicate_elimination=PerMessage(tp_attr(mc, "duplicateElimination") or PerMessage.PER_MESSAGE),
                actor=tp_attr(mc, "actor"),
            )
        if transport is None or exchange is None:
            return None
        return DeliveryChannel(tp_attr(element, "channelId") or "", transport, exchange, characteristics)

    # -- roles and action bindings (CPP/A 2.0 §8.4.4-§8.4.15) -------------------------------------

    def action_binding(self, element: etree._Element) -> ActionBinding | None:
        """ThisPartyActionBinding, with its OtherPartyActionBinding checked (CPP/A 2.0 §8.4.15)."""
        package_id = tp_attr(element, "packageId") or ""
        self.resolve(element, package_id, "Packaging", "packageId")
        other = element.getnext()
        if other is not None and other.tag == tp_tag("OtherPartyActionBinding"):
            self.resolve(other, text_of(other), "ThisPartyActionBinding", None)
        characteristics: list[tuple[str, str]] = []
        btc = tp_child(element, "BusinessTransactionCharacteristics")
        if btc is not None:
            for key, raw in btc.attrib.items():
                local, value = etree.QName(key).localname, str(raw).strip()
                if local.startswith("timeTo"):  # xs:duration attributes, kept as written (the MSH does not act on them)
                    self.duration(btc, value, f"BusinessTransactionCharacteristics@{local}", local)
                characteristics.append((local, value))
        channels: list[DeliveryChannel | None] = []
        for ref in tp_children(element, "ChannelId"):
            target = self.resolve(ref, text_of(ref), "DeliveryChannel", None)
            channels.append(self.channels.get(target) if target is not None else None)
        if any(c is None for c in channels):
            return None
        return ActionBinding(
            id=tp_attr(element, "id") or "",
            action=tp_attr(element, "action") or "",
            package_id=package_id,
            channels=tuple(c for c in channels if c is not None),
            business_transaction_characteristics=tuple(characteristics),
        )

    def _walk_bindings(self, element: etree._Element) -> Iterator[tuple[str, etree._Element]]:
        """(direction, ThisPartyActionBinding) for every CanSend/CanReceive under ``element``, nested
        ones included (CPP/A 2.0 §8.4.11: a CanReceive inside a CanSend is a reply bound to it)."""
        for child in element:
            if child.tag in (tp_tag("CanSend"), tp_tag("CanReceive")):
                binding = tp_child(child, "ThisPartyActionBinding")
                if binding is not None:
                    yield local_name(child), binding
                yield from self._walk_bindings(child)

    def collaboration_role(self, element: etree._Element) -> CollaborationRole | None:
        process = tp_child(element, "ProcessSpecification")
        role = tp_child(element, "Role")
        for ref in tp_children(element, "ApplicationCertificateRef"):
            self.certificate_ref(ref)
        self.security_ref(tp_child(element, "ApplicationSecurityDetailsRef"))
        binding_el = tp_child(element, "ServiceBinding")
        if process is None or role is None or binding_el is None:
            return None  # the schema requires all three
        service = tp_child(binding_el, "Service")
        sends: list[ActionBinding | None] = []
        receives: list[ActionBinding | None] = []
        for direction, binding in self._walk_bindings(binding_el):
            (sends if direction == "CanSend" else receives).append(self.action_binding(binding))
        return CollaborationRole(
            process_specification=tp_attr(process, "name") or "",
            process_specification_version=tp_attr(process, "version"),
            role=tp_attr(role, "name") or "",
            service_binding=ServiceBinding(
                service=text_of(service),
                service_type=tp_attr(service, "type") if service is not None else None,
                can_send=tuple(b for b in sends if b is not None),
                can_receive=tuple(b for b in receives if b is not None),
            ),
            role_href=role.get(f"{{{XLINK}}}href"),
        )

    # -- the agreement (CPP/A 2.0 §8.4.1, §9.4) ----------------------------------------------------

    def party_info(self, element: etree._Element) -> PartyInfo | None:
        roles = [self.collaboration_role(e) for e in tp_children(element, "CollaborationRole")]
        for override in tp_children(element, "OverrideMshActionBinding"):
            self.resolve(override, tp_attr(override, "channelId"), "DeliveryChannel", "channelId")
        package_id = tp_attr(element, "defaultMshPackageId") or ""
        self.resolve(element, package_id, "Packaging", "defaultMshPackageId")
        default_el = self.resolve(
            element, tp_attr(element, "defaultMshChannelId"), "DeliveryChannel", "defaultMshChannelId"
        )
        default = self.channels.get(default_el) if default_el is not None else None
        if default is None:
            return None
        return PartyInfo(
            party_name=tp_attr(element, "partyName") or "",
            party_ids=tuple(PartyId(text_of(e), tp_attr(e, "type")) for e in tp_children(element, "PartyId")),
            collaboration_roles=tuple(r for r in roles if r is not None),
            certificates=tuple(self.certificates[e] for e in tp_children(element, "Certificate")),
            security_details=tuple(self.security[e] for e in tp_children(element, "SecurityDetails")),
            delivery_channels=tuple(
                self.channels[e] for e in tp_children(element, "DeliveryChannel") if e in self.channels
            ),
            default_msh_channel=default,
            default_msh_package_id=package_id,
        )

    def build_packaging(self, element: etree._Element) -> Packaging:
        # CPP/A 2.0 §8.5: ProcessingCapabilities, SimplePart*, CompositeList*.
        capabilities = tp_child(element, "ProcessingCapabilities")
        parse = generate = False
        if capabilities is not None:
            parse = (tp_attr(capabilities, "parse") or "").strip() in ("true", "1")
            generate = (tp_attr(capabilities, "generate") or "").strip() in ("true", "1")
        composites = tuple(
            CompositePart(
                id=tp_attr(part, "id") or "",
                mime_type=tp_attr(part, "mimetype") or "",
                constituents=tuple(tp_attr(c, "idref") or "" for c in tp_children(part, "Constituent")),
                encapsulation=etree.QName(part).localname == "Encapsulation",
            )
            for composite_list in tp_children(element, "CompositeList")
            for part in composite_list
            if isinstance(part.tag, str) and etree.QName(part).localname in ("Composite", "Encapsulation")
        )
        return Packaging(id=tp_attr(element, "id") or "", parse=parse, generate=generate, composites=composites)

    def build_simple_part(self, part: etree._Element) -> SimplePart:
        # CPP/A 2.0 §8.5.3: a SimplePart is declared once per agreement and named by Constituent@idref.
        return SimplePart(
            id=tp_attr(part, "id") or "",
            mime_type=tp_attr(part, "mimetype") or "",
            mime_parameters=tp_attr(part, "mimeparameters"),
            namespaces_supported=tuple(text_of(ns) for ns in tp_children(part, "NamespaceSupported")),
        )

    def build(self) -> CollaborationProtocolAgreement:
        root = self.root
        for element in root.iterfind("tp:PartyInfo/tp:Certificate", NS):
            self.certificates[element] = self.build_certificate(element)
        for element in root.iterfind("tp:PartyInfo/tp:SecurityDetails", NS):
            self.security[element] = self.build_security_details(element)
        for element in root.iterfind("tp:PartyInfo/tp:Transport", NS):
            self.transports[element] = self.build_transport(element)
        for element in root.iterfind("tp:PartyInfo/tp:DocExchange", NS):
            exchange = self.build_doc_exchange(element)
            if exchange is not None:
                self.doc_exchanges[element] = exchange
        for element in root.iterfind("tp:PartyInfo/tp:DeliveryChannel", NS):
            channel = self.build_channel(element)
            if channel is not None:
                self.channels[element] = channel
        parties = [self.party_info(e) for e in tp_children(root, "PartyInfo")]
        for constituent in root.iterfind(".//tp:Constituent", NS):
            self.resolve(
                constituent, tp_attr(constituent, "idref"), ("SimplePart", "Composite", "Encapsulation"), "idref"
            )
        simple_parts = tuple(self.build_simple_part(e) for e in tp_children(root, "SimplePart"))
        packagings = tuple(self.build_packaging(e) for e in tp_children(root, "Packaging"))
        status_el, start_el, end_el = tp_child(root, "Status"), tp_child(root, "Start"), tp_child(root, "End")
        start = self.date_time(start_el) if start_el is not None else None
        end = self.date_time(end_el) if end_el is not None else None
        if end is not None:
            self.check_spans(end)
        # The agreement's own signature (CPP/A 2.0 §9, Signature element): see cpa.signature.
        signed = self.verify_signature and verify(root, self.data, self.certificates.values(), self.problem)
        if self.problems:
            # in document order, the warnings with them
            raise CpaError(capped([*self.problems, *self.warnings]))
        assert start is not None and end is not None  # else a problem was recorded (or the schema refused)
        first, second = parties  # the schema wants exactly two
        assert first is not None and second is not None  # else a problem was recorded
        constraints = None
        cc = tp_child(root, "ConversationConstraints")
        if cc is not None:
            limit, concurrent = tp_attr(cc, "invocationLimit"), tp_attr(cc, "concurrentConversations")
            constraints = ConversationConstraints(
                invocation_limit=int(limit) if limit is not None else None,
                concurrent_conversations=int(concurrent) if concurrent is not None else None,
            )
        return CollaborationProtocolAgreement(
            cpaid=tp_attr(root, "cpaid") or "",
            version=tp_attr(root, "version"),
            status=Status((tp_attr(status_el, "value") if status_el is not None else None) or ""),
            start=start,
            end=end,
            party_infos=(first, second),
            conversation_constraints=constraints,
            signed=signed,
            source=self.name,
            simple_parts=simple_parts,
            packagings=packagings,
            warnings=tuple(self.warnings),
        )
