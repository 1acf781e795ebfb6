"""Who makes a message reliable: the ebXML protocol or the queuing transport under it (the *Reliable Messaging*
draft the ebMS 2.0 chapters grew from, "Reliable Messaging Method").

The draft's ReliableMessagingMethod parameter is ``ebXML`` (the default: the ebXML Reliable Messaging
Protocol, acknowledgments and resends, ebMS2 §6) or ``Transport`` (a queuing transport delivers the message
reliably; "Implementations should use the facilities of the Queuing Transport to determine if the message
was delivered", section "ebXML Reliable Messaging using Commercial Software Products / Queuing Transports").
Neither the ebMS 2.0 header nor the CPA 2.0 schema has the element, so an MSH setting names the sending
channels that use ``Transport`` (``sending.reliable_messaging_method``); :func:`cpa.resolve.resolve` puts the
method on the :class:`~cpa.resolve.SendingParameters` of a message sent on such a channel.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

__all__ = ["QUEUING_SCHEMES", "ReliableMessagingMethod"]


class ReliableMessagingMethod(StrEnum):
    """The draft's ReliableMessagingMethod values, spelt as it spells them."""

    EBXML = "ebXML"
    """The ebXML Reliable Messaging Protocol: AckRequested, Acknowledgment, resends (ebMS2 §6)."""
    TRANSPORT = "Transport"
    """A queuing transport delivers the message reliably; the MSH does not resend it (ebMS2 B.4: the transport's
    recovery first, reliable messaging's only when the error is unrecoverable)."""


QUEUING_SCHEMES: Final = frozenset({"amqp", "amqps"})
"""The endpoint URL schemes of a queuing transport (an AMQP 1.0 broker): the only endpoints ``Transport`` is for."""
