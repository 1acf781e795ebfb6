"""The SOAP envelope codec: :class:`~msh.ebms.model.Envelope` <-> XML (ebMS2 §2.3, chapters 3-9).

:func:`read_envelope` builds the model from a parsed element. It is order-insensitive: element order is
the schema's business (strict mode validates first, lenient mode reports order slips as Warnings), so the
same reader serves both modes. What cannot become a model (a missing required element, a bad value) raises
an :class:`~msh.errors.EbmsError` whose ``location`` is an XPath in the style other MSHs report.
:func:`write_envelope` and :func:`serialise_envelope` go the other way and always produce schema-valid
XML in the schema's element order; they refuse (``ValueError``) what the reader accepts only for the
receiving MSH to refuse it, a SyncReply or AckRequested aimed at an actor the specification does not allow
(ebMS2 §4.3.1, §6.3.1.1).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from lxml import etree

from msh.ebms.model import (
    NO_EXTENSIONS,
    Acknowledgment,
    AckRequested,
    Description,
    Envelope,
    Error,
    ErrorList,
    Extensions,
    Fault,
    Manifest,
    MessageData,
    MessageHeader,
    MessageOrder,
    MessageStatus,
    Party,
    PartyId,
    Reference,
    ReplyAddress,
    Schema,
    SequenceStatus,
    Service,
    Signature,
    StatusRequest,
    StatusResponse,
    SyncReply,
)
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH, EB, SOAP_ACTOR_NEXT, SOAP_ENV, XLINK, XML, XMLDSIG
from msh.errors import EbmsError, EnvelopeError, ErrorCode, Issue, Severity
from msh.safexml import parse_xml

__all__ = [
    "MAX_FOREIGN_ELEMENTS",
    "format_datetime",
    "parse_datetime",
    "read_envelope",
    "read_reply_address",
    "serialise_envelope",
    "write_envelope",
]

_E = etree._Element

# Clark names used on the hot path.
_ENVELOPE = f"{{{SOAP_ENV}}}Envelope"
_HEADER = f"{{{SOAP_ENV}}}Header"
_BODY = f"{{{SOAP_ENV}}}Body"
_FAULT = f"{{{SOAP_ENV}}}Fault"
_MUST_UNDERSTAND = f"{{{SOAP_ENV}}}mustUnderstand"
_ACTOR = f"{{{SOAP_ENV}}}actor"
_EB_ID = f"{{{EB}}}id"
_EB_VERSION = f"{{{EB}}}version"
_XML_LANG = f"{{{XML}}}lang"
_XLINK_HREF = f"{{{XLINK}}}href"
_XLINK_ROLE = f"{{{XLINK}}}role"
_XLINK_TYPE = f"{{{XLINK}}}type"
_DS_SIGNATURE = f"{{{XMLDSIG}}}Signature"
_DS_REFERENCE = f"{{{XMLDSIG}}}Reference"
# Attributes the model holds itself; any other foreign attribute goes to Extensions.
_KNOWN_ATTRS = frozenset({_MUST_UNDERSTAND, _ACTOR, _EB_ID, _EB_VERSION})


def _eb(local: str) -> str:
    return f"{{{EB}}}{local}"


# --------------------------------------------------------------------------------------------- datetimes


def parse_datetime(text: str, location: str) -> datetime:
    """Parse an xsd:dateTime (``2002-02-21T12:00:00Z``, offsets, fractions, or no zone at all)."""
    value = text.strip()
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise EbmsError(
            f"{value!r} is not an xsd:dateTime (expected e.g. 2002-02-21T12:00:00Z)",
            error_code=ErrorCode.OTHER_XML,
            location=location,
        ) from None


def format_datetime(value: datetime) -> str:
    """Format a datetime as xsd:dateTime; UTC is written with ``Z`` (ebMS2 §3.1.6.2 recommends UTC)."""
    text = value.isoformat()
    if value.tzinfo is not None and value.utcoffset() == UTC.utcoffset(None):
        text = text[: -len("+00:00")] + "Z"
    return text


# ----------------------------------------------------------------------------------------------- reading


MAX_FOREIGN_ELEMENTS = 256
"""Foreign (non-ebXML) elements kept per message at most: extension elements, ds:Signature and
ds:Reference, Fault details. Each is kept as its canonical text, and canonicalising an element costs in
proportion to the namespaces in scope; a real message carries a handful, so more is refused (OtherXml)."""


class _Reader:
    """One pass over one envelope; collects lenient-mode Warnings."""

    __slots__ = ("kept", "lenient", "warnings")

    def __init__(self, lenient: bool) -> None:
        self.lenient = lenient
        self.warnings: list[Issue] = []
        self.kept = 0

    def keep(self, el: _E) -> str:
        """A foreign element kept as canonical text (:func:`_xml_text`), counted against the limit."""
        self.kept += 1
        if self.kept > MAX_FOREIGN_ELEMENTS:
            raise EbmsError(
                f"the message carries more than {MAX_FOREIGN_ELEMENTS} foreign elements (extensions, signatures, "
                "references); no ebXML message needs that many",
                error_code=ErrorCode.OTHER_XML,
                location=_where(el),
            )
        return _xml_text(el)

    # -- small helpers

    def fail(self, message: str, location: str, code: ErrorCode = ErrorCode.OTHER_XML) -> EbmsError:
        return EbmsError(message, error_code=code, location=location)

    def warn(self, message: str, location: str, code: ErrorCode = ErrorCode.OTHER_XML) -> None:
        self.warnings.append(Issue(code, Severity.WARNING, message, location))

    def attr(self, el: _E, local: str, location: str) -> str | None:
        """An eb: attribute; an unqualified one is accepted in lenient mode (a common quirk)."""
        value = el.get(_eb(local))
        if value is None:
            value = el.get(local)
            if value is not None:
                if not self.lenient:
                    raise self.fail(f"attribute {local} must be in the eb: namespace", f"{location}/@{local}")
                self.warn(f"attribute {local} is not namespace-qualified (eb:{local} expected)", location)
        return value

    def required_child(self, el: _E, local: str, location: str) -> _E:
        """The eb: child ``local`` of ``el``, or an error naming where it is missing."""
        child = el.find(_eb(local))
        if child is None:
            raise self.fail(f"{location.rsplit('/', 1)[-1]} has no {local}", f"{location}/{local}")
        return child

    def text(self, el: _E, location: str) -> str:
        value = (el.text or "").strip()
        if not value:
            raise self.fail(f"{location.rsplit('/', 1)[-1]} must not be empty", location)
        return value

    def children(self, el: _E) -> list[_E]:
        return [c for c in el if isinstance(c.tag, str)]

    def extensions(
        self, el: _E, known: Callable[[str], bool], location: str, skip_attrs: tuple[str, ...] = ()
    ) -> Extensions:
        """Foreign children and attributes of ``el``; an unknown eb: child is an error (strict) or a
        Warning (lenient, then kept as an extension)."""
        elements: list[str] = []
        for child in el:
            tag = child.tag
            if not isinstance(tag, str) or known(tag):
                continue
            if tag.startswith(f"{{{EB}}}"):
                name = etree.QName(tag).localname
                if not self.lenient:
                    raise self.fail(f"unexpected element eb:{name}", f"{location}/{name}")
                self.warn(f"unexpected element eb:{name} kept as an extension", f"{location}/{name}")
            elements.append(self.keep(child))
        attributes = tuple(
            (str(name), str(value))
            for name, value in el.attrib.items()
            if name not in _KNOWN_ATTRS
            and name not in skip_attrs
            and str(name).startswith("{")
            and not str(name).startswith(f"{{{EB}}}")
        )
        if not elements and not attributes:
            return NO_EXTENSIONS
        return Extensions(tuple(elements), attributes)

    def must_understand(self, el: _E, location: str) -> bool:
        value = el.get(_MUST_UNDERSTAND)
        if value is None:
            return False
        value = value.strip()
        # SOAP 1.1 §4.2.3: mustUnderstand is "0" or "1".
        if value in ("1", "true"):
            return True
        if value in ("0", "false"):
            return False
        raise self.fail(f"SOAP:mustUnderstand must be 0 or 1, got {value!r}", f"{location}/@mustUnderstand")

    def version(self, el: _E, location: str) -> str:
        value = self.attr(el, "version", location)
        if value is None:
            if not self.lenient:
                raise self.fail("eb:version is required", f"{location}/@version")
            self.warn("eb:version is missing; 2.0 assumed", location)
            return "2.0"
        # ebMS2 §2.3.8: the version of this specification is 2.0.
        if value.strip() != "2.0":
            raise self.fail(
                f"eb:version {value!r} is not supported (2.0 expected)", f"{location}/@version", ErrorCode.NOT_SUPPORTED
            )
        return value.strip()

    def descriptions(self, el: _E, location: str) -> list[Description]:
        """A Description as a list of zero or one: lenient mode drops an empty one with a Warning."""
        if not (el.text or "").strip() and self.lenient:
            self.warn("Description is empty; dropped", location)
            return []
        return [self.description(el, location)]

    def description(self, el: _E, location: str) -> Description:
        lang = (el.get(_XML_LANG) or "").strip()
        if not lang:
            # ebMS2 §3.2.1, §4.2.3.2.6: a Description names its language in xml:lang.
            if not self.lenient:
                raise self.fail("Description needs a non-empty xml:lang", f"{location}/@lang")
            self.warn("Description has no (or an empty) xml:lang; 'en' assumed", location)
            lang = "en"
        return Description(self.text(el, location), lang)

    def party(self, el: _E, location: str) -> Party:
        ids: list[PartyId] = []
        role: str | None = None
        for child in self.children(el):
            if child.tag == _eb("PartyId"):
                loc = f"{location}/PartyId"
                ptype = self.attr(child, "type", loc)
                if ptype is not None and not ptype.strip():
                    raise self.fail("PartyId@type must not be empty", f"{loc}/@type")
                value = (child.text or "").strip()
                if not value:
                    if not self.lenient:
                        raise self.fail("PartyId must not be empty", loc)
                    self.warn("PartyId is empty", loc)
                ids.append(PartyId(value, ptype))
            elif child.tag == _eb("Role"):
                role = self.text(child, f"{location}/Role")
            else:
                raise self.fail(f"unexpected element {child.tag} in {location}", location)
        if not ids:
            raise self.fail("at least one PartyId is required", f"{location}/PartyId")
        return Party(tuple(ids), role)

    # -- header elements

    def message_header(self, el: _E) -> MessageHeader:
        loc = "//Header/MessageHeader"
        found: dict[str, _E] = {}
        descriptions: list[Description] = []
        previous = -1
        for child in self.children(el):
            tag = child.tag
            if not tag.startswith(f"{{{EB}}}"):
                continue
            name = tag[len(EB) + 2 :]
            if name == "Description":
                descriptions.extend(self.descriptions(child, f"{loc}/Description"))
                continue
            if name not in _HEADER_ORDER:
                continue  # reported by extensions()
            if name in found:
                raise self.fail(f"{name} occurs more than once", f"{loc}/{name}")
            found[name] = child
            position = _HEADER_ORDER.index(name)
            if position < previous:
                # ebMS2 §3.1: the children of MessageHeader come in the schema's order.
                if not self.lenient:
                    raise self.fail(f"{name} is out of order in MessageHeader", f"{loc}/{name}")
                self.warn(f"{name} is out of order in MessageHeader", f"{loc}/{name}")
            previous = max(previous, position)
        for name in _HEADER_ORDER[:7]:
            if name not in found:
                raise self.fail(f"MessageHeader has no {name}", f"{loc}/{name}")
        service_el = found["Service"]
        service_type = self.attr(service_el, "type", f"{loc}/Service")
        return MessageHeader(
            from_party=self.party(found["From"], f"{loc}/From"),
            to_party=self.party(found["To"], f"{loc}/To"),
            cpa_id=self.text(found["CPAId"], f"{loc}/CPAId"),
            conversation_id=self.text(found["ConversationId"], f"{loc}/ConversationId"),
            service=Service(self.text(service_el, f"{loc}/Service"), service_type),
            action=self.text(found["Action"], f"{loc}/Action"),
            message_data=self.message_data(found["MessageData"], f"{loc}/MessageData"),
            duplicate_elimination="DuplicateElimination" in found,
            descriptions=tuple(descriptions),
            id=self.attr(el, "id", loc),
            version=self.version(el, loc),
            must_understand=self.must_understand(el, loc),
            extensions=self.extensions(el, _is_eb, loc),
        )

    def message_data(self, el: _E, loc: str) -> MessageData:
        values: dict[str, _E] = {}
        for child in self.children(el):
            name = etree.QName(child).localname
            if child.tag != _eb(name) or name not in ("MessageId", "Timestamp", "RefToMessageId", "TimeToLive"):
                raise self.fail(f"unexpected element {name} in MessageData", f"{loc}/{name}")
            if name in values:
                if not self.lenient:
                    raise self.fail(f"{name} occurs more than once", f"{loc}/{name}")
                # Seen in real PHIN-MS responses: two RefToMessageId; the last one names the request.
                self.warn(f"{name} occurs more than once; the last one is used", f"{loc}/{name}")
            values[name] = child
        for name in ("MessageId", "Timestamp"):
            if name not in values:
                raise self.fail(f"MessageData has no {name}", f"{loc}/{name}")
        ttl = values.get("TimeToLive")
        ref = values.get("RefToMessageId")
        return MessageData(
            message_id=self.text(values["MessageId"], f"{loc}/MessageId"),
            timestamp=parse_datetime(self.text(values["Timestamp"], f"{loc}/Timestamp"), f"{loc}/Timestamp"),
            ref_to_message_id=self.text(ref, f"{loc}/RefToMessageId") if ref is not None else None,
            time_to_live=(
                parse_datetime(self.text(ttl, f"{loc}/TimeToLive"), f"{loc}/TimeToLive") if ttl is not None else None
            ),
        )

    def ack_requested(self, el: _E) -> AckRequested:
        loc = "//Header/AckRequested"
        signed = self.attr(el, "signed", loc)
        if signed is None:
            raise self.fail("AckRequested needs eb:signed", f"{loc}/@signed")
        return AckRequested(
            signed=self.boolean(signed, f"{loc}/@signed"),
            actor=el.get(_ACTOR),
            id=self.attr(el, "id", loc),
            version=self.version(el, loc),
            must_understand=self.must_understand(el, loc),
            extensions=self.extensions(el, lambda t: False, loc),
        )

    def boolean(self, value: str, location: str) -> bool:
        v = value.strip()
        if v in ("true", "1"):
            return True
        if v in ("false", "0"):
            return False
        raise self.fail(f"{value!r} is not an xsd:boolean", location)

    def acknowledgment(self, el: _E) -> Acknowledgment:
        loc = "//Header/Acknowledgment"
        timestamp: datetime | None = None
        ref: str | None = None
        from_party: Party | None = None
        references: list[str] = []
        for child in self.children(el):
            if child.tag == _eb("Timestamp"):
                timestamp = parse_datetime(self.text(child, f"{loc}/Timestamp"), f"{loc}/Timestamp")
            elif child.tag == _eb("RefToMessageId"):
                ref = self.text(child, f"{loc}/RefToMessageId")
            elif child.tag == _eb("From"):
                from_party = self.party(child, f"{loc}/From")
            elif child.tag == _DS_REFERENCE:
                references.append(self.keep(child))
            else:
                raise self.fail(f"unexpected element {child.tag} in Acknowledgment", loc)
        if timestamp is None:
            raise self.fail("Acknowledgment has no Timestamp", f"{loc}/Timestamp")
        if ref is None:
            raise self.fail("Acknowledgment has no RefToMessageId", f"{loc}/RefToMessageId")
        return Acknowledgment(
            timestamp=timestamp,
            ref_to_message_id=ref,
            from_party=from_party,
            references=tuple(references),
            actor=el.get(_ACTOR),
            id=self.attr(el, "id", loc),
            version=self.version(el, loc),
            must_understand=self.must_understand(el, loc),
            # ebMS2 Appendix A: Acknowledgment allows foreign attributes but no foreign children.
            extensions=self.extensions(el, lambda t: True, loc),
        )

    def severity(self, value: str | None, location: str) -> Severity:
        if value is None:
            raise self.fail("severity is required", location)
        try:
            return Severity(value.strip())
        except ValueError:
            if self.lenient and value.strip().capitalize() in ("Error", "Warning"):
                self.warn(f"severity {value!r} is not spelt Error or Warning", location)
                return Severity(value.strip().capitalize())
            raise self.fail(f"severity {value!r} is neither Error nor Warning", location) from None

    def error_list(self, el: _E) -> ErrorList:
        loc = "//Header/ErrorList"
        errors: list[Error] = []
        for child in self.children(el):
            if child.tag != _eb("Error"):
                continue
            eloc = f"{loc}/Error"
            code = self.attr(child, "errorCode", eloc)
            if code is None or not code.strip():
                raise self.fail("Error needs eb:errorCode", f"{eloc}/@errorCode")
            description: Description | None = None
            for sub in self.children(child):
                if sub.tag == _eb("Description"):
                    description = self.description(sub, f"{eloc}/Description")
            kwargs = {}
            context = self.attr(child, "codeContext", eloc)
            if context is not None:
                kwargs["code_context"] = context
            errors.append(
                Error(
                    error_code=code.strip(),
                    severity=self.severity(self.attr(child, "severity", eloc), f"{eloc}/@severity"),
                    location=self.attr(child, "location", eloc) or None,
                    description=description,
                    id=self.attr(child, "id", eloc),
                    extensions=self.extensions(child, lambda t: t == _eb("Description"), eloc),
                    **kwargs,
                )
            )
        if not errors:
            raise self.fail("ErrorList has no Error", f"{loc}/Error")
        return ErrorList(
            errors=tuple(errors),
            highest_severity=self.severity(self.attr(el, "highestSeverity", loc), f"{loc}/@highestSeverity"),
            id=self.attr(el, "id", loc),
            version=self.version(el, loc),
            must_understand=self.must_understand(el, loc),
            extensions=self.extensions(el, lambda t: t == _eb("Error"), loc),
        )

    def sync_reply(self, el: _E) -> SyncReply:
        loc = "//Header/SyncReply"
        actor = el.get(_ACTOR)
        if actor is None:
            # ebMS2 §4.3.1: SOAP actor is required with the value of SOAP's "next".
            if not self.lenient:
                raise self.fail("SyncReply needs SOAP:actor", f"{loc}/@actor")
            self.warn("SyncReply has no SOAP:actor; SOAP next assumed", loc)
            return SyncReply(
                id=self.attr(el, "id", loc),
                version=self.version(el, loc),
                must_understand=self.must_understand(el, loc),
            )
        return SyncReply(
            actor=actor,
            id=self.attr(el, "id", loc),
            version=self.version(el, loc),
            must_understand=self.must_understand(el, loc),
            extensions=self.extensions(el, lambda t: False, loc),
        )

    def message_order(self, el: _E) -> MessageOrder:
        loc = "//Header/MessageOrder"
        seq = el.find(_eb("SequenceNumber"))
        if seq is None:
            raise self.fail("MessageOrder has no SequenceNumber", f"{loc}/SequenceNumber")
        text = self.text(seq, f"{loc}/SequenceNumber")
        if not text.isdigit():
            raise self.fail(f"SequenceNumber {text!r} is not a non-negative integer", f"{loc}/SequenceNumber")
        status_text = self.attr(seq, "status", f"{loc}/SequenceNumber")
        try:
            status = SequenceStatus(status_text.strip()) if status_text else SequenceStatus.CONTINUE
        except ValueError:
            raise self.fail(
                f"SequenceNumber@status {status_text!r} is not Reset or Continue",
                f"{loc}/SequenceNumber/@status",
                ErrorCode.VALUE_NOT_RECOGNIZED,
            ) from None
        try:
            return MessageOrder(
                sequence_number=int(text),
                status=status,
                id=self.attr(el, "id", loc),
                version=self.version(el, loc),
                must_understand=self.must_understand(el, loc),
                extensions=self.extensions(el, lambda t: t == _eb("SequenceNumber"), loc),
            )
        except ValueError as exc:
            raise self.fail(str(exc), f"{loc}/SequenceNumber") from None

    # -- body elements

    def manifest(self, el: _E) -> Manifest:
        loc = "//Body/Manifest"
        references: list[Reference] = []
        for child in self.children(el):
            if child.tag != _eb("Reference"):
                continue
            rloc = f"{loc}/Reference"
            href = child.get(_XLINK_HREF)
            if href is None or not href.strip():
                raise self.fail("Reference needs xlink:href", f"{rloc}/@href")
            schemas: list[Schema] = []
            descriptions: list[Description] = []
            for sub in self.children(child):
                if sub.tag == _eb("Schema"):
                    location = self.attr(sub, "location", f"{rloc}/Schema")
                    if location is None:
                        raise self.fail("Schema needs eb:location", f"{rloc}/Schema/@location")
                    schemas.append(Schema(location, self.attr(sub, "version", f"{rloc}/Schema")))
                elif sub.tag == _eb("Description"):
                    descriptions.extend(self.descriptions(sub, f"{rloc}/Description"))
            references.append(
                Reference(
                    href=href.strip(),
                    id=self.attr(child, "id", rloc),
                    role=child.get(_XLINK_ROLE),
                    schemas=tuple(schemas),
                    descriptions=tuple(descriptions),
                    extensions=self.extensions(
                        child,
                        lambda t: t in (_eb("Schema"), _eb("Description")),
                        rloc,
                        skip_attrs=(_XLINK_HREF, _XLINK_ROLE, _XLINK_TYPE),
                    ),
                )
            )
        if not references:
            raise self.fail("Manifest has no Reference", f"{loc}/Reference")
        return Manifest(
            references=tuple(references),
            id=self.attr(el, "id", loc),
            version=self.version(el, loc),
            extensions=self.extensions(el, lambda t: t == _eb("Reference"), loc),
        )

    def status_request(self, el: _E) -> StatusRequest:
        loc = "//Body/StatusRequest"
        ref = self.required_child(el, "RefToMessageId", loc)
        return StatusRequest(
            ref_to_message_id=self.text(ref, f"{loc}/RefToMessageId"),
            id=self.attr(el, "id", loc),
            version=self.version(el, loc),
            extensions=self.extensions(el, lambda t: t == _eb("RefToMessageId"), loc),
        )

    def status_response(self, el: _E) -> StatusResponse:
        loc = "//Body/StatusResponse"
        ref = self.required_child(el, "RefToMessageId", loc)
        ts = el.find(_eb("Timestamp"))
        status_text = self.attr(el, "messageStatus", loc)
        try:
            status = MessageStatus((status_text or "").strip())
        except ValueError:
            raise self.fail(
                f"messageStatus {status_text!r} is not recognised",
                f"{loc}/@messageStatus",
                ErrorCode.VALUE_NOT_RECOGNIZED,
            ) from None
        return StatusResponse(
            ref_to_message_id=self.text(ref, f"{loc}/RefToMessageId"),
            message_status=status,
            timestamp=parse_datetime(self.text(ts, f"{loc}/Timestamp"), f"{loc}/Timestamp") if ts is not None else None,
            id=self.attr(el, "id", loc),
            version=self.version(el, loc),
            extensions=self.extensions(el, lambda t: t in (_eb("RefToMessageId"), _eb("Timestamp")), loc),
        )

    def fault(self, el: _E) -> Fault:
        # SOAP 1.1 §4.4: faultcode, faultstring, faultactor and detail are unqualified.
        code = el.findtext("faultcode")
        string = el.findtext("faultstring")
        if code is None or string is None:
            raise self.fail("SOAP Fault needs faultcode and faultstring", "//Body/Fault")
        detail = el.find("detail")
        return Fault(
            faultcode=code.strip(),
            faultstring=string.strip(),
            faultactor=el.findtext("faultactor"),
            detail=tuple(self.keep(c) for c in (detail if detail is not None else ()) if isinstance(c.tag, str)),
        )


def _xml_text(el: _E) -> str:
    """Foreign XML as exclusive canonical text: only the namespaces it uses are declared, so the same
    element reads back to the same text wherever it stood (W3C Exclusive XML Canonicalization 1.0)."""
    try:
        return etree.tostring(el, method="c14n", exclusive=True, with_comments=True).decode("utf-8")
    except etree.C14NError:
        # W3C C14N 1.0 §2.3 refuses relative namespace URIs (deprecated by Namespaces in XML 1.0 §2.2).
        raise EbmsError(
            f"{etree.QName(el).localname} uses a relative namespace URI, which canonical XML cannot represent",
            error_code=ErrorCode.OTHER_XML,
            location=_where(el),
        ) from None


def _where(el: _E) -> str:
    """The location of ``el`` in the style of ebMS error locations (``//Header/Name/...``)."""
    names: list[str] = []
    node: _E | None = el
    while node is not None and node.tag != _ENVELOPE:
        names.append(etree.QName(node).localname if isinstance(node.tag, str) else "node()")
        node = node.getparent()
    return "//" + "/".join(reversed(names))


def _is_eb(tag: str) -> bool:
    return tag.startswith(f"{{{EB}}}")


_HEADER_ORDER = (
    "From",
    "To",
    "CPAId",
    "ConversationId",
    "Service",
    "Action",
    "MessageData",
    "DuplicateElimination",
)

_HEADER_READERS: dict[str, str] = {
    _eb("MessageHeader"): "message_header",
    _eb("AckRequested"): "ack_requested",
    _eb("Acknowledgment"): "acknowledgment",
    _eb("ErrorList"): "error_list",
    _eb("SyncReply"): "sync_reply",
    _eb("MessageOrder"): "message_order",
}
_BODY_READERS: dict[str, str] = {
    _eb("Manifest"): "manifest",
    _eb("StatusRequest"): "status_request",
    _eb("StatusResponse"): "status_response",
    _FAULT: "fault",
}
_SINGLE = {
    "message_header",
    "error_list",
    "sync_reply",
    "message_order",
    "manifest",
    "status_request",
    "status_response",
    "fault",
}


def read_envelope(root: _E, *, lenient: bool = False) -> tuple[Envelope, tuple[Issue, ...]]:
    """Build the :class:`Envelope` model from a parsed SOAP envelope element.

    Returns the model and the Warnings of lenient mode (always empty in strict mode, where every
    deviation raises). Raises :class:`EnvelopeError` when ``root`` is not a SOAP 1.1 Envelope and
    :class:`EbmsError` (with an XPath ``location``) when a required element or value is missing or bad.
    """
    if root.tag != _ENVELOPE:
        # SOAP 1.1 §4.1: the root is SOAP-ENV:Envelope in the SOAP 1.1 namespace.
        raise EnvelopeError(f"root element is {root.tag}, not a SOAP 1.1 Envelope", location="/")
    reader = _Reader(lenient)
    header_el: _E | None = None
    body_el: _E | None = None
    env_other: list[str] = []
    for child in reader.children(root):
        if child.tag == _HEADER and header_el is None and body_el is None:
            header_el = child
        elif child.tag == _BODY and body_el is None:
            body_el = child
        elif child.tag in (_HEADER, _BODY):
            raise EnvelopeError(f"misplaced or repeated SOAP {etree.QName(child).localname}", location="/Envelope")
        else:
            env_other.append(reader.keep(child))
    if body_el is None:
        # SOAP 1.1 §4.3: the Body element is mandatory.
        raise EnvelopeError("SOAP Envelope has no Body", location="/Envelope/Body")

    fields: dict[str, object] = {}
    lists: dict[str, list[object]] = {"ack_requested": [], "acknowledgments": [], "signatures": []}
    header_ext: list[str] = []
    if header_el is not None:
        for child in reader.children(header_el):
            tag = child.tag
            method = _HEADER_READERS.get(tag)
            if method == "ack_requested":
                lists["ack_requested"].append(reader.ack_requested(child))
            elif method == "acknowledgment":
                lists["acknowledgments"].append(reader.acknowledgment(child))
            elif method is not None:
                if method in fields:
                    raise reader.fail(
                        f"{etree.QName(tag).localname} occurs more than once", f"//Header/{etree.QName(tag).localname}"
                    )
                fields[method] = getattr(reader, method)(child)
            elif tag == _DS_SIGNATURE:
                lists["signatures"].append(Signature(reader.keep(child)))
            else:
                _unknown(reader, tag, "//Header")
                header_ext.append(reader.keep(child))
    body_ext: list[str] = []
    for child in reader.children(body_el):
        tag = child.tag
        method = _BODY_READERS.get(tag)
        if method is not None:
            if method in fields:
                raise reader.fail(
                    f"{etree.QName(tag).localname} occurs more than once", f"//Body/{etree.QName(tag).localname}"
                )
            fields[method] = getattr(reader, method)(child)
        else:
            _unknown(reader, tag, "//Body")
            body_ext.append(reader.keep(child))
    try:
        envelope = Envelope(
            ack_requested=tuple(lists["ack_requested"]),  # type: ignore[arg-type]
            acknowledgments=tuple(lists["acknowledgments"]),  # type: ignore[arg-type]
            signatures=tuple(lists["signatures"]),  # type: ignore[arg-type]
            header_extensions=Extensions(tuple(header_ext), _foreign_attrs(header_el))
            if header_el is not None
            else NO_EXTENSIONS,
            body_extensions=Extensions(tuple(body_ext), _foreign_attrs(body_el)),
            envelope_extensions=Extensions(tuple(env_other), _foreign_attrs(root)),
            **fields,  # type: ignore[arg-type]
        )
    except ValueError as exc:
        raise EbmsError(str(exc), error_code=ErrorCode.INCONSISTENT, location="//Header/AckRequested") from None
    return envelope, tuple(reader.warnings)


def read_reply_address(root: _E) -> ReplyAddress | None:
    """Who to answer about the envelope ``root`` when :func:`read_envelope` refused it: From, To, CPAId,
    ConversationId and MessageId of its MessageHeader, read on their own, so that an error anywhere else
    (another header element, the Body, the MessageHeader's own eb:version or Timestamp) does not keep the
    sender from getting its ErrorList (ebMS2 §4.2.4.2). None when one of them cannot be read."""
    if root.tag != _ENVELOPE:
        return None
    header = root.find(_HEADER)
    el = header.find(_eb("MessageHeader")) if header is not None else None
    if el is None:
        return None
    reader = _Reader(lenient=True)
    loc = "//Header/MessageHeader"
    try:
        data = reader.required_child(el, "MessageData", loc)
        return ReplyAddress(
            from_party=reader.party(reader.required_child(el, "From", loc), f"{loc}/From"),
            to_party=reader.party(reader.required_child(el, "To", loc), f"{loc}/To"),
            cpa_id=reader.text(reader.required_child(el, "CPAId", loc), f"{loc}/CPAId"),
            conversation_id=reader.text(reader.required_child(el, "ConversationId", loc), f"{loc}/ConversationId"),
            message_id=reader.text(
                reader.required_child(data, "MessageId", f"{loc}/MessageData"), f"{loc}/MessageData/MessageId"
            ),
        )
    except (EbmsError, ValueError):
        return None


def _unknown(reader: _Reader, tag: str, location: str) -> None:
    if tag.startswith(f"{{{EB}}}"):
        name = tag[len(EB) + 2 :]
        if not reader.lenient:
            raise reader.fail(f"eb:{name} is not an ebMS 2.0 element", f"{location}/{name}", ErrorCode.NOT_SUPPORTED)
        reader.warn(f"eb:{name} is not an ebMS 2.0 element; kept as is", f"{location}/{name}", ErrorCode.NOT_SUPPORTED)


def _foreign_attrs(el: _E) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in el.attrib.items() if str(k).startswith("{"))


