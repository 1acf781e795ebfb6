"""Quick readers of the ebXML elements every message carries, for when nothing in them needs judging.

A quick reader builds the same model element as its detailed reader in
:mod:`~msh.ebms.envelope.header_reader` or :mod:`~msh.ebms.envelope.body_reader`, in one pass over the
element's attributes and one over its children, dispatching on the Clark name: no location strings, no
Warnings, no second pass for extensions. It takes only what the detailed reader takes in strict mode; on
anything else (a missing, repeated, misplaced or unexpected element, an unqualified or unknown eb:
attribute, an empty value, a comment or processing instruction, an xsd:dateTime or eb:version it does not
read) it raises :class:`Unusual` (or the model a ValueError), and
:func:`~msh.ebms.envelope.read_envelope` reads the element again with its detailed reader, which raises or
warns as it always does. Foreign elements and attributes are kept the way
:meth:`~msh.ebms.envelope.element_reader.ElementReader.extensions` keeps them; of the
:class:`~msh.ebms.envelope.element_reader.ElementReader` handed in, a quick reader only uses
:meth:`~msh.ebms.envelope.element_reader.ElementReader.keep` (counted against
:data:`~msh.ebms.envelope.element_reader.MAX_FOREIGN_ELEMENTS`).
"""

from __future__ import annotations

from datetime import datetime

from lxml import etree

from msh.ebms.envelope.element_reader import KNOWN_ATTRIBUTES, ElementReader, must_understand_of
from msh.ebms.envelope.names import (
    ACTOR,
    DS_REFERENCE,
    EB_ID,
    EB_VERSION,
    MUST_UNDERSTAND,
    XLINK_HREF,
    XLINK_ROLE,
    XLINK_TYPE,
    XML_LANG,
    eb,
)
from msh.ebms.model import (
    NO_EXTENSIONS,
    Acknowledgment,
    AckRequested,
    Description,
    Extensions,
    Manifest,
    MessageData,
    MessageHeader,
    Party,
    PartyId,
    Reference,
    Schema,
    Service,
    SyncReply,
)
from msh.ebms.namespaces import EB

__all__ = [
    "Unusual",
    "extensions_of",
    "quick_ack_requested",
    "quick_acknowledgment",
    "quick_manifest",
    "quick_message_header",
    "quick_sync_reply",
]

_E = etree._Element
_Attributes = tuple[dict[str, str], tuple[tuple[str, str], ...]]


class Unusual(Exception):
    """Something a quick reader does not take: the detailed reader must read the envelope."""


_EB = f"{{{EB}}}"
_PARTY_ID = eb("PartyId")
_ROLE = eb("Role")
_DESCRIPTION = eb("Description")
_MESSAGE_DATA = (eb("MessageId"), eb("Timestamp"), eb("RefToMessageId"), eb("TimeToLive"))
_TIMESTAMP = eb("Timestamp")
_REF_TO_MESSAGE_ID = eb("RefToMessageId")
_FROM = eb("From")
_REFERENCE = eb("Reference")
_SCHEMA = eb("Schema")
_EB_TYPE = eb("type")
_EB_SIGNED = eb("signed")
_EB_LOCATION = eb("location")

# ebMS2 §3.1: the children of MessageHeader in the schema's order, by position; the first seven are required.
_HEADER_POSITIONS = {
    eb(name): position
    for position, name in enumerate(
        ("From", "To", "CPAId", "ConversationId", "Service", "Action", "MessageData", "DuplicateElimination")
    )
}

# The attributes each element reads; those in the second set are neither read nor kept (as extensions()
# leaves them out); any other attribute in a namespace is kept as an extension.
_HEADER_ATTRS = frozenset({EB_ID, EB_VERSION, MUST_UNDERSTAND})
_HEADER_IGNORED = KNOWN_ATTRIBUTES - _HEADER_ATTRS
_ACTOR_ATTRS = _HEADER_ATTRS | {ACTOR}
_ACTOR_IGNORED = KNOWN_ATTRIBUTES - _ACTOR_ATTRS
_ACK_REQUESTED_ATTRS = _ACTOR_ATTRS | {_EB_SIGNED}
_BODY_ATTRS = frozenset({EB_ID, EB_VERSION})
_BODY_IGNORED = KNOWN_ATTRIBUTES - _BODY_ATTRS
_REFERENCE_ATTRS = frozenset({EB_ID, XLINK_HREF, XLINK_ROLE})
_REFERENCE_IGNORED = (KNOWN_ATTRIBUTES | {XLINK_TYPE}) - _REFERENCE_ATTRS


