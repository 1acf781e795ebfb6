"""Which signals about our messages count (docs/design.md §7), sans-IO.

An Acknowledgment or an ErrorList about a message we sent is routed to that message's sending machine
(:class:`~msh.engine.inbound.OutboundEvent`). It counts only when it comes from the party the message
went to, under the agreement it went under: any other partner, even one we trust under another agreement,
could otherwise stop our resends or fail our messages by naming their MessageIds. The one exception is
an intermediary on the message's path (ebMS2 §10), when the runtime trusts it for that (it answered on
the connection of our transmission, or it is a route's declared next hop, or its TLS certificate is one
the agreement lists for the To party): it may acknowledge as the next MSH and report errors
(DeliveryFailure, §6.5.7), never acknowledge end to end.
"""

from __future__ import annotations

from msh.ebms.model import Party
from msh.ebms.namespaces import ACTOR_NEXT_MSH
from msh.engine.inbound import OutboundEvent
from msh.engine.reliability import effective_actor
from msh.engine.sending import AcknowledgmentReceived

__all__ = ["foreign_signal", "party_text", "party_text_of"]


def party_text(value: str, type_: str | None) -> str:
    """One PartyId as one string: ``type:value`` (the ebCore combined form) or the bare value."""
    return f"{type_}:{value}" if type_ else value


def party_text_of(party: Party) -> str:
    """A party's first PartyId as one string (:func:`party_text`): how the store and the journal name it."""
    first = party.party_ids[0]
    return party_text(first.value, first.type)


def foreign_signal(signal: OutboundEvent, *, sent_to: str, sent_under: str) -> str | None:
    """Why ``signal`` about a message that went to the party ``sent_to`` (its :func:`party_text`) under
    the agreement ``sent_under`` does not count; None when it counts."""
    # ebMS2 §6.3.2.4: the acknowledgment's sender is the party that acknowledges; docs/design.md §7: only the
    # party the message went to may acknowledge it or report on it.
    if signal.from_party is not None and party_text_of(signal.from_party) != sent_to:
        sender = party_text_of(signal.from_party)
        if not signal.relay:
            return f"it comes from {sender}, but the message went to {sent_to}"
        event = signal.event
        if isinstance(event, AcknowledgmentReceived) and effective_actor(event.actor) != ACTOR_NEXT_MSH:
            # ebMS2 §10.1.3: an intermediary acknowledges as the next MSH; only the To party end to end.
            return f"it is an end-to-end acknowledgment from the intermediary {sender}; only {sent_to} may send one"
    # docs/design.md §7: and only under the agreement the message went under.
    if signal.cpa_id is not None and signal.cpa_id != sent_under:
        return f"it comes under CPA {signal.cpa_id}, but the message went under {sent_under}"
    return None
