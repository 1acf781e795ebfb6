"""The SOAP-with-attachments codec: round trips, chunk edges, strict errors, lenient warnings, hostility."""

from __future__ import annotations

import base64
import contextlib
import io
import quopri
import re
import tracemalloc
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msh.ebms.mime import (
    AttachmentSpec,
    MimeLimits,
    MimePackage,
    PartBody,
    build_package,
    parse_content_type,
    parse_package,
    write_package,
)
from msh.ebms.mime.reader import _parse_package
from msh.errors import ErrorCode, MimeProblemError, Severity

SOAP = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b'<SOAP:Envelope xmlns:SOAP="http://schemas.xmlsoap.org/soap/envelope/">'
    b"<SOAP:Header/><SOAP:Body/></SOAP:Envelope>"
)
ALL_BYTES = bytes(range(256)) * 4
CT = 'multipart/related; type="text/xml"; boundary="BoundarY"; start="<soap@example.com>"'
ENCODINGS = ("binary", "8bit", "base64", "quoted-printable")


def parse_chunked(
    data: bytes,
    content_type: str | None,
    *,
    chunk_size: int,
    lenient: bool = False,
    limits: MimeLimits | None = None,
) -> MimePackage:
    return _parse_package(data, content_type, lenient=lenient, limits=limits or MimeLimits(), chunk_size=chunk_size)


class Trickle(io.RawIOBase):
    """A stream that hands out at most ``step`` bytes per read, like a slow socket."""

    def __init__(self, data: bytes, step: int = 1) -> None:
        super().__init__()
        self._data = data
        self._pos = 0
        self._step = step
        self.reads = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        self.reads += 1
        n = self._step if size < 0 else min(size, self._step)
        chunk = self._data[self._pos : self._pos + n]
        self._pos += len(chunk)
        return chunk


def raw_package(
    parts: Iterable[tuple[Sequence[str], bytes]],
    *,
    boundary: str = "BoundarY",
    eol: bytes = b"\r\n",
    close: bool = True,
    preamble: bytes = b"",
) -> bytes:
    """A package written by hand (so it can be wrong in every way a partner's can)."""
    out = [preamble]
    for headers, body in parts:
        out.append(b"--" + boundary.encode() + eol)
        out.extend(h.encode() + eol for h in headers)
        out.append(eol + body + eol)
    if close:
        out.append(b"--" + boundary.encode() + b"--" + eol)
    return b"".join(out)


SOAP_HEADERS = ("Content-ID: <soap@example.com>", 'Content-Type: text/xml; charset="UTF-8"')


def att_headers(cid: str = "payload@example.com", cte: str = "binary", ctype: str = "text/plain") -> tuple[str, ...]:
    return (f"Content-ID: <{cid}>", f"Content-Type: {ctype}", f"Content-Transfer-Encoding: {cte}")


def good_raw(**kw: object) -> bytes:
    return raw_package([(SOAP_HEADERS, SOAP), (att_headers(), b"hello")], **kw)  # type: ignore[arg-type]


def descriptions(pkg: MimePackage) -> list[str]:
    return [w.description for w in pkg.warnings]


# ----------------------------------------------------------------------------------------- round trips

PAYLOADS = {
    "all-bytes": (ALL_BYTES, "application/octet-stream"),
    "empty": (b"", "application/octet-stream"),
    "utf-8": ("Grüße, 東京, emoji 🚀\r\nline two\n".encode(), "text/plain; charset=utf-8"),
    "latin-1": ("Façade, naïve, œuvre?".encode("latin-1", "replace"), "text/plain; charset=ISO-8859-1"),
    "utf-16": ("<a>ünïcödé</a>".encode("utf-16"), 'application/xml; charset="UTF-16"'),
    "crlf-edges": (b"\r\n\r\n--\r\n-\r\r\n\n", "application/octet-stream"),
    "trailing-space": (b"ends with spaces   \t", "text/plain"),
}


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_round_trip_every_payload_and_encoding(name: str, encoding: str) -> None:
    data, ctype = PAYLOADS[name]
    spec = AttachmentSpec("payload-1@example.com", ctype, PartBody.from_bytes(data), encoding)
    content_type, package = build_package(SOAP, [spec], start_id="soap@example.com")
    with parse_package(package, content_type) as pkg:
        assert pkg.warnings == ()
        assert pkg.start.content_id == "soap@example.com"
        assert pkg.start.body.read_bytes() == SOAP
        assert pkg.start.media_type == "text/xml"
        assert pkg.start.charset == "UTF-8"
        (part,) = pkg.attachments
        assert part.body.read_bytes() == data
        assert part.body.size == len(data)
        assert part.content_type == ctype
        assert part.media_type == ctype.split(";")[0]
        assert part.transfer_encoding == encoding
        assert part.header("content-transfer-encoding") == encoding
        assert parse_content_type(ctype)[1].get("charset") == part.charset


def test_round_trip_7bit_and_several_parts_in_order() -> None:
    specs = [
        AttachmentSpec("a@x", "text/plain", PartBody.from_bytes(b"seven bit\r\nonly"), "7bit"),
        AttachmentSpec("b@x", "application/octet-stream", PartBody.from_bytes(ALL_BYTES), "base64"),
        AttachmentSpec("c@x", "text/plain", PartBody.from_bytes(b""), "7bit"),
        AttachmentSpec(
            "d@x",
            "application/xml",
            PartBody.from_bytes(b"<d/>"),
            "8bit",
            headers=(("Content-Description", "the d part"),),
        ),
    ]
    content_type, package = build_package(SOAP, specs, start_id="soap@x")
    with parse_package(io.BytesIO(package), content_type) as pkg:
        assert [p.content_id for p in pkg.attachments] == ["a@x", "b@x", "c@x", "d@x"]
        assert [p.body.read_bytes() for p in pkg.attachments] == [
            b"seven bit\r\nonly",
            ALL_BYTES,
            b"",
            b"<d/>",
        ]
        assert pkg.attachments[3].header("Content-Description") == "the d part"
        assert pkg.attachments[3].headers[-1] == ("Content-Description", "the d part")
        assert len(pkg.parts) == 5


