"""The MSH works when installed as a wheel on a server that has no source tree.

One wheel is built per test session (``pip wheel --no-build-isolation --no-deps``, from a copy of the
project's sources so that the checkout is not touched; nothing is downloaded). The tests check what the
wheel holds (every package, the schemas, ``py.typed``) and that, installed into a fresh virtual
environment that cannot see the checkout, it finds its schemas through :mod:`importlib.resources`,
validates a message and loads an agreement, from Python and through the ``msh`` command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300
_SOURCES = ("pyproject.toml", "README.md", "msh", "cpa", "schemas", "samples/messages")


def _run(
    args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, check=False, cwd=cwd, env=env)
    assert result.returncode == 0, f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built from a copy of its sources."""
    try:
        import setuptools
    except ImportError:
        pytest.skip("setuptools is not installed in this environment (it comes with the dev extra)")
    if tuple(int(x) for x in setuptools.__version__.split(".")[:2]) < (77, 0):
        pytest.skip(f"setuptools {setuptools.__version__} cannot build this project (77 or newer: the dev extra)")
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in _SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=ignore)  # samples/messages: its parents made on the way
        else:
            shutil.copy2(path, source / name)
    out = work / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(out),
            str(source),
        ]
    )
    wheels = list(out.glob("pymsh-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def _names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_the_wheel_holds_every_schema_inside_the_package(wheel: Path) -> None:
    names = _names(wheel)
    schemas = sorted(p.name for p in (ROOT / "schemas").glob("*.xsd"))
    assert schemas, "the checkout has no schemas/*.xsd"
    for name in [*schemas, "msh-api.wsdl", "msh-api.openapi.json"]:  # and the application interfaces' WSDL
        assert f"msh/schemas/{name}" in names, f"{name} is not in the wheel"
    assert not any(n.startswith("schemas/") for n in names), "schemas must travel inside msh/, not at the top"


def test_the_wheel_declares_its_types(wheel: Path) -> None:
    names = _names(wheel)
    assert "msh/py.typed" in names
    assert "cpa/py.typed" in names


def test_the_wheel_holds_every_package_of_the_source_tree(wheel: Path) -> None:
    names = _names(wheel)
    for top in ("msh", "cpa"):
        for init in (ROOT / top).rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            relative = init.relative_to(ROOT).as_posix()
            assert relative in names, f"package {init.parent.relative_to(ROOT)} is missing from the wheel"
            for module in init.parent.glob("*.py"):
                assert module.relative_to(ROOT).as_posix() in names
    assert "msh/store/migrations/versions/v0001_initial.py" in names
    assert not any("__pycache__" in n or n.startswith("tests/") for n in names)


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtual environment with the wheel installed and no way to see the checkout.

    Its dependencies come from this environment's site-packages, listed in a ``.pth`` file (a folder
    listed there is put on ``sys.path`` without running its own ``.pth`` files, so this environment's
    editable install of the checkout stays invisible)."""
    venv = tmp_path_factory.mktemp("server") / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip())
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (site / "dependencies.pth").write_text("\n".join(sorted(ours)) + "\n", encoding="utf-8")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)])
    yield venv


def _isolated_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "MSH_"))}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def test_installed_wheel_finds_its_schemas_without_the_source_tree(installed: Path, tmp_path: Path) -> None:
    sample = ROOT / "samples" / "messages" / "order-request.http"
    script = textwrap.dedent(
        f"""
        import json, msh, cpa
        from msh.resources import schemas_dir, schema_path
        from msh.ebms.message import read_message_file, ParseMode
        from cpa import load
        message = read_message_file({str(sample)!r}, mode=ParseMode.STRICT)
        agreement = load({str(ROOT / "samples" / "cpas" / "demo-a-b.xml")!r})
        print(json.dumps({{"msh": msh.__file__, "cpa": cpa.__file__, "schemas": str(schemas_dir()),
                          "header": str(schema_path("msg-header-2_0.xsd")),
                          "action": message.envelope.message_header.action, "cpaid": agreement.cpaid}}))
        """
    )
    result = _run([str(installed / "bin" / "python"), "-c", script], cwd=tmp_path, env=_isolated_env())
    found = json.loads(result.stdout)
    for key in ("msh", "cpa", "schemas", "header"):
        assert Path(found[key]).resolve().is_relative_to(installed.resolve()), (key, found[key])
        assert not Path(found[key]).resolve().is_relative_to(ROOT), (key, found[key])
    assert found["action"] == "NewOrder"
    assert found["cpaid"] == "cpa-demo-a-b"


def test_installed_wheel_has_a_working_msh_command(installed: Path, tmp_path: Path) -> None:
    msh = installed / "bin" / "msh"
    assert msh.is_file(), "the wheel's console script msh was not installed"
    result = _run(
        [str(msh), "cpa", "validate", str(ROOT / "samples" / "cpas" / "demo-a-b.xml")],
        cwd=tmp_path,
        env=_isolated_env(),
    )
    assert "ok" in result.stdout
    inspected = subprocess.run(
        [str(msh), "message", "inspect", str(ROOT / "samples" / "messages" / "order-request.http")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=tmp_path,
        env=_isolated_env(),
        check=False,
    )
    assert inspected.returncode == 0, inspected.stderr
    assert "verdict: valid" in inspected.stdout


def test_installed_wheel_runs_the_codec_demo_on_its_own_samples(installed: Path, tmp_path: Path) -> None:
    """``msh demo --codec`` reads the sample messages the wheel carries (the data package
    msh.sample_messages), not a samples/ folder of the checkout."""
    result = _run([str(installed / "bin" / "msh"), "demo", "--codec"], cwd=tmp_path, env=_isolated_env())
    first = result.stdout.splitlines()[0]
    folder = Path(first.split(" from ", 1)[1])
    assert folder.resolve().is_relative_to(installed.resolve()), first
    shipped = sorted(
        p.name for p in (ROOT / "samples" / "messages").iterdir() if p.suffix in (".http", ".xml", ".mime")
    )
    assert first.startswith(f"ebXML MSH demo: {len(shipped)} sample messages"), first
    for name in shipped:
        assert name in result.stdout
    assert "0 failed" in result.stdout
