"""msh.faults.pair's Partner: one real ``msh serve`` process, started with extra environment variables (as the
two-partner demo starts its partners), stopped, and reported with its log when it cannot start."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from msh.errors import ConfigurationError
from msh.faults.pair import Partner, free_port, make_pair


def test_partner_env_overrides_the_settings_file(tmp_path: Path) -> None:
    pair = make_pair(tmp_path / "pair", proxy=False)
    port, store = free_port(), tmp_path / "elsewhere.sqlite"
    env = {"MSH_STORE_URL": str(store), "MSH_SERVER_PORT": str(port)}
    partner = Partner("A", pair.a.config, store, port, tmp_path / "a.log", env=env)
    try:
        partner.start()
        assert partner.alive and partner.starts == 1
        assert f"listening on https://127.0.0.1:{port}" in partner.log.read_text()
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        assert store.exists() and not pair.a.store.exists()
        partner.stop()
        assert not partner.alive
    finally:
        partner.kill()


def test_partner_that_cannot_start_is_reported_with_its_log(tmp_path: Path) -> None:
    pair = make_pair(tmp_path / "pair", proxy=False)
    env = {"MSH_SERVER_PORT": "not-a-port"}
    partner = Partner("B", pair.b.config, pair.b.store, pair.b.port, tmp_path / "b.log", env=env)
    try:
        with pytest.raises(ConfigurationError, match=r"partner B exited at start:\n(.|\n)*MSH_SERVER_PORT"):
            partner.start()
    finally:
        partner.kill()
