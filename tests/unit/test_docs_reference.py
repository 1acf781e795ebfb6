"""The generated reference pages of the documentation site (configuration, CLI, REST) are the ones
``scripts/docs_reference.py`` draws from the code: the settings declarations, the argparse parsers and the
OpenAPI document."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["configuration.md", "cli.md", "rest.md"])
def test_the_committed_reference_page_is_the_generated_one(name: str) -> None:
    generator = _generator()
    if name == "cli.md" and sys.version_info[:2] != generator.CLI_PYTHON:
        wanted, running = (".".join(map(str, v)) for v in (generator.CLI_PYTHON, sys.version_info[:2]))
        pytest.skip(
            f"cli.md holds the help as Python {wanted}'s argparse lays it out; Python {running} lays it out otherwise"
        )
    pages = generator.pages()
    path = ROOT / "docs" / "reference" / name
    assert path.read_text(encoding="utf-8") == pages[path], f"run scripts/docs_reference.py: {name} is out of date"


def test_the_cli_reference_has_every_command() -> None:
    from msh.cli import build_parser

    text = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for command in commands:
        assert f"\n## msh {command}\n" in text
        assert f"usage: msh {command}" in text


def test_the_rest_reference_has_every_path() -> None:
    import json

    doc = json.loads((ROOT / "schemas" / "msh-api.openapi.json").read_text(encoding="utf-8"))
    text = (ROOT / "docs" / "reference" / "rest.md").read_text(encoding="utf-8")
    for path in doc["paths"]:
        assert f"`{path}`" in text
    for schema in doc["components"]["schemas"]:
        assert f"\n### {schema}\n" in text


def test_the_check_mode_finds_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generator = _generator()
    monkeypatch.setattr(generator, "REFERENCE", tmp_path)
    monkeypatch.setattr(generator, "ROOT", ROOT)
    original = generator.pages
    monkeypatch.setattr(generator, "pages", lambda: {tmp_path / p.name: t for p, t in original().items()})
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0
    (tmp_path / "configuration.md").write_text("# Configuration reference\n", encoding="utf-8")
    assert generator.main(["--check"]) == 1


def test_on_another_python_the_cli_page_is_neither_written_nor_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    generator = _generator()
    monkeypatch.setattr(generator, "REFERENCE", tmp_path)
    monkeypatch.setattr(generator, "CLI_PYTHON", (3, 0))
    assert [path.name for path in generator.pages()] == ["configuration.md", "rest.md"]
    (tmp_path / "cli.md").write_text("kept\n", encoding="utf-8")
    assert generator.main([]) == 0
    assert (tmp_path / "cli.md").read_text(encoding="utf-8") == "kept\n"
    assert "cli.md left as it is" in capsys.readouterr().err
    assert generator.main(["--check"]) == 0
