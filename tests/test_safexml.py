"""Hardened XML parsing: hostile documents end in a clean error, never a file read or a blow-up."""

from __future__ import annotations

import pytest

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
