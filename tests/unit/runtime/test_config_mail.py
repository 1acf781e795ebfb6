"""The settings of receiving by mail, ``[smtpd]`` and ``[mailbox]`` (ebMS2 Appendix B.3): defaults, the file and
the environment (MSH_SMTPD_*, MSH_MAILBOX_*), the checks, and which receivers ``msh serve`` then runs."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from msh.errors import ConfigurationError
from msh.runtime.config import SettingsError, TlsSettings, load_settings, settings_from_mapping
from msh.runtime.config.mail import MailboxSettings, MailSecurity, SmtpdSettings
from msh.runtime.msh import Msh
from msh.runtime.receivers import receivers_from
from msh.runtime.smtp_listener import SmtpListener, dead_letters_folder
from tests.support.endpoint import party_b_settings
from tests.unit.runtime.test_config import CONFIG, minimal, one_problem


def _settings(env: dict[str, str] | None = None, base_dir: Path = CONFIG, **sections: dict[str, Any]) -> Any:
    return settings_from_mapping(minimal(**sections), base_dir=base_dir, source="t.toml", env=env or {})


def test_the_defaults() -> None:
    s = _settings()
    assert (s.smtpd.enabled, s.smtpd.host, s.smtpd.port, s.smtpd.tls) == (False, "127.0.0.1", 2525, False)
    assert s.smtpd.max_message_bytes == 32 * 1024 * 1024
    assert s.smtpd.dead_letters == Path("dead-letters")  # beside the settings file: dead_letters_folder
    box = s.mailbox
    assert (box.enabled, box.port, box.security, box.folder) == (False, 993, MailSecurity.TLS, "INBOX")
    assert (box.dead_letter_folder, box.poll_interval, box.idle) == ("ebXML dead letters", timedelta(seconds=10), True)


def test_the_environment_sets_every_key_even_those_with_underscores(tmp_path: Path) -> None:
    env = {
        "MSH_SMTPD_ENABLED": "true",
        "MSH_SMTPD_MAX_MESSAGE_BYTES": "1048576",
        "MSH_SMTPD_DEAD_LETTERS": str(tmp_path / "dead"),
        "MSH_MAILBOX_HOST": "imap.example.com",
        "MSH_MAILBOX_SECURITY": "STARTTLS",
        "MSH_MAILBOX_DEAD_LETTER_FOLDER": "Dead letters",
        "MSH_MAILBOX_POLL_INTERVAL": "PT30S",
        "MSH_MAILBOX_PASSWORD": "env:IMAP_PASSWORD",
    }
    s = _settings(env)
    assert s.smtpd.enabled and s.smtpd.max_message_bytes == 1 << 20 and s.smtpd.dead_letters == tmp_path / "dead"
    assert (s.mailbox.host, s.mailbox.security, s.mailbox.dead_letter_folder) == (
        "imap.example.com",
        MailSecurity.STARTTLS,
        "Dead letters",
    )
    assert s.mailbox.poll_interval == timedelta(seconds=30) and s.mailbox.password == "env:IMAP_PASSWORD"


def test_a_password_written_in_the_settings_is_refused() -> None:
    problem = one_problem(minimal(mailbox={"password": "hunter2"}))
    assert problem.startswith("mailbox.password (from t.toml): ")
    assert "env:VARIABLE or file:PATH" in problem and "hunter2" not in problem.split("'hunter2'", 1)[1]


def test_bad_values_are_named() -> None:
    assert "not a known value" in one_problem(minimal(mailbox={"security": "ssl"}))
    assert "too small" in one_problem(minimal(smtpd={"max_message_bytes": 10}))
    with pytest.raises(SettingsError):
        _settings(mailbox={"folder": " "})


def test_the_default_dead_letters_folder_is_beside_the_settings_file(tmp_path: Path) -> None:
    file = tmp_path / "msh.toml"
    file.write_text(
        '[identity]\nparty_id = "urn:duns:1"\n[store]\nurl = "memory:"\n[server]\ntls = false\n', encoding="utf-8"
    )
    settings = load_settings(file, env={"MSH_AGREEMENTS_PATHS": str(CONFIG.parent / "cpas" / "demo-a-b.xml")})
    assert dead_letters_folder(settings) == tmp_path / "dead-letters"
    elsewhere = replace(settings, smtpd=SmtpdSettings(dead_letters=tmp_path / "kept"))
    assert dead_letters_folder(elsewhere) == tmp_path / "kept"


def test_receivers_from_the_settings(tmp_path: Path) -> None:
    settings = party_b_settings(tmp_path)
    settings = replace(settings, smtpd=SmtpdSettings(enabled=True, port=0, dead_letters=tmp_path / "dead"))
    msh = Msh(settings)
    try:
        [listener] = receivers_from(settings, msh)
        assert isinstance(listener, SmtpListener) and (tmp_path / "dead").is_dir()
        assert listener.announce.startswith("msh: SMTP listener at 127.0.0.1:")
        assert receivers_from(replace(settings, smtpd=SmtpdSettings()), msh) == []
        no_host = replace(settings, smtpd=SmtpdSettings(), mailbox=MailboxSettings(enabled=True))
        with pytest.raises(ConfigurationError, match=r"mailbox\.host is empty"):
            receivers_from(no_host, msh)
        box = MailboxSettings(enabled=True, host="imap.example.com", username="msh", password="env:MSH_TEST_NO_SUCH")
        with pytest.raises(ConfigurationError, match="environment variable MSH_TEST_NO_SUCH, which is not set"):
            receivers_from(replace(settings, smtpd=SmtpdSettings(), mailbox=box), msh)
        plain = replace(settings, tls=TlsSettings(), smtpd=SmtpdSettings(tls=True, dead_letters=tmp_path / "d2"))
        with pytest.raises(ConfigurationError, match=r"smtpd\.tls is true"):
            SmtpListener(plain, msh)
    finally:
        msh.close()
