"""The settings of receiving ebXML messages by mail (ebMS2 Appendix B.3; docs/transports/smtp-receiving.md):
``[smtpd]``, the MSH's own SMTP listener, which an MTA relays the partners' mail to, and ``[mailbox]``, an IMAP
mailbox the MSH reads. Either, both or neither may be on; each hands every mail to the same inbound pipeline as
the HTTP endpoint (:mod:`msh.runtime.mail_receiving`).

Mail that is no ebXML message and no delivery status notification is a dead letter (ebMS2 B.3.3): the listener
writes it to the folder ``smtpd.dead_letters`` (a relative path is read from the settings file's folder, like
every path), the mailbox reader moves it to the IMAP folder ``mailbox.dead_letter_folder``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

from msh.runtime.config import rules
from msh.runtime.config.declaration import DURATION_HINT, Section, setting
from msh.runtime.config.secrets import SECRET_HINT, check_secret_ref
from msh.runtime.config.values import Invalid, Kind, show, type_name

__all__ = ["MailSecurity", "MailboxSettings", "SmtpdSettings"]


class _Folder(Kind):
    """The path of a folder the MSH writes into (created at start when missing)."""

    def from_toml(self, value: object, hint: str) -> Any:
        if not isinstance(value, str):
            raise Invalid(f"{show(value)} is {type_name(value)}, not a path string; {hint}")
        return self.from_text(value, hint)

    def from_text(self, text: str, hint: str) -> Any:
        if not text.strip():
            raise Invalid(f"the path is empty; {hint}")
        return Path(text.strip())

    def resolve(self, value: Any, base_dir: Path) -> Any:
        path = Path(value)
        return (path if path.is_absolute() else base_dir / path).resolve()

    def verify(self, value: Any, base_dir: Path) -> str | None:
        if value.exists() and not value.is_dir():
            return f"{str(value)!r} is a file; give a folder (it is created when missing)"
        return None


def _size(value: int) -> str | None:
    return None if value >= 1024 else f"{value} is too small for an ebXML message; give at least 1024 (bytes)"


@dataclass(frozen=True, slots=True)
class SmtpdSettings(Section):
    """The MSH's own SMTP listener (ebMS2 B.3), served by ``msh serve`` when ``enabled``: an MTA (Postfix,
    Exim, a cloud relay) relays the mail for the MSH's address to it."""

    section: ClassVar[str] = "smtpd"

    enabled: bool = field(default=False, metadata=setting(meaning="receive ebXML messages over SMTP (ebMS2 B.3)"))
    host: str = field(
        default="127.0.0.1",
        metadata=setting(
            'write a host name or address, e.g. "127.0.0.1"', check=rules.host, meaning="the SMTP listener's address"
        ),
    )
    port: int = field(
        default=2525,
        metadata=setting("write a port number 1-65535 (0: any free port)", check=rules.port, meaning="its port"),
    )
    max_message_bytes: int = field(
        default=32 << 20,
        metadata=setting(
            "write a size in bytes, e.g. 33554432 (32 MiB)",
            check=_size,
            meaning="the largest mail taken (announced as SMTP SIZE, RFC 1870; a larger one is refused with 552)",
        ),
    )
    dead_letters: Path = field(
        default=Path("dead-letters"),
        metadata=setting(
            'write a folder, e.g. "dead-letters" (read from the settings file\'s folder when relative)',
            kind=_Folder(),
            meaning="where a mail that is no ebXML message nor delivery report is kept, one file each "
            "(ebMS2 B.3.3 dead letters; created when missing)",
        ),
    )
    tls: bool = field(
        default=False,
        metadata=setting(
            meaning="offer STARTTLS (RFC 3207, ebMS2 B.3.5) with `tls.certificate` and `tls.private_key`, and "
            "take mail only after it"
        ),
    )


class MailSecurity(StrEnum):
    """How the connection to the IMAP server is protected."""

    TLS = "tls"
    """TLS from the first byte (RFC 8314, port 993)."""
    STARTTLS = "starttls"
    """Plain connection upgraded with STARTTLS (RFC 3501 §6.2.1, port 143)."""
    NONE = "none"
    """No TLS (a server on the same host only)."""


@dataclass(frozen=True, slots=True)
class MailboxSettings(Section):
    """An IMAP mailbox (RFC 3501) the MSH reads ebXML messages from when ``enabled`` (ebMS2 B.3): each mail is
    removed only once the MSH has committed what it holds."""

    section: ClassVar[str] = "mailbox"

    enabled: bool = field(default=False, metadata=setting(meaning="read ebXML messages from an IMAP mailbox"))
    host: str = field(
        default="",
        metadata=setting(
            'write the IMAP server\'s host name, e.g. "imap.example.com"',
            meaning="the IMAP server (required with `mailbox.enabled`)",
        ),
    )
    port: int = field(
        default=993,
        metadata=setting(
            "write a port number 1-65535 (993 for tls, 143 for starttls)", check=rules.port, meaning="its port"
        ),
    )
    security: MailSecurity = field(
        default=MailSecurity.TLS,
        metadata=setting(meaning="`tls` (from the first byte), `starttls` or `none` (same host only)"),
    )
    username: str = field(default="", metadata=setting('write the log-in name, e.g. "msh"', meaning="the log-in"))
    password: str = field(
        default="",
        metadata=setting(
            SECRET_HINT.format("MSH_MAILBOX_SECRET", "mailbox.password"),
            check=check_secret_ref,
            meaning="where the password is (`env:VARIABLE` or `file:PATH`, read at start, never shown)",
        ),
    )
    folder: str = field(
        default="INBOX",
        metadata=setting('write a folder name, e.g. "INBOX"', check=rules.not_blank, meaning="the folder read"),
    )
    dead_letter_folder: str = field(
        default="ebXML dead letters",
        metadata=setting(
            'write a folder name, e.g. "ebXML dead letters"',
            check=rules.not_blank,
            meaning="where a mail that is no ebXML message nor delivery report is moved (ebMS2 B.3.3; created "
            "when missing)",
        ),
    )
    poll_interval: timedelta = field(
        default=timedelta(seconds=10),
        metadata=setting(
            DURATION_HINT.format("PT10S", 10),
            check=rules.positive,
            meaning="how often the folder is looked at when the server offers no IDLE (and, with IDLE, at "
            "least this often)",
        ),
    )
    idle: bool = field(
        default=True,
        metadata=setting(meaning="wait with IMAP IDLE (RFC 2177) when the server offers it, else poll"),
    )
