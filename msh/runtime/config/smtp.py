"""The ``[smtp]`` settings: the mail relay through which the MSH sends messages to ``mailto:`` endpoints
(ebMS2 Appendix B.3, docs/transports/smtp.md).

An agreement whose TransportReceiver Endpoint is a ``mailto:`` URI has its messages sent as e-mail: the MSH
hands each one to the relay named by ``host`` (SMTP submission, RFC 6409, or plain SMTP, RFC 5321), which
delivers it to the partner's mailbox. With ``host`` empty the MSH sends no mail, and a message to a
``mailto:`` endpoint fails saying which settings to give. ``password`` is a reference (``env:VARIABLE``
or ``file:PATH``, :mod:`.secrets`) read when the MSH starts, never the password itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import ClassVar, Final

from msh.runtime.config import rules
from msh.runtime.config.declaration import DURATION_HINT, Section, setting
from msh.runtime.config.secrets import SECRET_HINT, check_secret_ref
from msh.runtime.config.values import PEM_FILES, show

__all__ = ["SmtpSecurity", "SmtpSettings", "mail_address_problem"]


class SmtpSecurity(StrEnum):
    """How the connection to the relay is protected (ebMS2 B.3.5: SMTP over TLS, RFC 3207)."""

    NONE = "none"
    """Plain SMTP: only for a relay on the same host or a trusted network."""
    STARTTLS = "starttls"
    """Plain connection, then STARTTLS before anything is sent (RFC 3207; the submission port 587)."""
    TLS = "tls"
    """TLS from the first byte (implicit TLS, RFC 8314; the port 465)."""


# RFC 5321 §4.1.2: Mailbox = Local-part "@" ( Domain / address-literal ); a dot-atom local part is enough here.
_MAILBOX: Final = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+@(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[^\]\s]+\])")


def mail_address_problem(value: str) -> str | None:
    """What is wrong with ``value`` as our e-mail address ("": none given, which is not a problem here)."""
    if value == "" or _MAILBOX.fullmatch(value):
        return None
    return (
        f"{show(value)} is not an e-mail address (local-part@domain, RFC 5321 §4.1.2); write the bare address, "
        'e.g. "msh@example.com", without a display name or angle brackets'
    )


def _host_or_none(value: str) -> str | None:
    return None if value == "" else rules.host(value)


def _port(value: int) -> str | None:
    if not 1 <= value <= 65535:
        return f"{value} is not a port number; write 25, 587 (submission with starttls) or 465 (tls)"
    return None


@dataclass(frozen=True, slots=True)
class SmtpSettings(Section):
    """The relay the MSH sends mail through (see the module docs and docs/transports/smtp.md)."""

    section: ClassVar[str] = "smtp"

    host: str = field(
        default="",
        metadata=setting(
            'write the relay\'s host name, e.g. "smtp.example.com" ("": send no mail)',
            check=_host_or_none,
            meaning='the mail relay messages to `mailto:` endpoints are handed to ("": this MSH sends no mail)',
        ),
    )
    port: int = field(
        default=25,
        metadata=setting(
            "write a port number, e.g. 25, 587 or 465",
            check=_port,
            meaning="the relay's port (25 SMTP, 587 submission with `starttls`, 465 with `tls`)",
        ),
    )
    security: SmtpSecurity = field(
        default=SmtpSecurity.STARTTLS,
        metadata=setting(
            meaning="`starttls`: STARTTLS before anything is sent (refused if the relay does not offer it); "
            "`tls`: TLS from the first byte; `none`: plain SMTP (a relay on a trusted network only)"
        ),
    )
    username: str = field(
        default="",
        metadata=setting(
            'write the relay account, e.g. "msh@example.com" ("": no AUTH)',
            meaning='the account the MSH logs in to the relay with (SMTP AUTH, ebMS2 B.3.4; "": no log-in)',
        ),
    )
    password: str = field(
        default="",
        metadata=setting(
            SECRET_HINT.format("SMTP_PASSWORD", "smtp-password"),
            check=check_secret_ref,
            meaning="where the password of `smtp.username` is: `env:VARIABLE` or `file:PATH` (read at start, "
            "never shown)",
        ),
    )
    from_address: str = field(
        default="",
        metadata=setting(
            'write our MSH\'s e-mail address, e.g. "msh@example.com"',
            check=mail_address_problem,
            meaning="our MSH's e-mail address: the mails' From and envelope sender (ebMS2 B.3.2; required with "
            "`smtp.host`); partners write it as our `mailto:` endpoint",
        ),
    )
    timeout: timedelta = field(
        default=timedelta(seconds=60),
        metadata=setting(
            DURATION_HINT.format("PT60S", 60),
            check=rules.positive,
            meaning="the longest wait for the relay at each step (connecting, each command, the end of the data; "
            "that last one gets a second more per 64 KiB of the mail, for it to leave)",
        ),
    )
    max_message_bytes: int = field(
        default=32 * 1024 * 1024,
        metadata=setting(
            "write a number of bytes, e.g. 33554432",
            check=rules.at_least_one,
            meaning="a larger message is not sent (and the relay's SIZE limit, when it announces one, applies too): "
            "a mail is read whole and goes through the relay whole, base64 adding a third, and relays refuse "
            "large mails; send large payloads over HTTP (the default is 32 MiB)",
        ),
    )
    trusted: tuple[Path, ...] = field(
        default=(),
        metadata=setting(
            'write a list of PEM certificate files, e.g. ["keys/relay-ca.pem"]',
            kind=PEM_FILES,
            meaning="the CAs the relay's certificate is checked against (empty: the system's trusted CAs)",
        ),
    )
