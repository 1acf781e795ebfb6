"""Typed, immutable model of the ebMS 2.0 SOAP header and body extensions (ebMS2 chapters 3, 4, 6, 7, 8, 9).

Every class is a frozen dataclass validated at construction, with a message naming the field. Elements
and attributes the model does not know (the schema's ``##other`` wildcards) are kept verbatim in an
:class:`Extensions` value so that a parse → serialise round trip loses nothing. ``ds:Signature`` and
``ds:Reference`` are kept as opaque XML text: they are produced and checked by the signing adapter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from lxml import etree

from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH, EBMS_VERSION, SOAP_ACTOR_NEXT
from msh.errors import ERROR_CODE_CONTEXT, ErrorCode, Severity
from msh.safexml import parse_xml

__all__ = [
    "AckRequested",
    "Acknowledgment",
    "Actor",
    "Description",
    "Envelope",
    "Error",
    "ErrorList",
    "Extensions",
    "Fault",
    "Manifest",
    "MessageData",
    "MessageHeader",
    "MessageOrder",
    "MessageStatus",
    "Party",
    "PartyId",
    "Reference",
    "ReplyAddress",
    "Schema",
    "SequenceStatus",
    "Service",
    "Signature",
    "StatusRequest",
    "StatusResponse",
    "SyncReply",
]


class Actor(StrEnum):
    """ebMS2 §6.3.1.1, §10.1: who an AckRequested / Acknowledgment is aimed at."""

    TO_PARTY_MSH = ACTOR_TO_PARTY_MSH
    NEXT_MSH = ACTOR_NEXT_MSH


class MessageStatus(StrEnum):
    """ebMS2 §7.3.3: values of StatusResponse@messageStatus."""

    UN_AUTHORIZED = "UnAuthorized"
    NOT_RECOGNIZED = "NotRecognized"
    RECEIVED = "Received"
    PROCESSED = "Processed"
    FORWARDED = "Forwarded"


class SequenceStatus(StrEnum):
    """ebMS2 §9.1.1: SequenceNumber@status."""

    RESET = "Reset"
    CONTINUE = "Continue"


# XML 1.0 §2.2: the characters an XML document can carry.
_NOT_XML_CHAR = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# The ASCII ones, as bytes: what is left of an ASCII value once they are deleted is what XML cannot carry.
_XML_ASCII = b"\t\n\r" + bytes(range(0x20, 0x80))


def _require(value: str | None, what: str) -> None:
    # ebMS2 Appendix A: non-empty-string is the type of nearly every text element.
    if value is None or not value.strip():
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    if value.isascii() and (value.isprintable() or not value.encode("ascii").translate(None, _XML_ASCII)):
        return  # ASCII XML characters only: no need for the regex's search, one character at a time
    bad = _NOT_XML_CHAR.search(value)
    if bad:
        raise ValueError(f"{what} contains {bad.group()!r}, which XML cannot carry (XML 1.0 §2.2)")


def _xml_key(xml: str) -> object:
    """A prefix-independent form of an XML element: equal for the same names, attributes and text."""

    def walk(el: etree._Element) -> object:
        tag = el.tag if isinstance(el.tag, str) else "#" + str(type(el).__name__)
        return (tag, tuple(sorted(el.attrib.items())), el.text or "", tuple(walk(c) for c in el), el.tail or "")

    return walk(parse_xml(xml.encode("utf-8"), what="extension element"))


@dataclass(frozen=True, slots=True, eq=False)
class Extensions:
    """Foreign (``##other``) content kept verbatim: child elements as serialised XML text (with their
    namespace declarations), attributes as (Clark name ``{ns}local``, value) pairs, in document order.

    Two values are equal when their XML is the same up to namespace prefixes (XML Namespaces 1.0: a
    prefix is only a name for its URI), so a re-serialised element that got another prefix still compares
    equal.
    """

    elements: tuple[str, ...] = ()
    attributes: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.elements or self.attributes)

    def _key(self) -> object:
        return (tuple(_xml_key(e) for e in self.elements), self.attributes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Extensions):
            return NotImplemented
        if self.elements == other.elements:
            return self.attributes == other.attributes
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


NO_EXTENSIONS = Extensions()


@dataclass(frozen=True, slots=True)
class PartyId:
    """ebMS2 §3.1.1.1: a PartyId; ``type`` is required unless the value is a URI.

    The value is empty only in a message read leniently from a partner that sent it so (seen in real
    PHIN-MS responses); such a message is never valid in strict mode.
    """

    value: str
    type: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.value, str):
            raise ValueError(f"PartyId must be a string, got {self.value!r}")
        if self.type is not None:
            _require(self.type, "PartyId@type")

    def __str__(self) -> str:
        return f"{self.type}:{self.value}" if self.type else self.value


@dataclass(frozen=True, slots=True)
class Party:
    """ebMS2 §3.1.1: the From or To element: one or more PartyId and an optional Role."""

    party_ids: tuple[PartyId, ...]
    role: str | None = None

    def __post_init__(self) -> None:
        if not self.party_ids:
            raise ValueError("From/To needs at least one PartyId (ebMS2 §3.1.1)")
        if self.role is not None:
            _require(self.role, "Role")


@dataclass(frozen=True, slots=True)
class Service:
    """ebMS2 §3.1.4: Service, with an optional type."""

    value: str
    type: str | None = None

    def __post_init__(self) -> None:
        _require(self.value, "Service")
        if self.type is not None:
            _require(self.type, "Service@type")


@dataclass(frozen=True, slots=True)
class Description:
    """ebMS2 §3.1.8: a human-readable description with its language (xml:lang is required)."""

    text: str
    lang: str = "en"

    def __post_init__(self) -> None:
        _require(self.text, "Description")
        _require(self.lang, "Description@xml:lang")


@dataclass(frozen=True, slots=True)
class MessageData:
    """ebMS2 §3.1.6: MessageId, Timestamp, RefToMessageId, TimeToLive."""

    message_id: str
    timestamp: datetime
    ref_to_message_id: str | None = None
    time_to_live: datetime | None = None

    def __post_init__(self) -> None:
        _require(self.message_id, "MessageId")
        if self.ref_to_message_id is not None:
            _require(self.ref_to_message_id, "RefToMessageId")


@dataclass(frozen=True, slots=True)
class MessageHeader:
    """ebMS2 §3.1: the MessageHeader element, required in every ebXML message."""

    from_party: Party
    to_party: Party
    cpa_id: str
    conversation_id: str
    service: Service
    action: str
    message_data: MessageData
    duplicate_elimination: bool = False
    descriptions: tuple[Description, ...] = ()
    id: str | None = None
    version: str = EBMS_VERSION
    must_understand: bool = True
    extensions: Extensions = NO_EXTENSIONS

    def __post_init__(self) -> None:
        _require(self.cpa_id, "CPAId")
        _require(self.conversation_id, "ConversationId")
        _require(self.action, "Action")
        _require(self.version, "MessageHeader@version")

    @property
    def message_id(self) -> str:
        return self.message_data.message_id


@dataclass(frozen=True, slots=True)
class ReplyAddress:
    """What an answer to a message needs from its MessageHeader (ebMS2 §4.2.4.2, §6.5.3): the parties
    (reversed in the answer), CPAId, ConversationId and the MessageId it refers to."""

    from_party: Party
    to_party: Party
    cpa_id: str
    conversation_id: str
    message_id: str

    def __post_init__(self) -> None:
        _require(self.cpa_id, "CPAId")
        _require(self.conversation_id, "ConversationId")
        _require(self.message_id, "MessageId")

    @classmethod
    def of(cls, header: MessageHeader) -> ReplyAddress:
        return cls(header.from_party, header.to_party, header.cpa_id, header.conversation_id, header.message_id)


@dataclass(frozen=True, slots=True)
class AckRequested:
    """ebMS2 §6.3.1: asks the actor (To Party MSH by default, or the next MSH) for an Acknowledgment."""

    signed: bool = False
    actor: str | None = ACTOR_TO_PARTY_MSH
    id: str | None = None
    version: str = EBMS_VERSION
    must_understand: bool = True
    extensions: Extensions = NO_EXTENSIONS

    @property
    def is_next_msh(self) -> bool:
        return self.actor == ACTOR_NEXT_MSH

    @property
    def is_to_party_msh(self) -> bool:
        # ebMS2 §6.3.1.1: an absent actor means the To Party MSH.
        return self.actor in (None, ACTOR_TO_PARTY_MSH)


@dataclass(frozen=True, slots=True)
class Acknowledgment:
    """ebMS2 §6.3.2: acknowledges receipt of the message named by RefToMessageId.

    ``references`` are the ``ds:Reference`` elements copied from the acknowledged message's signature
    (ebMS2 §6.3.2.5), kept as XML text.
    """

    timestamp: datetime
    ref_to_message_id: str
    from_party: Party | None = None
    references: tuple[str, ...] = ()
    actor: str | None = ACTOR_TO_PARTY_MSH
    id: str | None = None
    version: str = EBMS_VERSION
    must_understand: bool = True
    extensions: Extensions = NO_EXTENSIONS

    def __post_init__(self) -> None:
        _require(self.ref_to_message_id, "Acknowledgment/RefToMessageId")


@dataclass(frozen=True, slots=True)
class Error:
    """ebMS2 §4.2.3.2: one Error of an ErrorList. ``error_code`` is kept as text because a non-default
    ``code_context`` may define its own codes; :attr:`code` gives the standard enum where it applies."""

    error_code: str
    severity: Severity
    location: str | None = None
    description: Description | None = None
    code_context: str = ERROR_CODE_CONTEXT
    id: str | None = None
    extensions: Extensions = NO_EXTENSIONS

    def __post_init__(self) -> None:
        _require(self.error_code, "Error@errorCode")
        if self.location is not None:
            _require(self.location, "Error@location")

    @property
    def code(self) -> ErrorCode | None:
        if self.code_context != ERROR_CODE_CONTEXT:
            return None
        try:
            return ErrorCode(self.error_code)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class ErrorList:
    """ebMS2 §4.2.3: the errors found in the message named by MessageData/RefToMessageId."""

    errors: tuple[Error, ...]
    highest_severity: Severity
    id: str | None = None
    version: str = EBMS_VERSION
    must_understand: bool = True
    extensions: Extensions = NO_EXTENSIONS

    def __post_init__(self) -> None:
        if not self.errors:
            raise ValueError("ErrorList needs at least one Error (ebMS2 §4.2.3)")


@dataclass(frozen=True, slots=True)
class SyncReply:
    """ebMS2 §4.3: asks for the response on the same connection; actor is SOAP's ``next``."""

    actor: str = SOAP_ACTOR_NEXT
    id: str | None = None
    version: str = EBMS_VERSION
    must_understand: bool = True
    extensions: Extensions = NO_EXTENSIONS


