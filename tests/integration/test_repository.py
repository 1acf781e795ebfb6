"""What git tracks is the project's own source: no virtual environment, no installed packages, no caches,
no databases, and nothing that names a folder of the machine it was written on.

A tracked ``.venv`` broke every fresh clone once (its scripts named the interpreter of the machine that
made them); these tests fail as soon as anything of that kind is committed again. They read the index
with ``git ls-files`` and skip, saying why, outside a git checkout (e.g. in an unpacked source archive).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Folders that only an installation, a build or a tool run creates.
_GENERATED_DIRS = {
    ".venv",
    "venv",
    "env",
    ".env",
    "site-packages",
    "dist-packages",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
    ".tox",
    ".nox",
    "build",
    "dist",
    "htmlcov",
    "spark-warehouse",
    "metastore_db",
}
_GENERATED_SUFFIXES = (".pyc", ".pyo", ".egg-info", ".dist-info", ".so", ".whl")
# Database files (SQLite and its write-ahead log and shared memory), whatever they are called.
_DATABASE_NAMES = re.compile(r"\.(sqlite3?|db)(-wal|-shm|-journal)?$|\.(sqlite3?|db)$", re.IGNORECASE)
_SQLITE_MAGIC = b"SQLite format 3\x00"
# Absolute paths of a person's or a machine's folders; spelt in pieces so that this file does not match.
_MACHINE_PATH = re.compile(
    "|".join(
        (
            r"(?<![\w.:/-])/" + "home/[A-Za-z0-9._-]+/",
            r"(?<![\w.:/-])/" + "root/[A-Za-z0-9._-]",
            r"(?<![\w.:/-])/" + "Users/[A-Za-z0-9._-]+/",
            r"(?<![\w.:/-])/" + "work/[A-Za-z0-9._-]",
            r"(?<![\w.:/-])/" + r"(?:opt|usr/local)/[^\s'\"]*?/(?:python\d|bin/python)",
            r"[A-Za-z]:\\" + r"Users\\",
            r"\.pyenv/" + "versions/",
        )
    )
)
# A shebang that names an interpreter by its absolute path (other than the system's standard places).
_SHEBANG = re.compile(rb"^#!\s*(/\S+)")
_PORTABLE_SHEBANGS = ("/usr/bin/env", "/bin/sh", "/bin/bash", "/usr/bin/bash", "/usr/bin/sh")
_MAX_TRACKED_BYTES = 2 << 20


@cache
def tracked() -> tuple[PurePosixPath, ...]:
    """The paths git tracks in this checkout (skips the test outside a git checkout)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: cannot list the tracked files")
    result = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, timeout=60, check=False)
    if result.returncode != 0 or not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout: {result.stderr.decode(errors='replace').strip()}")
    return tuple(PurePosixPath(p) for p in result.stdout.decode("utf-8").split("\0") if p)


def test_the_tracked_list_is_the_projects_own_files() -> None:
    paths = tracked()
    assert PurePosixPath("pyproject.toml") in paths
    assert any(p.parts[0] == "msh" for p in paths)
    assert len(paths) < 2000, f"{len(paths)} files are tracked: has an installation or a data dump been committed?"


def test_no_virtual_environment_installed_package_or_cache_is_tracked() -> None:
    bad = sorted(
        str(p)
        for p in tracked()
        if _GENERATED_DIRS.intersection(p.parts[:-1])
        or p.name == "pyvenv.cfg"
        or any(p.name.endswith(s) or any(part.endswith(s) for part in p.parts[:-1]) for s in _GENERATED_SUFFIXES)
    )
    assert not bad, (
        f"{len(bad)} generated file(s) are tracked, e.g. {bad[:5]}: remove them from the index "
        "(git rm -r --cached PATH) and make sure .gitignore lists them"
    )


def test_no_database_file_is_tracked() -> None:
    bad = []
    for p in tracked():
        path = ROOT / p
        if _DATABASE_NAMES.search(p.name):
            bad.append(str(p))
        elif path.is_file():
            with open(path, "rb") as f:
                if f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC:
                    bad.append(str(p))
    assert not bad, f"database files are tracked: {bad}; stores belong in a temporary or ignored folder"


def test_no_large_file_is_tracked() -> None:
    large = [(str(p), (ROOT / p).stat().st_size) for p in tracked() if (ROOT / p).is_file()]
    large = [(p, size) for p, size in large if size > _MAX_TRACKED_BYTES]
    assert not large, f"files over {_MAX_TRACKED_BYTES} bytes are tracked: {large}"


def test_no_tracked_file_names_a_folder_of_the_machine_it_was_made_on() -> None:
    here = str(ROOT)
    found: list[str] = []
    for p in tracked():
        path = ROOT / p
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary (a key, an image): not a place where paths are written
        text = data.decode("utf-8", errors="replace")
        shebang = _SHEBANG.match(data)
        if shebang is not None and shebang.group(1).decode(errors="replace") not in _PORTABLE_SHEBANGS:
            found.append(f"{p}:1: interpreter named by absolute path: {shebang.group(0).decode(errors='replace')}")
        for number, line in enumerate(text.splitlines(), start=1):
            if here in line:
                found.append(f"{p}:{number}: names this checkout's folder {here}")
            else:
                match = _MACHINE_PATH.search(line)
                if match is not None:
                    found.append(f"{p}:{number}: machine path {match.group(0)!r}")
    assert not found, "tracked files name folders of one machine:\n" + "\n".join(found[:20])


def test_gitignore_lists_what_a_run_creates() -> None:
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    for pattern in (".venv/", "__pycache__/", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/", "build/", "dist/"):
        assert pattern in ignored, f".gitignore should list {pattern}"
    assert any("sqlite" in p for p in ignored), ".gitignore should list SQLite stores"
