"""Element interactions an agreement makes impossible (ebMS2 §5, §9.1, §9.2, §10.1.1).

An agreement decides which ebXML header elements its messages carry (CPP/A 2.0 §8.4.8: ``always``,
``never``, ``perMessage``). Some combinations the ebMS 2.0 specification forbids on one message; an
agreement that *always* asks for such a combination on a binding can never be followed, and the MSH
refuses it when it is loaded (rather than at the first message), naming the binding and the rule:

* SyncReply (``syncReplyMode`` other than ``none``) with an AckRequested aimed at the next MSH (a second
  channel of the binding whose actor is nextMSH): ebMS2 §10.1.1, "When the SyncReply element is present, an
  AckRequested element with SOAP actor of NextMSH MUST NOT be present";
* MessageOrder (``MessageOrderSemantics`` Guaranteed) with SyncReply: §9.1 "SyncReply MUST NOT be present",
  §9.2; without DuplicateElimination: §9.1 "DuplicateElimination MUST also be present"; without
  reliable messaging (an acknowledgment asked, ReliableMessaging given): §9 "Reliable Messaging MUST be used
  when a MessageOrder element is present ... with a scheme of Once-And-Only-Once".

The SMTP binding's own rules (ebMS2 B.3.3: no replies on the connection to a ``mailto:`` endpoint; a
``mailto:`` Endpoint only under the TransportProtocol SMTP) are checked with them (:mod:`cpa.smtp_binding`).

A combination that depends on the message (``perMessage``) is the submission's to avoid: the MSH refuses a
submission that would carry it (:mod:`msh.runtime.compose`).
"""

from __future__ import annotations

from cpa.model import (
    CollaborationProtocolAgreement,
    DeliveryChannel,
    MessageOrderSemantics,
    PerMessage,
    SyncReplyMode,
)
from cpa.resolve import next_msh_channel, routes
from cpa.smtp_binding import smtp_binding_problems

__all__ = ["interaction_problems"]


def _binding(route_text: str, channel: DeliveryChannel) -> str:
    return f"{route_text} (channel {channel.channel_id})"


def interaction_problems(cpa: CollaborationProtocolAgreement) -> list[str]:
    """What of ``cpa`` the ebMS 2.0 element interactions make impossible, one sentence each saying what to fix;
    empty when nothing is."""
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for route in routes(cpa):
        sending = route.sending
        mc = sending.messaging_characteristics
        what = f"agreement {cpa.cpaid}: {route.from_party.party_name} sending {route.service}/{route.action}"
        key = (sending.channel_id, route.action)
        if key in seen:
            continue
        seen.add(key)
        sync = mc.sync_reply_mode is not SyncReplyMode.NONE
        hop = next_msh_channel(route)
        hop_always = (
            hop is not None
            and mc.ack_requested is PerMessage.ALWAYS
            and hop.messaging_characteristics.ack_requested is not PerMessage.NEVER
        )
        if sync and hop_always:
            # ebMS2 §10.1.1: SyncReply and an AckRequested aimed at the next MSH never go together.
            problems.append(
                f"{_binding(what, sending)} asks for SyncReply (syncReplyMode {mc.sync_reply_mode.value}) and, "
                f"through its nextMSH channel, for an intermediary's acknowledgment on every message: ebMS2 "
                "§10.1.1 forbids the two on one message; set syncReplyMode none, or drop the nextMSH channel"
            )
        binding = sending.doc_exchange.sender_binding
        rm = binding.reliable_messaging if binding is not None else None
        if rm is None or rm.message_order_semantics is not MessageOrderSemantics.GUARANTEED:
            continue
        # ebMS2 §9, §9.1, §9.2: MessageOrder only with once-and-only-once reliable messaging, no SyncReply.
        if sync:
            problems.append(
                f"{_binding(what, sending)} guarantees message order and asks for SyncReply (syncReplyMode "
                f'{mc.sync_reply_mode.value}): ebMS2 §9.1 "SyncReply MUST NOT be present" with MessageOrder; '
                "set syncReplyMode none"
            )
        if mc.duplicate_elimination is PerMessage.NEVER:
            problems.append(
                f"{_binding(what, sending)} guarantees message order without DuplicateElimination "
                '(duplicateElimination never): ebMS2 §9.1 "DuplicateElimination MUST also be present"; set it '
                "to always"
            )
        if mc.ack_requested is PerMessage.NEVER:
            problems.append(
                f"{_binding(what, sending)} guarantees message order without acknowledgments (ackRequested "
                'never): ebMS2 §9 "Reliable Messaging MUST be used when a MessageOrder element is present"; set '
                "ackRequested always"
            )
    # ebMS2 B.3.3: over SMTP, responses are never on the connection.
    return problems + smtp_binding_problems(cpa)
