"""Hardened XML parsing: hostile documents end in a clean error, never a file read or a blow-up."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import pytest
from lxml import etree

from msh.errors import EnvelopeError, ErrorCode
from msh.safexml import XmlLimits, parse_xml

XXE = b"""<?xml version="1.0"?>
<!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<foo>&xxe;</foo>"""

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol9 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
]>
<lolz>&lol9;</lolz>"""

EXTERNAL_DTD = b'<?xml version="1.0"?><!DOCTYPE foo SYSTEM "http://127.0.0.1:9/evil.dtd"><foo/>'


@pytest.mark.parametrize("doc", [XXE, BILLION_LAUGHS, EXTERNAL_DTD], ids=["xxe", "billion-laughs", "external-dtd"])
def test_dtds_are_refused(doc: bytes) -> None:
    with pytest.raises(EnvelopeError) as exc:
        parse_xml(doc, what="SOAP envelope")
    assert exc.value.error_code is ErrorCode.OTHER_XML
    assert "DTD" in exc.value.description
    assert "root:" not in str(exc.value)  # nothing of /etc/passwd leaked


def test_utf16_doctype_is_refused_too() -> None:
    with pytest.raises(EnvelopeError):
        parse_xml(
            XXE.replace(b'<?xml version="1.0"?>', b'<?xml version="1.0" encoding="UTF-16"?>').decode().encode("utf-16")
        )


def test_size_limit() -> None:
    with pytest.raises(EnvelopeError, match="over the limit"):
        parse_xml(b"<a>" + b"x" * 2000 + b"</a>", limits=XmlLimits(max_bytes=1000))


def test_depth_limit() -> None:
    deep = b"<a>" * 10000 + b"</a>" * 10000
    with pytest.raises(EnvelopeError, match="not well-formed"):
        parse_xml(deep)


@pytest.mark.parametrize("doc", [b"", b"<a>", b"\x00\x01garbage", b"<a></b>", b"not xml at all"])
def test_malformed(doc: bytes) -> None:
    with pytest.raises(EnvelopeError) as exc:
        parse_xml(doc, what="SOAP envelope")
    assert exc.value.description.startswith("SOAP envelope")


def test_limits_validate() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        XmlLimits(max_bytes=0)


# -- declarations in any encoding, and no file access at all (a FIFO would block a parse forever)

ENCODINGS = ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "utf-7", "utf-8-sig"]


def _document(doctype: str, encoding: str) -> bytes:
    label = {"utf-8-sig": "UTF-8"}.get(encoding, encoding.upper())
    return f'<?xml version="1.0" encoding="{label}"?>{doctype}<r>&x;</r>'.encode(encoding)


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(
    "doctype",
    ['<!DOCTYPE r SYSTEM "{path}">', '<!DOCTYPE r [<!ENTITY % p SYSTEM "{path}"> %p;]>'],
    ids=["external-dtd", "external-parameter-entity"],
)
def test_declarations_are_refused_in_every_encoding_and_nothing_is_opened(
    tmp_path: Path, encoding: str, doctype: str
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    data = _document(doctype.format(path=fifo), encoding)
    outcome: list[BaseException | None] = []

    def parse() -> None:
        try:
            parse_xml(data, what="SOAP envelope")
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=parse, daemon=True)
    thread.start()
    thread.join(30)
    if thread.is_alive():  # release the reader blocked on the FIFO, then fail
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"parsing a {encoding} document opened {fifo} and blocked")
    assert isinstance(outcome[0], EnvelopeError), outcome
    assert "DTD" in outcome[0].description


def test_the_parser_itself_opens_no_file_even_past_the_text_check(tmp_path: Path) -> None:
    # Defence in depth: were a declaration to slip past the text check, libxml2 still loads nothing:
    # neither a file (its entity would appear in the tree) nor a FIFO (the parse would block).
    from msh import safexml

    secret = tmp_path / "secret.dtd"
    secret.write_text('<!ENTITY x "leaked">', encoding="utf-8")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    results: list[str] = []

    def parse(path: Path) -> None:
        document = f'<!DOCTYPE r [<!ENTITY % p SYSTEM "{path.as_uri()}"> %p;]><r>&x;</r>'.encode()
        try:
            results.append(etree.tostring(etree.fromstring(document, safexml._parser())).decode())
        except Exception as exc:
            results.append(f"refused: {exc}")

    for path in (secret, fifo):
        thread = threading.Thread(target=parse, args=(path,), daemon=True)
        thread.start()
        thread.join(30)
        if thread.is_alive():
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            pytest.fail(f"the parser opened {path} and blocked")
    assert len(results) == 2
    assert not any("leaked" in r for r in results), results


@pytest.mark.parametrize("label", ["undefined", "punycode", "unicode_escape", "base64", "rot13", "no-such-encoding"])
def test_an_encoding_that_is_not_text_is_refused_cleanly(label: str) -> None:
    with pytest.raises(EnvelopeError) as exc:
        parse_xml(f'<?xml version="1.0" encoding="{label}"?><r/>'.encode("ascii"), what="SOAP envelope")
    assert exc.value.error_code is ErrorCode.OTHER_XML
    assert label in exc.value.description


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "iso-8859-1", "utf-8"])
def test_documents_in_other_encodings_still_parse(encoding: str) -> None:
    root = parse_xml(f'<?xml version="1.0" encoding="{encoding}"?><r>café</r>'.encode(encoding))
    assert root.text == "café"


def test_ebcdic_is_refused() -> None:
    with pytest.raises(EnvelopeError, match="EBCDIC"):
        parse_xml('<?xml version="1.0" encoding="IBM500"?><r/>'.encode("cp500"))
