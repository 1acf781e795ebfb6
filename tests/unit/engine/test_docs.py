"""The README's state diagram is the one drawn from the engine's transition table."""

from __future__ import annotations

from pathlib import Path

from msh.engine.sending import state_diagram


def test_readme_diagram_is_drawn_from_the_table() -> None:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    assert "```mermaid\n" + state_diagram() + "```" in readme
