"""The MSH's transports, one per URL scheme, made from the settings (docs/transports/index.md).

:func:`transports_from` is where each binding is wired: HTTP(S) always (ebMS2 Appendix B.2), AMQP 1.0
(``amqp``/``amqps``, docs/transports/amqp.md) always too, with the ``[amqp]`` credentials, and each other
binding when its settings section configures it. :mod:`msh.runtime.core` wraps the result in a
:class:`~msh.transport.schemes.SchemeTransport`, so the agreement's endpoint URL decides the binding of
every message and signal.
"""

from __future__ import annotations

from msh.runtime.config import Settings
from msh.runtime.config.secrets import read_secret, settings_folder
from msh.transport.amqp import AmqpTransport
from msh.transport.amqp_thread import BrokerAccess
from msh.transport.http import HttpTransport
from msh.transport.port import Transport
from msh.transport.schemes import SchemeTransport
from msh.transport.smtp import SmtpTransport, relay_tls_context

__all__ = ["amqp_access", "amqp_transport", "transports_from"]


def amqp_access(settings: Settings) -> BrokerAccess:
    """How this MSH logs in to its AMQP brokers: ``amqp.username`` and the password ``amqp.password`` names
    (read now: :class:`~msh.errors.ConfigurationError` naming the setting when it cannot be)."""
    a = settings.amqp
    password = (
        read_secret(a.password, setting="amqp.password", base_dir=settings_folder(settings.source))
        if a.password
        else ""
    )
    return BrokerAccess(a.username, password, a.sasl_mechanisms, a.trusted)


def amqp_transport(settings: Settings) -> AmqpTransport:
    """The transport of ``amqp:`` and ``amqps:`` endpoints, our reply address ``amqp.reply_to`` (or ``amqp.url``)
    on every message."""
    a = settings.amqp
    return AmqpTransport(
        amqp_access(settings),
        reply_to=a.reply_to or a.url or None,
        timeout=a.timeout.total_seconds(),
        max_message_bytes=a.max_message_bytes,
    )


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
    amqp = amqp_transport(settings)
    by_scheme: dict[str, Transport] = {"http": http, "https": http, "amqp": amqp, "amqps": amqp}
    missing: dict[str, str] = {}
    mail = settings.smtp
    if mail.host:  # ebMS2 Appendix B.3: mailto: endpoints, through the relay of [smtp]
        by_scheme["mailto"] = SmtpTransport(
            host=mail.host,
            port=mail.port,
            security=mail.security.value,
            username=mail.username,
            password=read_secret(mail.password, setting="smtp.password", base_dir=settings_folder(settings.source))
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
