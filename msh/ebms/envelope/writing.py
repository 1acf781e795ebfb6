"""Writing the :class:`~msh.ebms.model.Envelope` model as a SOAP envelope (SOAP 1.1 §4, ebMS2 §2.3).

:func:`write_envelope` and :func:`serialise_envelope` always produce schema-valid XML in the schema's
element order; they refuse (``ValueError``) what the reader accepts only for the receiving MSH to refuse
it, a SyncReply or AckRequested aimed at an actor the specification does not allow (ebMS2 §4.3.1,
§6.3.1.1). Extensions are written back where they were read.
"""

from __future__ import annotations

from lxml import etree

from msh.ebms.envelope.datetimes import format_datetime
from msh.ebms.envelope.names import (
    ACTOR,
    BODY,
    EB_ID,
    EB_VERSION,
    ENVELOPE,
    FAULT,
    HEADER,
    MUST_UNDERSTAND,
    XLINK_HREF,
    XLINK_ROLE,
    XLINK_TYPE,
    XML_LANG,
    eb,
)
from msh.ebms.envelope.writing_text import envelope_text
from msh.ebms.model import Description, Envelope, Extensions, Party, SequenceStatus
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH, EB, SOAP_ACTOR_NEXT, SOAP_ENV, XLINK
from msh.safexml import parse_xml

__all__ = ["serialise_envelope", "write_envelope"]

_E = etree._Element

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
        el.set(EB_ID, id)
    if version is not None:
        el.set(EB_VERSION, version)
    if must_understand is not None:
        el.set(MUST_UNDERSTAND, "1" if must_understand else "0")
    for name, value in extensions.attributes:
        el.set(name, value)


def _ext_elements(el: _E, extensions: Extensions) -> None:
    for xml in extensions.elements:
        el.append(parse_xml(xml.encode("utf-8"), what="extension element"))


def _party(parent: _E, tag: str, party: Party) -> None:
    el = _sub(parent, eb(tag))
    for pid in party.party_ids:
        p = _sub(el, eb("PartyId"), pid.value)
        if pid.type is not None:
            p.set(eb("type"), pid.type)
    if party.role is not None:
        _sub(el, eb("Role"), party.role)


def _description(parent: _E, d: Description) -> None:
    _sub(parent, eb("Description"), d.text).set(XML_LANG, d.lang)


