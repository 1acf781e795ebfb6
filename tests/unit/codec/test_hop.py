"""What an intermediary forwards (msh.ebms.hop; ebMS2 §4.1.3, §10.1.1, §10.1.5): exactly the Header's
next/nextMSH children cut out and the intermediary's own added before the Header's end tag, every other
byte of the envelope, the MIME framing and the payloads kept; the signed view unchanged over several hops;
bounded memory; hostile input refused with an EbmsError."""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import quopri
import tracemalloc
from pathlib import Path

import pytest

from msh.ebms import model as m
from msh.ebms.hop import forward_message
from msh.ebms.message import ParseMode, build_message, parse_message, write_message
from msh.ebms.mime import AttachmentSpec, MimeLimits, PartBody
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH, EB, SOAP_ACTOR_NEXT, SOAP_ENV
from msh.errors import EbmsError, EnvelopeError, ErrorCode, MimeProblemError
from tests.support.hop import ACK_NEXT, SYNC_NEXT, TRACE_NEXT, forward, signed_view
from tests.unit.codec.test_envelope import minimal_header

NEXT_MSH = ACTOR_NEXT_MSH

# ---------------------------------------------------------------------------------------------- inputs

# Hand-written, as other MSHs format envelopes: CRLF, tabs, comments, CDATA, prefixes other than SOAP/eb,
# attributes in odd order and quotes, a default namespace, an actor spelt with a character reference.
SYNC = f'<e:SyncReply S:actor=\'{SOAP_ACTOR_NEXT}\'\r\n\t\te:version="2.0" S:mustUnderstand="1"/>'
ACK_IN = (
    f'<e:AckRequested e:signed="false" S:actor = "{NEXT_MSH}" S:mustUnderstand="1"\te:version="2.0" ></e:AckRequested >'
)
HOP_ACK = (
    f'<e:Acknowledgment S:mustUnderstand="1" e:version="2.0" S:actor="{NEXT_MSH}">\r\n'
    "\t\t\t<e:Timestamp>2026-03-09T12:22:30Z</e:Timestamp>\r\n"
    "\t\t\t<e:RefToMessageId><![CDATA[mid-0@a]]></e:RefToMessageId>\r\n"
    "\t\t\t<!-- </S:Header> in a comment -->\r\n"
    "\t\t</e:Acknowledgment>"
)
FOREIGN = (
    f'<Trace xmlns="urn:example:trace" xmlns:s2="{SOAP_ENV}"'
    ' s2:actor="urn:oasis:names:tc:ebxml-msg:actor:next&#x4D;SH">'
    '<Hop at="a &gt; b" note="/>">x</Hop></Trace>'
)
KEPT_DEEP = (
    f'<x:Audit xmlns:x="urn:example:audit"><x:Inner S:actor="{NEXT_MSH}">kept: not a Header child</x:Inner></x:Audit>'
)
KEPT_UNQUALIFIED = f'<x:Note xmlns:x="urn:example:note" actor="{NEXT_MSH}">unqualified actor attribute</x:Note>'
KEPT_SPACED = f'<x:Note xmlns:x="urn:example:note" S:actor=" {NEXT_MSH}">not exactly nextMSH</x:Note>'
TO_PARTY = f'<e:AckRequested S:mustUnderstand="1" e:version="2.0" S:actor="{ACTOR_TO_PARTY_MSH}" e:signed="true"/>'
HEADER_END = "</S:Header\t>"

