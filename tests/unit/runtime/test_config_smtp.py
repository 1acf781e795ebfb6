"""The [smtp] settings (msh.runtime.config.smtp): defaults, and the rules that refuse a relay the MSH could not use."""

from __future__ import annotations

import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from msh.runtime.config import SettingsError, settings_from_mapping
from msh.runtime.config.smtp import SmtpSecurity

CONFIG = Path(__file__).resolve().parents[3] / "samples" / "config"


def load(env: dict[str, str] | None = None, **smtp: Any) -> Any:
    data = tomllib.loads((CONFIG / "party-a.toml").read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    data["smtp"] = smtp
    return settings_from_mapping(data, base_dir=CONFIG, source="party-a.toml", env=env or {})


def problems(**smtp: Any) -> tuple[str, ...]:
    with pytest.raises(SettingsError) as caught:
        load(**smtp)
    return caught.value.problems


def test_the_defaults_send_no_mail() -> None:
    s = load().smtp
    assert (s.host, s.port, s.security, s.username, s.password, s.from_address) == (
        "",
        25,
        SmtpSecurity.STARTTLS,
        "",
        "",
        "",
    )
    assert (s.timeout, s.max_message_bytes, s.trusted) == (timedelta(seconds=60), 32 * 1024 * 1024, ())


def test_a_relay_needs_our_address() -> None:
    # ebMS2 B.3.2: 'The eMail header "From:" MUST contain the ... eMail address of the senders ebXML MSH'.
    [problem] = problems(host="smtp.example.com")
    assert problem.startswith("smtp.host (from party-a.toml) is set")
    assert "smtp.from_address (default) is empty" in problem and "ebMS2 B.3.2" in problem


def test_our_address_is_a_bare_address() -> None:
    [problem] = problems(host="smtp.example.com", from_address="MSH <msh@example.com>")
    assert "is not an e-mail address" in problem and 'e.g. "msh@example.com"' in problem


def test_a_log_in_needs_both_halves_and_never_in_clear() -> None:
    [problem] = problems(host="h", from_address="a@b.example", username="msh")
    assert "smtp.username (from party-a.toml) is set but smtp.password is not" in problem
    [problem] = problems(host="h", from_address="a@b.example", username="msh", password="env:PW", security="none")
    assert "would cross the network in clear" in problem


def test_the_password_is_a_reference_never_the_password() -> None:
    [problem] = problems(host="h", from_address="a@b.example", username="msh", password="hunter2")
    assert "smtp.password" in problem and "env:VARIABLE or file:PATH" in problem


def test_the_environment_sets_the_relay() -> None:
    s = load(env={"MSH_SMTP_HOST": "relay.example", "MSH_SMTP_FROM_ADDRESS": "a@b.example", "MSH_SMTP_SECURITY": "TLS"})
    assert (s.smtp.host, s.smtp.from_address, s.smtp.security) == ("relay.example", "a@b.example", SmtpSecurity.TLS)
