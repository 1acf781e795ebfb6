"""The streaming multipart scanner (RFC 2046 §5.1.1) under :func:`~msh.ebms.mime.parse_package`.

The body is read in chunks into one bounded buffer; the delimiter ``CRLF--boundary`` is looked for across
chunk edges and each part's content is handed on as it is found; part headers are read within
:attr:`~msh.ebms.mime.MimeLimits.max_header_bytes`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import BinaryIO, Final

from msh.ebms.mime.headers import FIELD_NAME_RE, PartInfo, decode_header
from msh.ebms.mime.limits import MimeLimits
from msh.ebms.mime.report import Report, fail

__all__ = ["CLOSE", "EOF", "EOF_AFTER", "NEXT", "Scanner"]


_NON_SPACE_RE: Final = re.compile(rb"[^ \t\r\n]")

# Results of looking at the bytes after a ``--boundary`` candidate.
NEXT: Final = 1  # a delimiter: the next part follows
CLOSE: Final = 2  # the close delimiter ``--boundary--``
EOF_AFTER: Final = 3  # ``--boundary`` at the end of the stream, neither ``--`` nor a line break after it
_NOT: Final = 4  # not a delimiter (the boundary followed by other characters)
_MORE: Final = 5  # cannot tell yet: more input needed
EOF: Final = 6  # end of stream before any delimiter


class Scanner:
    """The streaming multipart reader: one bounded buffer over the input stream.

    :meth:`scan` hands on the content up to the next delimiter and says which delimiter it found;
    :meth:`read_headers` reads the headers of the part that follows.
    """

    def __init__(self, stream: BinaryIO, boundary: bytes, report: Report, limits: MimeLimits, chunk_size: int) -> None:
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
        """Look for the delimiters of ``boundary`` from now on."""
        # RFC 2046 §5.1.1: a delimiter is CRLF "--" boundary at the start of a line.
        self._dash = b"--" + boundary
        self._pattern = b"\n" + self._dash

    @property
    def position(self) -> int:
        """How many bytes of the stream are behind the scanner (handed on, skipped or read as framing),
        counted from where the stream was when the scanner was made; the bytes read ahead into the buffer
        are not counted."""
        return self._total - len(self._buf) + self._pos

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
            fail(f"the package is larger than {self._limits.max_total_bytes} bytes")
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
                fail(f"no delimiter line in the first {limit} bytes of a package with no Content-Type")
            if not self._fill():
                line = bytes(self._buf[start:]) if start >= 0 else b""
                break
        line = line.rstrip(b" \t\r")
        if not line.startswith(b"--") or len(line) < 3:
            fail("no Content-Type for the package and its body does not start with a '--boundary' line")
        return line[2:]

    # -- delimiters

    def _classify(self, after: int) -> tuple[int, int]:
        """What follows a ``--boundary`` candidate ending at ``after``: (kind, position after it)."""
        buf, n = self._buf, len(self._buf)
        i = after
        if i < n and buf[i] == 0x2D:  # '-'
            if i + 1 < n:
                # RFC 2046 §5.1.1: the close delimiter is the delimiter followed by "--".
                return (CLOSE, i + 2) if buf[i + 1] == 0x2D else (_NOT, 0)
            return (_MORE, 0) if not self._eof else (EOF_AFTER, n)
        # RFC 2046 §5.1.1: transport padding (linear white space) may follow the boundary.
        while i < n and buf[i] in (0x20, 0x09):
            i += 1
        if i - after > self._limits.max_header_bytes:
            fail("white space after a boundary delimiter is too long")
        if i >= n:
            return (_MORE, 0) if not self._eof else (EOF_AFTER, n)
        c = buf[i]
        if c == 0x0A:
            self._report.bare_line_feed()
            return (NEXT, i + 1)
        if c == 0x0D:
            if i + 1 >= n:
                return (_MORE, 0) if not self._eof else (EOF_AFTER, n)
            return (NEXT, i + 2) if buf[i + 1] == 0x0A else (_NOT, 0)
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
                return EOF

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
        fail(f"part headers longer than {self._limits.max_header_bytes} bytes")

    def read_headers(self) -> list[tuple[str, str]]:
        """The part headers (RFC 2045 §3 / RFC 5322 §2.2), up to and including the empty line."""
        headers: list[tuple[str, str]] = []
        left = self._limits.max_header_bytes
        while True:
            found = self._peek_line(left)
            if found is None:
                if self._pos >= len(self._buf) and not headers:
                    fail("the package ends right after a boundary delimiter (truncated)")
                fail("the package ends inside part headers (truncated)")
            end, nxt = found
            line = bytes(self._buf[self._pos : end])
            if not line:
                self._pos = nxt
                return headers
            if line[0] in (0x20, 0x09) and headers:
                # RFC 5322 §2.2.3: a line starting with white space continues the previous field.
                name, value = headers[-1]
                headers[-1] = (name, f"{value} {decode_header(line.strip())}".strip())
            else:
                colon = line.find(b":")
                name_raw = line[:colon].rstrip() if colon > 0 else b""
                if not FIELD_NAME_RE.fullmatch(name_raw):
                    # RFC 2046 §5.1.1: headers end with an empty line; the email package (and partners
                    # built on it) take a non-header line as the start of the body instead.
                    self._report.deviation(
                        "part headers not followed by an empty line: the body starts at a line that is not a header",
                        _location_of(headers),
                    )
                    return headers
                headers.append((name_raw.decode("ascii"), decode_header(line[colon + 1 :].strip())))
            left -= nxt - self._pos
            self._pos = nxt


def _location_of(headers: list[tuple[str, str]]) -> str:
    return PartInfo.of(headers).location


def _take(buf: bytearray, start: int, end: int) -> bytes:
    """A copy of ``buf[start:end]`` (one copy, no intermediate bytearray)."""
    with memoryview(buf) as view:
        return view[start:end].tobytes()
