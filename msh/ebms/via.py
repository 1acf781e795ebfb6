"""The header elements an intermediary adds for the next MSH (ebMS2 §10.1.1, §10.1.5), and the path record.

An intermediary may add only elements targeted at the next SOAP node or the next MSH (ebMS2 §10.1.5): the
AckRequested it asks the next MSH with (:func:`ack_requested_element`, §10.1.1), and ``mh:Via``, this
project's record of the intermediaries a message has passed (:func:`via_element`, :func:`read_via`).
ebMS 2.0 has no routing header (its draft's RoutingHeader was dropped), so without such a record an
intermediary cannot tell a message that comes back to it through a misconfigured route from a resend.
``mh:Via`` is aimed at the next MSH with ``SOAP:mustUnderstand="0"``: each intermediary replaces it with
the list extended by its own id; the To party, or any MSH that does not know it, ignores it; and the
ebMS signature profile leaves it out of the signed content like every element aimed at the next MSH
(§4.1.3), so it never breaks an end-to-end signature.

Each element is complete XML text declaring its own namespaces, ready to be inserted into a document
whose prefixes are unknown (:func:`msh.ebms.hop.forward_message`).
"""

from __future__ import annotations

from typing import Final
from xml.sax.saxutils import escape, quoteattr

from msh.ebms.model import Envelope
from msh.ebms.namespaces import ACTOR_NEXT_MSH, EB, EBMS_VERSION, SOAP_ACTOR_NEXT, SOAP_ENV
from msh.errors import MshError
from msh.safexml import XmlLimits, parse_xml

__all__ = ["MAX_HOPS", "VIA", "VIA_NS", "ack_requested_element", "read_via", "sync_reply_element", "via_element"]

VIA_NS: Final = "urn:x-pymsh:ebms:multihop:1.0"
"""The namespace of ``mh:Via`` (this project's; not an ebMS namespace)."""
VIA: Final = f"{{{VIA_NS}}}Via"
_HOP: Final = f"{{{VIA_NS}}}Hop"

MAX_HOPS: Final = 32
"""More intermediaries than this on one path is taken for a loop (and a Via is never read further)."""


def ack_requested_element(*, signed: bool = False) -> str:
    """An ``eb:AckRequested`` aimed at the next MSH (ebMS2 §10.1.1), as text declaring its namespaces."""
    return (
        f'<eb:AckRequested xmlns:eb="{EB}" xmlns:SOAP="{SOAP_ENV}" SOAP:mustUnderstand="1" '
        f'eb:version="{EBMS_VERSION}" eb:signed="{"true" if signed else "false"}" SOAP:actor="{ACTOR_NEXT_MSH}"/>'
    )


def sync_reply_element() -> str:
    """An ``eb:SyncReply`` for the next SOAP node (ebMS2 §4.3.1: actor SOAP's ``next``), as text declaring its
    namespaces: an intermediary reapplies the one it received, which was aimed at it (ebMS2 §10: an element
    aimed at the next node that must "continue to appear ... must be reapplied")."""
    return (
        f'<eb:SyncReply xmlns:eb="{EB}" xmlns:SOAP="{SOAP_ENV}" SOAP:mustUnderstand="1" '
        f'eb:version="{EBMS_VERSION}" SOAP:actor="{SOAP_ACTOR_NEXT}"/>'
    )


def via_element(hops: tuple[str, ...]) -> str:
    """``mh:Via`` listing ``hops`` (intermediary ids, in the order the message passed them)."""
    inner = "".join(f"<mh:Hop>{escape(hop)}</mh:Hop>" for hop in hops)
    return (
        f'<mh:Via xmlns:mh="{VIA_NS}" xmlns:SOAP="{SOAP_ENV}" SOAP:mustUnderstand="0" '
        f"SOAP:actor={quoteattr(ACTOR_NEXT_MSH)}>{inner}</mh:Via>"
    )


def read_via(envelope: Envelope) -> tuple[str, ...]:
    """The intermediaries ``envelope`` has passed, from its ``mh:Via`` (none: an empty tuple). An unreadable
    Via, or one longer than :data:`MAX_HOPS`, reads as that many hops of ``"?"`` (a loop, to the caller)."""
    for text in envelope.header_extensions.elements:
        if VIA_NS not in text:
            continue
        try:
            root = parse_xml(text.encode("utf-8"), what="mh:Via", limits=XmlLimits(max_bytes=64 << 10))
        except MshError:
            return ("?",) * (MAX_HOPS + 1)
        if root.tag != VIA:
            continue
        hops = tuple((hop.text or "").strip() for hop in root.iter(_HOP))
        return hops if len(hops) <= MAX_HOPS else ("?",) * (MAX_HOPS + 1)
    return ()
