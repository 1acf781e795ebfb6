"""Receiving decisions (ebMS2 §6.5.2-§6.5.6, §6.6, §7, §8) on real agreement checks and an in-memory store."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import timedelta

import pytest

from cpa.check import CheckResult, check
from cpa.model import CollaborationProtocolAgreement, PerMessage, SyncReplyMode
from msh.ebms import model as m
from msh.ebms.digest import DIGEST_PREFIX
from msh.ebms.envelope import read_envelope, serialise_envelope
from msh.ebms.errorlist import error_message
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH, EB, SERVICE_MSH, SOAP_ACTOR_NEXT, XMLDSIG
from msh.ebms.schema import validate_envelope
from msh.engine import (
    BUSINESS_RULES,
    AcknowledgmentReceived,
    ConflictingDuplicate,
    Discard,
    EndpointRef,
    ErrorReceived,
    Held,
    InboundDecision,
    InboundOutcome,
    OutboundEvent,
    QueriedMessage,
    RecordAcknowledgment,
    Reject,
    ReplySync,
    ResendStoredAck,
    SendAsync,
    SignalReceived,
    StatusReported,
    StoredInbound,
    StoreInbound,
    receive,
)
from msh.errors import ErrorCode, Issue, Severity
from msh.safexml import parse_xml
from tests.support.cpa_factory import NOW, channel, make_cpa, make_envelope

PER_MESSAGE = {
    "ack_requested": PerMessage.PER_MESSAGE,
    "duplicate_elimination": PerMessage.PER_MESSAGE,
    "ack_signature_requested": PerMessage.PER_MESSAGE,
}
CPA = make_cpa(**PER_MESSAGE)  # type: ignore[arg-type]
SYNC_CPA = make_cpa(sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY, **PER_MESSAGE)  # type: ignore[arg-type]
MID = "msg-1@a.example"
A = m.Party((m.PartyId("123456789", "urn:duns"),), "Buyer")
B = m.Party((m.PartyId("987654321", "urn:duns"),), "Seller")


def message(message_id: str = MID, **kw: object) -> m.Envelope:
    env = make_envelope(**kw)  # type: ignore[arg-type]
    assert env.message_header is not None
    data = replace(env.message_header.message_data, message_id=message_id)
    return replace(env, message_header=replace(env.message_header, message_data=data))


@dataclass
class Receiver:
    """A receiving MSH: check, store lookup, receive(), and the store twin applying the decision."""

    cpa: CollaborationProtocolAgreement = CPA
    stored: dict[str, StoredInbound] = field(default_factory=dict)
    delivered: Counter[str] = field(default_factory=Counter)
    ids: int = 0

    def get(self, env: m.Envelope, **kw: object) -> InboundDecision:
        now = kw.pop("now", NOW)
        result = check(env, self.cpa, now=now)  # type: ignore[arg-type]
        return self.take(env, result, now=now, **kw)

    def take(self, env: m.Envelope, result: CheckResult, **kw: object) -> InboundDecision:
        self.ids += 1
        now = kw.pop("now", NOW)
        mid = env.message_id
        decision = receive(
            env,
            check_result=result,
            duplicate=self.stored.get(mid) if mid else None,
            now=now,  # type: ignore[arg-type]
            new_message_id=f"reply-{self.ids}@b.example",
            **kw,  # type: ignore[arg-type]
        )
        for action in decision.actions:
            if isinstance(action, StoreInbound):
                if action.message_id not in self.stored:
                    self.stored[action.message_id] = StoredInbound(
                        action.message_id, action.record_ack, False, action.digest
                    )
                if action.deliver:
                    self.delivered[action.message_id] += 1
            elif isinstance(action, RecordAcknowledgment):
                self.stored[action.message_id] = replace(
                    self.stored[action.message_id], acknowledgment=action.acknowledgment
                )
        return decision


def kinds(decision: InboundDecision) -> list[str]:
    return [type(a).__name__ for a in decision.actions]


def acknowledgments_sent(decision: InboundDecision) -> list[m.Envelope]:
    out: list[m.Envelope] = []
    for a in decision.actions:
        if isinstance(a, (ReplySync, SendAsync)) and a.envelope.acknowledgments:
            out.append(a.envelope)
        elif isinstance(a, ResendStoredAck):
            assert isinstance(a.acknowledgment, m.Envelope)
            out.append(a.acknowledgment)
    return out


def schema_valid(env: m.Envelope) -> m.Envelope:
    """Serialise, validate against the project's schemas, read back; the envelope read is returned."""
    root = parse_xml(serialise_envelope(env))
    assert validate_envelope(root) == ()
    again, issues = read_envelope(root)
    assert issues == ()
    return again


# --- §6.6 rows without an intermediary ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "de", "ack", "deliveries", "acks"),
    [(2, True, True, 1, 3), (4, True, False, 1, 0), (6, False, True, 3, 3), (8, False, False, 3, 0)],
)
def test_reliable_messaging_combinations(row: int, de: bool, ack: bool, deliveries: int, acks: int) -> None:
    receiver = Receiver()
    env = message(duplicate_elimination=de, ack_requested=ack)
    decisions = [receiver.get(env) for _ in range(3)]
    assert receiver.delivered[MID] == deliveries
    sent = [a for d in decisions for a in acknowledgments_sent(d)]
    assert len(sent) == acks
    if de and ack:
        # ebMS2 §6.5.6 2: every duplicate gets the acknowledgment identical to the first one.
        assert sent[0] == sent[1] == sent[2]
        assert kinds(decisions[0]) == ["StoreInbound", "SendAsync"]
        assert kinds(decisions[1]) == kinds(decisions[2]) == ["ResendStoredAck"]
        assert [d.duplicate for d in decisions] == [False, True, True]
    if de and not ack:
        assert kinds(decisions[1]) == ["Discard"]
    if not de and ack:
        assert len({a.message_header.message_id for a in sent if a.message_header}) == 3