@dataclass(frozen=True, slots=True)
class MessageOrder:
    """ebMS2 §9.1: the SequenceNumber of a message in its conversation."""

    sequence_number: int
    status: SequenceStatus = SequenceStatus.CONTINUE
    id: str | None = None
    version: str = EBMS_VERSION
    must_understand: bool = True
    extensions: Extensions = NO_EXTENSIONS

    def __post_init__(self) -> None:
        # ebMS2 §9.1.1: SequenceNumber is a nonNegativeInteger below 99999999, wrapping to 0.
        if not 0 <= self.sequence_number <= 99999999:
            raise ValueError(f"SequenceNumber must be 0..99999999, got {self.sequence_number}")


@dataclass(frozen=True, slots=True)
class StatusRequest:
    """ebMS2 §7.2: asks for the status of the message named by RefToMessageId."""

    ref_to_message_id: str
    id: str | None = None
    version: str = EBMS_VERSION
    extensions: Extensions = NO_EXTENSIONS

    def __post_init__(self) -> None:
        _require(self.ref_to_message_id, "StatusRequest/RefToMessageId")


@dataclass(frozen=True, slots=True)
class StatusResponse:
    """ebMS2 §7.3: the status of the message named by RefToMessageId."""

    ref_to_message_id: str
    message_status: MessageStatus
    timestamp: datetime | None = None
    id: str | None = None
    version: str = EBMS_VERSION
    extensions: Extensions = NO_EXTENSIONS

    def __post_init__(self) -> None:
        _require(self.ref_to_message_id, "StatusResponse/RefToMessageId")


