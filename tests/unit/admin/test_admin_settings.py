"""The ``[admin]`` settings: each problem named with where it came from and what to write instead."""

from __future__ import annotations

from datetime import timedelta

from msh.runtime.config import settings_from_mapping
from tests.unit.runtime.test_config import CONFIG, minimal, one_problem, problems_of


def test_defaults_and_a_good_section() -> None:
    s = settings_from_mapping(minimal(), base_dir=CONFIG, source="t.toml", env={})
    assert (s.admin.enabled, s.admin.host, s.admin.port) == (False, "127.0.0.1", 8091)
    assert s.admin.certificate_warning == timedelta(days=30) and s.admin.stall_after == timedelta(seconds=60)
    good = minimal(admin={"enabled": True, "operators": ["ops=env:OPS_TOKEN"], "port": 9100, "stall_after": "PT2M"})
    s = settings_from_mapping(good, base_dir=CONFIG, source="t.toml", env={"MSH_ADMIN_OPEN_PROBES": "yes"})
    assert s.admin.operators == ("ops=env:OPS_TOKEN",) and s.admin.open_probes is True


def test_enabled_without_anyone_to_authenticate_is_refused() -> None:
    assert one_problem(minimal(admin={"enabled": True})) == (
        "admin.enabled (from t.toml) is true but admin.operators (default) names no operator (and admin.client_ca "
        '(default) is empty): add one, e.g. ["ops=env:MSH_OPS_TOKEN"]'
    )


def test_a_malformed_operator_is_named() -> None:
    problem = one_problem(minimal(admin={"operators": ["ops:OPS_TOKEN"]}))
    expected = "admin.operators (from t.toml): 'ops:OPS_TOKEN' is not NAME=env:VARIABLE or NAME=file:PATH"
    assert problem.startswith(expected)


def test_client_certificates_need_https_with_a_key_pair() -> None:
    problem = one_problem(minimal(admin={"tls": True, "operators": ["ops=env:T"]}))
    assert problem == (
        "admin.tls (from t.toml) (or admin.client_ca (default)) needs HTTPS: set admin.tls (from t.toml) true, "
        "tls.certificate (default) and tls.private_key (default)"
    )


def test_the_admin_port_is_its_own() -> None:
    data = minimal(admin={"enabled": True, "operators": ["ops=env:T"], "port": 8081}, server={"port": 8081})
    problem = one_problem(data)
    assert problem.startswith("admin.port (from t.toml) = 8081 is also server.port (from t.toml): the admin port")
    data = minimal(
        admin={"enabled": True, "operators": ["ops=env:T"], "port": 8090},
        api={"enabled": True, "applications": ["erp=env:E"], "port": 8090},
    )
    assert one_problem(data).startswith("admin.port (from t.toml) = 8090 is also api.port (from t.toml)")
    data["api"]["enabled"] = False  # an interface that is not served takes no port
    assert settings_from_mapping(data, base_dir=CONFIG, source="t.toml", env={}).admin.port == 8090


def test_stall_after_must_outlast_the_timer_polling_and_values_are_checked() -> None:
    assert one_problem(minimal(admin={"stall_after": "PT1S"}, timers={"poll_interval": "PT5S"})).startswith(
        "admin.stall_after (from t.toml) = PT1S is not greater than timers.poll_interval (from t.toml) = PT5S: "
        "the timer loop waits that long between rounds, so it would be reported stalled while idle"
    )
    problems = problems_of(minimal(admin={"port": 70000, "certificate_warning": "-P1D"}), env={"MSH_ADMIN_HOST": ""})
    assert [p.split(" ")[0] for p in problems] == ["admin.host", "admin.port", "admin.certificate_warning"]