# ----------------------------------------------------------------------------------------------- writing

_NSMAP = {"SOAP": SOAP_ENV, "eb": EB, "xlink": XLINK}


def _sub(parent: _E, tag: str, text: str | None = None) -> _E:
    el = etree.SubElement(parent, tag)
    if text is not None:
        el.text = text
    return el


def _ext_attrs(
    el: _E, *, id: str | None, version: str | None, must_understand: bool | None, extensions: Extensions
) -> None:
    if id is not None:
        el.set(_EB_ID, id)
    if version is not None:
        el.set(_EB_VERSION, version)
    if must_understand is not None:
        el.set(_MUST_UNDERSTAND, "1" if must_understand else "0")
    for name, value in extensions.attributes:
        el.set(name, value)


def _ext_elements(el: _E, extensions: Extensions) -> None:
    for xml in extensions.elements:
        el.append(parse_xml(xml.encode("utf-8"), what="extension element"))


def _party(parent: _E, tag: str, party: Party) -> None:
    el = _sub(parent, _eb(tag))
    for pid in party.party_ids:
        p = _sub(el, _eb("PartyId"), pid.value)
        if pid.type is not None:
            p.set(_eb("type"), pid.type)
    if party.role is not None:
        _sub(el, _eb("Role"), party.role)


