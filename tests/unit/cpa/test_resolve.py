"""Sending parameters from an agreement (cpa.resolve) and the refusals, on factory-built agreements."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from cpa.duration import XsDuration
from cpa.model import (
    ActionBinding,
    CollaborationRole,
    ConversationConstraints,
    Endpoint,
    EndpointType,
    MessageOrderSemantics,
    PartyId,
    PerMessage,
    ServiceBinding,
    Status,
    SyncReplyMode,
)
from cpa.registry import CpaRegistry
from cpa.resolve import (
    AgreementRefused,
    DocExchangeParameters,
    Exchange,
    MessagingParameters,
    PartyParameters,
    RefusalReason,
    ReliableMessagingParameters,
    SendingParameters,
    TransportParameters,
    at_least_retry_interval,
    clear_cache,
    party_keys,
    resolve,
)
from msh.ebms import model as m
from msh.ebms.namespaces import ACTOR_TO_PARTY_MSH, SERVICE_MSH
from tests.support.cpa_factory import A_ID, AES128, B_ID, END, NOW, RSA_SHA256, SERVICE, START, channel, make_cpa, xs


def send(cpa: object, **kw: object) -> SendingParameters:
    """resolve() of the exchange A -> B NewOrder at NOW, with ``kw`` changing the exchange (its fields),
    ``now`` or ``first_resend_timeouts``."""
    now, timeouts = kw.pop("now", NOW), kw.pop("first_resend_timeouts", None)
    args: dict[str, object] = {"from_party": A_ID, "to_party": B_ID, "service": SERVICE, "action": "NewOrder"}
    args.update(kw)
    return resolve(cpa, Exchange(**args), now=now, first_resend_timeouts=timeouts)  # type: ignore[arg-type]


def rm_of(p: SendingParameters) -> ReliableMessagingParameters:
    assert p.reliable_messaging is not None
    return p.reliable_messaging


def refused(cpa: object, reason: RefusalReason, **kw: object) -> AgreementRefused:
    with pytest.raises(AgreementRefused) as info:
        send(cpa, **kw)
    assert info.value.reason is reason
    return info.value


def test_default_agreement_resolves_every_field() -> None:
    cc = ConversationConstraints(invocation_limit=10, concurrent_conversations=2)
    p = send(make_cpa(conversation_constraints=cc))
    assert p.cpaid == "cpa-a-b"
    assert p.from_party == PartyParameters("Alpha", (A_ID,), "Buyer")
    assert p.to_party == PartyParameters("Beta", (B_ID,), "Seller")
    assert (p.service, p.service_type, p.action) == (SERVICE, None, "NewOrder")
    assert p.conversation_constraints == cc
    assert p.transport == TransportParameters(
        endpoint_url="http://b.example:8443/msh",
        protocol="HTTP",
        protocol_version="1.1",
        access_authentication=None,
        tls_protocol=None,
        tls_protocol_version=None,
        tls_client_certificate=None,
        tls_server_trust=None,
        tls_server_certificate=None,
    )
    assert not p.transport.uses_tls
    assert p.reliable_messaging == ReliableMessagingParameters(
        retries=3,
        retry_interval=xs(timedelta(minutes=10)),
        first_resend_timeout=xs(timedelta(minutes=10)),
        message_order_semantics=MessageOrderSemantics.NOT_GUARANTEED,
    )
    assert p.doc_exchange == DocExchangeParameters(xs(timedelta(hours=1)), signing=None, encryption=None)
    assert p.messaging == MessagingParameters(
        sync_reply_mode=SyncReplyMode.NONE,
        ack_requested=PerMessage.ALWAYS,
        ack_signature_requested=PerMessage.NEVER,
        duplicate_elimination=PerMessage.ALWAYS,
        actor=ACTOR_TO_PARTY_MSH,
        next_msh_ack_requested=PerMessage.NEVER,
        next_msh_ack_signature_requested=PerMessage.NEVER,
    )
    assert (p.sending_channel_id, p.receiving_channel_id) == ("A_channel", "B_channel")
    assert not p.msh_signal


def test_the_reverse_direction_uses_the_other_parties_channels() -> None:
    p = send(make_cpa(), from_party=B_ID, to_party=A_ID, action="OrderResponse")
    assert (p.from_party.role, p.to_party.role, p.transport.endpoint_url) == (
        "Seller",
        "Buyer",
        "http://a.example:8443/msh",
    )
    assert (p.sending_channel_id, p.receiving_channel_id) == ("B_channel", "A_channel")


def test_messaging_characteristics_come_from_the_sending_channel() -> None:
    a = channel(
        "A",
        sync_reply_mode=SyncReplyMode.SIGNALS_AND_RESPONSE,
        ack_requested=PerMessage.PER_MESSAGE,
        ack_signature_requested=PerMessage.ALWAYS,
        duplicate_elimination=PerMessage.NEVER,
        actor=None,
        retries=7,
        retry_interval=timedelta(seconds=30),
        message_order=MessageOrderSemantics.GUARANTEED,
    )
    b = channel("B", sync_reply_mode=SyncReplyMode.NONE, retries=1, retry_interval=timedelta(hours=2))
    p = send(make_cpa(a_channel=a, b_channel=b))
    mc, rm = p.messaging, p.reliable_messaging
    assert mc.sync_reply_mode is SyncReplyMode.SIGNALS_AND_RESPONSE
    assert (mc.ack_requested, mc.ack_signature_requested, mc.duplicate_elimination, mc.actor) == (
        PerMessage.PER_MESSAGE,
        PerMessage.ALWAYS,
        PerMessage.NEVER,
        None,
    )
    assert rm is not None and (rm.retries, rm.retry_interval) == (7, xs(timedelta(seconds=30)))
    assert rm.message_order_semantics is MessageOrderSemantics.GUARANTEED


def test_no_reliable_messaging_means_no_retries() -> None:
    p = send(make_cpa(retries=None))
    assert p.reliable_messaging is None
    assert p.time_to_live_floor(NOW) == NOW
    # An MSH setting for the channel gives no resends either.
    assert send(make_cpa(retries=None), first_resend_timeouts={"A_channel": timedelta(minutes=1)}) == p


def test_time_to_live_floor_is_retries_plus_one_intervals() -> None:
    p = send(make_cpa(retries=3, retry_interval=timedelta(minutes=10)))
    assert p.time_to_live_floor(NOW) == NOW + timedelta(minutes=40)
    assert p.reliable_messaging is not None and p.reliable_messaging.time_to_live_floor(NOW) == p.time_to_live_floor(
        NOW
    )


def test_time_to_live_floor_with_a_month_interval_adds_months_as_xml_schema_does() -> None:
    # ebMS2 §6.4.5 with RetryInterval P1M and Retries 2: Timestamp + P3M, the day pinned to the month's end.
    p = send(make_cpa(retries=2, retry_interval=XsDuration.parse("P1M")))
    assert p.reliable_messaging is not None and p.reliable_messaging.retry_interval == XsDuration(months=1)
    assert p.time_to_live_floor(datetime(2025, 11, 30, 8, tzinfo=UTC)) == datetime(2026, 2, 28, 8, tzinfo=UTC)
    # Past the year 9999 the floor is the latest instant there is: no TimeToLive can be after it.
    assert p.time_to_live_floor(datetime(9999, 11, 1, tzinfo=UTC)) == datetime.max.replace(tzinfo=UTC)


def test_persist_duration_prefers_the_receivers_binding() -> None:
    b = channel("B", persist_duration=timedelta(hours=6))
    a = channel("A", sender_persist_duration=timedelta(hours=2))
    assert send(make_cpa(a_channel=a, b_channel=b)).doc_exchange.persist_duration == xs(timedelta(hours=6))
    b_without = channel("B", persist_duration=None)
    assert send(make_cpa(a_channel=a, b_channel=b_without)).doc_exchange.persist_duration == xs(timedelta(hours=2))
    a_without = channel("A", sender_persist_duration=None)
    assert send(make_cpa(a_channel=a_without, b_channel=b_without)).doc_exchange.persist_duration is None


def test_first_resend_timeout_override_per_sending_channel() -> None:
    cpa = make_cpa()
    rm = rm_of(send(cpa, first_resend_timeouts={"A_channel": timedelta(minutes=45), "B_channel": timedelta(hours=9)}))
    assert rm.first_resend_timeout == xs(timedelta(minutes=45))
    assert rm.retry_interval == xs(timedelta(minutes=10))
    assert rm_of(send(cpa, first_resend_timeouts={"B_channel": timedelta(hours=9)})).first_resend_timeout == xs(
        timedelta(minutes=10)
    )
    # The cached, unoverridden value is not changed by an override.
    assert rm_of(send(cpa)).first_resend_timeout == xs(timedelta(minutes=10))


def test_the_first_resend_never_comes_before_the_retry_interval() -> None:
    # ebMS2 §6.4.4: "RetryInterval applies to the time between sending of the original message and the first
    # retry as well as the time between retries": a shorter MSH setting does not shorten it.
    rm = rm_of(send(make_cpa(), first_resend_timeouts={"A_channel": timedelta(seconds=45)}))
    assert rm.first_resend_timeout == rm.retry_interval == xs(timedelta(minutes=10))
    assert at_least_retry_interval(xs(timedelta(seconds=45)), XsDuration(months=1)) == XsDuration(months=1)
    assert at_least_retry_interval(xs(timedelta(seconds=45)), None) == xs(timedelta(seconds=45))


def test_https_gives_client_certificate_server_trust_and_server_certificate() -> None:
    t = send(make_cpa(https=True)).transport
    assert t.endpoint_url == "https://b.example:8443/msh"
    assert t.uses_tls
    assert (t.tls_protocol, t.tls_protocol_version) == ("TLS", "1.2")
    assert t.tls_client_certificate is not None and t.tls_client_certificate.cert_id == "A_Client"
    assert t.tls_server_trust is not None and t.tls_server_trust.security_id == "A_TLS"
    assert t.tls_server_certificate is not None and t.tls_server_certificate.cert_id == "B_Server"


def test_signing_and_encryption() -> None:
    dx = send(make_cpa(signing=True, receiver_encryption=True, sender_encryption=True)).doc_exchange
    assert dx.signing is not None
    assert (dx.signing.signature_algorithm, dx.signing.certificate) == (RSA_SHA256, dx.signing.certificate)
    assert dx.signing.certificate is not None and dx.signing.certificate.cert_id == "A_Sign"
    # The receiver's ReceiverDigitalEnvelope (with its certificate) wins over the SenderDigitalEnvelope.
    assert dx.encryption is not None and dx.encryption.certificate is not None
    assert (dx.encryption.encryption_algorithm, dx.encryption.certificate.cert_id) == (AES128, "B_Encrypt")
    q = send(make_cpa(a_channel=channel("A", sender_encryption=True), b_channel=channel("B"))).doc_exchange
    assert q.encryption is not None and q.encryption.security_details is not None
    assert q.encryption.security_details.security_id == "A_Enc"


def test_endpoint_of_type_request_is_preferred_to_all_purpose() -> None:
    eps = (
        Endpoint("http://b.example/any", EndpointType.ALL_PURPOSE),
        Endpoint("http://b.example/req", EndpointType.REQUEST),
    )
    assert send(make_cpa(b_channel=channel("B", endpoints=eps))).transport.endpoint_url == "http://b.example/req"
    only_response = (Endpoint("http://b.example/resp", EndpointType.RESPONSE),)
    e = refused(make_cpa(b_channel=channel("B", endpoints=only_response)), RefusalReason.NO_ENDPOINT)
    assert "B_channel" in str(e) and "add one to the agreement" in str(e)


@pytest.mark.parametrize(
    ("now", "reason", "text"),
    [
        (START - timedelta(seconds=1), RefusalReason.NOT_YET_VALID, "starts at 2025-01-01T00:00:00+00:00"),
        (END, RefusalReason.EXPIRED, "load the renewed agreement"),
        (END + timedelta(days=400), RefusalReason.EXPIRED, "ended at 2027-01-01T00:00:00+00:00"),
    ],
)
def test_outside_the_validity_window_is_refused(now: datetime, reason: RefusalReason, text: str) -> None:
    assert text in str(refused(make_cpa(), reason, now=now))


def test_validity_window_is_start_inclusive() -> None:
    assert send(make_cpa(), now=START).cpaid == "cpa-a-b"
    assert send(make_cpa(), now=END - timedelta(microseconds=1)).cpaid == "cpa-a-b"


def test_status_proposed_is_refused_signed_is_in_force() -> None:
    e = refused(make_cpa(status=Status.PROPOSED), RefusalReason.NOT_AGREED)
    assert "Status 'proposed'" in str(e) and "ebMS2 §3.1.2" in str(e)
    assert e.cpaid == "cpa-a-b"
    assert rm_of(send(make_cpa(status=Status.SIGNED))).retries == 3


def test_parties_must_be_the_agreements_two_parties() -> None:
    e = refused(make_cpa(), RefusalReason.UNKNOWN_PARTY, from_party=PartyId("555", "urn:duns"))
    assert "the From party '555' (type 'urn:duns') is not a party of agreement cpa-a-b" in str(e)
    assert "Alpha ['123456789' (type 'urn:duns')]" in str(e)
    refused(make_cpa(), RefusalReason.UNKNOWN_PARTY, to_party=("987654321", "urn:other"))
    # The type is part of the identity (CPP/A 2.0 §8.4.2): an untyped id does not match a typed one.
    refused(make_cpa(), RefusalReason.UNKNOWN_PARTY, from_party=("123456789", None))
    e = refused(make_cpa(), RefusalReason.UNKNOWN_PARTY, to_party=A_ID)
    assert "name the same party" in str(e)


def test_party_may_be_given_in_any_form() -> None:
    cpa = make_cpa(a_ids=(A_ID, PartyId("urn:alpha")))
    forms: list[object] = [
        A_ID,
        ("123456789", "urn:duns"),
        [("123456789", "urn:duns")],
        m.PartyId("123456789", "urn:duns"),
        m.Party((m.PartyId("urn:alpha"),), "Buyer"),
        (PartyId("unknown", "x"), PartyId("urn:alpha")),
        ("urn:alpha", None),
    ]
    for form in forms:
        assert send(cpa, from_party=form).from_party.name == "Alpha", form
    assert party_keys(m.Party((m.PartyId("1", "t"), m.PartyId("urn:x")))) == (("1", "t"), ("urn:x", None))


def test_an_exchange_holds_the_parties_as_keys_and_is_equal_whatever_form_they_came_in() -> None:
    e = Exchange(A_ID, m.Party((m.PartyId("987654321", "urn:duns"),)), SERVICE, "NewOrder", from_role="Buyer")
    assert (e.from_party, e.to_party) == ((("123456789", "urn:duns"),), (("987654321", "urn:duns"),))
    same = Exchange([("123456789", "urn:duns")], B_ID, SERVICE, "NewOrder", from_role="Buyer")
    assert e == same and hash(e) == hash(same) and len({e, same}) == 1
    assert e != replace(e, to_role="Seller")
    assert replace(e, to_role="Seller").to_party == e.to_party  # replace() keeps the keys as they are


def test_an_exchange_of_a_header_is_the_question_the_header_asks() -> None:
    header = m.MessageHeader(
        from_party=m.Party((m.PartyId("123456789", "urn:duns"),), "Buyer"),
        to_party=m.Party((m.PartyId("987654321", "urn:duns"),), "Seller"),
        cpa_id="cpa-a-b",
        conversation_id="c1",
        service=m.Service(SERVICE, "urn:types:x"),
        action="NewOrder",
        message_data=m.MessageData("m1@a.example", NOW),
    )
    assert Exchange.of_header(header) == Exchange(
        A_ID, B_ID, SERVICE, "NewOrder", service_type="urn:types:x", from_role="Buyer", to_role="Seller"
    )


def test_roles() -> None:
    assert send(make_cpa(), from_role="Buyer", to_role="Seller").from_party.role == "Buyer"
    e = refused(make_cpa(), RefusalReason.UNKNOWN_ROLE, from_role="Seller")
    assert "'Seller' is not a role of Alpha" in str(e) and "its roles: Buyer" in str(e)
    refused(make_cpa(), RefusalReason.UNKNOWN_ROLE, to_role="Carrier")


def test_from_must_can_send_and_to_must_can_receive() -> None:
    e = refused(make_cpa(), RefusalReason.CANNOT_SEND, action="OrderResponse")
    assert "Alpha has no CanSend binding for service 'urn:example:services:ordering' action 'OrderResponse'" in str(e)
    assert "it can send: urn:example:services:ordering/NewOrder" in str(e)
    refused(make_cpa(), RefusalReason.CANNOT_SEND, service="urn:example:other")
    refused(make_cpa(), RefusalReason.CANNOT_SEND, service_type="urn:types:x")
    e = refused(make_cpa(b_receives=()), RefusalReason.CANNOT_RECEIVE)
    assert "Beta has no CanReceive binding" in str(e)


def test_several_service_types_are_ambiguous_unless_one_is_named() -> None:
    def typed_role(prefix: str, role: str, stype: str, send: bool) -> CollaborationRole:
        ch = channel(prefix, channel_id=f"{prefix}_{stype}", retries=9)
        ab = (ActionBinding(f"{prefix}_{stype}", "NewOrder", "pkg", (ch,)),)
        sb = ServiceBinding(SERVICE, stype, can_send=ab if send else (), can_receive=() if send else ab)
        return CollaborationRole("urn:example:process", "1.0", role, sb)

    cpa = make_cpa(
        service_type="urn:types:plain",
        a_extra_roles=(typed_role("A", "Buyer", "urn:types:rm", True),),
        b_extra_roles=(typed_role("B", "Seller", "urn:types:rm", False),),
    )
    e = refused(cpa, RefusalReason.AMBIGUOUS)
    assert "'urn:types:plain', 'urn:types:rm'" in str(e) and "pass service_type=" in str(e)
    typed = send(cpa, service_type="urn:types:rm")
    assert (typed.service_type, rm_of(typed).retries, typed.sending_channel_id, typed.receiving_channel_id) == (
        "urn:types:rm",
        9,
        "A_urn:types:rm",
        "B_urn:types:rm",
    )
    assert send(cpa, service_type="urn:types:plain").sending_channel_id == "A_channel"


@pytest.mark.parametrize(
    ("action", "endpoint"),
    [("Acknowledgment", "resp"), ("MessageError", "err"), ("Ping", "req"), ("StatusResponse", "resp")],
)
def test_msh_signals_use_the_default_msh_channels(action: str, endpoint: str) -> None:
    eps = tuple(
        Endpoint(f"http://b.example/{n}", t)
        for n, t in (("err", EndpointType.ERROR), ("resp", EndpointType.RESPONSE), ("req", EndpointType.REQUEST))
    )
    cpa = make_cpa(b_msh=channel("B", channel_id="B_msh", endpoints=eps, retries=None))
    p = send(cpa, service=SERVICE_MSH, action=action, from_role="Anything")
    assert p.msh_signal
    assert (p.sending_channel_id, p.receiving_channel_id) == ("A_msh", "B_msh")
    assert p.transport.endpoint_url == f"http://b.example/{endpoint}"
    assert (p.from_party.role, p.to_party.role, p.reliable_messaging) == (None, None, None)
    assert p.messaging.ack_requested is PerMessage.NEVER
    refused(cpa, RefusalReason.CANNOT_SEND, service=SERVICE_MSH, action="Dance")


def test_results_are_cached_per_agreement_object() -> None:
    clear_cache()
    cpa = make_cpa()
    first = send(cpa)
    assert send(cpa) is first
    assert send(cpa, from_party=[A_ID]) is first  # the same key, whatever form the party is given in
    # Another agreement object with the same CPAId is not served from the first one's cache entry.
    renewed = make_cpa(retries=8)
    assert rm_of(send(renewed)).retries == 8
    assert rm_of(send(cpa)).retries == 3
    # Refusals are cached too, and still raise each time.
    for _ in range(2):
        refused(cpa, RefusalReason.CANNOT_SEND, action="Nope")
    # The validity window is checked on every call, also on a cached entry.
    refused(cpa, RefusalReason.EXPIRED, now=END)


def test_now_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        send(make_cpa(), now=datetime(2026, 6, 1))


def test_registry_resolve() -> None:
    registry = CpaRegistry([make_cpa()], first_resend_timeouts={"A_channel": timedelta(minutes=15)})
    exchange = Exchange(A_ID, B_ID, SERVICE, "NewOrder")
    p = registry.resolve("cpa-a-b", exchange, now=NOW)
    assert (p.transport.endpoint_url, rm_of(p).first_resend_timeout) == (
        "http://b.example:8443/msh",
        xs(timedelta(minutes=15)),
    )
    with pytest.raises(AgreementRefused, match="no agreement with CPAId 'other' is registered") as info:
        registry.resolve("other", exchange, now=NOW)
    assert info.value.reason is RefusalReason.NOT_REGISTERED
    registry.add(replace(make_cpa(), end=NOW))
    with pytest.raises(AgreementRefused) as info:
        registry.resolve("cpa-a-b", exchange, now=NOW)
    assert info.value.reason is RefusalReason.EXPIRED


def test_refusal_is_a_configuration_error() -> None:
    from msh.errors import ConfigurationError, MshError

    assert issubclass(AgreementRefused, ConfigurationError)
    assert issubclass(AgreementRefused, MshError)
