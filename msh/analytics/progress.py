"""Progress on a terminal: one line rewritten in place while a command runs, nothing when piped."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """Shows ``what``: a count and a rate on one line of ``stream`` when it is a terminal (or ``force``)."""

    def __init__(self, what: str, *, stream: TextIO | None = None, force: bool = False) -> None:
        self.what = what
        self.stream = stream or sys.stderr
        self.shown = force or self.stream.isatty()
        self.started = time.monotonic()
        self._last = 0.0

    def update(self, done: int, total: int | None = None, note: str = "") -> None:
        """Show ``done`` (of ``total``) at most ten times a second."""
        if not self.shown:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and (total is None or done < total):
            return
        self._last = now
        elapsed = max(now - self.started, 1e-9)
        of = f"/{total:,}" if total is not None else ""
        self.stream.write(f"\r{self.what}: {done:,}{of} ({done / elapsed:,.0f}/s) {note}".rstrip() + "\x1b[K")
        self.stream.flush()

    def stage(self, note: str) -> None:
        """Show what is being done now (a stage without a count)."""
        if self.shown:
            elapsed = time.monotonic() - self.started
            self.stream.write(f"\r{self.what}: {note} ({elapsed:.0f} s)\x1b[K")
            self.stream.flush()

    def done(self) -> None:
        """End the progress line."""
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
