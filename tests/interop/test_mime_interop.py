"""Real partners' MIME packages (NHS Spine MHS test messages, PHIN-MS HTTP captures) through parse_package.

Reads ``shared/`` beside the project root in place (never copied) and skips when it is absent. The NHS
``.msg`` files are MIME bodies with no outer headers (boundary ``--=_MIME-Boundary``, sent by the NHS MHS
with ``Content-Type: multipart/related; boundary="--=_MIME-Boundary"``); those containing ``{{ebxml}}``
are filled with their sibling ``.ebxml`` header. The PHIN-MS ``.txt`` files are raw HTTP captures,
split here into headers and body. Parts' expected contents come from an independent reading of each file
(split at the boundary lines; base64 decoded by the standard library).
"""

from __future__ import annotations

import base64
import gzip
import re
from pathlib import Path

import pytest

from msh.ebms.mime import MimePackage, parse_package
from msh.errors import MimeProblemError, Severity

pytestmark = pytest.mark.interop

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
MESSAGES = SHARED / "interop" / "messages"
NHS_DIRS = ("common-test_messages", "inbound-messages")
NHS_BOUNDARY = b"----=_MIME-Boundary"
# What the NHS MHS sends with these bodies (its own tests use exactly this header).
NHS_CT = 'multipart/related; boundary="--=_MIME-Boundary"'
# What the NHS MHS puts on the messages it builds: type and start unquoted, start without brackets.
NHS_FULL_CT = 'multipart/related; boundary="--=_MIME-Boundary"; type=text/xml; start=ebXMLHeader@spine.nhs.uk'
ABSENT = "shared-folder-absent"


def require_shared() -> None:
    if not SHARED.is_dir():
        pytest.skip(f"interop material not found at {SHARED} (the shared folder beside the project root)")


def listing(folder: Path, pattern: str) -> list[str]:
    names = sorted(p.name for p in folder.glob(pattern)) if folder.is_dir() else []
    return names or [ABSENT]


NHS_FILES = [
    f"{d}/{name}" for d in NHS_DIRS for name in listing(MESSAGES / "nhs-mhs" / d, "*.msg") if name != ABSENT
] or [ABSENT]
PHINMS_FILES = listing(MESSAGES / "phinms" / "examples", "*.txt")

# The files that are broken on purpose in the NHS MHS test suite, and what is wrong with them.
NHS_BROKEN = {
    "ebxml_request_no_header.msg": ("no MIME part found", ""),  # the body is the word "Message"
    "soap_request_with_defect.msg": ("no MIME part found", ""),  # a bare SOAP envelope, not MIME
    "ebxml_request_invalid_binary_ebxml_header.msg": (  # the SOAP part is a PNG image
        "the SOAP part is image/png",
        "cid:ebXMLHeader@spine.nhs.uk",
    ),
}
# NHS files without their closing delimiter: read only with allow_unterminated.
NHS_UNTERMINATED = {"ebxml_request_one_external_attachment.msg"}
# Lenient repairs the NHS files need beyond "no type parameter" and "bare LF".
NHS_REPAIRS = {
    "ebxml_request_payload_defect.msg": "not followed by an empty line",
    "ebxml_request_one_external_attachment.msg": "truncated",
    "ebxml_request_one_attachment_application_xml_content_compressed.msg": "outside the base64 alphabet",
    "ebxml_request_one_attachment_text_plain_content_compressed.msg": "outside the base64 alphabet",
}


def nhs_message(name: str) -> tuple[bytes, bytes | None]:
    """The file's bytes with the template filled, and the .ebxml header used (None if not a template)."""
    path = MESSAGES / "nhs-mhs" / name
    data = path.read_bytes()
    if b"{{ebxml}}" not in data:
        return data, None
    header = path.with_suffix(".ebxml").read_bytes()
    return data.replace(b"{{ebxml}}", header), header


