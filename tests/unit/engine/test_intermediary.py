"""The intermediary's decisions (ebMS2 §10, §6.5.7): forward, hop_answer, delivery_failure; pure, no store."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from cpa.duration import XsDuration
from msh.ebms import model as m
from msh.ebms.errorlist import error_message
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH, SERVICE_MSH
from msh.ebms.via import ack_requested_element, read_via, via_element
from msh.engine import Discard, InboundDecision, OutboundEvent, Reject, Reliability, ReplySync, StoreForward
from msh.engine.intermediary import delivery_failure, forward, hop_acknowledgment, hop_answer
from msh.engine.replies import acknowledgment_message
from msh.engine.routing import Route, find_route
from msh.engine.sending import AcknowledgmentReceived, ErrorReceived
from msh.errors import ErrorCode, Issue, Severity
from tests.support.cpa_factory import NOW, make_envelope

INTERMEDIARY = m.Party((m.PartyId("555000111", "urn:duns"),))
I_ID = "urn:duns:555000111"
TO_C = Route("to-c", "987654321", "http://c.example/msh", to_party_id_type="urn:duns", retries=4)
TO_A = Route("to-a", "123456789", "http://a.example/msh")


def message(*, hop: bool = True, e2e: bool = True, **kw: object) -> m.Envelope:
    env = make_envelope(ack_requested=e2e, **kw)  # type: ignore[arg-type]
    extra = (m.AckRequested(actor=ACTOR_NEXT_MSH),) if hop else ()
    return replace(env, ack_requested=(*env.ack_requested, *extra))


def decide(env: m.Envelope, **kw: object) -> InboundDecision:
    options: dict[str, object] = {"routes": (TO_C, TO_A), "own_party": INTERMEDIARY, "own_id": I_ID, "now": NOW}
    options.update(kw)
    return forward(env, new_message_id="i-1@i.example", **options)  # type: ignore[arg-type]


def refused(decision: InboundDecision) -> tuple[str, str, str | None, str]:
    (reject,) = decision.actions
    assert isinstance(reject, Reject) and reject.sync
    header = reject.error_message.message_header
    assert header is not None and reject.error_message.error_list is not None
    # ebMS2 §4.2.4.2: to the sender, From the intermediary, about the message.
    assert header.from_party == INTERMEDIARY and header.to_party.party_ids[0].value == "123456789"
    assert header.message_data.ref_to_message_id == "msg-1@a.example"
    (error,) = reject.error_message.error_list.errors
    text = error.description.text if error.description is not None else ""
    return error.error_code, error.severity.value, error.location, text


def test_a_message_for_another_party_is_stored_forwarded_and_acknowledged_as_the_next_msh() -> None:
    decision = decide(message())
    store, reply = decision.actions
    assert isinstance(store, StoreForward) and store.route is TO_C and not store.signal
    # ebMS2 §10.1.1: a new AckRequested aimed at the next MSH, and the path so far plus this MSH.
    assert store.insert == (ack_requested_element(), via_element((I_ID,)))
    r = store.reliability
    assert (r.ack_requested, r.ack_actor, r.retries) == (True, ACTOR_NEXT_MSH, 4)
    assert r.retry_interval == TO_C.retry_interval == r.first_resend_timeout
    # ebMS2 §10.1.2, §10.1.3: the hop acknowledgment, on the connection, From the intermediary.
    assert isinstance(reply, ReplySync)
    ack = reply.envelope
    assert ack.message_header is not None and ack.message_header.from_party == INTERMEDIARY
    assert [(a.actor, a.from_party, a.ref_to_message_id) for a in ack.acknowledgments] == [
        (ACTOR_NEXT_MSH, INTERMEDIARY, "msg-1@a.example")
    ]


def test_without_a_next_msh_request_nothing_is_acknowledged_and_the_hop_goes_best_effort() -> None:
    decision = decide(message(hop=False))
    (store,) = decision.actions
    assert isinstance(store, StoreForward)
    assert store.insert == (via_element((I_ID,)),)
    assert store.reliability.ack_requested is False


def test_a_route_without_hop_ack_asks_the_next_hop_for_nothing() -> None:
    quiet = replace(TO_C, hop_ack=False)
    store = decide(message(), routes=(quiet,)).actions[0]
    assert isinstance(store, StoreForward) and store.insert == (via_element((I_ID,)),)
    assert not store.reliability.ack_requested


def test_a_signal_is_forwarded_without_ack_requested() -> None:
    received = message(hop=False)
    ack = acknowledgment_message(received, message_id="ack-1@c.example", now=NOW)
    store = decide(ack).actions[0]  # To A: the route back
    assert isinstance(store, StoreForward) and store.signal and store.route is TO_A
    assert not store.reliability.ack_requested


def test_the_path_grows_by_one_hop() -> None:
    env = replace(message(), header_extensions=m.Extensions(elements=(via_element(("urn:x:first",)),)))
    assert read_via(env) == ("urn:x:first",)
    store = decide(env).actions[0]
    assert isinstance(store, StoreForward)
    assert store.insert[-1] == via_element(("urn:x:first", I_ID))


def test_no_route_is_a_delivery_failure_back_to_the_sender() -> None:
    code, severity, location, text = refused(decide(message(), routes=(TO_A,)))
    assert (code, severity, location) == ("DeliveryFailure", "Error", "//Header/MessageHeader/To/PartyId")
    assert "no route" in text and "987654321" in text


@pytest.mark.parametrize("own_message", [False, True])
def test_a_loop_is_refused(own_message: bool) -> None:
    env = message()
    if not own_message:
        env = replace(env, header_extensions=m.Extensions(elements=(via_element(("urn:x:other", I_ID)),)))
    code, _, _, text = refused(decide(env, own_message=own_message))
    assert code == "DeliveryFailure" and "routing loop" in text


def test_sync_reply_with_a_next_msh_request_is_inconsistent() -> None:
    code, severity, location, _ = refused(decide(message(sync_reply=True)))
    assert (code, severity, location) == ("Inconsistent", "Error", "//Header/AckRequested/@actor")


def test_an_expired_message_is_refused_with_time_to_live_expired() -> None:
    code, _, location, _ = refused(decide(message(time_to_live=NOW - timedelta(seconds=1))))
    assert (code, location) == ("TimeToLiveExpired", "//Header/MessageHeader/MessageData/TimeToLive")


def test_time_to_live_is_judged_with_the_clocks_accuracy_and_expires_only_when_passed() -> None:
    # ebMS2 §3.1.6.4: expired "if the time of the internal clock, adjusted for UTC, of the Receiving MSH is
    # greater than the value of TimeToLive"; mshTimeAccuracy is the clock's tolerance (docs/design.md §3).
    assert not isinstance(decide(message(time_to_live=NOW)).actions[0], Reject)  # not greater: not expired
    within = decide(message(time_to_live=NOW - timedelta(seconds=1)), time_accuracy=timedelta(seconds=2))
    assert not isinstance(within.actions[0], Reject)
    beyond = decide(message(time_to_live=NOW - timedelta(seconds=3)), time_accuracy=timedelta(seconds=2))
    code, _, _, description = refused(beyond)
    assert code == "TimeToLiveExpired" and "clock accuracy 0:00:02" in description


def test_a_refusal_goes_asynchronously_when_the_transport_cannot_answer() -> None:
    (reject,) = decide(message(), routes=(), sync_reply_requested=False).actions
    assert isinstance(reject, Reject) and not reject.sync and reject.to_endpoint is not None


def test_routes_match_on_type_agreement_service_and_action_first_row_wins() -> None:
    keys = (("987654321", "urn:duns"),)
    narrow = Route("narrow", "987654321", "http://x/msh", cpa_id="other")
    typed = Route("typed", "987654321", "http://y/msh", to_party_id_type="urn:other")
    anytype = Route("any", "987654321", "http://z/msh")
    assert find_route((narrow, typed, anytype), keys, "cpa-a-b", "s", "a") is anytype
    assert find_route((narrow,), keys, "other", "s", "a") is narrow
    assert find_route((typed,), keys, "cpa-a-b", "s", "a") is None
    with pytest.raises(ValueError, match="http"):
        Route("bad", "1", "ftp://x")
    assert "PT30S" in str(XsDuration.from_timedelta(timedelta(seconds=30)))


# --- what comes back on a forward's connection -----------------------------------------------------------


def test_the_next_msh_acknowledgment_ends_the_hop_and_is_not_relayed() -> None:
    ack = hop_acknowledgment(message(), own_party=INTERMEDIARY, message_id="h@c", now=NOW)
    answer = hop_answer(ack, "msg-1@a.example")
    assert answer.event == AcknowledgmentReceived("msg-1@a.example", ACTOR_NEXT_MSH)
    assert not answer.relay


def test_an_end_to_end_acknowledgment_on_the_connection_is_relayed() -> None:
    both = acknowledgment_message(message(), message_id="a@c", now=NOW, actors=(ACTOR_TO_PARTY_MSH, ACTOR_NEXT_MSH))
    answer = hop_answer(both, "msg-1@a.example")
    assert answer.event == AcknowledgmentReceived("msg-1@a.example", ACTOR_NEXT_MSH) and answer.relay


def test_an_error_about_the_forward_ends_it_and_is_relayed() -> None:
    env = message()
    assert env.message_header is not None
    issue = Issue(ErrorCode.SECURITY_FAILURE, Severity.ERROR, "bad signature")
    error = error_message(issue, in_reply_to=env.message_header, message_id="e@c", timestamp=NOW)
    answer = hop_answer(error, "msg-1@a.example")
    assert isinstance(answer.event, ErrorReceived) and not answer.event.fault and answer.relay
    assert hop_answer(error, "another@a").event is None


# --- the DeliveryFailure an intermediary sends ----------------------------------------------------------


@pytest.mark.parametrize("severity", [Severity.ERROR, Severity.WARNING])
def test_a_delivery_failure_names_the_intermediary_and_the_message(severity: Severity) -> None:
    issue = Issue(ErrorCode.DELIVERY_FAILURE, severity, "message msg-1@a.example: no answer")
    failure = delivery_failure(message(), issue, own_party=INTERMEDIARY, message_id="df@i", now=NOW)
    assert failure is not None and failure.message_header is not None and failure.error_list is not None
    h = failure.message_header
    assert h.from_party == INTERMEDIARY and h.to_party.party_ids[0].value == "123456789"
    assert (h.service.value, h.action, h.message_data.ref_to_message_id) == (
        SERVICE_MSH,
        "MessageError",
        "msg-1@a.example",
    )
    assert h.cpa_id == "cpa-a-b" and h.conversation_id == "conv-1"
    (error,) = failure.error_list.errors
    assert (error.error_code, error.severity) == ("DeliveryFailure", severity)


def test_no_delivery_failure_for_a_message_without_ack_requested_or_for_a_signal() -> None:
    issue = Issue(ErrorCode.DELIVERY_FAILURE, Severity.ERROR, "x")
    assert (
        delivery_failure(message(hop=False, e2e=False), issue, own_party=INTERMEDIARY, message_id="d", now=NOW) is None
    )
    ack = acknowledgment_message(message(), message_id="a@c", now=NOW)
    assert delivery_failure(ack, issue, own_party=INTERMEDIARY, message_id="d", now=NOW) is None


# --- acknowledgments aimed at the next MSH that come to the intermediary (ebMS2 §10.1.3) ------------------


def test_an_asynchronous_hop_acknowledgment_is_taken_for_the_forward_and_not_forwarded() -> None:
    # ebMS2 §10.1.3: "A MSH supporting Multi-hop MUST differentiate, based upon the actor, which Acknowledgment
    # is being returned and act accordingly": one aimed at nextMSH is this MSH's, wherever it came from.
    forwarded = message()
    c = m.Party((m.PartyId("987654321", "urn:duns"),))
    ack = hop_acknowledgment(forwarded, own_party=c, message_id="c-ack-1@c.example", now=NOW)
    decision = decide(ack)
    event, discard = decision.actions
    assert isinstance(event, OutboundEvent) and event.relay and event.message_id == "msg-1@a.example"
    assert event.event == AcknowledgmentReceived("msg-1@a.example", ACTOR_NEXT_MSH)
    assert event.from_party == c
    assert isinstance(discard, Discard) and not any(isinstance(a, StoreForward) for a in decision.actions)


def test_a_hop_acknowledgment_beside_an_end_to_end_one_is_taken_and_the_rest_forwarded() -> None:
    # ebMS2 §10.1.3: two Acknowledgment elements, one per actor, "possibly on the same message".
    forwarded = message()
    c = m.Party((m.PartyId("987654321", "urn:duns"),))
    both = acknowledgment_message(
        forwarded, message_id="c-ack-2@c.example", now=NOW, actors=(ACTOR_TO_PARTY_MSH, ACTOR_NEXT_MSH)
    )
    header = both.message_header
    assert header is not None
    both = replace(both, message_header=replace(header, from_party=c))
    decision = decide(both)
    kinds = [type(a).__name__ for a in decision.actions]
    assert kinds == ["OutboundEvent", "StoreForward"]


def test_one_hops_reliability_comes_from_its_route_and_ends_at_the_next_msh() -> None:
    # ebMS2 §10.1: a hop is resent by the route's rules, asked of the next MSH only, never end to end.
    route = replace(TO_C, persist_duration=XsDuration.from_timedelta(timedelta(days=2)))
    r = Reliability.from_route(route, time_to_live=NOW + timedelta(hours=1), ack_next_msh=True)
    assert (r.retries, r.retry_interval, r.first_resend_timeout) == (4, route.retry_interval, route.retry_interval)
    assert (r.persist_duration, r.time_to_live) == (route.persist_duration, NOW + timedelta(hours=1))
    assert (r.ack_requested, r.ack_actor, r.hop_ack, r.end_to_end) == (True, ACTOR_NEXT_MSH, False, False)
    assert Reliability.from_route(route, time_to_live=None, ack_next_msh=False).ack_requested is False
