"""The content digest of a received message: whether a duplicate carries the same business content.

ebMS2 §6.5.6 defines a *duplicate message* as "a message containing the same MessageId as a previously
received message", and §6.5.2 answers every duplicate the same way (the stored acknowledgment, no second
delivery) whatever else it carries: a partner's retry may regenerate its Timestamp, re-sign, re-encode or
re-frame the package. So the MessageId alone decides what a duplicate is. What the digest adds is the
operator's view: a copy under a known MessageId whose *business content* differs from the first copy's
(another payload, another addressee) is still not delivered, but it is recorded as a conflict, since it
is probably a different message that reused a MessageId and the sender believes it arrived.

:func:`content_digest` reduces a message to one SHA-256 over what makes it that business message:

* the addressing of its MessageHeader: From and To (each PartyId with its type, and the Role), CPAId,
  ConversationId, Service (with its type), Action and RefToMessageId. Left out: Timestamp, TimeToLive,
  DuplicateElimination, Description, and every other header element (AckRequested, SyncReply,
  Acknowledgment, signatures, ...): they say how it travels, which a retry may change;
* each payload part, in package order: its decoded bytes (after any Content-Transfer-Encoding, so a part
  re-encoded on the way is still the same payload). Its Content-ID, other MIME headers and the framing
  are the package's, not the payload's.

Every item is length-prefixed, so no two different messages hash the same sequence of bytes. The digest
starts with :data:`DIGEST_PREFIX`; digests stored before this definition (revision 0003: ``sha256:``, over
the whole header) are of another kind and are never compared with it.
"""

from __future__ import annotations

import hashlib
from typing import Final

from msh.ebms.message import EbxmlMessage
from msh.ebms.model import MessageHeader, Party

__all__ = ["DIGEST_PREFIX", "comparable", "content_digest"]

DIGEST_PREFIX: Final = "content-sha256:"

_CHUNK: Final = 1 << 20
# Payloads in memory up to this size are joined with the other items; larger ones are hashed on their own.
_JOINED: Final = 64 << 10
# An absent value: kind "N" and a length of zero.
_ABSENT: Final = b"N" + bytes(8)


def comparable(first: str | None, other: str | None) -> bool:
    """Whether two stored digests were made the same way (both by :func:`content_digest`)."""
    return bool(first and other and first.startswith(DIGEST_PREFIX) and other.startswith(DIGEST_PREFIX))


def _party(party: Party) -> list[str | None]:
    out: list[str | None] = [party.role]
    for party_id in party.party_ids:
        out += [party_id.type, party_id.value]
    return out


def _addressing(header: MessageHeader) -> list[str | None]:
    return [
        *_party(header.from_party),
        "|",
        *_party(header.to_party),
        "|",
        header.cpa_id,
        header.conversation_id,
        header.service.type,
        header.service.value,
        header.action,
        header.message_data.ref_to_message_id,
    ]


def content_digest(message: EbxmlMessage) -> str:
    """``content-sha256:<hex>`` over the message's addressing and payloads (see the module docs)."""
    # The items are joined and hashed in one update: one call per item costs more than the hashing of a
    # typical message's few hundred bytes. A large payload in memory is hashed on its own (no copy), one
    # spooled to a file in chunks.
    pieces: list[bytes] = []
    header = message.envelope.message_header
    if header is not None:
        for value in _addressing(header):
            if value is None:
                pieces.append(_ABSENT)
            else:
                data = value.encode("utf-8")
                pieces += (b"A", len(data).to_bytes(8, "big"), data)
    h = hashlib.sha256()
    for part in message.payloads:
        body = part.body
        pieces += (b"P", body.size.to_bytes(8, "big"))
        if body.in_memory and body.size <= _JOINED:
            pieces.append(body.read_bytes())
            continue
        h.update(b"".join(pieces))
        pieces.clear()
        if body.in_memory:
            h.update(body.read_bytes())  # hashed where it is, not copied into the joined buffer
            continue
        with body.open() as reader:
            while chunk := reader.read(_CHUNK):
                h.update(chunk)
    h.update(b"".join(pieces))
    return DIGEST_PREFIX + h.hexdigest()
