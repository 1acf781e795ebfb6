"""Settings (msh.runtime.config): the sample files, environment overrides, and errors that name the setting."""

from __future__ import annotations

import dataclasses
import os
import typing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from cpa.precedence import Reading
from msh.ebms.message import ParseMode
from msh.errors import ConfigurationError
from msh.runtime import config
from msh.runtime.config import (
    AgreementSettings,
    IdentitySettings,
    ServerSettings,
    Settings,
    SettingsError,
    StoreSettings,
    describe,
    load_settings,
    settings_from_mapping,
)
from msh.runtime.config.cross_rules import CROSS_RULES
from tests.support.samples import shown_settings

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
CONFIG = SAMPLES / "config"
CPA = SAMPLES / "cpas" / "demo-a-b.xml"
KEYS = SAMPLES / "keys"
PARTY_ID_TYPE = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
AT: dict[str, Any] = {"base_dir": CONFIG, "source": "t.toml", "env": {}}


def minimal(**sections: dict[str, Any]) -> dict[str, Any]:
    """The smallest usable settings (plain HTTP, memory store), with ``sections`` merged in."""
    data: dict[str, Any] = {
        "identity": {"party_id": "123456789", "party_id_type": PARTY_ID_TYPE},
        "agreements": {"paths": [str(CPA)]},
        "store": {"url": "memory:"},
        "server": {"tls": False},
    }
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return data


def problems_of(data: dict[str, Any], env: dict[str, str] | None = None, base_dir: Path = CONFIG) -> list[str]:
    """The problems settings_from_mapping reports; each must be a line of the error message."""
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(data, base_dir=base_dir, source="t.toml", env=env or {})
    assert isinstance(caught.value, ConfigurationError)
    lines = str(caught.value).splitlines()
    for problem in caught.value.problems:
        assert f"  - {problem}" in lines
    return list(caught.value.problems)


def one_problem(data: dict[str, Any], env: dict[str, str] | None = None, base_dir: Path = CONFIG) -> str:
    problems = problems_of(data, env, base_dir)
    assert len(problems) == 1, problems
    return problems[0]


# ------------------------------------------------------------------------------------------ the samples


def test_the_sample_files_load_with_paths_read_from_their_folder() -> None:
    a = load_settings(CONFIG / "party-a.toml", env={})
    assert a.source == str(CONFIG / "party-a.toml")
    assert (a.identity.party_id, a.identity.party_id_type) == ("123456789", PARTY_ID_TYPE)
    assert a.agreements.paths == (CPA,)
    assert a.agreements.reading is Reading.STRICT
    assert a.store.url == str(CONFIG / "party-a.sqlite")
    assert (a.server.host, a.server.port, a.server.path, a.server.tls) == ("127.0.0.1", 8081, "/msh", True)
    assert (a.tls.certificate, a.tls.private_key) == (KEYS / "party-a.cert.pem", KEYS / "party-a.key.pem")
    assert a.tls.require_client_certificate is True
    assert a.sending.first_resend_timeout == timedelta(seconds=5)
    assert a.sending.http_timeout == timedelta(seconds=2)
    assert a.receiving.parse_mode is ParseMode.LENIENT
    assert a.timers.poll_interval == timedelta(seconds=0.5)

    b = load_settings(CONFIG / "party-b.toml", env={})
    assert (b.identity.party_id, b.identity.party_id_type) == ("987654321", PARTY_ID_TYPE)
    assert b.server.port == 8082
    assert b.store.url == str(CONFIG / "party-b.sqlite")
    assert (b.tls.certificate, b.tls.private_key) == (KEYS / "party-b.cert.pem", KEYS / "party-b.key.pem")


def test_the_samples_set_every_setting() -> None:
    for name in ("party-a.toml", "party-b.toml"):
        data = shown_settings(CONFIG / name)  # one left off on purpose is shown commented out
        written = [f"{section}.{key}" for section, table in data.items() for key in table]
        assert written == [d.name for d in config.SETTINGS], name


