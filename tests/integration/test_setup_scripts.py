"""``scripts/_env.sh`` notices a virtual environment it cannot trust and rebuilds it.

The decision is ``_msh_venv_problem`` in ``scripts/_venv_check.sh``; these tests run it on environments
made to be broken the ways real ones break (moved or copied from another folder, made by another Python,
made on another machine, an interrupted creation or installation) and on a good one. Creating a real
environment takes a second (``--without-pip``) or a few (with pip); nothing is downloaded.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "_venv_check.sh"
VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


def problem(venv: Path, *, version: str = VERSION, root: Path = ROOT) -> str:
    """What ``_msh_venv_problem`` says about ``venv`` (empty: usable)."""
    script = f'ROOT="{root}"; WANT_VERSION="{version}"; source "{CHECK}"; _msh_venv_problem "{venv}"'
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def make_venv(path: Path, *, pip: bool) -> Path:
    args = [sys.executable, "-m", "venv", str(path)]
    if not pip:
        args.insert(3, "--without-pip")
    subprocess.run(args, check=True, capture_output=True, timeout=300)
    return path


@pytest.fixture(scope="module")
def venv_with_pip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("good") / ".venv", pip=True)


def test_no_environment_yet_is_not_a_problem(tmp_path: Path) -> None:
    assert problem(tmp_path / ".venv") == ""


def test_a_fresh_environment_is_usable(venv_with_pip: Path) -> None:
    assert problem(venv_with_pip) == ""


def test_an_environment_made_by_another_python_version_is_rebuilt(venv_with_pip: Path) -> None:
    assert "made by Python" in problem(venv_with_pip, version="3.99")


def test_an_environment_whose_python_is_gone_is_rebuilt(tmp_path: Path) -> None:
    venv = make_venv(tmp_path / ".venv", pip=False)
    for name in ("python", "python3", f"python{VERSION}"):
        link = venv / "bin" / name
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to(tmp_path / "nowhere" / "python3")  # the base interpreter of another machine
    assert "does not run" in problem(venv)


def test_an_interrupted_creation_without_pip_is_rebuilt(tmp_path: Path) -> None:
    venv = make_venv(tmp_path / ".venv", pip=False)
    assert "no working pip" in problem(venv)


def test_a_moved_environment_is_rebuilt(venv_with_pip: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere" / ".venv"
    shutil.copytree(venv_with_pip, moved, symlinks=True)
    assert "moved or copied" in problem(moved)


def test_an_environment_with_the_project_of_another_checkout_is_rebuilt(venv_with_pip: Path, tmp_path: Path) -> None:
    # The stamp says the project was installed, but it is not importable from this checkout (an
    # interrupted installation, or an editable install of the folder this one was copied from).
    venv = tmp_path / "copy" / ".venv"
    shutil.copytree(venv_with_pip, venv, symlinks=True)
    pip = venv / "bin" / "pip"
    lines = pip.read_text(encoding="utf-8").splitlines(keepends=True)
    pip.write_text(f"#!{venv}/bin/python\n" + "".join(lines[1:]), encoding="utf-8")
    (venv / ".msh-installed-base").write_text("0\n", encoding="utf-8")
    said = problem(venv)
    assert "not this checkout" in said, said


def test_a_folder_that_is_not_an_environment_is_reported(tmp_path: Path) -> None:
    folder = tmp_path / ".venv"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n", encoding="utf-8")
    assert "no pyvenv.cfg" in problem(folder)
