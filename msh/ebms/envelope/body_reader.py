"""Reading the ebXML elements of the SOAP Body: Manifest, StatusRequest and StatusResponse (ebMS2 §3.2,
§7.2), and a SOAP Fault (SOAP 1.1 §4.4).

Each ``read_*`` function builds one model element from its XML with an
:class:`~msh.ebms.envelope.element_reader.ElementReader` (the pass it belongs to), or raises an
:class:`~msh.errors.EbmsError` whose ``location`` names the element or attribute at fault.
"""

from __future__ import annotations

from lxml import etree

from msh.ebms.envelope.datetimes import parse_datetime
from msh.ebms.envelope.element_reader import ElementReader
from msh.ebms.envelope.names import XLINK_HREF, XLINK_ROLE, XLINK_TYPE, eb
from msh.ebms.model import Description, Fault, Manifest, MessageStatus, Reference, Schema, StatusRequest, StatusResponse
from msh.errors import ErrorCode

__all__ = ["read_fault", "read_manifest", "read_status_request", "read_status_response"]

_E = etree._Element


def read_manifest(reader: ElementReader, el: _E) -> Manifest:
    """The Manifest element (ebMS2 §3.2): its References, each with its Schemas and Descriptions."""
    loc = "//Body/Manifest"
    references: list[Reference] = []
    for child in reader.children(el):
        if child.tag != eb("Reference"):
            continue
        rloc = f"{loc}/Reference"
        href = child.get(XLINK_HREF)
        if href is None or not href.strip():
            raise reader.fail("Reference needs xlink:href", f"{rloc}/@href")
        schemas: list[Schema] = []
        descriptions: list[Description] = []
        for sub in reader.children(child):
            if sub.tag == eb("Schema"):
                location = reader.attr(sub, "location", f"{rloc}/Schema")
                if location is None:
                    raise reader.fail("Schema needs eb:location", f"{rloc}/Schema/@location")
                schemas.append(Schema(location, reader.attr(sub, "version", f"{rloc}/Schema")))
            elif sub.tag == eb("Description"):
                descriptions.extend(reader.descriptions(sub, f"{rloc}/Description"))
        references.append(
            Reference(
                href=href.strip(),
                id=reader.attr(child, "id", rloc),
                role=child.get(XLINK_ROLE),
                schemas=tuple(schemas),
                descriptions=tuple(descriptions),
                extensions=reader.extensions(
                    child,
                    lambda t: t in (eb("Schema"), eb("Description")),
                    rloc,
                    skip_attrs=(XLINK_HREF, XLINK_ROLE, XLINK_TYPE),
                ),
            )
        )
    if not references:
        raise reader.fail("Manifest has no Reference", f"{loc}/Reference")
    return Manifest(
        references=tuple(references),
        **reader.body_attributes(el, loc),
        extensions=reader.extensions(el, lambda t: t == eb("Reference"), loc),
    )


def read_status_request(reader: ElementReader, el: _E) -> StatusRequest:
    """The StatusRequest element (ebMS2 §7.2.2)."""
    loc = "//Body/StatusRequest"
    ref = reader.required_child(el, "RefToMessageId", loc)
    return StatusRequest(
        ref_to_message_id=reader.text(ref, f"{loc}/RefToMessageId"),
        **reader.body_attributes(el, loc),
        extensions=reader.extensions(el, lambda t: t == eb("RefToMessageId"), loc),
    )


def read_status_response(reader: ElementReader, el: _E) -> StatusResponse:
    """The StatusResponse element (ebMS2 §7.2.3)."""
    loc = "//Body/StatusResponse"
    ref = reader.required_child(el, "RefToMessageId", loc)
    ts = el.find(eb("Timestamp"))
    status_text = reader.attr(el, "messageStatus", loc)
    try:
        status = MessageStatus((status_text or "").strip())
    except ValueError:
        raise reader.fail(
            f"messageStatus {status_text!r} is not recognised",
            f"{loc}/@messageStatus",
            ErrorCode.VALUE_NOT_RECOGNIZED,
        ) from None
    return StatusResponse(
        ref_to_message_id=reader.text(ref, f"{loc}/RefToMessageId"),
        message_status=status,
        timestamp=parse_datetime(reader.text(ts, f"{loc}/Timestamp"), f"{loc}/Timestamp") if ts is not None else None,
        **reader.body_attributes(el, loc),
        extensions=reader.extensions(el, lambda t: t in (eb("RefToMessageId"), eb("Timestamp")), loc),
    )


def read_fault(reader: ElementReader, el: _E) -> Fault:
    """A SOAP Fault (SOAP 1.1 §4.4), its detail entries kept as canonical text."""
    # SOAP 1.1 §4.4: faultcode, faultstring, faultactor and detail are unqualified.
    code = el.findtext("faultcode")
    string = el.findtext("faultstring")
    if code is None or string is None:
        raise reader.fail("SOAP Fault needs faultcode and faultstring", "//Body/Fault")
    detail = el.find("detail")
    return Fault(
        faultcode=code.strip(),
        faultstring=string.strip(),
        faultactor=el.findtext("faultactor"),
        detail=tuple(reader.keep(c) for c in (detail if detail is not None else ()) if isinstance(c.tag, str)),
    )