def _description(parent: _E, d: Description) -> None:
    _sub(parent, _eb("Description"), d.text).set(_XML_LANG, d.lang)


def write_envelope(envelope: Envelope) -> _E:
    """Build the SOAP envelope element for ``envelope``, children in the schema's order."""
    root = etree.Element(_ENVELOPE, nsmap=_NSMAP)
    for name, value in envelope.envelope_extensions.attributes:
        root.set(name, value)
    header = _sub(root, _HEADER)
    mh = envelope.message_header
    if mh is not None:
        el = _sub(header, _eb("MessageHeader"))
        _ext_attrs(el, id=mh.id, version=mh.version, must_understand=mh.must_understand, extensions=mh.extensions)
        _party(el, "From", mh.from_party)
        _party(el, "To", mh.to_party)
        _sub(el, _eb("CPAId"), mh.cpa_id)
        _sub(el, _eb("ConversationId"), mh.conversation_id)
        service = _sub(el, _eb("Service"), mh.service.value)
        if mh.service.type is not None:
            service.set(_eb("type"), mh.service.type)
        _sub(el, _eb("Action"), mh.action)
        md = _sub(el, _eb("MessageData"))
        _sub(md, _eb("MessageId"), mh.message_data.message_id)
        _sub(md, _eb("Timestamp"), format_datetime(mh.message_data.timestamp))
        if mh.message_data.ref_to_message_id is not None:
            _sub(md, _eb("RefToMessageId"), mh.message_data.ref_to_message_id)
        if mh.message_data.time_to_live is not None:
            _sub(md, _eb("TimeToLive"), format_datetime(mh.message_data.time_to_live))
        if mh.duplicate_elimination:
            _sub(el, _eb("DuplicateElimination"))
        for d in mh.descriptions:
            _description(el, d)
        _ext_elements(el, mh.extensions)
    if envelope.sync_reply is not None:
        sr = envelope.sync_reply
        if sr.actor != SOAP_ACTOR_NEXT:
            # ebMS2 §4.3.1: SyncReply's actor has the REQUIRED value of SOAP's "next".
            raise ValueError(f"SyncReply.actor must be {SOAP_ACTOR_NEXT} (ebMS2 §4.3.1), not {sr.actor!r}")
        el = _sub(header, _eb("SyncReply"))
        _ext_attrs(el, id=sr.id, version=sr.version, must_understand=sr.must_understand, extensions=sr.extensions)
        el.set(_ACTOR, sr.actor)
        _ext_elements(el, sr.extensions)
    if envelope.message_order is not None:
        mo = envelope.message_order
        el = _sub(header, _eb("MessageOrder"))
        _ext_attrs(el, id=mo.id, version=mo.version, must_understand=mo.must_understand, extensions=mo.extensions)
        seq = _sub(el, _eb("SequenceNumber"), str(mo.sequence_number))
        if mo.status is not SequenceStatus.CONTINUE:
            seq.set(_eb("status"), mo.status.value)
        _ext_elements(el, mo.extensions)
    for ar in envelope.ack_requested:
        if ar.actor not in (None, ACTOR_TO_PARTY_MSH, ACTOR_NEXT_MSH):
            # ebMS2 §6.3.1.1: AckRequested targets the To Party MSH (by default) or the Next MSH.
            raise ValueError(
                f"AckRequested.actor must be {ACTOR_TO_PARTY_MSH} or {ACTOR_NEXT_MSH} (ebMS2 §6.3.1.1), "
                f"not {ar.actor!r}"
            )
        el = _sub(header, _eb("AckRequested"))
        _ext_attrs(el, id=ar.id, version=ar.version, must_understand=ar.must_understand, extensions=ar.extensions)
        if ar.actor is not None:
            el.set(_ACTOR, ar.actor)
        el.set(_eb("signed"), "true" if ar.signed else "false")
        _ext_elements(el, ar.extensions)
    for ack in envelope.acknowledgments:
        el = _sub(header, _eb("Acknowledgment"))
        _ext_attrs(el, id=ack.id, version=ack.version, must_understand=ack.must_understand, extensions=ack.extensions)
        if ack.actor is not None:
            el.set(_ACTOR, ack.actor)
        _sub(el, _eb("Timestamp"), format_datetime(ack.timestamp))
        _sub(el, _eb("RefToMessageId"), ack.ref_to_message_id)
        if ack.from_party is not None:
            _party(el, "From", ack.from_party)
        for ds_reference in ack.references:
            el.append(parse_xml(ds_reference.encode("utf-8"), what="ds:Reference"))
    if envelope.error_list is not None:
        elist = envelope.error_list
        el = _sub(header, _eb("ErrorList"))
        _ext_attrs(
            el, id=elist.id, version=elist.version, must_understand=elist.must_understand, extensions=elist.extensions
        )
        el.set(_eb("highestSeverity"), elist.highest_severity.value)
        for err in elist.errors:
            e = _sub(el, _eb("Error"))
            _ext_attrs(e, id=err.id, version=None, must_understand=None, extensions=err.extensions)
            e.set(_eb("codeContext"), err.code_context)
            e.set(_eb("errorCode"), err.error_code)
            e.set(_eb("severity"), err.severity.value)
            if err.location is not None:
                e.set(_eb("location"), err.location)
            if err.description is not None:
                _description(e, err.description)
            _ext_elements(e, err.extensions)
        _ext_elements(el, elist.extensions)
    for sig in envelope.signatures:
        header.append(parse_xml(sig.xml.encode("utf-8"), what="ds:Signature"))
    for name, value in envelope.header_extensions.attributes:
        header.set(name, value)
    _ext_elements(header, envelope.header_extensions)
    if len(header) == 0 and not header.attrib:
        root.remove(header)

    body = _sub(root, _BODY)
    for name, value in envelope.body_extensions.attributes:
        body.set(name, value)
    if envelope.manifest is not None:
        man = envelope.manifest
        el = _sub(body, _eb("Manifest"))
        _ext_attrs(el, id=man.id, version=man.version, must_understand=None, extensions=man.extensions)
        for ref in man.references:
            r = _sub(el, _eb("Reference"))
            _ext_attrs(r, id=ref.id, version=None, must_understand=None, extensions=ref.extensions)
            r.set(_XLINK_TYPE, "simple")
            r.set(_XLINK_HREF, ref.href)
            if ref.role is not None:
                r.set(_XLINK_ROLE, ref.role)
            for s in ref.schemas:
                se = _sub(r, _eb("Schema"))
                se.set(_eb("location"), s.location)
                if s.version is not None:
                    se.set(_eb("version"), s.version)
            for d in ref.descriptions:
                _description(r, d)
            _ext_elements(r, ref.extensions)
        _ext_elements(el, man.extensions)
    if envelope.status_request is not None:
        sq = envelope.status_request
        el = _sub(body, _eb("StatusRequest"))
        _ext_attrs(el, id=sq.id, version=sq.version, must_understand=None, extensions=sq.extensions)
        _sub(el, _eb("RefToMessageId"), sq.ref_to_message_id)
        _ext_elements(el, sq.extensions)
    if envelope.status_response is not None:
        sp = envelope.status_response
        el = _sub(body, _eb("StatusResponse"))
        _ext_attrs(el, id=sp.id, version=sp.version, must_understand=None, extensions=sp.extensions)
        el.set(_eb("messageStatus"), sp.message_status.value)
        _sub(el, _eb("RefToMessageId"), sp.ref_to_message_id)
        if sp.timestamp is not None:
            _sub(el, _eb("Timestamp"), format_datetime(sp.timestamp))
        _ext_elements(el, sp.extensions)
    if envelope.fault is not None:
        f = envelope.fault
        el = _sub(body, _FAULT)
        _sub(el, "faultcode", f.faultcode)
        _sub(el, "faultstring", f.faultstring)
        if f.faultactor is not None:
            _sub(el, "faultactor", f.faultactor)
        if f.detail:
            detail = _sub(el, "detail")
            for xml in f.detail:
                detail.append(parse_xml(xml.encode("utf-8"), what="Fault detail"))
    _ext_elements(body, envelope.body_extensions)
    _ext_elements(root, envelope.envelope_extensions)
    return root


def serialise_envelope(envelope: Envelope) -> bytes:
    """The envelope as UTF-8 XML bytes with an XML declaration."""
    return etree.tostring(write_envelope(envelope), xml_declaration=True, encoding="UTF-8")
