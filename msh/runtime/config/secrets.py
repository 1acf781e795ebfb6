"""Where a password is: ``env:VARIABLE`` or ``file:PATH``, never the password itself in the settings file.

The transports that log in somewhere (an SMTP relay, an IMAP mailbox, an AMQP broker: docs/transports.md)
take their password from a setting of this form. :func:`check_secret_ref` checks the form when the settings
are read; :func:`read_secret` reads the password when the MSH starts, with an error that names the setting
and where it looked, never the value. ``msh serve --print-settings`` shows the reference, not the secret.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from msh.errors import ConfigurationError

__all__ = ["SECRET_HINT", "check_secret_ref", "read_secret", "settings_folder"]

SECRET_HINT: Final = 'write where the password is, e.g. "env:{0}" or "file:secrets/{1}" ("": none)'
"""The hint of a password setting: ``SECRET_HINT.format("SMTP_PASSWORD", "smtp.password")``."""


def _parts(text: str) -> tuple[str, str] | str:
    source, colon, where = text.partition(":")
    if not colon or source.strip() not in ("env", "file"):
        return f"{text!r} is not env:VARIABLE or file:PATH (the password itself never goes in the settings)"
    if not where.strip():
        return f"{text!r} names no variable or file after {source.strip()}:"
    return source.strip(), where.strip()


def check_secret_ref(value: object) -> str | None:
    """The problem with a password reference (None: it is "" or well formed)."""
    if not isinstance(value, str) or value == "":
        return None
    parsed = _parts(value)
    return parsed if isinstance(parsed, str) else None


def settings_folder(source: str) -> Path | None:
    """The folder of the settings file ``source`` names (``Settings.source``), where relative ``file:``
    references and folders are read from; None when the settings came from no file (``<defaults>``,
    ``<environment>``) or its folder does not exist."""
    if source.startswith("<"):
        return None
    folder = Path(source).parent
    return folder if folder.is_dir() else None


def read_secret(
    reference: str, *, setting: str, env: Mapping[str, str] | None = None, base_dir: Path | None = None
) -> str:
    """The password ``reference`` (``env:VARIABLE`` or ``file:PATH``) names, stripped of surrounding white
    space; :class:`ConfigurationError` naming ``setting`` and where it looked when it cannot be read or is
    empty. A relative path is read from ``base_dir`` (the settings file's folder) when given."""
    parsed = _parts(reference)
    if isinstance(parsed, str):
        raise ConfigurationError(f"{setting}: {parsed}")
    source, where = parsed
    if source == "env":
        environ = os.environ if env is None else env
        found = environ.get(where)
        if found is None or not found.strip():
            raise ConfigurationError(
                f"{setting}: the password is to come from the environment variable {where}, which is "
                f"{'empty' if found is not None else 'not set'}; set it (or name a file: file:PATH)"
            )
        return found.strip()
    path = Path(where)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigurationError(f"{setting}: the password file {path} cannot be read: {exc.strerror or exc}") from None
    if not value:
        raise ConfigurationError(f"{setting}: the password file {path} is empty")
    return value