def test_msh_config_names_the_file_and_an_explicit_path_wins() -> None:
    b = load_settings(None, env={"MSH_CONFIG": str(CONFIG / "party-b.toml")})
    assert (b.identity.party_id, b.source) == ("987654321", str(CONFIG / "party-b.toml"))
    a = load_settings(CONFIG / "party-a.toml", env={"MSH_CONFIG": str(CONFIG / "party-b.toml")})
    assert a.identity.party_id == "123456789"


def test_a_missing_file_says_which_and_who_named_it(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(None, env={"MSH_CONFIG": str(tmp_path / "nope.toml")})
    assert caught.value.problems == (
        f"the configuration file {str(tmp_path / 'nope.toml')!r} (named by MSH_CONFIG) does not exist; "
        "give the path of a TOML file",
    )


def test_a_toml_syntax_error_names_the_file_and_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[server\nport = 1\n", encoding="utf-8")
    with pytest.raises(SettingsError) as caught:
        load_settings(bad, env={})
    (problem,) = caught.value.problems
    assert problem.startswith(f"the configuration file {str(bad)!r} is not valid TOML: ")
    assert "line 1" in problem


# ------------------------------------------------------------------------------- environment overrides


def test_environment_overrides_every_kind_of_setting(tmp_path: Path) -> None:
    other = tmp_path / "other.xml"
    other.write_bytes(CPA.read_bytes())
    env = {
        "MSH_SERVER_PORT": "18081",  # int
        "MSH_SERVER_TLS": "No",  # bool
        "MSH_TLS_REQUIRE_CLIENT_CERTIFICATE": "false",
        "MSH_SENDING_FIRST_RESEND_TIMEOUT": "PT10S",  # xs:duration
        "MSH_SENDING_HTTP_TIMEOUT": "2.5",  # seconds
        "MSH_AGREEMENTS_PATHS": os.pathsep.join([str(CPA), str(other)]),  # list
        "MSH_TLS_TRUSTED": str(KEYS / "party-c.cert.pem"),
        "MSH_TLS_CERTIFICATE": str(KEYS / "party-c.cert.pem"),  # path
        "MSH_TLS_PRIVATE_KEY": str(KEYS / "party-c.key.pem"),
        "MSH_AGREEMENTS_READING": "HEADER-WARN",  # enum, any case
        "MSH_RECEIVING_PARSE_MODE": "strict",
        "MSH_STORE_URL": "memory:",
        "MSH_IDENTITY_MESSAGE_ID_DOMAIN": "a.example.org",  # string
        "PATH": "/usr/bin",  # not ours: ignored
    }
    s = load_settings(CONFIG / "party-a.toml", env=env)
    assert (s.server.port, s.server.tls, s.tls.require_client_certificate) == (18081, False, False)
    assert s.sending.first_resend_timeout == timedelta(seconds=10)
    assert s.sending.http_timeout == timedelta(seconds=2.5)
    assert s.agreements.paths == (CPA, other.resolve())
    assert s.tls.trusted == (KEYS / "party-c.cert.pem",)
    assert (s.tls.certificate, s.tls.private_key) == (KEYS / "party-c.cert.pem", KEYS / "party-c.key.pem")
    assert s.agreements.reading is Reading.HEADER_WARN
    assert s.receiving.parse_mode is ParseMode.STRICT
    assert s.store.url == "memory:"
    assert s.identity.message_id_domain == "a.example.org"
    # what the environment did not touch still comes from the file
    assert s.timers.lease == timedelta(seconds=10)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("TRUE", True), ("1", True), ("yes", True), ("false", False), ("0", False), ("No", False)],
)
def test_environment_booleans(text: str, expected: bool) -> None:
    s = settings_from_mapping(minimal(), base_dir=CONFIG, source="t.toml", env={"MSH_SENDING_ACK_REQUESTED": text})
    assert s.sending.ack_requested is expected


def test_an_empty_environment_value_unsets_an_optional_setting() -> None:
    env = {
        "MSH_SENDING_FIRST_RESEND_TIMEOUT": "",
        "MSH_TLS_CERTIFICATE": " ",
        "MSH_TLS_PRIVATE_KEY": "",
        "MSH_SERVER_TLS": "no",
    }
    s = load_settings(CONFIG / "party-a.toml", env=env)
    assert (s.sending.first_resend_timeout, s.tls.certificate, s.tls.private_key) == (None, None, None)
    # an unset PartyId type leaves a PartyId that is not a URI, which is reported
    problem = one_problem(minimal(), env={"MSH_IDENTITY_PARTY_ID_TYPE": ""})
    assert problem.startswith("identity.party_id (from t.toml) = '123456789' has no identity.party_id_type")


