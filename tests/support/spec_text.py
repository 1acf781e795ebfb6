"""The ebMS 2.0 specification's text, read in place from ``../shared/reference/ebMS_v2_0.txt``.

The published document numbers its lines; the conformance suite (``tests/conformance``) cites each
normative sentence by its section and those printed line numbers, so a citation can be checked against
the text: :func:`normative_lines` lists every line of a section that carries an RFC 2119 keyword in
capitals (MUST, SHALL, SHOULD, REQUIRED, RECOMMENDED, with their NOT forms), and :func:`quoted` says
whether a quotation appears in the text around the lines it cites.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SPEC = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "ebMS_v2_0.txt"

# The sections the conformance suite covers (the issue that asked for it names them): §4.1, §6-§10 and
# Appendix B. §5 and §4.2 are covered by the codec's own tests.
SCOPE = ("4.1", "6", "7", "8", "9", "10", "B")

KEYWORD = re.compile(r"\b(MUST|SHALL|SHOULD|REQUIRED|RECOMMENDED)\b")
_NUMBERED = re.compile(r"^(\d+)\s+(.*)$")
# A heading's number starts with a section of one or two digits: a body line that happens to begin with a
# number ("2027   99999999 in the increment", "2542   500 \"Internal Server Error\"") is no heading.
_HEADING = re.compile(r"^\d+\s+((?:\d{1,2}(?:\.\d+)*)|(?:B\.\d+(?:\.\d+)*)|Appendix [A-C])\s+(\S.*)$")
_BODY_STARTS = "Part I. Core Functionality"  # the second occurrence: the first is the table of contents


@dataclass(frozen=True)
class SpecLine:
    """One numbered line of the specification's body."""

    number: int
    section: str
    text: str

    @property
    def normative(self) -> bool:
        return KEYWORD.search(self.text) is not None


def _follows(current: str, name: str) -> bool:
    """Whether ``name`` can be the heading after section ``current``: a chapter number (no dot) only as the next
    chapter. A numbered line that merely starts with a number (a list item "1    Look for ...", "500
    "Internal Server Error" response", "99999999 in the increment") is body text, not a heading."""
    if "." in name or name.startswith("Appendix"):
        return True
    top = current.split(".")[0]
    return current == "" or (top.isdigit() and int(name) == int(top) + 1)


def in_scope(section: str) -> bool:
    """Whether a section number falls under :data:`SCOPE` (``4.1.3`` does, ``4.2`` does not)."""
    return any(section == top or section.startswith(top + ".") for top in SCOPE)


@cache
def spec_lines() -> dict[int, SpecLine]:
    """Every numbered line of the body, by its printed number, with the section it belongs to."""
    raw = SPEC.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(raw) if _BODY_STARTS in line and "....." not in line]
    found: dict[int, SpecLine] = {}
    section = ""
    for line in raw[starts[0] :]:
        heading = _HEADING.match(line)
        if heading is not None and "....." not in line and _follows(section, heading.group(1)):
            name = heading.group(1)
            section = name.split()[1] if name.startswith("Appendix") else name
        numbered = _NUMBERED.match(line)
        if numbered is not None:
            number = int(numbered.group(1))
            found.setdefault(number, SpecLine(number, section, numbered.group(2).strip()))
    return found


def normative_lines() -> dict[int, SpecLine]:
    """The lines of the sections in :data:`SCOPE` that carry a keyword in capitals, by number."""
    return {n: line for n, line in spec_lines().items() if line.normative and in_scope(line.section)}


def normalise(text: str) -> str:
    """Text compared without typography: one space for any run of white space, plain quotes and dashes,
    list bullets dropped, hyphenated line ends joined."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    text = text.replace("\u2013", "-").replace("\u2014", "-").replace("\u2022", " ").replace("\uf0b7", " ")
    return " ".join(text.split())


def quoted(quote: str, numbers: tuple[int, ...], *, margin: int = 3) -> bool:
    """Whether ``quote`` appears in the text from a few lines before the first cited line to a few after
    the last (a sentence may start or end on a neighbouring line)."""
    lines = spec_lines()
    span = [lines[n].text for n in range(min(numbers) - margin, max(numbers) + margin + 1) if n in lines]
    return normalise(quote) in normalise(" ".join(span))
