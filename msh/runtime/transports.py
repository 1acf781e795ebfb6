"""The MSH's transports, one per URL scheme, made from the settings (docs/transports.md).

:func:`transports_from` is where each binding is wired: HTTP(S) always (ebMS2 Appendix B.2), and each
other binding when its settings section configures it. :mod:`msh.runtime.core` wraps the result in a
:class:`~msh.transport.schemes.SchemeTransport`, so the agreement's endpoint URL decides the binding of
every message and signal.
"""

from __future__ import annotations

from pathlib import Path

from msh.runtime.config import Settings
from msh.runtime.config.secrets import read_secret
from msh.transport.http import HttpTransport
from msh.transport.port import Transport
from msh.transport.schemes import SchemeTransport
from msh.transport.smtp import SmtpTransport, relay_tls_context

__all__ = ["transports_from"]


def transports_from(settings: Settings) -> SchemeTransport:
    """The transport of each scheme the settings configure, and for the others what to configure."""
    s = settings.sending
    http = HttpTransport(
        timeout=s.http_timeout,
        connect_timeout=s.connect_timeout,
        max_in_flight=s.max_in_flight,
        progress_timeout=s.progress_timeout,
        min_rate=s.min_rate,
    )
    by_scheme: dict[str, Transport] = {"http": http, "https": http}
    missing: dict[str, str] = {}
    mail = settings.smtp
    if mail.host:  # ebMS2 Appendix B.3: mailto: endpoints, through the relay of [smtp]
        by_scheme["mailto"] = SmtpTransport(
            host=mail.host,
            port=mail.port,
            security=mail.security.value,
            username=mail.username,
            password=read_secret(mail.password, setting="smtp.password", base_dir=_settings_dir(settings))
            if mail.password
            else "",
            from_address=mail.from_address,
            timeout=mail.timeout.total_seconds(),
            max_message_bytes=mail.max_message_bytes,
            tls_context=relay_tls_context(mail.trusted),
        )
    else:
        missing["mailto"] = "no SMTP relay is configured: set [smtp] host and from_address (docs/transports/smtp.md)"
    return SchemeTransport(by_scheme, missing=missing)


def _settings_dir(settings: Settings) -> Path | None:
    """The folder of the settings file (a relative ``file:`` password is read from there), if there is one."""
    source = Path(settings.source)
    return source.parent if source.suffix == ".toml" and source.parent.is_dir() else None
