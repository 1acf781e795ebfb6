"""Password references (msh.runtime.config.secrets): the form is checked, the secret read at start, never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from msh.errors import ConfigurationError
from msh.runtime.config.secrets import check_secret_ref, read_secret


def test_the_forms_accepted_and_refused() -> None:
    assert check_secret_ref("") is None
    assert check_secret_ref("env:SMTP_PASSWORD") is None
    assert check_secret_ref("file:secrets/smtp") is None
    problem = check_secret_ref("hunter2")
    assert problem is not None and "env:VARIABLE or file:PATH" in problem
    problem = check_secret_ref("env:")
    assert problem is not None and "names no variable" in problem


def test_read_from_the_environment_and_from_a_file(tmp_path: Path) -> None:
    assert read_secret("env:PW", setting="smtp.password", env={"PW": " s3cret\n"}) == "s3cret"
    (tmp_path / "pw").write_text("from-file\n", encoding="utf-8")
    assert read_secret("file:pw", setting="smtp.password", base_dir=tmp_path) == "from-file"


def test_errors_name_the_setting_and_the_place_never_the_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"smtp\.password: .*PW, which is not set"):
        read_secret("env:PW", setting="smtp.password", env={})
    with pytest.raises(ConfigurationError, match=r"mailbox\.password: the password file .*missing.* cannot be read"):
        read_secret("file:missing", setting="mailbox.password", base_dir=tmp_path)
    (tmp_path / "empty").write_text("  \n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="is empty"):
        read_secret("file:empty", setting="amqp.password", base_dir=tmp_path)


def test_relative_references_are_read_from_the_settings_files_folder(tmp_path: Path) -> None:
    from msh.runtime.config.secrets import settings_folder

    assert settings_folder(str(tmp_path / "msh.toml")) == tmp_path
    assert settings_folder("<defaults>") is None and settings_folder("<environment>") is None
    assert settings_folder(str(tmp_path / "missing" / "msh.toml")) is None