def write_envelope(envelope: Envelope) -> _E:
    """Build the SOAP envelope element for ``envelope``, children in the schema's order."""
    root = etree.Element(ENVELOPE, nsmap=_NSMAP)
    for name, value in envelope.envelope_extensions.attributes:
        root.set(name, value)
    header = _sub(root, HEADER)
    mh = envelope.message_header
    if mh is not None:
        el = _sub(header, eb("MessageHeader"))
        _ext_attrs(el, id=mh.id, version=mh.version, must_understand=mh.must_understand, extensions=mh.extensions)
        _party(el, "From", mh.from_party)
        _party(el, "To", mh.to_party)
        _sub(el, eb("CPAId"), mh.cpa_id)
        _sub(el, eb("ConversationId"), mh.conversation_id)
        service = _sub(el, eb("Service"), mh.service.value)
        if mh.service.type is not None:
            service.set(eb("type"), mh.service.type)
        _sub(el, eb("Action"), mh.action)
        md = _sub(el, eb("MessageData"))
        _sub(md, eb("MessageId"), mh.message_data.message_id)
        _sub(md, eb("Timestamp"), format_datetime(mh.message_data.timestamp))
        if mh.message_data.ref_to_message_id is not None:
            _sub(md, eb("RefToMessageId"), mh.message_data.ref_to_message_id)
        if mh.message_data.time_to_live is not None:
            _sub(md, eb("TimeToLive"), format_datetime(mh.message_data.time_to_live))
        if mh.duplicate_elimination:
            _sub(el, eb("DuplicateElimination"))
        for d in mh.descriptions:
            _description(el, d)
        _ext_elements(el, mh.extensions)
    if envelope.sync_reply is not None:
        sr = envelope.sync_reply
        if sr.actor != SOAP_ACTOR_NEXT:
            # ebMS2 §4.3.1: SyncReply's actor has the REQUIRED value of SOAP's "next".
            raise ValueError(f"SyncReply.actor must be {SOAP_ACTOR_NEXT} (ebMS2 §4.3.1), not {sr.actor!r}")
        el = _sub(header, eb("SyncReply"))
        _ext_attrs(el, id=sr.id, version=sr.version, must_understand=sr.must_understand, extensions=sr.extensions)
        el.set(ACTOR, sr.actor)
        _ext_elements(el, sr.extensions)
    if envelope.message_order is not None:
        mo = envelope.message_order
        el = _sub(header, eb("MessageOrder"))
        _ext_attrs(el, id=mo.id, version=mo.version, must_understand=mo.must_understand, extensions=mo.extensions)
        seq = _sub(el, eb("SequenceNumber"), str(mo.sequence_number))
        if mo.status is not SequenceStatus.CONTINUE:
            seq.set(eb("status"), mo.status.value)
        _ext_elements(el, mo.extensions)
    for ar in envelope.ack_requested:
        if ar.actor not in (None, ACTOR_TO_PARTY_MSH, ACTOR_NEXT_MSH):
            # ebMS2 §6.3.1.1: AckRequested targets the To Party MSH (by default) or the Next MSH.
            raise ValueError(
                f"AckRequested.actor must be {ACTOR_TO_PARTY_MSH} or {ACTOR_NEXT_MSH} (ebMS2 §6.3.1.1), "
                f"not {ar.actor!r}"
            )
        el = _sub(header, eb("AckRequested"))
        _ext_attrs(el, id=ar.id, version=ar.version, must_understand=ar.must_understand, extensions=ar.extensions)
        if ar.actor is not None:
            el.set(ACTOR, ar.actor)
        el.set(eb("signed"), "true" if ar.signed else "false")
        _ext_elements(el, ar.extensions)
    for ack in envelope.acknowledgments:
        el = _sub(header, eb("Acknowledgment"))
        _ext_attrs(el, id=ack.id, version=ack.version, must_understand=ack.must_understand, extensions=ack.extensions)
        if ack.actor is not None:
            el.set(ACTOR, ack.actor)
        _sub(el, eb("Timestamp"), format_datetime(ack.timestamp))
        _sub(el, eb("RefToMessageId"), ack.ref_to_message_id)
        if ack.from_party is not None:
            _party(el, "From", ack.from_party)
        for ds_reference in ack.references:
            el.append(parse_xml(ds_reference.encode("utf-8"), what="ds:Reference"))
    if envelope.error_list is not None:
        elist = envelope.error_list
        el = _sub(header, eb("ErrorList"))
        _ext_attrs(
            el, id=elist.id, version=elist.version, must_understand=elist.must_understand, extensions=elist.extensions
        )
        el.set(eb("highestSeverity"), elist.highest_severity.value)
        for err in elist.errors:
            e = _sub(el, eb("Error"))
            _ext_attrs(e, id=err.id, version=None, must_understand=None, extensions=err.extensions)
            e.set(eb("codeContext"), err.code_context)
            e.set(eb("errorCode"), err.error_code)
            e.set(eb("severity"), err.severity.value)
            if err.location is not None:
                e.set(eb("location"), err.location)
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

    body = _sub(root, BODY)
    for name, value in envelope.body_extensions.attributes:
        body.set(name, value)
    if envelope.manifest is not None:
        man = envelope.manifest
        el = _sub(body, eb("Manifest"))
        _ext_attrs(el, id=man.id, version=man.version, must_understand=None, extensions=man.extensions)
        for ref in man.references:
            r = _sub(el, eb("Reference"))
            _ext_attrs(r, id=ref.id, version=None, must_understand=None, extensions=ref.extensions)
            r.set(XLINK_TYPE, "simple")
            r.set(XLINK_HREF, ref.href)
            if ref.role is not None:
                r.set(XLINK_ROLE, ref.role)
            for s in ref.schemas:
                se = _sub(r, eb("Schema"))
                se.set(eb("location"), s.location)
                if s.version is not None:
                    se.set(eb("version"), s.version)
            for d in ref.descriptions:
                _description(r, d)
            _ext_elements(r, ref.extensions)
        _ext_elements(el, man.extensions)
    if envelope.status_request is not None:
        sq = envelope.status_request
        el = _sub(body, eb("StatusRequest"))
        _ext_attrs(el, id=sq.id, version=sq.version, must_understand=None, extensions=sq.extensions)
        _sub(el, eb("RefToMessageId"), sq.ref_to_message_id)
        _ext_elements(el, sq.extensions)
    if envelope.status_response is not None:
        sp = envelope.status_response
        el = _sub(body, eb("StatusResponse"))
        _ext_attrs(el, id=sp.id, version=sp.version, must_understand=None, extensions=sp.extensions)
        el.set(eb("messageStatus"), sp.message_status.value)
        _sub(el, eb("RefToMessageId"), sp.ref_to_message_id)
        if sp.timestamp is not None:
            _sub(el, eb("Timestamp"), format_datetime(sp.timestamp))
        _ext_elements(el, sp.extensions)
    if envelope.fault is not None:
        f = envelope.fault
        el = _sub(body, FAULT)
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
    """The envelope as UTF-8 XML bytes with an XML declaration: written as text where it can be
    (:mod:`msh.ebms.envelope.writing_text`, the same bytes), else from the tree of :func:`write_envelope`."""
    text = envelope_text(envelope)
    if text is not None:
        return text
    return etree.tostring(write_envelope(envelope), xml_declaration=True, encoding="UTF-8")