def test_business_rules_table_is_complete() -> None:
    assert set(BUSINESS_RULES) == {(de, ack, seen) for de in (True, False) for ack in (True, False) for seen in (1, 0)}
    assert BUSINESS_RULES[(True, True, True)] is InboundOutcome.RESEND_ACK
    assert BUSINESS_RULES[(True, False, True)] is InboundOutcome.IGNORE


def test_the_message_is_committed_before_its_acknowledgment_leaves() -> None:
    decision = Receiver().get(message())
    store, reply = decision.actions
    assert isinstance(store, StoreInbound) and isinstance(reply, SendAsync)
    # The acknowledgment sent is the one stored with the message, in the same transaction.
    assert store.record_ack == reply.envelope == decision.stored_acknowledgment
    assert (store.deliver, store.duplicate_elimination, store.received_at) == (True, True, NOW)
    assert decision.delivers


def test_the_acknowledgment_message_follows_section_6_3_2() -> None:
    ack = Receiver().get(message()).stored_acknowledgment
    assert ack is not None and ack.message_header is not None
    h = ack.message_header
    assert (h.from_party, h.to_party, h.cpa_id, h.conversation_id) == (B, A, "cpa-a-b", "conv-1")
    assert (h.service.value, h.action) == (SERVICE_MSH, "Acknowledgment")
    assert (h.message_data.message_id, h.message_data.timestamp) == ("reply-1@b.example", NOW)
    assert h.message_data.ref_to_message_id == MID
    assert not ack.ack_requested  # ebMS2 §6.3.1.4
    (element,) = ack.acknowledgments
    assert (element.ref_to_message_id, element.timestamp, element.from_party) == (MID, NOW, B)
    assert element.actor == ACTOR_TO_PARTY_MSH
    assert element.references == ()
    assert schema_valid(ack) == ack


def test_a_next_msh_request_is_answered_by_a_next_msh_acknowledgment_on_a_single_hop() -> None:
    receiver = Receiver(make_cpa(actor=ACTOR_NEXT_MSH, **PER_MESSAGE))  # type: ignore[arg-type]
    ack = receiver.get(message(ack_actor=ACTOR_NEXT_MSH)).stored_acknowledgment
    assert ack is not None
    assert [a.actor for a in ack.acknowledgments] == [ACTOR_NEXT_MSH]


# --- synchronous or asynchronous ------------------------------------------------------------------------


def test_sync_reply_puts_the_acknowledgment_on_the_http_response() -> None:
    decision = Receiver(SYNC_CPA).get(message(sync_reply=True))
    assert kinds(decision) == ["StoreInbound", "ReplySync"]
    assert decision.sync_reply == decision.stored_acknowledgment
    assert decision.async_replies == ()


def test_without_sync_reply_the_acknowledgment_goes_to_the_senders_endpoint() -> None:
    decision = Receiver().get(message())
    assert decision.sync_reply is None
    ((sent, where),) = decision.async_replies
    assert sent == decision.stored_acknowledgment
    assert where == EndpointRef("cpa-a-b", B, A, SERVICE_MSH, "Acknowledgment")


def test_response_only_returns_signals_asynchronously() -> None:
    cpa = make_cpa(sync_reply_mode=SyncReplyMode.RESPONSE_ONLY, **PER_MESSAGE)  # type: ignore[arg-type]
    decision = Receiver(cpa).get(message(sync_reply=True))
    assert kinds(decision) == ["StoreInbound", "SendAsync"]


def test_the_runtime_can_force_asynchronous_replies() -> None:
    decision = Receiver(SYNC_CPA).get(message(sync_reply=True), sync_reply_requested=False)
    assert kinds(decision) == ["StoreInbound", "SendAsync"]


@pytest.mark.parametrize("sync", [True, False])
def test_a_duplicates_stored_acknowledgment_goes_back_the_way_the_duplicate_asks(sync: bool) -> None:
    receiver = Receiver(SYNC_CPA if sync else CPA)
    first = receiver.get(message(sync_reply=sync))
    again = receiver.get(message(sync_reply=sync))
    (resend,) = again.actions
    assert isinstance(resend, ResendStoredAck)
    assert resend.sync is sync
    assert resend.acknowledgment == first.stored_acknowledgment
    assert resend.to_endpoint == EndpointRef("cpa-a-b", B, A, SERVICE_MSH, "Acknowledgment")
    if sync:
        assert again.sync_reply == first.stored_acknowledgment
    else:
        assert again.async_replies == ((first.stored_acknowledgment, resend.to_endpoint),)


def test_stored_acknowledgment_bytes_are_sent_again_unchanged() -> None:
    stored = StoredInbound(MID, b"<exact bytes as signed and sent/>", True)
    env = message()
    decision = receive(env, check_result=check(env, CPA, now=NOW), duplicate=stored, now=NOW, new_message_id="x")
    assert decision.actions == (
        ResendStoredAck(
            MID, stored.acknowledgment or b"", False, EndpointRef("cpa-a-b", B, A, SERVICE_MSH, "Acknowledgment")
        ),
    )
    assert not decision.delivers and not decision.sign_reply


def test_a_duplicate_stored_without_acknowledgment_gets_a_new_one_kept_as_first_response() -> None:
    receiver = Receiver()
    receiver.get(message(ack_requested=False))
    decision = receiver.get(message())
    assert kinds(decision) == ["RecordAcknowledgment", "SendAsync"]
    assert receiver.delivered[MID] == 1
    third = receiver.get(message())
    (resend,) = third.actions
    assert isinstance(resend, ResendStoredAck) and resend.acknowledgment == decision.stored_acknowledgment


# --- errors and warnings ------------------------------------------------------------------------------


def test_an_agreement_error_refuses_the_message_with_an_error_list() -> None:
    receiver = Receiver()
    decision = receiver.get(message(action="Unknown"))
    (reject,) = decision.actions
    assert isinstance(reject, Reject)
    assert not decision.delivers and receiver.stored == {}
    err = reject.error_message
    assert err.error_list is not None and err.error_list.highest_severity is Severity.ERROR
    assert err.message_header is not None
    assert (err.message_header.action, err.message_header.message_data.ref_to_message_id) == ("MessageError", MID)
    assert [e.code for e in err.error_list.errors] == [ErrorCode.VALUE_NOT_RECOGNIZED]
    assert reject.sync is False
    assert reject.to_endpoint == EndpointRef("cpa-a-b", B, A, SERVICE_MSH, "MessageError")
    assert decision.async_replies == ((err, reject.to_endpoint),)
    assert schema_valid(err) == err


