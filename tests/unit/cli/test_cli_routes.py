"""The command line on the multi-hop samples: the routing table printed by --print-settings, an intermediary
without agreements, and a bad route as one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from msh.cli import main

ROOT = Path(__file__).resolve().parents[3]
MULTIHOP = ROOT / "samples" / "config" / "multihop"
KEYS = ROOT / "samples" / "keys"
TYPE = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"


@pytest.fixture(autouse=True)
def no_msh_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No MSH_ variable from the caller's environment; each store a fresh SQLite file in ``tmp_path``."""
    for name in list(os.environ):
        if name.startswith("MSH_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MSH_STORE_URL", str(tmp_path / "store.sqlite"))


def test_print_settings_lists_the_routes_of_the_intermediary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--config", str(MULTIHOP / "intermediary.toml"), "--print-settings"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "agreements.paths = []" in lines
    assert lines[-2:] == [
        f"routing.routes[1] = route to-C: To 555555555 (type {TYPE}) -> https://127.0.0.1:8092/msh, hop_ack true, "
        f'retries 5, retry_interval PT5S, persist_duration P1D, trusted ["{KEYS / "party-c.cert.pem"}"]',
        f"routing.routes[2] = route to-A: To 123456789 (type {TYPE}) -> https://127.0.0.1:8081/msh, hop_ack true, "
        f'retries 5, retry_interval PT5S, persist_duration P1D, trusted ["{KEYS / "party-a.cert.pem"}"]',
    ]


def test_print_settings_names_the_intermediary_of_a_route(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--config", str(MULTIHOP / "party-a.toml"), "--print-settings"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"routing.routes[1] = route to-C: To 555555555 (type {TYPE}) -> https://127.0.0.1:8090/msh (intermediary "
        f"999999999), hop_ack true, retries 5, retry_interval PT5S, persist_duration (not set), trusted "
        f'["{KEYS / "intermediary.cert.pem"}"]'
    )


def test_an_intermediary_lists_no_agreement(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cpa", "list", "--config", str(MULTIHOP / "intermediary.toml")]) == 0
    assert capsys.readouterr().out == (
        "no agreements (agreements.paths names none: this MSH only forwards along its routes)\n"
    )


def test_a_route_from_the_environment_is_one_line_with_status_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MSH_ROUTING_ROUTES", "https://127.0.0.1:8092/msh")
    assert main(["serve", "--config", str(MULTIHOP / "intermediary.toml"), "--print-settings"]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert "  - MSH_ROUTING_ROUTES (environment): routes cannot come from the environment;" in captured.err
