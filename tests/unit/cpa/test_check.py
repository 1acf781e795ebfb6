"""Inbound header checks against the agreement (cpa.check): codes, severities, locations, effective values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cpa.check import CheckResult, check
from cpa.duration import XsDuration
from cpa.model import MessageOrderSemantics, PartyId, PerMessage, Status, SyncReplyMode
from cpa.precedence import Reading
from cpa.registry import CpaRegistry
from msh.ebms import model as m
from msh.ebms.namespaces import ACTOR_NEXT_MSH, SERVICE_MSH
from msh.errors import ErrorCode, Severity
from tests.support.cpa_factory import A_ID, B_ID, END, NOW, START, channel, make_cpa, make_envelope

VNR, INC, NSUP = ErrorCode.VALUE_NOT_RECOGNIZED, ErrorCode.INCONSISTENT, ErrorCode.NOT_SUPPORTED
TTLX = ErrorCode.TIME_TO_LIVE_EXPIRED
ERR, WARN = Severity.ERROR, Severity.WARNING


def found(result: CheckResult) -> list[tuple[ErrorCode, Severity, str]]:
    return [(i.error_code, i.severity, i.location) for i in result.issues]


def run(envelope: m.Envelope | None = None, cpa: object = None, **kw: object) -> CheckResult:
    agreement = cpa if cpa is not None else make_cpa()
    args: dict[str, object] = {"now": NOW}
    args.update(kw)
    return check(envelope or make_envelope(), agreement, **args)  # type: ignore[arg-type]


def test_a_matching_message_has_no_issue() -> None:
    result = run()
    assert result.issues == ()
    assert result.ok
    assert result.cpa is not None and result.cpa.cpaid == "cpa-a-b"
    assert (result.sending_channel_id, result.receiving_channel_id) == ("A_channel", "B_channel")
    assert dict(result.effective) == {
        "ackRequested": True,
        "ackSignatureRequested": False,
        "duplicateElimination": True,
        "syncReplyMode": False,
        "messageOrder": False,
    }


def test_check_through_a_registry() -> None:
    registry = CpaRegistry([make_cpa(), make_cpa(cpaid="other", retries=None)])
    assert run(cpa=registry).issues == ()
    result = run(make_envelope(cpaid="other"), registry)
    # "other" has no reliable messaging but the same always/always characteristics: still no issue.
    assert result.issues == () and result.cpa is registry.get("other")


def test_unknown_cpaid_is_value_not_recognized() -> None:
    result = run(make_envelope(cpaid="nope"), CpaRegistry([make_cpa()]))
    assert found(result) == [(VNR, ERR, "//Header/MessageHeader/CPAId")]
    assert "'nope'" in result.issues[0].description
    assert not result.ok and result.cpa is None
    # One agreement given directly: its CPAId must be the header's.
    assert found(run(make_envelope(cpaid="nope"))) == [(VNR, ERR, "//Header/MessageHeader/CPAId")]


@pytest.mark.parametrize(
    ("cpa", "text"),
    [
        (make_cpa(status=Status.PROPOSED), "Status 'proposed'"),
        (make_cpa(end=NOW), "no longer in force"),
        (make_cpa(start=NOW + timedelta(seconds=1)), "not yet in force"),
    ],
)
def test_agreement_not_in_force_is_inconsistent(cpa: object, text: str) -> None:
    result = run(cpa=cpa)
    assert found(result) == [(INC, ERR, "//Header/MessageHeader/CPAId")]
    assert text in result.issues[0].description


def test_signed_agreement_and_window_edges_are_in_force() -> None:
    assert run(cpa=make_cpa(status=Status.SIGNED)).issues == ()
    assert run(cpa=make_cpa(start=NOW)).issues == ()
    assert run(cpa=make_cpa(start=START, end=NOW + timedelta(microseconds=1))).issues == ()


@pytest.mark.parametrize(
    ("kw", "location"),
    [
        ({"from_ids": (m.PartyId("555", "urn:duns"),)}, "//Header/MessageHeader/From/PartyId"),
        ({"from_ids": (m.PartyId("123456789", "urn:other"),)}, "//Header/MessageHeader/From/PartyId"),
        ({"from_ids": (m.PartyId("123456789"),)}, "//Header/MessageHeader/From/PartyId"),
        ({"to_ids": (m.PartyId("987654321", "urn:dunz"),)}, "//Header/MessageHeader/To/PartyId"),
        ({"to_ids": (m.PartyId(A_ID.value, A_ID.type),)}, "//Header/MessageHeader/To/PartyId"),
        (
            {"from_ids": (m.PartyId(A_ID.value, A_ID.type), m.PartyId("urn:extra"))},
            "//Header/MessageHeader/From/PartyId",
        ),
    ],
    ids=["unknown-from", "from-type-differs", "from-untyped", "to-type-differs", "to-is-from", "extra-from-id"],
)
def test_party_ids_not_in_the_agreement_are_inconsistent(kw: dict[str, object], location: str) -> None:
    result = run(make_envelope(**kw))  # type: ignore[arg-type]
    assert found(result) == [(INC, ERR, location)]


def test_all_listed_party_ids_are_accepted() -> None:
    cpa = make_cpa(a_ids=(A_ID, PartyId("urn:alpha")))
    env = make_envelope(from_ids=(m.PartyId("urn:alpha"), m.PartyId(A_ID.value, A_ID.type)))
    assert run(env, cpa).issues == ()


@pytest.mark.parametrize(
    ("kw", "location"),
    [
        ({"from_role": "Seller"}, "//Header/MessageHeader/From/Role"),
        ({"to_role": "Buyer"}, "//Header/MessageHeader/To/Role"),
        ({"from_role": "Carrier"}, "//Header/MessageHeader/From/Role"),
    ],
)
def test_a_role_that_is_not_the_partys_is_value_not_recognized(kw: dict[str, object], location: str) -> None:
    assert found(run(make_envelope(**kw))) == [(VNR, ERR, location)]  # type: ignore[arg-type]


def test_roles_may_be_absent() -> None:
    assert run(make_envelope(from_role=None, to_role=None)).issues == ()


@pytest.mark.parametrize(
    ("kw", "location", "text"),
    [
        ({"service": "urn:example:other"}, "//Header/MessageHeader/Service", "allowed: urn:example:services:ordering"),
        ({"service_type": "urn:types:x"}, "//Header/MessageHeader/Service/@type", "allowed: None"),
        ({"action": "OrderResponse"}, "//Header/MessageHeader/Action", "allowed: NewOrder"),
        ({"action": "Cancel"}, "//Header/MessageHeader/Action", "Alpha to Beta"),
    ],
)
def test_service_type_and_action_must_be_allowed_in_this_direction(
    kw: dict[str, object], location: str, text: str
) -> None:
    result = run(make_envelope(**kw))  # type: ignore[arg-type]
    assert found(result) == [(VNR, ERR, location)]
    assert text in result.issues[0].description
    assert result.sending_channel_id is None


def test_the_reverse_direction_is_checked_against_the_other_binding() -> None:
    env = make_envelope(
        from_ids=(m.PartyId(B_ID.value, B_ID.type),),
        to_ids=(m.PartyId(A_ID.value, A_ID.type),),
        from_role="Seller",
        to_role="Buyer",
        action="OrderResponse",
    )
    result = run(env)
    assert result.issues == ()
    assert (result.sending_channel_id, result.receiving_channel_id) == ("B_channel", "A_channel")
    # B cannot send NewOrder.
    b_to_a = make_envelope(
        from_ids=(m.PartyId(B_ID.value, B_ID.type),), to_ids=(m.PartyId(A_ID.value, A_ID.type),), from_role=None
    )
    assert found(run(b_to_a)) == [
        (VNR, ERR, "//Header/MessageHeader/To/Role"),
        (VNR, ERR, "//Header/MessageHeader/Action"),
    ]


def test_service_type_must_match_exactly() -> None:
    cpa = make_cpa(service_type="urn:types:t")
    assert run(make_envelope(service_type="urn:types:t"), cpa).issues == ()
    assert found(run(make_envelope(), cpa)) == [(VNR, ERR, "//Header/MessageHeader/Service/@type")]


# --- parameters with a header form, through precedence.decide -------------------------------------------


@pytest.mark.parametrize(
    ("channel_kw", "env_kw", "location", "code"),
    [
        ({}, {"duplicate_elimination": False}, "//Header/MessageHeader/DuplicateElimination", INC),
        ({"duplicate_elimination": PerMessage.NEVER}, {}, "//Header/MessageHeader/DuplicateElimination", INC),
        ({}, {"ack_requested": False}, "//Header/AckRequested", INC),
        ({"ack_requested": PerMessage.NEVER}, {}, "//Header/AckRequested", INC),
        ({}, {"ack_signed": True}, "//Header/AckRequested/@signed", INC),
        ({"ack_signature_requested": PerMessage.ALWAYS}, {}, "//Header/AckRequested/@signed", INC),
        ({}, {"sync_reply": True}, "//Header/SyncReply", INC),
        ({"sync_reply_mode": SyncReplyMode.MSH_SIGNALS_ONLY}, {}, "//Header/SyncReply", INC),
        ({}, {"message_order": True}, "//Header/MessageOrder", NSUP),
        ({"message_order": MessageOrderSemantics.GUARANTEED}, {}, "//Header/MessageOrder", INC),
    ],
)
def test_header_disagreeing_with_the_cpa(
    channel_kw: dict[str, object], env_kw: dict[str, object], location: str, code: ErrorCode
) -> None:
    cpa = make_cpa(a_channel=channel("A", **channel_kw))  # type: ignore[arg-type]
    env = make_envelope(**env_kw)  # type: ignore[arg-type]
    assert found(run(env, cpa)) == [(code, ERR, location)]
    assert found(run(env, cpa, reading=Reading.HEADER_WARN)) == [(code, WARN, location)]
    assert found(run(env, cpa, reading=Reading.CPA_WARN)) == [(code, WARN, location)]
    assert run(env, cpa, reading=Reading.HEADER).issues == ()


def test_effective_values_follow_the_reading() -> None:
    env = make_envelope(duplicate_elimination=False, sync_reply=True)
    strict = run(env)
    assert (strict.effective["duplicateElimination"], strict.effective["syncReplyMode"]) == (True, False)
    assert not strict.ok
    header = run(env, reading=Reading.HEADER)
    assert (header.effective["duplicateElimination"], header.effective["syncReplyMode"]) == (False, True)
    assert header.ok
    cpa_warn = run(env, reading=Reading.CPA_WARN)
    assert (cpa_warn.effective["duplicateElimination"], cpa_warn.effective["syncReplyMode"]) == (True, False)
    assert cpa_warn.ok and len(cpa_warn.issues) == 2


def test_per_message_lets_the_header_decide() -> None:
    cpa = make_cpa(
        a_channel=channel(
            "A",
            ack_requested=PerMessage.PER_MESSAGE,
            duplicate_elimination=PerMessage.PER_MESSAGE,
            ack_signature_requested=PerMessage.PER_MESSAGE,
        )
    )
    for ack in (True, False):
        for dup in (True, False):
            result = run(make_envelope(ack_requested=ack, duplicate_elimination=dup, ack_signed=ack), cpa)
            assert result.issues == ()
            assert (result.effective["ackRequested"], result.effective["duplicateElimination"]) == (ack, dup)
            assert result.effective["ackSignatureRequested"] is ack


def test_signed_is_judged_only_when_an_ack_is_requested() -> None:
    cpa = make_cpa(
        a_channel=channel("A", ack_requested=PerMessage.PER_MESSAGE, ack_signature_requested=PerMessage.ALWAYS)
    )
    result = run(make_envelope(ack_requested=False), cpa)
    assert result.issues == ()
    assert (result.effective["ackRequested"], result.effective["ackSignatureRequested"]) == (False, False)
    assert found(run(make_envelope(ack_signed=False), cpa)) == [(INC, ERR, "//Header/AckRequested/@signed")]


def test_ack_requested_is_looked_for_under_the_channels_actor() -> None:
    cpa = make_cpa(a_channel=channel("A", actor=ACTOR_NEXT_MSH))
    # Only a toPartyMSH AckRequested: the nextMSH one the CPA asks for is missing.
    assert found(run(make_envelope(), cpa)) == [(INC, ERR, "//Header/AckRequested")]
    result = run(make_envelope(ack_actor=ACTOR_NEXT_MSH), cpa)
    assert result.issues == () and result.effective["ackRequested"] is True


def test_message_order_header_rules() -> None:
    cpa = make_cpa(a_channel=channel("A", message_order=MessageOrderSemantics.GUARANTEED))
    assert run(make_envelope(message_order=True), cpa).issues == ()
    # ebMS2 §9.2: not with SyncReply; §9.1: needs DuplicateElimination.
    env = make_envelope(message_order=True, sync_reply=True, duplicate_elimination=False)
    assert found(run(env, cpa, reading=Reading.HEADER)) == [
        (INC, ERR, "//Header/MessageOrder"),
        (INC, ERR, "//Header/MessageOrder"),
    ]


# --- TimeToLive -----------------------------------------------------------------------------------------


def test_time_to_live_expired() -> None:
    ttl_loc = "//Header/MessageHeader/MessageData/TimeToLive"
    past = NOW - timedelta(seconds=1)
    env = make_envelope(timestamp=NOW - timedelta(hours=2), time_to_live=past)
    assert found(run(env, cpa=make_cpa(retries=None))) == [(TTLX, ERR, ttl_loc)]
    # Within the MSH's clock accuracy it has not expired; exactly now has not expired either.
    assert run(env, cpa=make_cpa(retries=None), msh_time_accuracy=timedelta(seconds=1)).issues == ()
    env_now = make_envelope(timestamp=NOW - timedelta(hours=2), time_to_live=NOW)
    assert run(env_now, cpa=make_cpa(retries=None)).issues == ()


def test_time_to_live_shorter_than_the_retry_schedule_is_a_warning() -> None:
    ttl_loc = "//Header/MessageHeader/MessageData/TimeToLive"
    # Retries 3, RetryInterval 10 minutes: TimeToLive must be after Timestamp + 40 minutes.
    floor = NOW + timedelta(minutes=40)
    result = run(make_envelope(time_to_live=floor))
    assert found(result) == [(INC, WARN, ttl_loc)]
    assert result.ok
    assert "2026-06-01T12:40:00+00:00" in result.issues[0].description
    assert run(make_envelope(time_to_live=floor + timedelta(seconds=1))).issues == ()
    assert run(make_envelope(time_to_live=floor), reading=Reading.HEADER).issues == ()
    # Not a reliable message (no AckRequested) or no reliable messaging in the CPA: no bound.
    per = make_cpa(a_channel=channel("A", ack_requested=PerMessage.PER_MESSAGE))
    assert run(make_envelope(time_to_live=floor, ack_requested=False), per).issues == ()
    assert run(make_envelope(time_to_live=floor), make_cpa(retries=None)).issues == ()


def test_the_retry_schedule_bound_adds_month_intervals_as_xml_schema_does() -> None:
    ttl_loc = "//Header/MessageHeader/MessageData/TimeToLive"
    # Retries 2, RetryInterval P1M: TimeToLive must be after Timestamp + P3M (May 31 -> August 31), not after
    # Timestamp + 90 days (August 29), which a month of 30 days would give.
    cpa = make_cpa(retries=2, retry_interval=XsDuration(months=1))
    stamp = datetime(2026, 5, 31, 12, 0, tzinfo=UTC)
    floor = datetime(2026, 8, 31, 12, 0, tzinfo=UTC)
    for ttl in (stamp + timedelta(days=91), floor):
        result = run(make_envelope(timestamp=stamp, time_to_live=ttl), cpa)
        assert found(result) == [(INC, WARN, ttl_loc)]
        assert "2026-08-31T12:00:00+00:00 (Retries 2, RetryInterval P1M;" in result.issues[0].description
    assert run(make_envelope(timestamp=stamp, time_to_live=floor + timedelta(seconds=1)), cpa).issues == ()
    # A Timestamp so late that the bound is past the year 9999: no TimeToLive can be after it; no crash.
    late = make_envelope(timestamp=datetime(9999, 11, 1, tzinfo=UTC), time_to_live=datetime(9999, 12, 31, tzinfo=UTC))
    assert found(run(late, cpa)) == [(INC, WARN, ttl_loc)]


def test_naive_time_to_live_is_read_as_utc() -> None:
    naive = (NOW - timedelta(seconds=5)).replace(tzinfo=None)
    env = make_envelope(timestamp=naive - timedelta(hours=1), time_to_live=naive)
    assert [i.error_code for i in run(env, make_cpa(retries=None)).issues] == [TTLX]


# --- MSH signals ----------------------------------------------------------------------------------------


def signal(action: str, **kw: object) -> m.Envelope:
    args: dict[str, object] = {
        "from_ids": (m.PartyId(B_ID.value, B_ID.type),),
        "to_ids": (m.PartyId(A_ID.value, A_ID.type),),
        "from_role": None,
        "to_role": None,
        "service": SERVICE_MSH,
        "action": action,
        "ack_requested": False,
        "duplicate_elimination": False,
    }
    args.update(kw)
    return make_envelope(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "action", ["Acknowledgment", "MessageError", "Ping", "Pong", "StatusRequest", "StatusResponse"]
)
def test_msh_signals_use_the_default_msh_channels(action: str) -> None:
    result = run(signal(action))
    assert result.issues == ()
    assert (result.sending_channel_id, result.receiving_channel_id) == ("B_msh", "A_msh")


def test_msh_signal_checks() -> None:
    # The default MSH channel says ackRequested=never: an AckRequested on a signal is Inconsistent.
    assert found(run(signal("Acknowledgment", ack_requested=True))) == [(INC, ERR, "//Header/AckRequested")]
    # ebMS2 §7, §8: "If a Receiving MSH does not support the service requested, it SHOULD return an Error Message
    # with an errorCode of NotSupported and a highestSeverity attribute set to Error."
    assert found(run(signal("Dance"))) == [(NSUP, ERR, "//Header/MessageHeader/Action")]
    assert found(run(signal("Pong", from_role="Buyer"))) == [(VNR, ERR, "//Header/MessageHeader/From/Role")]
    assert run(signal("Pong", from_role="Seller")).issues == ()
    # "always" on a default MSH channel does not oblige a signal to request an ack or a sync reply.
    rm_msh = channel("B", channel_id="B_msh", sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY)
    assert run(signal("Acknowledgment"), make_cpa(b_msh=rm_msh)).issues == ()


def test_several_problems_are_all_reported_in_order() -> None:
    env = make_envelope(
        from_role="Nobody", duplicate_elimination=False, time_to_live=NOW - timedelta(minutes=1), sync_reply=True
    )
    result = run(env, cpa=make_cpa(status=Status.PROPOSED))
    assert found(result) == [
        (INC, ERR, "//Header/MessageHeader/CPAId"),
        (VNR, ERR, "//Header/MessageHeader/From/Role"),
        (INC, ERR, "//Header/MessageHeader/DuplicateElimination"),
        (INC, ERR, "//Header/SyncReply"),
        (TTLX, ERR, "//Header/MessageHeader/MessageData/TimeToLive"),
        (INC, WARN, "//Header/MessageHeader/MessageData/TimeToLive"),
    ]


def test_no_message_header() -> None:
    result = check(m.Envelope(), make_cpa(), now=NOW)
    assert found(result) == [(ErrorCode.OTHER_XML, ERR, "//Header/MessageHeader")]


def test_now_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        check(make_envelope(), make_cpa(), now=NOW.replace(tzinfo=None))


def test_end_is_exclusive() -> None:
    assert found(run(cpa=make_cpa(end=NOW))) == [(INC, ERR, "//Header/MessageHeader/CPAId")]
    assert END > NOW
