"""The console in a real browser: headless Chromium (the system's, Debian package ``chromium``) driven by
Playwright, against the console served by uvicorn over an MSH store filled by real MSHs (:mod:`.scenario`).

Each viewport (1280 px desktop, a phone) gets its own store, server and browser context. Set
``MSH_TEST_CONSOLE_SCREENSHOTS`` to a folder (e.g. ``docs/images``) to save PNG screenshots of the pages."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from msh.admin.app import build_admin_app, load_operators
from msh.console import build_console
from msh.runtime.msh import Msh
from tests.integration.console.scenario import Traffic, make_traffic
from tests.integration.console.server import serving

CHROMIUM = os.environ.get("MSH_TEST_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = os.environ.get("MSH_TEST_CONSOLE_SCREENSHOTS", "")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORTS: dict[str, dict[str, Any]] = {
    "desktop": {"viewport": {"width": 1280, "height": 900}},
    "phone": {
        "viewport": {"width": 390, "height": 844},
        "is_mobile": True,
        "has_touch": True,
        "device_scale_factor": 2,
    },
}


def _chromium() -> str:
    found = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip(f"no Chromium to drive: {CHROMIUM} is absent (scripts/test installs Debian's chromium when root)")
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e .[dev])")
    executable = _chromium()
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


OPERATOR_TOKEN = "console-operator-token-0123456789"


@dataclass
class Site:
    """One viewport's console: its base URL, the browser page, the traffic behind it, and the MSH it shows."""

    name: str
    url: str
    page: Any
    traffic: Traffic
    msh: Msh

    def shot(self, what: str) -> None:
        """Save a screenshot of the page when ``MSH_TEST_CONSOLE_SCREENSHOTS`` names a folder."""
        if SCREENSHOTS:
            folder = Path(SCREENSHOTS)
            folder.mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(folder / f"console-{what}-{self.name}.png"), full_page=True)


@pytest.fixture(scope="module", params=list(VIEWPORTS))
def site(request: pytest.FixtureRequest, browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    name = request.param
    folder = tmp_path_factory.mktemp(f"console-{name}")
    # The scenario runs its own event loop: on a thread of its own, beside Playwright's.
    with ThreadPoolExecutor(1) as pool:
        traffic = pool.submit(make_traffic, folder, datetime.now(UTC)).result(timeout=300)
    msh = Msh(traffic.settings, keys=False)
    try:
        # Served as msh serve serves it: mounted on the admin port's application, behind the operators'
        # sign-in, which a browser gives as Basic credentials (operator name and token).
        operators = load_operators(traffic.settings, {"MSH_OPS_TOKEN": OPERATOR_TOKEN})
        admin = build_admin_app(msh, traffic.settings, extra=build_console(msh, traffic.settings), operators=operators)
        with serving(admin) as url:
            credentials = {"username": "ops", "password": OPERATOR_TOKEN}
            context = browser.new_context(**VIEWPORTS[name], accept_downloads=True, http_credentials=credentials)
            context.set_default_timeout(15_000)
            try:
                yield Site(name, url, context.new_page(), traffic, msh)
            finally:
                context.close()
    finally:
        msh.close()
