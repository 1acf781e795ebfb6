"""What can still be read of an envelope the reader refused, for a person diagnosing it (``msh message
inspect``): :class:`SalvagedEnvelope`, filled by :func:`~msh.ebms.envelope.salvage_envelope`.

The MessageHeader (ebMS2 §3.1) is read field by field as the message writes it (:func:`salvage_header`):
a field that is absent is None, a value the reader refuses (an empty CPAId, a Timestamp that is not an
xsd:dateTime, a PartyId with an empty type) is kept as written, so the person sees what the partner sent.
The other ebXML elements are read each on its own by their readers; one that cannot be read is left out and
its problem listed. Addressing an ErrorList takes valid values only: that is
:func:`~msh.ebms.envelope.read_reply_address`'s job, not this module's.
"""

from __future__ import annotations

from dataclasses import dataclass

from lxml import etree

from msh.ebms.envelope.datetimes import format_datetime, parse_datetime
from msh.ebms.envelope.names import eb
from msh.ebms.model import (
    Acknowledgment,
    AckRequested,
    ErrorList,
    Fault,
    Manifest,
    MessageOrder,
    Signature,
    StatusRequest,
    StatusResponse,
    SyncReply,
)
from msh.errors import EbmsError, Issue

__all__ = ["SalvagedEnvelope", "SalvagedHeader", "SalvagedParty", "salvage_header"]

_E = etree._Element


@dataclass(frozen=True, slots=True)
class SalvagedParty:
    """A From or To as written (ebMS2 §3.1.1): each PartyId's value and type, and the Role."""

    party_ids: tuple[tuple[str, str | None], ...]
    role: str | None = None


@dataclass(frozen=True, slots=True)
class SalvagedHeader:
    """The fields of a MessageHeader (ebMS2 §3.1) as written; None where the element is absent.

    Timestamp and TimeToLive are shown as :func:`~msh.ebms.envelope.format_datetime` writes them when they
    are xsd:dateTime values, else as written.
    """

    from_party: SalvagedParty | None = None
    to_party: SalvagedParty | None = None
    cpa_id: str | None = None
    conversation_id: str | None = None
    service: str | None = None
    service_type: str | None = None
    action: str | None = None
    message_id: str | None = None
    timestamp: str | None = None
    ref_to_message_id: str | None = None
    time_to_live: str | None = None
    duplicate_elimination: bool = False


@dataclass(frozen=True, slots=True)
class SalvagedEnvelope:
    """What could be read of a refused envelope: its MessageHeader field by field, each other ebXML element
    that its own reader takes (the fields as in :class:`~msh.ebms.model.Envelope`), ``present`` the local
    names of the ebXML elements found in the SOAP Header and Body (read or not), and ``problems`` why
    the elements left out could not be read."""

    message_header: SalvagedHeader | None = None
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
    present: frozenset[str] = frozenset()
    problems: tuple[Issue, ...] = ()


def salvage_header(el: _E) -> SalvagedHeader:
    """The fields of the MessageHeader element ``el`` as written (see the module docs); never raises."""
    data = _child(el, "MessageData")
    service = _child(el, "Service")
    return SalvagedHeader(
        from_party=_party(_child(el, "From")),
        to_party=_party(_child(el, "To")),
        cpa_id=_text(_child(el, "CPAId")),
        conversation_id=_text(_child(el, "ConversationId")),
        service=_text(service),
        service_type=_attr(service, "type"),
        action=_text(_child(el, "Action")),
        message_id=_text(_last(data, "MessageId")),
        timestamp=_datetime(_text(_last(data, "Timestamp"))),
        ref_to_message_id=_text(_last(data, "RefToMessageId")),
        time_to_live=_datetime(_text(_last(data, "TimeToLive"))),
        duplicate_elimination=_child(el, "DuplicateElimination") is not None,
    )


def _child(el: _E | None, local: str) -> _E | None:
    return el.find(eb(local)) if el is not None else None


def _last(el: _E | None, local: str) -> _E | None:
    # Seen in real PHIN-MS responses: two RefToMessageId; the lenient reader uses the last of a repeated
    # MessageData child, and so does this.
    found = el.findall(eb(local)) if el is not None else []
    return found[-1] if found else None


def _text(el: _E | None) -> str | None:
    return (el.text or "").strip() if el is not None else None


def _attr(el: _E | None, local: str) -> str | None:
    # ebMS2 §2.3: eb: attributes; the unqualified spelling is a common quirk the lenient reader takes too.
    if el is None:
        return None
    return el.get(eb(local), el.get(local))


def _party(el: _E | None) -> SalvagedParty | None:
    if el is None:
        return None
    ids = tuple(((p.text or "").strip(), _attr(p, "type")) for p in el.iterfind(eb("PartyId")))
    return SalvagedParty(ids, _text(_child(el, "Role")))


def _datetime(text: str | None) -> str | None:
    if not text:
        return text
    try:
        return format_datetime(parse_datetime(text, ""))
    except EbmsError:
        return text