def test_bad_environment_values_name_the_variable() -> None:
    env = {
        "MSH_SERVER_PORT": "eighty",
        "MSH_SERVER_TLS": "maybe",
        "MSH_TIMERS_LEASE": "soon",
        "MSH_RECEIVING_PARSE_MODE": "loose",
    }
    assert problems_of(minimal(), env=env) == [
        "server.port (from MSH_SERVER_PORT): 'eighty' is not an integer; "
        "write a port number 1-65535 (0: any free port)",
        "server.tls (from MSH_SERVER_TLS): 'maybe' is not a boolean; write true or false (or 1/0, yes/no)",
        "receiving.parse_mode (from MSH_RECEIVING_PARSE_MODE): 'loose' is not a known value; "
        'write one of "strict", "lenient"',
        "timers.lease (from MSH_TIMERS_LEASE): 'soon' is not an xs:duration; write it like PT30S or P1D, "
        "or give a number of seconds",
    ]


def test_unknown_environment_variables_are_refused_by_name() -> None:
    problems = problems_of(minimal(), env={"MSH_SERVER_PROT": "1", "MSH_SERVR_PORT": "1", "MSH_LOGLEVEL": "x"})
    assert len(problems) == 3
    assert problems[0].startswith("MSH_LOGLEVEL (environment) names no setting: 'LOGLEVEL' is not a settings section")
    assert "MSH_CONFIG names the configuration file" in problems[0]
    assert problems[1] == (
        "MSH_SERVER_PROT (environment) names no setting (did you mean 'MSH_SERVER_PORT'?); the settings of [server] "
        "are MSH_SERVER_HOST, MSH_SERVER_PORT, MSH_SERVER_PATH, MSH_SERVER_TLS, MSH_SERVER_MAX_BODY_BYTES, "
        "MSH_SERVER_MAX_HEADER_BYTES, MSH_SERVER_MAX_HEADERS, MSH_SERVER_READ_TIMEOUT, "
        "MSH_SERVER_REQUEST_TIMEOUT, MSH_SERVER_MIN_RATE, MSH_SERVER_MAX_CONNECTIONS_PER_CLIENT, MSH_SERVER_PID_FILE"
    )
    assert problems[2].startswith(
        "MSH_SERVR_PORT (environment) names no setting: 'SERVR' is not a settings section (did you mean 'SERVER'?)"
    )


def test_msh_config_msh_venv_and_msh_test_variables_are_not_settings() -> None:
    env = {"MSH_CONFIG": "/nowhere.toml", "MSH_VENV": "/tmp/venv", "MSH_TEST_POSTGRES_URL": "postgresql://x/y"}
    s = settings_from_mapping(minimal(), base_dir=CONFIG, source="t.toml", env=env)
    assert s.identity.party_id == "123456789"


def test_environment_only_reads_relative_paths_from_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cpas").mkdir()
    (tmp_path / "cpas" / "b.xml").write_bytes(CPA.read_bytes())
    (tmp_path / "cpas" / "a.xml").write_bytes(CPA.read_bytes())
    (tmp_path / "cpas" / "notes.txt").write_text("not an agreement")
    monkeypatch.chdir(tmp_path)
    env = {
        "MSH_IDENTITY_PARTY_ID": "urn:duns:123456789",
        "MSH_AGREEMENTS_PATHS": "cpas",
        "MSH_STORE_URL": "data.sqlite",
        "MSH_SERVER_TLS": "0",
    }
    s = load_settings(None, env=env)
    root = tmp_path.resolve()
    assert s.source == "<environment>"
    assert s.agreements.paths == (root / "cpas",)
    assert s.agreements.files() == (root / "cpas" / "a.xml", root / "cpas" / "b.xml")
    assert s.store.url == str(root / "data.sqlite")


