"""How fuzzing changes an input: :class:`Mutator`, byte-level changes (flips, inserted, deleted and repeated
ranges, splices of two seeds) and structure-aware ones (an element repeated thousands of times, many
namespace declarations or attributes, comments and processing instructions by the thousand before and after
the root element, junk after the message, another encoding or charset, a DOCTYPE, deep nesting, a broken
MIME boundary or transfer encoding, an odd Content-Type), from a seeded source so that a run can be replayed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Final

from msh.faults.fuzz.seeds import Seed

__all__ = ["Mutator"]

_TAG: Final = re.compile(rb"<([A-Za-z_][\w.:-]*)[^<>]*?/?>")
_CHARSET: Final = re.compile(rb"charset=\"?[\w.:-]+\"?", re.IGNORECASE)
_BOUNDARY_LINE: Final = re.compile(rb"\r?\n--[^\r\n]+")
_CONTENT_TYPES: Final = (
    "multipart/related",
    'multipart/related; boundary=""',
    'multipart/related; type="text/xml"; boundary="x"; start="<nope>"',
    "text/xml",
    'text/xml; charset="undefined"',
    'text/xml; charset="utf-16"',
    'text/xml; charset="punycode"',
    "application/soap+xml",
    "text/plain",
    "",
    "multipart/related; boundary=" + "b" * 5000,
    'text/xml; charset="\x00"',
)
_TEXT_VALUE: Final = re.compile(rb">([^<>]{1,200})</|=\"([^\"<>]{1,200})\"")
_VALUES: Final = (
    b"P99999999999999999999Y",
    b"PT99999999999999999999999S",
    b"-P1D",
    b"P1M",
    b"P0D",
    b"9" * 400,
    b"-1",
    b"0",
    b"1e309",
    b"NaN",
    b"99999-12-31T23:59:59Z",
    b"0000-01-01T00:00:00Z",
    b"2026-02-30T25:61:61Z",
    b"true1",
    b"",
    b" ",
    b"cid:",
    b"urn:oasis:names:tc:ebxml-msg:actor:nextMSH",
    b"http://schemas.xmlsoap.org/soap/actor/next",
    b"\xc3\x28",
)
_NOISE: Final = (
    b"<!DOCTYPE r SYSTEM 'file:///etc/passwd'>",
    b"<!ENTITY x 'y'>",
    b"&x;",
    b"\x00",
    b"\xff\xfe",
    b"]]>",
    b"<![CDATA[",
    b"xmlns=''",
    b' xmlns:rel="relative/uri"',
    b"--",
    b"\r\n\r\n",
    b"Content-Transfer-Encoding: base64\r\n",
    b"Content-Transfer-Encoding: quoted-printable\r\n",
    b"=\r\n",
    b"=ZZ",
    b"\xef\xbb\xbf",
    b"eb:version='9.9'",
    b"SOAP:actor='urn:nowhere'",
    b"<eb:Reference xlink:href='cid:nowhere'/>",
    b"PT1M",
    b"P999999999999999999Y",
    b"-P1D",
    b"9999-12-31T23:59:59Z",
    b"0001-01-01T00:00:00-14:00",
)


class Mutator:
    """Changes inputs at random, from a seeded random source (the same seed gives the same inputs)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def mutate(self, seed: Seed, others: Sequence[Seed], rounds: int | None = None) -> tuple[bytes, str]:
        """``seed`` changed 1 to 4 times (``rounds``), and its Content-Type now and then."""
        data, content_type = seed.data, seed.content_type
        for _ in range(rounds if rounds is not None else self.rng.randint(1, 4)):
            data = self.rng.choice(self._operators)(self, data, others)
        if seed.content_type and self.rng.random() < 0.1:
            content_type = self.rng.choice(_CONTENT_TYPES)
        return data, content_type

    # -- byte level

    def _flip(self, data: bytes, others: Sequence[Seed]) -> bytes:
        if not data:
            return b"\x00"
        buf = bytearray(data)
        for _ in range(self.rng.randint(1, 8)):
            i = self.rng.randrange(len(buf))
            buf[i] ^= 1 << self.rng.randrange(8)
        return bytes(buf)

    def _delete(self, data: bytes, others: Sequence[Seed]) -> bytes:
        if len(data) < 2:
            return data
        i = self.rng.randrange(len(data))
        return data[:i] + data[i + self.rng.randint(1, max(1, len(data) // 8)) :]

    def _insert(self, data: bytes, others: Sequence[Seed]) -> bytes:
        i = self.rng.randrange(len(data) + 1)
        chunk = self.rng.choice(_NOISE) if self.rng.random() < 0.7 else self.rng.randbytes(self.rng.randint(1, 32))
        return data[:i] + chunk + data[i:]

    def _repeat(self, data: bytes, others: Sequence[Seed]) -> bytes:
        if not data:
            return data
        i = self.rng.randrange(len(data))
        j = min(len(data), i + self.rng.randint(1, 64))
        return data[:j] + data[i:j] * self.rng.choice((2, 10, 100, 1000)) + data[j:]

    def _truncate(self, data: bytes, others: Sequence[Seed]) -> bytes:
        return data[: self.rng.randrange(len(data) + 1)]

    def _splice(self, data: bytes, others: Sequence[Seed]) -> bytes:
        other = self.rng.choice(others).data if others else data
        i, j = self.rng.randrange(len(data) + 1), self.rng.randrange(len(other) + 1)
        return data[:i] + other[j:]

    # -- structure aware

    def _repeat_element(self, data: bytes, others: Sequence[Seed]) -> bytes:
        tags = list(_TAG.finditer(data))
        if not tags:
            return data
        tag = self.rng.choice(tags)
        element = tag.group(0)
        if not element.endswith(b"/>"):
            element = element[:-1] + b"/>"
        count = self.rng.choice((10, 300, 3000))
        return data[: tag.end()] + element * count + data[tag.end() :]

    def _namespaces(self, data: bytes, others: Sequence[Seed]) -> bytes:
        tags = list(_TAG.finditer(data))
        if not tags:
            return data
        tag = self.rng.choice(tags)
        count = self.rng.choice((5, 300, 3000))
        declarations = b"".join(b' xmlns:z%d="urn:z:%d"' % (i, i) for i in range(count))
        at = tag.start() + 1 + len(tag.group(1))
        return data[:at] + declarations + data[at:]

    def _attributes(self, data: bytes, others: Sequence[Seed]) -> bytes:
        tags = list(_TAG.finditer(data))
        if not tags:
            return data
        tag = self.rng.choice(tags)
        count = self.rng.choice((5, 300, 5000))
        attributes = b"".join(b' a%d="v"' % i for i in range(count))
        at = tag.start() + 1 + len(tag.group(1))
        return data[:at] + attributes + data[at:]

    def _nest(self, data: bytes, others: Sequence[Seed]) -> bytes:
        tags = list(_TAG.finditer(data))
        if not tags:
            return data
        tag = self.rng.choice(tags)
        depth = self.rng.choice((50, 300, 3000))
        return data[: tag.end()] + b"<n>" * depth + b"</n>" * depth + data[tag.end() :]

    def _encoding(self, data: bytes, others: Sequence[Seed]) -> bytes:
        encoding = self.rng.choice(("utf-16", "utf-16-be", "utf-32", "utf-7", "latin-1", "cp500"))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        text = re.sub(r"encoding=['\"][^'\"]*['\"]", f"encoding='{encoding}'", text, count=1)
        try:
            return text.encode(encoding)
        except UnicodeEncodeError:
            return data

    def _charset(self, data: bytes, others: Sequence[Seed]) -> bytes:
        value = self.rng.choice((b"undefined", b"punycode", b"unicode_escape", b"utf-16", b"x\x00y", b"base64"))
        return _CHARSET.sub(b'charset="' + value + b'"', data, count=1)

    def _value(self, data: bytes, others: Sequence[Seed]) -> bytes:
        values = list(_TEXT_VALUE.finditer(data))
        if not values:
            return data
        value = self.rng.choice(values)
        group = 1 if value.group(1) is not None else 2
        return data[: value.start(group)] + self.rng.choice(_VALUES) + data[value.end(group) :]

    def _boundary(self, data: bytes, others: Sequence[Seed]) -> bytes:
        lines = list(_BOUNDARY_LINE.finditer(data))
        if not lines:
            return data
        line = self.rng.choice(lines)
        replacement = self.rng.choice((b"", b"\r\n--other", line.group(0) + b"--", line.group(0) * 3))
        return data[: line.start()] + replacement + data[line.end() :]

    def _around_root(self, data: bytes, others: Sequence[Seed]) -> bytes:
        """Comments or processing instructions before the first element or after the envelope's end tag
        (XML 1.0 §2.1: the prolog and the epilog)."""
        node = self.rng.choice((b"<!---->", b"<!-- c -->", b"<?p?>", b"<?pi data?>"))
        many = node * self.rng.choice((10, 300, 100_000))
        end = data.rfind(b"Envelope>")
        if end >= 0 and self.rng.random() < 0.5:
            at = end + len(b"Envelope>")
        else:
            first = _TAG.search(data)
            if first is None:
                return data
            at = first.start()
        return data[:at] + many + data[at:]

    def _trailing(self, data: bytes, others: Sequence[Seed]) -> bytes:
        """Bytes after the whole message: after a package's close delimiter (RFC 2046 §5.1.1: the epilogue)
        or after a bare envelope."""
        junk = self.rng.choice((b"junk", b"\r\n--", b"<SOAP:Envelope/>", b"\x00\xff" * 100, b"\r\n" + b"x" * 70_000))
        return data + junk

    _operators: Final = (
        _flip,
        _delete,
        _insert,
        _repeat,
        _truncate,
        _splice,
        _repeat_element,
        _namespaces,
        _attributes,
        _nest,
        _encoding,
        _charset,
        _value,
        _boundary,
        _around_root,
        _trailing,
    )