def quick_message_header(reader: ElementReader, el: _E) -> MessageHeader:
    """The MessageHeader element (ebMS2 §3.1), its children in the schema's order."""
    values, attributes = _attributes(el, _HEADER_ATTRS, _HEADER_IGNORED)
    found: list[_E | None] = [None] * 8
    descriptions: list[Description] = []
    elements: list[str] = []
    previous = -1
    for child in el:
        tag = child.tag
        position = _HEADER_POSITIONS.get(tag)
        if position is None:
            if tag == _DESCRIPTION:
                descriptions.append(_description(child))
            else:
                elements.append(_foreign(reader, child))
            continue
        # ebMS2 §3.1: each child of MessageHeader comes once, in the schema's order.
        if position <= previous:
            raise Unusual
        previous = position
        found[position] = child
    from_el, to_el, cpa_id, conversation_id, service, action, message_data, duplicate = found
    if (
        from_el is None
        or to_el is None
        or cpa_id is None
        or conversation_id is None
        or service is None
        or action is None
        or message_data is None
    ):
        raise Unusual
    service_type = service.get(_EB_TYPE)
    if service_type is None and service.get("type") is not None:
        raise Unusual  # an unqualified type: the detailed reader takes it or not, by mode
    return MessageHeader(
        from_party=_party(from_el),
        to_party=_party(to_el),
        cpa_id=_text(cpa_id),
        conversation_id=_text(conversation_id),
        service=Service(_text(service), service_type),
        action=_text(action),
        message_data=_message_data(message_data),
        duplicate_elimination=duplicate is not None,
        descriptions=tuple(descriptions),
        id=values.get(EB_ID),
        version=_version(values),
        must_understand=_must_understand(values),
        extensions=extensions_of(elements, attributes),
    )


def quick_ack_requested(reader: ElementReader, el: _E) -> AckRequested:
    """An AckRequested element (ebMS2 §6.3.1)."""
    values, attributes = _attributes(el, _ACK_REQUESTED_ATTRS, _ACTOR_IGNORED)
    signed = values.get(_EB_SIGNED)
    if signed is None:
        raise Unusual
    return AckRequested(
        signed=_boolean(signed),
        actor=values.get(ACTOR),
        id=values.get(EB_ID),
        version=_version(values),
        must_understand=_must_understand(values),
        extensions=extensions_of(_foreign_children(reader, el), attributes),
    )


def quick_sync_reply(reader: ElementReader, el: _E) -> SyncReply:
    """The SyncReply element (ebMS2 §4.3)."""
    values, attributes = _attributes(el, _ACTOR_ATTRS, _ACTOR_IGNORED)
    actor = values.get(ACTOR)
    if actor is None:
        raise Unusual
    return SyncReply(
        actor=actor,
        id=values.get(EB_ID),
        version=_version(values),
        must_understand=_must_understand(values),
        extensions=extensions_of(_foreign_children(reader, el), attributes),
    )


def quick_acknowledgment(reader: ElementReader, el: _E) -> Acknowledgment:
    """An Acknowledgment element (ebMS2 §6.3.2)."""
    values, attributes = _attributes(el, _ACTOR_ATTRS, _ACTOR_IGNORED)
    timestamp: datetime | None = None
    ref: str | None = None
    from_party: Party | None = None
    references: list[str] = []
    for child in el:
        tag = child.tag
        if tag == _TIMESTAMP and timestamp is None:
            timestamp = _datetime(child)
        elif tag == _REF_TO_MESSAGE_ID and ref is None:
            ref = _text(child)
        elif tag == _FROM and from_party is None:
            from_party = _party(child)
        elif tag == DS_REFERENCE:
            references.append(reader.keep(child))
        else:
            raise Unusual
    if timestamp is None or ref is None:
        raise Unusual
    return Acknowledgment(
        timestamp=timestamp,
        ref_to_message_id=ref,
        from_party=from_party,
        references=tuple(references),
        actor=values.get(ACTOR),
        id=values.get(EB_ID),
        version=_version(values),
        must_understand=_must_understand(values),
        # ebMS2 Appendix A: Acknowledgment allows foreign attributes but no foreign children.
        extensions=extensions_of((), attributes),
    )


def quick_manifest(reader: ElementReader, el: _E) -> Manifest:
    """The Manifest element (ebMS2 §3.2)."""
    values, attributes = _attributes(el, _BODY_ATTRS, _BODY_IGNORED)
    references: list[Reference] = []
    elements: list[str] = []
    for child in el:
        if child.tag == _REFERENCE:
            references.append(_reference(reader, child))
        else:
            elements.append(_foreign(reader, child))
    if not references:
        raise Unusual
    return Manifest(
        references=tuple(references),
        id=values.get(EB_ID),
        version=_version(values),
        extensions=extensions_of(elements, attributes),
    )


