"""The state diagram of the docs (Reliable messaging) is the one drawn from the engine's transition table."""

from __future__ import annotations

from pathlib import Path

from msh.engine.sending import ReliableMessagingMethod, state_diagram


def test_docs_diagram_is_drawn_from_the_table() -> None:
    page = Path(__file__).resolve().parents[3] / "docs" / "concepts" / "reliability.md"
    readme = page.read_text(encoding="utf-8")
    assert "```mermaid\n" + state_diagram() + "```" in readme
    # The table of ReliableMessagingMethod Transport, in its own section.
    assert "```mermaid\n" + state_diagram(ReliableMessagingMethod.TRANSPORT) + "```" in readme
