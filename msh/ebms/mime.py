"""SOAP-with-attachments packaging of ebXML messages (ebMS2 §2.1, [SOAPAttach], RFC 2387, RFC 2045/2046).

An ebXML Message Package is a ``multipart/related`` MIME body whose root part (the Header Container) is
the SOAP envelope and whose other parts are the payloads. This module reads and writes such packages as
*streams*: nothing ever holds a whole package in memory.

Reading (:func:`parse_package`)
    The body is read in chunks (64 KiB) into one bounded buffer; the delimiter ``CRLF--boundary`` is looked
    for across chunk edges; each part's content is decoded on the fly (base64, quoted-printable) and kept
    in memory up to :attr:`MimeLimits.spool_threshold` (and :attr:`MimeLimits.max_memory_bytes` for the
    whole package), beyond which it spills to one unnamed temporary file shared by the package. Every
    quantity an attacker controls is bounded by :class:`MimeLimits`; going over a bound is a
    :class:`~msh.errors.MimeProblemError`, never a crash or an unbounded allocation.

Strict and lenient mode
    In strict mode every deviation from the specifications raises :class:`~msh.errors.MimeProblemError`.
    In lenient mode the deviations real partners produce are accepted and reported as ``Warning`` issues
    in :attr:`MimePackage.warnings`:

    * no Content-Type for the package: the boundary is taken from the first ``--`` line of the body;
    * a multipart type other than ``related``: read like multipart/related;
    * the ``type`` parameter missing or not ``text/xml``: ignored;
    * ``start`` without angle brackets (``start=id@host``, as in ebMS2 §2.1.2's own example and as
      PHIN-MS and the NHS MHS send it): used as the Content-ID;
    * a boundary longer than 70 characters or with characters outside bchars: used (up to 256);
    * bare LF line endings (delimiters, part headers): accepted (one Warning per package);
    * a SOAP part typed ``application/soap+xml`` or ``application/xml``: accepted;
    * a SOAP part transfer-encoded as base64 or quoted-printable: decoded;
    * a non-header line where a part header was expected: taken as the start of the part body (as the
      Python ``email`` package, and so the NHS MHS, reads it);
    * characters outside the base64 alphabet: ignored (RFC 2045 §6.8); missing ``=`` padding: added;
    * 8-bit data in a part labelled ``7bit``: kept as is;
    * a closing delimiter without its trailing ``--`` at end of stream: taken as the closing delimiter (the
      last part's content is delimited, so complete).

    A missing ``charset`` on the SOAP part is *not* a deviation (ebMS2 §2.1.3.1: the charset MAY be
    present; §2.1.3.2: it has no default, the XML declaration or UTF-8 then applies): strict mode accepts
    it silently and lenient mode reports it as a Warning, ``charset`` being ``None`` either way.

    A package that ends without its closing delimiter is refused in both modes: its last payload may be
    cut short, and nothing else in an ebXML message tells (an Acknowledgment would tell the sender that
    a possibly truncated payload arrived whole, and it would stop resending). Lenient mode accepts it, with
    a Warning, only when asked to (``allow_unterminated``, the MSH setting
    ``receiving.accept_unterminated_packages``): one test fixture of the NHS MHS ends that way.

    Errors in both modes: not multipart, no boundary, no part found (wrong boundary), ``start`` naming no
    part, duplicate Content-IDs, too many parts, part headers too long, an unknown
    Content-Transfer-Encoding, invalid base64, a SOAP part that is not XML, a package, SOAP part or
    preamble over its limit, a stream that ends inside part headers.

    Error locations are ``cid:<Content-ID>`` for a problem with one part (ebMS2 §4.2.3.2.5) and empty for
    a problem with the package as a whole.

Writing (:func:`write_package`)
    The package is streamed to a binary output; attachment bodies are copied from their
    :class:`PartBody` in chunks (encoded on the fly) and never loaded whole.

Non-multipart ebXML messages (a bare SOAP envelope, ebMS2 §2.1.2) are not MIME packages and are handled by
the caller before this module is involved.
"""

from __future__ import annotations

import binascii
import functools
import io
import os
import re
import secrets
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, BinaryIO, Final, NoReturn
from urllib.parse import unquote

from msh.errors import ErrorCode, Issue, MimeProblemError, Severity

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

__all__ = [
    "AttachmentSpec",
    "MimeLimits",
    "MimePackage",
    "MimePart",
    "PartBody",
    "build_package",
    "parse_content_type",
    "parse_package",
    "write_package",
]

_CHUNK: Final = 64 * 1024
_KIB: Final = 1024
_MIB: Final = 1024 * 1024
_GIB: Final = 1024 * 1024 * 1024

# RFC 2046 §5.1.1: the boundary is 1 to 70 characters from bchars, not ending with a space.
_BOUNDARY_RE: Final = re.compile(r"[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]")
_LENIENT_BOUNDARY_MAX: Final = 256
# RFC 5322 §2.2: a field name is printable US-ASCII except the colon.
_FIELD_NAME_RE: Final = re.compile(rb"[\x21-\x39\x3b-\x7e]+")
_NON_SPACE_RE: Final = re.compile(rb"[^ \t\r\n]")
_TOKEN_RE: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")

_B64_ALPHABET: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
_B64_SPACE: Final = b" \t\r\n"
_B64_JUNK: Final = bytes(c for c in range(256) if c not in _B64_ALPHABET)
_B64_LINE_BYTES: Final = 57  # 57 octets -> 76 base64 characters, RFC 2045 §6.8 line length
_B64_LINE_CHARS: Final = 76

_ENCODINGS: Final = frozenset({"7bit", "8bit", "binary", "base64", "quoted-printable"})
_MAX_WARNINGS: Final = 100