# -------------------------------------------------------------------------------- unknown names, types


def test_unknown_sections_and_keys_in_the_file_are_refused_with_the_valid_ones() -> None:
    data = minimal(server={"prot": 1})
    data["identity"]["party_idd"] = "x"
    data["agreement"] = {"paths": []}
    assert problems_of(data) == [
        "identity.party_idd (in t.toml) is not a setting (did you mean 'party_id'?); "
        "the keys of [identity] are party_id, party_id_type, message_id_domain",
        "server.prot (in t.toml) is not a setting (did you mean 'port'?); "
        "the keys of [server] are host, port, path, tls, max_body_bytes, max_header_bytes, max_headers, "
        "read_timeout, request_timeout, min_rate, max_connections_per_client, pid_file",
        "[agreement] (in t.toml) is not a settings section (did you mean 'agreements'?); the sections are "
        "[identity], [agreements], [store], [server], [tls], [security], [sending], [receiving], [timers], [api], "
        "[admin], [retention], [smtp], [smtpd], [mailbox], [amqp], [routing]",
    ]


def test_wrong_types_in_the_file_are_named() -> None:
    data = minimal(
        server={"port": "8081", "tls": "yes"},
        sending={"max_in_flight": True, "http_timeout": False},
        tls={"trusted": "ca.pem"},
    )
    data["agreements"]["paths"] = [str(CPA), 7]
    data["timers"] = 5
    assert problems_of(data) == [
        "timers (in t.toml) is an integer, not a section; write it as [timers] followed by its keys "
        "(poll_interval, lease, renew_interval, claim_limit)",
        "agreements.paths (from t.toml): item 2 7 is an integer, not a path string; "
        'write a list of CPA files or folders, e.g. ["cpas/partner.xml"]',
        "server.port (from t.toml): '8081' is a string, not an integer; write a port number 1-65535 (0: any free port)",
        "server.tls (from t.toml): 'yes' is a string, not a boolean; write true (serve HTTPS) or false (plain HTTP)",
        "tls.trusted (from t.toml): 'ca.pem' is a string, not a list of paths; "
        'write a list of PEM certificate files, e.g. ["keys/ca.pem"]',
        'sending.http_timeout (from t.toml): false is a boolean, not a duration ("PT30S") or a number of seconds; '
        'write a duration, e.g. "PT30S" or 30',
        "sending.max_in_flight (from t.toml): true is a boolean, not an integer; write a whole number of at least 1, "
        "e.g. 32",
    ]


def test_missing_required_settings_name_the_key_and_the_variable() -> None:
    assert problems_of({"server": {"tls": False}}) == [
        "identity.party_id is required; set party_id in [identity] of the configuration file "
        "or the environment variable MSH_IDENTITY_PARTY_ID",
        "store.url is required; set url in [store] of the configuration file or the environment variable MSH_STORE_URL",
        "agreements.paths (default) is empty and no routing.routes are configured: this MSH would have nothing to "
        "do; name the CPA files it works under in agreements.paths (or MSH_AGREEMENTS_PATHS), or, for an "
        "intermediary, configure its routes as [[routing.routes]] tables in the configuration file",
    ]


# ------------------------------------------------------------------------------------------- durations


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("PT2S", timedelta(seconds=2)),
        ("PT0.5S", timedelta(milliseconds=500)),
        ("P1D", timedelta(days=1)),
        ("PT1M30S", timedelta(seconds=90)),
        (3, timedelta(seconds=3)),
        (0.25, timedelta(milliseconds=250)),
    ],
)
def test_durations_are_xs_durations_or_seconds(value: object, expected: timedelta) -> None:
    s = settings_from_mapping(minimal(timers={"lease": value, "renew_interval": 0.1}), **AT)
    assert s.timers.lease == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-PT1S", "'-PT1S' is negative; give a positive duration"),
        (-2, "-2 is negative; give a positive duration"),
        ("P1M", "'P1M' counts months or years, which have no fixed length"),
        ("2 seconds", "'2 seconds' is not an xs:duration; write it like PT30S or P1D, or give a number of seconds"),
        (float("nan"), "nan is not a duration"),
        ("PT0S", "PT0S is not positive; give a duration greater than zero"),
    ],
)
def test_bad_durations_are_explained(value: object, message: str) -> None:
    problem = one_problem(minimal(timers={"poll_interval": value}))
    assert problem.startswith(f"timers.poll_interval (from t.toml): {message}")