def test_a_refusal_goes_back_synchronously_when_the_header_asks_for_sync_reply() -> None:
    # The CPA says none, so SyncReply is itself an error; the sender still waits on the connection.
    decision = Receiver().get(message(sync_reply=True))
    (reject,) = decision.actions
    assert isinstance(reject, Reject) and reject.sync and reject.to_endpoint is None
    assert decision.sync_reply == reject.error_message


def test_warnings_travel_with_the_acknowledgment() -> None:
    # TimeToLive not after Timestamp + (Retries + 1) * RetryInterval: Inconsistent, Warning (cpa.check).
    env = message(time_to_live=NOW + timedelta(minutes=5))
    decision = Receiver().get(env)
    assert decision.delivers
    ack = decision.stored_acknowledgment
    assert ack is not None and ack.error_list is not None
    assert ack.error_list.highest_severity is Severity.WARNING
    assert [e.code for e in ack.error_list.errors] == [ErrorCode.INCONSISTENT]
    assert ack.acknowledgments
    assert schema_valid(ack) == ack


def test_warnings_without_acknowledgment_go_in_an_independent_error_message() -> None:
    env = message(ack_requested=False)
    warning = Issue(ErrorCode.INCONSISTENT, Severity.WARNING, "header wins", "//Header/MessageHeader")
    decision = Receiver().take(env, replace(check(env, CPA, now=NOW), issues=(warning,)))
    assert kinds(decision) == ["StoreInbound", "SendAsync"]
    report = decision.async_replies[0][0]
    assert isinstance(report, m.Envelope) and report.message_header is not None
    assert report.message_header.action == "MessageError"
    assert report.error_list is not None and report.error_list.highest_severity is Severity.WARNING


def test_a_duplicate_past_its_time_to_live_still_gets_the_stored_acknowledgment() -> None:
    receiver = Receiver()
    ttl = NOW + timedelta(hours=2)
    first = receiver.get(message(time_to_live=ttl))
    late = receiver.get(message(time_to_live=ttl), now=ttl + timedelta(minutes=1))
    (resend,) = late.actions
    assert isinstance(resend, ResendStoredAck) and resend.acknowledgment == first.stored_acknowledgment
    assert receiver.delivered[MID] == 1


def test_a_first_copy_past_its_time_to_live_is_refused() -> None:
    ttl = NOW + timedelta(hours=2)
    decision = Receiver().get(message(time_to_live=ttl), now=ttl + timedelta(minutes=1))
    (reject,) = decision.actions
    assert isinstance(reject, Reject)
    assert reject.error_message.error_list is not None
    assert ErrorCode.TIME_TO_LIVE_EXPIRED in [e.code for e in reject.error_message.error_list.errors]


def test_a_message_without_header_gets_a_soap_fault() -> None:
    env = m.Envelope()
    decision = receive(env, check_result=check(env, CPA, now=NOW), duplicate=None, now=NOW, new_message_id="x")
    (reject,) = decision.actions
    assert isinstance(reject, Reject) and reject.sync and reject.message_id is None
    assert reject.error_message.fault is not None
    assert reject.error_message.fault.faultcode == "SOAP:Client"


# --- signed acknowledgments ---------------------------------------------------------------------------

SIGNATURE = (
    f'<ds:Signature xmlns:ds="{XMLDSIG}"><ds:SignedInfo>'
    '<ds:CanonicalizationMethod Algorithm="http://www.w3.org/TR/2001/REC-xml-c14n-20010315"/>'
    '<ds:SignatureMethod Algorithm="http://www.w3.org/2000/09/xmldsig#rsa-sha1"/>'
    '<ds:Reference URI=""><ds:DigestMethod Algorithm="http://www.w3.org/2000/09/xmldsig#sha1"/>'
    "<ds:DigestValue>AAAA</ds:DigestValue></ds:Reference>"
    '<ds:Reference URI="cid:payload-1"><ds:DigestMethod Algorithm="http://www.w3.org/2000/09/xmldsig#sha1"/>'
    "<ds:DigestValue>BBBB</ds:DigestValue></ds:Reference>"
    "</ds:SignedInfo><ds:SignatureValue>CCCC</ds:SignatureValue></ds:Signature>"
)


def test_a_signed_acknowledgment_copies_the_messages_references() -> None:
    env = replace(message(ack_signed=True), signatures=(m.Signature(SIGNATURE),))
    decision = Receiver().get(env)
    assert decision.sign_reply and not decision.derive_references
    ack = decision.stored_acknowledgment
    assert ack is not None
    refs = ack.acknowledgments[0].references
    assert len(refs) == 2 and 'URI="cid:payload-1"' in refs[1] and "BBBB" in refs[1]
    assert len(schema_valid(ack).acknowledgments[0].references) == 2


def test_a_signed_acknowledgment_of_an_unsigned_message_asks_for_derived_references() -> None:
    decision = Receiver().get(message(ack_signed=True))
    assert decision.sign_reply and decision.derive_references
    assert Receiver().get(message()).sign_reply is False


def test_a_signed_acknowledgment_this_msh_cannot_sign_is_reported_inconsistent_warning_and_sent_unsigned() -> None:
    # ebMS2 §6.3.1.2: "cannot return an Acknowledgment Message as requested": errorCode Inconsistent, severity
    # Warning (not supported); the message is still taken and acknowledged, the acknowledgment unsigned.
    receiver = Receiver()
    decision = receiver.get(message(ack_signed=True), can_sign=False)
    assert decision.delivers and not decision.sign_reply and not decision.derive_references
    [ack] = acknowledgments_sent(decision)
    assert ack.acknowledgments[0].references == ()
    assert ack.error_list is not None and ack.error_list.highest_severity is Severity.WARNING
    [error] = ack.error_list.errors
    assert (error.code, error.severity, error.location) == (
        ErrorCode.INCONSISTENT,
        Severity.WARNING,
        "//Header/AckRequested/@signed",
    )
    assert [i.error_code for i in decision.issues] == [ErrorCode.INCONSISTENT]
    # An unsigned acknowledgment asked for needs no key: nothing to report.
    plain = Receiver().get(message(), can_sign=False)
    [unsigned] = acknowledgments_sent(plain)
    assert unsigned.error_list is None and plain.issues == ()