def test_writer_rejects_8bit_content_in_a_7bit_part() -> None:
    spec = AttachmentSpec("a@x", "text/plain", PartBody.from_bytes("é".encode()), "7bit")
    with pytest.raises(ValueError, match="not 7-bit"):
        build_package(SOAP, [spec], start_id="s@x")


def test_content_type_returned_by_the_writer() -> None:
    content_type, package = build_package(SOAP, [], start_id="<soap@x>", boundary="b-1")
    media, params = parse_content_type(content_type)
    assert media == "multipart/related"
    assert params == {"type": "text/xml", "boundary": "b-1", "start": "<soap@x>"}
    assert package.startswith(b"--b-1\r\nContent-ID: <soap@x>\r\n")
    assert package.endswith(b"\r\n--b-1--\r\n")


def test_generated_boundaries_are_random_and_long() -> None:
    first, _ = build_package(SOAP, [], start_id="s@x")
    second, _ = build_package(SOAP, [], start_id="s@x")
    b1, b2 = parse_content_type(first)[1]["boundary"], parse_content_type(second)[1]["boundary"]
    assert b1 != b2
    assert len(b1) >= 32
    assert re.fullmatch(r"[0-9A-Za-z'()+_,\-./:=?]+", b1)


def test_encoded_lines_are_at_most_76_characters() -> None:
    data = ALL_BYTES * 20
    for encoding in ("base64", "quoted-printable"):
        spec = AttachmentSpec("a@x", "application/octet-stream", PartBody.from_bytes(data), encoding)
        _, package = build_package(SOAP, [spec], start_id="s@x", boundary="bnd")
        body = package.split(b"Content-Transfer-Encoding: " + encoding.encode() + b"\r\n\r\n")[1]
        body = body.split(b"\r\n--bnd--")[0]
        lines = body.split(b"\r\n")
        assert max(len(line) for line in lines) <= 76
        assert b"\n" not in body.replace(b"\r\n", b"")


@pytest.mark.parametrize("lenient", [False, True])
@pytest.mark.parametrize("encoding", ["base64", "quoted-printable"])
def test_a_transfer_encoded_soap_part_is_decoded_in_both_modes_without_a_warning(encoding: str, lenient: bool) -> None:
    # ebMS2 §4.1.3: with "a transfer encoding (e.g. base64) ... used for the SOAP Envelope or payload objects, the
    # signature generation MUST be executed before the encoding"; B.3.2: over SMTP, 8-bit parts MUST be encoded.
    soap = SOAP.replace(b"<SOAP:Body/>", "<SOAP:Body><!-- 8-bit: é --></SOAP:Body>".encode()).replace(b"\n", b" ")
    encoded = base64.encodebytes(soap) if encoding == "base64" else quopri.encodestring(soap)
    package = raw_package(
        [((*SOAP_HEADERS, f"Content-Transfer-Encoding: {encoding}"), encoded.replace(b"\n", b"\r\n"))]
    )
    with parse_package(package, CT, lenient=lenient) as pkg:
        assert pkg.start.body.read_bytes() == soap
        assert descriptions(pkg) == []


def test_content_ids_with_and_without_angle_brackets() -> None:
    specs = [
        AttachmentSpec("<with@x>", "text/plain", PartBody.from_bytes(b"1")),
        AttachmentSpec("without@x", "text/plain", PartBody.from_bytes(b"2")),
        AttachmentSpec("sp%ace/é@x", "text/plain", PartBody.from_bytes(b"3")),
    ]
    content_type, package = build_package(SOAP, specs, start_id="soap@x")
    assert b"Content-ID: <with@x>\r\n" in package
    assert b"Content-ID: <without@x>\r\n" in package
    with parse_package(package, content_type) as pkg:
        assert pkg.attachment("with@x") is pkg.attachments[0]
        assert pkg.attachment("<with@x>") is pkg.attachments[0]
        assert pkg.attachment("cid:without@x") is pkg.attachments[1]
        assert pkg.attachment("CID:<without@x>") is pkg.attachments[1]
        # RFC 2392: the cid: URL form is percent-encoded.
        assert pkg.attachment("cid:sp%25ace%2F%C3%A9@x") is pkg.attachments[2]
        assert pkg.attachment("soap@x") is None
        assert pkg.attachment("nothing@x") is None


def test_received_content_id_spelt_in_any_case_and_without_brackets() -> None:
    package = raw_package(
        [
            (("content-id: <soap@example.com>", "CONTENT-TYPE: text/xml; charset=utf-8"), SOAP),
            (("Content-Id: bare@x", "Content-type: text/plain"), b"p"),
        ]
    )
    with parse_package(package, CT) as pkg:
        assert pkg.warnings == ()
        assert pkg.start.content_id == "soap@example.com"
        assert pkg.attachments[0].content_id == "bare@x"
        assert pkg.attachments[0].transfer_encoding == "7bit"


def test_start_absent_means_the_first_part() -> None:
    package = raw_package([(("Content-Type: text/xml; charset=UTF-8",), SOAP), (att_headers(), b"x")])
    with parse_package(package, 'multipart/related; type="text/xml"; boundary=BoundarY') as pkg:
        assert pkg.start.content_id is None
        assert pkg.start.body.read_bytes() == SOAP
        assert [a.content_id for a in pkg.attachments] == ["payload@example.com"]


