"""Access to the reference and interop material in ``../shared`` (read in place, never copied).

Tests that use it call :func:`shared_dir`, which skips the test with a reason when the folder is absent.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
MESSAGES = SHARED / "interop" / "messages"
NHS_BOUNDARY_TYPE = 'multipart/related; boundary="--=_MIME-Boundary"; type="text/xml"'


def shared_dir() -> Path:
    """The shared folder; skips the calling test when it is absent."""
    if not SHARED.is_dir():
        pytest.skip(f"reference material not found at {SHARED} (the shared folder beside the project)")
    return SHARED


@cache
def manifest_status() -> dict[str, str]:
    """MANIFEST.md's status column (xsd-valid, xsd-INVALID, notwf, noxml, template) by path under shared/."""
    statuses: dict[str, str] = {}
    text = (SHARED / "MANIFEST.md").read_text(encoding="utf-8") if SHARED.is_dir() else ""
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) >= 7 and cells[1].startswith("interop/"):
            statuses[cells[1]] = cells[6]
    return statuses


def message_bytes(path: Path) -> bytes:
    """A message file's bytes, with an NHS ``{{ebxml}}`` template filled from its sibling ``.ebxml``."""
    data = path.read_bytes()
    if b"{{ebxml}}" in data:
        header = path.with_suffix(".ebxml")
        if header.is_file():
            data = data.replace(b"{{ebxml}}", header.read_bytes().strip())
    return data


def is_template(data: bytes) -> bool:
    """True for a mustache template with unfilled placeholders."""
    return re.search(rb"\{\{[^}]+\}\}", data) is not None