@dataclass(frozen=True, slots=True)
class Schema:
    """ebMS2 §3.2.1.1: the schema a payload conforms to."""

    location: str
    version: str | None = None

    def __post_init__(self) -> None:
        _require(self.location, "Schema@location")


@dataclass(frozen=True, slots=True)
class Reference:
    """ebMS2 §3.2.1: one payload, named by xlink:href (``cid:...`` for a MIME part)."""

    href: str
    id: str | None = None
    role: str | None = None
    schemas: tuple[Schema, ...] = ()
    descriptions: tuple[Description, ...] = ()
    extensions: Extensions = NO_EXTENSIONS

    def __post_init__(self) -> None:
        _require(self.href, "Reference@xlink:href")

    @property
    def content_id(self) -> str | None:
        """The Content-ID this reference names, or None for a non-``cid:`` URI (ebMS2 §3.2.2)."""
        if self.href[:4].lower() == "cid:":
            return self.href[4:]
        return None


@dataclass(frozen=True, slots=True)
class Manifest:
    """ebMS2 §3.2: the list of payloads of the message."""

    references: tuple[Reference, ...]
    id: str | None = None
    version: str = EBMS_VERSION
    extensions: Extensions = NO_EXTENSIONS

    def __post_init__(self) -> None:
        if not self.references:
            raise ValueError("Manifest needs at least one Reference (ebMS2 §3.2)")


