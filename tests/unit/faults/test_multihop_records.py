"""msh.demos.multihop_records: the multi-hop demo's records and its DeliveryFailure verdict, from journal events."""

from __future__ import annotations

from datetime import UTC, datetime

from msh.demos.multihop_records import delivery_failures, hop_lines
from msh.faults.outcome import EventCounts
from msh.store.api import Event

A = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088:123456789"
_ids = iter(range(1, 10_000))


def event(kind: str, message_id: str, **detail: object) -> Event:
    return Event(next(_ids), datetime(2026, 1, 1, tzinfo=UTC), kind, message_id, None, dict(detail))


def df_received(message_id: str, severity: str = "Error") -> Event:
    error = {"errorCode": "DeliveryFailure", "severity": severity, "location": None, "description": "gave up"}
    return event("error-received", message_id, attempt=1, errors=[error])


def test_a_delivery_failure_counts_when_a_received_it_and_the_intermediary_sent_it() -> None:
    a_events = [
        event("hop-acknowledged", "m1"),
        df_received("m1"),
        df_received("m2", "Warning"),  # the intermediary never journaled sending it
        event("error-received", "m3", attempt=1, errors=[{"errorCode": "Inconsistent", "severity": "Error"}]),
    ]
    i_events = [
        event("delivery-failure-queued", "m1", to=A, severity="Error", failureMessageId="df-1"),
        event("signal-sent", "df-1"),
        event("delivery-failure-queued", "m3", to=A, severity="Error", failureMessageId="df-3"),
        event("signal-sent", "df-3"),
        event("delivery-failure-queued", "m2", to="someone else", severity="Warning", failureMessageId="df-2"),
        event("signal-sent", "df-2"),
    ]
    seen = {s.message_id: s for s in delivery_failures(a_events, i_events, ["m1", "m2", "m3"], A)}
    assert seen["m1"].received == (("Error", "gave up"),) and seen["m1"].sent_by_intermediary == ("Error",)
    assert seen["m1"].reported and seen["m1"].forwarded_first
    assert seen["m2"].received == (("Warning", "gave up"),) and not seen["m2"].reported
    # An error of another kind is no DeliveryFailure, whatever the intermediary journaled.
    assert seen["m3"].received == () and not seen["m3"].reported and not seen["m3"].forwarded_first


def test_a_delivery_failure_queued_but_never_taken_is_not_counted_as_sent() -> None:
    a_events = [df_received("m1")]
    i_events = [event("delivery-failure-queued", "m1", to=A, severity="Error", failureMessageId="df-1")]
    [seen] = delivery_failures(a_events, i_events, ["m1"], A)
    assert seen.sent_by_intermediary == () and not seen.reported


def test_records_tell_a_s_messages_from_the_signals_that_come_back() -> None:
    sent = {"m1", "m2"}
    a_kinds = [("submitted", "m1"), ("submitted", "m2"), ("hop-acknowledged", "m1")]
    a_kinds += [("delivered", "m1"), ("delivered", "m2"), ("resent", "m2")]
    a = EventCounts.of([event(kind, m) for kind, m in a_kinds], sent)
    i = EventCounts.of(
        [event("forward", "m1"), event("forward", "m1"), event("forward", "m2"), event("forward", "ack-1")], sent
    )
    c = EventCounts.of([event("received", "m1"), event("received", "m2"), event("signal-sent", "ack-1")], sent)
    assert a.count("delivered") == 2 and a.ours["resent"] == 1 and i.others["forward"] == 1
    lines = hop_lines(a, i, c)
    assert "1 forwarded (I's hop acknowledgment" in lines[0] and "2 delivered" in lines[0]
    assert "1 of them forwarded first" in lines[0]
    assert "3 copies of 2 messages from A stored and forwarded to C (1 resent copies" in lines[1]
    assert "1 signals from C relayed to A" in lines[1]
    assert "2 received and delivered to the inbox" in lines[2] and "1 taken by I" in lines[2]
