"""The MSH's own SMTP listener (``[smtpd]``; ebMS2 Appendix B.3): a :class:`~msh.runtime.serving.Companion` of
``msh serve`` that an MTA relays the partners' mail to.

It serves aiosmtpd's SMTP protocol on the MSH's running event loop. Each mail is handed to
:class:`~msh.runtime.mail_intake.MailIntake`, and the DATA command is answered only once that is done:
``250`` after the message was committed (or refused with an answer, or recorded as a delivery report, or kept
as a dead letter), ``451 4.3.0`` when the MSH cannot take it now (its store failed), so that the relaying MTA
keeps the mail and tries again later (RFC 5321 §4.2.5: the mail is the MTA's until the reply to DATA says
otherwise). Nothing is acknowledged before it is on disk, and a mail redelivered after a crash is a duplicate
the pipeline eliminates (ebMS2 §6.4.4).

A mail that is no ebXML message and no delivery status notification is written, whole, to its own file in the
dead-letters folder (fsynced before the 250; ebMS2 B.3.3 "SHOULD retain the unidentified message in a 'dead
letter' folder").
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiosmtpd.smtp import SMTP, Envelope, Session

from msh.errors import ConfigurationError
from msh.runtime.config import Settings
from msh.runtime.config.secrets import settings_folder
from msh.runtime.mail_intake import Disposition, MailIntake
from msh.transport.tls import server_context

if TYPE_CHECKING:
    from msh.runtime.msh import Msh

__all__ = ["SmtpListener", "dead_letters_folder", "write_dead_letter"]

log = logging.getLogger("msh.runtime.mail")

TRY_LATER = "451 4.3.0 try again later: the MSH cannot store the message now"
"""RFC 3463 4.3.0: a transient failure of the receiving system; the MTA keeps the mail and tries again."""


def write_dead_letter(folder: Path, data: bytes, now: datetime) -> Path:
    """Write ``data`` to a file of its own in ``folder`` (a name no other mail has), durably: written to a
    temporary name, fsynced, renamed, and the folder fsynced. Returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{now.astimezone(UTC):%Y%m%dT%H%M%S.%fZ}-{uuid.uuid4().hex[:12]}.eml"
    path = folder / name
    partial = folder / f".{name}.part"
    with open(partial, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return path


def dead_letters_folder(settings: Settings) -> Path:
    """``smtpd.dead_letters``; left relative (its default, ``dead-letters``), it is beside the settings file (in
    the working folder when the settings came from no file)."""
    folder = settings.smtpd.dead_letters
    if folder.is_absolute():
        return folder
    return ((settings_folder(settings.source) or Path.cwd()) / folder).resolve()


class _Handler:
    """aiosmtpd's handler: the DATA of each mail to the intake, answered once it is dealt with."""

    def __init__(self, listener: SmtpListener) -> None:
        self.listener = listener

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        data = envelope.original_content
        if data is None:
            return "554 5.6.0 no message content"
        return await self.listener.receive(data)


class SmtpListener:
    """The SMTP listener of ``msh serve`` as ``settings.smtpd`` describes it (see the module docs)."""

    def __init__(self, settings: Settings, msh: Msh) -> None:
        smtpd = settings.smtpd
        self.msh = msh
        self.host = smtpd.host
        self.port = smtpd.port
        self.max_message_bytes = smtpd.max_message_bytes
        self.dead_letters = dead_letters_folder(settings)
        self.intake = MailIntake(msh, source="smtpd")
        self.tls_context = None
        if smtpd.tls:
            if settings.tls.certificate is None or settings.tls.private_key is None:
                raise ConfigurationError(
                    "smtpd.tls is true but tls.certificate and tls.private_key are not both set: STARTTLS needs "
                    "our certificate and key (set them, or smtpd.tls = false)"
                )
            self.tls_context = server_context(
                certificate=settings.tls.certificate,
                private_key=settings.tls.private_key,
                client_anchors_pem="",
                require_client_certificate=False,
            )
        try:
            self.dead_letters.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(
                f"smtpd.dead_letters: the folder {self.dead_letters} cannot be created: {exc.strerror or exc}"
            ) from None
        self._server: asyncio.Server | None = None

    @property
    def announce(self) -> str:
        """The line ``msh serve`` prints once serving."""
        tls = ", STARTTLS" if self.tls_context is not None else ""
        return f"msh: SMTP listener at {self.host}:{self.port}{tls} (ebMS2 B.3), dead letters in {self.dead_letters}"

    def _protocol(self) -> SMTP:
        extra: dict[str, Any] = {}
        if self.tls_context is not None:
            extra = {"tls_context": self.tls_context, "require_starttls": True}
        return SMTP(
            _Handler(self),
            data_size_limit=self.max_message_bytes,
            hostname=socket.gethostname(),
            loop=asyncio.get_running_loop(),
            **extra,
        )

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(self._protocol, host=self.host, port=self.port)
        except OSError as exc:
            raise ConfigurationError(
                f"smtpd: cannot listen on {self.host}:{self.port}: {exc.strerror or exc}; free the port or set "
                "smtpd.port"
            ) from None
        if self.port == 0:
            self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("SMTP listener at %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def receive(self, data: bytes) -> str:
        """Deal with one mail and the SMTP reply to its DATA (250 only once it is safe)."""
        try:
            taken = await self.intake.take(data)
        except Exception:
            log.exception("smtpd: a received mail could not be dealt with; the relaying MTA tries again")
            return TRY_LATER
        if taken.disposition is Disposition.RETRY:
            return TRY_LATER
        if taken.disposition is Disposition.DEAD_LETTER:
            try:
                path = await asyncio.to_thread(write_dead_letter, self.dead_letters, data, self.msh.clock())
            except OSError as exc:
                log.error("smtpd: a dead letter could not be written to %s: %s", self.dead_letters, exc)
                return TRY_LATER
            await self.intake.dead_lettered(taken.reason, str(path), taken.mail_id)
            return "250 2.0.0 kept as a dead letter: no ebXML message"
        return "250 2.0.0 taken"