def test_start_may_name_a_later_part() -> None:
    package = raw_package(
        [
            (att_headers("first@x"), b"1"),
            (SOAP_HEADERS, SOAP),
            (att_headers("third@x"), b"3"),
        ]
    )
    with parse_package(package, CT) as pkg:
        assert pkg.start.content_id == "soap@example.com"
        assert [a.content_id for a in pkg.attachments] == ["first@x", "third@x"]


def test_part_without_content_type_gets_the_rfc2045_default() -> None:
    package = raw_package([(SOAP_HEADERS, SOAP), (("Content-ID: <n@x>",), b"plain")])
    with parse_package(package, CT) as pkg:
        part = pkg.attachments[0]
        assert part.content_type == "text/plain; charset=us-ascii"
        assert part.media_type == "text/plain"
        assert part.charset == "us-ascii"


def test_part_with_no_headers_at_all() -> None:
    package = raw_package([(SOAP_HEADERS, SOAP), ((), b"anonymous")])
    with parse_package(package, CT) as pkg:
        assert pkg.attachments[0].content_id is None
        assert pkg.attachments[0].body.read_bytes() == b"anonymous"


def test_folded_headers_are_unfolded() -> None:
    package = raw_package(
        [
            (SOAP_HEADERS, SOAP),
            (("Content-ID: <f@x>", "Content-Type: text/plain;", '\tcharset="utf-8"'), b"f"),
        ]
    )
    with parse_package(package, CT) as pkg:
        assert pkg.attachments[0].content_type == 'text/plain; charset="utf-8"'
        assert pkg.attachments[0].charset == "utf-8"


def test_preamble_epilogue_and_transport_padding_are_ignored() -> None:
    package = raw_package(
        [(SOAP_HEADERS, SOAP), (att_headers(), b"x")], preamble=b"This is a MIME message.\r\n"
    ).replace(b"--BoundarY\r\nContent-ID: <payload", b"--BoundarY  \t\r\nContent-ID: <payload")
    package += b"epilogue text\r\n" * 100
    with parse_package(package, CT) as pkg:
        assert pkg.warnings == ()
        assert pkg.attachments[0].body.read_bytes() == b"x"


def test_boundary_followed_by_other_characters_is_content() -> None:
    # RFC 2046 §5.1.1: a delimiter line is the boundary then padding and CRLF (or "--"); "--BoundarYX" is not.
    body = b"line\r\n--BoundarYX not a delimiter\r\n--BoundarY-also not\r\n--Boundar"
    package = raw_package([(SOAP_HEADERS, SOAP), (att_headers(), body)])
    for chunk_size in (1, 2, 3, 5, 8, 13, 64, 65536):
        with parse_chunked(package, CT, chunk_size=chunk_size) as pkg:
            assert pkg.attachments[0].body.read_bytes() == body


def test_empty_part_written_without_the_extra_line_break() -> None:
    # Some writers put the next delimiter straight after the empty line that ends the headers.
    package = (
        b"--BoundarY\r\n"
        + "\r\n".join(SOAP_HEADERS).encode()
        + b"\r\n\r\n"
        + SOAP
        + b"\r\n--BoundarY\r\nContent-ID: <e@x>\r\n\r\n--BoundarY--\r\n"
    )
    with parse_package(package, CT) as pkg:
        assert pkg.attachments[0].body.read_bytes() == b""


# ------------------------------------------------------------------------------------ property tests

parts_strategy = st.lists(
    st.tuples(st.binary(max_size=3000), st.sampled_from((*ENCODINGS, "7bit"))), min_size=0, max_size=5
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=parts_strategy,
    chunk_size=st.sampled_from((1, 2, 3, 7, 16, 100, 4096, 65536)),
    threshold=st.sampled_from((0, 17, 1 << 20)),
)
def test_property_build_then_parse_gives_the_same_bytes(
    parts: list[tuple[bytes, str]], chunk_size: int, threshold: int
) -> None:
    specs = []
    for i, (data, encoding) in enumerate(parts):
        if encoding == "7bit":
            data = bytes(b & 0x7F or 0x20 for b in data)
        specs.append(
            AttachmentSpec(f"p{i}@example.com", "application/octet-stream", PartBody.from_bytes(data), encoding)
        )
    content_type, package = build_package(SOAP, specs, start_id="soap@example.com")
    limits = MimeLimits(spool_threshold=threshold, max_memory_bytes=threshold * 2)
    with parse_chunked(package, content_type, chunk_size=chunk_size, limits=limits) as pkg:
        assert pkg.warnings == ()
        assert pkg.start.body.read_bytes() == SOAP
        assert [a.content_id for a in pkg.attachments] == [s.content_id for s in specs]
        assert [a.body.read_bytes() for a in pkg.attachments] == [s.body.read_bytes() for s in specs]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600), st.booleans())
def test_property_garbage_never_crashes(data: bytes, lenient: bool) -> None:
    try:
        parse_package(data, CT, lenient=lenient).close()
    except MimeProblemError as exc:
        assert exc.error_code is ErrorCode.MIME_PROBLEM


@settings(max_examples=300, deadline=None)
@given(st.data(), st.booleans())
def test_property_damaged_packages_fail_cleanly(data: st.DataObject, lenient: bool) -> None:
    package = bytearray(
        raw_package(
            [
                (SOAP_HEADERS, SOAP),
                (att_headers(cte="base64"), b"aGVsbG8gd29ybGQ="),
                (att_headers("b@x"), b"z"),
            ]
        )
    )
    cut = data.draw(st.integers(0, len(package)))
    package = package[:cut]
    for _ in range(data.draw(st.integers(0, 3))):
        if package:
            i = data.draw(st.integers(0, len(package) - 1))
            package[i] = data.draw(st.integers(0, 255))
    chunk = data.draw(st.sampled_from((1, 3, 64, 65536)))
    with contextlib.suppress(MimeProblemError):
        parse_chunked(bytes(package), CT, chunk_size=chunk, lenient=lenient).close()


