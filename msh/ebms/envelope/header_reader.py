"""Reading the ebXML elements of the SOAP Header: MessageHeader, AckRequested, Acknowledgment, ErrorList,
SyncReply and MessageOrder (ebMS2 §3.1, §4.2.3, §4.3, §6.3, §9.1).

Each ``read_*`` function builds one model element from its XML with an
:class:`~msh.ebms.envelope.element_reader.ElementReader` (the pass it belongs to), or raises an
:class:`~msh.errors.EbmsError` whose ``location`` names the element or attribute at fault.
"""

from __future__ import annotations

from datetime import datetime

from lxml import etree

from msh.ebms.envelope.datetimes import parse_datetime
from msh.ebms.envelope.element_reader import ElementReader
from msh.ebms.envelope.names import ACTOR, DS_REFERENCE, eb
from msh.ebms.model import (
    Acknowledgment,
    AckRequested,
    Description,
    Error,
    ErrorList,
    MessageData,
    MessageHeader,
    MessageOrder,
    Party,
    SequenceStatus,
    Service,
    SyncReply,
)
from msh.ebms.namespaces import EB
from msh.errors import ErrorCode

__all__ = [
    "read_ack_requested",
    "read_acknowledgment",
    "read_error_list",
    "read_message_header",
    "read_message_order",
    "read_sync_reply",
]

_E = etree._Element


def read_message_header(reader: ElementReader, el: _E) -> MessageHeader:
    """The MessageHeader element (ebMS2 §3.1); children out of the schema's order are an error (strict)
    or a Warning (lenient)."""
    loc = "//Header/MessageHeader"
    found: dict[str, _E] = {}
    descriptions: list[Description] = []
    previous = -1
    for child in reader.children(el):
        tag = child.tag
        if not tag.startswith(f"{{{EB}}}"):
            continue
        name = tag[len(EB) + 2 :]
        if name == "Description":
            descriptions.extend(reader.descriptions(child, f"{loc}/Description"))
            continue
        if name not in _HEADER_ORDER:
            continue  # reported by extensions()
        if name in found:
            raise reader.fail(f"{name} occurs more than once", f"{loc}/{name}")
        found[name] = child
        position = _HEADER_ORDER.index(name)
        if position < previous:
            # ebMS2 §3.1: the children of MessageHeader come in the schema's order.
            if not reader.lenient:
                raise reader.fail(f"{name} is out of order in MessageHeader", f"{loc}/{name}")
            reader.warn(f"{name} is out of order in MessageHeader", f"{loc}/{name}")
        previous = max(previous, position)
    for name in _HEADER_ORDER[:7]:
        if name not in found:
            raise reader.fail(f"MessageHeader has no {name}", f"{loc}/{name}")
    service_el = found["Service"]
    service_type = reader.attr(service_el, "type", f"{loc}/Service")
    return MessageHeader(
        from_party=reader.party(found["From"], f"{loc}/From"),
        to_party=reader.party(found["To"], f"{loc}/To"),
        cpa_id=reader.text(found["CPAId"], f"{loc}/CPAId"),
        conversation_id=reader.text(found["ConversationId"], f"{loc}/ConversationId"),
        service=Service(reader.text(service_el, f"{loc}/Service"), service_type),
        action=reader.text(found["Action"], f"{loc}/Action"),
        message_data=_message_data(reader, found["MessageData"], f"{loc}/MessageData"),
        duplicate_elimination="DuplicateElimination" in found,
        descriptions=tuple(descriptions),
        **reader.header_attributes(el, loc),
        extensions=reader.extensions(el, _is_eb, loc),
    )


def _message_data(reader: ElementReader, el: _E, loc: str) -> MessageData:
    """The MessageData element (ebMS2 §3.1.6)."""
    values: dict[str, _E] = {}
    for child in reader.children(el):
        name = etree.QName(child).localname
        if child.tag != eb(name) or name not in ("MessageId", "Timestamp", "RefToMessageId", "TimeToLive"):
            raise reader.fail(f"unexpected element {name} in MessageData", f"{loc}/{name}")
        if name in values:
            if not reader.lenient:
                raise reader.fail(f"{name} occurs more than once", f"{loc}/{name}")
            # Seen in real PHIN-MS responses: two RefToMessageId; the last one names the request.
            reader.warn(f"{name} occurs more than once; the last one is used", f"{loc}/{name}")
        values[name] = child
    for name in ("MessageId", "Timestamp"):
        if name not in values:
            raise reader.fail(f"MessageData has no {name}", f"{loc}/{name}")
    ttl = values.get("TimeToLive")
    ref = values.get("RefToMessageId")
    return MessageData(
        message_id=reader.text(values["MessageId"], f"{loc}/MessageId"),
        timestamp=parse_datetime(reader.text(values["Timestamp"], f"{loc}/Timestamp"), f"{loc}/Timestamp"),
        ref_to_message_id=reader.text(ref, f"{loc}/RefToMessageId") if ref is not None else None,
        time_to_live=(
            parse_datetime(reader.text(ttl, f"{loc}/TimeToLive"), f"{loc}/TimeToLive") if ttl is not None else None
        ),
    )


def read_ack_requested(reader: ElementReader, el: _E) -> AckRequested:
    """An AckRequested element (ebMS2 §6.3.1)."""
    loc = "//Header/AckRequested"
    signed = reader.attr(el, "signed", loc)
    if signed is None:
        raise reader.fail("AckRequested needs eb:signed", f"{loc}/@signed")
    return AckRequested(
        signed=reader.boolean(signed, f"{loc}/@signed"),
        actor=el.get(ACTOR),
        **reader.header_attributes(el, loc),
        extensions=reader.extensions(el, lambda t: False, loc),
    )


