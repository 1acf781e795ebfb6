"""What can still be read of a refused message: the envelope field by field, the file step by step, the
reply address the endpoint salvages."""

from __future__ import annotations

import re
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from msh.ebms import model as m
from msh.ebms.envelope import read_envelope, salvage_envelope, serialise_envelope
from msh.ebms.envelope.salvage import SalvagedHeader, SalvagedParty
from msh.ebms.inspect import summarise, summarise_salvage
from msh.ebms.message import EbxmlMessage, ParseMode, read_message_file
from msh.ebms.mime.limits import CHUNK
from msh.ebms.salvage import Salvage, find_envelope, salvage_message_file, salvage_reply_address
from msh.errors import EbmsError
from msh.safexml import parse_xml
from tests.support.strategies import envelopes
from tests.unit.codec.test_envelope import ACK_REQUESTED, HEADER, SYNC_REPLY, _envelope

SAMPLE = Path(__file__).resolve().parents[3] / "samples" / "messages" / "order-request.http"


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(envelopes)
def test_the_salvage_of_a_readable_envelope_says_what_the_reader_says(envelope: m.Envelope) -> None:
    # The two readers cannot drift apart: on any envelope the full reader takes, the field-by-field one
    # gives the same summary.
    soap = serialise_envelope(envelope)
    whole = summarise(EbxmlMessage(envelope, soap, (), "text/xml"))
    salvaged = summarise_salvage(Salvage((), "text/xml", salvaged=salvage_envelope(parse_xml(soap))))
    assert salvaged.pop("reading") == []
    assert salvaged == whole


def test_each_header_field_is_read_as_written_and_each_element_on_its_own() -> None:
    header = (
        HEADER.replace("<eb:CPAId>cpa</eb:CPAId>", "<eb:CPAId> </eb:CPAId>")
        .replace("2026-01-01T00:00:00Z", "ENTRYDATE")
        .replace("<eb:Action>a</eb:Action>", "")
        .replace('<eb:PartyId eb:type="t">B</eb:PartyId>', '<eb:PartyId type="">B</eb:PartyId><eb:Role>R</eb:Role>')
        .replace(
            "</eb:MessageData>",
            "<eb:RefToMessageId>r1</eb:RefToMessageId><eb:RefToMessageId>r2</eb:RefToMessageId>"
            "<eb:TimeToLive>2026-01-02T00:00:00+00:00</eb:TimeToLive></eb:MessageData><eb:DuplicateElimination/>",
        )
    )
    xml = _envelope(header + ACK_REQUESTED.replace('"false"', '"maybe"') + SYNC_REPLY)
    root = parse_xml(xml)
    with pytest.raises(EbmsError):
        read_envelope(root, lenient=True)
    salvaged = salvage_envelope(root)
    assert salvaged.message_header == SalvagedHeader(
        from_party=SalvagedParty((("A", "t"),)),
        to_party=SalvagedParty((("B", ""),), "R"),
        cpa_id="",
        conversation_id="c",
        service="s",
        action=None,
        message_id="m",
        timestamp="ENTRYDATE",
        ref_to_message_id="r2",  # the last one, as the lenient reader takes it
        time_to_live="2026-01-02T00:00:00Z",
        duplicate_elimination=True,
    )
    # The AckRequested its reader refuses is left out, and why is said; the SyncReply is read.
    assert salvaged.ack_requested == () and salvaged.sync_reply is not None
    assert salvaged.present == {"MessageHeader", "AckRequested", "SyncReply"}
    [problem] = salvaged.problems
    assert problem.location == "//Header/AckRequested/@signed" and "xsd:boolean" in problem.description


def test_what_is_not_an_envelope_salvages_nothing() -> None:
    assert salvage_envelope(parse_xml(b"<Order/>")) == salvage_envelope(parse_xml(b"<a><b/></a>"))
    assert salvage_envelope(parse_xml(b"<Order/>")).message_header is None


# --- message files, step by step (the project's sample capture, changed) ------------------------------


def changed_sample(tmp_path: Path, name: str, *changes: tuple[bytes, bytes]) -> Path:
    data = SAMPLE.read_bytes()
    for old, new in changes:
        assert old in data, old
        data = data.replace(old, new, 1)
    path = tmp_path / name
    path.write_bytes(data)
    return path


SCAN_PART = re.compile(rb"--MSH-demo-boundary-1\r\nContent-ID: <scan@a\.example>.*?(?=--MSH-demo-boundary-1--)", re.S)