# ------------------------------------------------------------------------------------------------ paths


def test_relative_paths_are_read_from_the_folder_of_the_file(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "cpas").mkdir(parents=True)
    (site / "cpas" / "partner.xml").write_bytes(CPA.read_bytes())
    (site / "keys").mkdir()
    (site / "state").mkdir()
    for name in ("party-a.cert.pem", "party-a.key.pem", "party-b.cert.pem"):
        (site / "keys" / name).write_bytes((KEYS / name).read_bytes())
    (site / "msh.toml").write_text(
        f"""
[identity]
party_id = "123456789"
party_id_type = "{PARTY_ID_TYPE}"
[agreements]
paths = ["cpas/partner.xml", "cpas"]
[store]
url = "sqlite:///state/a.db"
[tls]
certificate = "keys/party-a.cert.pem"
private_key = "./keys/party-a.key.pem"
""",
        encoding="utf-8",
    )
    s = load_settings(site / "msh.toml", env={"MSH_TLS_TRUSTED": "keys/party-b.cert.pem"})
    root = site.resolve()
    assert s.agreements.paths == (root / "cpas" / "partner.xml", root / "cpas")
    assert s.store.url == f"sqlite:///{root / 'state' / 'a.db'}"
    assert s.tls.certificate == root / "keys" / "party-a.cert.pem"
    assert s.tls.private_key == root / "keys" / "party-a.key.pem"
    assert s.tls.trusted == (root / "keys" / "party-b.cert.pem",)  # from the environment, read from the file's folder


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("memory:", "memory:"),
        ("MEMORY:", "memory:"),
        ("store.db", str(CONFIG / "store.db")),
        ("../config/store.db", str(CONFIG / "store.db")),
        ("sqlite:///store.db", f"sqlite:///{CONFIG / 'store.db'}"),
        (f"sqlite:///{CONFIG / 'x.db'}", f"sqlite:///{CONFIG / 'x.db'}"),
        ("postgresql+psycopg://msh:secret@db.example/msh", "postgresql+psycopg://msh:secret@db.example/msh"),
    ],
)
def test_store_urls(url: str, expected: str) -> None:
    s = settings_from_mapping(minimal(store={"url": url}), **AT)
    assert s.store.url == expected


def test_a_store_url_the_store_cannot_use_is_reported_with_the_stores_reason() -> None:
    problem = one_problem(minimal(store={"url": "nofolder/a.db"}))
    assert problem == (
        f"store.url (from t.toml): store URL {str(CONFIG / 'nofolder' / 'a.db')!r}: the folder "
        f"{str(CONFIG / 'nofolder')!r} does not exist; create it or choose another path"
    )
    problem = one_problem(minimal(store={"url": "mysql://db/x"}))
    assert problem.startswith("store.url (from t.toml): store URL 'mysql://db/x': database 'mysql' is not supported")


