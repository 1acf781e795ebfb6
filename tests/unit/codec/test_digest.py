"""The content digest: equal for retries of one message, different for other business content under its MessageId."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable

import pytest

from msh.ebms import model as m
from msh.ebms.digest import DIGEST_PREFIX, comparable, content_digest
from msh.ebms.message import ParseMode, build_message, parse_message
from msh.ebms.mime import AttachmentSpec, MimeLimits, PartBody
from msh.ebms.namespaces import ACTOR_NEXT_MSH
from tests.unit.codec.test_envelope import minimal_header

DS = "http://www.w3.org/2000/09/xmldsig#"
SIGNATURE = f'<ds:Signature xmlns:ds="{DS}"><ds:SignedInfo/><ds:SignatureValue>AAAA</ds:SignatureValue></ds:Signature>'


def envelope(*cids: str) -> m.Envelope:
    return m.Envelope(
        message_header=minimal_header(duplicate_elimination=True),
        sync_reply=m.SyncReply(),
        ack_requested=(m.AckRequested(),),
        manifest=m.Manifest(tuple(m.Reference(f"cid:{c}") for c in cids)),
    )


def payload(cid: str, data: bytes, encoding: str = "binary") -> AttachmentSpec:
    return AttachmentSpec(cid, "application/xml", PartBody.from_bytes(data), transfer_encoding=encoding)


def digest_of(content_type: str, body: bytes) -> str:
    message = parse_message(body, content_type, mode=ParseMode.LENIENT)
    try:
        return content_digest(message)
    finally:
        message.close()


def digest(env: m.Envelope, *parts: AttachmentSpec, boundary: str | None = None) -> str:
    return digest_of(*build_message(env, parts, boundary=boundary))


FIRST = digest(envelope("p1@x"), payload("p1@x", b"<order n='1'/>"))


def test_the_digest_is_a_sha256_of_its_own_kind() -> None:
    assert FIRST.startswith(DIGEST_PREFIX) and len(FIRST) == len(DIGEST_PREFIX) + 64
    int(FIRST.removeprefix(DIGEST_PREFIX), 16)
    # Digests of revision 0003 (over the whole header) are never compared with these.
    assert comparable(FIRST, FIRST) and not comparable("sha256:" + "0" * 64, FIRST) and not comparable(None, FIRST)


def test_a_copy_framed_or_encoded_otherwise_has_the_same_content() -> None:
    """The boundary and the Content-Transfer-Encoding are the package's, not the payload's."""
    assert digest(envelope("p1@x"), payload("p1@x", b"<order n='1'/>"), boundary="other-boundary") == FIRST
    assert digest(envelope("p1@x"), payload("p1@x", b"<order n='1'/>", "base64")) == FIRST


def test_what_a_retry_or_a_hop_may_change_does_not_count() -> None:
    """ebMS2 §6.5.6: a duplicate is the same MessageId; a retry may regenerate its Timestamp, re-sign it, ask
    for other acknowledgments, carry another Content-ID; §10.1.5: a hop changes the next-MSH elements."""
    hop = dataclasses.replace(
        envelope("p1@x"),
        sync_reply=None,
        ack_requested=(m.AckRequested(signed=True), m.AckRequested(actor=ACTOR_NEXT_MSH)),
        acknowledgments=(m.Acknowledgment(minimal_header().message_data.timestamp, "earlier@x", actor=ACTOR_NEXT_MSH),),
        signatures=(m.Signature(SIGNATURE),),
    )
    assert digest(hop, payload("p1@x", b"<order n='1'/>")) == FIRST
    later = minimal_header().message_data.timestamp.replace(year=2027)
    retried = _header(message_data=m.MessageData("mid-1@example.org", later))(envelope("p2@x"))
    assert digest(retried, payload("p2@x", b"<order n='1'/>")) == FIRST


def test_attribute_order_and_whitespace_in_the_header_do_not_count() -> None:
    content_type, body = build_message(envelope("p1@x"), [payload("p1@x", b"<order n='1'/>")])
    original = b'<eb:MessageHeader eb:version="2.0" SOAP:mustUnderstand="1">'
    assert original in body
    body = body.replace(original, b'<eb:MessageHeader  SOAP:mustUnderstand="1"\n eb:version="2.0" >')
    body = body.replace(b"</eb:MessageHeader><eb:SyncReply", b"</eb:MessageHeader>\n   <eb:SyncReply")
    assert digest_of(content_type, body) == FIRST


def _header(**changes: object) -> Callable[[m.Envelope], m.Envelope]:
    def change(env: m.Envelope) -> m.Envelope:
        assert env.message_header is not None
        return dataclasses.replace(env, message_header=dataclasses.replace(env.message_header, **changes))

    return change


OTHER_CONTENT: dict[str, tuple[Callable[[m.Envelope], m.Envelope], tuple[AttachmentSpec, ...]]] = {
    "payload bytes": (lambda e: e, (payload("p1@x", b"<order n='2'/>"),)),
    "one more payload": (
        lambda _e: envelope("p1@x", "p2@x"),
        (payload("p1@x", b"<order n='1'/>"), payload("p2@x", b"")),
    ),
    "payloads in another order": (
        lambda _e: envelope("p2@x", "p1@x"),
        (payload("p2@x", b""), payload("p1@x", b"<order n='1'/>")),
    ),
    "ConversationId": (_header(conversation_id="conv-2"), (payload("p1@x", b"<order n='1'/>"),)),
    "Action": (_header(action="CancelOrder"), (payload("p1@x", b"<order n='1'/>"),)),
    "CPAId": (_header(cpa_id="cpa-2"), (payload("p1@x", b"<order n='1'/>"),)),
}


@pytest.mark.parametrize("what", list(OTHER_CONTENT))
def test_other_business_content_under_the_same_message_id_has_another_digest(what: str) -> None:
    change, parts = OTHER_CONTENT[what]
    assert digest(change(envelope("p1@x")), *parts) != FIRST


# The byte layout the module docs define, written out here on its own: every item is a kind byte, its
# length as 8 bytes big-endian and its bytes; an absent value is kind "N" with no bytes.
def _item(value: str | None) -> bytes:
    data = b"" if value is None else value.encode("utf-8")
    return (b"N" if value is None else b"A") + len(data).to_bytes(8, "big") + data


def _payload_item(data: bytes) -> bytes:
    return b"P" + len(data).to_bytes(8, "big") + data


PINNED_HEADER = minimal_header(
    from_party=m.Party((m.PartyId("partyA", "urn:test:type"), m.PartyId("A-2")), role="Buyer"),
    to_party=m.Party((m.PartyId("urn:duns:123456789"),)),
    service=m.Service("ordering", type="urn:test:services"),
    message_data=m.MessageData("mid-1@example.org", minimal_header().message_data.timestamp, "earlier@x"),
    conversation_id="conv-ü€",
)
PINNED_PAYLOADS = (b"<order n='1'/>", b"", bytes(range(256)) * 8, bytes(range(256)) * 400)  # the last over 64 KiB
PINNED_LAYOUT = b"".join(
    [
        *map(_item, ["Buyer", "urn:test:type", "partyA", None, "A-2", "|"]),
        *map(_item, [None, None, "urn:duns:123456789", "|"]),
        *map(_item, ["cpa-1", "conv-ü€", "urn:test:services", "ordering", "NewOrder", "earlier@x"]),
        *map(_payload_item, PINNED_PAYLOADS),
    ]
)
# The value the digest has had for this message since it was defined: were it to change, a retry of a
# message received before an upgrade would be recorded as a conflict (ebMS2 §6.5.6).
PINNED = "content-sha256:7443f12131b31138940765f5db744c07703a54201151c74cdc9300e0a3cddfcf"


@pytest.mark.parametrize("spool_threshold", [1 << 20, 0], ids=["payloads in memory", "payloads spooled"])
def test_the_digest_is_the_documented_layout_hashed(spool_threshold: int) -> None:
    """The digest is SHA-256 over the layout of the module docs, whether the payloads are held in memory or
    in the package's temporary file; the value is pinned, so no change in how it is computed changes it."""
    cids = [f"p{i}@x" for i in range(len(PINNED_PAYLOADS))]
    env = m.Envelope(message_header=PINNED_HEADER, manifest=m.Manifest(tuple(m.Reference(f"cid:{c}") for c in cids)))
    parts = [
        payload(c, data, "base64" if i == 2 else "binary")
        for i, (c, data) in enumerate(zip(cids, PINNED_PAYLOADS, strict=True))
    ]
    content_type, body = build_message(env, parts)
    message = parse_message(body, content_type, mime_limits=MimeLimits(spool_threshold=spool_threshold))
    try:
        # (an empty part is never written to the file)
        assert [p.body.in_memory for p in message.payloads if p.body.size] == [spool_threshold > 0] * 3
        got = content_digest(message)
    finally:
        message.close()
    assert got == DIGEST_PREFIX + hashlib.sha256(PINNED_LAYOUT).hexdigest()
    assert got == PINNED
