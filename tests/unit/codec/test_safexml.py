"""Hardened XML parsing: hostile documents end in a clean error, never a file read or a blow-up."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from lxml import etree

from msh import safexml
from msh.errors import EnvelopeError, ErrorCode, Severity
from msh.safexml import XmlLimits, detect_encoding, parse_xml

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


# -- every node counted (XML 1.0 §2.1: document ::= prolog element Misc*; §2.8: the prolog's Misc are comments
# and processing instructions). A breach is refused like the other limits: ebMS2 §4.2.3.4.1 OtherXml, at "/".

_ROOT = b"<r><a/></r>"


def _refused(doc: bytes, limits: XmlLimits | None = None) -> EnvelopeError:
    with pytest.raises(EnvelopeError) as exc:
        parse_xml(doc, what="SOAP envelope", limits=limits or XmlLimits())
    assert exc.value.error_code is ErrorCode.OTHER_XML
    assert exc.value.severity is Severity.ERROR
    assert exc.value.location == "/"
    return exc.value


def test_the_libxml2_memory_of_a_refused_document_stays_small() -> None:
    # XML 1.0 §2.8: 14 MB of prolog comments (2 million nodes, about 300 MB once built) are refused before
    # libxml2 builds them: the process's peak resident size grows by far less than the document.
    script = (
        "import resource\n"
        "from msh.safexml import parse_xml\n"
        "from msh.errors import EnvelopeError\n"
        "doc = b'<!---->' * 2_000_000 + b'<r/>'\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n"
        "    parse_xml(doc)\n"
        "except EnvelopeError:\n"
        "    pass\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    grown_kib = int(done.stdout.strip())
    assert grown_kib < 32 * 1024, grown_kib


def test_prolog_and_epilog_nodes_count_as_the_documents_children() -> None:
    # XML 1.0 §2.1: the prolog's and the epilog's Misc are children of the document, counted like an element's.
    assert parse_xml(b"<!--a-->" * 100 + _ROOT + b"<?p?>" * 100).tag == "r"
    assert "around its root element" in _refused(b"<!--a-->" * 200 + _ROOT + b"<?p?>" * 200).description
    assert "around its root element" in _refused(b"<?p?>" * 300 + _ROOT).description
    assert "around its root element" in _refused(_ROOT + b"<!---->" * 300).description


def test_the_prolog_is_counted_in_utf16_too() -> None:
    # XML 1.0 Appendix F: the same document in UTF-16 (where the text check decodes before it counts).
    doc = ('<?xml version="1.0" encoding="UTF-16"?>' + "<!---->" * 100_000 + "<r/>").encode("utf-16")
    assert "around its root element" in _refused(doc).description


def test_the_node_limit_is_exact() -> None:
    # One root with 99 children and nothing around it: 100 nodes.
    doc = b"<r>" + b"<a/>" * 50 + b"<!---->" * 30 + b"<?p?>" * 19 + b"</r>"
    limits = XmlLimits(max_nodes=100)
    assert len(parse_xml(doc, limits=limits)) == 99
    assert "more than 99 nodes" in _refused(doc, XmlLimits(max_nodes=99)).description
    # The same with one comment moved before the root: still 100 nodes, counted by the counting parser.
    moved = b"<!---->" + doc.replace(b"<!---->", b"", 1)
    assert parse_xml(moved, limits=limits).tag == "r"
    assert "more than 99 nodes" in _refused(moved, XmlLimits(max_nodes=99)).description


def test_an_agreement_counts_its_prolog_too(tmp_path: Path) -> None:
    # The agreement loader reads through the same parser: comments before the root are refused there too.
    from cpa.errors import CpaError
    from cpa.loader import load

    path = tmp_path / "a.xml"
    path.write_bytes(b"<!---->" * 2_000_000 + b"<tp:CollaborationProtocolAgreement/>")
    with pytest.raises(CpaError) as exc:
        load(path)
    assert "nodes" in str(exc.value) or "around its root element" in str(exc.value), str(exc.value)


@pytest.mark.parametrize(
    ("doc", "limits", "says"),
    [
        (b'<r a="1" b="2" c="3"/>', XmlLimits(max_attributes=2), b"attributes"),
        (b'<r xmlns:a="u:a" xmlns:b="u:b" xmlns:c="u:c"/>', XmlLimits(max_namespace_declarations=2), b"namespaces"),
        (b"<r><a/><b/><c/></r>", XmlLimits(max_children=2), b"children"),
        (b"<!--1--><!--2--><r/>", XmlLimits(max_children=2), b"children"),
    ],
    ids=["attributes", "namespaces", "children", "around-root"],
)
def test_a_small_document_is_still_held_to_every_limit(doc: bytes, limits: XmlLimits, says: bytes) -> None:
    # A document whose "<", "=" and "xmlns" counts are within the limits skips the node walk; one that is
    # over any of them, however short, is walked and refused.
    with pytest.raises(EnvelopeError) as raised:
        parse_xml(doc, limits=limits)
    assert says.decode() in str(raised.value)
    parse_xml(doc)  # the same document within the default limits


@pytest.mark.parametrize(
    ("doc", "limits"),
    [
        (b'<?xml version="1.0" encoding="UTF-8"?><r><a/></r>', XmlLimits()),
        ('<?xml version="1.0" encoding="UTF-16"?><r>café</r>'.encode("utf-16"), XmlLimits()),
        ('<?xml version="1.0" encoding="ISO-8859-15"?><r>€</r>'.encode("iso-8859-15"), XmlLimits()),
        (b"<!--a--><r>" + b"<a/>" * 10 + b"</r><?p?>", XmlLimits(max_nodes=5)),  # the counting parser
        ('<?xml version="1.0" encoding="UTF-16"?><!--a--><r><a/><a/></r>'.encode("utf-16"), XmlLimits(max_nodes=1)),
    ],
    ids=["utf-8", "utf-16", "latin-9", "counting", "counting-utf-16"],
)
def test_the_encoding_is_detected_once_per_document(
    doc: bytes, limits: XmlLimits, monkeypatch: pytest.MonkeyPatch
) -> None:
    """XML 1.0 Appendix F: the DTD check, the choice of parser and the count around the root all use the
    encoding detected once."""
    calls: list[bytes] = []

    def counted(data: bytes) -> str:
        calls.append(data)
        return detect_encoding(data)

    monkeypatch.setattr(safexml, "detect_encoding", counted)
    with contextlib.suppress(EnvelopeError):  # the counting cases are over their node limit
        parse_xml(doc, limits=limits)
    assert calls == [doc]
