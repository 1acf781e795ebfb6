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
from msh.store.events import EventKind as E  # short: the lines below name many kinds

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
    copies, relayed = i.ours[E.FORWARD], i.others[E.FORWARD]
    return [
        f"party A (From party): {a.ours[E.SUBMITTED]} submitted, {a.ours[E.TRANSMISSION]} transmissions to I "
        f"({a.ours[E.RESENT]} of them resends); {a.count(E.HOP_ACKNOWLEDGED)} forwarded (I's hop acknowledgment, "
        f"actor nextMSH), {a.count(E.DELIVERED)} delivered (C's end-to-end acknowledgment, actor toPartyMSH; "
        f"{forwarded_first} of them forwarded first), {a.count(E.FAILED)} failed",
        f"intermediary I:       {copies} copies of {i.count(E.FORWARD)} messages from A stored and forwarded to C "
        f"({copies - i.count(E.FORWARD)} resent copies, forwarded again: no duplicate elimination at an "
        f"intermediary), {i.ours[E.TRANSMISSION]} transmissions to C ({i.ours[E.RESENT]} of them resends), "
        f"{i.count(E.FORWARD_DELIVERED)} acknowledged by C's hop acknowledgment; {relayed} signals from C relayed "
        f"to A ({i.others[E.RESENT]} resends), {i.ours[E.DELIVERY_FAILURE_QUEUED]} DeliveryFailures for A queued "
        f"({i.others[E.SIGNAL_SENT]} taken by A, {i.ours[E.DELIVERY_FAILURE_UNSENT]} with no way to A)",
        f"party C (To party):   {c.ours[E.RECEIVED]} received and delivered to the inbox, {c.ours[E.DUPLICATE]} "
        f"duplicates eliminated, {c.ours[E.REJECTED]} refused; {c.others[E.TRANSMISSION]} transmissions of "
        f"end-to-end acknowledgments to I ({c.others[E.RESENT]} of them resends), {c.others[E.SIGNAL_SENT]} "
        f"taken by I",
        f"resends per hop: A->I {a.ours[E.RESENT]}, I->C {i.ours[E.RESENT]}, C->I {c.others[E.RESENT]} "
        f"(acknowledgments), I->A {i.others[E.RESENT]} (acknowledgments and DeliveryFailures)",
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
        if event.kind == E.HOP_ACKNOWLEDGED:
            forwarded.add(event.message_id)
        elif event.kind == E.ERROR_RECEIVED:
            errors = event.detail.get("errors")
            for error in errors if isinstance(errors, list) else []:
                if isinstance(error, dict) and error.get("errorCode") == "DeliveryFailure":
                    received[event.message_id].append((str(error.get("severity")), str(error.get("description"))))
    queued: dict[str, tuple[str, str]] = {}  # the DeliveryFailure's MessageId -> (about, severity)
    taken: set[str] = set()
    for event in i_events:
        if event.kind == E.SIGNAL_SENT and event.message_id is not None:
            taken.add(event.message_id)
        elif event.message_id in received and event.kind == E.DELIVERY_FAILURE_QUEUED:
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