def _two_asks(to_party_signed: bool, next_signed: bool) -> m.Envelope:
    env = message(ack_signed=to_party_signed)
    hop = m.AckRequested(signed=next_signed, actor=ACTOR_NEXT_MSH)
    return replace(env, ack_requested=(*env.ack_requested, hop), signatures=(m.Signature(SIGNATURE),))


@pytest.mark.parametrize(("to_party_signed", "next_signed"), [(True, False), (False, True), (True, True)])
def test_each_acknowledgment_is_signed_as_its_own_ack_requested_asks(to_party_signed: bool, next_signed: bool) -> None:
    # ebMS2 §6.3.1.2, §10.1.3: two AckRequested elements, each answered by its own Acknowledgment, signed as
    # that element asks; §10.1.4: a signed one aimed at the next MSH goes by itself.
    receiver = Receiver()
    decision = receiver.get(_two_asks(to_party_signed, next_signed), next_id=lambda: "hop@b.example")
    asked = {ACTOR_TO_PARTY_MSH: to_party_signed, ACTOR_NEXT_MSH: next_signed}
    assert decision.signed_actors == {actor for actor, signed in asked.items() if signed}
    acks = acknowledgments_sent(decision)
    assert sorted(a.actor or ACTOR_TO_PARTY_MSH for e in acks for a in e.acknowledgments) == sorted(asked)
    for reply in acks:
        for element in reply.acknowledgments:
            signed = asked[element.actor or ACTOR_TO_PARTY_MSH]
            # §6.3.2.5: the Reference list is REQUIRED for the signed one (copied from the message's signature).
            assert (len(element.references) == 2) is signed
        if next_signed:
            assert [a.actor for a in reply.acknowledgments] in ([ACTOR_NEXT_MSH], [ACTOR_TO_PARTY_MSH])
        # The reply is signed exactly when it carries an Acknowledgment asked for signed.
        assert decision.signs(reply) is any(asked[a.actor or ACTOR_TO_PARTY_MSH] for a in reply.acknowledgments)


def test_two_signed_acknowledgments_asked_of_an_msh_that_cannot_sign_are_both_reported_and_unsigned() -> None:
    decision = Receiver().get(_two_asks(True, True), next_id=lambda: "hop@b.example", can_sign=False)
    assert decision.signed_actors == frozenset()
    acks = acknowledgments_sent(decision)
    assert acks and all(a.error_list is not None for a in acks)
    assert all(e.references == () for a in acks for e in a.acknowledgments)


# --- signals ------------------------------------------------------------------------------------------


def signal(action: str, *, ref: str | None = None, **parts: object) -> m.Envelope:
    """An MSH signal from B to A (the answer side of the agreement)."""
    header = m.MessageHeader(
        from_party=B,
        to_party=A,
        cpa_id="cpa-a-b",
        conversation_id="conv-1",
        service=m.Service(SERVICE_MSH),
        action=action,
        message_data=m.MessageData(f"{action}-1@b.example", NOW, ref_to_message_id=ref),
    )
    return m.Envelope(message_header=header, **parts)  # type: ignore[arg-type]


def test_an_inbound_acknowledgment_is_routed_to_the_sending_machine() -> None:
    ack = m.Acknowledgment(NOW, MID, B)
    decision = Receiver().get(signal("Acknowledgment", ref=MID, acknowledgments=(ack,)))
    assert decision.actions == (OutboundEvent(MID, AcknowledgmentReceived(MID, ACTOR_TO_PARTY_MSH), B, "cpa-a-b"),)


def test_an_inbound_error_message_is_routed_and_never_answered() -> None:
    issue = Issue(ErrorCode.INCONSISTENT, Severity.ERROR, "no")
    env = message()
    assert env.message_header is not None
    err = error_message(issue, in_reply_to=env.message_header, message_id="e1@b.example", timestamp=NOW)
    decision = Receiver().get(err)
    (routed,) = decision.actions
    assert isinstance(routed, OutboundEvent) and isinstance(routed.event, ErrorReceived)
    assert routed.message_id == MID


def test_a_signal_failing_the_check_is_discarded_not_answered() -> None:
    ack = m.Acknowledgment(NOW, MID, B)
    env = replace(signal("Acknowledgment", ref=MID, acknowledgments=(ack,)))
    assert env.message_header is not None
    env = replace(env, message_header=replace(env.message_header, cpa_id="unknown"))
    (discard,) = Receiver().get(env).actions
    assert isinstance(discard, Discard) and "CPAId" in discard.reason


def test_an_acknowledgment_piggybacked_on_a_business_message_is_routed_too() -> None:
    env = replace(message(), acknowledgments=(m.Acknowledgment(NOW, "earlier@b.example", A),))
    decision = Receiver().get(env)
    assert kinds(decision) == ["StoreInbound", "SendAsync", "OutboundEvent"]


def test_ping_is_answered_with_pong() -> None:
    receiver = Receiver()
    decision = receiver.get(signal("Ping"))
    (reply,) = decision.actions
    assert isinstance(reply, SendAsync)
    pong = reply.envelope
    assert pong.message_header is not None
    assert (pong.message_header.action, pong.message_header.message_data.ref_to_message_id) == (
        "Pong",
        "Ping-1@b.example",
    )
    assert (pong.message_header.from_party, pong.message_header.to_party) == (A, B)
    assert receiver.stored == {}
    assert schema_valid(pong) == pong


# --- the Message Status Service (ebMS2 §7), answering side ---------------------------------------------

