"""How a conformance test cites the sentence of ebMS 2.0 it checks, and how a sentence that no test checks
says why.

A test in ``tests/conformance`` carries ``@clause(section, lines, sentence)``: the section number (``"6.5.7"``,
``"B.2.3"``), the line number(s) the published specification prints beside the sentence, and the sentence
itself, quoted as printed. Its name starts with the section (``test_6_5_7_…``, ``test_b_2_3_…``) and its
expected answer comes from the quoted text. A sentence that no test checks is listed in the module's
``EXEMPTIONS`` with the reason. ``tests/conformance/test_catalogue.py`` holds both lists against the
specification's text, and ``scripts/conformance.py`` turns them and a run of the suite into
``docs/conformance.md``.
"""

from __future__ import annotations

import ast
import enum
import importlib
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def clause(section: str, lines: int | tuple[int, ...], sentence: str) -> pytest.MarkDecorator:
    """Mark a test as the check of one normative sentence (see the module docstring)."""
    numbers = (lines,) if isinstance(lines, int) else tuple(lines)
    return pytest.mark.clause(section=section, lines=numbers, sentence=sentence)


class Kind(enum.Enum):
    """Why a normative sentence has no test."""

    NOT_FOLLOWED = "not followed, deliberately"
    NOT_BUILT = "not built yet"
    FOR_PEOPLE = "addressed to people, not to the software"


@dataclass(frozen=True)
class Exemption:
    """A normative sentence that no test checks, and why."""

    section: str
    lines: tuple[int, ...]
    sentence: str
    kind: Kind
    reason: str


@dataclass(frozen=True)
class Citation:
    """One ``@clause`` found on a test function."""

    test: str  # the pytest node id, e.g. tests/conformance/test_6_reliable.py::test_6_5_7_…
    section: str
    lines: tuple[int, ...]
    sentence: str


def modules() -> list[Path]:
    """The conformance test modules."""
    return sorted(p for p in HERE.glob("test_*.py") if p.name != "test_catalogue.py")


def _literal(node: ast.expr) -> object:
    return ast.literal_eval(node)


def citations(path: Path) -> list[Citation]:
    """The ``@clause`` decorators of a module's test functions (read from the source, not run)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    node_prefix = f"tests/conformance/{path.name}::"
    found: list[Citation] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "clause":
                section, lines, sentence = (_literal(arg) for arg in decorator.args)
                numbers = (lines,) if isinstance(lines, int) else tuple(lines)  # type: ignore[arg-type]
                found.append(Citation(node_prefix + node.name, str(section), numbers, str(sentence)))
    return found


def all_citations() -> list[Citation]:
    return [c for path in modules() for c in citations(path)]


def all_exemptions() -> list[Exemption]:
    found: list[Exemption] = []
    for path in modules():
        module = importlib.import_module(f"tests.conformance.{path.stem}")
        found.extend(getattr(module, "EXEMPTIONS", ()))
    return found


def section_key(section: str) -> tuple[int, ...]:
    """Sort order of section numbers: 4.1 < 6 < 6.1 < 6.10 < 10 < B.1 (appendix B after the body)."""
    parts = section.split(".")
    if parts[0] == "B":
        return (1000, *(int(p) for p in parts[1:]))
    return tuple(int(p) for p in parts)


def name_prefix(section: str) -> str:
    """The name a test of ``section`` starts with: ``6.5.7`` → ``test_6_5_7_``, ``B.2.3`` → ``test_b_2_3_``."""
    return "test_" + section.lower().replace(".", "_") + "_"