def _reference(reader: ElementReader, el: _E) -> Reference:
    """A Reference of the Manifest (ebMS2 §3.2.1)."""
    values, attributes = _attributes(el, _REFERENCE_ATTRS, _REFERENCE_IGNORED)
    href = values.get(XLINK_HREF)
    if href is None or not href.strip():
        raise Unusual
    schemas: list[Schema] = []
    descriptions: list[Description] = []
    elements: list[str] = []
    for child in el:
        tag = child.tag
        if tag == _SCHEMA:
            location = child.get(_EB_LOCATION)
            version = child.get(EB_VERSION)
            if location is None or (version is None and child.get("version") is not None):
                raise Unusual
            schemas.append(Schema(location, version))
        elif tag == _DESCRIPTION:
            descriptions.append(_description(child))
        else:
            elements.append(_foreign(reader, child))
    return Reference(
        href=href.strip(),
        id=values.get(EB_ID),
        role=values.get(XLINK_ROLE),
        schemas=tuple(schemas),
        descriptions=tuple(descriptions),
        extensions=extensions_of(elements, attributes),
    )


def _message_data(el: _E) -> MessageData:
    """The MessageData element (ebMS2 §3.1.6): each child once."""
    read: list[_E | None] = [None, None, None, None]
    for child in el:
        try:
            position = _MESSAGE_DATA.index(child.tag)
        except ValueError:
            raise Unusual from None
        if read[position] is not None:
            raise Unusual
        read[position] = child
    message_id, timestamp, ref, ttl = read
    if message_id is None or timestamp is None:
        raise Unusual
    return MessageData(
        message_id=_text(message_id),
        timestamp=_datetime(timestamp),
        ref_to_message_id=_text(ref) if ref is not None else None,
        time_to_live=_datetime(ttl) if ttl is not None else None,
    )


def _party(el: _E) -> Party:
    """A From or To element (ebMS2 §3.1.1)."""
    ids: list[PartyId] = []
    role: str | None = None
    for child in el:
        tag = child.tag
        if tag == _PARTY_ID:
            party_type = child.get(_EB_TYPE)
            if party_type is None:
                if child.get("type") is not None:
                    raise Unusual
            elif not party_type.strip():
                raise Unusual
            ids.append(PartyId(_text(child), party_type))
        elif tag == _ROLE:
            role = _text(child)
        else:
            raise Unusual
    if not ids:
        raise Unusual
    return Party(tuple(ids), role)


def _description(el: _E) -> Description:
    """A Description with its xml:lang (ebMS2 §3.1.8)."""
    lang = (el.get(XML_LANG) or "").strip()
    if not lang:
        raise Unusual
    return Description(_text(el), lang)


def _text(el: _E) -> str:
    """The text of ``el``, stripped; an empty one is Unusual."""
    value = (el.text or "").strip()
    if not value:
        raise Unusual
    return value


def _datetime(el: _E) -> datetime:
    """An xsd:dateTime as :func:`~msh.ebms.envelope.datetimes.parse_datetime` reads it; one it does not
    read is Unusual (the ValueError is caught by the caller of the quick readers)."""
    return datetime.fromisoformat(_text(el))


def _attributes(el: _E, read: frozenset[str], ignored: frozenset[str]) -> _Attributes:
    """The attributes of ``el`` that its reader reads, by Clark name, and the foreign ones it keeps. An
    unqualified attribute, or an eb: one it does not read, is Unusual: the detailed reader may take the
    first for an eb: one (ebMS2 §2.3.8 quirks), and reports neither the same way in both modes."""
    values: dict[str, str] = {}
    foreign: list[tuple[str, str]] = []
    items: list[tuple[str, str]] = el.items()  # type: ignore[assignment]  # lxml gives str in Python 3
    for name, value in items:
        if name in read:
            values[name] = value
        elif name in ignored:
            continue
        elif name[0] != "{" or name.startswith(_EB):
            raise Unusual
        else:
            foreign.append((name, value))
    return values, tuple(foreign)


def _version(values: dict[str, str]) -> str:
    # ebMS2 §2.3.8: eb:version is required, and the version of this specification is 2.0.
    version = values.get(EB_VERSION)
    if version is None or version.strip() != "2.0":
        raise Unusual
    return "2.0"


def _must_understand(values: dict[str, str]) -> bool:
    meant = must_understand_of(values.get(MUST_UNDERSTAND))
    if meant is None:
        raise Unusual
    return meant


def _boolean(value: str) -> bool:
    value = value.strip()
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise Unusual


def _foreign(reader: ElementReader, el: _E) -> str:
    """A child kept as an extension: one in another namespace than eb:, or in none. An eb: one, a comment
    or a processing instruction is Unusual."""
    tag = el.tag
    if type(tag) is not str or tag.startswith(_EB):
        raise Unusual
    return reader.keep(el)


def _foreign_children(reader: ElementReader, el: _E) -> list[str]:
    """The children of an element that has no ebXML ones (AckRequested, SyncReply), kept as extensions;
    most have no child at all, and need no iterator."""
    if not len(el):
        return []
    return [_foreign(reader, child) for child in el]


def extensions_of(elements: list[str] | tuple[()], attributes: tuple[tuple[str, str], ...]) -> Extensions:
    """The Extensions of these elements and attributes; the shared empty one when there are none."""
    if not elements and not attributes:
        return NO_EXTENSIONS
    return Extensions(tuple(elements), attributes)
