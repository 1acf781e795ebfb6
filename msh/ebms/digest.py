"""The content digest of a received message: what makes two copies of one MessageId the same message.

ebMS2 §6.5.6 calls a message *identical* to an earlier one when it carries the same ebXML SOAP Header,
Body and payload containers; only an identical copy is a duplicate to answer with the stored
acknowledgment. :func:`content_digest` reduces a message to one SHA-256 so that the receiving engine can
compare a copy with the first one without keeping both in memory.

What it covers, and what it leaves out:

* Every child of the SOAP Header except those targeted at the next MSH: an element whose ``SOAP:actor``
  is ``urn:oasis:names:tc:ebxml-msg:actor:nextMSH`` (AckRequested, Acknowledgment) or SOAP's ``next``
  (SyncReply). Each hop may answer and replace those (ebMS2 §10.1.5), which is why the signature profile
  leaves them out of the signed content with the same XPath filter (ebMS2 §4.1.3).
* ``ds:Signature`` is left out too: it covers the content the digest covers, and signing the same content
  again need not give the same bytes (DSA and ECDSA signatures are randomised).
* The whole SOAP Body (Manifest, StatusRequest, anything else).
* Each payload part, in package order: its Content-ID and its decoded bytes (after any
  Content-Transfer-Encoding, so a part re-encoded on the way is still the same payload). Other MIME
  headers, the boundary and the part framing are the package's, not the payload's, and do not count.

XML is taken in Exclusive XML Canonicalization 1.0 (W3C), element by element: where a namespace prefix is
declared, attribute order and quoting, and whitespace between header elements do not change the digest;
anything inside an element does. Every item is length-prefixed, so no two different messages hash the same
sequence of bytes.
"""

from __future__ import annotations

import hashlib
from typing import Final

from lxml import etree

from msh.ebms.message import EbxmlMessage
from msh.ebms.namespaces import ACTOR_NEXT_MSH, SOAP_ACTOR_NEXT, SOAP_ENV, XMLDSIG
from msh.safexml import XmlLimits, parse_xml

__all__ = ["DIGEST_PREFIX", "content_digest"]

DIGEST_PREFIX: Final = "sha256:"

_HEADER = f"{{{SOAP_ENV}}}Header"
_BODY = f"{{{SOAP_ENV}}}Body"
_ACTOR = f"{{{SOAP_ENV}}}actor"
_DS_SIGNATURE = f"{{{XMLDSIG}}}Signature"
# ebMS2 §4.1.3: the actors whose elements the signature profile's XPath filter leaves out.
_HOP_ACTORS: Final = frozenset({ACTOR_NEXT_MSH, SOAP_ACTOR_NEXT})
_CHUNK: Final = 1 << 20


def _c14n(el: etree._Element) -> bytes:
    try:
        return etree.tostring(el, method="c14n", exclusive=True, with_comments=False)
    except etree.C14NError:
        # C14N refuses relative namespace URIs (W3C C14N 1.0 §2.3); such an element is taken as written.
        return b"\x00" + etree.tostring(el, with_tail=False)


def content_digest(message: EbxmlMessage) -> str:
    """``sha256:<hex>`` over the message's header (without next-MSH elements and signatures), Body and
    payloads, as the module docs define; equal for two copies exactly when they are identical messages."""
    root = message.root
    if root is None:  # a message built here rather than parsed
        root = parse_xml(message.soap, what="SOAP envelope", limits=XmlLimits(max_bytes=max(len(message.soap), 1)))
    h = hashlib.sha256()

    def item(kind: bytes, data: bytes) -> None:
        h.update(kind + len(data).to_bytes(8, "big") + data)

    header = root.find(_HEADER)
    if header is not None:
        for child in header:
            if not isinstance(child.tag, str) or child.tag == _DS_SIGNATURE:
                continue
            if (child.get(_ACTOR) or "").strip() in _HOP_ACTORS:
                continue
            item(b"H", _c14n(child))
    body = root.find(_BODY)
    if body is not None:
        item(b"B", _c14n(body))
    for part in message.payloads:
        item(b"P", (part.content_id or "").encode("utf-8"))
        h.update(b"D" + part.body.size.to_bytes(8, "big"))
        with part.body.open() as reader:
            while chunk := reader.read(_CHUNK):
                h.update(chunk)
    return DIGEST_PREFIX + h.hexdigest()
