"""The store port's part for retention: which messages may be removed, and removing them (ebMS2 §6.4.6).

:class:`RetentionPort` is a base of :class:`~msh.store.transaction.Transaction`: its public methods check
their arguments and call the storage steps (the abstract ``_``-methods) each store implements. The policy
(how long each message is kept) is the runtime's (:mod:`msh.runtime.retention`); the store guarantees the
rule that makes a purge safe whatever the policy says, checked in the same statement that removes the row:

Final only
    A sent message is removed only in a final status (delivered, sent, failed: the engine reported its
    outcome, a failure as a DeliveryFailure) and with no timer row left (nothing is due for it: no resend,
    no queued transmission). A received copy is removed only when its inbox entry is settled by the
    application (``acknowledged-by-app``, which a rejection is too) or ended (``abandoned``), or when it has
    no inbox entry, and when no message of ours with the same MessageId is still being sent (a forward under
    way). A message being retried, awaiting an acknowledgment, or waiting in the inbox is never removed,
    even when a concurrent transaction changes it between the listing and the removal.
What goes
    The message row (for a received copy: its inbox entry and claim too) and its body blob, unless another
    row names that blob. Receipts kept in the journal stay, as does the journal itself: each removal appends
    a ``purged`` event (with the message's facts, the bytes freed and what the caller adds) in the same
    transaction.
Listing
    ``outbound_purge_candidates`` / ``inbound_purge_candidates`` list final messages settled before a time,
    oldest settled first, a page after another (``after``: the position of the last one seen).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from cpa.duration import XsDuration
from msh.store import journal, records, rules
from msh.store.events import EventKind

__all__ = ["InboundPosition", "OutboundPosition", "PurgeCandidate", "RetentionPort"]

OutboundPosition = tuple[datetime, str]
"""Where a listing of sent messages stands: (settled at, MessageId)."""
InboundPosition = tuple[datetime, int]
"""Where a listing of received copies stands: (settled at, stored copy id)."""


@dataclass(frozen=True, slots=True)
class PurgeCandidate:
    """A message whose outcome is final, as retention weighs it.

    ``inbound_id`` is the stored copy of a received message (None for a sent one); ``kind`` the sent message's
    kind (``own``, ``forward``, ``signal``) or ``received``; ``status`` its status or its inbox entry's state
    (``none``: no entry); ``started_at`` when it was first sent (or stored) or received; ``settled_at`` when its
    outcome became final (the last change of a sent message's state; when the application settled a received
    one); ``persist_duration`` the PersistDuration a sent message was sent with (None for a received one: the
    agreement says it); ``size`` its body's bytes."""

    message_id: str
    inbound_id: int | None
    cpaid: str
    kind: str
    status: str
    duplicate_elimination: bool
    started_at: datetime
    settled_at: datetime
    persist_duration: XsDuration | None
    size: int

    @property
    def direction(self) -> records.Direction:
        return records.Direction.OUTBOUND if self.inbound_id is None else records.Direction.INBOUND