def independent_parts(data: bytes, boundary: bytes) -> list[tuple[dict[str, str], bytes]]:
    """Each part's headers and raw content, cut at the boundary lines without the parser under test."""
    pieces = re.split(rb"(?:\r?\n)?--" + re.escape(boundary) + rb"(?:--)?[ \t]*(?:\r?\n|$)", data)
    parts = []
    for piece in pieces[1:]:
        if not piece.strip():
            continue
        match = re.search(rb"\r?\n\r?\n", piece)
        head, body = (piece[: match.start()], piece[match.end() :]) if match else (piece, b"")
        headers = {}
        for line in head.decode().splitlines():
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        parts.append((headers, body))
    return parts


def expected_content(headers: dict[str, str], raw: bytes) -> bytes:
    if headers.get("content-transfer-encoding", "").lower() == "base64":
        return base64.b64decode(re.sub(rb"[^A-Za-z0-9+/=]", b"", raw))
    return raw


def split_capture(raw: bytes) -> tuple[dict[str, str], bytes]:
    """An HTTP capture's headers (lower-case names) and body: headers end at the first empty line."""
    match = re.search(rb"\r?\n\r?\n", raw)
    assert match, "no empty line after the HTTP headers"
    lines = raw[: match.start()].decode("latin-1").splitlines()
    if lines and (":" not in lines[0] or re.match(r"[A-Z]+ \S+ HTTP/|HTTP/", lines[0])):
        lines = lines[1:]  # the request or status line
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers, raw[match.end() :]


def warning_texts(pkg: MimePackage) -> list[str]:
    assert all(w.severity is Severity.WARNING for w in pkg.warnings)
    return [w.description for w in pkg.warnings]


# ---------------------------------------------------------------------------------------------- NHS


@pytest.mark.parametrize("name", NHS_FILES)
def test_every_nhs_message_parses_in_lenient_mode(name: str) -> None:
    require_shared()
    data, header = nhs_message(name)
    base = name.split("/")[-1]
    if base in NHS_BROKEN:
        message, location = NHS_BROKEN[base]
        with pytest.raises(MimeProblemError) as info:
            parse_package(data, NHS_CT, lenient=True)
        assert message in info.value.description
        assert info.value.location == location
        return
    expected = independent_parts(data, b"--=_MIME-Boundary")
    unterminated = base in NHS_UNTERMINATED
    if unterminated:  # refused unless the MSH is told to accept such packages
        with pytest.raises(MimeProblemError, match="without its closing delimiter"):
            parse_package(data, NHS_CT, lenient=True)
    with parse_package(data, NHS_CT, lenient=True, allow_unterminated=unterminated) as pkg:
        warnings = warning_texts(pkg)
        assert "no type parameter in the package Content-Type (ebMS2 §2.1.2)" in warnings
        if base in NHS_REPAIRS:
            assert any(NHS_REPAIRS[base] in w for w in warnings), warnings
        # The SOAP part is the first part (no start parameter), the envelope itself.
        assert pkg.start.content_id in ("ebXMLHeader@spine.nhs.uk", "ContentRoot")
        assert pkg.start.media_type == "text/xml"
        assert pkg.start.charset == "UTF-8"
        soap = pkg.start.body.read_bytes()
        if header is not None:
            assert soap == header
        assert soap.lstrip().lower().startswith((b"<?xml", b"<soap:envelope"))
        assert soap.rstrip().lower().endswith(b"</soap:envelope>")
        # Attachments: as many as the file has parts after the first, with the same contents.
        assert len(pkg.attachments) == len(expected) - 1
        for part, (headers, raw) in zip(pkg.attachments, expected[1:], strict=True):
            assert f"<{part.content_id}>" == headers["content-id"]
            if base != "ebxml_request_payload_defect.msg":
                assert part.body.read_bytes() == expected_content(headers, raw)


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("common-test_messages/ebxml_request.msg", 1),
        ("common-test_messages/ebxml_request_no_payload.msg", 0),
        ("common-test_messages/ebxml_request_multiple_attachments.msg", 3),
        ("common-test_messages/ebxml_request_no_encoding.msg", 2),
        ("common-test_messages/ebxml_request_one_7bit_attachment.msg", 2),
        ("common-test_messages/ebxml_request_one_binary_attachment.msg", 2),
        ("common-test_messages/ebxml_request_one_external_attachment.msg", 1),
        ("common-test_messages/ebxml_request_payload_defect.msg", 1),
        ("inbound-messages/ebxml_unknown_ref_to.msg", 2),
    ],
)
def test_nhs_attachment_counts(name: str, count: int) -> None:
    require_shared()
    unterminated = name.rsplit("/", 1)[-1] in NHS_UNTERMINATED
    with parse_package(nhs_message(name)[0], NHS_CT, lenient=True, allow_unterminated=unterminated) as pkg:
        assert len(pkg.attachments) == count