RECEIVED_AT = NOW - timedelta(hours=1)
B_TEXT = "urn:duns:987654321"  # party_text of B, the requester in these tests
A_TEXT = "urn:duns:123456789"
STRANGER = m.Party((m.PartyId("555555555", "urn:duns"),))


def queried(held: Held = Held.RECEIVED, **kw: object) -> QueriedMessage:
    """MID as the store holds it: received from B under cpa-a-b (whose parties are A and B)."""
    facts: dict[str, object] = {
        "from_party": B_TEXT,
        "to_party": A_TEXT,
        "agreement_parties": frozenset({A_TEXT, B_TEXT}),
        **kw,
    }
    return QueriedMessage(MID, held, RECEIVED_AT, **facts)  # type: ignore[arg-type]


def status_reply(facts: QueriedMessage | None, *, requester: m.Party = B) -> SendAsync:
    """The reply to a StatusRequest about MID from ``requester``, which passed the agreement check of its
    own request (it is a party of an agreement with us: here, as if it were B under cpa-a-b)."""
    request = signal("StatusRequest", status_request=m.StatusRequest(MID))
    result = check(request, CPA, now=NOW)
    assert request.message_header is not None and result.ok
    request = replace(request, message_header=replace(request.message_header, from_party=requester))
    (reply,) = Receiver().take(request, result, queried=facts).actions
    assert isinstance(reply, SendAsync)
    return reply


def answer(facts: QueriedMessage | None, *, requester: m.Party = B) -> m.StatusResponse | None:
    return status_reply(facts, requester=requester).envelope.status_response


def test_a_status_request_is_answered_with_a_status_response_message() -> None:
    reply = status_reply(queried())
    header = reply.envelope.message_header
    assert header is not None
    # ebMS2 §7.1.2: From the responder, To "set to the value of the From element in the Message Status Request
    # message", Service urn:oasis:names:tc:ebxml-msg:service, Action StatusResponse, and MessageData's
    # RefToMessageId "identifies the Message Status Request message".
    assert (header.from_party, header.to_party) == (A, B)
    assert (header.service.value, header.action) == ("urn:oasis:names:tc:ebxml-msg:service", "StatusResponse")
    assert header.message_data.ref_to_message_id == "StatusRequest-1@b.example"
    # ebMS2 §7.3.1: the StatusResponse's RefToMessageId "SHALL contain the MessageId of the message whose status
    # is being queried"; §7.1.2: "with no ebXML Payload Container".
    response = reply.envelope.status_response
    assert response is not None and response.ref_to_message_id == MID
    assert reply.envelope.manifest is None
    assert schema_valid(reply.envelope) == reply.envelope


def test_a_message_received_and_not_yet_handed_to_the_application_is_received_with_its_time() -> None:
    # ebMS2 §7.3.3 Received: "has been received by the MSH"; §7.3.2: the Timestamp "contains the time the
    # message, whose status is being reported, was received".
    assert answer(queried()) == m.StatusResponse(MID, m.MessageStatus.RECEIVED, RECEIVED_AT)


def test_a_message_handed_to_the_application_is_processed() -> None:
    # ebMS2 §7.3.3 Processed: "has been processed by the MSH" (here: delivered to the application).
    assert answer(queried(delivered_to_app=True)) == m.StatusResponse(MID, m.MessageStatus.PROCESSED, RECEIVED_AT)


def test_an_unknown_message_is_not_recognized_without_a_timestamp() -> None:
    # ebMS2 §7.3.3 NotRecognized: "is not recognized"; §7.3.2: the Timestamp "MUST be omitted if the message
    # ... is NotRecognized".
    assert answer(None) == m.StatusResponse(MID, m.MessageStatus.NOT_RECOGNIZED, None)
    assert answer(None, requester=STRANGER) == m.StatusResponse(MID, m.MessageStatus.NOT_RECOGNIZED, None)


def test_a_requester_that_is_no_party_of_the_messages_agreement_is_unauthorized_without_a_timestamp() -> None:
    # ebMS2 §7.1.3: a party "MAY ignore the message instead of responding with messageStatus set to
    # UnAuthorized if they consider the sender of the message to be unauthorized": this MSH answers
    # UnAuthorized; §7.3.2: the Timestamp "MUST be omitted if ... the request was UnAuthorized".
    assert answer(queried(), requester=STRANGER) == m.StatusResponse(MID, m.MessageStatus.UN_AUTHORIZED, None)
    assert answer(queried(delivered_to_app=True), requester=STRANGER) == m.StatusResponse(
        MID, m.MessageStatus.UN_AUTHORIZED, None
    )
    # Any party of the message's agreement may ask, not only its sender.
    wider = queried(agreement_parties=frozenset({A_TEXT, B_TEXT, "urn:duns:555555555"}))
    assert answer(wider, requester=STRANGER) == m.StatusResponse(MID, m.MessageStatus.RECEIVED, RECEIVED_AT)


def test_without_its_agreement_loaded_the_messages_own_parties_may_ask() -> None:
    unloaded = queried(agreement_parties=None)
    assert answer(unloaded) == m.StatusResponse(MID, m.MessageStatus.RECEIVED, RECEIVED_AT)
    assert answer(unloaded, requester=STRANGER) == m.StatusResponse(MID, m.MessageStatus.UN_AUTHORIZED, None)


def test_an_intermediary_answers_forwarded_to_the_messages_from_party_only() -> None:
    # ebMS2 §7.3.3 Forwarded: "has been forwarded by the MSH to another MSH"; the requester is the party that
    # sent the message (§7.1.1), named by the forwarded message's own header (the intermediary may hold no
    # agreement covering it).
    forwarded = queried(Held.FORWARDED, agreement_parties=None, to_party="urn:duns:555555555")
    assert answer(forwarded) == m.StatusResponse(MID, m.MessageStatus.FORWARDED, RECEIVED_AT)
    # Its To party, or anyone else, did not send it: UnAuthorized, without a Timestamp (§7.3.2).
    assert answer(forwarded, requester=STRANGER) == m.StatusResponse(MID, m.MessageStatus.UN_AUTHORIZED, None)