ODD = (
    '<?xml version="1.0" encoding="UTF-8"?>\r\n'
    "<!-- before the envelope -->\r\n"
    f'<S:Envelope xmlns:S="{SOAP_ENV}"\r\n\txmlns:e="{EB}" xmlns:xl="http://www.w3.org/1999/xlink">\r\n'
    "\t<S:Header >\r\n"
    '\t\t<e:MessageHeader S:mustUnderstand="1" e:version="2.0" e:id="mh">'
    '<e:From><e:PartyId e:type="urn:t">A</e:PartyId></e:From><e:To><e:PartyId>B</e:PartyId></e:To>'
    "<e:CPAId><![CDATA[cpa <1>]]></e:CPAId><e:ConversationId>c</e:ConversationId><e:Service>s</e:Service>"
    "<e:Action>a</e:Action><e:MessageData><e:MessageId>mid-1@a</e:MessageId>"
    "<e:Timestamp>2026-03-09T12:00:00Z</e:Timestamp></e:MessageData></e:MessageHeader>\r\n"
    f"\t\t{SYNC}\r\n"
    "\t\t<!-- hop elements follow -->\r\n"
    f"\t\t{ACK_IN}{HOP_ACK}\r\n"
    f"\t\t{KEPT_DEEP}\r\n"
    f"\t\t{FOREIGN}\r\n"
    f"\t\t{KEPT_UNQUALIFIED}{KEPT_SPACED}\r\n"
    f"\t\t{TO_PARTY}\r\n"
    f"\t{HEADER_END}\r\n"
    '\t<S:Body><e:Manifest e:version="2.0"><e:Reference xl:href="cid:p@a" xl:type="simple"/></e:Manifest>'
    "</S:Body>\r\n"
    "</S:Envelope>\r\n"
    "<!-- after -->"
)
ODD_REMOVED = (SYNC, ACK_IN, HOP_ACK, FOREIGN)
ODD_REMOVED_NAMES = (
    f"{{{EB}}}SyncReply",
    f"{{{EB}}}AckRequested",
    f"{{{EB}}}Acknowledgment",
    "{urn:example:trace}Trace",
)


def expected(original: str, removed: tuple[str, ...], inserts: tuple[str, ...], end_tag: str = HEADER_END) -> str:
    """The forwarded envelope computed with plain string operations: each removed element's text cut out
    once, the inserts put right before the Header's end tag."""
    text = original
    for piece in removed:
        assert text.count(piece) == 1, piece
        text = text.replace(piece, "", 1)
    head, sep, tail = text.partition(end_tag)
    assert sep and end_tag not in tail
    return head + "".join(inserts) + sep + tail


def order(*cids: str, **overrides: object) -> m.Envelope:
    fields: dict[str, object] = dict(
        message_header=minimal_header(duplicate_elimination=True),
        ack_requested=(m.AckRequested(), m.AckRequested(actor=NEXT_MSH)),
        manifest=m.Manifest(tuple(m.Reference(f"cid:{c}") for c in cids)) if cids else None,
    )
    fields.update(overrides)
    return m.Envelope(**fields)  # type: ignore[arg-type]


def attach(cid: str, data: bytes, encoding: str = "binary") -> AttachmentSpec:
    return AttachmentSpec(cid, "application/octet-stream", PartBody.from_bytes(data), transfer_encoding=encoding)


def part(headers: list[str], content: bytes) -> bytes:
    return "".join(f"{h}\r\n" for h in headers).encode() + b"\r\n" + content


def package(parts: list[bytes], boundary: bytes = b"=_b0und", preamble: bytes = b"", epilogue: bytes = b"") -> bytes:
    """A package written by hand (RFC 2046 §5.1.1), for framing the project's writer never produces."""
    delimiter = b"\r\n--" + boundary + b"\r\n"
    return preamble + b"--" + boundary + b"\r\n" + delimiter.join(parts) + b"\r\n--" + boundary + b"--" + epilogue


# Binary payload bytes that look like delimiters, MIME headers and XML (none is a delimiter: RFC 2046).
TRICKY = (
    b"--=_b0undX\r\n--=_b0und-not\r\nContent-Type: text/xml\r\n\r\n<S:Header></S:Header>\x00\xff\r\n"
    + bytes(range(256))
    + b"\n--=_b0un"
)

# --------------------------------------------------------------------------------------- bare envelopes


