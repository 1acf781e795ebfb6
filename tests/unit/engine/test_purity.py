"""The engine is sans-IO (docs/design.md §2): no clock, no id or chance source, no sockets, files or database."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[3] / "msh" / "engine"
SOURCES = sorted(ENGINE.glob("*.py"))

# Text that must not appear anywhere in the engine's source, comments and docstrings included.
FORBIDDEN_TEXT = (
    "datetime.now",
    "datetime.utcnow",
    "date.today",
    "time.time",
    "uuid",
    "random",
    "socket",
    "sqlalchemy",
    "open(",
)
# Modules the engine must not import.
FORBIDDEN_MODULES = {
    "time",
    "uuid",
    "random",
    "secrets",
    "socket",
    "os",
    "io",
    "sqlalchemy",
    "asyncio",
    "threading",
    "http",
    "urllib",
    "httpx",
    "aiohttp",
    "subprocess",
    "pathlib",
}


def test_the_engine_sources_are_found() -> None:
    assert {p.name for p in SOURCES} >= {"__init__.py", "sending.py", "receiving.py", "timers.py"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_forbidden_text(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    found = [word for word in FORBIDDEN_TEXT if word in text.lower()]
    assert found == [], f"{path.name} mentions {found}: the engine takes now and ids as parameters"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_forbidden_imports(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            imported.add(node.module.split(".")[0])
    assert imported & FORBIDDEN_MODULES == set(), f"{path.name} imports {imported & FORBIDDEN_MODULES}"


def test_the_engine_does_not_pull_in_the_store() -> None:
    """Importing the engine loads no database or HTTP library (the store and transports are adapters).

    (The standard library's ``socket`` does get loaded, by the agreement loader's XML schema library.)
    """
    import subprocess
    import sys

    code = (
        "import sys, msh.engine; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'sqlalchemy', 'httpx', 'aiohttp'}); "
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ENGINE.parents[1]
    )
    assert out.stdout.strip() == ""
