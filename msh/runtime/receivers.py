"""What receives messages besides the HTTP endpoint (docs/transports.md): each binding's receiver, made
from its settings section, runs beside the endpoint as a companion of ``msh serve``
(:class:`msh.runtime.serving.Companion`: started once the runtime runs, stopped before it stops).

Every receiver hands each message to the same inbound pipeline as the HTTP endpoint
(:meth:`msh.runtime.msh.Msh.handle_http`), and takes it off its source (mailbox, broker) only once that has
committed it: a crash in between leaves it at the source, and its redelivery is a duplicate like any other
(ebMS2 §6.4.4 duplicate elimination).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msh.runtime.config import Settings

if TYPE_CHECKING:
    from msh.runtime.msh import Msh
    from msh.runtime.serving import Companion

__all__ = ["receivers_from"]


def receivers_from(settings: Settings, msh: Msh) -> list[Companion]:
    """The receivers the settings turn on, in the order they start."""
    found: list[Companion] = []
    if settings.smtpd.enabled:
        from msh.runtime.smtp_listener import SmtpListener

        found.append(SmtpListener(settings, msh))  # ebMS2 B.3: our own SMTP listener, behind an MTA
    if settings.mailbox.enabled:
        from msh.runtime.mailbox_reader import MailboxReader

        found.append(MailboxReader(settings, msh))  # ebMS2 B.3: an IMAP mailbox the MSH reads
    if settings.amqp.enabled:
        from msh.runtime.amqp_receiver import AmqpReceiver

        found.append(AmqpReceiver.for_msh(settings, msh))  # our queue on the broker (docs/transports/amqp.md)
    return found
