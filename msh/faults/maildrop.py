"""A mail drop for tests and demos: an SMTP server that delivers every mail it accepts into a Maildir.

It plays the part of the mail system between two MSHs that exchange ebMS messages by e-mail through a
mailbox (docs/transports/smtp.md): the sender's relay and the local delivery agent in one. A mail is
written to ``tmp/``, flushed to disk and renamed into ``new/`` (the Maildir delivery protocol) before the
SMTP server answers 250, so an accepted mail is never lost; an IMAP server (Dovecot) serving the same Maildir
shows it to the reader. Runs in a thread of its own (aiosmtpd's Controller) on 127.0.0.1.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

__all__ = ["MailDrop", "deliver_to_maildir"]

_counter = 0
_counter_lock = threading.Lock()


def deliver_to_maildir(maildir: Path, mail: bytes, owner: tuple[int, int] | None = None) -> Path:
    """Deliver ``mail`` into ``maildir`` (tmp, fsync, rename into new, fsync the folder); its new path.
    ``owner`` (uid, gid): who the folders and the file must belong to (the IMAP server's mail user)."""
    global _counter
    with _counter_lock:
        _counter += 1
        count = _counter
    for path in (maildir, maildir / "tmp", maildir / "new", maildir / "cur"):
        if not path.exists():
            path.mkdir(parents=True, exist_ok=True)
            if owner is not None:
                os.chown(path, *owner)
    name = f"{time.time_ns()}.P{os.getpid()}Q{count}.{socket.gethostname()}"
    temporary = maildir / "tmp" / name
    with open(temporary, "wb") as out:
        out.write(mail)
        out.flush()
        os.fsync(out.fileno())
    if owner is not None:
        os.chown(temporary, *owner)
    final = maildir / "new" / name
    os.rename(temporary, final)
    folder = os.open(maildir / "new", os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    return final


class _Delivery:
    def __init__(self, maildir: Path, owner: tuple[int, int] | None) -> None:
        self.maildir = maildir
        self.owner = owner
        self.delivered = 0

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        content: Any = envelope.original_content or envelope.content
        data = content if isinstance(content, bytes) else str(content).encode("utf-8")
        try:
            deliver_to_maildir(self.maildir, data, self.owner)
        except OSError as exc:
            return f"451 4.3.0 mailbox not available now: {exc.strerror or exc}"
        self.delivered += 1
        return "250 2.0.0 delivered"


class MailDrop:
    """An SMTP server on ``port`` of 127.0.0.1 that delivers every mail into ``maildir`` (see the module
    docs), its files owned by ``owner`` (uid, gid) when given; ``start``/``stop``; ``delivered`` counts the
    mails delivered."""

    def __init__(self, maildir: Path, port: int, owner: tuple[int, int] | None = None) -> None:
        self.maildir = maildir
        self.port = port
        self._delivery = _Delivery(maildir, owner)
        self._controller = Controller(
            self._delivery, hostname="127.0.0.1", port=port, decode_data=False, data_size_limit=64 << 20
        )

    @property
    def delivered(self) -> int:
        return self._delivery.delivered

    def start(self) -> None:
        self._controller.start()

    def stop(self) -> None:
        self._controller.stop()
