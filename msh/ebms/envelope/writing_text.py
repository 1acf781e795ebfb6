"""The SOAP envelope written straight as text: the bytes :func:`~msh.ebms.envelope.serialise_envelope` sends,
without building an lxml tree (ebMS2 §2.3).

Every message and signal the MSH composes is serialised once, and building the tree element by element is
most of that work. :func:`envelope_text` writes the same bytes lxml writes for the tree of
:func:`~msh.ebms.envelope.writing.write_envelope` (declaration, prefixes, attribute order, escaping), for
the envelopes the MSH composes itself: the ebXML header and body elements with their own attributes. It
returns None for anything else, which the tree writer then serialises: foreign elements or attributes
(extensions), signatures, Acknowledgment ``ds:Reference`` elements, Fault detail, a value the writer refuses
(an actor ebMS2 does not allow) or a character XML cannot hold. The tests compare both writers byte for
byte on generated envelopes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from msh.ebms.envelope.datetimes import format_datetime
from msh.ebms.model import (
    NO_EXTENSIONS,
    Description,
    Envelope,
    Extensions,
    Party,
    SequenceStatus,
)
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH, EB, SOAP_ACTOR_NEXT, SOAP_ENV, XLINK

__all__ = ["envelope_text"]

_HEAD: Final = (
    "<?xml version='1.0' encoding='UTF-8'?>\n"
    f'<SOAP:Envelope xmlns:SOAP="{SOAP_ENV}" xmlns:eb="{EB}" xmlns:xlink="{XLINK}">'
)
_TAIL: Final = "</SOAP:Envelope>"

# One pass finds both what must be escaped and what XML 1.0 §2.2 cannot hold (lxml refuses some of those
# characters, so the tree writer decides): every character but the plain ones, where the plain ones are the
# XML Chars less the escaped ones (& 0x26, < 0x3C, > 0x3E and CR in both; ", LF and TAB in attributes too).
_TEXT_NOT_PLAIN: Final = re.compile("[^\t\n\x20-\x25\x27-\x3b\x3d\x3f-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ATTR_NOT_PLAIN: Final = re.compile("[^\x20\x21\x23-\x25\x27-\x3b\x3d\x3f-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# libxml2's escaping of character data and of attribute values (what lxml writes).
_TEXT_ESCAPES: Final = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"}
_ATTR_ESCAPES: Final = {**_TEXT_ESCAPES, '"': "&quot;", "\n": "&#10;", "\t": "&#9;"}


class _Unwritable(Exception):
    """The envelope holds something only the tree writer writes (see the module docs)."""


def _escaper(escapes: dict[str, str]) -> Callable[[re.Match[str]], str]:
    def escape(match: re.Match[str]) -> str:
        try:
            return escapes[match.group()]
        except KeyError:
            raise _Unwritable from None  # not an XML Char

    return escape


_escape_text: Final = _escaper(_TEXT_ESCAPES)
_escape_attr: Final = _escaper(_ATTR_ESCAPES)


def _text(value: str) -> str:
    found = _TEXT_NOT_PLAIN.search(value)
    if found is None:
        return value
    start = found.start()  # the plain prefix is not scanned again
    return value[:start] + _TEXT_NOT_PLAIN.sub(_escape_text, value[start:])


def _attr(value: str) -> str:
    found = _ATTR_NOT_PLAIN.search(value)
    if found is None:
        return value
    start = found.start()
    return value[:start] + _ATTR_NOT_PLAIN.sub(_escape_attr, value[start:])


def _plain(extensions: Extensions) -> None:
    if extensions is not NO_EXTENSIONS and (extensions.elements or extensions.attributes):
        raise _Unwritable


class _Writer:
    """Appends elements as lxml serialises them: ``<a/>`` when empty, attributes in the order given."""

    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out: list[str] = [_HEAD]

    def open(self, name: str, attributes: list[tuple[str, str]] | None = None) -> None:
        out = self.out
        out.append("<" + name)
        if attributes:
            for key, value in attributes:
                out.append(f' {key}="{_attr(value)}"')
        out.append(">")

    def close(self, name: str) -> None:
        self.out.append(f"</{name}>")

    def leaf(self, name: str, text: str | None, attributes: list[tuple[str, str]] | None = None) -> None:
        out = self.out
        out.append("<" + name)
        if attributes:
            for key, value in attributes:
                out.append(f' {key}="{_attr(value)}"')
        if text is None:
            out.append("/>")
        else:
            out.append(f">{_text(text)}</{name}>")


def _common(
    attributes: list[tuple[str, str]], *, id: str | None, version: str | None, must_understand: bool | None
) -> list[tuple[str, str]]:
    """eb:id, eb:version and SOAP:mustUnderstand, in the order the tree writer sets them."""
    if id is not None:
        attributes.append(("eb:id", id))
    if version is not None:
        attributes.append(("eb:version", version))
    if must_understand is not None:
        attributes.append(("SOAP:mustUnderstand", "1" if must_understand else "0"))
    return attributes


def _party(w: _Writer, name: str, party: Party) -> None:
    w.open(name)
    for pid in party.party_ids:
        w.leaf("eb:PartyId", pid.value, [("eb:type", pid.type)] if pid.type is not None else None)
    if party.role is not None:
        w.leaf("eb:Role", party.role)
    w.close(name)


def _description(w: _Writer, d: Description) -> None:
    w.leaf("eb:Description", d.text, [("xml:lang", d.lang)])


def _header(w: _Writer, envelope: Envelope) -> None:
    mh = envelope.message_header
    if mh is not None:
        _plain(mh.extensions)
        w.open("eb:MessageHeader", _common([], id=mh.id, version=mh.version, must_understand=mh.must_understand))
        _party(w, "eb:From", mh.from_party)
        _party(w, "eb:To", mh.to_party)
        w.leaf("eb:CPAId", mh.cpa_id)
        w.leaf("eb:ConversationId", mh.conversation_id)
        w.leaf("eb:Service", mh.service.value, [("eb:type", mh.service.type)] if mh.service.type is not None else None)
        w.leaf("eb:Action", mh.action)
        md = mh.message_data
        w.open("eb:MessageData")
        w.leaf("eb:MessageId", md.message_id)
        w.leaf("eb:Timestamp", format_datetime(md.timestamp))
        if md.ref_to_message_id is not None:
            w.leaf("eb:RefToMessageId", md.ref_to_message_id)
        if md.time_to_live is not None:
            w.leaf("eb:TimeToLive", format_datetime(md.time_to_live))
        w.close("eb:MessageData")
        if mh.duplicate_elimination:
            w.leaf("eb:DuplicateElimination", None)
        for d in mh.descriptions:
            _description(w, d)
        w.close("eb:MessageHeader")
    sr = envelope.sync_reply
    if sr is not None:
        _plain(sr.extensions)
        if sr.actor != SOAP_ACTOR_NEXT:
            raise _Unwritable  # the tree writer refuses it (ebMS2 §4.3.1)
        attributes = _common([], id=sr.id, version=sr.version, must_understand=sr.must_understand)
        w.leaf("eb:SyncReply", None, [*attributes, ("SOAP:actor", sr.actor)])
    mo = envelope.message_order
    if mo is not None:
        _plain(mo.extensions)
        w.open("eb:MessageOrder", _common([], id=mo.id, version=mo.version, must_understand=mo.must_understand))
        status = [("eb:status", mo.status.value)] if mo.status is not SequenceStatus.CONTINUE else None
        w.leaf("eb:SequenceNumber", str(mo.sequence_number), status)
        w.close("eb:MessageOrder")
    for ar in envelope.ack_requested:
        _plain(ar.extensions)
        if ar.actor not in (None, ACTOR_TO_PARTY_MSH, ACTOR_NEXT_MSH):
            raise _Unwritable  # the tree writer refuses it (ebMS2 §6.3.1.1)
        attributes = _common([], id=ar.id, version=ar.version, must_understand=ar.must_understand)
        if ar.actor is not None:
            attributes.append(("SOAP:actor", ar.actor))
        attributes.append(("eb:signed", "true" if ar.signed else "false"))
        w.leaf("eb:AckRequested", None, attributes)
    for ack in envelope.acknowledgments:
        _plain(ack.extensions)
        if ack.references:
            raise _Unwritable
        attributes = _common([], id=ack.id, version=ack.version, must_understand=ack.must_understand)
        if ack.actor is not None:
            attributes.append(("SOAP:actor", ack.actor))
        w.open("eb:Acknowledgment", attributes)
        w.leaf("eb:Timestamp", format_datetime(ack.timestamp))
        w.leaf("eb:RefToMessageId", ack.ref_to_message_id)
        if ack.from_party is not None:
            _party(w, "eb:From", ack.from_party)
        w.close("eb:Acknowledgment")
    elist = envelope.error_list
    if elist is not None:
        _plain(elist.extensions)
        attributes = _common([], id=elist.id, version=elist.version, must_understand=elist.must_understand)
        attributes.append(("eb:highestSeverity", elist.highest_severity.value))
        w.open("eb:ErrorList", attributes)
        for err in elist.errors:
            _plain(err.extensions)
            attributes = _common([], id=err.id, version=None, must_understand=None)
            attributes += [
                ("eb:codeContext", err.code_context),
                ("eb:errorCode", err.error_code),
                ("eb:severity", err.severity.value),
            ]
            if err.location is not None:
                attributes.append(("eb:location", err.location))
            if err.description is None:
                w.leaf("eb:Error", None, attributes)
            else:
                w.open("eb:Error", attributes)
                _description(w, err.description)
                w.close("eb:Error")
        w.close("eb:ErrorList")


def _body(w: _Writer, envelope: Envelope) -> None:
    man = envelope.manifest
    if man is not None:
        _plain(man.extensions)
        w.open("eb:Manifest", _common([], id=man.id, version=man.version, must_understand=None))
        for ref in man.references:
            _plain(ref.extensions)
            attributes = _common([], id=ref.id, version=None, must_understand=None)
            attributes += [("xlink:type", "simple"), ("xlink:href", ref.href)]
            if ref.role is not None:
                attributes.append(("xlink:role", ref.role))
            if not ref.schemas and not ref.descriptions:
                w.leaf("eb:Reference", None, attributes)
                continue
            w.open("eb:Reference", attributes)
            for s in ref.schemas:
                schema = [("eb:location", s.location)]
                if s.version is not None:
                    schema.append(("eb:version", s.version))
                w.leaf("eb:Schema", None, schema)
            for d in ref.descriptions:
                _description(w, d)
            w.close("eb:Reference")
        w.close("eb:Manifest")
    sq = envelope.status_request
    if sq is not None:
        _plain(sq.extensions)
        w.open("eb:StatusRequest", _common([], id=sq.id, version=sq.version, must_understand=None))
        w.leaf("eb:RefToMessageId", sq.ref_to_message_id)
        w.close("eb:StatusRequest")
    sp = envelope.status_response
    if sp is not None:
        _plain(sp.extensions)
        attributes = _common([], id=sp.id, version=sp.version, must_understand=None)
        attributes.append(("eb:messageStatus", sp.message_status.value))
        w.open("eb:StatusResponse", attributes)
        w.leaf("eb:RefToMessageId", sp.ref_to_message_id)
        if sp.timestamp is not None:
            w.leaf("eb:Timestamp", format_datetime(sp.timestamp))
        w.close("eb:StatusResponse")
    fault = envelope.fault
    if fault is not None:
        if fault.detail:
            raise _Unwritable
        w.open("SOAP:Fault")
        w.leaf("faultcode", fault.faultcode)
        w.leaf("faultstring", fault.faultstring)
        if fault.faultactor is not None:
            w.leaf("faultactor", fault.faultactor)
        w.close("SOAP:Fault")


def envelope_text(envelope: Envelope) -> bytes | None:
    """The bytes of ``envelope`` as :func:`~msh.ebms.envelope.serialise_envelope` writes them, or None when
    only the tree writer can write it (see the module docs)."""
    for extensions in (envelope.envelope_extensions, envelope.header_extensions, envelope.body_extensions):
        if extensions.elements or extensions.attributes:
            return None
    if envelope.signatures:
        return None
    w = _Writer()
    out = w.out
    try:
        start = len(out)
        out.append("<SOAP:Header>")
        _header(w, envelope)
        if len(out) == start + 1:  # no header entry: the tree writer leaves the Header out
            out.pop()
        else:
            out.append("</SOAP:Header>")
        out.append("<SOAP:Body>")
        start = len(out)
        _body(w, envelope)
        if len(out) == start:
            out[-1] = "<SOAP:Body/>"
        else:
            out.append("</SOAP:Body>")
    except _Unwritable:
        return None
    out.append(_TAIL)
    return "".join(out).encode("utf-8")