@pytest.mark.parametrize(
    "extra",
    [
        {"manifest": m.Manifest((m.Reference("cid:x"),))},
        {"status_response": m.StatusResponse("other@a.example", m.MessageStatus.RECEIVED)},
        {"error_list": m.ErrorList((m.Error("Inconsistent", m.Severity.WARNING),), m.Severity.WARNING)},
    ],
    ids=["Manifest", "StatusResponse", "ErrorList"],
)
def test_a_status_request_with_an_element_it_must_not_come_with_is_refused(extra: dict[str, object]) -> None:
    # ebMS2 §7.2.3: "A StatusRequest element MUST NOT be present with ... a Manifest element, a StatusResponse
    # element, an ErrorList element".
    request = signal("StatusRequest", status_request=m.StatusRequest(MID), **extra)
    _reject, errors = refusal(Receiver().get(request, queried=queried()))
    assert ("Inconsistent", "Error", "//Body/StatusRequest") in errors


def test_a_status_request_without_its_status_request_element_is_answered_with_an_error() -> None:
    # ebMS2 §7.1.1: the Message Status Request message has "a StatusRequest element"; §7.1.3: "Parties who
    # receive a Message Status Request message SHOULD always respond to the message": refused, not ignored.
    _reject, errors = refusal(Receiver().get(signal("StatusRequest"), queried=queried()))
    assert errors == [("Inconsistent", "Error", "//Header/MessageHeader/Action")]


def test_a_status_response_with_an_element_it_must_not_come_with_is_discarded() -> None:
    # ebMS2 §7.3.5: StatusResponse "MUST NOT be present with ... a Manifest element, a StatusRequest element, an
    # ErrorList element with a highestSeverity attribute set to Error"; an answer is never answered (§4.2.4.1).
    response = m.StatusResponse(MID, m.MessageStatus.RECEIVED)
    manifest = m.Manifest((m.Reference("cid:x"),))
    (discard,) = (
        Receiver()
        .get(signal("StatusResponse", ref="ours@a.example", status_response=response, manifest=manifest))
        .actions
    )
    assert isinstance(discard, Discard) and "§7.3.5" in discard.reason
    error = m.ErrorList((m.Error("Inconsistent", m.Severity.ERROR),), m.Severity.ERROR)
    (discard,) = (
        Receiver()
        .get(signal("StatusResponse", ref="ours@a.example", status_response=response, error_list=error))
        .actions
    )
    assert isinstance(discard, Discard)
    # A Warning ErrorList is allowed beside it.
    warning = m.ErrorList((m.Error("Inconsistent", m.Severity.WARNING),), m.Severity.WARNING)
    allowed = Receiver().get(
        signal("StatusResponse", ref="ours@a.example", status_response=response, error_list=warning)
    )
    assert kinds(allowed) == ["OutboundEvent", "SignalReceived", "OutboundEvent"]  # the ErrorList's, the status


def test_a_status_response_about_our_message_goes_to_its_sending_machine_and_to_whoever_asked() -> None:
    # ebMS2 §7.3.1: MessageData/RefToMessageId names our StatusRequest, StatusResponse/RefToMessageId our message.
    response = m.StatusResponse(MID, m.MessageStatus.RECEIVED, NOW)
    env = signal("StatusResponse", ref="ours@a.example", status_response=response)
    got, routed = Receiver().get(env).actions
    assert routed == OutboundEvent(
        MID, StatusReported(m.MessageStatus.RECEIVED), B, "cpa-a-b", in_reply_to="ours@a.example"
    )
    assert got == SignalReceived("StatusResponse", "ours@a.example", env)


def test_a_pong_goes_to_whoever_pinged() -> None:
    # ebMS2 §8.2: the Pong's RefToMessageId identifies "the MSH Ping message".
    env = signal("Pong", ref="ours@a.example")
    (got,) = Receiver().get(env).actions
    assert got == SignalReceived("Pong", "ours@a.example", env)


def test_a_status_response_is_written_as_the_specifications_sample() -> None:
    # ebMS2 §7.3.4: <eb:StatusResponse eb:version="2.0" eb:messageStatus="Received"> with RefToMessageId and
    # Timestamp children; §7.3.2: no Timestamp for NotRecognized.
    root = parse_xml(serialise_envelope(status_reply(queried()).envelope))
    (element,) = root.iter(f"{{{EB}}}StatusResponse")
    assert element.get(f"{{{EB}}}messageStatus") == "Received" and element.get(f"{{{EB}}}version") == "2.0"
    assert [child.tag.split("}")[1] for child in element] == ["RefToMessageId", "Timestamp"]
    assert element.findtext(f"{{{EB}}}RefToMessageId") == MID
    root = parse_xml(serialise_envelope(status_reply(None).envelope))
    (element,) = root.iter(f"{{{EB}}}StatusResponse")
    assert element.get(f"{{{EB}}}messageStatus") == "NotRecognized"
    assert [child.tag.split("}")[1] for child in element] == ["RefToMessageId"]


def test_a_ping_from_a_party_outside_the_agreement_gets_no_pong() -> None:
    # ebMS2 §8.3: "recipients of a MSH Ping MAY ignore the message if they consider that the sender of the
    # message received is unauthorized": a Ping that fails the agreement check is refused, never answered with
    # a Pong (the refusal says why, as for any message from an unknown party).
    ping = signal("Ping")
    assert ping.message_header is not None
    stranger = replace(ping, message_header=replace(ping.message_header, from_party=STRANGER))
    (reject,) = Receiver().get(stranger).actions
    assert isinstance(reject, Reject)
    assert reject.error_message.message_header is not None
    assert reject.error_message.message_header.action == "MessageError"


def test_signals_are_never_acknowledged() -> None:
    lax = channel("B", channel_id="B_msh", retries=None, ack_requested=PerMessage.PER_MESSAGE)
    env = replace(signal("Ping"), ack_requested=(m.AckRequested(),))
    decision = Receiver(make_cpa(b_msh=lax, **PER_MESSAGE)).get(env)  # type: ignore[arg-type]
    assert acknowledgments_sent(decision) == []
    assert kinds(decision) == ["SendAsync"]


