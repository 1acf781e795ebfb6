"""The content digest: equal for copies of the identical message (ebMS2 §6.5.6), different for other content."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from msh.ebms import model as m
from msh.ebms.digest import content_digest
from msh.ebms.message import ParseMode, build_message, parse_message
from msh.ebms.mime import AttachmentSpec, PartBody
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


def test_the_digest_is_a_sha256() -> None:
    assert FIRST.startswith("sha256:") and len(FIRST) == len("sha256:") + 64
    int(FIRST.removeprefix("sha256:"), 16)


def test_a_copy_framed_or_encoded_otherwise_is_the_identical_message() -> None:
    """The boundary and the Content-Transfer-Encoding are the package's, not the payload's."""
    assert digest(envelope("p1@x"), payload("p1@x", b"<order n='1'/>"), boundary="other-boundary") == FIRST
    assert digest(envelope("p1@x"), payload("p1@x", b"<order n='1'/>", "base64")) == FIRST


def test_elements_for_the_next_msh_and_signatures_do_not_count() -> None:
    """ebMS2 §4.1.3, §10.1.5: what a hop may change is left out, as the signature profile leaves it out."""
    hop = dataclasses.replace(
        envelope("p1@x"),
        sync_reply=None,
        ack_requested=(m.AckRequested(), m.AckRequested(actor=ACTOR_NEXT_MSH)),
        acknowledgments=(m.Acknowledgment(minimal_header().message_data.timestamp, "earlier@x", actor=ACTOR_NEXT_MSH),),
        signatures=(m.Signature(SIGNATURE),),
    )
    assert digest(hop, payload("p1@x", b"<order n='1'/>")) == FIRST


def test_attribute_order_and_whitespace_between_header_elements_do_not_count() -> None:
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
    "payload Content-ID": (lambda _e: envelope("p2@x"), (payload("p2@x", b"<order n='1'/>"),)),
    "one more payload": (
        lambda _e: envelope("p1@x", "p2@x"),
        (payload("p1@x", b"<order n='1'/>"), payload("p2@x", b"")),
    ),
    "ConversationId": (_header(conversation_id="conv-2"), (payload("p1@x", b"<order n='1'/>"),)),
    "Action": (_header(action="CancelOrder"), (payload("p1@x", b"<order n='1'/>"),)),
    "Timestamp": (
        _header(
            message_data=m.MessageData("mid-1@example.org", minimal_header().message_data.timestamp.replace(year=2027))
        ),
        (payload("p1@x", b"<order n='1'/>"),),
    ),
    "AckRequested for the To Party MSH": (
        lambda e: dataclasses.replace(e, ack_requested=(m.AckRequested(signed=True),)),
        (payload("p1@x", b"<order n='1'/>"),),
    ),
    "Manifest description": (
        lambda _e: dataclasses.replace(
            envelope("p1@x"), manifest=m.Manifest((m.Reference("cid:p1@x", descriptions=(m.Description("PO 1"),)),))
        ),
        (payload("p1@x", b"<order n='1'/>"),),
    ),
}


@pytest.mark.parametrize("what", list(OTHER_CONTENT))
def test_other_content_under_the_same_message_id_has_another_digest(what: str) -> None:
    change, parts = OTHER_CONTENT[what]
    assert digest(change(envelope("p1@x")), *parts) != FIRST


def test_an_envelope_declaring_a_relative_namespace_still_has_a_digest() -> None:
    """Canonical XML refuses a relative namespace URI in scope even when nothing uses it; the digest then
    takes the elements as written, still telling copies apart by their content."""
    content_type, body = build_message(envelope("p1@x"), [payload("p1@x", b"<order n='1'/>")])
    relative = body.replace(b"<SOAP:Envelope ", b'<SOAP:Envelope xmlns:r="relative/ns" ', 1)
    first = digest_of(content_type, relative)
    assert first.startswith("sha256:") and first != FIRST
    assert digest_of(content_type, relative) == first
    assert digest_of(content_type, relative.replace(b"<order n='1'/>", b"<order n='2'/>")) != first