# Results of looking at the bytes after a ``--boundary`` candidate.
_NEXT: Final = 1  # a delimiter: the next part follows
_CLOSE: Final = 2  # the close delimiter ``--boundary--``
_EOF_AFTER: Final = 3  # ``--boundary`` at the end of the stream, neither ``--`` nor a line break after it
_NOT: Final = 4  # not a delimiter (the boundary followed by other characters)
_MORE: Final = 5  # cannot tell yet: more input needed
_EOF: Final = 6  # end of stream before any delimiter


# ---------------------------------------------------------------------------------------------- limits


@dataclass(frozen=True, slots=True)
class MimeLimits:
    """Bounds on what :func:`parse_package` accepts; each one exceeded is a :class:`MimeProblemError`.

    ``max_parts`` counts every part, the SOAP part included. ``spool_threshold`` is how much of one part's
    decoded content is kept in memory before the part spills to the package's temporary file;
    ``max_memory_bytes`` caps the in-memory content of all parts of one package together (beyond it every
    further part goes to the temporary file from its first byte). ``max_preamble_bytes`` bounds the bytes
    before the first delimiter (a wrong boundary fails after that many bytes, not at end of stream).
    """

    max_parts: int = 257  # the SOAP part and 256 payloads (a Manifest names at most 256: msh.safexml)
    max_header_bytes: int = 16 * _KIB
    max_total_bytes: int = 2 * _GIB
    max_soap_part_bytes: int = 16 * _MIB
    spool_threshold: int = 1 * _MIB
    max_memory_bytes: int = 8 * _MIB
    max_preamble_bytes: int = 64 * _KIB

    def __post_init__(self) -> None:
        for name in (
            "max_parts",
            "max_header_bytes",
            "max_total_bytes",
            "max_soap_part_bytes",
            "max_preamble_bytes",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"MimeLimits.{name} must be at least 1")
        for name in ("spool_threshold", "max_memory_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"MimeLimits.{name} must not be negative")


_DEFAULT_LIMITS: Final = MimeLimits()


# ------------------------------------------------------------------------------------------ part bodies


class _Spool:
    """One unnamed temporary file shared by the spilled parts of a package, closed with its last user."""

    __slots__ = ("_file", "_lock", "_users")

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._lock = threading.Lock()
        self._users = 1  # the parser holding it

    def acquire(self) -> None:
        with self._lock:
            self._users += 1

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users > 0 or self._file is None:
                return
            f, self._file = self._file, None
        f.close()

    def append(self, data: ReadableBuffer) -> int:
        """Write ``data`` at the end of the file; return the offset it was written at."""
        with self._lock:
            if self._file is None:
                # An unnamed file: deleted by the OS when closed, even if this process dies.
                self._file = tempfile.TemporaryFile(prefix="msh-mime-")  # noqa: SIM115 - closed in release()
            f = self._file
            offset = f.seek(0, os.SEEK_END)
            f.write(data)
            return offset

    def read_into(self, buffer: memoryview, offset: int) -> int:
        with self._lock:
            if self._file is None:
                raise ValueError("the part body's temporary file is closed")
            self._file.seek(offset)
            got = self._file.readinto(buffer)  # type: ignore[attr-defined]
            return int(got or 0)


class _SpoolReader(io.RawIOBase):
    """A reader of one part's stretch of the spool file, with a position of its own.

    It keeps the spool file open until it is closed itself, even if its body is closed first.
    """

    def __init__(self, spool: _Spool, offset: int, size: int) -> None:
        super().__init__()
        spool.acquire()
        self._spool = spool
        self._start = offset
        self._size = size
        self._pos = 0

    def close(self) -> None:
        if not self.closed:
            self._spool.release()
        super().close()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        n = min(len(view), self._size - self._pos)
        if n <= 0:
            return 0
        got = self._spool.read_into(view[:n], self._start + self._pos)
        self._pos += got
        return got

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos


class PartBody:
    """The decoded content of one MIME part, in memory, in the package's temporary file, or in a file.

    Build one with :meth:`from_bytes` or :meth:`from_path`; :func:`parse_package` builds the others.
    :meth:`open` gives a fresh reader from the start each time (readers are independent and may be used
    from several threads); :meth:`close` frees the temporary storage, after which the body cannot be read.
    """

    __slots__ = ("_closed", "_data", "_offset", "_path", "_size", "_spool")

    def __init__(self, data: bytes = b"") -> None:
        self._data: bytes | None = bytes(data)
        self._path: Path | None = None
        self._spool: _Spool | None = None
        self._offset = 0
        self._size = len(self._data)
        self._closed = False

    @classmethod
    def from_bytes(cls, data: bytes) -> PartBody:
        """A body holding ``data`` in memory."""
        return cls(data)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> PartBody:
        """A body read from the file at ``path`` whenever it is opened (never loaded whole).

        The size is taken now; the file is not owned: :meth:`close` leaves it in place.
        """
        body = cls()
        body._data = None
        body._path = Path(path)
        body._size = body._path.stat().st_size
        return body

    @classmethod
    def _from_spool(cls, spool: _Spool, offset: int, size: int) -> PartBody:
        body = cls()
        body._data = None
        spool.acquire()
        body._spool = spool
        body._offset = offset
        body._size = size
        return body

    @property
    def size(self) -> int:
        """Length of the decoded content in bytes."""
        return self._size

    @property
    def in_memory(self) -> bool:
        """True when the content is held in memory (not in a file)."""
        return self._data is not None

    def open(self) -> BinaryIO:
        """A new binary reader positioned at the start of the content."""
        if self._closed:
            raise ValueError("the part body is closed")
        if self._data is not None:
            return io.BytesIO(self._data)
        if self._path is not None:
            return open(self._path, "rb")
        assert self._spool is not None
        return io.BufferedReader(_SpoolReader(self._spool, self._offset, self._size), _CHUNK)

    def read_bytes(self) -> bytes:
        """The whole content as bytes (loads it into memory)."""
        if self._data is not None and not self._closed:
            return self._data
        with self.open() as reader:
            return reader.read()

    def copy_to(self, out: BinaryIO, chunk_size: int = _CHUNK) -> int:
        """Copy the content to ``out`` in chunks; return the number of bytes copied."""
        copied = 0
        with self.open() as reader:
            while chunk := reader.read(chunk_size):
                out.write(chunk)
                copied += len(chunk)
        return copied

    def close(self) -> None:
        """Release the content (the temporary storage is freed); idempotent."""
        if self._closed:
            return
        self._closed = True
        self._data = None
        if self._spool is not None:
            spool, self._spool = self._spool, None
            spool.release()

    def __enter__(self) -> PartBody:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        where = "closed" if self._closed else "memory" if self._data is not None else "file"
        return f"PartBody(size={self._size}, {where})"


# ------------------------------------------------------------------------------------- parts, packages


@dataclass(frozen=True)
class MimePart:
    """One part of a package: its headers and its decoded content.

    ``content_id`` is the Content-ID without angle brackets (``None`` when absent); ``content_type`` the
    Content-Type header as received (``text/plain; charset=us-ascii`` when absent, RFC 2045 §5.2);
    ``media_type`` its lower-case ``type/subtype``; ``transfer_encoding`` the lower-case
    Content-Transfer-Encoding (``7bit`` when absent, RFC 2045 §6.1); ``headers`` every header of the part
    in order, names as spelt on the wire, folded values unfolded.
    """

    content_id: str | None
    content_type: str
    media_type: str
    charset: str | None
    transfer_encoding: str
    headers: tuple[tuple[str, str], ...]
    body: PartBody

    def header(self, name: str) -> str | None:
        """The first header called ``name`` (any case), or None."""
        wanted = name.lower()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value
        return None

    @property
    def location(self) -> str:
        """``cid:<content_id>``, the error location of this part (empty without a Content-ID)."""
        return f"cid:{self.content_id}" if self.content_id else ""


@dataclass(frozen=True)
class MimePackage:
    """A parsed ebXML Message Package: the SOAP part (``start``) and the payload parts in order.

    ``warnings`` lists the deviations accepted in lenient mode (always empty in strict mode). The package
    owns the parts' temporary storage: call :meth:`close` (or use it as a context manager) when done.
    """

    start: MimePart
    attachments: tuple[MimePart, ...]
    warnings: tuple[Issue, ...]
    boundary: str

    @property
    def parts(self) -> tuple[MimePart, ...]:
        """The SOAP part followed by the attachments."""
        return (self.start, *self.attachments)

    def attachment(self, content_id: str) -> MimePart | None:
        """The attachment whose Content-ID is ``content_id``, or None.

        Accepts ``id``, ``<id>`` and the ``cid:`` URL form of a Manifest reference (RFC 2392 §2:
        percent-encoded).
        """
        wanted = content_id.strip()
        if wanted[:4].lower() == "cid:":
            wanted = unquote(wanted[4:])
        wanted = _strip_angle(wanted)
        for part in self.attachments:
            if part.content_id == wanted:
                return part
        return None

    def close(self) -> None:
        """Release every part's content."""
        for part in self.parts:
            part.body.close()

    def __enter__(self) -> MimePackage:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


# --------------------------------------------------------------------------------- header value syntax


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


def _strip_angle(value: str) -> str:
    value = value.strip()
    if value.startswith("<") and value.endswith(">"):
        value = value[1:-1].strip()
    return value


def _take(buf: bytearray, start: int, end: int) -> bytes:
    """A copy of ``buf[start:end]`` (one copy, no intermediate bytearray)."""
    with memoryview(buf) as view:
        return view[start:end].tobytes()


def _decode_header(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


# ------------------------------------------------------------------------------------------- reporting


class _Report:
    """Strict mode raises at the first deviation; lenient mode collects one Warning per kind and place."""

    __slots__ = ("bare_lf", "issues", "lenient")

    def __init__(self, lenient: bool) -> None:
        self.lenient = lenient
        self.issues: dict[tuple[str, str], Issue] = {}
        self.bare_lf = False

    def deviation(self, description: str, location: str = "") -> None:
        if not self.lenient:
            raise MimeProblemError(description, location=location)
        key = (description, location)
        if key not in self.issues and len(self.issues) < _MAX_WARNINGS:
            self.issues[key] = Issue(ErrorCode.MIME_PROBLEM, Severity.WARNING, description, location)

    def bare_line_feed(self) -> None:
        if not self.bare_lf:
            self.bare_lf = True
            # RFC 2046 §5.1.1 / RFC 2045 §2.1: delimiters and header lines end with CRLF.
            self.deviation("bare LF line endings instead of CRLF")


def _fail(description: str, location: str = "") -> NoReturn:
    raise MimeProblemError(description, location=location)


# -------------------------------------------------------------------------------------------- decoding


class _Decoder:
    """Identity decoding (RFC 2045 §6.2: 8bit and binary content is the content)."""

    __slots__ = ()

    def feed(self, data: bytes) -> bytes:
        return data

    def finish(self) -> bytes:
        return b""


class _SevenBitDecoder(_Decoder):
    """7bit content is US-ASCII (RFC 2045 §2.7); 8-bit octets in it are a deviation."""

    __slots__ = ("_location", "_report", "_seen")

    def __init__(self, report: _Report, location: str) -> None:
        self._report = report
        self._location = location
        self._seen = False

    def feed(self, data: bytes) -> bytes:
        if not self._seen and not data.isascii():
            self._seen = True
            self._report.deviation("8-bit data in a part declared 7bit (RFC 2045 §2.7)", self._location)
        return data


class _Base64Decoder(_Decoder):
    """Streaming base64 decoding (RFC 2045 §6.8), four characters at a time across chunk edges."""

    __slots__ = ("_carry", "_location", "_padded", "_report")

    def __init__(self, report: _Report, location: str) -> None:
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
            _fail("invalid base64 content: data after the final '=' padding", self._location)
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
                _fail("invalid base64 content: data after the final '=' padding", self._location)
        try:
            return binascii.a2b_base64(block, strict_mode=True)
        except binascii.Error as exc:
            _fail(f"invalid base64 content: {exc}", self._location)

    def finish(self) -> bytes:
        carry, self._carry = self._carry, b""
        if not carry:
            return b""
        if len(carry) == 1 or b"=" in carry:
            _fail("invalid base64 content: truncated (length not a multiple of 4)", self._location)
        # RFC 2045 §6.8: the final quantum is padded with '='.
        self._report.deviation("base64 content without its final '=' padding", self._location)
        return self._decode(carry + b"=" * (4 - len(carry)))


class _QuotedPrintableDecoder(_Decoder):
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


# ------------------------------------------------------------------------------------------- spooling


class _Spooler:
    """Keeps part contents in memory within the limits, else in the package's shared temporary file."""

    __slots__ = ("budget", "memory_used", "spool", "threshold")

    def __init__(self, limits: MimeLimits) -> None:
        self.spool = _Spool()
        self.threshold = limits.spool_threshold
        self.budget = limits.max_memory_bytes
        self.memory_used = 0


class _Sink:
    """Collects one part's decoded content: decodes what the scanner finds, then keeps or spills it."""

    __slots__ = ("_decoder", "_limit", "_location", "_mem", "_offset", "_spilled", "_spooler", "size")

    def __init__(self, spooler: _Spooler, decoder: _Decoder, limit: int | None, location: str) -> None:
        self._spooler = spooler
        self._decoder = decoder
        self._limit = limit
        self._location = location
        self._mem = bytearray()
        self._spilled = False
        self._offset = -1
        self.size = 0

    def take(self, data: bytes) -> None:
        """Raw (transfer-encoded) content from the scanner."""
        self._write(self._decoder.feed(data))

    def _write(self, data: bytes) -> None:
        if not data:
            return
        self.size += len(data)
        if self._limit is not None and self.size > self._limit:
            _fail(f"the SOAP part is larger than {self._limit} bytes", self._location)
        sp = self._spooler
        if self._spilled:
            sp.spool.append(data)
        elif len(self._mem) + len(data) <= sp.threshold and sp.memory_used + len(data) <= sp.budget:
            self._mem += data
            sp.memory_used += len(data)
        else:
            self._spilled = True
            sp.memory_used -= len(self._mem)
            self._offset = sp.spool.append(bytes(self._mem) + data if self._mem else data)
            self._mem = bytearray()

    def finish(self) -> PartBody:
        """The part's content, once the scanner reached its end."""
        self._write(self._decoder.finish())
        if not self._spilled:
            return PartBody(bytes(self._mem))
        return PartBody._from_spool(self._spooler.spool, self._offset, self.size)


# -------------------------------------------------------------------------------------------- parsing


class _Parser:
    """The streaming multipart reader: one bounded buffer over the input stream."""

    def __init__(
        self, stream: BinaryIO, boundary: bytes, report: _Report, limits: MimeLimits, chunk_size: int
    ) -> None:
        self._stream = stream
        self._report = report
        self._limits = limits
        self._chunk = chunk_size
        self._dash = self._pattern = b""
        self.set_boundary(boundary)
        self._buf = bytearray()
        self._pos = 0
        self._eof = False
        self._total = 0

    def set_boundary(self, boundary: bytes) -> None:
        # RFC 2046 §5.1.1: a delimiter is CRLF "--" boundary at the start of a line.
        self._dash = b"--" + boundary
        self._pattern = b"\n" + self._dash

    # -- input

    def _fill(self) -> bool:
        """Read one more chunk into the buffer (dropping consumed bytes); False at end of stream."""
        if self._eof:
            return False
        data = self._stream.read(self._chunk)
        if not data:
            self._eof = True
            return False
        self._total += len(data)
        if self._total > self._limits.max_total_bytes:
            _fail(f"the package is larger than {self._limits.max_total_bytes} bytes")
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data
        return True

    def sniff_boundary(self) -> bytes:
        """The boundary of the first ``--`` line (lenient reading of a package with no Content-Type)."""
        # Nothing is consumed here, so the buffer is never compacted and positions stay valid.
        limit = self._limits.max_preamble_bytes
        start = -1
        searched = self._pos
        while True:
            if start < 0:
                match = _NON_SPACE_RE.search(self._buf, searched)
                start = match.start() if match else -1
            if start >= 0:
                nl = self._buf.find(b"\n", max(start, searched))
                if nl >= 0:
                    line = bytes(self._buf[start:nl])
                    break
            searched = len(self._buf)
            if searched - self._pos >= limit:
                _fail(f"no delimiter line in the first {limit} bytes of a package with no Content-Type")
            if not self._fill():
                line = bytes(self._buf[start:]) if start >= 0 else b""
                break
        line = line.rstrip(b" \t\r")
        if not line.startswith(b"--") or len(line) < 3:
            _fail("no Content-Type for the package and its body does not start with a '--boundary' line")
        return line[2:]

    # -- delimiters

    def _classify(self, after: int) -> tuple[int, int]:
        """What follows a ``--boundary`` candidate ending at ``after``: (kind, position after it)."""
        buf, n = self._buf, len(self._buf)
        i = after
        if i < n and buf[i] == 0x2D:  # '-'
            if i + 1 < n:
                # RFC 2046 §5.1.1: the close delimiter is the delimiter followed by "--".
                return (_CLOSE, i + 2) if buf[i + 1] == 0x2D else (_NOT, 0)
            return (_MORE, 0) if not self._eof else (_EOF_AFTER, n)
        # RFC 2046 §5.1.1: transport padding (linear white space) may follow the boundary.
        while i < n and buf[i] in (0x20, 0x09):
            i += 1
        if i - after > self._limits.max_header_bytes:
            _fail("white space after a boundary delimiter is too long")
        if i >= n:
            return (_MORE, 0) if not self._eof else (_EOF_AFTER, n)
        c = buf[i]
        if c == 0x0A:
            self._report.bare_line_feed()
            return (_NEXT, i + 1)
        if c == 0x0D:
            if i + 1 >= n:
                return (_MORE, 0) if not self._eof else (_EOF_AFTER, n)
            return (_NEXT, i + 2) if buf[i + 1] == 0x0A else (_NOT, 0)
        return (_NOT, 0)

    def scan(self, sink: Callable[[bytes], None]) -> int:
        """Pass content to ``sink`` up to the next delimiter; return the kind of delimiter found.

        Called at the start of a line: a delimiter right here (no line break before it, because the
        line break was the end of the part headers or there is no preamble) counts.
        """
        dash, pattern = self._dash, self._pattern
        keep = len(pattern) + 1  # a delimiter, and its CR, may straddle the end of the buffer
        rel = 0  # where to search next, relative to self._pos
        at_start = True
        while True:
            buf, pos = self._buf, self._pos
            if at_start:
                if len(buf) - pos < len(dash) + 2 and not self._eof:
                    self._fill()
                    continue
                if buf.startswith(dash, pos):
                    kind, nxt = self._classify(pos + len(dash))
                    if kind == _MORE:
                        self._fill()
                        continue
                    if kind != _NOT:
                        self._pos = nxt
                        return kind
                at_start = False
            # RFC 2046 §5.1.1: the delimiter is CRLF "--" boundary; the CRLF belongs to the delimiter.
            idx = buf.find(pattern, pos + rel)
            if idx >= 0:
                kind, nxt = self._classify(idx + len(pattern))
                if kind == _MORE:
                    rel = idx - pos
                    self._fill()
                    continue
                if kind == _NOT:
                    rel = idx + 1 - pos
                    continue
                end = idx
                if end > pos and buf[end - 1] == 0x0D:
                    end -= 1
                else:
                    self._report.bare_line_feed()
                if end > pos:
                    sink(_take(buf, pos, end))
                self._pos = nxt
                return kind
            safe = len(buf) - keep
            if safe > pos:
                sink(_take(buf, pos, safe))
                self._pos = safe
            rel = 0
            if not self._fill():
                if len(self._buf) > self._pos:
                    sink(_take(self._buf, self._pos, len(self._buf)))
                    self._pos = len(self._buf)
                return _EOF

    # -- headers

    def _peek_line(self, limit: int) -> tuple[int, int] | None:
        """(end of the line's content, start of the next line), or None at end of stream."""
        rel = 0
        while True:
            nl = self._buf.find(b"\n", self._pos + rel)
            if nl >= 0:
                if nl + 1 - self._pos > limit:
                    break
                end = nl
                if end > self._pos and self._buf[end - 1] == 0x0D:
                    end -= 1
                else:
                    self._report.bare_line_feed()
                return end, nl + 1
            rel = len(self._buf) - self._pos
            if rel > limit:
                break
            if not self._fill():
                return None
        _fail(f"part headers longer than {self._limits.max_header_bytes} bytes")

    def read_headers(self) -> list[tuple[str, str]]:
        """The part headers (RFC 2045 §3 / RFC 5322 §2.2), up to and including the empty line."""
        headers: list[tuple[str, str]] = []
        left = self._limits.max_header_bytes
        while True:
            found = self._peek_line(left)
            if found is None:
                if self._pos >= len(self._buf) and not headers:
                    _fail("the package ends right after a boundary delimiter (truncated)")
                _fail("the package ends inside part headers (truncated)")
            end, nxt = found
            line = bytes(self._buf[self._pos : end])
            if not line:
                self._pos = nxt
                return headers
            if line[0] in (0x20, 0x09) and headers:
                # RFC 5322 §2.2.3: a line starting with white space continues the previous field.
                name, value = headers[-1]
                headers[-1] = (name, f"{value} {_decode_header(line.strip())}".strip())
            else:
                colon = line.find(b":")
                name_raw = line[:colon].rstrip() if colon > 0 else b""
                if not _FIELD_NAME_RE.fullmatch(name_raw):
                    # RFC 2046 §5.1.1: headers end with an empty line; the email package (and partners
                    # built on it) take a non-header line as the start of the body instead.
                    self._report.deviation(
                        "part headers not followed by an empty line: the body starts at a line that is "
                        "not a header",
                        _location_of(headers),
                    )
                    return headers
                headers.append((name_raw.decode("ascii"), _decode_header(line[colon + 1 :].strip())))
            left -= nxt - self._pos
            self._pos = nxt


def _location_of(headers: list[tuple[str, str]]) -> str:
    return _PartInfo.of(headers).location


def _check_boundary(boundary: str, report: _Report) -> bytes:
    if not boundary:
        _fail("empty boundary parameter in the package Content-Type")
    # RFC 2046 §5.1.1: 1 to 70 characters from bchars.
    if not _BOUNDARY_RE.fullmatch(boundary):
        if len(boundary) > _LENIENT_BOUNDARY_MAX or any(c in boundary for c in "\r\n\x00"):
            _fail("unusable boundary parameter in the package Content-Type")
        report.deviation("boundary parameter not as RFC 2046 §5.1.1 allows (1-70 characters from bchars)")
    return boundary.encode("utf-8")


def parse_package(
    stream: BinaryIO | bytes | bytearray | memoryview,
    content_type: str | None,
    *,
    lenient: bool = False,
    limits: MimeLimits = _DEFAULT_LIMITS,
    allow_unterminated: bool = False,
) -> MimePackage:
    """Read an ebXML Message Package from ``stream`` (a binary file-like object, or bytes).

    ``content_type`` is the package's Content-Type header (from HTTP); ``None`` only in lenient mode,
    where the boundary is taken from the first delimiter line. The root part is the one named by the
    ``start`` parameter, else the first (RFC 2387 §3.2). The stream is read up to the close delimiter;
    the epilogue is not read. See the module documentation for strict and lenient mode.

    ``allow_unterminated`` (lenient mode only) accepts a package that ends without its closing delimiter,
    with a Warning, the last part ending where the stream ends: for a partner known to send such packages,
    at the risk of taking a cut-short last payload for a whole one. Without it that is an error.

    Raises :class:`~msh.errors.MimeProblemError` (location ``cid:...`` for a part, empty for the
    package). The returned package owns temporary storage: close it when done.
    """
    return _parse_package(
        stream,
        content_type,
        lenient=lenient,
        limits=limits,
        chunk_size=_CHUNK,
        allow_unterminated=allow_unterminated and lenient,
    )


def _parse_package(
    stream: BinaryIO | bytes | bytearray | memoryview,
    content_type: str | None,
    *,
    lenient: bool,
    limits: MimeLimits,
    chunk_size: int,
    allow_unterminated: bool = False,
) -> MimePackage:
    if isinstance(stream, bytes | bytearray | memoryview):
        stream = io.BytesIO(stream)
    report = _Report(lenient)
    start_cid: str | None = None
    if content_type is None:
        report.deviation("no Content-Type for the package: the boundary is taken from its first line")
        parser = _Parser(stream, b"", report, limits, chunk_size)
        boundary = _check_boundary(_decode_header(parser.sniff_boundary()), report)
        parser.set_boundary(boundary)
    else:
        media, params = parse_content_type(content_type)
        # ebMS2 §2.1: the Message Package is a multipart/related MIME body ([SOAPAttach], RFC 2387).
        if not media.startswith("multipart/"):
            _fail(f"the package Content-Type is {media or 'empty'!r}, not multipart/related")
        if media != "multipart/related":
            report.deviation(f"the package Content-Type is {media!r}, not multipart/related")
        # RFC 2046 §5.1.1: the boundary parameter is required.
        if "boundary" not in params:
            _fail("no boundary parameter in the package Content-Type")
        boundary = _check_boundary(params["boundary"], report)
        # ebMS2 §2.1.2: the type parameter is the SOAP part's media type, "text/xml".
        type_param = params.get("type")
        if type_param is None:
            report.deviation("no type parameter in the package Content-Type (ebMS2 §2.1.2)")
        elif type_param.strip().lower() != "text/xml":
            report.deviation(f"the package type parameter is {type_param!r}, not text/xml (ebMS2 §2.1.2)")
        start = params.get("start")
        if start is not None:
            # RFC 2387 §3.2 / [SOAPAttach]: start is the root part's Content-ID, in its <...> form.
            start = start.strip()
            if not (start.startswith("<") and start.endswith(">")):
                report.deviation("the start parameter is not in <...> Content-ID form (RFC 2387 §3.2)")
            start_cid = _strip_angle(start) or None
        parser = _Parser(stream, boundary, report, limits, chunk_size)
    return _read_parts(parser, boundary.decode("utf-8"), start_cid, report, limits, allow_unterminated)


def _read_parts(
    parser: _Parser,
    boundary: str,
    start_cid: str | None,
    report: _Report,
    limits: MimeLimits,
    allow_unterminated: bool = False,
) -> MimePackage:
    spooler = _Spooler(limits)
    parts: list[MimePart] = []
    root_index: int | None = None
    seen_ids: set[str] = set()
    preamble = 0

    def skip(data: bytes) -> None:
        nonlocal preamble
        preamble += len(data)
        if preamble > limits.max_preamble_bytes:
            _fail(f"no boundary delimiter '--{boundary}' in the first {limits.max_preamble_bytes} bytes")

    try:
        # RFC 2046 §5.1.1: the preamble before the first delimiter is ignored.
        if parser.scan(skip) != _NEXT:
            _fail(f"no MIME part found with boundary {boundary!r}")
        while True:
            # Hardening: bound the number of parts (each costs memory and bookkeeping).
            if len(parts) >= limits.max_parts:
                _fail(f"the package has more than {limits.max_parts} parts")
            headers = parser.read_headers()
            info = _PartInfo.of(headers)
            if info.content_id is not None:
                # RFC 2045 §7 / [SOAPAttach]: Content-IDs are unique, else references are ambiguous.
                if info.content_id in seen_ids:
                    _fail(f"duplicate Content-ID <{info.content_id}>", info.location)
                seen_ids.add(info.content_id)
            # RFC 2387 §3.2: the root is the part named by start, else the first part.
            is_root = root_index is None and (
                info.content_id == start_cid if start_cid is not None else not parts
            )
            if is_root:
                _check_soap_part(info, report)
            decoder = _decoder_for(info.transfer_encoding, report, info.location)
            sink = _Sink(spooler, decoder, limits.max_soap_part_bytes if is_root else None, info.location)
            kind = parser.scan(sink.take)
            if kind == _EOF and allow_unterminated:
                report.deviation("the package ends without its closing delimiter (truncated)", info.location)
            elif kind == _EOF:
                # RFC 2046 §5.1.1: the body ends with the close delimiter; without it the last part may be cut short.
                _fail(
                    "the package ends without its closing delimiter (truncated): the last part may be incomplete; "
                    "the sender must send the whole package, ending with --boundary--",
                    info.location,
                )
            elif kind == _EOF_AFTER:
                report.deviation("the closing delimiter lacks its trailing '--'", info.location)
            parts.append(info.part(tuple(headers), sink.finish()))
            if is_root:
                root_index = len(parts) - 1
            if kind != _NEXT:
                break
        if root_index is None:
            _fail(f"the start parameter names no part: no part has Content-ID <{start_cid}>")
        return MimePackage(
            start=parts[root_index],
            attachments=tuple(p for i, p in enumerate(parts) if i != root_index),
            warnings=tuple(report.issues.values()),
            boundary=boundary,
        )
    except BaseException:
        for part in parts:
            part.body.close()
        raise
    finally:
        spooler.spool.release()


@dataclass(frozen=True, slots=True)
class _PartInfo:
    """What the headers of a part say."""

    content_id: str | None
    content_type: str
    media_type: str
    charset: str | None
    transfer_encoding: str

    @property
    def location(self) -> str:
        return f"cid:{self.content_id}" if self.content_id else ""

    @classmethod
    def of(cls, headers: list[tuple[str, str]]) -> _PartInfo:
        content_id: str | None = None
        content_type: str | None = None
        encoding: str | None = None
        for name, value in headers:
            key = name.lower()
            # RFC 2045 §3: header names are case-insensitive; the first occurrence counts.
            if key == "content-id" and content_id is None:
                content_id = _strip_angle(value) or None
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

    def part(self, headers: tuple[tuple[str, str], ...], body: PartBody) -> MimePart:
        return MimePart(
            content_id=self.content_id,
            content_type=self.content_type,
            media_type=self.media_type,
            charset=self.charset,
            transfer_encoding=self.transfer_encoding,
            headers=headers,
            body=body,
        )


def _check_soap_part(info: _PartInfo, report: _Report) -> None:
    media, location = info.media_type, info.location
    # ebMS2 §2.1.3.1 / SOAP 1.1: the Header Container's Content-Type is text/xml.
    if media != "text/xml":
        if media in ("application/soap+xml", "application/xml"):
            report.deviation(f"the SOAP part is {media}, not text/xml (ebMS2 §2.1.3.1)", location)
        else:
            _fail(f"the SOAP part is {media or 'untyped'}, not text/xml (ebMS2 §2.1.3.1)", location)
    # ebMS2 §2.1.3.2: the charset MAY be given and has no default; a Warning only in lenient mode.
    if info.charset is None and report.lenient:
        report.deviation("no charset on the SOAP part: the XML declaration (or UTF-8) applies", location)
    # ebMS2 §2.1.3 / [SOAPAttach]: the SOAP part is the XML document itself, not transfer-encoded.
    if info.transfer_encoding in ("base64", "quoted-printable"):
        report.deviation(f"the SOAP part is transfer-encoded as {info.transfer_encoding}", location)


def _decoder_for(encoding: str, report: _Report, location: str) -> _Decoder:
    # RFC 2045 §6.1: the Content-Transfer-Encoding mechanisms.
    if encoding in ("8bit", "binary"):
        return _Decoder()
    if encoding == "7bit":
        return _SevenBitDecoder(report, location)
    if encoding == "base64":
        return _Base64Decoder(report, location)
    if encoding == "quoted-printable":
        return _QuotedPrintableDecoder()
    _fail(f"unknown Content-Transfer-Encoding {encoding!r}", location)


# -------------------------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class AttachmentSpec:
    """A payload part to write: Content-ID (with or without ``<>``), Content-Type, content and encoding.

    ``transfer_encoding`` is one of ``binary`` (default), ``8bit``, ``7bit`` (the content must be
    US-ASCII without NUL), ``base64`` and ``quoted-printable``. ``headers`` are extra part headers
    (for instance Content-Description), written after the standard ones.
    """

    content_id: str
    content_type: str
    body: PartBody
    transfer_encoding: str = "binary"
    headers: tuple[tuple[str, str], ...] = ()


class _Encoder:
    """Identity encoding (binary, 8bit)."""

    __slots__ = ()

    def feed(self, data: bytes) -> bytes:
        return data

    def finish(self) -> bytes:
        return b""


class _SevenBitEncoder(_Encoder):
    __slots__ = ("_cid",)

    def __init__(self, cid: str) -> None:
        self._cid = cid

    def feed(self, data: bytes) -> bytes:
        # RFC 2045 §2.7: 7bit data is US-ASCII with no NUL octets.
        if not data.isascii() or b"\x00" in data:
            raise ValueError(f"attachment <{self._cid}>: content is not 7-bit (use 8bit, binary or base64)")
        return data


class _Base64Encoder(_Encoder):
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


class _QuotedPrintableEncoder(_Encoder):
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


def _encoder_for(encoding: str, cid: str) -> _Encoder:
    if encoding in ("binary", "8bit"):
        return _Encoder()
    if encoding == "7bit":
        return _SevenBitEncoder(cid)
    if encoding == "base64":
        return _Base64Encoder()
    return _QuotedPrintableEncoder()


def _new_boundary() -> str:
    # "=_" cannot occur in base64 or quoted-printable text; 128 random bits make a collision with
    # binary content negligible (RFC 2046 §5.1.1: the boundary must not occur in the content).
    return "=_MSH_" + secrets.token_hex(16)


def _check_header_text(what: str, value: str) -> None:
    if any(c in value for c in "\r\n\x00"):
        raise ValueError(f"{what} contains a line break or NUL: {value!r}")


def _clean_cid(what: str, value: str) -> str:
    cid = _strip_angle(value)
    _check_header_text(what, cid)
    # RFC 2045 §7 / RFC 5322 §3.6.4: a Content-ID is a msg-id, <id-left@id-right>, without < > or spaces.
    if not cid or any(c in cid for c in "<> \t"):
        raise ValueError(f"{what} is not a usable Content-ID: {value!r}")
    return cid


def write_package(
    out: BinaryIO,
    soap: bytes,
    attachments: Sequence[AttachmentSpec],
    *,
    boundary: str | None = None,
    start_id: str,
    soap_charset: str = "UTF-8",
) -> str:
    """Stream an ebXML Message Package to ``out``; return the Content-Type header value to send.

    The SOAP envelope ``soap`` is the root part, Content-ID ``start_id``; the attachments follow in
    order, their bodies copied in chunks (never loaded whole) and encoded as asked. Without a
    ``boundary`` a random one is made; a given boundary must be valid (RFC 2046 §5.1.1) and must not
    occur in the SOAP part. Content that contains the boundary, 8-bit content for a 7bit part and
    malformed arguments raise :class:`ValueError` (``out`` is then incomplete and must be discarded).
    """
    start_cid = _clean_cid("start_id", start_id)
    if not _TOKEN_RE.fullmatch(soap_charset):
        raise ValueError(f"soap_charset is not a charset name: {soap_charset!r}")
    specs: list[tuple[str, AttachmentSpec, str]] = []
    seen = {start_cid}
    for spec in attachments:
        cid = _clean_cid("attachment content_id", spec.content_id)
        if cid in seen:
            raise ValueError(f"duplicate Content-ID <{cid}>")
        seen.add(cid)
        _check_header_text(f"attachment <{cid}> content_type", spec.content_type)
        encoding = spec.transfer_encoding.strip().lower()
        if encoding not in _ENCODINGS:
            raise ValueError(f"attachment <{cid}>: unsupported transfer encoding {spec.transfer_encoding!r}")
        for name, value in spec.headers:
            if not _FIELD_NAME_RE.fullmatch(name.encode("utf-8", "replace")):
                raise ValueError(f"attachment <{cid}>: bad header name {name!r}")
            if name.lower() in ("content-id", "content-type", "content-transfer-encoding"):
                raise ValueError(f"attachment <{cid}>: header {name} is set from the AttachmentSpec fields")
            _check_header_text(f"attachment <{cid}> header {name}", value)
        specs.append((cid, spec, encoding))
    if boundary is None:
        boundary = _new_boundary()
        while (b"--" + boundary.encode("ascii")) in soap:
            boundary = _new_boundary()
    elif not _BOUNDARY_RE.fullmatch(boundary):
        raise ValueError(f"boundary is not valid per RFC 2046 §5.1.1: {boundary!r}")
    dash = b"--" + boundary.encode("ascii")
    # RFC 2046 §5.1.1: the boundary must not occur in the content.
    if dash in soap:
        raise ValueError("the boundary occurs in the SOAP part")

    # RFC 2046 §5.1.1: each part opens with "--boundary" CRLF, headers, CRLF, content; CRLF before the
    # next delimiter belongs to the delimiter.
    out.write(
        dash + b"\r\n"
        b"Content-ID: <" + start_cid.encode("utf-8") + b">\r\n"
        b'Content-Type: text/xml; charset="' + soap_charset.encode("ascii") + b'"\r\n'
        b"Content-Transfer-Encoding: binary\r\n\r\n"
    )
    out.write(soap)
    for cid, spec, encoding in specs:
        head = [
            b"\r\n" + dash + b"\r\n",
            b"Content-ID: <" + cid.encode("utf-8") + b">\r\n",
            b"Content-Type: " + spec.content_type.strip().encode("utf-8") + b"\r\n",
            b"Content-Transfer-Encoding: " + encoding.encode("ascii") + b"\r\n",
        ]
        head.extend(f"{name}: {value}\r\n".encode() for name, value in spec.headers)
        head.append(b"\r\n")
        out.write(b"".join(head))
        # base64 text cannot contain "--", so only the other encodings are searched for the boundary.
        guard = None if encoding == "base64" else dash
        _copy_encoded(out, spec.body, _encoder_for(encoding, cid), guard, cid)
    # RFC 2046 §5.1.1: the close delimiter.
    out.write(b"\r\n" + dash + b"--\r\n")
    return f'multipart/related; type="text/xml"; boundary="{boundary}"; start="<{start_cid}>"'


def _copy_encoded(out: BinaryIO, body: PartBody, encoder: _Encoder, dash: bytes | None, cid: str) -> None:
    tail = b""
    span = len(dash) - 1 if dash else 0

    def emit(data: bytes) -> None:
        nonlocal tail
        if not data:
            return
        if dash is not None:
            if dash in data or dash in tail + data[:span]:
                raise ValueError(f"attachment <{cid}>: the boundary occurs in the content")
            tail = (tail + data)[-span:] if len(data) < span else data[-span:]
        out.write(data)

    with body.open() as reader:
        while chunk := reader.read(_CHUNK):
            emit(encoder.feed(chunk))
    emit(encoder.finish())


def build_package(
    soap: bytes,
    attachments: Sequence[AttachmentSpec] = (),
    *,
    boundary: str | None = None,
    start_id: str,
    soap_charset: str = "UTF-8",
) -> tuple[str, bytes]:
    """:func:`write_package` into memory: (Content-Type header value, package bytes)."""
    out = io.BytesIO()
    content_type = write_package(
        out, soap, attachments, boundary=boundary, start_id=start_id, soap_charset=soap_charset
    )
    return content_type, out.getvalue()