def test_the_hand_written_envelope_loses_exactly_the_targeted_header_children() -> None:
    result, body = forward(ODD.encode(), 'text/xml; charset="utf-8"', [ACK_NEXT])
    assert body == result.soap_part == expected(ODD, ODD_REMOVED, (ACK_NEXT,)).encode()
    assert result.removed == ODD_REMOVED_NAMES
    assert result.content_type == 'text/xml; charset="utf-8"'
    # What stays although it mentions nextMSH: deeper than a Header child, an unqualified actor
    # attribute, an actor value that is not exactly the URI.
    for kept in (KEPT_DEEP, KEPT_UNQUALIFIED, KEPT_SPACED, TO_PARTY):
        assert kept.encode() in body


def test_nothing_to_remove_and_nothing_to_insert_is_the_identity() -> None:
    plain = expected(ODD, ODD_REMOVED, ())
    result, body = forward(plain.encode(), "text/xml")
    assert body == plain.encode() and result.removed == ()


def test_several_inserts_keep_their_order_and_bytes() -> None:
    _, body = forward(ODD.encode(), "text/xml", (SYNC_NEXT, ACK_NEXT, TRACE_NEXT))
    assert body == expected(ODD, ODD_REMOVED, (SYNC_NEXT, ACK_NEXT, TRACE_NEXT)).encode()


def test_the_signed_view_is_unchanged_over_several_hops() -> None:
    """ebMS2 §4.1.3, §10.1.5: the envelope minus its next/nextMSH elements, canonicalised, is what the
    sender signed; every hop removes and inserts such elements only."""
    before = signed_view(ODD.encode())
    body = ODD.encode()
    inserts = [(ACK_NEXT,), (SYNC_NEXT, TRACE_NEXT), (), (ACK_NEXT, TRACE_NEXT)]
    for hop in inserts:
        _, body = forward(body, "text/xml", hop)
        assert signed_view(body) == before
        assert signed_view(body, with_comments=False) == signed_view(ODD.encode(), with_comments=False)
        assert body.endswith(
            b"".join(h.encode() for h in hop) + HEADER_END.encode() + ODD.partition(HEADER_END)[2].encode()
        )
    # Forwarding again with the same insert changes nothing more (the last hop's elements are replaced).
    again, body_again = forward(body, "text/xml", inserts[-1])
    assert body_again == body
    assert again.removed == (f"{{{EB}}}AckRequested", "{urn:example:via}Via")


def test_an_envelope_in_the_default_soap_namespace() -> None:
    envelope = (
        f'<Envelope xmlns="{SOAP_ENV}"><Header>\n'
        f'  <h:Ack xmlns:h="urn:h" xmlns:soap="{SOAP_ENV}" soap:actor="{NEXT_MSH}"/>\n'
        f'  <h:Keep xmlns:h="urn:h"/>\n'
        "</Header><Body/></Envelope>"
    )
    removed = f'<h:Ack xmlns:h="urn:h" xmlns:soap="{SOAP_ENV}" soap:actor="{NEXT_MSH}"/>'
    result, body = forward(envelope.encode(), "text/xml", [ACK_NEXT])
    assert body == expected(envelope, (removed,), (ACK_NEXT,), "</Header>").encode()
    assert result.removed == ("{urn:h}Ack",)
    assert signed_view(body) == signed_view(envelope.encode())


def test_an_empty_element_header_is_kept_when_nothing_is_added() -> None:
    envelope = f'<s:Envelope xmlns:s="{SOAP_ENV}"><s:Header/><s:Body/></s:Envelope>'.encode()
    assert forward(envelope, "text/xml")[1] == envelope
    with pytest.raises(EnvelopeError, match="Header is empty"):
        forward(envelope, "text/xml", [ACK_NEXT])