def test_a_refused_header_is_read_field_by_field_with_the_payloads(tmp_path: Path) -> None:
    path = changed_sample(tmp_path, "bad-time.http", (b"2026-11-01T09:30:00Z", b"yesterday"))
    salvage = salvage_message_file(path)
    assert salvage.steps == (
        'file: HTTP capture with 4 headers, Content-Type multipart/related; type="text/xml"; '
        'boundary="MSH-demo-boundary-1"; start="<soap@a.example>"',
        "MIME package: 3 parts, the SOAP part <soap@a.example> and 2 payloads",
        "ebXML header: refused at //Header/MessageHeader/MessageData/Timestamp ('yesterday' is not an xsd:dateTime "
        "(expected e.g. 2002-02-21T12:00:00Z)); what follows was read field by field, as written",
    )
    assert salvage.envelope is None and salvage.salvaged is not None
    header = salvage.salvaged.message_header
    assert header is not None
    assert (header.action, header.message_id, header.timestamp) == ("NewOrder", "order-0001@a.example", "yesterday")
    assert [(p.content_id, p.size) for p in salvage.payloads] == [("order@a.example", 147), ("scan@a.example", 4096)]
    assert salvage.salvaged.sync_reply is not None and len(salvage.salvaged.ack_requested) == 1


def test_an_envelope_that_is_not_xml_says_where_in_the_part_and_in_the_file(tmp_path: Path) -> None:
    path = changed_sample(tmp_path, "broken.http", (b"</eb:Action>", b"</eb:Acton>"))
    salvage = salvage_message_file(path)
    step = salvage.steps[-1]
    column = SAMPLE.read_bytes().splitlines()[12].index(b"</eb:Action>") + len(b"</eb:Acton>") + 1  # after its ">"
    assert step.startswith(f"SOAP envelope: not well-formed XML at line 2, column {column} (line 13 of the file): ")
    assert "Opening and ending tag mismatch" in step
    assert salvage.envelope is None and salvage.salvaged is None
    assert [p.content_id for p in salvage.payloads] == ["order@a.example", "scan@a.example"]


def test_a_message_refused_after_its_envelope_was_read_shows_it_whole(tmp_path: Path) -> None:
    data = SCAN_PART.sub(b"", SAMPLE.read_bytes())
    path = tmp_path / "no-scan.http"
    path.write_bytes(data)
    with pytest.raises(EbmsError, match="no part with that Content-ID"):
        read_message_file(path, mode=ParseMode.LENIENT)
    salvage = salvage_message_file(path)
    assert salvage.steps[1:] == (
        "MIME package: 2 parts, the SOAP part <soap@a.example> and 1 payload",
        "ebXML elements: all read",
    )
    assert salvage.envelope == read_message_file(SAMPLE, mode=ParseMode.STRICT).envelope


def test_an_unreadable_package_is_searched_for_its_envelope(tmp_path: Path) -> None:
    path = changed_sample(
        tmp_path, "png.http", (b'Content-Type: text/xml; charset="UTF-8"', b"Content-Type: image/png")
    )
    salvage = salvage_message_file(path)
    assert salvage.steps[1].startswith(
        "MIME package: cannot be read at cid:soap@a.example (the SOAP part is image/png, not text/xml"
    )
    assert salvage.steps[2:] == (
        "a SOAP envelope was found in the bytes and read from there",
        "ebXML elements: all read",
    )
    assert salvage.envelope is not None and salvage.payloads == ()


def test_a_broken_chunked_body_is_searched_for_its_envelope(tmp_path: Path) -> None:
    path = changed_sample(
        tmp_path, "chunks.http", (b"\r\n\r\n--MSH", b"\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n--MSH")
    )
    salvage = salvage_message_file(path)
    assert salvage.steps[0] == (
        "headers: bad chunk size 'zz' in a chunked HTTP body; the whole file was searched for a SOAP envelope"
    )
    assert salvage.envelope is not None


def test_a_file_without_an_envelope_says_so(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"just some notes about ebXML\n")
    assert salvage_message_file(path).steps == (
        "file: a body without headers (its content type is sniffed)",
        "body: the content is neither a MIME package nor a SOAP envelope; its bytes were searched for one",
        "no SOAP envelope found: nothing more can be read",
    )


# --- the endpoint's reply address (ebMS2 §4.2.4.2), shared with the runtime ---------------------------


def test_the_reply_address_is_salvaged_from_a_raw_body() -> None:
    body = SAMPLE.read_bytes().replace(b"2026-11-01T09:30:00Z", b"yesterday")
    address = salvage_reply_address(body)
    assert address is not None and address.message_id == "order-0001@a.example" and address.cpa_id == "cpa-demo-a-b"
    envelope = find_envelope(body)
    assert envelope is not None and envelope.startswith(b"<SOAP:Envelope") and envelope.endswith(b"</SOAP:Envelope>")
    assert salvage_reply_address(body.replace(b"<eb:CPAId>cpa-demo-a-b</eb:CPAId>", b"")) is None
    assert salvage_reply_address(b"--x\r\n\r\nno envelope here") is None
    assert find_envelope(b"<SOAP:Envelope>never closed") is None