def test_nhs_multiple_attachments_contents() -> None:
    require_shared()
    data, _ = nhs_message("common-test_messages/ebxml_request_multiple_attachments.msg")
    with parse_package(data, NHS_CT, lenient=True) as pkg:
        hl7, text, png = pkg.attachments
        assert hl7.content_id == "C614484E-4B10-499A-9ACD-5D645CFACF61@spine.nhs.uk"
        assert hl7.body.read_bytes() == b'<hl7:MCCI_IN010000UK13 xmlns:hl7="urn:hl7-org:v3"/>'
        assert (text.media_type, text.body.read_bytes()) == ("text/plain", b"Some payload")
        assert (png.media_type, png.transfer_encoding) == ("image/png", "base64")
        assert png.body.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
        assert png.body.size == 68
        assert pkg.attachment("cid:8F1D7DE1-02AB-48D7-A797-A947B09F347F@spine.nhs.uk") is text


def test_nhs_binary_8bit_and_multibyte_payloads_keep_their_bytes() -> None:
    require_shared()
    cases = {
        "ebxml_request_one_binary_attachment.msg": b"Some payload which has a binary encoding.",
        "ebxml_request_one_8bit_attachment.msg": b"Some payload",
        "ebxml_request_multibyte_character.msg": "<xml>\u00ac \u2764\ufe0f \U0001f9f8</xml>".encode(),
    }
    for name, content in cases.items():
        data, _ = nhs_message(f"common-test_messages/{name}")
        with parse_package(data, NHS_CT, lenient=True) as pkg:
            assert pkg.attachments[-1].body.read_bytes() == content, name


def test_nhs_compressed_payloads_decode_to_gzip() -> None:
    require_shared()
    data, _ = nhs_message("common-test_messages/ebxml_request_one_attachment_text_plain_content_compressed.msg")
    with parse_package(data, NHS_CT, lenient=True) as pkg:
        text = gzip.decompress(pkg.attachments[-1].body.read_bytes())
        assert text.startswith(b"There must be some kind of way outta here")
    with pytest.raises(MimeProblemError) as info:  # the stray quotes are an error in strict mode
        parse_package(data, NHS_CT.replace('"', "") + '; type="text/xml"', lenient=False)
    assert "bare LF" in info.value.description or "base64" in info.value.description


def test_nhs_payload_defect_is_read_like_the_nhs_mhs_reads_it() -> None:
    require_shared()
    data, _ = nhs_message("common-test_messages/ebxml_request_payload_defect.msg")
    with parse_package(data, NHS_CT, lenient=True) as pkg:
        assert pkg.attachments[0].body.read_bytes() == b"mock-payload"
        assert pkg.attachments[0].content_id == "C614484E-4B10-499A-9ACD-5D645CFACF61@spine.nhs.uk"


def test_nhs_crlf_message_is_valid_in_strict_mode() -> None:
    require_shared()
    data, _ = nhs_message("common-test_messages/ebxml_request_multibyte_character.msg")
    content_type = 'multipart/related; type="text/xml"; boundary="--=_MIME-Boundary"; start="<ContentRoot>"'
    with parse_package(data, content_type) as pkg:
        assert pkg.warnings == ()
        assert pkg.start.content_id == "ContentRoot"
        assert len(pkg.attachments) == 1