def test_now_must_be_timezone_aware() -> None:
    env = message()
    with pytest.raises(ValueError, match="timezone-aware"):
        receive(
            env, check_result=check(env, CPA, now=NOW), duplicate=None, now=NOW.replace(tzinfo=None), new_message_id="x"
        )


# --- actors (ebMS2 §4.3.1, §6.3.1.1) -------------------------------------------------------------------


def refusal(decision: InboundDecision) -> tuple[Reject, list[tuple[str, str, str | None]]]:
    """The decision's only action, a Reject, and its errors as (errorCode, severity, location)."""
    (reject,) = decision.actions
    assert isinstance(reject, Reject)
    err = reject.error_message
    assert err.message_header is not None and err.message_header.action == "MessageError"
    assert err.error_list is not None and err.error_list.highest_severity is Severity.ERROR
    assert schema_valid(err) == err
    return reject, [(e.error_code, e.severity.value, e.location) for e in err.error_list.errors]


def test_a_sync_reply_not_aimed_at_soap_next_is_refused_at_its_actor() -> None:
    receiver = Receiver(SYNC_CPA)
    env = replace(message(sync_reply=True), sync_reply=m.SyncReply(actor=ACTOR_TO_PARTY_MSH))
    decision = receiver.get(env)
    reject, errors = refusal(decision)
    assert errors == [("Inconsistent", "Error", "//Header/SyncReply/@actor")]
    assert SOAP_ACTOR_NEXT in decision.issues[0].description
    assert reject.sync  # the sender asked for the connection to stay open: it waits there
    assert not decision.delivers and receiver.stored == {}


@pytest.mark.parametrize("actor", ["urn:oasis:names:tc:ebxml-msg:actor:fromPartyMSH", "", SOAP_ACTOR_NEXT])
def test_an_ack_requested_aimed_at_neither_msh_actor_is_refused_at_its_actor(actor: str) -> None:
    receiver = Receiver()
    decision = receiver.get(message(ack_actor=actor))
    reject, errors = refusal(decision)
    assert errors == [("Inconsistent", "Error", "//Header/AckRequested/@actor")]
    assert not reject.sync and reject.to_endpoint == EndpointRef("cpa-a-b", B, A, SERVICE_MSH, "MessageError")
    assert not decision.delivers and receiver.stored == {} and acknowledgments_sent(decision) == []


def test_an_actor_error_is_reported_with_the_agreements_errors() -> None:
    decision = Receiver().get(message(action="Unknown", ack_actor="urn:x:nobody"))
    _, errors = refusal(decision)
    assert errors == [
        ("ValueNotRecognized", "Error", "//Header/MessageHeader/Action"),
        ("Inconsistent", "Error", "//Header/AckRequested/@actor"),
    ]


@pytest.mark.parametrize("actor", [None, ACTOR_TO_PARTY_MSH, ACTOR_NEXT_MSH])
def test_every_actor_the_specification_allows_is_taken(actor: str | None) -> None:
    decision = Receiver().get(message(ack_actor=actor))
    assert decision.delivers and decision.issues == ()
    # ebMS2 §10.1.3: an Acknowledgment for each AckRequested, with its actor (a single hop is both MSHs).
    sent = acknowledgments_sent(decision)
    assert len(sent) == 1
    assert [a.actor for a in sent[0].acknowledgments] == [actor or ACTOR_TO_PARTY_MSH]


def test_a_signal_with_an_actor_error_is_discarded_not_answered() -> None:
    ack = m.Acknowledgment(NOW, MID, B)
    env = signal("Acknowledgment", ref=MID, acknowledgments=(ack,), ack_requested=(m.AckRequested(actor="urn:x"),))
    (discard,) = Receiver().get(env).actions
    assert isinstance(discard, Discard) and "//Header/AckRequested/@actor" in discard.reason


# --- a duplicate is the same MessageId (ebMS2 §6.5.6), whatever else it carries ------------------------

D1 = DIGEST_PREFIX + "1" * 64
D2 = DIGEST_PREFIX + "2" * 64


def test_the_digest_is_stored_with_the_message() -> None:
    decision = Receiver().get(message(), digest=D1)
    store = decision.actions[0]
    assert isinstance(store, StoreInbound) and store.digest == D1


@pytest.mark.parametrize("sync", [True, False])
def test_a_copy_with_other_content_is_a_duplicate_answered_as_the_first_and_recorded(sync: bool) -> None:
    # ebMS2 §6.5.6: 'a "duplicate message" - a message containing the same MessageId as a previously received
    # message'; §6.5.2 1: generate the Acknowledgment (§6.5.5: the first response) and "MUST NOT deliver the
    # message to the application interface".
    receiver = Receiver(SYNC_CPA if sync else CPA)
    first = receiver.get(message(sync_reply=sync), digest=D1)
    stored_before = dict(receiver.stored)
    other = receiver.get(message(sync_reply=sync), digest=D2)
    record, resend = other.actions
    assert record == ConflictingDuplicate(MID, D1, D2)
    assert isinstance(resend, ResendStoredAck) and resend.acknowledgment == first.stored_acknowledgment
    assert resend.sync is sync
    assert other.duplicate and not other.delivers
    assert receiver.stored == stored_before and receiver.delivered[MID] == 1


def test_a_retry_with_a_regenerated_timestamp_is_a_duplicate_not_a_refusal() -> None:
    # ebMS2 §6.5.6: the MessageId decides; a partner's retry that differs in a header byte (its Timestamp)
    # gets the first response and is not delivered again.
    receiver = Receiver()
    first = receiver.get(message(), digest=D1)
    retry = receiver.get(message(timestamp=NOW + timedelta(seconds=30)), digest=D1)
    (resend,) = retry.actions
    assert isinstance(resend, ResendStoredAck) and resend.acknowledgment == first.stored_acknowledgment
    assert receiver.delivered[MID] == 1