def test_a_header_dump_of_a_bare_envelope_that_is_not_xml(tmp_path: Path) -> None:
    path = tmp_path / "dump.txt"
    path.write_bytes(
        b'Content-Type:text/xml\r\nSOAPAction:ebXML\r\n<SOAP:Envelope xmlns:SOAP="http://schemas.xmlsoap.org/soap/'
        b'envelope/">\n  <a>\n'
    )
    assert salvage_message_file(path).steps == (
        "file: 2 header lines without a request line, Content-Type text/xml",
        "SOAP envelope: not well-formed XML at line 3, column 1 (line 5 of the file): "
        "Premature end of data in tag a line 2",
    )


# --- a large capture is read with bounded memory ---------------------------------------------------------

MIB = 1 << 20
BIG = 64 * MIB
BIG_PART = b"--MSH-demo-boundary-1\r\nContent-ID: <big@a.example>\r\nContent-Type: application/octet-stream\r\n\r\n"
CLOSE = b"--MSH-demo-boundary-1--"


def _split_sample(*changes: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
    """The sample's header lines (without Content-Length, which a changed body would contradict) and its
    body, each change applied to the body."""
    head, _, body = SAMPLE.read_bytes().partition(b"\r\n\r\n")
    for old, new in changes:
        assert old in body, old
        body = body.replace(old, new, 1)
    lines = [h for h in head.split(b"\r\n") if not h.lower().startswith(b"content-length")]
    return b"\r\n".join(lines), body


def _write_large(path: Path, head: bytes, before: bytes, after: bytes, *, chunked: bool = False) -> None:
    """``head``, an empty line, then a body of ``before``, over ``BIG`` bytes of text lines and ``after``,
    written a MiB at a time (chunk by chunk when ``chunked``): never built in memory."""
    block = (b"0123456789abcdef" * 4 + b"\r\n") * 16384  # 66 bytes a line, about 1 MiB
    with path.open("wb") as out:
        out.write(head + (b"\r\nTransfer-Encoding: chunked" if chunked else b"") + b"\r\n\r\n")

        def emit(data: bytes) -> None:
            out.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked and data else data)

        emit(before)
        for _ in range(BIG // len(block) + 1):
            emit(block)
        emit(after)
        if chunked:
            out.write(b"0\r\n\r\n")


def _large_manifest_miss(path: Path, *, chunked: bool = False) -> None:
    """The sample with its scan part replaced by a large part of another Content-ID: the Manifest's
    cid:scan reference names no part, so the message is refused whole and salvaged."""
    head, body = _split_sample()
    before = SCAN_PART.sub(b"", body).replace(CLOSE, BIG_PART, 1)
    _write_large(path, head, before, b"\r\n" + CLOSE + b"\r\n", chunked=chunked)


def _large_unterminated(path: Path) -> None:
    """The sample with a large last part and no closing delimiter."""
    head, body = _split_sample()
    _write_large(path, head, body.replace(CLOSE, BIG_PART, 1).rsplit(b"\r\n", 1)[0] + b"\r\n", b"")


def _large_not_xml(path: Path) -> None:
    """The sample whose SOAP part is not well-formed, with a large payload."""
    head, body = _split_sample((b"</eb:Action>", b"</eb:Acton>"))
    _write_large(path, head, body.replace(CLOSE, BIG_PART, 1), b"\r\n" + CLOSE + b"\r\n")


def _large_not_mime(path: Path) -> None:
    """The sample's package sent as application/octet-stream, followed by a large tail."""
    head, body = _split_sample()
    head = re.sub(rb"Content-Type: [^\r\n]*", b"Content-Type: application/octet-stream", head)
    _write_large(path, head, body, b"")


def _large_broken_chunks(path: Path) -> None:
    """A capture whose headers say chunked over a body that is not in chunked framing at all."""
    head, body = _split_sample()
    _write_large(path, head + b"\r\nTransfer-Encoding: chunked", b"zz\r\n" + body, b"")


def _large_bare_envelope(path: Path) -> None:
    """A bare envelope far over the size the XML reader takes."""
    head, _ = _split_sample()
    head = re.sub(rb"Content-Type: [^\r\n]*", b"Content-Type: text/xml", head)
    _write_large(path, head, b'<SOAP:Envelope xmlns:SOAP="http://schemas.xmlsoap.org/soap/envelope/"><!--', b"-->")


_LINE_12 = SAMPLE.read_bytes().splitlines()[12]
_LARGE = {
    "manifest": (
        _large_manifest_miss,
        ("MIME package: 3 parts, the SOAP part <soap@a.example> and 2 payloads", "ebXML elements: all read"),
    ),
    "unterminated": (
        _large_unterminated,
        ("MIME package: 4 parts, the SOAP part <soap@a.example> and 3 payloads", "ebXML elements: all read"),
    ),
    "chunked": (
        lambda path: _large_manifest_miss(path, chunked=True),
        ("MIME package: 3 parts, the SOAP part <soap@a.example> and 2 payloads", "ebXML elements: all read"),
    ),
    "not-xml": (
        _large_not_xml,
        (
            "MIME package: 4 parts, the SOAP part <soap@a.example> and 3 payloads",
            f"SOAP envelope: not well-formed XML at line 2, column {_LINE_12.index(b'</eb:Action>') + 12} "
            "(line 12 of the file): Opening and ending tag mismatch: Action line 2 and Acton",
        ),
    ),
    "not-mime": (
        _large_not_mime,
        (
            "body: Content-Type application/octet-stream is neither a MIME package nor a SOAP envelope; its bytes "
            "were searched for one",
            "a SOAP envelope was found in the bytes and read from there",
            "ebXML elements: all read",
        ),
    ),
    "bare-too-large": (
        _large_bare_envelope,
        ("SOAP envelope is {body} bytes, over the limit of 16777216 bytes",),
    ),
    "broken-chunks": (
        _large_broken_chunks,
        (
            "a SOAP envelope was found in the bytes and read from there",
            "ebXML elements: all read",
        ),
    ),
}


@pytest.mark.parametrize("case", list(_LARGE))
def test_a_large_capture_is_salvaged_with_bounded_memory(tmp_path: Path, case: str) -> None:
    """Salvaging a capture of 64 MiB and more holds a bounded part of it at a time, whatever step stops.

    The peak of Python's allocations (tracemalloc) during the call stays under 16 MiB: the header block,
    the first MiBs searched for an envelope, the package reader's buffer and the in-memory start of the
    spooled parts. tracemalloc does not see lxml's allocations in C, but the XML parsed is the SOAP
    envelope alone (a few KiB here), never the payload.
    """
    write, steps = _LARGE[case]
    path = tmp_path / f"{case}.http"
    write(path)
    size = path.stat().st_size
    assert size > BIG
    with path.open("rb") as file:
        body = size - file.read(4096).index(b"\r\n\r\n") - 4
    try:
        tracemalloc.start()
        try:
            salvage = salvage_message_file(path)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        path.unlink()
    assert salvage.steps[-len(steps) :] == tuple(step.format(body=body) for step in steps), salvage.steps
    assert peak < 16 * MIB, f"{peak / MIB:.1f} MiB"
    if case in ("manifest", "chunked", "not-xml", "unterminated"):
        assert max(p.size for p in salvage.payloads) > BIG
    if case == "chunked":
        assert salvage.steps[0].endswith("; the body is de-chunked")
    if case == "broken-chunks":
        assert salvage.steps[0] == (
            "headers: bad chunk size 'zz' in a chunked HTTP body; the whole file was searched for a SOAP envelope"
        )


@pytest.mark.parametrize("offset", [CHUNK - 10, CHUNK, CHUNK + 1, 3 * CHUNK - 3])
def test_the_line_in_the_file_is_counted_across_the_pieces_it_is_read_in(tmp_path: Path, offset: int) -> None:
    # The SOAP part is looked for in the file a piece at a time: wherever it starts, the line reported is
    # the one of its first occurrence in the file, as if the file were searched whole.
    soap = b'<SOAP:Envelope xmlns:SOAP="http://schemas.xmlsoap.org/soap/envelope/">\n  <a>\n'
    head = b"POST /msh HTTP/1.1\r\nContent-Type: text/xml\r\n"
    lines, rest = divmod(offset - len(head) - 2, 100)
    pad = [b"X-Pad: " + b"x" * 91 + b"\r\n"] * (lines - 1) + [b"X-Pad: " + b"x" * (91 + rest) + b"\r\n"]
    data = head + b"".join(pad) + b"\r\n" + soap
    assert data.find(soap) == offset
    path = tmp_path / "padded.http"
    path.write_bytes(data)
    step = salvage_message_file(path).steps[-1]
    where = re.match(r"SOAP envelope: not well-formed XML at line (\d+), column \d+ \(line (\d+) of the file\)", step)
    assert where is not None, step
    assert int(where[2]) == data.count(b"\n", 0, offset) + int(where[1])