# ------------------------------------------------------------------------------------- chunk edges


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_one_byte_at_a_time_stream(encoding: str) -> None:
    spec = AttachmentSpec("p@x", "application/octet-stream", PartBody.from_bytes(ALL_BYTES), encoding)
    content_type, package = build_package(SOAP, [spec], start_id="s@x", boundary="b")
    stream = Trickle(package, 1)
    with parse_package(stream, content_type) as pkg:  # type: ignore[arg-type]
        assert pkg.attachments[0].body.read_bytes() == ALL_BYTES
    assert stream.reads >= len(package) - 2  # all but the CRLF after the close delimiter


def test_delimiter_split_at_every_position_of_the_read_chunks() -> None:
    # Bodies ending in CR, LF, "-" and boundary prefixes put the delimiter at every offset of a chunk edge.
    bodies = [b"", b"\r", b"\n", b"\r\n", b"-", b"--", b"--Bound", b"x" * 37, b"\r\n--BoundarZ"]
    package = raw_package([(SOAP_HEADERS, SOAP)] + [(att_headers(f"p{i}@x"), b) for i, b in enumerate(bodies)])
    for chunk_size in range(1, 40):
        with parse_chunked(package, CT, chunk_size=chunk_size) as pkg:
            assert [a.body.read_bytes() for a in pkg.attachments] == bodies, chunk_size
    for step in (1, 2, 3, 5, 11):
        with parse_package(Trickle(package, step), CT) as pkg:  # type: ignore[arg-type]
            assert [a.body.read_bytes() for a in pkg.attachments] == bodies, step


def test_base64_and_quoted_printable_escapes_cut_by_chunk_edges() -> None:
    qp = b"caf=C3=A9 =\r\nsoft break, tab=09end=3D"
    b64 = b"AAEC\r\nAwQF\r\nBgcICQ=="
    package = raw_package(
        [
            (SOAP_HEADERS, SOAP),
            (att_headers("q@x", "quoted-printable"), qp),
            (att_headers("b@x", "base64"), b64),
        ]
    )
    for chunk_size in range(1, 25):
        with parse_chunked(package, CT, chunk_size=chunk_size) as pkg:
            assert pkg.attachment("q@x").body.read_bytes() == "café soft break, tab\tend=".encode()  # type: ignore[union-attr]
            assert pkg.attachment("b@x").body.read_bytes() == bytes(range(10))  # type: ignore[union-attr]


# ----------------------------------------------------------------------------------------- errors


def problem(data: bytes | io.RawIOBase, content_type: str | None, **kw: object) -> MimeProblemError:
    with pytest.raises(MimeProblemError) as info:
        parse_package(data, content_type, **kw).close()  # type: ignore[arg-type]
    exc = info.value
    assert exc.error_code is ErrorCode.MIME_PROBLEM
    assert exc.severity is Severity.ERROR
    return exc


@pytest.mark.parametrize("lenient", [False, True])
@pytest.mark.parametrize(
    ("content_type", "message"),
    [
        ("text/xml; charset=utf-8", "not multipart/related"),
        ("", "not multipart/related"),
        ('multipart/related; type="text/xml"', "no boundary"),
        ('multipart/related; type="text/xml"; boundary=""', "empty boundary"),
        ('multipart/related; type="text/xml"; boundary="' + "x" * 300 + '"', "unusable boundary"),
    ],
)
def test_package_content_type_errors(content_type: str, message: str, lenient: bool) -> None:
    exc = problem(good_raw(), content_type, lenient=lenient)
    assert message in exc.description
    assert exc.location == ""


@pytest.mark.parametrize("lenient", [False, True])
def test_wrong_boundary(lenient: bool) -> None:
    exc = problem(good_raw(), CT.replace("BoundarY", "Other"), lenient=lenient)
    assert "no MIME part found" in exc.description
    assert exc.location == ""


@pytest.mark.parametrize("lenient", [False, True])
def test_wrong_boundary_fails_after_the_preamble_limit_not_at_end_of_stream(lenient: bool) -> None:
    data = good_raw() + b"x" * 10_000_000
    stream = Trickle(data, 65536)
    exc = problem(stream, CT.replace("BoundarY", "Other"), lenient=lenient)
    assert "no boundary delimiter" in exc.description
    assert stream.reads < 10


@pytest.mark.parametrize("lenient", [False, True])
def test_no_part_at_all(lenient: bool) -> None:
    exc = problem(b"--BoundarY--\r\n", CT, lenient=lenient)
    assert "no MIME part found" in exc.description
    assert problem(b"", CT, lenient=lenient).location == ""


@pytest.mark.parametrize("lenient", [False, True])
def test_a_package_without_its_closing_delimiter_is_an_error_in_both_modes(lenient: bool) -> None:
    """The last payload may be cut short, and nothing else tells: acknowledging it would be wrong."""
    package = good_raw(close=False)[:-2]
    exc = problem(package, CT, lenient=lenient)
    assert "truncated" in exc.description and "--boundary--" in exc.description
    assert exc.error_code is ErrorCode.MIME_PROBLEM and exc.severity is Severity.ERROR
    assert exc.location == "cid:payload@example.com"


@pytest.mark.parametrize("lenient", [False, True])
def test_truncated_inside_headers_is_an_error_in_both_modes(lenient: bool) -> None:
    package = good_raw()
    cut = package.index(b"Content-Type: text/plain")
    exc = problem(package[:cut], CT, lenient=lenient)
    assert "ends inside part headers" in exc.description
    exc = problem(package[: package.index(b"Content-ID: <payload")], CT, lenient=lenient)
    assert "truncated" in exc.description


