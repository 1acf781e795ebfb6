"""Content-Transfer-Encodings (RFC 2045 §6): streaming decoders for the reader and encoders for the writer,
each fed the content in chunks, whatever the chunk edges cut."""

from __future__ import annotations

import binascii
import re
from typing import Final

from msh.ebms.mime.report import Report, fail

__all__ = ["ENCODINGS", "Coding", "decoder_for", "encoder_for"]


_B64_ALPHABET: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
_B64_SPACE: Final = b" \t\r\n"
_B64_JUNK: Final = bytes(c for c in range(256) if c not in _B64_ALPHABET)
_B64_LINE_BYTES: Final = 57  # 57 octets -> 76 base64 characters, RFC 2045 §6.8 line length
_B64_LINE_CHARS: Final = 76

# RFC 2045 §6.1: the Content-Transfer-Encoding mechanisms this codec reads and writes.
ENCODINGS: Final = frozenset({"7bit", "8bit", "binary", "base64", "quoted-printable"})


class Coding:
    """A transfer coding fed the content chunk by chunk: here the identity, which decodes and encodes 8bit
    and binary content (RFC 2045 §6.2: their content is the content); the subclasses decode or encode."""

    __slots__ = ()

    def feed(self, data: bytes) -> bytes:
        """The next chunk decoded (or encoded); a subclass may keep the end of it back for the next one."""
        return data

    def finish(self) -> bytes:
        """What was kept back, once the content has ended."""
        return b""


class _SevenBitDecoder(Coding):
    """7bit content is US-ASCII (RFC 2045 §2.7); 8-bit octets in it are a deviation."""

    __slots__ = ("_location", "_report", "_seen")

    def __init__(self, report: Report, location: str) -> None:
        self._report = report
        self._location = location
        self._seen = False

    def feed(self, data: bytes) -> bytes:
        if not self._seen and not data.isascii():
            self._seen = True
            self._report.deviation("8-bit data in a part declared 7bit (RFC 2045 §2.7)", self._location)
        return data


class _Base64Decoder(Coding):
    """Streaming base64 decoding (RFC 2045 §6.8), four characters at a time across chunk edges."""

    __slots__ = ("_carry", "_location", "_padded", "_report")

    def __init__(self, report: Report, location: str) -> None:
        self._report = report
        self._location = location
        self._carry = b""
        self._padded = False

    def feed(self, data: bytes) -> bytes:
        spaced = data.translate(None, _B64_SPACE)
        clean = spaced.translate(None, _B64_JUNK)
        if len(clean) != len(spaced):
            # RFC 2045 §6.8: characters outside the alphabet are to be ignored (strict mode: an error).
            self._report.deviation("characters outside the base64 alphabet in the content", self._location)
        if not clean:
            return b""
        if self._padded:
            fail("invalid base64 content: data after the final '=' padding", self._location)
        buf = self._carry + clean
        usable = len(buf) // 4 * 4
        self._carry = buf[usable:]
        return self._decode(buf[:usable])

    def _decode(self, block: bytes) -> bytes:
        if not block:
            return b""
        if b"=" in block[-2:]:
            self._padded = True
            if self._carry:
                fail("invalid base64 content: data after the final '=' padding", self._location)
        try:
            return binascii.a2b_base64(block, strict_mode=True)
        except binascii.Error as exc:
            fail(f"invalid base64 content: {exc}", self._location)

    def finish(self) -> bytes:
        carry, self._carry = self._carry, b""
        if not carry:
            return b""
        if len(carry) == 1 or b"=" in carry:
            fail("invalid base64 content: truncated (length not a multiple of 4)", self._location)
        # RFC 2045 §6.8: the final quantum is padded with '='.
        self._report.deviation("base64 content without its final '=' padding", self._location)
        return self._decode(carry + b"=" * (4 - len(carry)))


class _QuotedPrintableDecoder(Coding):
    """Streaming quoted-printable decoding (RFC 2045 §6.7); an escape cut by a chunk edge waits."""

    __slots__ = ("_carry",)

    def __init__(self) -> None:
        self._carry = b""

    def feed(self, data: bytes) -> bytes:
        buf = self._carry + data if self._carry else data
        cut = buf.rfind(b"=", max(len(buf) - 2, 0))
        if cut >= 0:
            self._carry = buf[cut:]
            buf = buf[:cut]
        else:
            self._carry = b""
        return binascii.a2b_qp(buf)

    def finish(self) -> bytes:
        carry, self._carry = self._carry, b""
        return binascii.a2b_qp(carry) if carry else b""


