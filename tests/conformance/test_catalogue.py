"""The conformance suite's own bookkeeping: every normative sentence of ebMS 2.0 §4.1, §6-§10 and Appendix B
is checked by a test or listed with the reason it is not, each citation quotes the specification at the
lines it names, and ``docs/conformance.md`` lists the tests that exist.

The comparison with the text reads ``../shared/reference/ebMS_v2_0.txt`` in place and is skipped with the
reason where that folder is absent.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from tests.conformance.clauses import all_citations, all_exemptions, name_prefix
from tests.support.shared import shared_dir
from tests.support.spec_text import in_scope, normative_lines, quoted, spec_lines

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"


def test_every_normative_sentence_is_checked_or_exempted() -> None:
    shared_dir()
    covered = {n for c in all_citations() for n in c.lines} | {n for e in all_exemptions() for n in e.lines}
    missing = {n: line for n, line in normative_lines().items() if n not in covered}
    assert not missing, "normative lines that no test cites and no exemption lists:\n" + "\n".join(
        f"  §{line.section} l.{n}: {line.text}" for n, line in sorted(missing.items())
    )


def test_citations_quote_the_text_at_the_lines_they_name() -> None:
    shared_dir()
    lines = spec_lines()
    wrong: list[str] = []
    for entry in [*all_citations(), *all_exemptions()]:
        name = getattr(entry, "test", f"exemption §{entry.section}")
        unknown = [n for n in entry.lines if n not in lines]
        if unknown:
            wrong.append(f"{name}: no line {unknown} in the specification")
            continue
        sections = {lines[n].section for n in entry.lines}
        if any(not (s == entry.section or s.startswith(entry.section + ".")) for s in sections):
            wrong.append(f"{name}: cites §{entry.section}, but lines {entry.lines} are in §{sorted(sections)}")
        if not any(lines[n].normative and in_scope(lines[n].section) for n in entry.lines):
            wrong.append(f"{name}: none of lines {entry.lines} is a normative line of the covered sections")
        if not quoted(entry.sentence, entry.lines):
            wrong.append(f"{name}: {entry.sentence!r} is not the text around lines {entry.lines}")
    assert not wrong, "\n".join(wrong)


def test_a_line_is_either_checked_or_exempted_never_both() -> None:
    cited = {n for c in all_citations() for n in c.lines}
    both = sorted(n for e in all_exemptions() for n in e.lines if n in cited)
    assert not both, f"lines both cited by a test and exempted: {both}"


def test_test_names_start_with_their_clause() -> None:
    citations = all_citations()
    assert citations, "no @clause test found in tests/conformance"
    wrong = [c.test for c in citations if not c.test.split("::")[1].startswith(name_prefix(c.section))]
    assert not wrong, "conformance tests must be named after their clause (test_6_5_7_…): " + ", ".join(wrong)
    # One test may cite several sentences; one sentence may be checked by several tests.
    assert all(count < 20 for count in Counter(c.test for c in citations).values())


def test_the_docs_table_lists_the_tests_that_exist() -> None:
    assert DOC.is_file(), "docs/conformance.md is missing: run .venv/bin/python scripts/conformance.py"
    listed = set(re.findall(r"`(test_[a-z0-9_]+)`", DOC.read_text(encoding="utf-8")))
    existing = {c.test.split("::")[1] for c in all_citations()}
    assert listed == existing, (
        "docs/conformance.md is out of date (run .venv/bin/python scripts/conformance.py); "
        f"not in the table: {sorted(existing - listed)}; no longer tests: {sorted(listed - existing)}"
    )