@pytest.mark.parametrize(
    "name",
    [
        "common-test_messages/ebxml_request.msg",
        "common-test_messages/ebxml_request_multiple_attachments.msg",
        "inbound-messages/ebxml_unsolicited.msg",
    ],
)
def test_nhs_full_header_and_sniffed_boundary(name: str) -> None:
    require_shared()
    data, _ = nhs_message(name)
    with (
        parse_package(data, NHS_FULL_CT, lenient=True) as full,
        parse_package(data, None, lenient=True) as sniffed,
    ):
        assert full.start.content_id == sniffed.start.content_id == "ebXMLHeader@spine.nhs.uk"
        assert "the start parameter is not in <...> Content-ID form (RFC 2387 §3.2)" in warning_texts(full)
        assert any("no Content-Type" in w for w in warning_texts(sniffed))
        assert sniffed.boundary == "--=_MIME-Boundary"
        assert [a.body.read_bytes() for a in full.attachments] == [a.body.read_bytes() for a in sniffed.attachments]


# ------------------------------------------------------------------------------------------- PHIN-MS

PHINMS_EXPECTED = {
    "ping.txt": ("ebxml-envelope@slhw0224.ad.slh.wisc.edu", []),
    "request.txt": ("ebxml-envelope@slhw0224.ad.slh.wisc.edu", [b"hi \r\n"]),
    "testrequest.txt": ("ebxml-envelope@slhw0224.ad.slh.wisc.edu", [b"hi \r\n"]),
    "request2.txt": ("ebxml-envelope@shrek.eau.wi.charter.com", [b"<EncryptedData"]),
    "response.txt": ("ebxml-envelope@cdc.gov", [b"<response><msh_response><status>InsertSucceeded"]),
    "responsef.txt": ("ebxml-envelope@cdc.gov", [b"<response>\n  <msh_response>"]),
}


@pytest.mark.parametrize("name", PHINMS_FILES)
def test_every_phinms_capture_parses_in_lenient_mode(name: str) -> None:
    require_shared()
    headers, body = split_capture((MESSAGES / "phinms" / "examples" / name).read_bytes())
    content_type = headers["content-type"]
    with parse_package(body, content_type, lenient=True) as pkg:
        warnings = warning_texts(pkg)
        assert "bare LF line endings instead of CRLF" in warnings
        assert pkg.start.media_type == "text/xml"
        assert pkg.start.body.read_bytes().lstrip().startswith((b"<?xml", b"<soap-env:Envelope"))
        boundary = re.search(r'boundary="([^"]+)"', content_type)
        assert boundary
        expected = independent_parts(body, boundary.group(1).encode())
        assert len(pkg.attachments) == len(expected) - 1
        for part, (part_headers, raw) in zip(pkg.attachments, expected[1:], strict=True):
            assert part.body.read_bytes() == expected_content(part_headers, raw)
        if name in PHINMS_EXPECTED:
            soap_id, prefixes = PHINMS_EXPECTED[name]
            assert pkg.start.content_id == soap_id
            assert len(pkg.attachments) == len(prefixes)
            for part, prefix in zip(pkg.attachments, prefixes, strict=True):
                assert part.body.read_bytes().startswith(prefix)


def test_phinms_base64_payload_and_start_without_brackets() -> None:
    require_shared()
    headers, body = split_capture((MESSAGES / "phinms" / "examples" / "request.txt").read_bytes())
    with parse_package(body, headers["content-type"], lenient=True) as pkg:
        (payload,) = pkg.attachments
        assert payload.content_id == "TheDestinationName@slhw0224.ad.slh.wisc.edu"
        assert payload.media_type == "application/octet-stream"
        assert payload.header("Content-Disposition") == 'attachment; name="TheDestinationName"'
        assert payload.body.read_bytes() == b"hi \r\n"
        assert any("start parameter" in w for w in warning_texts(pkg))
    with pytest.raises(MimeProblemError, match="start parameter"):
        parse_package(body, headers["content-type"])
