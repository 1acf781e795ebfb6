"""The store's modules depend on each other in one direction (docs/design.md §2, §9).

The port (:mod:`msh.store.api`, :mod:`msh.store.transaction`) and what it speaks of (records, errors,
rules) never import the stores that implement it; the two stores never import each other; no module of
the store imports one that imports it back (lazy imports inside functions count); the engine never
imports the store.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
STORE = ROOT / "msh" / "store"
PORT = ("msh.store.api", "msh.store.transaction", "msh.store.records", "msh.store.errors", "msh.store.rules")
IMPLEMENTATIONS = ("msh.store.memory", "msh.store.sql", "msh.store.factory")


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in sorted(STORE.rglob("*.py"))}


def _imports(path: Path) -> set[str]:
    """The msh modules ``path`` imports anywhere (``from a import b`` names module ``a.b`` if it is one)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & MODULES.keys()
            found.update(submodules if len(submodules) == len(node.names) else {node.module, *submodules})
    return {name for name in found if name.startswith("msh.")}


GRAPH = {name: _imports(path) & MODULES.keys() - {name} for name, path in MODULES.items()}


def _reaches(start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        for nxt in GRAPH.get(todo.pop(), set()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def test_the_store_modules_are_found() -> None:
    assert set(PORT) | {"msh.store.memory", "msh.store.sql.store", "msh.store.sql.rows"} <= MODULES.keys()


@pytest.mark.parametrize("name", PORT)
def test_the_port_never_imports_its_implementations(name: str) -> None:
    assert not any(_reaches(name, impl) for impl in IMPLEMENTATIONS if impl in MODULES), GRAPH[name]


def test_the_two_stores_never_import_each_other() -> None:
    sql = [name for name in MODULES if name.startswith("msh.store.sql")]
    assert not any(_reaches("msh.store.memory", name) for name in sql)
    assert not any(_reaches(name, "msh.store.memory") for name in sql)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_store_module_imports_one_that_imports_it_back(name: str) -> None:
    back = sorted(other for other in GRAPH[name] if other != "msh.store" and _reaches(other, name))
    assert back == [], f"{name} and {back} import each other"


@pytest.mark.parametrize("path", sorted((ROOT / "msh" / "engine").glob("*.py")), ids=lambda p: p.name)
def test_the_engine_never_imports_the_store(path: Path) -> None:
    assert not {name for name in _imports(path) if name.startswith("msh.store")}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_store_modules_stay_small(name: str) -> None:
    lines = MODULES[name].read_text(encoding="utf-8").count("\n")
    assert lines <= 600, f"{name} has {lines} lines: split it by concern"