@dataclass(frozen=True, slots=True)
class Signature:
    """ebMS2 §4.1: an XML-DSig ``ds:Signature``, kept as its serialised XML text."""

    xml: str

    def __post_init__(self) -> None:
        _require(self.xml, "ds:Signature")


@dataclass(frozen=True, slots=True)
class Fault:
    """SOAP 1.1 §4.4: a SOAP Fault in the Body (used where no ebXML error message can be built)."""

    faultcode: str
    faultstring: str
    faultactor: str | None = None
    detail: tuple[str, ...] = ()  # child elements of <detail>, as XML text


@dataclass(frozen=True, slots=True)
class Envelope:
    """A SOAP envelope with its ebXML extensions (ebMS2 §2.3).

    ``header_extensions`` / ``body_extensions`` hold the foreign children of SOAP Header and Body in
    document order; ``envelope_extensions`` foreign attributes and trailing elements of the Envelope.
    """

    message_header: MessageHeader | None = None
    sync_reply: SyncReply | None = None
    message_order: MessageOrder | None = None
    ack_requested: tuple[AckRequested, ...] = ()
    acknowledgments: tuple[Acknowledgment, ...] = ()
    error_list: ErrorList | None = None
    signatures: tuple[Signature, ...] = ()
    manifest: Manifest | None = None
    status_request: StatusRequest | None = None
    status_response: StatusResponse | None = None
    fault: Fault | None = None
    header_extensions: Extensions = NO_EXTENSIONS
    body_extensions: Extensions = NO_EXTENSIONS
    envelope_extensions: Extensions = field(default=NO_EXTENSIONS)

    def __post_init__(self) -> None:
        # ebMS2 §6.3.1: at most one AckRequested per actor.
        if len(self.ack_requested) > 1 and len({a.actor for a in self.ack_requested}) != len(self.ack_requested):
            raise ValueError("at most one AckRequested per SOAP actor is allowed (ebMS2 §6.3.1)")

    @property
    def message_id(self) -> str | None:
        return self.message_header.message_data.message_id if self.message_header else None

    def ack_requested_for(self, actor: Actor) -> AckRequested | None:
        """The AckRequested aimed at ``actor``, if any."""
        for ack in self.ack_requested:
            if (actor is Actor.TO_PARTY_MSH and ack.is_to_party_msh) or (actor is Actor.NEXT_MSH and ack.is_next_msh):
                return ack
        return None