def test_a_copy_with_other_content_and_no_acknowledgment_asked_is_ignored_and_recorded() -> None:
    # ebMS2 §6.5.2 "no AckRequested" 1: "If there is a DuplicateElimination element, and the message is a
    # duplicate, then do nothing." The conflict is still recorded for the operator.
    receiver = Receiver()
    receiver.get(message(ack_requested=False), digest=D1)
    assert kinds(receiver.get(message(ack_requested=False), digest=D1)) == ["Discard"]
    assert kinds(receiver.get(message(ack_requested=False), digest=D2)) == ["ConflictingDuplicate", "Discard"]
    assert receiver.delivered[MID] == 1


def test_a_copy_with_other_content_past_its_time_to_live_is_still_answered_from_the_store() -> None:
    receiver = Receiver()
    ttl = NOW + timedelta(hours=2)
    first = receiver.get(message(time_to_live=ttl), digest=D1)
    late = receiver.get(message(time_to_live=ttl), now=ttl + timedelta(minutes=1), digest=D2)
    record, resend = late.actions
    assert isinstance(record, ConflictingDuplicate)
    assert isinstance(resend, ResendStoredAck) and resend.acknowledgment == first.stored_acknowledgment


def test_digests_of_another_kind_are_not_compared() -> None:
    for stored_digest in (None, "sha256:" + "1" * 64):
        stored = StoredInbound(MID, b"<stored ack/>", True, digest=stored_digest)
        env = message()
        decision = receive(
            env, check_result=check(env, CPA, now=NOW), duplicate=stored, now=NOW, new_message_id="x", digest=D2
        )
        assert kinds(decision) == ["ResendStoredAck"]


def test_without_duplicate_elimination_other_content_is_simply_another_copy() -> None:
    """ebMS2 §6.6 rows 6 and 8: every copy is delivered; there is no first copy to compare with."""
    receiver = Receiver()
    receiver.get(message(duplicate_elimination=False), digest=D1)
    decision = receiver.get(message(duplicate_elimination=False), digest=D2)
    assert kinds(decision) == ["StoreInbound", "SendAsync"] and decision.delivers


# --- the To party as the next MSH too (ebMS2 §10.1.3) -------------------------------------------------


def both_asked(message_id: str = MID, **kw: object) -> m.Envelope:
    env = message(message_id, **kw)
    hop = m.AckRequested(actor=ACTOR_NEXT_MSH)
    return replace(env, ack_requested=(*env.ack_requested, hop))


def _counter_ids() -> object:
    numbers = iter(range(1, 1000))
    return lambda: f"extra-{next(numbers)}@b.example"


def test_both_acknowledgments_go_apart_the_hop_one_on_the_connection() -> None:
    receiver = Receiver()
    decision = receiver.get(both_asked(), next_id=_counter_ids())
    assert kinds(decision) == ["StoreInbound", "SendAsync", "ReplySync"]
    store, e2e, hop = decision.actions
    assert isinstance(store, StoreInbound) and isinstance(e2e, SendAsync) and isinstance(hop, ReplySync)
    # The stored first response is the end-to-end acknowledgment; the hop one is made afresh.
    assert store.record_ack is e2e.envelope
    assert [a.actor for a in e2e.envelope.acknowledgments] == [ACTOR_TO_PARTY_MSH]
    assert [a.actor for a in hop.envelope.acknowledgments] == [ACTOR_NEXT_MSH]
    assert hop.envelope.message_id == "extra-1@b.example"
    assert decision.sync_reply is hop.envelope
    schema_valid(hop.envelope)


def test_a_duplicate_gets_the_stored_end_to_end_acknowledgment_and_a_new_hop_one() -> None:
    receiver = Receiver()
    ids = _counter_ids()
    first = receiver.get(both_asked(), next_id=ids)
    again = receiver.get(both_asked(), next_id=ids)
    assert receiver.delivered[MID] == 1
    assert kinds(again) == ["ResendStoredAck", "ReplySync"]
    resent, hop = again.actions
    assert isinstance(resent, ResendStoredAck) and not resent.sync
    assert resent.acknowledgment is first.stored_acknowledgment
    assert isinstance(hop, ReplySync) and hop.envelope.acknowledgments[0].actor == ACTOR_NEXT_MSH


def test_both_acknowledgments_on_the_connection_are_one_message() -> None:
    receiver = Receiver(cpa=SYNC_CPA)
    env = replace(both_asked(), sync_reply=None)
    # The agreement asks for signals on the connection; under the header reading the header's absent
    # SyncReply does not count against it, so both go back synchronously, in one message.
    result = check(env, SYNC_CPA, now=NOW, reading=__import__("cpa.precedence").precedence.Reading.HEADER)
    decision = receiver.take(env, result, sync_reply_requested=True)
    sent = acknowledgments_sent(decision)
    assert len(sent) == 1
    assert sorted(a.actor or "" for a in sent[0].acknowledgments) == [ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH]


def test_sync_reply_with_a_next_msh_ack_requested_is_refused() -> None:
    env = replace(both_asked(), sync_reply=m.SyncReply())
    decision = Receiver().get(env)
    _, errors = refusal(decision)
    assert ("Inconsistent", "Error", "//Header/AckRequested/@actor") in errors


def test_two_ack_requested_for_one_actor_are_refused() -> None:
    env = message(ack_actor=None)
    env = replace(env, ack_requested=(*env.ack_requested, m.AckRequested(actor=ACTOR_TO_PARTY_MSH)))
    _, errors = refusal(Receiver().get(env))
    assert ("Inconsistent", "Error", "//Header/AckRequested") in errors


def test_a_relayed_signal_is_routed_as_relayed() -> None:
    ack = m.Acknowledgment(NOW, MID, B, actor=ACTOR_NEXT_MSH)
    env = signal("Acknowledgment", ref=MID, acknowledgments=(ack,))
    decision = receive(
        env, check_result=check(env, CPA, now=NOW), duplicate=None, now=NOW, new_message_id="x@b", relayed=True
    )
    routed = [a for a in decision.actions if isinstance(a, OutboundEvent)]
    assert [r.relay for r in routed] == [True]