def test_utf16_with_a_byte_order_mark() -> None:
    for codec, bom in (("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff")):
        text = ODD.replace('encoding="UTF-8"', 'encoding="UTF-16"')
        source = bom + text.encode(codec)
        result, body = forward(source, "text/xml", [ACK_NEXT])
        assert body == bom + expected(text, ODD_REMOVED, (ACK_NEXT,)).encode(codec)
        assert result.removed == ODD_REMOVED_NAMES
        assert signed_view(body) == signed_view(source)


def test_a_single_byte_encoding_keeps_its_bytes() -> None:
    text = ODD.replace('encoding="UTF-8"', 'encoding="ISO-8859-1"').replace("<e:Action>a<", "<e:Action>Grüße ½<")
    source = text.encode("latin-1")
    _, body = forward(source, "text/xml", [ACK_NEXT])
    assert body == expected(text, ODD_REMOVED, (ACK_NEXT,)).encode("latin-1")
    # The MIME charset says it too; an insert the encoding cannot hold is the caller's error.
    assert forward(source, "text/xml; charset=iso-8859-1")[1] == expected(text, ODD_REMOVED, ()).encode("latin-1")
    with pytest.raises(ValueError, match="cannot be written in the document's encoding"):
        forward(source, "text/xml", [ACK_NEXT.replace('eb:signed="false"', 'eb:id="€"')])


def test_the_forwarded_message_reads_with_the_strict_parser() -> None:
    """ebMS2 §10.1.1: the hop's AckRequested(nextMSH) replaces the received one; SyncReply (actor next) and
    a hop Acknowledgment (nextMSH) are gone; the toPartyMSH AckRequested stays."""
    env = order(
        "p@x",
        sync_reply=m.SyncReply(),
        ack_requested=(m.AckRequested(signed=True),),
        acknowledgments=(m.Acknowledgment(minimal_header().message_data.timestamp, "mid-0", actor=NEXT_MSH),),
    )
    ctype, body = build_message(env, [attach("p@x", TRICKY)])
    result, forwarded = forward(body, ctype, [ACK_NEXT])
    assert result.removed == (f"{{{EB}}}SyncReply", f"{{{EB}}}Acknowledgment")
    msg = parse_message(forwarded, result.content_type)
    try:
        assert msg.warnings == ()
        assert msg.envelope.sync_reply is None and msg.envelope.acknowledgments == ()
        assert msg.envelope.ack_requested == (m.AckRequested(signed=True), m.AckRequested(actor=NEXT_MSH))
        assert msg.envelope.message_header == env.message_header
        assert msg.soap == result.soap_part
        assert msg.payload("p@x").body.read_bytes() == TRICKY  # type: ignore[union-attr]
    finally:
        msg.close()
    assert signed_view(result.soap_part) == signed_view(parse_message(body, ctype).soap)


# ------------------------------------------------------------------------------------------- packages


def test_the_package_framing_and_payloads_are_byte_identical() -> None:
    """The root part is not the first (start names it); preamble, epilogue, transport padding, headers
    spelt oddly, payloads that look like delimiters and XML: all go out as received."""
    soap = ODD.encode()
    first = part(["Content-Type: application/octet-stream", "Content-ID: <one@a>"], TRICKY)
    root = part(["content-id:   <soap@a>", "Content-Type: text/xml;\r\n\tcharset=UTF-8", "X-Odd:  kept  "], soap)
    last = part(["Content-ID: <two@a>", "Content-Transfer-Encoding: base64"], base64.encodebytes(TRICKY * 3))
    body = package([first, root, last], preamble=b"This is a MIME package.\r\n", epilogue=b"\r\nthe end\r\n")
    ctype = 'Multipart/Related; boundary="=_b0und"; type="text/xml"; start="<soap@a>"'
    result, forwarded = forward(body, ctype, [ACK_NEXT])
    new_soap = expected(ODD, ODD_REMOVED, (ACK_NEXT,)).encode()
    assert forwarded == body.replace(soap, new_soap)
    assert result.content_type == ctype and result.soap_part == new_soap
    assert result.removed == ODD_REMOVED_NAMES


