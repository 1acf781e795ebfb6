"""What a unit of work leaves to do once its transaction has committed (docs/design.md §5): nothing leaves the
MSH, and no application hears of a change, on the strength of a transaction that could still be lost."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from msh.engine import EndpointRef
from msh.store.api import OutboundMessage

__all__ = ["AfterCommit"]


@dataclass
class AfterCommit:
    """Work decided in a unit of work, done once its transaction has committed; and the outbound rows
    the unit has read or written (so a second step of the same message in the unit reads no row), with the
    bodies of the new ones that are small enough to be sent the first time without reading them back."""

    transmits: list[tuple[str, int]] = field(default_factory=list)
    status_requests: list[tuple[str, int]] = field(default_factory=list)
    """(MessageId, attempt): ask the partner for the message's status in place of that resend (ebMS2 §7)."""
    notices: list[Callable[[], object]] = field(default_factory=list)
    async_replies: list[tuple[bytes, EndpointRef]] = field(default_factory=list)
    rows: dict[str, OutboundMessage] = field(default_factory=dict)
    bodies: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    """MessageId -> (Content-Type, body) of a row stored by the unit, for its transmission due now."""
