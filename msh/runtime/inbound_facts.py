"""What the store knows of a received message, as the receiving engine needs it (:func:`msh.engine.receive`):
the MessageId already received (duplicate elimination, ebMS2 §6.5.6), where its sequence stands (§9), and the
message a StatusRequest asks about (§7). Read in the unit of work that decides the message; facts only, the
engine decides.
"""

from __future__ import annotations

from cpa.registry import CpaRegistry
from cpa.resolve import party_keys
from msh.ebms.model import Envelope
from msh.ebms.namespaces import SERVICE_MSH
from msh.engine import Held, QueriedMessage, StoredInbound
from msh.engine.inbound import NO_SEQUENCE, SequenceState
from msh.engine.signals import party_text
from msh.runtime.sequences import sequence_of_header
from msh.store.api import InboxEntry, InboxState, OutboundKind, Transaction

__all__ = ["queried", "stored_inbound"]


def _handed(entry: InboxEntry | None) -> bool:
    """Whether the application was given the message: not new, nor held back or abandoned under MessageOrder
    (ebMS2 §9.1.1); a StatusRequest about it is answered Processed (§7.3.3)."""
    return entry is not None and entry.state in (InboxState.DELIVERED_TO_APP, InboxState.ACKNOWLEDGED_BY_APP)


def stored_inbound(tx: Transaction, envelope: Envelope, max_held: int) -> tuple[StoredInbound | None, SequenceState]:
    """The earlier copy of a business message with this MessageId (None: the first), and where its sequence
    stands when it carries MessageOrder (:data:`~msh.engine.inbound.NO_SEQUENCE` otherwise)."""
    header = envelope.message_header
    if header is None or header.service.value == SERVICE_MSH:
        return None, NO_SEQUENCE
    record = tx.find_inbound(header.message_id)
    if record is not None:
        delivered = _handed(tx.inbox_entry(record.id))
        return StoredInbound(record.message_id, record.ack_envelope, delivered, record.content_digest), NO_SEQUENCE
    if envelope.message_order is None:
        return None, NO_SEQUENCE
    # ebMS2 §9: where its sequence stands (locked until the commit: one placement at a time).
    position = tx.order_position(sequence_of_header(header))
    return None, SequenceState(position, max_held)


def queried(tx: Transaction, registry: CpaRegistry, envelope: Envelope) -> QueriedMessage | None:
    """What the store holds of the message a StatusRequest asks about (ebMS2 §7, §6.1): facts for the
    engine, which decides the answer (:func:`msh.engine.replies.status_answer`)."""
    request = envelope.status_request
    if request is None:
        return None
    message_id = request.ref_to_message_id
    record = tx.find_inbound(message_id)
    if record is not None:
        handed = _handed(tx.inbox_entry(record.id))
        cpa = registry.get(record.cpaid)
        parties = None
        if cpa is not None:
            parties = frozenset(party_text(*key) for info in cpa.party_infos for key in party_keys(info))
        return QueriedMessage(
            message_id, Held.RECEIVED, record.received_at, record.from_party, record.to_party, handed, parties
        )
    stored = tx.get_outbound(message_id)
    if stored is not None and stored.kind is OutboundKind.FORWARD:
        # ebMS2 §10: a message this MSH forwarded as an intermediary; its row was made when it came in.
        return QueriedMessage(message_id, Held.FORWARDED, stored.created_at, stored.from_party, stored.to_party)
    return None