@pytest.mark.parametrize("lenient", [False, True])
def test_truncated_base64_is_an_error_in_both_modes(lenient: bool) -> None:
    package = raw_package([(SOAP_HEADERS, SOAP), (att_headers(cte="base64"), b"aGVsbG8gd29ybGQ=")], close=False)
    exc = problem(package[:-5], CT, lenient=lenient)
    assert "truncated" in exc.description
    assert exc.location == "cid:payload@example.com"


def test_close_delimiter_without_dashes_at_end_of_stream() -> None:
    package = good_raw(close=False) + b"--BoundarY"
    assert "trailing '--'" in problem(package, CT).description
    with parse_package(package, CT, lenient=True) as pkg:
        assert pkg.attachments[0].body.read_bytes() == b"hello"
        assert any("trailing '--'" in d for d in descriptions(pkg))


@pytest.mark.parametrize("lenient", [False, True])
def test_start_naming_no_part(lenient: bool) -> None:
    exc = problem(good_raw(), CT.replace("soap@example.com", "missing@example.com"), lenient=lenient)
    assert "names no part" in exc.description
    assert "missing@example.com" in exc.description


@pytest.mark.parametrize("lenient", [False, True])
def test_duplicate_content_ids(lenient: bool) -> None:
    package = raw_package([(SOAP_HEADERS, SOAP), (att_headers("dup@x"), b"1"), (att_headers("dup@x"), b"2")])
    exc = problem(package, CT, lenient=lenient)
    assert "duplicate Content-ID" in exc.description
    assert exc.location == "cid:dup@x"


@pytest.mark.parametrize("lenient", [False, True])
def test_duplicate_of_the_soap_part_content_id(lenient: bool) -> None:
    package = raw_package([(SOAP_HEADERS, SOAP), (att_headers("soap@example.com"), b"1")])
    assert problem(package, CT, lenient=lenient).location == "cid:soap@example.com"


@pytest.mark.parametrize("lenient", [False, True])
def test_ten_thousand_tiny_parts_fail_fast_and_small(lenient: bool) -> None:
    package = raw_package([(SOAP_HEADERS, SOAP)] + [(att_headers(f"p{i}@x"), b"x") for i in range(10_000)])
    tracemalloc.start()
    try:
        exc = problem(package, CT, lenient=lenient)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert f"more than {MimeLimits().max_parts} parts" in exc.description
    assert exc.location == ""
    assert peak < 8 * 1024 * 1024


def test_max_parts_counts_the_soap_part() -> None:
    package = raw_package([(SOAP_HEADERS, SOAP), (att_headers("a@x"), b"1"), (att_headers("b@x"), b"2")])
    parse_package(package, CT, limits=MimeLimits(max_parts=3)).close()
    assert "more than 2 parts" in problem(package, CT, limits=MimeLimits(max_parts=2)).description


@pytest.mark.parametrize("lenient", [False, True])
def test_giant_header_is_refused_with_bounded_memory(lenient: bool) -> None:
    giant = "X-Giant: " + "a" * 20_000_000
    package = raw_package([(SOAP_HEADERS, SOAP), ((*att_headers(), giant), b"x")])
    tracemalloc.start()
    try:
        exc = problem(Trickle(package, 65536), CT, lenient=lenient)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "part headers longer than 16384 bytes" in exc.description
    assert exc.location == ""
    assert peak < 2 * 1024 * 1024
    many = tuple(f"X-H{i}: {'v' * 50}" for i in range(400))
    exc = problem(raw_package([(SOAP_HEADERS, SOAP), ((*att_headers(), *many), b"x")]), CT, lenient=lenient)
    assert "part headers longer" in exc.description


@pytest.mark.parametrize("lenient", [False, True])
def test_unknown_transfer_encoding(lenient: bool) -> None:
    package = raw_package([(SOAP_HEADERS, SOAP), (att_headers("u@x", "x-uuencode"), b"begin")])
    exc = problem(package, CT, lenient=lenient)
    assert "unknown Content-Transfer-Encoding 'x-uuencode'" in exc.description
    assert exc.location == "cid:u@x"


@pytest.mark.parametrize("lenient", [False, True])
@pytest.mark.parametrize("content", [b"QUJD=QUJD", b"QUJDR", b"QUJD\r\nQUI=\r\nQUJD", b"Q==="])
def test_invalid_base64(content: bytes, lenient: bool) -> None:
    package = raw_package([(SOAP_HEADERS, SOAP), (att_headers("b@x", "base64"), content)])
    exc = problem(package, CT, lenient=lenient)
    assert "invalid base64" in exc.description
    assert exc.location == "cid:b@x"


@pytest.mark.parametrize("lenient", [False, True])
def test_soap_part_that_is_not_xml(lenient: bool) -> None:
    package = raw_package(
        [(("Content-ID: <soap@example.com>", "Content-Type: image/png"), b"\x89PNG"), (att_headers(), b"x")]
    )
    exc = problem(package, CT, lenient=lenient)
    assert "the SOAP part is image/png" in exc.description
    assert exc.location == "cid:soap@example.com"


@pytest.mark.parametrize("lenient", [False, True])
def test_total_size_over_limit(lenient: bool) -> None:
    package = good_raw()
    exc = problem(package, CT, lenient=lenient, limits=MimeLimits(max_total_bytes=len(package) - 1))
    assert "larger than" in exc.description
    assert exc.location == ""
    parse_package(package, CT, lenient=lenient, limits=MimeLimits(max_total_bytes=len(package))).close()