class RetentionPort(ABC):
    """The retention methods of a transaction (see the module docs)."""

    @abstractmethod
    def _live(self) -> None: ...

    @abstractmethod
    def _writable(self) -> None: ...

    @abstractmethod
    def _facts_of(self, message_id: str, direction: records.Direction | None) -> journal.MessageFacts | None: ...

    @abstractmethod
    def append_event(
        self,
        *,
        at: datetime,
        kind: EventKind,
        message_id: str | None = None,
        direction: records.Direction | None = None,
        detail: Mapping[str, object] | None = None,
        facts: journal.MessageFacts | None = None,
    ) -> None: ...

    def outbound_purge_candidates(
        self, *, settled_before: datetime, after: OutboundPosition | None = None, limit: int = 100
    ) -> list[PurgeCandidate]:
        """Up to ``limit`` sent messages in a final status with no timer, settled before ``settled_before``,
        oldest settled first (then by MessageId), after position ``after``."""
        rules.limit(limit)
        before = rules.required_aware("settled_before", settled_before)
        self._live()
        return self._outbound_candidates(before, after, limit)

    def inbound_purge_candidates(
        self, *, settled_before: datetime, after: InboundPosition | None = None, limit: int = 100
    ) -> list[PurgeCandidate]:
        """Up to ``limit`` received copies settled by the application (or with no inbox entry) before
        ``settled_before``, oldest settled first (then by copy id), after position ``after``."""
        rules.limit(limit)
        before = rules.required_aware("settled_before", settled_before)
        self._live()
        return self._inbound_candidates(before, after, limit)

    def purge_outbound(self, message_id: str, *, at: datetime, detail: Mapping[str, object]) -> int | None:
        """Remove the sent message ``message_id`` and its body if it is final and nothing is due for it (see
        the module docs), journaling ``purged`` with ``detail`` and the bytes freed; the bytes freed, or None
        when nothing was removed (no such message, or it is not final any more)."""
        rules.text("message_id", message_id)
        moment = rules.required_aware("at", at)
        self._writable()
        facts = self._facts_of(message_id, records.Direction.OUTBOUND)
        blob_id = self._delete_final_outbound(message_id)
        if blob_id is None:
            return None
        freed = self._drop_blob(blob_id)
        direction = records.Direction.OUTBOUND
        self._journal_purge(message_id, direction, moment, {**detail, "bytes": freed}, facts)
        return freed

    def purge_inbound(self, inbound_id: int, *, at: datetime, detail: Mapping[str, object]) -> int | None:
        """Remove the received copy ``inbound_id`` (its inbox entry and claim) and its body if the application
        settled it (see the module docs), journaling ``purged``; the bytes freed, or None when nothing was
        removed."""
        moment = rules.required_aware("at", at)
        self._writable()
        found = self._settled_inbound(inbound_id)
        if found is None:
            return None
        message_id, blob_id = found
        facts = self._facts_of(message_id, records.Direction.INBOUND)
        if not self._delete_settled_inbound(inbound_id):
            return None
        freed = self._drop_blob(blob_id)
        direction = records.Direction.INBOUND
        self._journal_purge(message_id, direction, moment, {**detail, "bytes": freed, "copy": inbound_id}, facts)
        return freed

    def _journal_purge(
        self,
        message_id: str,
        direction: records.Direction,
        at: datetime,
        detail: Mapping[str, object],
        facts: journal.MessageFacts | None,
    ) -> None:
        self.append_event(
            at=at, kind=EventKind.PURGED, message_id=message_id, direction=direction, detail=detail, facts=facts
        )

    # -- storage steps

    @abstractmethod
    def _outbound_candidates(
        self, before: datetime, after: OutboundPosition | None, limit: int
    ) -> list[PurgeCandidate]: ...

    @abstractmethod
    def _inbound_candidates(
        self, before: datetime, after: InboundPosition | None, limit: int
    ) -> list[PurgeCandidate]: ...

    @abstractmethod
    def _delete_final_outbound(self, message_id: str) -> int | None:
        """Delete the row if it is in a final status and has no timer (in one step); its body blob id, or None."""

    @abstractmethod
    def _settled_inbound(self, inbound_id: int) -> tuple[str, int] | None:
        """The (MessageId, body blob id) of the copy if it is settled (see the module docs), else None."""

    @abstractmethod
    def _delete_settled_inbound(self, inbound_id: int) -> bool:
        """Delete the copy, its inbox entry and claim if it is settled (in one step); whether it was."""

    @abstractmethod
    def _blob_info(self, blob_id: int) -> tuple[int, int] | None: ...

    @abstractmethod
    def _delete_unused_blob(self, blob_id: int) -> bool: ...

    def _drop_blob(self, blob_id: int) -> int:
        """Delete the blob unless a message row still names it; the bytes freed (0 when it stays)."""
        info = self._blob_info(blob_id)
        return info[1] if info is not None and self._delete_unused_blob(blob_id) else 0
