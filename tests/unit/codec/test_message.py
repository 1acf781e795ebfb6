"""Whole messages: parse/build, strict vs lenient, hostile inputs, error messages, raw captures."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from msh.ebms import model as m
from msh.ebms.envelope import serialise_envelope
from msh.ebms.errorlist import ACTION_MESSAGE_ERROR, error_message, soap_fault
from msh.ebms.message import (
    FileForm,
    ParseMode,
    build_message,
    parse_message,
    read_message_file,
    soap_action_issue,
    split_http_message,
    split_message_file,
    write_message,
)
from msh.ebms.mime import AttachmentSpec, PartBody
from msh.ebms.namespaces import SERVICE_MSH
from msh.ebms.schema import validate_envelope
from msh.errors import EbmsError, EnvelopeError, ErrorCode, Issue, MimeProblemError, Severity
from msh.safexml import parse_xml
from tests.unit.codec.test_envelope import minimal_header

T0 = datetime(2026, 11, 1, 9, 30, tzinfo=UTC)


def order(*cids: str) -> m.Envelope:
    return m.Envelope(
        message_header=minimal_header(duplicate_elimination=True),
        ack_requested=(m.AckRequested(),),
        manifest=m.Manifest(tuple(m.Reference(f"cid:{c}") for c in cids)) if cids else None,
    )


def attach(cid: str, data: bytes, encoding: str = "binary") -> AttachmentSpec:
    return AttachmentSpec(cid, "application/octet-stream", PartBody.from_bytes(data), transfer_encoding=encoding)


@pytest.mark.parametrize("encoding", ["binary", "8bit", "base64", "quoted-printable"])
def test_multipart_round_trip(encoding: str) -> None:
    data = bytes(range(256)) * 40 if encoding in ("binary", "base64") else "Zoë\r\nCafé\r\n".encode() * 50
    env = order("one@x", "two@x")
    ctype, body = build_message(env, [attach("one@x", data, encoding), attach("two@x", b"", encoding)])
    assert ctype.startswith("multipart/related") and 'type="text/xml"' in ctype
    msg = parse_message(body, ctype)
    try:
        assert msg.envelope == env
        assert msg.warnings == ()
        assert msg.payload("cid:one@x") is not None
        assert msg.payload("<one@x>").body.read_bytes() == data  # type: ignore[union-attr]
        assert msg.payload("two@x").body.read_bytes() == b""  # type: ignore[union-attr]
    finally:
        msg.close()


def test_bare_envelope_round_trip() -> None:
    env = m.Envelope(message_header=minimal_header(), acknowledgments=(m.Acknowledgment(T0, "mid-0"),))
    ctype, body = build_message(env)
    assert ctype.startswith("text/xml")
    msg = parse_message(io.BytesIO(body), ctype)
    assert msg.envelope == env and msg.payloads == () and msg.soap == body


def test_write_message_streams_to_a_file(tmp_path: pytest.TempPathFactory) -> None:
    src = tmp_path / "payload.bin"  # type: ignore[operator]
    src.write_bytes(b"x" * 3_000_000)
    out = tmp_path / "message.mime"  # type: ignore[operator]
    with out.open("wb") as fh:
        ctype = write_message(
            fh, order("big@x"), [AttachmentSpec("big@x", "application/octet-stream", PartBody.from_path(src))]
        )
    with out.open("rb") as fh:
        msg = parse_message(fh, ctype)
    try:
        assert msg.payload("big@x").body.size == 3_000_000  # type: ignore[union-attr]
    finally:
        msg.close()


def test_build_refuses_dangling_manifest_reference() -> None:
    with pytest.raises(ValueError, match="no attachment"):
        build_message(order("missing@x"), [attach("other@x", b"1")])


@pytest.mark.parametrize("mode", list(ParseMode))
def test_dangling_cid_is_a_mime_problem_error_in_both_modes(mode: ParseMode) -> None:
    """ebMS2 §3.2.2: a cid: reference to a part the package does not hold is MimeProblem, severity Error;
    lenient mode does not let it through either (the payload the sender meant is not there)."""
    ctype, body = build_message(order("a@x", "c@x"), [attach("a@x", b"1"), attach("c@x", b"2")])
    body = body.replace(b"<a@x>", b"<b@x>")
    with pytest.raises(MimeProblemError) as exc:
        parse_message(body, ctype, mode=mode)
    assert exc.value.error_code is ErrorCode.MIME_PROBLEM
    assert exc.value.severity is Severity.ERROR
    assert exc.value.location == "cid:a@x"
    assert "no part with that Content-ID" in exc.value.description


@pytest.mark.parametrize("mode", list(ParseMode))
def test_a_bare_envelope_whose_manifest_names_a_part_is_refused(mode: ParseMode) -> None:
    """Sent as text/xml, a message has no parts at all: a cid: reference in its Manifest names nothing."""
    soap = serialise_envelope(order("gone@x"))
    with pytest.raises(MimeProblemError) as exc:
        parse_message(soap, "text/xml", mode=mode)
    assert (exc.value.severity, exc.value.location) == (Severity.ERROR, "cid:gone@x")
    # A reference that is not a cid: URI names no part of the package: not checked (ebMS2 §3.2.2).
    external = m.Envelope(
        message_header=minimal_header(), manifest=m.Manifest((m.Reference("https://example.com/po.xml"),))
    )
    parse_message(serialise_envelope(external), "text/xml", mode=mode).close()


def test_schema_invalid_is_rejected_strictly_with_location() -> None:
    _, body = build_message(order())
    broken = body.replace(b"<eb:CPAId>cpa-1</eb:CPAId>", b"")
    with pytest.raises(EbmsError) as exc:
        parse_message(broken, "text/xml")
    assert exc.value.error_code is ErrorCode.OTHER_XML
    assert "MessageHeader" in exc.value.location
    with pytest.raises(EbmsError) as exc2:  # lenient cannot build a header without CPAId either
        parse_message(broken, "text/xml", mode=ParseMode.LENIENT)
    assert exc2.value.location == "//Header/MessageHeader/CPAId"


def test_missing_message_header() -> None:
    body = b'<S:Envelope xmlns:S="http://schemas.xmlsoap.org/soap/envelope/"><S:Body/></S:Envelope>'
    with pytest.raises(EbmsError) as exc:
        parse_message(body, "text/xml")
    assert exc.value.location == "//Header/MessageHeader"
    assert parse_message(body, "text/xml", mode=ParseMode.LENIENT).warnings


def test_soap_part_charset_is_honoured() -> None:
    env = m.Envelope(message_header=minimal_header(descriptions=(m.Description("Façade", "fr"),)))
    _, soap = build_message(env)
    latin = soap.replace(b"<?xml version='1.0' encoding='UTF-8'?>", b"").decode().encode("iso-8859-1")
    msg = parse_message(latin, "text/xml; charset=ISO-8859-1")
    assert msg.envelope.message_header.descriptions[0].text == "Façade"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "charset",
    [
        "undefined",
        "punycode",
        "unicode_escape",
        "raw_unicode_escape",
        "idna",
        "charmap",
        "base64",
        "rot13",
        "hex",
        "no-such-charset",
        "utf\x00-8",
        "x" * 200,
    ],
)
@pytest.mark.parametrize("packaging", ["bare", "multipart"])
def test_a_charset_that_names_no_text_encoding_is_a_mime_problem(charset: str, packaging: str) -> None:
    env = m.Envelope(message_header=minimal_header())
    if packaging == "bare":
        _, soap = build_message(env)
        body, ctype = soap, f'text/xml; charset="{charset}"'
    else:
        ctype, body = build_message(env, [attach("p@x", b"payload")])
        body = body.replace(b'charset="UTF-8"', f'charset="{charset}"'.encode("latin-1"), 1)
    for mode in ParseMode:
        with pytest.raises(MimeProblemError) as exc:
            parse_message(body, ctype, mode=mode)
        assert exc.value.error_code is ErrorCode.MIME_PROBLEM
        assert "charset" in exc.value.description


@pytest.mark.parametrize(
    ("body", "ctype", "error"),
    [
        (b"\x00\xffgarbage" * 10, "text/xml", EnvelopeError),
        (b"<a><b></a>", "text/xml", EnvelopeError),
        (b"<soap/>", "application/json", MimeProblemError),
        (b"{}", None, EnvelopeError),
        (b"--x\r\nContent-Type: text/xml\r\n\r\n<a/>", 'multipart/related; boundary="x"', MimeProblemError),
        (b"--y\r\n\r\n<a/>\r\n--y--", 'multipart/related; boundary="x"', MimeProblemError),
    ],
    ids=["binary-garbage", "not-well-formed", "wrong-content-type", "unsniffable", "truncated-mime", "wrong-boundary"],
)
def test_bad_input_gives_clean_ebms_errors(body: bytes, ctype: str | None, error: type[EbmsError]) -> None:
    with pytest.raises(error) as exc:
        parse_message(body, ctype, mode=ParseMode.STRICT)
    assert exc.value.issues and exc.value.severity is Severity.ERROR
    # Lenient mode may get further (a truncated package is read up to its end) but still refuses.
    with pytest.raises(EbmsError):
        parse_message(body, ctype, mode=ParseMode.LENIENT)


def test_xxe_in_soap_part_is_refused() -> None:
    evil = (
        b'<?xml version="1.0"?><!DOCTYPE e [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b'<S:Envelope xmlns:S="http://schemas.xmlsoap.org/soap/envelope/"><S:Body>&x;</S:Body></S:Envelope>'
    )
    ctype, body = build_message(order("a@x"), [attach("a@x", b"1")], boundary="bnd")
    soap_start = body.index(b"<?xml")
    soap_end = body.index(b"\r\n--bnd", soap_start)
    hostile = body[:soap_start] + evil + body[soap_end:]
    with pytest.raises(EnvelopeError, match="DTD"):
        parse_message(hostile, ctype, mode=ParseMode.LENIENT)


def test_ten_thousand_tiny_parts() -> None:
    parts = b"".join(b"--b\r\nContent-ID: <p%d>\r\n\r\nx\r\n" % i for i in range(10_000))
    body = b"--b\r\nContent-ID: <s>\r\nContent-Type: text/xml\r\n\r\n<a/>\r\n" + parts + b"--b--\r\n"
    with pytest.raises(MimeProblemError) as exc:
        parse_message(body, 'multipart/related; type="text/xml"; boundary="b"; start="<s>"')
    assert "parts" in exc.value.description


def test_fifty_megabytes_of_nonsense() -> None:
    nonsense = io.BytesIO(b"\x13\x37nonsense" * (50 * 1024 * 1024 // 10))
    with pytest.raises(EbmsError):
        parse_message(nonsense, "text/xml")
    nonsense.seek(0)
    with pytest.raises(EbmsError):
        parse_message(nonsense, 'multipart/related; type="text/xml"; boundary="zz"')


def test_error_message_is_schema_valid_and_addressed_back() -> None:
    header = minimal_header()
    issues = [
        Issue(
            ErrorCode.INCONSISTENT, Severity.ERROR, "PartyId not in agreement", "//Header/MessageHeader/From/PartyId"
        ),
        Issue(ErrorCode.NOT_SUPPORTED, Severity.WARNING, "MessageOrder not supported", "//Header/MessageOrder"),
    ]
    env = error_message(issues, in_reply_to=header, message_id="err-1", timestamp=T0)
    _, body = build_message(env)
    assert validate_envelope(parse_xml(body)) == ()
    parsed = parse_message(body, "text/xml").envelope
    assert parsed.message_header is not None and parsed.error_list is not None
    assert parsed.message_header.from_party == header.to_party
    assert parsed.message_header.to_party == header.from_party
    assert parsed.message_header.service.value == SERVICE_MSH
    assert parsed.message_header.action == ACTION_MESSAGE_ERROR
    assert parsed.message_header.message_data.ref_to_message_id == header.message_id
    assert parsed.error_list.highest_severity is Severity.ERROR
    assert [e.code for e in parsed.error_list.errors] == [ErrorCode.INCONSISTENT, ErrorCode.NOT_SUPPORTED]
    assert parsed.error_list.errors[0].location == "//Header/MessageHeader/From/PartyId"


def test_error_message_from_exception() -> None:
    try:
        parse_message(b"<nope", "text/xml")
    except EbmsError as exc:
        env = soap_fault(exc)
    _, body = build_message(env)
    assert validate_envelope(parse_xml(body)) == ()
    fault = parse_message(body, "text/xml").envelope.fault
    assert fault is not None and fault.faultcode == "SOAP:Client" and "not well-formed" in fault.faultstring


def test_split_http_capture_with_chunked_body() -> None:
    raw = (
        b"POST /msh HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\n  ; charset=utf-8\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n4\r\n<a/>\r\n0\r\n\r\n"
    )
    split = split_http_message(raw)
    assert split is not None
    headers, body = split
    assert headers["content-type"] == "text/xml ; charset=utf-8"
    assert body == b"<a/>"
    assert split_http_message(b"<a/>") is None


@pytest.mark.parametrize(
    "chunks",
    [
        b"-1\r\n<a/>\r\n0\r\n\r\n",
        b"zz\r\n<a/>\r\n0\r\n\r\n",
        b"+4\r\n<a/>\r\n0\r\n\r\n",
        b"4 4\r\n<a/>\r\n0\r\n\r\n",
        b"FFFFFFFFFFFFFFFFF\r\n<a/>\r\n",
        b"ffff\r\n<a/>\r\n0\r\n\r\n",
        b"4\r\n<a/>\r\n",
        b"\r\n\r\n",
    ],
    ids=["negative", "not-hex", "signed", "space-inside", "17-digits", "longer-than-body", "no-last-chunk", "empty"],
)
def test_a_broken_chunked_capture_is_a_mime_problem(chunks: bytes) -> None:
    raw = b"POST /msh HTTP/1.1\r\nContent-Type: text/xml\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
    with pytest.raises(MimeProblemError, match="chunk"):
        split_http_message(raw)


# --- captures whose headers say chunked over a body saved de-chunked (as from the NAV network) ---------


def dechunked_capture(request_line: bool = True, *, bare: bool = False) -> tuple[bytes, bytes]:
    """A capture whose headers keep the wire's ``Transfer-Encoding: chunked`` over the body the capture tool
    saved de-chunked; returns (capture, payload)."""
    payload = b"<Order><Id>PO-7</Id></Order>"
    ctype, body = build_message(order()) if bare else build_message(order("a@x"), [attach("a@x", payload)])
    headers = [b"Content-Type: " + ctype.encode(), b"Transfer-Encoding: chunked", b'SOAPAction: "ebXML"']
    if request_line:
        return b"POST /msh HTTP/1.1\r\n" + b"\r\n".join(headers) + b"\r\n\r\n" + body, payload
    return header_dump([h.replace(b": ", b":", 1) for h in headers], body), payload


@pytest.mark.parametrize(
    ("request_line", "bare"), [(True, False), (False, False), (True, True)], ids=["http", "header-dump", "bare"]
)
def test_a_capture_saved_de_chunked_is_read_leniently_with_a_warning(
    tmp_path: pytest.TempPathFactory, request_line: bool, bare: bool
) -> None:
    capture, payload = dechunked_capture(request_line, bare=bare)
    path = tmp_path / "nav.http"  # type: ignore[operator]
    path.write_bytes(capture)
    msg = read_message_file(path, mode=ParseMode.LENIENT)
    try:
        assert msg.envelope == (order() if bare else order("a@x"))
        if not bare:
            assert msg.payload("a@x").body.read_bytes() == payload  # type: ignore[union-attr]
        first = msg.warnings[0]
        assert (first.error_code, first.severity, first.location) == (ErrorCode.MIME_PROBLEM, Severity.WARNING, "/")
        assert "not in chunked framing although Transfer-Encoding says chunked" in first.description
        assert "read as already de-chunked" in first.description
    finally:
        msg.close()
    # Strict mode refuses it, saying what to do.
    with pytest.raises(MimeProblemError) as refused:
        read_message_file(path, mode=ParseMode.STRICT)
    assert "not in chunked framing" in refused.value.description
    assert "if the capture tool saved the de-chunked body, read it in lenient mode" in refused.value.description
    if request_line:
        with pytest.raises(MimeProblemError, match="read it in lenient mode"):
            split_http_message(capture)


@pytest.mark.parametrize(
    "body",
    [b"hello, not chunked\r\n", b"--another-boundary\r\n\r\n<a/>\r\n--another-boundary--\r\n", b"\x00\x01"],
    ids=["text", "other-boundary", "binary"],
)
def test_a_body_neither_chunked_nor_the_announced_message_is_refused_in_both_modes(body: bytes) -> None:
    ctype, _ = build_message(order("a@x"), [attach("a@x", b"x")])
    capture = b"POST /msh HTTP/1.1\r\nContent-Type: " + ctype.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
    for mode in ParseMode:
        with pytest.raises(MimeProblemError, match="chunk") as refused:
            split_message_file(capture + body, mode=mode)
        assert "lenient" not in refused.value.description  # no advice that would not help


def test_a_chunked_capture_is_still_de_chunked_without_a_warning() -> None:
    ctype, body = build_message(order())
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i : i + 100]), body[i : i + 100]) for i in range(0, len(body), 100))
    capture = b"POST /msh HTTP/1.1\r\nContent-Type: " + ctype.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
    for mode in ParseMode:
        file = split_message_file(capture + chunked + b"0\r\n\r\n", mode=mode)
        assert (file.form, file.body, file.content_type, file.warnings) == (FileForm.HTTP_CAPTURE, body, ctype, ())


def test_read_message_file_forms(tmp_path: pytest.TempPathFactory) -> None:
    ctype, body = build_message(order("a@x"), [attach("a@x", b"payload")])
    http = tmp_path / "m.http"  # type: ignore[operator]
    http.write_bytes(b"POST / HTTP/1.1\r\nContent-Type: " + ctype.encode() + b"\r\n\r\n" + body)
    mime = tmp_path / "m.mime"  # type: ignore[operator]
    mime.write_bytes(b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
    bare = tmp_path / "m.xml"  # type: ignore[operator]
    bare.write_bytes(build_message(order())[1])
    headless = tmp_path / "m.msg"  # type: ignore[operator]
    headless.write_bytes(body)
    for path in (http, mime):
        msg = read_message_file(path, mode=ParseMode.STRICT)
        assert msg.payload("a@x").body.read_bytes() == b"payload"  # type: ignore[union-attr]
        msg.close()
    assert read_message_file(bare, mode=ParseMode.STRICT).envelope == order()
    with pytest.raises(MimeProblemError):
        read_message_file(headless, mode=ParseMode.STRICT)
    msg = read_message_file(headless, mode=ParseMode.LENIENT)
    assert any("sniffed" in w.description or "boundary" in w.description for w in msg.warnings)
    msg.close()


# --- the SOAPAction HTTP header (ebMS2 B.2.2, SOAP 1.1 §6.1.1) -----------------------------------------


def test_a_request_without_soapaction_is_refused_with_a_mime_problem() -> None:
    issue = soap_action_issue(None)
    assert issue is not None
    assert (issue.error_code, issue.severity) == (ErrorCode.MIME_PROBLEM, Severity.ERROR)
    assert "no SOAPAction header" in issue.description and "B.2.2" in issue.description


@pytest.mark.parametrize("value", ['"ebXML"', "ebXML", '""', "", "urn:nhs:names:services:psis/MCCI_IN010000UK13"])
def test_any_soapaction_value_is_taken(value: str) -> None:
    """ebMS2 B.2.2: the value MAY be "ebXML"; SOAP 1.1 allows a URI, "" or nothing; NHS Spine sends its
    service URI. The MSH routes on the ebXML header, never on SOAPAction."""
    assert soap_action_issue(value) is None


def header_dump(headers: list[bytes], body: bytes, eol: bytes = b"\n") -> bytes:
    """A capture saved as a header dump: header lines, no request line, no empty line before the body."""
    return b"".join(h + eol for h in headers) + body


@pytest.mark.parametrize("eol", [b"\n", b"\r\n"])
def test_read_a_header_dump_without_spaces_or_an_empty_line(tmp_path: pytest.TempPathFactory, eol: bytes) -> None:
    ctype, body = build_message(order("a@x"), [attach("a@x", b"payload")])
    assert body.startswith(b"--")  # the boundary line follows the headers directly
    # Part headers without the space too, as the same tools write them.
    body = body.replace(b"Content-ID: ", b"Content-ID:").replace(b"Content-Type: ", b"Content-Type:")
    compact = ctype.replace("; ", ";")
    dump = tmp_path / "dump.txt"  # type: ignore[operator]
    dump.write_bytes(
        header_dump(
            [b"Content-Type:" + compact.encode(), b'SOAPAction:"ebXML"', b"Content-Length:" + str(len(body)).encode()],
            body,
            eol,
        )
    )
    msg = read_message_file(dump, mode=ParseMode.STRICT)
    try:
        assert msg.content_type == compact
        assert msg.envelope == order("a@x")
        assert msg.payload("a@x").body.read_bytes() == b"payload"  # type: ignore[union-attr]
        assert msg.warnings == ()
    finally:
        msg.close()


def test_read_a_header_dump_of_a_bare_envelope_and_one_with_a_request_line(tmp_path: pytest.TempPathFactory) -> None:
    ctype, body = build_message(order())
    assert body.startswith(b"<")
    dump = tmp_path / "bare.txt"  # type: ignore[operator]
    dump.write_bytes(header_dump([b"Host:b.example", b"Content-Type:" + ctype.replace("; ", ";").encode()], body))
    assert read_message_file(dump, mode=ParseMode.STRICT).envelope == order()
    ctype, body = build_message(order("a@x"), [attach("a@x", b"x")])
    with_request = tmp_path / "request.txt"  # type: ignore[operator]
    with_request.write_bytes(header_dump([b"POST /msh HTTP/1.1", b"Content-Type:" + ctype.encode()], body))
    msg = read_message_file(with_request, mode=ParseMode.STRICT)
    assert msg.payload("a@x").body.read_bytes() == b"x"  # type: ignore[union-attr]
    msg.close()


def test_splitting_headers_keeps_the_empty_line_rule() -> None:
    # With an empty line the body starts after it, even when the body's first line looks like a header.
    split = split_http_message(b"HTTP/1.1 200 OK\r\nContent-Type:text/xml\r\n  ;charset=utf-8\r\n\r\nX: y\r\n")
    assert split == ({"content-type": "text/xml ;charset=utf-8"}, b"X: y\r\n")
    # Without one, the body starts at the first boundary or envelope line; headers alone have no body.
    assert split_http_message(b"HTTP/1.1 202 Accepted\nContent-Length:0\n") == ({"content-length": "0"}, b"")
    assert split_http_message(b"POST / HTTP/1.1\nContent-Type:text/xml\n<a/>") == (
        {"content-type": "text/xml"},
        b"<a/>",
    )


# --- text from the input in error descriptions (issue: building the reply must never fail) -------------

HOSTILE_TEXT = "bad \x00 \x01\x1b[2J \ud800 \ufffe " + "x" * 5000


def test_an_error_list_can_always_be_built_whatever_the_description_holds() -> None:
    issue = Issue(ErrorCode.MIME_PROBLEM, Severity.ERROR, HOSTILE_TEXT, f"cid:{HOSTILE_TEXT}")
    reply = error_message(
        issue,
        in_reply_to=minimal_header(),
        message_id="reply@x",
        timestamp=T0,
    )
    _, body = build_message(reply)
    parsed = parse_message(body, "text/xml").envelope.error_list
    assert parsed is not None
    error = parsed.errors[0]
    assert error.description is not None
    assert (
        "\\x00" in error.description.text and "\\x1b" in error.description.text and "\\ud800" in error.description.text
    )
    assert len(error.description.text) <= 1024 and error.description.text.endswith("...")
    assert error.location is not None and len(error.location) <= 512


def test_a_soap_fault_can_always_be_built_whatever_the_description_holds() -> None:
    _, body = build_message(soap_fault(Issue(ErrorCode.OTHER_XML, Severity.ERROR, HOSTILE_TEXT)))
    fault = parse_message(body, "text/xml").envelope.fault
    assert fault is not None and "\\x00" in fault.faultstring and len(fault.faultstring) <= 4096


# --- message files read as streams: the same verdicts as the whole-file reading -----------------------


@pytest.mark.parametrize(
    "chunks",
    [
        b"-1\r\n<a/>\r\n0\r\n\r\n",
        b"zz\r\n<a/>\r\n0\r\n\r\n",
        b"ffff\r\n<a/>\r\n0\r\n\r\n",
        b"4\r\n<a/>\r\n",
        b"\r\n\r\n",
    ],
    ids=["negative", "not-hex", "longer-than-body", "no-last-chunk", "empty"],
)
def test_a_broken_chunked_capture_file_is_a_mime_problem(tmp_path: Path, chunks: bytes) -> None:
    # RFC 9112 §7.1: chunk = chunk-size CRLF chunk-data CRLF, ended by a last chunk of size 0.
    path = tmp_path / "broken.http"
    path.write_bytes(b"POST /msh HTTP/1.1\r\nContent-Type: text/xml\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks)
    for mode in ParseMode:
        with pytest.raises(MimeProblemError, match="chunk"):
            read_message_file(path, mode=mode)


@pytest.mark.parametrize(
    ("name", "chunked"),
    [
        ("order-request.http", False),
        ("order-request.http", True),
        ("quirky-ping.http", False),
        ("quirky-ping.http", True),
        ("status-request.mime", False),
        ("acknowledgment.xml", False),
    ],
)
def test_a_message_file_read_as_a_stream_is_read_as_the_whole_file_is(tmp_path: Path, name: str, chunked: bool) -> None:
    data = (Path(__file__).resolve().parents[3] / "samples" / "messages" / name).read_bytes()
    if chunked:  # RFC 9112 §7.1
        head, _, body = data.partition(b"\r\n\r\n")
        pieces = b"".join(
            b"%x\r\n%s\r\n" % (len(body[i : i + 700]), body[i : i + 700]) for i in range(0, len(body), 700)
        )
        data = head + b"\r\nTransfer-Encoding: chunked\r\n\r\n" + pieces + b"0\r\n\r\n"
    path = tmp_path / name
    path.write_bytes(data)
    for mode in ParseMode:
        whole = split_message_file(data, mode=mode)
        try:
            expected = parse_message(whole.body, whole.content_type, mode=mode)
        except MimeProblemError as exc:
            with pytest.raises(type(exc), match=re.escape(exc.description)):
                read_message_file(path, mode=mode)
            continue
        got = read_message_file(path, mode=mode)
        try:
            assert (got.envelope, got.soap, got.content_type) == (
                expected.envelope,
                expected.soap,
                expected.content_type,
            )
            assert [p.body.read_bytes() for p in got.payloads] == [p.body.read_bytes() for p in expected.payloads]
            assert got.warnings == (*whole.warnings, *expected.warnings)
        finally:
            got.close()
            expected.close()
