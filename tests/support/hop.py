"""Builders and oracles for the intermediary's forwarding tests (:mod:`msh.ebms.hop`): the elements an
intermediary inserts, and the part of an envelope a signature covers (ebMS2 §4.1.3), computed independently
of the code under test with lxml."""

from __future__ import annotations

import io
from collections.abc import Sequence

from lxml import etree

from msh.ebms.hop import Forwarded, forward_message
from msh.ebms.namespaces import ACTOR_NEXT_MSH, EB, SOAP_ACTOR_NEXT, SOAP_ENV

__all__ = ["ACK_NEXT", "SYNC_NEXT", "TRACE_NEXT", "forward", "signed_view"]

# ebMS2 §10.1.1: the AckRequested an intermediary adds for the next hop, declaring its own namespaces.
ACK_NEXT = (
    f'<eb:AckRequested xmlns:eb="{EB}" xmlns:SOAP="{SOAP_ENV}" SOAP:mustUnderstand="1" eb:version="2.0" '
    f'eb:signed="false" SOAP:actor="{ACTOR_NEXT_MSH}"/>'
)
SYNC_NEXT = (
    f'<eb:SyncReply xmlns:eb="{EB}" xmlns:S="{SOAP_ENV}" eb:version="2.0" S:mustUnderstand="1" '
    f'S:actor="{SOAP_ACTOR_NEXT}"/>'
)
TRACE_NEXT = (
    f'<Via xmlns="urn:example:via" xmlns:s="{SOAP_ENV}" s:actor="{ACTOR_NEXT_MSH}">'
    "<Hop>intermediary-1</Hop><Note xmlns=''>unqualified, said so</Note></Via>"
)

_NEXT = (ACTOR_NEXT_MSH, SOAP_ACTOR_NEXT)
_PARSER = etree.XMLParser(resolve_entities=False, load_dtd=False, no_network=True, remove_comments=False)


def signed_view(soap: bytes, *, with_comments: bool = True) -> bytes:
    """The envelope as the ebMS signature's Reference sees it (ebMS2 §4.1.3): every element whose
    SOAP:actor is next or nextMSH left out with its descendants (the text around it stays), then
    canonicalised (C14N 1.0)."""
    root = etree.fromstring(soap, _PARSER)
    actor = f"{{{SOAP_ENV}}}actor"
    for element in [e for e in root.iter() if isinstance(e.tag, str) and e.get(actor) in _NEXT]:
        if any(a.get(actor) in _NEXT for a in element.iterancestors()):
            continue  # left out with its ancestor
        parent = element.getparent()
        assert parent is not None
        tail = element.tail or ""
        previous = element.getprevious()
        if previous is not None:
            previous.tail = (previous.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
        parent.remove(element)
    return etree.tostring(root, method="c14n", with_comments=with_comments)


def forward(body: bytes, content_type: str, insert: Sequence[str] = (), **kwargs: object) -> tuple[Forwarded, bytes]:
    """:func:`forward_message` from and to memory: (what it returned, the forwarded body)."""
    out = io.BytesIO()
    result = forward_message(io.BytesIO(body), content_type, out, insert=insert, **kwargs)  # type: ignore[arg-type]
    return result, out.getvalue()