@pytest.mark.parametrize("lenient", [False, True])
def test_soap_part_over_limit(lenient: bool) -> None:
    exc = problem(good_raw(), CT, lenient=lenient, limits=MimeLimits(max_soap_part_bytes=len(SOAP) - 1))
    assert "SOAP part is larger than" in exc.description
    assert exc.location == "cid:soap@example.com"
    parse_package(good_raw(), CT, limits=MimeLimits(max_soap_part_bytes=len(SOAP))).close()


def open_fds() -> int:
    fd_dir = Path("/proc/self/fd")
    if not fd_dir.is_dir():
        pytest.skip("needs /proc/self/fd to count open files")
    return len(list(fd_dir.iterdir()))


def test_errors_close_the_parts_already_read() -> None:
    big = b"z" * 5000
    package = raw_package([(SOAP_HEADERS, SOAP), (att_headers("a@x"), big), (att_headers("b@x", "bogus"), b"")])
    before = open_fds()
    with pytest.raises(MimeProblemError):
        parse_package(package, CT, limits=MimeLimits(spool_threshold=10))
    assert open_fds() == before


def test_spool_file_is_released_by_close_and_outlives_it_for_open_readers() -> None:
    data = ALL_BYTES * 50
    specs = [
        AttachmentSpec("a@x", "application/octet-stream", PartBody.from_bytes(data)),
        AttachmentSpec("b@x", "text/plain", PartBody.from_bytes(data)),
    ]
    content_type, package = build_package(SOAP, specs, start_id="s@x")
    before = open_fds()
    pkg = parse_package(package, content_type, limits=MimeLimits(spool_threshold=100))
    assert open_fds() == before + 1  # one temporary file for the whole package
    reader = pkg.attachments[1].body.open()
    pkg.close()
    assert open_fds() == before + 1
    assert reader.read() == data
    reader.close()
    assert open_fds() == before


# --------------------------------------------------------------------------------- lenient warnings


LENIENT_CASES: dict[str, tuple[bytes, str | None, str]] = {
    "start without brackets": (
        good_raw(),
        CT.replace('"<soap@example.com>"', "soap@example.com"),
        "start parameter",
    ),
    "no type parameter": (
        good_raw(),
        'multipart/related; boundary="BoundarY"; start="<soap@example.com>"',
        "no type",
    ),
    "other type parameter": (good_raw(), CT.replace("text/xml", "application/soap+xml"), "type parameter is"),
    "multipart/mixed": (good_raw(), CT.replace("related", "mixed"), "not multipart/related"),
    "bare LF": (good_raw(eol=b"\n"), CT, "bare LF"),
    "no content type": (good_raw(preamble=b"\r\n"), None, "no Content-Type"),
    "odd boundary": (
        raw_package([(SOAP_HEADERS, SOAP)], boundary="b" * 80),
        CT.replace("BoundarY", "b" * 80),
        "boundary parameter not as RFC 2046",
    ),
    "application/soap+xml": (
        raw_package([(("Content-ID: <soap@example.com>", "Content-Type: application/soap+xml; charset=utf-8"), SOAP)]),
        CT,
        "SOAP part is application/soap+xml",
    ),
    "header line that is not a header": (
        raw_package([(SOAP_HEADERS, SOAP)], close=False)
        + b"--BoundarY\r\nContent-ID: <payload@example.com>\r\nContent-Type: text/plain\r\n"
        + b"mock-payload\r\n--BoundarY--\r\n",
        CT,
        "not followed by an empty line",
    ),
    "junk in base64": (
        raw_package([(SOAP_HEADERS, SOAP), (att_headers(cte="base64"), b'aGVs"bG8*gd29y!bGQ=')]),
        CT,
        "outside the base64 alphabet",
    ),
    "base64 without padding": (
        raw_package([(SOAP_HEADERS, SOAP), (att_headers(cte="base64"), b"aGVsbG8gd29ybGQ")]),
        CT,
        "without its final '=' padding",
    ),
    "8-bit in 7bit": (
        raw_package([(SOAP_HEADERS, SOAP), (att_headers(cte="7bit"), "hello wörld".encode())]),
        CT,
        "8-bit data in a part declared 7bit",
    ),
}


@pytest.mark.parametrize("case", sorted(LENIENT_CASES))
def test_lenient_deviation_is_a_warning_and_strict_an_error(case: str) -> None:
    package, content_type, expected = LENIENT_CASES[case]
    exc = problem(package, content_type)
    assert expected in exc.description
    with parse_package(package, content_type, lenient=True) as pkg:
        assert pkg.start.body.read_bytes() == SOAP
        matching = [w for w in pkg.warnings if expected in w.description]
        assert matching, descriptions(pkg)
        assert all(w.severity is Severity.WARNING and w.error_code is ErrorCode.MIME_PROBLEM for w in pkg.warnings)


def test_lenient_results_of_the_repairs() -> None:
    with parse_package(*LENIENT_CASES["header line that is not a header"][:2], lenient=True) as pkg:
        assert pkg.attachments[0].body.read_bytes() == b"mock-payload"
    with parse_package(*LENIENT_CASES["junk in base64"][:2], lenient=True) as pkg:
        assert pkg.attachments[0].body.read_bytes() == b"hello world"
    with parse_package(*LENIENT_CASES["base64 without padding"][:2], lenient=True) as pkg:
        assert pkg.attachments[0].body.read_bytes() == b"hello world"
    with parse_package(*LENIENT_CASES["no content type"][:2], lenient=True) as pkg:
        assert pkg.boundary == "BoundarY"
        assert pkg.attachments[0].body.read_bytes() == b"hello"
    with parse_package(*LENIENT_CASES["start without brackets"][:2], lenient=True) as pkg:
        assert pkg.start.content_id == "soap@example.com"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"preamble first\r\n--BoundarY\r\n", "does not start with a '--boundary' line"),
        (b"", "does not start with a '--boundary' line"),
        (b"--" + b"x" * 100_000, "no delimiter line in the first"),
    ],
)
def test_boundary_sniffing_failures(body: bytes, message: str) -> None:
    assert message in problem(body, None, lenient=True).description
    assert "no Content-Type" in problem(body, None).description


