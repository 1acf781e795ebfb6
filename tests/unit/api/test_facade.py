"""The application interfaces and the command line use the MSH through its facade (msh.runtime.msh.Msh): none
of them reaches into its parts (``msh.core``: the writer, the work pool, the executor)."""

from __future__ import annotations

import ast
from pathlib import Path

MSH = Path(__file__).resolve().parents[3] / "msh"


def test_nothing_above_the_facade_reaches_into_the_runtimes_parts() -> None:
    reaching: list[str] = []
    for layer in ("api", "cli"):
        for path in sorted((MSH / layer).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr == "core":
                    reaching.append(f"{path.relative_to(MSH)}:{node.lineno}")
    assert not reaching, "use what msh.runtime.msh.Msh offers instead of .core: " + ", ".join(reaching)
