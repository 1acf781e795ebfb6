"""Every Python snippet of README.md and of the documentation site (``docs/``) runs as written, from a
folder holding a copy of ``samples/``.

The copy's agreement names free ports instead of 8081/8082 (so the test runs beside a demo), and partner B
runs (``msh serve``) so that the snippet with the runtime in the application sees its callback fire.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from msh.faults.pair import Partner, free_port

ROOT = Path(__file__).resolve().parents[2]
SNIPPET = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def snippets() -> list[str]:
    """The Python snippets of the README and of every page of the documentation site, in order."""
    return [code for page in PAGES for code in SNIPPET.findall(page.read_text(encoding="utf-8"))]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A working folder with ``samples/`` (agreement on free ports), partner B serving; the environment."""
    work = tmp_path_factory.mktemp("readme")
    shutil.copytree(ROOT / "samples", work / "samples", ignore=shutil.ignore_patterns("*.sqlite*"))
    a_port, b_port = free_port(), free_port()
    cpa = work / "samples" / "cpas" / "demo-a-b.xml"
    text = cpa.read_text(encoding="utf-8")
    for old, new in (
        ("127.0.0.1:8081/msh", f"127.0.0.1:{a_port}/msh"),
        ("127.0.0.1:8082/msh", f"127.0.0.1:{b_port}/msh"),
    ):
        assert old in text
        text = text.replace(old, new)
    cpa.write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MSH_")}
    b_config = work / "samples" / "config" / "party-b.toml"
    b = Partner("B", b_config, work / "samples" / "config" / "party-b.sqlite", b_port, work / "b.log")
    api_port, token = free_port(), "readme-erp-token-0123456789"
    # B serves its application interfaces for the client example ("Application interfaces").
    b.env = {
        "MSH_SERVER_PORT": str(b_port),
        "MSH_API_ENABLED": "true",
        "MSH_API_PORT": str(api_port),
        "ERP_API_TOKEN": token,
    }
    b.start()
    try:
        yield (
            work,
            {
                **env,
                "MSH_SERVER_PORT": str(a_port),
                "PYTHONPATH": str(ROOT),
                "PYMSH_API": f"http://127.0.0.1:{api_port}/api",
                "ERP_API_TOKEN": token,
            },
        )
    finally:
        b.stop()


def test_the_readme_has_python_snippets() -> None:
    assert len(snippets()) >= 4


@pytest.mark.parametrize("index", range(len(snippets())))
def test_each_python_snippet_runs_as_written(index: int, folder: tuple[Path, dict[str, str]]) -> None:
    work, env = folder
    code = snippets()[index]
    done = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"snippet {index + 1} of the docs failed:\n{code}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    if "on_delivered=delivered" in code:
        # The callbacks fire where the runtime runs: here, in the snippet's own process.
        assert re.search(r"^delivered \S+@party-a\.example$", done.stdout, re.MULTILINE), done.stdout