def test_transport_padding_and_the_soap_part_last() -> None:
    soap = ODD.encode()
    body = (
        b"--=_b0und \t\r\n"
        + part(["Content-ID: <one@a>"], TRICKY)
        + b"\r\n--=_b0und\t\r\n"
        + part(["Content-ID: <soap@a>", "Content-Type: text/xml"], soap)
        + b"\r\n--=_b0und--   \r\n"
    )
    _, forwarded = forward(body, 'multipart/related; boundary="=_b0und"; start=soap@a', [ACK_NEXT])
    assert forwarded == body.replace(soap, expected(ODD, ODD_REMOVED, (ACK_NEXT,)).encode())


def test_a_content_length_on_the_soap_part_is_updated() -> None:
    soap = ODD.encode()
    new_soap = expected(ODD, ODD_REMOVED, (ACK_NEXT,)).encode()
    root = part(["Content-ID: <soap@a>", f"content-length:  {len(soap)} ", "Content-Type: text/xml"], soap)
    other = part(["Content-ID: <p@a>", "Content-Length: 1040"], TRICKY[:1040])
    body = package([root, other])
    _, forwarded = forward(body, 'multipart/related; boundary="=_b0und"', [ACK_NEXT])
    assert forwarded == body.replace(soap, new_soap).replace(
        f"content-length:  {len(soap)} ".encode(), f"content-length:  {len(new_soap)} ".encode()
    )
    assert b"Content-Length: 1040\r\n" in forwarded


@pytest.mark.parametrize("encoding", ["base64", "quoted-printable"])
def test_a_transfer_encoded_soap_part_is_decoded_rewritten_and_encoded_again(encoding: str) -> None:
    env = order("p@x", sync_reply=m.SyncReply())
    plain_ctype, plain = build_message(env, [attach("p@x", TRICKY)])
    soap = parse_message(plain, plain_ctype).soap
    coded = base64.encodebytes(soap) if encoding == "base64" else quopri.encodestring(soap)
    coded = coded.replace(b"\n", b"\r\n").rstrip(b"\r\n")
    root = part(["Content-ID: <soap@x>", "Content-Type: text/xml", f"Content-Transfer-Encoding: {encoding}"], coded)
    payload = part(["Content-ID: <p@x>", "Content-Type: application/octet-stream"], TRICKY)
    body = package([root, payload])
    ctype = 'multipart/related; type="text/xml"; boundary="=_b0und"; start="<soap@x>"'
    result, forwarded = forward(body, ctype, [ACK_NEXT])
    assert result.removed == (f"{{{EB}}}SyncReply", f"{{{EB}}}AckRequested")
    assert signed_view(result.soap_part) == signed_view(soap)
    # The framing and the payload are as received; the SOAP part is the new envelope, encoded again.
    head, _, tail = forwarded.partition(b"Content-Transfer-Encoding: " + encoding.encode() + b"\r\n\r\n")
    assert head == body.partition(b"Content-Transfer-Encoding: " + encoding.encode() + b"\r\n\r\n")[0]
    encoded, _, rest = tail.partition(b"\r\n--=_b0und\r\n")
    assert rest == body.partition(coded + b"\r\n--=_b0und\r\n")[2]
    decoded = binascii.a2b_base64(encoded) if encoding == "base64" else quopri.decodestring(encoded)
    assert decoded == result.soap_part
    msg = parse_message(forwarded, ctype, mode=ParseMode.LENIENT)  # a transfer-encoded SOAP part: lenient only
    try:
        assert msg.soap == result.soap_part
        assert msg.envelope.ack_requested[-1] == m.AckRequested(actor=NEXT_MSH) and msg.envelope.sync_reply is None
    finally:
        msg.close()


