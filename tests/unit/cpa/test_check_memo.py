"""cpa.check remembers its answer for a header's shape: a remembered answer is always the one computed afresh.

The agreement's answer for the parties, roles, binding, precedence and header rules is kept per header
shape (docs/benchmarks.md, "Figures for issue 24, sixth round"). These tests compare every answer given
after another header was judged with the answer for the same header on an empty memo, so a value the judgment
reads but the memo's key leaves out makes them fail.
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.check import CheckResult, check, clear_cache
from cpa.model import MessageOrderSemantics, PerMessage, SyncReplyMode
from cpa.precedence import Reading
from msh.ebms import model as m
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH, SERVICE_MSH
from tests.support.cpa_factory import A_ID, B_ID, NOW, make_cpa, make_envelope

A = m.PartyId(A_ID.value, A_ID.type)
B = m.PartyId(B_ID.value, B_ID.type)
STRANGER = m.PartyId("urn:stranger")

AGREEMENTS = (
    make_cpa(),
    make_cpa(
        cpaid="cpa-a-b",
        ack_requested=PerMessage.PER_MESSAGE,
        duplicate_elimination=PerMessage.NEVER,
        ack_signature_requested=PerMessage.ALWAYS,
        sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY,
        actor=ACTOR_NEXT_MSH,
    ),
    make_cpa(message_order=MessageOrderSemantics.GUARANTEED, retry_interval=timedelta(hours=1)),
)

# Each argument of make_envelope with the values drawn for it: the agreements' own and others.
CHOICES: dict[str, list[object]] = {
    "from_ids": [(A,), (B,), (STRANGER,), (A, STRANGER)],
    "to_ids": [(B,), (A,), (STRANGER,)],
    "from_role": [None, "Buyer", "Seller", "Carrier"],
    "to_role": [None, "Seller", "Buyer"],
    "service": ["urn:example:services:ordering", "urn:example:other", SERVICE_MSH],
    "service_type": [None, "urn:types:x"],
    "action": ["NewOrder", "OrderResponse", "Acknowledgment", "Cancel"],
    "time_to_live": [None, NOW + timedelta(seconds=1), NOW + timedelta(days=30)],
    "duplicate_elimination": [True, False],
    "ack_requested": [True, False],
    "ack_signed": [False, True],
    "ack_actor": [ACTOR_TO_PARTY_MSH, None, ACTOR_NEXT_MSH],
    "sync_reply": [False, True],
    "message_order": [False, True],
}
# The first value of each is the agreements' own: drawn more often, so that most headers get past the
# parties to the binding, the precedence and the header rules.
headers = st.fixed_dictionaries(
    {name: st.one_of(st.just(values[0]), st.sampled_from(values)) for name, values in CHOICES.items()}
)
READINGS = list(Reading)


def afresh(envelope: m.Envelope, agreement: object, reading: Reading) -> CheckResult:
    clear_cache()
    return check(envelope, agreement, now=NOW, reading=reading)  # type: ignore[arg-type]


@settings(max_examples=600, deadline=None)
@given(
    first=headers,
    changed=st.sampled_from([*sorted(CHOICES), "reading"]),
    index=st.integers(min_value=0, max_value=3),
    agreement=st.sampled_from(AGREEMENTS),
    reading=st.sampled_from(READINGS),
)
def test_an_answer_after_another_header_is_the_answer_computed_afresh(
    first: dict[str, object], changed: str, index: int, agreement: object, reading: Reading
) -> None:
    # The second header (or the reading) differs from the first in one value: one the memo's key must tell
    # apart.
    second, second_reading = dict(first), reading
    if changed == "reading":
        second_reading = READINGS[index % len(READINGS)]
    else:
        second[changed] = CHOICES[changed][index % len(CHOICES[changed])]
    envelope = make_envelope(**second)  # type: ignore[arg-type]
    expected = afresh(envelope, agreement, second_reading)
    clear_cache()
    check(make_envelope(**first), agreement, now=NOW, reading=reading)  # type: ignore[arg-type]
    assert check(envelope, agreement, now=NOW, reading=second_reading) == expected  # type: ignore[arg-type]


def test_an_agreement_loaded_again_is_judged_again() -> None:
    # A new agreement object with other bindings must not meet the answer remembered for the old one.
    envelope = make_envelope()
    assert check(envelope, make_cpa(), now=NOW).ok
    refused = check(envelope, make_cpa(a_sends=("Cancel",)), now=NOW)
    assert [i.location for i in refused.issues] == ["//Header/MessageHeader/Action"]


def test_the_effective_values_handed_out_are_the_callers_own() -> None:
    agreement = make_cpa()
    first = check(make_envelope(), agreement, now=NOW)
    first.effective["ackRequested"] = False  # type: ignore[index]
    assert check(make_envelope(), agreement, now=NOW).effective["ackRequested"] is True


def test_the_time_is_judged_at_every_call() -> None:
    # Only the shape is remembered: TimeToLive (ebMS2 §6.4.5) and the agreement's period (§3.1.2) are not.
    agreement = make_cpa()
    assert check(make_envelope(), agreement, now=NOW).ok
    late = check(make_envelope(), agreement, now=NOW + timedelta(days=3650))
    assert [i.location for i in late.issues] == ["//Header/MessageHeader/CPAId"]