def read_acknowledgment(reader: ElementReader, el: _E) -> Acknowledgment:
    """An Acknowledgment element (ebMS2 §6.3.2)."""
    loc = "//Header/Acknowledgment"
    timestamp: datetime | None = None
    ref: str | None = None
    from_party: Party | None = None
    references: list[str] = []
    for child in reader.children(el):
        if child.tag == eb("Timestamp"):
            timestamp = parse_datetime(reader.text(child, f"{loc}/Timestamp"), f"{loc}/Timestamp")
        elif child.tag == eb("RefToMessageId"):
            ref = reader.text(child, f"{loc}/RefToMessageId")
        elif child.tag == eb("From"):
            from_party = reader.party(child, f"{loc}/From")
        elif child.tag == DS_REFERENCE:
            references.append(reader.keep(child))
        else:
            raise reader.fail(f"unexpected element {child.tag} in Acknowledgment", loc)
    if timestamp is None:
        raise reader.fail("Acknowledgment has no Timestamp", f"{loc}/Timestamp")
    if ref is None:
        raise reader.fail("Acknowledgment has no RefToMessageId", f"{loc}/RefToMessageId")
    return Acknowledgment(
        timestamp=timestamp,
        ref_to_message_id=ref,
        from_party=from_party,
        references=tuple(references),
        actor=el.get(ACTOR),
        **reader.header_attributes(el, loc),
        # ebMS2 Appendix A: Acknowledgment allows foreign attributes but no foreign children.
        extensions=reader.extensions(el, lambda t: True, loc),
    )


def read_error_list(reader: ElementReader, el: _E) -> ErrorList:
    """The ErrorList element (ebMS2 §4.2.3)."""
    loc = "//Header/ErrorList"
    errors: list[Error] = []
    for child in reader.children(el):
        if child.tag != eb("Error"):
            continue
        eloc = f"{loc}/Error"
        code = reader.attr(child, "errorCode", eloc)
        if code is None or not code.strip():
            raise reader.fail("Error needs eb:errorCode", f"{eloc}/@errorCode")
        description: Description | None = None
        for sub in reader.children(child):
            if sub.tag == eb("Description"):
                description = reader.description(sub, f"{eloc}/Description")
        kwargs = {}
        context = reader.attr(child, "codeContext", eloc)
        if context is not None:
            kwargs["code_context"] = context
        errors.append(
            Error(
                error_code=code.strip(),
                severity=reader.severity(reader.attr(child, "severity", eloc), f"{eloc}/@severity"),
                location=reader.attr(child, "location", eloc) or None,
                description=description,
                id=reader.attr(child, "id", eloc),
                extensions=reader.extensions(child, lambda t: t == eb("Description"), eloc),
                **kwargs,
            )
        )
    if not errors:
        raise reader.fail("ErrorList has no Error", f"{loc}/Error")
    return ErrorList(
        errors=tuple(errors),
        highest_severity=reader.severity(reader.attr(el, "highestSeverity", loc), f"{loc}/@highestSeverity"),
        **reader.header_attributes(el, loc),
        extensions=reader.extensions(el, lambda t: t == eb("Error"), loc),
    )


def read_sync_reply(reader: ElementReader, el: _E) -> SyncReply:
    """The SyncReply element (ebMS2 §4.3)."""
    loc = "//Header/SyncReply"
    actor = el.get(ACTOR)
    if actor is None:
        # ebMS2 §4.3.1: SOAP actor is required with the value of SOAP's "next".
        if not reader.lenient:
            raise reader.fail("SyncReply needs SOAP:actor", f"{loc}/@actor")
        reader.warn("SyncReply has no SOAP:actor; SOAP next assumed", loc)
        return SyncReply(
            **reader.header_attributes(el, loc),
        )
    return SyncReply(
        actor=actor,
        **reader.header_attributes(el, loc),
        extensions=reader.extensions(el, lambda t: False, loc),
    )


def read_message_order(reader: ElementReader, el: _E) -> MessageOrder:
    """The MessageOrder element (ebMS2 §9.1)."""
    loc = "//Header/MessageOrder"
    seq = el.find(eb("SequenceNumber"))
    if seq is None:
        raise reader.fail("MessageOrder has no SequenceNumber", f"{loc}/SequenceNumber")
    text = reader.text(seq, f"{loc}/SequenceNumber")
    if not text.isdigit():
        raise reader.fail(f"SequenceNumber {text!r} is not a non-negative integer", f"{loc}/SequenceNumber")
    status_text = reader.attr(seq, "status", f"{loc}/SequenceNumber")
    try:
        status = SequenceStatus(status_text.strip()) if status_text else SequenceStatus.CONTINUE
    except ValueError:
        raise reader.fail(
            f"SequenceNumber@status {status_text!r} is not Reset or Continue",
            f"{loc}/SequenceNumber/@status",
            ErrorCode.VALUE_NOT_RECOGNIZED,
        ) from None
    try:
        return MessageOrder(
            sequence_number=int(text),
            status=status,
            **reader.header_attributes(el, loc),
            extensions=reader.extensions(el, lambda t: t == eb("SequenceNumber"), loc),
        )
    except ValueError as exc:
        raise reader.fail(str(exc), f"{loc}/SequenceNumber") from None


def _is_eb(tag: str) -> bool:
    return tag.startswith(f"{{{EB}}}")


# ebMS2 §3.1: the children of MessageHeader in the schema's order; the first seven are required.
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
