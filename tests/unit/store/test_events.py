"""The journal's event kinds are one list (msh.store.events.EventKind): the store refuses other names, and no
module of the MSH spells a kind as a string of its own."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest

from msh.store import MemoryStore, OutboundKind
from msh.store.events import EventKind, ended, signal_received

MSH = Path(__file__).resolve().parents[3] / "msh"
KINDS = {k.value for k in EventKind}


def test_each_way_a_sending_ends_has_its_own_kind() -> None:
    endings = {ended(kind, how) for kind in OutboundKind for how in ("delivered", "sent", "failed")}
    assert len(endings) == len(OutboundKind) * 3
    # An application's own message ends in the plain names the reports count; forwards and signals apart.
    assert (
        ended(OutboundKind.OWN, "delivered") == "delivered"
        and ended(OutboundKind.FORWARD, "failed") == "forward-failed"
    )
    assert (signal_received("Pong"), signal_received("StatusResponse")) == ("signal-Pong", "signal-StatusResponse")
    with pytest.raises(KeyError):
        signal_received("Acknowledgment")  # acknowledgments are recorded by what they do, not as a signal event


def test_the_store_refuses_a_kind_outside_the_list_and_keeps_the_name_as_text() -> None:
    store = MemoryStore()
    at = datetime(2026, 1, 1, tzinfo=UTC)
    with store.transaction() as tx:
        with pytest.raises(ValueError, match="journal event kind"):
            tx.append_event(at=at, kind="Delivered")  # type: ignore[arg-type]
        tx.append_event(at=at, kind=EventKind.HOP_ACKNOWLEDGED, message_id="m@x")
    with store.transaction(readonly=True) as tx:
        (event,) = tx.list_events()
    assert event.kind == "hop-acknowledged"


def _spelled_kinds(path: Path) -> list[str]:
    """Where ``path`` writes an event kind as a string: ``kind="…"`` arguments and ``….kind == "…"``
    (or ``!=``, ``in``) comparisons whose text is one of the kinds."""
    found: list[str] = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "kind":
            if isinstance(node.value, ast.Constant) and node.value.value in KINDS:
                found.append(f"{path.name}:{node.value.lineno} kind={node.value.value!r}")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            about_kind = any(
                (isinstance(s, ast.Attribute) and s.attr == "kind") or (isinstance(s, ast.Name) and s.id == "kind")
                for s in sides
            )
            texts = [c for s in sides for c in ast.walk(s) if isinstance(c, ast.Constant) and c.value in KINDS]
            if about_kind and texts:
                found.append(f"{path.name}:{node.lineno} compares a kind with {texts[0].value!r}")
    return found


def test_no_module_spells_an_event_kind_of_its_own() -> None:
    # The migrations are frozen history and may spell what they migrate; the list itself is events.py.
    modules = [p for p in MSH.rglob("*.py") if "migrations" not in p.parts and p.name != "events.py"]
    spelled = [hit for p in modules for hit in _spelled_kinds(p)]
    assert not spelled, "use msh.store.events.EventKind instead:\n" + "\n".join(spelled)