def test_bare_line_feeds_in_the_framing_are_forwarded_as_they_are() -> None:
    soap = ODD.encode()
    body = b"--=_b0und\nContent-ID: <soap@a>\n\n" + soap + b"\n--=_b0und\n\n" + TRICKY + b"\n--=_b0und--\n"
    _, forwarded = forward(body, 'multipart/related; boundary="=_b0und"', [ACK_NEXT])
    assert forwarded == body.replace(soap, expected(ODD, ODD_REMOVED, (ACK_NEXT,)).encode())


def test_the_source_is_read_from_its_current_position() -> None:
    ctype, body = build_message(order("p@x"), [attach("p@x", TRICKY)])
    source = io.BytesIO(b"HTTP headers already read\r\n\r\n" + body)
    source.seek(len(b"HTTP headers already read\r\n\r\n"))
    out = io.BytesIO()
    result = forward_message(source, ctype, out, insert=[ACK_NEXT])
    assert out.getvalue() == body.replace(parse_message(body, ctype).soap, result.soap_part)


@pytest.mark.slow
def test_a_large_payload_goes_through_with_bounded_memory(tmp_path: Path) -> None:
    size = 48 * 1024 * 1024
    payload = tmp_path / "payload.bin"
    block = hashlib.sha256(b"seed").digest() * 2048 + b"\r\n--=_MSH_ not a delimiter\r\n"
    with payload.open("wb") as fh:
        written = 0
        while written < size:
            fh.write(block)
            written += len(block)
    received = tmp_path / "received.mime"
    with received.open("wb") as fh:
        ctype = write_message(
            fh, order("big@x"), [AttachmentSpec("big@x", "application/octet-stream", PartBody.from_path(payload))]
        )
    forwarded = tmp_path / "forwarded.mime"
    tracemalloc.start()
    try:
        with received.open("rb") as source, forwarded.open("wb") as sink:
            result = forward_message(source, ctype, sink, insert=[ACK_NEXT])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024, f"peak {peak} bytes for a {written}-byte payload"
    assert result.removed == (f"{{{EB}}}AckRequested",)
    with forwarded.open("rb") as fh:
        msg = parse_message(fh, ctype)
        try:
            part_body = msg.payload("big@x").body  # type: ignore[union-attr]
            digest = hashlib.sha256()
            with part_body.open() as reader:
                while chunk := reader.read(1 << 20):
                    digest.update(chunk)
            assert digest.digest() == _file_digest(payload)
            assert msg.envelope.ack_requested[-1] == m.AckRequested(actor=NEXT_MSH)
        finally:
            msg.close()
    assert forwarded.stat().st_size == received.stat().st_size + len(ACK_NEXT) - _removed_length(received, ctype)


def _file_digest(path: Path) -> bytes:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.digest()


def _removed_length(path: Path, ctype: str) -> int:
    with path.open("rb") as fh:
        msg = parse_message(fh, ctype)
        msg.close()
    start = msg.soap.index(f'SOAP:actor="{NEXT_MSH}"'.encode())
    return msg.soap.index(b"/>", start) + 2 - msg.soap.rindex(b"<", 0, start)


# ----------------------------------------------------------------------------------------- the inserts