def test_boundary_sniffing_skips_blank_lines_and_padding() -> None:
    package = b"\r\n \r\n" + good_raw().replace(b"--BoundarY\r\n", b"--BoundarY \t\r\n", 1)
    for chunk_size in (1, 2, 5, 65536):
        with parse_chunked(package, None, chunk_size=chunk_size, lenient=True) as pkg:
            assert pkg.boundary == "BoundarY"
            assert pkg.attachments[0].body.read_bytes() == b"hello"


def test_bare_lf_is_reported_once() -> None:
    package = raw_package([(SOAP_HEADERS, SOAP)] + [(att_headers(f"p{i}@x"), b"x\ny") for i in range(20)], eol=b"\n")
    with parse_package(package, CT, lenient=True) as pkg:
        assert descriptions(pkg) == ["bare LF line endings instead of CRLF"]
        assert [a.body.read_bytes() for a in pkg.attachments] == [b"x\ny"] * 20


def test_missing_soap_charset_warns_in_lenient_mode_only() -> None:
    package = raw_package([(("Content-ID: <soap@example.com>", "Content-Type: text/xml"), SOAP)])
    with parse_package(package, CT) as pkg:
        assert pkg.start.charset is None
        assert pkg.warnings == ()
    with parse_package(package, CT, lenient=True) as pkg:
        assert pkg.start.charset is None
        assert ["no charset" in d for d in descriptions(pkg)] == [True]


def test_warnings_are_capped() -> None:
    parts = [(SOAP_HEADERS, SOAP)] + [(att_headers(f"p{i}@x", "7bit"), b"\xff") for i in range(200)]
    with parse_package(raw_package(parts), CT, lenient=True) as pkg:
        assert len(pkg.warnings) == 100


# ---------------------------------------------------------------------------- Content-Type syntax


@pytest.mark.parametrize(
    ("value", "media", "params"),
    [
        (
            'Multipart/Related; type="text/xml"; boundary="b=1;2"; start="<a@b>"',
            "multipart/related",
            {"type": "text/xml", "boundary": "b=1;2", "start": "<a@b>"},
        ),
        (
            "multipart/related;boundary=--=_MIME-Boundary;type=text/xml;start=ebXMLHeader@spine.nhs.uk",
            "multipart/related",
            {"boundary": "--=_MIME-Boundary", "type": "text/xml", "start": "ebXMLHeader@spine.nhs.uk"},
        ),
        (
            '  multipart/related ;  START = "<x>" ;; BOUNDARY =  abc  ; type = "text/xml" ',
            "multipart/related",
            {"start": "<x>", "boundary": "abc", "type": "text/xml"},
        ),
        ('text/xml; charset="UTF-8"', "text/xml", {"charset": "UTF-8"}),
        (r'a/b; x="q\"uo\\ted"; y=1', "a/b", {"x": 'q"uo\\ted', "y": "1"}),
        ('a/b; x="unterminated', "a/b", {"x": "unterminated"}),
        ("a/b; x=1; x=2; junk; =3", "a/b", {"x": "1"}),
        ("text / xml", "text/xml", {}),
        ("", "", {}),
    ],
)
def test_parse_content_type(value: str, media: str, params: dict[str, str]) -> None:
    assert parse_content_type(value) == (media, params)


_param_names = st.from_regex(r"[a-z][a-z0-9\-]{0,10}", fullmatch=True)
_param_values = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), max_size=30)


