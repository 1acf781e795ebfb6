"""The documentation site built with ``mkdocs build --strict`` and read in a real browser: headless Chromium
(the system's) driven by Playwright, over the site served on 127.0.0.1 from a temporary folder.

Set ``MSH_TEST_SITE_SCREENSHOTS`` to a folder (``docs/images``) to save the screenshots the docs front page
shows (``site-front.png``, ``site-cli.png``)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.integration.console.conftest import CHROMIUM_ARGS, _chromium

ROOT = Path(__file__).resolve().parents[3]
SCREENSHOTS = os.environ.get("MSH_TEST_SITE_SCREENSHOTS", "")


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The site built from this checkout into a temporary folder and served on 127.0.0.1: its base URL."""
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e .[dev])")
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(out)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def page(site: str) -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e .[dev])")
    executable = _chromium()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            outside: list[str] = []
            # The site is offline: nothing may be fetched from anywhere but the site itself.
            context.route(
                "**/*",
                lambda route: route.continue_() if route.request.url.startswith(site) else _refuse(route, outside),
            )
            opened = context.new_page()
            opened.outside = outside
            yield opened
        finally:
            browser.close()


def _refuse(route: Any, outside: list[str]) -> None:
    outside.append(route.request.url)
    route.abort()


def _heading(page: Any, selector: str) -> str:
    """The text of the first heading matched, without the permalink sign the theme appends."""
    return str(page.locator(selector).first.inner_text()).replace("\N{PILCROW SIGN}", "").strip()


def _shot(page: Any, name: str) -> None:
    if SCREENSHOTS:
        folder = ROOT / SCREENSHOTS if not Path(SCREENSHOTS).is_absolute() else Path(SCREENSHOTS)
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / name))


def test_the_front_page_renders_with_its_heading_and_navigation(site: str, page: Any) -> None:
    page.goto(site + "/")
    assert _heading(page, "article h1") == "pymsh"
    nav = page.locator("nav.md-nav--primary").inner_text()
    for entry in ("Getting started", "Tutorial", "Concepts", "CLI reference", "REST reference", "Design", "Glossary"):
        assert entry in nav
    assert page.outside == []  # no fonts, scripts or styles from the internet
    _shot(page, "site-front.png")


def test_the_cli_reference_renders_every_command(site: str, page: Any) -> None:
    page.goto(site + "/reference/cli/")
    assert _heading(page, "article h1") == "CLI reference"
    headings = [h.replace("\N{PILCROW SIGN}", "").strip() for h in page.locator("article h2").all_inner_texts()]
    assert "msh" in headings[0]
    assert any(h.startswith("msh serve") for h in headings)
    assert any(h.startswith("msh send") for h in headings)
    assert "usage: msh serve" in page.locator("article").inner_text()
    assert page.outside == []
    _shot(page, "site-cli.png")