@pytest.mark.parametrize(
    ("insert", "message"),
    [
        ("<eb:AckRequested", "well-formed"),
        (f"{ACK_NEXT}{ACK_NEXT}", "junk after document element"),
        (f" {ACK_NEXT}", "one element"),
        (f"{ACK_NEXT}\n", "one element"),
        (f"<?xml version='1.0'?>{ACK_NEXT}", "one element"),
        (f"<!-- x -->{ACK_NEXT}", "one element"),
        (ACK_NEXT.replace(f' SOAP:actor="{NEXT_MSH}"', ""), "SOAP:actor None"),
        (ACK_NEXT.replace(NEXT_MSH, ACTOR_TO_PARTY_MSH), "may add only elements"),
        (ACK_NEXT.replace("xmlns:SOAP", "xmlns:other"), "well-formed"),
        (f'<Via xmlns:s="{SOAP_ENV}" s:actor="{NEXT_MSH}"/>', "no namespace of its own"),
        (f'<v:Via xmlns:v="urn:v" xmlns:s="{SOAP_ENV}" s:actor="{NEXT_MSH}"><Hop/></v:Via>', "no namespace"),
        ('<!DOCTYPE x [<!ENTITY e "e">]><x/>', "DTD"),
        ("", "no element found"),
    ],
)
def test_an_insert_that_is_not_one_next_element_is_a_value_error(insert: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        forward(ODD.encode(), "text/xml", [insert])


def test_insert_argument_errors() -> None:
    with pytest.raises(ValueError, match="one-item tuple"):
        forward(ODD.encode(), "text/xml", ACK_NEXT)
    # ebMS2 §10.1.1: never two AckRequested elements for the next MSH.
    with pytest.raises(ValueError, match="two AckRequested"):
        forward(ODD.encode(), "text/xml", [ACK_NEXT, ACK_NEXT.replace('"false"', '"true"')])
    # The checks come before anything is read or written.
    sink = io.BytesIO()
    with pytest.raises(ValueError):
        forward_message(io.BytesIO(b"not even XML"), "text/xml", sink, insert=["<x/>"])
    assert sink.getvalue() == b""


# -------------------------------------------------------------------------------------- hostile input

NO_HEADER = f'<s:Envelope xmlns:s="{SOAP_ENV}"><s:Body/></s:Envelope>'


@pytest.mark.parametrize(
    ("body", "content_type", "error", "message"),
    [
        (NO_HEADER.encode(), "text/xml", EnvelopeError, "no SOAP Header"),
        (b"<x:Envelope xmlns:x='urn:not-soap'><x:Header/></x:Envelope>", "text/xml", EnvelopeError, "not a SOAP"),
        (b"not XML at all", "text/xml", EnvelopeError, "not well-formed"),
        (b"", "text/xml", EnvelopeError, "not well-formed"),
        (ODD.encode()[:-200], "text/xml", EnvelopeError, "not well-formed"),
        (b'<!DOCTYPE s [<!ENTITY x "y">]>' + NO_HEADER.encode(), "text/xml", EnvelopeError, "DTD"),
        (
            b'<!DOCTYPE s SYSTEM "file:///etc/passwd">' + NO_HEADER.encode(),
            "text/xml",
            EnvelopeError,
            "DTD",
        ),
        (ODD.replace("<e:Action>a<", "<e:Action>&xxe;<").encode(), "text/xml", EnvelopeError, "undefined entity"),
        (ODD.replace("\t<S:Body>", "\t<S:Header/><S:Body>").encode(), "text/xml", EnvelopeError, "two Header"),
        (b"\xff\xfe\x00\x00<\x00\x00\x00", "text/xml", EnvelopeError, "UTF-32"),
        (b"\x4c\x6f\xa7\x94\x93", "text/xml", EnvelopeError, "EBCDIC"),
        (ODD.encode(), "text/xml; charset=base64", EnvelopeError, "not a supported text encoding"),
        (ODD.encode(), "text/xml; charset=shift_jis", EnvelopeError, "cannot be read in its encoding"),
        (ODD.encode(), "application/json", MimeProblemError, "neither multipart/related nor text/xml"),
        (ODD.encode(), "", MimeProblemError, "neither multipart/related nor text/xml"),
        (ODD.encode(), "multipart/related", MimeProblemError, "no boundary"),
        (ODD.encode(), "multipart/related; boundary=nowhere", MimeProblemError, "no MIME part found"),
    ],
)
def test_hostile_bodies_are_refused_with_an_ebms_error(
    body: bytes, content_type: str, error: type[EbmsError], message: str
) -> None:
    with pytest.raises(error, match=message) as exc:
        forward(body, content_type, [ACK_NEXT])
    assert exc.value.description  # readable, with an ebMS errorCode
    assert exc.value.error_code in (ErrorCode.OTHER_XML, ErrorCode.MIME_PROBLEM)


def _package() -> tuple[str, bytes, bytes]:
    ctype, body = build_message(order("p@x"), [attach("p@x", TRICKY)], boundary="=_pkg")
    return ctype, body, parse_message(body, ctype).soap


@pytest.mark.parametrize(
    "cut", ["in the SOAP part", "in the payload headers", "in the payload", "before the close delimiter"]
)
def test_a_truncated_package_is_refused(cut: str) -> None:
    ctype, body, soap = _package()
    ends = {
        "in the SOAP part": body.index(soap) + len(soap) // 2,
        "in the payload headers": body.index(b"Content-ID: <p@x>") + 5,
        "in the payload": body.index(TRICKY) + 100,
        "before the close delimiter": len(body) - len(b"\r\n--=_pkg--\r\n"),
    }
    with pytest.raises(EbmsError, match=r"truncated|not well-formed") as exc:
        forward(body[: ends[cut]], ctype, [ACK_NEXT])
    assert exc.value.error_code in (ErrorCode.MIME_PROBLEM, ErrorCode.OTHER_XML)


def test_an_unterminated_package_goes_through_when_allowed() -> None:
    ctype, body, _ = _package()
    cut = body[: -len(b"\r\n--=_pkg--\r\n")]
    result, forwarded = forward(cut, ctype, [ACK_NEXT], allow_unterminated=True)
    assert forwarded.endswith(TRICKY) and result.removed == (f"{{{EB}}}AckRequested",)


def test_package_level_errors() -> None:
    ctype, body, soap = _package()
    with pytest.raises(MimeProblemError, match="names no part"):
        forward(body, ctype.replace("ebxml-envelope@msh", "other@msh"), [ACK_NEXT])
    with pytest.raises(MimeProblemError, match="larger than 100 bytes"):
        forward(body, ctype, limits=MimeLimits(max_soap_part_bytes=100))
    with pytest.raises(EnvelopeError, match="over the limit of 100 bytes"):
        forward(soap, "text/xml", limits=MimeLimits(max_soap_part_bytes=100))
    with pytest.raises(MimeProblemError, match="more than 1 parts"):
        forward(body, ctype, limits=MimeLimits(max_parts=1))
    with pytest.raises(MimeProblemError, match="part headers longer"):
        forward(
            body.replace(b"Content-ID: <p@x>", b"X-Big: " + b"y" * 300 + b"\r\nContent-ID: <p@x>"),
            ctype,
            limits=MimeLimits(max_header_bytes=200),
        )


def test_a_removal_that_would_make_a_delimiter_is_refused() -> None:
    """A sender can place a nextMSH element so that cutting it joins a line break and the boundary."""
    trap = f'\n<h:X xmlns:h="urn:h" xmlns:s="{SOAP_ENV}" s:actor="{NEXT_MSH}"/>--=_b0und--'
    soap = ODD.replace(HEADER_END, f"<h:Y xmlns:h='urn:h'><![CDATA[{trap}]]></h:Y>{HEADER_END}").encode()
    # In CDATA it is text, not an element: nothing to remove, the package goes through as it is.
    body = package([part(["Content-Type: text/xml"], soap)])
    forward(body, 'multipart/related; boundary="=_b0und"')
    soap = ODD.replace(HEADER_END, f"{trap}{HEADER_END}").encode()
    body = package([part(["Content-Type: text/xml"], soap)])
    with pytest.raises(MimeProblemError, match="boundary delimiter"):
        forward(body, 'multipart/related; boundary="=_b0und"')


def test_hostile_bodies_never_raise_anything_else() -> None:
    ctype, body, soap = _package()
    samples = [body[:n] for n in range(0, len(body), 97)] + [soap[:n] for n in range(0, len(soap), 53)]
    for sample in samples:
        for content_type in (ctype, "text/xml"):
            try:
                forward(sample, content_type, [ACK_NEXT])
            except EbmsError as exc:
                assert exc.description