def decoder_for(encoding: str, report: Report, location: str) -> Coding:
    """The decoder of a part's content transfer-encoded as ``encoding`` (lower case); an unknown one is an error."""
    # RFC 2045 §6.1: the Content-Transfer-Encoding mechanisms.
    if encoding in ("8bit", "binary"):
        return Coding()
    if encoding == "7bit":
        return _SevenBitDecoder(report, location)
    if encoding == "base64":
        return _Base64Decoder(report, location)
    if encoding == "quoted-printable":
        return _QuotedPrintableDecoder()
    fail(f"unknown Content-Transfer-Encoding {encoding!r}", location)


class _SevenBitEncoder(Coding):
    __slots__ = ("_cid",)

    def __init__(self, cid: str) -> None:
        self._cid = cid

    def feed(self, data: bytes) -> bytes:
        # RFC 2045 §2.7: 7bit data is US-ASCII with no NUL octets.
        if not data.isascii() or b"\x00" in data:
            raise ValueError(f"attachment <{self._cid}>: content is not 7-bit (use 8bit, binary or base64)")
        return data


class _Base64Encoder(Coding):
    """Streaming base64 with 76-character lines separated by CRLF (RFC 2045 §6.8)."""

    __slots__ = ("_carry", "_started")

    def __init__(self) -> None:
        self._carry = b""
        self._started = False

    def _lines(self, block: bytes) -> bytes:
        if not block:
            return b""
        enc = binascii.b2a_base64(block, newline=False)
        text = b"\r\n".join([enc[i : i + _B64_LINE_CHARS] for i in range(0, len(enc), _B64_LINE_CHARS)])
        if self._started:
            text = b"\r\n" + text
        self._started = True
        return text

    def feed(self, data: bytes) -> bytes:
        buf = self._carry + data if self._carry else data
        usable = len(buf) // _B64_LINE_BYTES * _B64_LINE_BYTES
        self._carry = buf[usable:]
        return self._lines(buf[:usable])

    def finish(self) -> bytes:
        carry, self._carry = self._carry, b""
        return self._lines(carry)


class _QuotedPrintableEncoder(Coding):
    """Quoted-printable (RFC 2045 §6.7) of binary-safe content: every CR and LF is escaped, so the
    content round-trips octet for octet; chunks are joined by soft line breaks."""

    __slots__ = ("_started",)

    def __init__(self) -> None:
        self._started = False

    def feed(self, data: bytes) -> bytes:
        if not data:
            return b""
        enc = binascii.b2a_qp(data, quotetabs=False, istext=False, header=False)
        enc = enc.replace(b"\r\n", b"\n")
        if _QP_LONG_LINE.search(enc):
            enc = _shorten_qp_lines(enc)
        # Literal line breaks in the output are soft line breaks only: make them CRLF.
        enc = enc.replace(b"\n", b"\r\n")
        if self._started:
            enc = b"=\r\n" + enc
        self._started = True
        return enc


# RFC 2045 §6.7 rule 5: encoded lines are at most 76 characters, the soft line break "=" included
# (binascii.b2a_qp can make 77 when a tab precedes the break).
_QP_LONG_LINE: Final = re.compile(rb"[^\n]{77,}")


def _shorten_qp_lines(enc: bytes) -> bytes:
    out: list[bytes] = []
    for line in enc.split(b"\n"):
        soft = line.endswith(b"=")
        rest = line[:-1] if soft else line
        while len(rest) + (1 if soft else 0) > _B64_LINE_CHARS:
            cut = _B64_LINE_CHARS - 1
            if rest[cut - 1 : cut] == b"=":
                cut -= 1
            elif rest[cut - 2 : cut - 1] == b"=":
                cut -= 2
            out.append(rest[:cut] + b"=")
            rest = rest[cut:]
        out.append(rest + b"=" if soft else rest)
    return b"\n".join(out)


def encoder_for(encoding: str, cid: str) -> Coding:
    """The encoder for ``encoding`` (one of :data:`ENCODINGS`, lower case) of attachment ``cid``."""
    if encoding in ("binary", "8bit"):
        return Coding()
    if encoding == "7bit":
        return _SevenBitEncoder(cid)
    if encoding == "base64":
        return _Base64Encoder()
    return _QuotedPrintableEncoder()
