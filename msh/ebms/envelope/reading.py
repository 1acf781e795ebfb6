"""Reading a SOAP envelope into the :class:`~msh.ebms.model.Envelope` model (SOAP 1.1 §4, ebMS2 §2.3).

:func:`read_envelope` walks the Envelope, its Header and its Body once and hands each ebXML element to its
reader (:mod:`~msh.ebms.envelope.header_reader`, :mod:`~msh.ebms.envelope.body_reader`), keeping
everything else as extensions. The elements every message carries (MessageHeader, SyncReply, AckRequested,
Acknowledgment, Manifest) are first offered to their quick reader (:mod:`~msh.ebms.envelope.quick_reader`),
which reads them in one pass with no location strings and no second pass for extensions, and gives up
(raises :class:`~msh.ebms.envelope.quick_reader.Unusual`, or the model a ValueError) at the first thing
that needs judging: whatever the detailed reader refuses in strict mode (which covers all it warns about
in lenient mode), and a few things that reader takes without a word (an unknown eb: element in
MessageHeader, a repeated Acknowledgment child, an eb: or unqualified attribute it does not read, a comment
or processing instruction among the children). Then that element alone is read again by its detailed
reader, which raises (strict mode) or warns (lenient mode) with the XPath location of what it does not
take, as if the quick reader had not been tried (the foreign elements it kept are uncounted). A strict
read that raises nothing is a lenient read without Warnings, so an element the quick reader takes has the
same value in both modes, the one its detailed reader gives: :func:`read_in_detail`, the same walk with
the detailed readers only, is the reference ``tests/unit/codec/test_quick_reader.py`` holds
:func:`read_envelope` to, over the samples and their mutations.

:func:`read_reply_address` reads just enough of a refused envelope to address the ErrorList about it;
:func:`salvage_envelope` reads all that can still be read of it, for a person diagnosing it
(:mod:`~msh.ebms.envelope.salvage`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from lxml import etree

from msh.ebms.envelope.body_reader import read_fault, read_manifest, read_status_request, read_status_response
from msh.ebms.envelope.element_reader import ElementReader, foreign_attributes
from msh.ebms.envelope.header_reader import (
    read_ack_requested,
    read_acknowledgment,
    read_error_list,
    read_message_header,
    read_message_order,
    read_sync_reply,
)
from msh.ebms.envelope.names import BODY, DS_SIGNATURE, ENVELOPE, FAULT, HEADER, eb
from msh.ebms.envelope.quick_reader import (
    Unusual,
    extensions_of,
    quick_ack_requested,
    quick_acknowledgment,
    quick_manifest,
    quick_message_header,
    quick_sync_reply,
)
from msh.ebms.envelope.salvage import SalvagedEnvelope, salvage_header
from msh.ebms.model import NO_EXTENSIONS, Envelope, ReplyAddress, Signature
from msh.ebms.namespaces import EB
from msh.errors import EbmsError, EnvelopeError, ErrorCode, Issue, Severity

__all__ = [
    "DETAILED_READERS",
    "QUICK_READERS",
    "read_envelope",
    "read_in_detail",
    "read_reply_address",
    "salvage_envelope",
]

_E = etree._Element

_ElementRead: TypeAlias = Callable[[ElementReader, _E], object]


def _read_signature(reader: ElementReader, el: _E) -> Signature:
    # ebMS2 §4.1: a ds:Signature in the SOAP Header, kept as its canonical text.
    return Signature(reader.keep(el))


# Each element the Header and the Body may carry: the Envelope field it fills, its reader and its quick
# reader (None for the rarer elements). The fields ack_requested, acknowledgments and signatures take any
# number of elements; the others one at most.
_HEADER_READERS: dict[str, tuple[str, _ElementRead, _ElementRead | None]] = {
    eb("MessageHeader"): ("message_header", read_message_header, quick_message_header),
    eb("AckRequested"): ("ack_requested", read_ack_requested, quick_ack_requested),
    eb("Acknowledgment"): ("acknowledgments", read_acknowledgment, quick_acknowledgment),
    eb("ErrorList"): ("error_list", read_error_list, None),
    eb("SyncReply"): ("sync_reply", read_sync_reply, quick_sync_reply),
    eb("MessageOrder"): ("message_order", read_message_order, None),
    DS_SIGNATURE: ("signatures", _read_signature, None),
}
_BODY_READERS: dict[str, tuple[str, _ElementRead, _ElementRead | None]] = {
    eb("Manifest"): ("manifest", read_manifest, quick_manifest),
    eb("StatusRequest"): ("status_request", read_status_request, None),
    eb("StatusResponse"): ("status_response", read_status_response, None),
    FAULT: ("fault", read_fault, None),
}
QUICK_READERS: dict[str, _ElementRead] = {
    tag: quick for tag, (_, _, quick) in (_HEADER_READERS | _BODY_READERS).items() if quick is not None
}
"""The elements that have a quick reader, by Clark name, and their quick readers."""
DETAILED_READERS: dict[str, _ElementRead] = {
    tag: read for tag, (_, read, _) in (_HEADER_READERS | _BODY_READERS).items()
}
"""Every element of the Header and the Body read into the model, by Clark name, and its detailed reader."""


def read_envelope(root: _E, *, lenient: bool = False) -> tuple[Envelope, tuple[Issue, ...]]:
    """Build the :class:`Envelope` model from a parsed SOAP envelope element.

    Returns the model and the Warnings of lenient mode (always empty in strict mode, where every
    deviation raises). Raises :class:`EnvelopeError` when ``root`` is not a SOAP 1.1 Envelope and
    :class:`EbmsError` (with an XPath ``location``) when a required element or value is missing or bad.
    """
    return _read(root, lenient, quick=True)


def read_in_detail(root: _E, *, lenient: bool = False) -> tuple[Envelope, tuple[Issue, ...]]:
    """:func:`read_envelope` without the quick readers: every element read by its detailed reader (the
    reference the quick readers are held to)."""
    return _read(root, lenient, quick=False)


def _read(root: _E, lenient: bool, *, quick: bool) -> tuple[Envelope, tuple[Issue, ...]]:
    if root.tag != ENVELOPE:
        # SOAP 1.1 §4.1: the root is SOAP-ENV:Envelope in the SOAP 1.1 namespace.
        raise EnvelopeError(f"root element is {root.tag}, not a SOAP 1.1 Envelope", location="/")
    reader = ElementReader(lenient)
    header_el: _E | None = None
    body_el: _E | None = None
    env_other: list[str] = []
    for child in root:
        tag = child.tag
        if not isinstance(tag, str):
            continue  # a comment or processing instruction
        if tag == HEADER and header_el is None and body_el is None:
            header_el = child
        elif tag == BODY and body_el is None:
            body_el = child
        elif tag in (HEADER, BODY):
            raise EnvelopeError(f"misplaced or repeated SOAP {etree.QName(child).localname}", location="/Envelope")
        else:
            env_other.append(reader.keep(child))
    if body_el is None:
        # SOAP 1.1 §4.3: the Body element is mandatory.
        raise EnvelopeError("SOAP Envelope has no Body", location="/Envelope/Body")

    fields: dict[str, object] = {}
    lists: dict[str, list[object]] = {"ack_requested": [], "acknowledgments": [], "signatures": []}
    header_ext = (
        _read_children(reader, header_el, _HEADER_READERS, "//Header", fields, lists, quick)
        if header_el is not None
        else []
    )
    body_ext = _read_children(reader, body_el, _BODY_READERS, "//Body", fields, lists, quick)
    try:
        envelope = Envelope(
            ack_requested=tuple(lists["ack_requested"]),  # type: ignore[arg-type]
            acknowledgments=tuple(lists["acknowledgments"]),  # type: ignore[arg-type]
            signatures=tuple(lists["signatures"]),  # type: ignore[arg-type]
            header_extensions=extensions_of(header_ext, foreign_attributes(header_el))
            if header_el is not None
            else NO_EXTENSIONS,
            body_extensions=extensions_of(body_ext, foreign_attributes(body_el)),
            envelope_extensions=extensions_of(env_other, foreign_attributes(root)),
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
    if root.tag != ENVELOPE:
        return None
    header = root.find(HEADER)
    el = header.find(eb("MessageHeader")) if header is not None else None
    if el is None:
        return None
    reader = ElementReader(lenient=True)
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


def salvage_envelope(root: _E) -> SalvagedEnvelope:
    """What can still be read of the SOAP envelope ``root`` that :func:`read_envelope` refused: the
    MessageHeader field by field as written (:func:`~msh.ebms.envelope.salvage.salvage_header`), and each
    other ebXML element of the Header and Body that its own reader takes in lenient mode, the first of a
    repeated one; the problems of those it does not take are listed. Never raises; an element that is not
    a SOAP 1.1 Envelope gives an empty result."""
    if root.tag != ENVELOPE:
        return SalvagedEnvelope()
    reader = ElementReader(lenient=True)
    fields: dict[str, object] = {}
    lists: dict[str, list[object]] = {"ack_requested": [], "acknowledgments": [], "signatures": []}
    present: set[str] = set()
    problems: list[Issue] = []
    for parent_tag, readers in ((HEADER, _HEADER_READERS), (BODY, _BODY_READERS)):
        parent = root.find(parent_tag)
        for child in reader.children(parent) if parent is not None else ():
            entry = readers.get(child.tag)
            if entry is None:
                continue
            present.add(etree.QName(child).localname)
            field, read, _ = entry
            if field in fields:
                continue
            try:
                value = salvage_header(child) if field == "message_header" else read(reader, child)
            except EbmsError as exc:
                problems.append(exc.issues[0])
                continue
            except ValueError as exc:  # a value the model refuses
                where = f"//{etree.QName(parent_tag).localname}/{etree.QName(child).localname}"
                problems.append(Issue(ErrorCode.OTHER_XML, Severity.ERROR, str(exc), where))
                continue
            if field in lists:
                lists[field].append(value)
            else:
                fields[field] = value
    return SalvagedEnvelope(
        ack_requested=tuple(lists["ack_requested"]),  # type: ignore[arg-type]
        acknowledgments=tuple(lists["acknowledgments"]),  # type: ignore[arg-type]
        signatures=tuple(lists["signatures"]),  # type: ignore[arg-type]
        present=frozenset(present),
        problems=tuple(problems),
        **fields,  # type: ignore[arg-type]
    )


def _read_children(
    reader: ElementReader,
    parent: _E,
    readers: dict[str, tuple[str, _ElementRead, _ElementRead | None]],
    location: str,
    fields: dict[str, object],
    lists: dict[str, list[object]],
    quick: bool,
) -> list[str]:
    """Read the children of the SOAP Header or Body ``parent`` with ``readers``: each into its Envelope
    field, in ``lists`` when it takes any number, else in ``fields`` (a second one is an error). Returns
    the other children, kept as extensions. With ``quick``, an element that has a quick reader is read by
    it first (:func:`_read_quickly`)."""
    extensions: list[str] = []
    for child in parent:
        tag = child.tag
        if not isinstance(tag, str):
            continue  # a comment or processing instruction
        entry = readers.get(tag)
        if entry is None:
            _unknown(reader, tag, location)
            extensions.append(reader.keep(child))
            continue
        field, read, read_quickly = entry
        if field in fields:
            name = etree.QName(tag).localname
            raise reader.fail(f"{name} occurs more than once", f"{location}/{name}")
        if quick and read_quickly is not None:
            value = _read_quickly(read_quickly, read, reader, child)
        else:
            value = read(reader, child)
        if field in lists:
            lists[field].append(value)
        else:
            fields[field] = value
    return extensions


def _read_quickly(read_quickly: _ElementRead, read: _ElementRead, reader: ElementReader, el: _E) -> object:
    """``el`` read by its quick reader, or, when that one gives up, by its detailed reader: the same value,
    or the Warnings or the error of the detailed reader, as if the quick one had not been tried."""
    kept = reader.kept
    try:
        return read_quickly(reader, el)
    except (Unusual, EbmsError, ValueError):
        reader.kept = kept  # the detailed reader keeps (and counts) the same foreign elements again
    return read(reader, el)


def _unknown(reader: ElementReader, tag: str, location: str) -> None:
    if tag.startswith(f"{{{EB}}}"):
        name = tag[len(EB) + 2 :]
        if not reader.lenient:
            raise reader.fail(f"eb:{name} is not an ebMS 2.0 element", f"{location}/{name}", ErrorCode.NOT_SUPPORTED)
        reader.warn(f"eb:{name} is not an ebMS 2.0 element; kept as is", f"{location}/{name}", ErrorCode.NOT_SUPPORTED)
