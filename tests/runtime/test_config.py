"""Settings: the sample files, environment overrides, and errors that name the setting."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from cpa.precedence import Reading
from msh.ebms.message import ParseMode
from msh.errors import ConfigurationError
from msh.runtime.config import describe, load_settings, settings_from_mapping

CONFIG = Path(__file__).resolve().parents[2] / "samples" / "config"


def test_the_sample_settings_load_with_paths_read_from_their_folder() -> None:
    s = load_settings(CONFIG / "party-a.toml", env={})
    assert s.identity.party_id == "123456789"
    assert s.agreements.paths == (CONFIG / "../cpas/demo-a-b.xml",)
    assert s.store.url == str(CONFIG / "party-a.sqlite")
    assert (s.server.port, s.server.tls, s.tls.require_client_certificate) == (8081, True, True)
    assert s.sending.first_resend_timeout == timedelta(seconds=3)
    assert s.sending.http_timeout == timedelta(seconds=2)
    assert s.timers.poll_interval == timedelta(seconds=0.5)
    b = load_settings(CONFIG / "party-b.toml", env={})
    assert (b.identity.party_id, b.server.port) == ("987654321", 8082)
    assert b.tls.certificate is not None and b.tls.certificate.name == "party-b.cert.pem"


def test_environment_variables_override_every_kind_of_setting(tmp_path: Path) -> None:
    extra = tmp_path / "extra.pem"
    extra.write_text("not read at load time")
    env = {
        "MSH_SERVER_PORT": "18082",
        "MSH_SERVER_TLS": "no",
        "MSH_SENDING_FIRST_RESEND_TIMEOUT": "PT10S",
        "MSH_SENDING_HTTP_TIMEOUT": "2.5",
        "MSH_TLS_TRUSTED": str(extra),
        "MSH_AGREEMENTS_READING": "header-warn",
        "MSH_RECEIVING_PARSE_MODE": "strict",
        "MSH_STORE_URL": "memory:",
        "MSH_CONFIG": "ignored because a path is given",
    }
    s = load_settings(CONFIG / "party-a.toml", env=env)
    assert (s.server.port, s.server.tls) == (18082, False)
    assert s.sending.first_resend_timeout == timedelta(seconds=10)
    assert s.sending.http_timeout == timedelta(seconds=2.5)
    assert s.tls.trusted == (extra,)
    assert s.agreements.reading is Reading.HEADER_WARN
    assert s.receiving.parse_mode is ParseMode.STRICT
    assert s.store.url == "memory:"


def test_msh_config_names_the_file() -> None:
    s = load_settings(None, env={"MSH_CONFIG": str(CONFIG / "party-b.toml")})
    assert s.identity.party_id == "987654321"
    assert s.source.endswith("party-b.toml")


def test_unknown_keys_sections_and_variables_are_refused_by_name() -> None:
    data = {
        "identity": {"party_id": "1", "party_idd": "x"},
        "agreement": {"paths": []},
        "agreements": {"paths": ["../cpas/demo-a-b.xml"]},
        "store": {"url": "memory:"},
        "server": {"tls": False},
    }
    with pytest.raises(ConfigurationError) as caught:
        settings_from_mapping(data, base_dir=CONFIG, source="t.toml", env={"MSH_SERVER_PROT": "1"})
    text = str(caught.value)
    assert "identity.party_idd (from t.toml): unknown setting" in text
    assert "agreement (from t.toml): unknown section" in text
    assert "MSH_SERVER_PROT (from the environment): no such setting" in text
    assert "3 problem(s)" in text


def test_bad_values_are_reported_together_with_where_they_came_from() -> None:
    data = {
        "identity": {"party_id": "1"},
        "agreements": {"paths": ["../cpas/demo-a-b.xml", "missing.xml"], "reading": "loose"},
        "store": {"url": "memory:"},
        "server": {"tls": True, "path": "msh"},
        "sending": {"first_resend_timeout": "PT1S", "http_timeout": "PT2S", "max_in_flight": 0},
    }
    with pytest.raises(ConfigurationError) as caught:
        settings_from_mapping(data, base_dir=CONFIG, source="t.toml", env={"MSH_SERVER_PORT": "eighty"})
    text = str(caught.value)
    assert "server.port (from environment variable MSH_SERVER_PORT): 'eighty' is not an integer" in text
    assert "agreements.reading (from t.toml): 'loose' is not one of strict" in text


def test_cross_field_rules_explain_themselves() -> None:
    data = {
        "identity": {"party_id": "1"},
        "agreements": {"paths": ["../cpas/demo-a-b.xml", "missing.xml"]},
        "store": {"url": "memory:"},
        "server": {"tls": True, "path": "msh"},
        "sending": {"first_resend_timeout": "PT1S", "http_timeout": "PT2S", "max_in_flight": 0},
    }
    with pytest.raises(ConfigurationError) as caught:
        settings_from_mapping(data, base_dir=CONFIG, source="t.toml", env={})
    text = str(caught.value)
    assert "missing.xml does not exist" in text
    assert "server.tls (from t.toml): HTTPS needs tls.certificate and tls.private_key" in text
    assert "server.path (from t.toml): 'msh' must start with /" in text
    assert "sending.max_in_flight (from t.toml): must be at least 1" in text
    assert "sending.first_resend_timeout (from t.toml): 1 s is not longer than sending.http_timeout (2 s)" in text


def test_required_settings_and_unreadable_files() -> None:
    with pytest.raises(ConfigurationError, match=r"identity\.party_id .*is required"):
        settings_from_mapping({}, base_dir=CONFIG, source="empty", env={})
    with pytest.raises(ConfigurationError, match="cannot read it"):
        load_settings(CONFIG / "nope.toml", env={})


def test_a_toml_syntax_error_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[server\nport = 1\n")
    with pytest.raises(ConfigurationError, match=r"bad\.toml: not valid TOML"):
        load_settings(bad, env={})


def test_describe_lists_paths_never_key_material() -> None:
    s = load_settings(CONFIG / "party-a.toml", env={})
    text = describe(s)
    assert "tls.private_key = " in text and "party-a.key.pem" in text
    assert "PRIVATE KEY" not in text
    assert "sending.first_resend_timeout = 3s" in text
