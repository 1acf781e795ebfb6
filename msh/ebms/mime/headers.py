"""MIME header syntax: Content-Type values (RFC 2045 §5.1), boundaries, header field names, Content-IDs, and
what the headers of a part say (:class:`PartInfo`)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Final

__all__ = [
    "BOUNDARY_RE",
    "FIELD_NAME_RE",
    "TOKEN_RE",
    "PartInfo",
    "decode_header",
    "parse_content_type",
    "strip_angle",
]


# RFC 2046 §5.1.1: the boundary is 1 to 70 characters from bchars, not ending with a space.
BOUNDARY_RE: Final = re.compile(r"[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]")
# RFC 5322 §2.2: a field name is printable US-ASCII except the colon.
FIELD_NAME_RE: Final = re.compile(rb"[\x21-\x39\x3b-\x7e]+")
# RFC 2045 §5.1: a token (a parameter value such as a charset name, unquoted).
TOKEN_RE: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


# RFC 2045 §5.1: parameter := attribute "=" value, value := token / quoted-string (RFC 822 quoted-pairs);
# tolerant: an unterminated quoted string runs to the end, junk after a value up to the next ";" is dropped.
_PARAM_RE: Final = re.compile(r'([^=;]*)(?:=\s*("(?:[^"\\]|\\.)*"?|[^;"]*)[^;]*)?(?:;|\Z)', re.DOTALL)
_QUOTED_PAIR_RE: Final = re.compile(r"\\(.)", re.DOTALL)


def parse_content_type(value: str) -> tuple[str, dict[str, str]]:
    """Split a Content-Type value into its lower-case media type and its parameters.

    RFC 2045 §5.1: ``type/subtype *(; attribute=value)``, attribute names case-insensitive (returned
    lower-case), values tokens or quoted strings (returned unquoted). Robust to missing quotes around
    values that need them (``start=id@host``), extra spaces, any parameter order and empty pieces; the
    first occurrence of a repeated parameter wins. Never raises.
    """
    media, params = _parse_content_type(value)
    return media, dict(params)


@functools.lru_cache(maxsize=1024)
def _parse_content_type(value: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    # Cached: a partner sends the same few Content-Type values over and over.
    media, _, rest = value.partition(";")
    media = "".join(media.split()).lower()
    params: dict[str, str] = {}
    for match in _PARAM_RE.finditer(rest):
        name, raw = match.group(1).strip().lower(), match.group(2)
        if not name or raw is None:
            continue
        if name in params:
            continue
        if raw.startswith('"'):
            inner = raw[1:-1] if len(raw) > 1 and raw.endswith('"') and not _ends_escaped(raw) else raw[1:]
            params[name] = _QUOTED_PAIR_RE.sub(r"\1", inner) if "\\" in inner else inner
        else:
            params[name] = raw.strip()
    return media, tuple(params.items())


def _ends_escaped(raw: str) -> bool:
    """True when the final quote of ``raw`` is escaped by an odd number of backslashes."""
    count = len(raw) - 1 - len(raw[:-1].rstrip("\\"))
    return count % 2 == 1


def strip_angle(value: str) -> str:
    """``value`` without surrounding white space and ``<...>`` (a Content-ID as written in a header)."""
    value = value.strip()
    if value.startswith("<") and value.endswith(">"):
        value = value[1:-1].strip()
    return value


def decode_header(raw: bytes) -> str:
    """A header value as text: UTF-8 where it is, else Latin-1 (which never fails)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


@dataclass(frozen=True, slots=True)
class PartInfo:
    """What the headers of a part say."""

    content_id: str | None
    content_type: str
    media_type: str
    charset: str | None
    transfer_encoding: str

    @property
    def location(self) -> str:
        """``cid:<content_id>``, the error location of the part (empty without a Content-ID)."""
        return f"cid:{self.content_id}" if self.content_id else ""

    @classmethod
    def of(cls, headers: list[tuple[str, str]]) -> PartInfo:
        """What ``headers`` (a part's headers, in order) say, with the defaults of RFC 2045."""
        content_id: str | None = None
        content_type: str | None = None
        encoding: str | None = None
        for name, value in headers:
            key = name.lower()
            # RFC 2045 §3: header names are case-insensitive; the first occurrence counts.
            if key == "content-id" and content_id is None:
                content_id = strip_angle(value) or None
            elif key == "content-type" and content_type is None:
                content_type = value
            elif key == "content-transfer-encoding" and encoding is None:
                encoding = value
        if content_type is None:
            # RFC 2045 §5.2: the default Content-Type.
            content_type = "text/plain; charset=us-ascii"
        media, params = parse_content_type(content_type)
        charset = (params.get("charset") or "").strip() or None
        # RFC 2045 §6.1: the default Content-Transfer-Encoding is 7bit; values are case-insensitive.
        cte = "7bit" if encoding is None else encoding.strip().strip('"').strip().lower()
        return cls(content_id, content_type, media, charset, cte)