def test_missing_files_name_the_setting_and_the_resolved_path(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    data = minimal(tls={"certificate": "nope.pem", "private_key": str(KEYS / "party-a.key.pem"), "trusted": ["x.pem"]})
    data["agreements"]["paths"] = ["missing.xml", "empty"]
    root = tmp_path.resolve()
    assert problems_of(data, base_dir=tmp_path) == [
        f"agreements.paths (from t.toml): {str(root / 'missing.xml')!r} does not exist; give a CPA file or a folder of "
        f"CPA files (a relative path is read from {str(tmp_path)!r}); the folder {str(root / 'empty')!r} holds no "
        "*.xml file; put the CPAs there or name the CPA files",
        f"tls.certificate (from t.toml): {str(root / 'nope.pem')!r} does not exist; give the path of a PEM file "
        f"(a relative path is read from {str(tmp_path)!r})",
        f"tls.trusted (from t.toml): {str(root / 'x.pem')!r} does not exist; give the path of a PEM file "
        f"(a relative path is read from {str(tmp_path)!r})",
    ]


def test_tls_files_must_hold_what_they_are_for(tmp_path: Path) -> None:
    key = serialization.load_pem_private_key((KEYS / "party-a.key.pem").read_bytes(), password=None)
    encrypted = tmp_path / "encrypted.key.pem"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello")
    # a key that is not the certificate's
    problem = one_problem(
        minimal(tls={"certificate": str(KEYS / "party-a.cert.pem"), "private_key": str(KEYS / "party-b.key.pem")})
    )
    assert problem == (
        f"tls.private_key (from t.toml): {str(KEYS / 'party-b.key.pem')!r} is not the private key of tls.certificate "
        f"{str(KEYS / 'party-a.cert.pem')!r} (their public keys differ); give the two halves of one key pair"
    )
    # a key where the certificate should be, an encrypted key, a trust anchor that is no certificate
    tls = {"certificate": str(KEYS / "party-a.key.pem"), "private_key": str(encrypted), "trusted": [str(not_pem)]}
    problems = problems_of(minimal(tls=tls))
    assert len(problems) == 3
    assert problems[0].startswith(f"tls.certificate (from t.toml): {str(KEYS / 'party-a.key.pem')!r} holds no PEM cert")
    assert problems[1].startswith(f"tls.private_key (from t.toml): {str(encrypted)!r} is encrypted; give the key unen")
    assert problems[2].startswith(f"tls.trusted (from t.toml): {str(not_pem)!r} holds no PEM certificate")
    assert all("BEGIN ENCRYPTED" not in p and "MII" not in p for p in problems)


def test_agreement_folders_list_their_xml_files_sorted(tmp_path: Path) -> None:
    for name in ("b.xml", "a.xml", "c.txt"):
        (tmp_path / name).write_text("x")
    (tmp_path / "d.xml").mkdir()
    agreements = AgreementSettings((tmp_path, CPA))
    assert agreements.files() == (tmp_path / "a.xml", tmp_path / "b.xml", CPA)


# ------------------------------------------------------------------------------------------ field rules


def test_field_rules_name_the_setting_and_what_to_write() -> None:
    problems = problems_of(
        minimal(
            identity={"message_id_domain": "pymsh <local>"},
            server={"port": 70000, "path": "msh", "max_body_bytes": 0},
            sending={"max_in_flight": 0, "connect_timeout": "PT0S"},
        )
    )
    assert problems == [
        "identity.message_id_domain (from t.toml): 'pymsh <local>' cannot follow the '@' of a MessageId "
        "(RFC 2822 §3.6.4): write a domain-like name of letters, digits, '-' and dots, without '<', '>', '@' or "
        'spaces, e.g. "msh.example.com"',
        "server.port (from t.toml): 70000 is not a port number; write a port number 1-65535 (0: any free port)",
        "server.path (from t.toml): 'msh' is not a URL path; write one starting with '/', without spaces, '?' or '#', "
        'e.g. "/msh"',
        "server.max_body_bytes (from t.toml): 0 is less than 1; give a whole number of at least 1",
        'sending.connect_timeout (from t.toml): PT0S is not positive; give a duration greater than zero, e.g. "PT1S"',
        "sending.max_in_flight (from t.toml): 0 is less than 1; give a whole number of at least 1",
    ]


def test_port_zero_means_any_free_port() -> None:
    assert settings_from_mapping(minimal(server={"port": 0}), **AT).server.port == 0


def test_an_empty_party_id_is_refused() -> None:
    assert one_problem(minimal(identity={"party_id": "  "})).startswith(
        "identity.party_id (from t.toml): '  ' is empty; give our PartyId as the agreements name it"
    )


# ------------------------------------------------------------------------------------------ cross rules


def test_https_needs_a_certificate_and_a_key() -> None:
    assert one_problem(minimal(server={"tls": True})) == (
        "server.tls (from t.toml) is true (serve HTTPS) but tls.certificate (default) and tls.private_key (default) "
        "are not set; give our certificate and private key (PEM files), or set server.tls = false to serve plain HTTP"
    )
    problem = one_problem(minimal(tls={"certificate": str(KEYS / "party-a.cert.pem")}), env={"MSH_SERVER_TLS": "1"})
    assert problem.startswith(
        "server.tls (from MSH_SERVER_TLS) is true (serve HTTPS) but tls.private_key (default) is not set"
    )


def test_a_certificate_needs_its_key_even_without_https() -> None:
    assert one_problem(minimal(tls={"certificate": str(KEYS / "party-a.cert.pem")})) == (
        "tls.certificate (from t.toml) is set but tls.private_key is not; a TLS client certificate needs both halves"
    )


def test_the_first_resend_must_come_after_the_http_timeout() -> None:
    problem = one_problem(minimal(sending={"first_resend_timeout": "PT2S"}), env={"MSH_SENDING_HTTP_TIMEOUT": "2"})
    assert problem == (
        "sending.first_resend_timeout (from t.toml) = PT2S is not greater than sending.http_timeout "
        "(from MSH_SENDING_HTTP_TIMEOUT) = PT2S: an HTTP exchange must end before the first resend is due, "
        "otherwise a slow answer counts as lost and the message is resent while still in flight; make "
        "sending.http_timeout shorter or sending.first_resend_timeout longer"
    )
    ok = settings_from_mapping(minimal(sending={"first_resend_timeout": "PT31S"}), **AT)
    assert ok.sending.first_resend_timeout == timedelta(seconds=31)


def test_the_timer_leases_are_renewed_within_the_lease() -> None:
    # docs/cluster.md: a live process's claims must not run out between two renewals.
    assert one_problem(minimal(timers={"lease": "PT3S"})).startswith(
        "timers.renew_interval (default) = PT3S is not shorter than timers.lease (from t.toml) = PT3S: "
        "a live process's claims would run out before it renews them"
    )
    ok = settings_from_mapping(minimal(timers={"lease": "PT2S", "renew_interval": "PT0.5S"}), **AT)
    assert (ok.timers.lease, ok.timers.renew_interval) == (timedelta(seconds=2), timedelta(milliseconds=500))
    defaults = settings_from_mapping(minimal(), **AT).timers
    assert (defaults.lease, defaults.renew_interval, defaults.claim_limit) == (
        timedelta(seconds=10),
        timedelta(seconds=3),
        8,
    )


def test_an_untyped_party_id_must_be_a_uri() -> None:
    data = minimal()
    del data["identity"]["party_id_type"]
    assert one_problem(data).startswith(
        "identity.party_id (from t.toml) = '123456789' has no identity.party_id_type and is not a URI; "
        "ebMS2 §3.1.1.1 requires an untyped PartyId to be a URI"
    )
    data["identity"]["party_id"] = "urn:duns:123456789"
    assert settings_from_mapping(data, **AT).identity.party_id_type is None


def test_every_cross_rule_reads_declared_settings() -> None:
    # a misspelt key would never be usable, and its rule would silently never run
    names = {d.name for d in config.SETTINGS} | {"routing.routes"}
    for rule in CROSS_RULES:
        assert set(rule.keys) <= names, rule.check.__name__
        assert rule.protects, rule.check.__name__


def test_every_problem_is_reported_at_once() -> None:
    data = minimal(
        server={"port": "x", "tls": True, "colour": "blue"},
        sending={"first_resend_timeout": "PT1S", "http_timeout": "PT2S"},
    )
    del data["store"]
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(data, base_dir=CONFIG, source="t.toml", env={"MSH_TIMERS_LEASEE": "1"})
    lines = str(caught.value).splitlines()
    assert lines[0] == "the MSH settings from t.toml have 6 problems:"
    assert [line.split()[1] for line in lines[1:]] == [
        "server.colour",
        "MSH_TIMERS_LEASEE",
        "store.url",
        "server.port",
        "server.tls",
        "sending.first_resend_timeout",
    ]


# -------------------------------------------------------------------------------- construction, describe


def test_the_dataclasses_check_themselves_when_built_directly() -> None:
    with pytest.raises(ConfigurationError, match=r"server\.port: 70000 is not a port number"):
        ServerSettings(port=70000)
    with pytest.raises(ConfigurationError, match=r"identity\.message_id_domain: 'a@b' cannot follow"):
        IdentitySettings("urn:x:1", message_id_domain="a@b")
    with pytest.raises(ConfigurationError, match=r"server\.tls is true \(serve HTTPS\) but tls\.certificate"):
        Settings(IdentitySettings("urn:x:1"), AgreementSettings((CPA,)), StoreSettings("memory:"))
    plain = Settings(
        IdentitySettings("urn:x:1"), AgreementSettings((CPA,)), StoreSettings("memory:"), ServerSettings(tls=False)
    )
    assert plain.source == "<defaults>"
    assert dataclasses.replace(plain.server, port=0).port == 0


def test_the_settings_are_declared_by_the_dataclasses() -> None:
    parts = typing.get_type_hints(Settings)
    # every field but the routing table (an array of tables, read apart) and the source
    sections = [f.name for f in dataclasses.fields(Settings)][:-2]
    assert [f.name for f in dataclasses.fields(Settings)][-2:] == ["routing", "source"]
    expected = [f"{section}.{f.name}" for section in sections for f in dataclasses.fields(parts[section])]
    assert [d.name for d in config.SETTINGS] == expected


def test_describe_lists_every_setting_with_paths_never_key_material() -> None:
    s = load_settings(CONFIG / "party-a.toml", env={"MSH_STORE_URL": "postgresql+psycopg://msh:hunter2@db/msh"})
    text = describe(s)
    lines = text.splitlines()
    assert [line.split(" = ")[0] for line in lines] == [*(d.name for d in config.SETTINGS), "routing.routes"]
    assert lines[-1] == "routing.routes = (none)"
    assert f'tls.private_key = "{KEYS / "party-a.key.pem"}"' in lines
    assert 'sending.first_resend_timeout = "PT5S"' in lines
    assert 'timers.poll_interval = "PT0.5S"' in lines
    assert f'agreements.paths = ["{CPA}"]' in lines
    assert "server.tls = true" in lines
    assert 'store.url = "postgresql+psycopg://msh:***@db/msh"' in lines
    assert "hunter2" not in text
    key_body = (KEYS / "party-a.key.pem").read_text().splitlines()[1]
    assert "PRIVATE KEY" not in text and key_body not in text


def test_describe_shows_unset_settings_and_long_durations() -> None:
    s = settings_from_mapping(minimal(agreements={"time_accuracy": "P1DT2H0.25S"}), **AT)
    lines = describe(s).splitlines()
    assert "tls.certificate = (not set)" in lines
    assert "sending.first_resend_timeout = (not set)" in lines
    assert 'agreements.time_accuracy = "P1DT2H0.25S"' in lines


def test_the_configuration_reference_table_is_drawn_from_the_declaration() -> None:
    page = Path(__file__).resolve().parents[3] / "docs" / "reference" / "configuration.md"
    readme = page.read_text(encoding="utf-8")
    assert "\n\n" + config.settings_table() + "\n" in readme


def test_the_security_settings_are_checked_and_never_show_the_passphrase() -> None:
    keys = CONFIG.parent / "keys"
    half = minimal(security={"signing_key": str(keys / "party-a.key.pem")})
    assert one_problem(half) == (
        "security.signing_key (from t.toml) is set but security.signing_certificate is not; signing needs the key "
        "and its certificate"
    )
    assert problems_of(minimal(security={"key_passphrase_env": "MSH_SECRET"}))[0].startswith(
        "security.key_passphrase_env (from t.toml): 'MSH_SECRET' starts with MSH_"
    )
    assert "not an environment variable name" in one_problem(minimal(security={"key_passphrase_env": "s3cret pw"}))
    settings = settings_from_mapping(
        minimal(
            security={
                "signing_key": str(keys / "party-a.key.pem"),
                "signing_certificate": str(keys / "party-a.cert.pem"),
                "key_passphrase_env": "PYMSH_TEST_PASSPHRASE",
            }
        ),
        base_dir=CONFIG,
        source="t.toml",
        env={"PYMSH_TEST_PASSPHRASE": "hunter2"},
    )
    text = describe(settings)
    assert 'security.key_passphrase_env = "PYMSH_TEST_PASSPHRASE"' in text
    assert "hunter2" not in text
