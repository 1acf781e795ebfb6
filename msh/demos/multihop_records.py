"""What each MSH of the multi-hop demo recorded, read back from its store's journal, and the demo's verdicts.

A (the From party), I (the intermediary) and C (the To party) each keep a journal of events
(:mod:`msh.store`); :class:`~msh.faults.outcome.EventCounts` counts them per MSH, telling A's messages
(``sent``) from the MSH signals that travel back (C's end-to-end acknowledgments, I's DeliveryFailures),
and :func:`hop_lines` prints them. :func:`delivery_failures` pairs each DeliveryFailure A received with
the one I journaled queuing and then sending (its signal taken by A's MSH): the verdict of the second part
of the demo is computed from both stores, not assumed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from msh.faults.outcome import EventCounts

if TYPE_CHECKING:
    from msh.engine import OutboundState
    from msh.faults.proxy import ProxyStats
    from msh.store.api import Event

__all__ = ["DeliveryFailureSeen", "delivery_failures", "final_status_text", "hop_lines", "network_line"]


def network_line(hop: str, where: str, stats: ProxyStats) -> str:
    """What the proxy of one hop lost (it counts flights: HTTP requests and responses, TLS handshake flights)."""
    up, down = stats.requests_dropped, stats.responses_dropped
    return (
        f"  hop {hop}: the proxy in front of {where} lost {up} of {up + stats.requests_forwarded} flights to it and "
        f"{down} of {down + stats.responses_forwarded} from it"
    )


def hop_lines(a: EventCounts, i: EventCounts, c: EventCounts) -> list[str]:
    """What A, I and C recorded about A's messages and the signals that came back, one paragraph each."""
    forwarded_first = len(
        a.messages_with.get("hop-acknowledged", frozenset()) & a.messages_with.get("delivered", frozenset())
    )
    copies, relayed = i.ours["forward"], i.others["forward"]
    return [
        f"party A (From party): {a.ours['submitted']} submitted, {a.ours['transmission']} transmissions to I "
        f"({a.ours['resent']} of them resends); {a.count('hop-acknowledged')} forwarded (I's hop acknowledgment, "
        f"actor nextMSH), {a.count('delivered')} delivered (C's end-to-end acknowledgment, actor toPartyMSH; "
        f"{forwarded_first} of them forwarded first), {a.count('failed')} failed",
        f"intermediary I:       {copies} copies of {i.count('forward')} messages from A stored and forwarded to C "
        f"({copies - i.count('forward')} resent copies, forwarded again: no duplicate elimination at an "
        f"intermediary), {i.ours['transmission']} transmissions to C ({i.ours['resent']} of them resends), "
        f"{i.count('forward-delivered')} acknowledged by C's hop acknowledgment; {relayed} signals from C relayed "
        f"to A ({i.others['resent']} resends), {i.ours['delivery-failure-queued']} DeliveryFailures for A queued "
        f"({i.others['signal-sent']} taken by A, {i.ours['delivery-failure-unsent']} with no way to A)",
        f"party C (To party):   {c.ours['received']} received and delivered to the inbox, {c.ours['duplicate']} "
        f"duplicates eliminated, {c.ours['rejected']} refused; {c.others['transmission']} transmissions of "
        f"end-to-end acknowledgments to I ({c.others['resent']} of them resends), {c.others['signal-sent']} "
        f"taken by I",
        f"resends per hop: A->I {a.ours['resent']}, I->C {i.ours['resent']}, C->I {c.others['resent']} "
        f"(acknowledgments), I->A {i.others['resent']} (acknowledgments and DeliveryFailures)",
    ]


@dataclass(frozen=True, slots=True)
class DeliveryFailureSeen:
    """One of A's messages after C stopped: the DeliveryFailure errors A received about it
    (``(severity, description)``), the ones I journaled sending, and A's final status line."""

    message_id: str
    received: tuple[tuple[str, str], ...]
    sent_by_intermediary: tuple[str, ...]
    forwarded_first: bool

    @property
    def reported(self) -> bool:
        """A received a DeliveryFailure about it and I journaled sending one."""
        return bool(self.received) and bool(self.sent_by_intermediary)


def delivery_failures(
    a_events: Iterable[Event], i_events: Iterable[Event], message_ids: Collection[str], a_party: str
) -> list[DeliveryFailureSeen]:
    """For each of ``message_ids``: the DeliveryFailure errors in A's journal (``error-received``, whose
    MessageId is the failure's RefToMessageId) and the severities of I's ``delivery-failure-queued`` events
    to ``a_party`` whose DeliveryFailure message I's journal shows taken (``signal-sent``)."""
    received: dict[str, list[tuple[str, str]]] = {m: [] for m in message_ids}
    forwarded: set[str] = set()
    for event in a_events:
        if event.message_id not in received:
            continue
        if event.kind == "hop-acknowledged":
            forwarded.add(event.message_id)
        elif event.kind == "error-received":
            errors = event.detail.get("errors")
            for error in errors if isinstance(errors, list) else []:
                if isinstance(error, dict) and error.get("errorCode") == "DeliveryFailure":
                    received[event.message_id].append((str(error.get("severity")), str(error.get("description"))))
    queued: dict[str, tuple[str, str]] = {}  # the DeliveryFailure's MessageId -> (about, severity)
    taken: set[str] = set()
    for event in i_events:
        if event.kind == "signal-sent" and event.message_id is not None:
            taken.add(event.message_id)
        elif event.message_id in received and event.kind == "delivery-failure-queued":
            failure = event.detail.get("failureMessageId")
            if event.detail.get("to") == a_party and isinstance(failure, str):
                queued[failure] = (event.message_id, str(event.detail.get("severity")))
    by_i: dict[str, list[str]] = {m: [] for m in message_ids}
    for failure, (about, severity) in queued.items():
        if failure in taken:
            by_i[about].append(severity)
    return [DeliveryFailureSeen(m, tuple(received[m]), tuple(by_i[m]), m in forwarded) for m in message_ids]


def final_status_text(state: OutboundState) -> str:
    """A sent message's status at A, its transmissions and the failure it ended with, if any."""
    text = f"{state.status.value} after {state.attempts} transmission(s)"
    if state.failure is not None:
        text += f"; {state.failure.severity.value} {state.failure.error_code.value}: {state.failure.description}"
    return text