@settings(max_examples=200)
@given(st.dictionaries(_param_names, _param_values, max_size=5), st.sampled_from(("; ", ";", " ;  ")))
def test_property_content_type_quoted_values_round_trip(params: dict[str, str], separator: str) -> None:
    quoted = ['"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in params.values()]
    value = "Multipart/Related" + "".join(f"{separator}{k}={q}" for k, q in zip(params, quoted, strict=True))
    assert parse_content_type(value) == ("multipart/related", params)


@settings(max_examples=300)
@given(st.text(max_size=200))
def test_property_content_type_never_raises(value: str) -> None:
    media, params = parse_content_type(value)
    assert media == media.lower()
    assert all(k == k.lower() for k in params)


# ------------------------------------------------------------------------------------ part bodies


def test_part_body_from_path_is_streamed_and_not_owned(tmp_path: Path) -> None:
    path = tmp_path / "payload.bin"
    path.write_bytes(ALL_BYTES * 100)
    body = PartBody.from_path(path)
    assert body.size == len(ALL_BYTES) * 100
    assert not body.in_memory
    content_type, package = build_package(
        SOAP, [AttachmentSpec("f@x", "application/octet-stream", body)], start_id="s@x"
    )
    with parse_package(package, content_type) as pkg:
        assert pkg.attachments[0].body.read_bytes() == ALL_BYTES * 100
    body.close()
    assert path.exists()
    with pytest.raises(ValueError):
        body.open()


def test_spilled_parts_live_in_one_temporary_file_with_independent_readers() -> None:
    data = [bytes([i]) * (5000 + i) for i in range(5)]
    specs = [AttachmentSpec(f"p{i}@x", "application/octet-stream", PartBody.from_bytes(d)) for i, d in enumerate(data)]
    content_type, package = build_package(SOAP, specs, start_id="s@x")
    pkg = parse_package(package, content_type, limits=MimeLimits(spool_threshold=1000))
    assert pkg.start.body.in_memory
    bodies = [a.body for a in pkg.attachments]
    assert not any(b.in_memory for b in bodies)
    readers = [b.open() for b in bodies]
    firsts = [r.read(10) for r in reversed(readers)]
    assert firsts == [d[:10] for d in reversed(data)]
    assert [r.read() for r in readers] == [d[10:] for d in data]
    for r in readers:
        r.close()
    assert bodies[2].read_bytes() == data[2]
    pkg.attachments[0].body.close()
    assert bodies[1].read_bytes() == data[1]  # the shared file stays until its last body is closed
    pkg.close()
    pkg.close()
    with pytest.raises(ValueError):
        bodies[1].open()


def test_copy_to_and_part_location() -> None:
    spec = AttachmentSpec("a@x", "application/octet-stream", PartBody.from_bytes(ALL_BYTES * 300))
    content_type, package = build_package(SOAP, [spec], start_id="s@x")
    with parse_package(package, content_type, limits=MimeLimits(spool_threshold=0)) as pkg:
        out = io.BytesIO()
        assert pkg.attachments[0].body.copy_to(out, chunk_size=1000) == len(ALL_BYTES) * 300
        assert out.getvalue() == ALL_BYTES * 300
        assert pkg.attachments[0].location == "cid:a@x"
        assert repr(pkg.attachments[0].body) == f"PartBody(size={len(ALL_BYTES) * 300}, file)"


def test_memory_budget_spills_later_parts() -> None:
    specs = [AttachmentSpec(f"p{i}@x", "text/plain", PartBody.from_bytes(b"m" * 400)) for i in range(4)]
    content_type, package = build_package(SOAP, specs, start_id="s@x")
    limits = MimeLimits(spool_threshold=1000, max_memory_bytes=len(SOAP) + 900)
    with parse_package(package, content_type, limits=limits) as pkg:
        assert [a.body.in_memory for a in pkg.attachments] == [True, True, False, False]
        assert all(a.body.read_bytes() == b"m" * 400 for a in pkg.attachments)


def test_parse_accepts_bytes_like_and_files(tmp_path: Path) -> None:
    content_type, package = build_package(
        SOAP, [AttachmentSpec("a@x", "text/plain", PartBody.from_bytes(b"a"))], start_id="s@x"
    )
    path = tmp_path / "package.mime"
    path.write_bytes(package)
    sources: list[object] = [package, bytearray(package), memoryview(package), io.BytesIO(package)]
    with path.open("rb") as f:
        sources.append(f)
        for source in sources:
            with parse_package(source, content_type) as pkg:  # type: ignore[arg-type]
                assert pkg.attachments[0].body.read_bytes() == b"a"


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError):
        MimeLimits(max_parts=0)
    with pytest.raises(ValueError):
        MimeLimits(spool_threshold=-1)


# ----------------------------------------------------------------------------------- writer misuse


def test_writer_refuses_a_boundary_found_in_the_content() -> None:
    with pytest.raises(ValueError, match="SOAP part"):
        build_package(b"<x>--bnd</x>", [], start_id="s@x", boundary="bnd")
    for encoding in ("binary", "8bit", "7bit", "quoted-printable"):
        spec = AttachmentSpec("a@x", "text/plain", PartBody.from_bytes(b"x" * 70000 + b"\r\n--bnd\r\n"), encoding)
        with pytest.raises(ValueError, match="boundary occurs"):
            build_package(SOAP, [spec], start_id="s@x", boundary="bnd")
    # base64 text never contains "--": the same content is fine there.
    spec = AttachmentSpec("a@x", "text/plain", PartBody.from_bytes(b"\r\n--bnd\r\n"), "base64")
    content_type, package = build_package(SOAP, [spec], start_id="s@x", boundary="bnd")
    with parse_package(package, content_type) as pkg:
        assert pkg.attachments[0].body.read_bytes() == b"\r\n--bnd\r\n"


def test_boundary_straddling_copy_chunks_is_found() -> None:
    data = b"y" * (65536 - 3) + b"--bnd" + b"y" * 10
    spec = AttachmentSpec("a@x", "text/plain", PartBody.from_bytes(data))
    with pytest.raises(ValueError, match="boundary occurs"):
        build_package(SOAP, [spec], start_id="s@x", boundary="bnd")


@pytest.mark.parametrize(
    ("kwargs", "specs", "message"),
    [
        ({"boundary": "bad\r\nboundary"}, [], "boundary is not valid"),
        ({"boundary": "x" * 71}, [], "boundary is not valid"),
        ({"start_id": "a\r\nb"}, [], "line break"),
        ({"start_id": "<>"}, [], "not a usable Content-ID"),
        ({"soap_charset": 'utf-8"; x="'}, [], "charset"),
        ({}, [AttachmentSpec("s@x", "text/plain", PartBody.from_bytes(b""))], "duplicate Content-ID"),
        ({}, [AttachmentSpec("a@x", "text/plain\r\nX: y", PartBody.from_bytes(b""))], "line break"),
        ({}, [AttachmentSpec("a@x", "text/plain", PartBody.from_bytes(b""), "uuencode")], "unsupported"),
        (
            {},
            [AttachmentSpec("a@x", "text/plain", PartBody.from_bytes(b""), headers=(("Bad Name", "v"),))],
            "header",
        ),
        (
            {},
            [AttachmentSpec("a@x", "text/plain", PartBody.from_bytes(b""), headers=(("X", "v\nw"),))],
            "line break",
        ),
        (
            {},
            [AttachmentSpec("a@x", "t/p", PartBody.from_bytes(b""), headers=(("content-id", "v"),))],
            "fields",
        ),
    ],
)
def test_writer_argument_errors(kwargs: dict[str, str], specs: list[AttachmentSpec], message: str) -> None:
    arguments = {"start_id": "s@x", **kwargs}
    with pytest.raises(ValueError, match=message):
        write_package(io.BytesIO(), SOAP, specs, **arguments)
