"""ebMS 2.0 §6.4 to §6.5.7: the reliable messaging parameters (DuplicateElimination, Retries, RetryInterval,
TimeToLive, PersistDuration, syncReplyMode), the sending and receiving behaviour, acknowledgments,
resending, duplicates and DeliveryFailure.

Each test cites the sentence it checks and takes its expected answer from that sentence. They drive the
real code: the sending state machine (:func:`msh.engine.step`) on a fake clock, the receiving decisions
(:func:`msh.engine.receive`) on real agreement checks, message composition (:func:`msh.runtime.compose.compose`),
and whole MSHs on the test network (:mod:`msh.testing.network`: memory stores, in-memory transport, one
fake clock; no socket, no sleep).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import tomllib
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

import pytest

from cpa.check import check
from cpa.duration import XsDuration
from cpa.model import CollaborationProtocolAgreement, PerMessage, SyncReplyMode
from cpa.model import PartyId as CpaPartyId
from cpa.resolve import Exchange, resolve
from msh.ebms import model as m
from msh.ebms.envelope import read_envelope, serialise_envelope
from msh.ebms.message import ParseMode, parse_message
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH, SERVICE_MSH
from msh.engine import (
    AcknowledgmentReceived,
    Evidence,
    InboundDecision,
    OutboundStatus,
    RecordAcknowledgment,
    Reject,
    ReplySync,
    ResendStoredAck,
    SendAsync,
    StoredInbound,
    StoreInbound,
    receive,
)
from msh.engine.routing import Route
from msh.engine.sending import (
    Action,
    CancelTimer,
    Event,
    NotifyFailed,
    OutboundState,
    Reliability,
    ScheduleTimer,
    Submit,
    TimerDue,
    Transmit,
    TransmitFailed,
    TransmitSucceeded,
    step,
)
from msh.errors import ConfigurationError, ErrorCode, Issue, Severity
from msh.runtime.compose import Payload, Submission, compose
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.msh import HttpReply, Msh
from msh.safexml import parse_xml
from msh.testing.network import TestNetwork
from tests.conformance.clauses import Exemption, clause
from tests.support.cpa_factory import A_ID, B_ID, NOW, SERVICE, make_cpa, make_envelope
from tests.support.multihop import A_URL, C_URL, C, multihop, routed_cpa
from tests.support.multihop import order as routed_order

EXEMPTIONS: tuple[Exemption, ...] = ()

# --- the sending state machine on a fake clock ------------------------------------------------------------

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
SEC = timedelta(seconds=1)
MID = "msg-1@a.example"


def xs(value: timedelta) -> XsDuration:
    return XsDuration.from_timedelta(value)


def reliability(
    *,
    retries: int = 3,
    retry_interval: timedelta = 10 * MIN,
    persist_duration: timedelta | None = None,
    time_to_live: datetime | None = None,
    hop_ack: bool = False,
) -> Reliability:
    """A reliably sent message's parameters; the first resend waits the RetryInterval (ebMS2 §6.4.4)."""
    return Reliability(
        retries=retries,
        retry_interval=xs(retry_interval),
        first_resend_timeout=xs(retry_interval),
        persist_duration=None if persist_duration is None else xs(persist_duration),
        time_to_live=time_to_live,
        ack_requested=True,
        ack_actor=ACTOR_TO_PARTY_MSH,
        hop_ack=hop_ack,
    )


@dataclasses.dataclass
class Sender:
    """One outbound message driven through the engine; its timer fires only when the clock reaches it."""

    reliability: Reliability
    now: datetime = T0
    state: OutboundState | None = None
    timer: datetime | None = None
    log: list[tuple[datetime, Action]] = dataclasses.field(default_factory=list)

    def feed(self, event: Event) -> tuple[Action, ...]:
        self.state, actions = step(self.state, event, self.now)
        for action in actions:
            self.log.append((self.now, action))
            if isinstance(action, ScheduleTimer):
                self.timer = action.due_at
            elif isinstance(action, CancelTimer):
                self.timer = None
        return actions

    def submit(self) -> tuple[Action, ...]:
        return self.feed(Submit(MID, self.reliability))

    def advance(self, delta: timedelta, *, outcome: Event | None = None) -> tuple[Action, ...]:
        """Move the clock by ``delta``, firing the timer each time it comes due; each transmission it makes
        ends with ``outcome`` (None: no outcome is fed)."""
        end = self.now + delta
        out: list[Action] = []
        while self.timer is not None and self.timer <= end:
            self.now, self.timer = self.timer, None
            actions = self.feed(TimerDue())
            out += actions
            if outcome is not None and any(isinstance(a, Transmit) for a in actions):
                out += self.feed(outcome)
        self.now = end
        return tuple(out)

    @property
    def transmissions(self) -> list[datetime]:
        return [t for t, a in self.log if isinstance(a, Transmit)]

    @property
    def failures(self) -> list[NotifyFailed]:
        return [a for _, a in self.log if isinstance(a, NotifyFailed)]

    @property
    def s(self) -> OutboundState:
        assert self.state is not None
        return self.state


def status_of(sender: Sender) -> OutboundStatus:
    return sender.s.status


# --- the receiving decisions on real agreement checks ---------------------------------------------------

PER_MESSAGE = {
    "ack_requested": PerMessage.PER_MESSAGE,
    "duplicate_elimination": PerMessage.PER_MESSAGE,
    "ack_signature_requested": PerMessage.PER_MESSAGE,
}


def message(message_id: str = MID, *, timestamp: datetime = NOW, **kw: object) -> m.Envelope:
    env = make_envelope(timestamp=timestamp, **kw)  # type: ignore[arg-type]
    assert env.message_header is not None
    data = dataclasses.replace(env.message_header.message_data, message_id=message_id)
    return dataclasses.replace(env, message_header=dataclasses.replace(env.message_header, message_data=data))


@dataclasses.dataclass
class Receiver:
    """A receiving MSH: the agreement check, the store lookup, receive(), and a store applying the decision."""

    cpa: CollaborationProtocolAgreement = dataclasses.field(default_factory=lambda: make_cpa(**PER_MESSAGE))  # type: ignore[arg-type]
    stored: dict[str, StoredInbound] = dataclasses.field(default_factory=dict)
    delivered: Counter[str] = dataclasses.field(default_factory=Counter)
    replies: int = 0

    def get(self, env: m.Envelope, *, now: datetime = NOW) -> InboundDecision:
        self.replies += 1
        mid = env.message_id
        decision = receive(
            env,
            check_result=check(env, self.cpa, now=now),
            duplicate=self.stored.get(mid) if mid else None,
            now=now,
            new_message_id=f"reply-{self.replies}@b.example",
        )
        for action in decision.actions:
            if isinstance(action, StoreInbound):
                self.stored.setdefault(action.message_id, StoredInbound(action.message_id, action.record_ack, False))
                if action.deliver:
                    self.delivered[action.message_id] += 1
            elif isinstance(action, RecordAcknowledgment):
                self.stored[action.message_id] = dataclasses.replace(
                    self.stored[action.message_id], acknowledgment=action.acknowledgment
                )
        return decision


def acknowledgments(decision: InboundDecision) -> list[m.Envelope]:
    """The acknowledgment messages a decision sends back (generated or resent from the store)."""
    out: list[m.Envelope] = []
    for action in decision.actions:
        if isinstance(action, (ReplySync, SendAsync)) and action.envelope.acknowledgments:
            out.append(action.envelope)
        elif isinstance(action, ResendStoredAck):
            assert isinstance(action.acknowledgment, m.Envelope)
            out.append(action.acknowledgment)
    return out


def refusal(decision: InboundDecision) -> list[tuple[ErrorCode | None, Severity]]:
    (reject,) = decision.actions
    assert isinstance(reject, Reject)
    error_list = reject.error_message.error_list
    assert error_list is not None
    return [(e.code, e.severity) for e in error_list.errors]


def round_trip(env: m.Envelope) -> m.Envelope:
    """Serialised and read back: what another MSH would see on the wire."""
    again, issues = read_envelope(parse_xml(serialise_envelope(env)))
    assert issues == ()
    return again


# --- whole MSHs on the test network ---------------------------------------------------------------------

CONFIG = Path(__file__).resolve().parents[2] / "samples" / "config"
B_PARTY = ("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")
B_URL = "https://127.0.0.1:8082/msh"
# The sample agreement: Retries 5, RetryInterval PT5S, PersistDuration P1D, syncReplyMode mshSignalsOnly.
RETRIES = 5
RETRY_INTERVAL = timedelta(seconds=5)


@cache
def settings(name: str) -> Settings:
    path = CONFIG / f"party-{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    return settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})


def order(n: int, **kw: object) -> Submission:
    payload = (Payload(f"<order n='{n}'/>".encode(), "application/xml"),)
    return Submission(B_PARTY, SERVICE, "NewOrder", payload, **kw)  # type: ignore[arg-type]


def run(scenario: Callable[[TestNetwork, Msh, Msh], Awaitable[None]]) -> None:
    async def main() -> None:
        net = TestNetwork(seed=1)
        a, b = net.add("a", settings("a")), net.add("b", settings("b"))
        await net.start()
        try:
            await scenario(net, a, b)
        finally:
            await net.close()

    asyncio.run(main())


def status(msh: Msh, message_id: str) -> OutboundStatus:
    stored = msh.status(message_id)
    assert stored is not None
    return stored.state.status


def final(msh: Msh, message_id: str) -> Callable[[], bool]:
    return lambda: status(msh, message_id).final


def inbox(msh: Msh) -> Counter[str]:
    return Counter(entry.message_id for entry in msh.inbox(None, limit=10_000))


def stored_body(msh: Msh, message_id: str) -> bytes:
    stored = msh.status(message_id)
    assert stored is not None
    with msh.store.open_blob(stored.body_blob_id) as blob:
        return blob.read()


def envelope_of(body: bytes, content_type: str | None = None) -> m.Envelope:
    parsed = parse_message(body, content_type, mode=ParseMode.LENIENT)
    parsed.close()
    return parsed.envelope


class Recorder:
    """An endpoint in front of an MSH that keeps every request it passes on (body and Content-Type) and every
    answer it gets back; ``on_request`` is called with each request before the MSH sees it."""

    def __init__(self, msh: Msh, on_request: Callable[[bytes, str | None], None] | None = None) -> None:
        self.msh = msh
        self.on_request = on_request
        self.requests: list[tuple[bytes, str | None]] = []
        self.answers: list[HttpReply] = []

    async def handle_http(self, body: bytes, content_type: str | None, *, size: int | None = None) -> HttpReply:
        self.requests.append((body, content_type))
        if self.on_request is not None:
            self.on_request(body, content_type)
        reply = await self.msh.handle_http(body, content_type, size=size)
        self.answers.append(reply)
        return reply

    @property
    def bodies(self) -> list[bytes]:
        return [body for body, _ in self.requests]

    @property
    def envelopes(self) -> list[m.Envelope]:
        return [envelope_of(body, content_type) for body, content_type in self.requests]


def listen(net: TestNetwork, url: str, recorder: Recorder) -> None:
    """Put ``recorder`` at ``url`` in front of the MSH attached there."""
    net.network.attach(url, recorder)  # type: ignore[arg-type]  # handle_http is all the network calls


# === §6.4.1 DuplicateElimination ===========================================================================


def composed(cpa: CollaborationProtocolAgreement, **submission: object) -> m.Envelope:
    params = resolve(cpa, Exchange(A_ID, B_ID, SERVICE, "NewOrder"), now=NOW)
    sub = Submission((B_ID.value, B_ID.type), SERVICE, "NewOrder", **submission)  # type: ignore[arg-type]
    made = compose(params, sub, message_id=MID, now=NOW, conversation_id="conv-1", content_id_domain="a.example")
    return made.envelope


@clause(
    "6.4.1",
    (1586, 1587),
    "The DuplicateElimination element MUST be used by the From Party MSH to indicate whether the Receiving MSH "
    "MUST eliminate duplicates",
)
def test_6_4_1_the_from_party_msh_asks_for_duplicate_elimination_with_the_element() -> None:
    # The From Party MSH says "eliminate duplicates" by putting DuplicateElimination in the header, and leaves
    # it out to say the opposite (an agreement saying perMessage lets the submission choose).
    always = round_trip(composed(make_cpa(duplicate_elimination=PerMessage.ALWAYS)))
    assert always.message_header is not None and always.message_header.duplicate_elimination
    per_message = make_cpa(duplicate_elimination=PerMessage.PER_MESSAGE)
    asked = round_trip(composed(per_message, duplicate_elimination=True))
    not_asked = round_trip(composed(per_message, duplicate_elimination=False))
    assert asked.message_header is not None and asked.message_header.duplicate_elimination
    assert not_asked.message_header is not None and not not_asked.message_header.duplicate_elimination
    assert b"DuplicateElimination" in serialise_envelope(asked)
    assert b"DuplicateElimination" not in serialise_envelope(not_asked)


@clause(
    "6.4.1",
    (1586, 1587),
    "The DuplicateElimination element MUST be used by the From Party MSH to indicate whether the Receiving MSH "
    "MUST eliminate duplicates",
)
def test_6_4_1_the_receiving_msh_eliminates_duplicates_when_the_element_is_present() -> None:
    # The Receiving MSH eliminates the duplicates of a message carrying DuplicateElimination: three copies,
    # one delivery. Without it the MSH is not required to check (lines 1591-1592): every copy is delivered.
    receiver = Receiver()
    for _ in range(3):
        receiver.get(message(duplicate_elimination=True))
    assert receiver.delivered[MID] == 1
    without = Receiver()
    for _ in range(3):
        without.get(message(duplicate_elimination=False))
    assert without.delivered[MID] == 3


@clause(
    "6.4.1",
    1588,
    "If the value of duplicateElimination in the CPA is never, DuplicateElimination MUST NOT be present.",
)
def test_6_4_1_an_agreement_saying_never_leaves_the_element_out() -> None:
    never = make_cpa(duplicate_elimination=PerMessage.NEVER)
    env = composed(never)
    assert env.message_header is not None and not env.message_header.duplicate_elimination
    assert b"DuplicateElimination" not in serialise_envelope(env)
    # An application asking for it anyway is refused rather than sent with the element.
    with pytest.raises(ConfigurationError, match="duplicateElimination"):
        composed(never, duplicate_elimination=True)


@clause(
    "6.4.1",
    1599,
    "If the To Party is unable to support the requested functionality, or if the value of duplicateElimination "
    "in the CPA does not match the implied value of the element, the To Party SHOULD report the error to the "
    "From Party using an errorCode of Inconsistent and a Severity of Error.",
)
@pytest.mark.parametrize(("agreement", "present"), [(PerMessage.NEVER, True), (PerMessage.ALWAYS, False)])
def test_6_4_1_an_element_the_agreement_contradicts_is_reported_inconsistent_error(
    agreement: PerMessage, present: bool
) -> None:
    receiver = Receiver(make_cpa(duplicate_elimination=agreement))
    decision = receiver.get(message(duplicate_elimination=present))
    assert (ErrorCode.INCONSISTENT, Severity.ERROR) in refusal(decision)
    (reject,) = decision.actions
    assert isinstance(reject, Reject)
    # Reported to the From Party: the error message is addressed to the sender of the message.
    header = reject.error_message.message_header
    assert header is not None and header.to_party.party_ids[0].value == A_ID.value
    assert receiver.delivered[MID] == 0


# === §6.4.3 Retries, §6.4.4 RetryInterval ===================================================================


@clause(
    "6.4.3",
    1607,
    "The Retries parameter, from a CPA, is an integer value specifying the maximum number of times a Sending MSH "
    "SHOULD attempt to redeliver an unacknowledged message using the same communications protocol.",
)
@pytest.mark.parametrize("retries", [0, 1, 3])
def test_6_4_3_an_unacknowledged_message_is_redelivered_at_most_retries_times(retries: int) -> None:
    sender = Sender(reliability(retries=retries))
    sender.submit()
    sender.advance(timedelta(days=1), outcome=TransmitSucceeded())
    # The original transmission plus at most Retries redeliveries, then the attempts stop.
    assert len(sender.transmissions) == retries + 1
    assert sender.s.status is OutboundStatus.FAILED
    assert sender.timer is None


@clause(
    "6.4.4",
    1611,
    "This value specifies the minimum time a Sending MSH SHOULD wait between Retries, if an Acknowledgment "
    "Message is not received or if a communications error was detected during an attempt to send the message. "
    "RetryInterval applies to the time between sending of the original message and the first retry as well as "
    "the time between retries.",
)
@pytest.mark.parametrize(
    "outcome", [TransmitSucceeded(), TransmitFailed("connection refused", transmitted=False)], ids=["no-ack", "error"]
)
def test_6_4_4_no_retry_comes_sooner_than_retry_interval(outcome: Event) -> None:
    interval = 10 * MIN
    sender = Sender(reliability(retries=3, retry_interval=interval))
    sender.submit()
    sender.feed(outcome)  # no acknowledgment, or a communications error: nothing is resent at once
    assert sender.advance(interval - timedelta(seconds=1)) == ()
    sender.advance(timedelta(days=1), outcome=outcome)
    times = sender.transmissions
    assert len(times) == 4
    # From the original to the first retry as well as between retries: at least RetryInterval.
    assert all(later - earlier >= interval for earlier, later in itertools.pairwise(times))


@clause(
    "6.4.4",
    1611,
    "RetryInterval applies to the time between sending of the original message and the first retry as well as "
    "the time between retries.",
)
def test_6_4_4_an_msh_setting_never_brings_the_first_retry_before_retry_interval() -> None:
    # The MSH's wait before the first resend (sending.first_resend_timeout) may lengthen it, never shorten it.
    params = resolve(
        make_cpa(retry_interval=10 * MIN),
        Exchange(A_ID, B_ID, SERVICE, "NewOrder"),
        now=NOW,
        first_resend_timeouts={"A_channel": 1 * MIN},
    )
    sender = Sender(Reliability.from_parameters(params, ack_requested=True, time_to_live=None))
    sender.submit()
    sender.advance(timedelta(days=1), outcome=TransmitSucceeded())
    first, second = sender.transmissions[:2]
    assert second - first == 10 * MIN


# === §6.4.5 TimeToLive ======================================================================================


@clause(
    "6.4.5",
    1617,
    "For a reliably delivered message, TimeToLive MUST conform to: TimeToLive > Timestamp + ((Retries + 1) * "
    "RetryInterval).",
)
def test_6_4_5_a_time_to_live_without_room_for_the_retries_is_refused_at_submission() -> None:
    # The sample agreement: (Retries 5 + 1) * RetryInterval PT5S = 30 s after the Timestamp.
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        now = net.clock()
        for ttl in (now + timedelta(seconds=29), now + timedelta(seconds=30)):
            with pytest.raises(ConfigurationError, match="TimeToLive"):
                await a.submit_async(order(1, time_to_live=ttl))
        assert a.counters["submitted"] == 0 and b.inbox(None) == []
        message_id = await a.submit_async(order(2, time_to_live=now + timedelta(seconds=31)))
        await net.run_until(final(a, message_id))
        assert status(a, message_id) is OutboundStatus.DELIVERED
        sent = envelope_of(stored_body(a, message_id), a.status(message_id).content_type)  # type: ignore[union-attr]
        assert sent.message_header is not None
        data = sent.message_header.message_data
        assert data.time_to_live is not None
        assert data.time_to_live > data.timestamp + (RETRIES + 1) * RETRY_INTERVAL

    run(scenario)


@clause(
    "6.4.5",
    1617,
    "For a reliably delivered message, TimeToLive MUST conform to: TimeToLive > Timestamp + ((Retries + 1) * "
    "RetryInterval).",
)
def test_6_4_5_the_receiver_reports_a_time_to_live_that_does_not_conform() -> None:
    # make_cpa: Retries 3, RetryInterval 10 min: TimeToLive must be after Timestamp + 40 min.
    receiver = Receiver()
    at_floor = receiver.get(message(time_to_live=NOW + 40 * MIN))
    flagged = [i for i in at_floor.issues if i.location and i.location.endswith("TimeToLive")]
    assert [i.error_code for i in flagged] == [ErrorCode.INCONSISTENT]
    fine = Receiver().get(message(time_to_live=NOW + 41 * MIN))
    assert not [i for i in fine.issues if i.location and i.location.endswith("TimeToLive")]


# === §6.4.6 PersistDuration =================================================================================


@clause(
    "6.4.6",
    1623,
    "If the PersistDuration has passed since the message was first sent, a Sending MSH SHOULD NOT resend a "
    "message with the same MessageId.",
)
def test_6_4_6_no_resend_once_persist_duration_has_passed_since_the_first_send() -> None:
    persist = 25 * MIN
    sender = Sender(reliability(retries=10, retry_interval=10 * MIN, persist_duration=persist))
    sender.submit()
    sender.advance(timedelta(days=1), outcome=TransmitSucceeded())
    assert sender.transmissions == [T0, T0 + 10 * MIN, T0 + 20 * MIN]
    assert all(t < T0 + persist for t in sender.transmissions)
    # Line 1626: a message not sent successfully before PersistDuration is reported as a delivery failure.
    (failed,) = sender.failures
    assert failed.issue.error_code is ErrorCode.DELIVERY_FAILURE
    assert failed.evidence is Evidence.PERSIST_DURATION


# === §6.4.7 syncReplyMode ===================================================================================


@clause(
    "6.4.7",
    1634,
    "If the syncReplyMode parameter is not none, a SyncReply element MUST be present",
)
@pytest.mark.parametrize("mode", list(SyncReplyMode))
def test_6_4_7_a_sync_reply_mode_other_than_none_puts_sync_reply_in_the_message(mode: SyncReplyMode) -> None:
    env = round_trip(composed(make_cpa(sync_reply_mode=mode)))
    assert (env.sync_reply is not None) is (mode is not SyncReplyMode.NONE)


@clause(
    "6.4.7",
    1634,
    "If the syncReplyMode parameter is not none, a SyncReply element MUST be present",
)
def test_6_4_7_a_message_without_the_sync_reply_its_agreement_requires_is_refused_inconsistent() -> None:
    receiver = Receiver(make_cpa(sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY))
    assert (ErrorCode.INCONSISTENT, Severity.ERROR) in refusal(receiver.get(message(sync_reply=False)))
    taken = Receiver(make_cpa(sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY)).get(message(sync_reply=True))
    assert taken.delivers


# === §6.5 Acknowledgment Message ============================================================================


@clause(
    "6.5",
    1646,
    "An Acknowledgment Message MUST contain an Acknowledgment element as described in section 6.3.1 with a "
    "RefToMessageId containing the same value as the MessageId element in the message being acknowledged.",
)
def test_6_5_an_acknowledgment_message_carries_an_acknowledgment_naming_the_message() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        recorder = Recorder(b)
        listen(net, B_URL, recorder)
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        assert status(a, message_id) is OutboundStatus.DELIVERED
        (answer,) = recorder.answers
        ack = envelope_of(answer.body, answer.content_type)
        assert [element.ref_to_message_id for element in ack.acknowledgments] == [message_id]

    run(scenario)


# === §6.5.1 Sending Message Behavior ========================================================================


@clause(
    "6.5.1",
    1650,
    "If a MSH is given data by an application needing to be sent reliably, the MSH MUST do the following:",
)
def test_6_5_1_a_reliable_message_is_built_with_ack_requested_stored_sent_and_its_acknowledgment_awaited() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        seen: list[tuple[datetime, bytes, bytes | None]] = []

        def arrived(body: bytes, content_type: str | None) -> None:
            # 3. saved in persistent storage before 4. it is sent: A's store already holds these very bytes.
            mid = envelope_of(body, content_type).message_id
            held = stored_body(a, mid) if mid is not None and a.status(mid) is not None else None
            seen.append((net.clock(), body, held))

        recorder = Recorder(b, arrived)
        listen(net, B_URL, recorder)
        net.faults.lose_next_answers = 1  # 5. the first acknowledgment does not arrive
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        assert status(a, message_id) is OutboundStatus.DELIVERED
        (t1, first, held1), (t2, second, held2) = seen
        assert held1 == first and held2 == second
        # 1.-2. a message made of the application's components, with an AckRequested element.
        sent = recorder.envelopes[0]
        assert [r.actor for r in sent.ack_requested] == [ACTOR_TO_PARTY_MSH]
        assert sent.manifest is not None and len(sent.manifest.references) == 1
        # 5. no acknowledgment before RetryInterval elapsed: the action of §6.5.4 (a resend) follows.
        assert t2 - t1 == RETRY_INTERVAL

    run(scenario)


# === §6.5.3 Generating an Acknowledgment Message ============================================================


@clause(
    "6.5.3",
    1689,
    "An Acknowledgment Message MUST be generated whenever a message is received with an AckRequested element "
    "having a SOAP actor URI targeting the Receiving MSH node.",
)
@pytest.mark.parametrize("actor", [ACTOR_TO_PARTY_MSH, None, ACTOR_NEXT_MSH])
def test_6_5_3_an_acknowledgment_is_generated_for_an_ack_requested_aimed_at_this_msh(actor: str | None) -> None:
    # On a single hop the To Party MSH is also the next MSH; an absent actor means toPartyMSH (§6.3.1.1).
    cpa = make_cpa(actor=ACTOR_NEXT_MSH if actor == ACTOR_NEXT_MSH else ACTOR_TO_PARTY_MSH, **PER_MESSAGE)  # type: ignore[arg-type]
    (ack,) = acknowledgments(Receiver(cpa).get(message(ack_actor=actor)))
    assert [e.ref_to_message_id for e in ack.acknowledgments] == [MID]
    assert acknowledgments(Receiver().get(message(ack_requested=False))) == []


@clause(
    "6.5.3",
    (1691, 1692),
    "As a minimum, it MUST contain an Acknowledgment element with a RefToMessageId containing the same value as "
    "the MessageId element in the message being acknowledged.",
)
@clause(
    "6.5.3",
    (1692,),
    "This message MUST be placed in persistent storage with the same PersistDuration as the original message.",
)
def test_6_5_3_the_acknowledgment_names_the_message_and_is_kept_with_it() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        recorder = Recorder(b)
        listen(net, B_URL, recorder)
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        (answer,) = recorder.answers
        ack = envelope_of(answer.body, answer.content_type)
        assert [e.ref_to_message_id for e in ack.acknowledgments] == [message_id]
        # Stored in the same row as the message it acknowledges: kept exactly as long.
        with b.store.transaction(readonly=True) as tx:
            record = tx.find_inbound(message_id)
        assert record is not None and record.ack_envelope is not None
        assert envelope_of(record.ack_envelope, "text/xml; charset=utf-8") == ack
        # After a restart (nothing in memory) and once the original's PersistDuration (P1D) has passed, a copy
        # of the message is still answered from the store with that same acknowledgment.
        b = await net.restart("b")
        net.clock.advance(timedelta(days=1, seconds=1))
        stored = a.status(message_id)
        assert stored is not None
        again = await b.handle_http(stored_body(a, message_id), stored.content_type)
        assert again.body == answer.body

    run(scenario)


@clause(
    "6.5.3",
    1698,
    "If an Acknowledgment Message is being sent on its own, then the value of the MessageHeader elements MUST be "
    "set as follows:",
)
@clause("6.5.3", 1699, "The Service element MUST be set to: urn:oasis:names:tc:ebxml-msg:service")
@clause("6.5.3", 1700, "The Action element MUST be set to Acknowledgment.")
@clause("6.5.3", 1705, "The RefToMessageId element MUST be set to the MessageId of the message received.")
def test_6_5_3_an_acknowledgment_on_its_own_has_the_msh_service_the_acknowledgment_action_and_ref_to_message_id() -> (
    None
):
    (ack,) = acknowledgments(Receiver().get(message()))
    header = round_trip(ack).message_header
    assert header is not None
    assert (header.service.value, header.service.type) == (SERVICE_MSH, None)
    assert header.action == "Acknowledgment"
    assert header.message_data.ref_to_message_id == MID
    assert ack.manifest is None  # on its own: no payload


SECOND_A = m.PartyId("urn:example:a:second", None)
SECOND_B = m.PartyId("urn:example:b:second", None)


@clause(
    "6.5.3",
    1702,
    "all child elements from the To element received SHOULD be included in this From element.",
)
@clause(
    "6.5.3",
    1704,
    "all child elements from the From element received SHOULD be included in this To element.",
)
def test_6_5_3_the_acknowledgment_is_from_the_received_to_and_to_the_received_from_with_all_their_children() -> None:
    cpa = make_cpa(
        a_ids=(A_ID, CpaPartyId(SECOND_A.value, SECOND_A.type)),
        b_ids=(B_ID, CpaPartyId(SECOND_B.value, SECOND_B.type)),
        **PER_MESSAGE,  # type: ignore[arg-type]
    )
    a_ids = (m.PartyId(A_ID.value, A_ID.type), SECOND_A)
    b_ids = (m.PartyId(B_ID.value, B_ID.type), SECOND_B)
    received = message(from_ids=a_ids, to_ids=b_ids)
    assert received.message_header is not None
    (ack,) = acknowledgments(Receiver(cpa).get(received))
    header = round_trip(ack).message_header
    assert header is not None
    # Every PartyId and the Role of the received To are in the From; those of the received From in the To.
    assert header.from_party == received.message_header.to_party
    assert header.to_party == received.message_header.from_party


# === §6.5.4 Resending Lost Application Messages =============================================================


@clause(
    "6.5.4",
    (1718,),
    "The Sending MSH MUST resend the original message if an Acknowledgment Message has been requested but has "
    "not been received and the following are true: At least the time specified in the RetryInterval parameter "
    "has passed since the message was last sent, The message has been resent less than the number of times "
    "specified in the Retries parameter.",
)
def test_6_5_4_the_original_is_resent_each_retry_interval_while_resends_are_fewer_than_retries() -> None:
    interval = 10 * MIN
    sender = Sender(reliability(retries=2, retry_interval=interval))
    sender.submit()
    sender.feed(TransmitSucceeded())
    for resend in (1, 2):
        assert sender.advance(interval - timedelta(seconds=1)) == ()  # not before RetryInterval since last sent
        actions = sender.advance(timedelta(seconds=1))
        assert [a.attempt for a in actions if isinstance(a, Transmit)] == [resend + 1]
        sender.feed(TransmitSucceeded())
    # Resent Retries (2) times: no third resend.
    sender.advance(timedelta(days=1))
    assert len(sender.transmissions) == 3


@clause(
    "6.5.4",
    (1718,),
    "The Sending MSH MUST resend the original message if an Acknowledgment Message has been requested but has "
    "not been received",
)
def test_6_5_4_an_intermediarys_acknowledgment_does_not_stop_the_end_to_end_resends() -> None:
    # The acknowledgment requested of the To Party MSH is not the next MSH's (§10.1.3): resending goes on.
    interval = 10 * MIN
    sender = Sender(reliability(retries=3, retry_interval=interval, hop_ack=True))
    sender.submit()
    sender.feed(AcknowledgmentReceived(MID, ACTOR_NEXT_MSH, by_intermediary=True))
    assert sender.s.status is OutboundStatus.FORWARDED
    sender.advance(interval, outcome=TransmitSucceeded())
    assert len(sender.transmissions) == 2
    sender.feed(AcknowledgmentReceived(MID, ACTOR_TO_PARTY_MSH))
    assert status_of(sender) is OutboundStatus.DELIVERED
    sender.advance(timedelta(days=1))
    assert len(sender.transmissions) == 2


@clause(
    "6.5.4",
    1723,
    "If the Sending MSH does not receive an Acknowledgment Message after the maximum number of retries, the "
    "Sending MSH SHALL notify the application and/or system administrator function of the failure to receive an "
    "Acknowledgment Message",
)
def test_6_5_4_the_application_is_told_when_the_retries_end_without_acknowledgment() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        told: list[tuple[str, Issue]] = []
        a.on_failed = lambda message_id, issue: told.append((message_id, issue))
        net.faults.lose_answers = 1.0  # B answers every copy; A never hears it
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        assert len(a.attempts(message_id)) == RETRIES + 1
        [(failed_id, issue)] = told
        assert failed_id == message_id
        assert issue.error_code is ErrorCode.DELIVERY_FAILURE
        assert "no Acknowledgment" in issue.description
        assert status(a, message_id) is OutboundStatus.FAILED

    run(scenario)


@clause(
    "6.5.4",
    1725,
    "If the Sending MSH detects a communications protocol error, the Sending MSH MUST resend the message using "
    "the same algorithm as if it has not received an Acknowledgment Message.",
)
def test_6_5_4_a_communications_error_is_resent_like_a_missing_acknowledgment() -> None:
    lost, refused = Sender(reliability()), Sender(reliability())
    lost.submit()
    lost.feed(TransmitSucceeded())
    lost.advance(timedelta(days=1), outcome=TransmitSucceeded())
    refused.submit()
    refused.feed(TransmitFailed("connection refused", transmitted=False))
    refused.advance(timedelta(days=1), outcome=TransmitFailed("connection refused", transmitted=False))
    # The same resend times and the same number of resends.
    assert refused.transmissions == lost.transmissions
    assert len(refused.transmissions) == 4


@clause(
    "6.5.4",
    1725,
    "If the Sending MSH detects a communications protocol error, the Sending MSH MUST resend the message",
)
def test_6_5_4_a_partner_back_after_communications_errors_gets_the_message() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        net.faults.down.add(B_URL)
        message_id = await a.submit_async(order(1))
        await net.advance(RETRY_INTERVAL * 2)  # the first send and a resend are refused
        net.faults.down.clear()
        await net.run_until(final(a, message_id))
        assert status(a, message_id) is OutboundStatus.DELIVERED
        tries = a.attempts(message_id)
        assert len(tries) == 4 and all("connection refused" in (t.error or "") for t in tries[:3])
        assert inbox(b) == {message_id: 1}

    run(scenario)


# === §6.5.6 Duplicate Message Handling ======================================================================


@clause(
    "6.5.6",
    1751,
    'The sender of the message (e.g. Party A MSH) MUST resend the "identical message" if no Acknowledgment '
    "Message is received.",
)
def test_6_5_6_the_sender_resends_the_identical_message() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        recorder = Recorder(b)
        listen(net, B_URL, recorder)
        net.faults.lose_next_answers = 2
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        assert status(a, message_id) is OutboundStatus.DELIVERED
        # The same SOAP Header, Body and payload containers: here the very same bytes, three times.
        assert len(recorder.bodies) == 3
        assert len(set(recorder.bodies)) == 1

    run(scenario)


@clause(
    "6.5.6",
    1753,
    'When the recipient (Party B MSH) of the message receives a "duplicate message", it MUST resend to the '
    "sender (Party A MSH) an Acknowledgment Message identical to the first response message sent to the sender "
    "Party A MSH).",
)
def test_6_5_6_a_duplicate_gets_an_acknowledgment_identical_to_the_first_response() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        recorder = Recorder(b)
        listen(net, B_URL, recorder)
        net.faults.lose_next_answers = 2
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        bodies = [answer.body for answer in recorder.answers]
        assert len(bodies) == 3 and len(set(bodies)) == 1
        (ack,) = envelope_of(bodies[0], recorder.answers[0].content_type).acknowledgments
        assert ack.ref_to_message_id == message_id

    run(scenario)


@clause(
    "6.5.6",
    1753,
    'When the recipient (Party B MSH) of the message receives a "duplicate message", it MUST resend to the '
    "sender (Party A MSH) an Acknowledgment Message identical to the first response message",
)
def test_6_5_6_a_copy_with_other_header_bytes_is_a_duplicate_answered_with_the_first_response() -> None:
    # A "duplicate message" is one with the same MessageId (line 1744), whatever else its header says.
    receiver = Receiver()
    (first,) = acknowledgments(receiver.get(message()))
    copy = receiver.get(message(timestamp=NOW + MIN), now=NOW + 2 * MIN)
    assert copy.duplicate
    assert acknowledgments(copy) == [first]


@clause(
    "6.5.6",
    1756,
    "The recipient of the message (Party B MSH) MUST NOT forward the message a second time to the application/process.",
)
def test_6_5_6_the_recipient_never_hands_a_duplicate_to_the_application_again() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        handed: list[str] = []
        b.on_message = lambda entry_id, message_id: handed.append(message_id)
        net.faults.lose_answers = 1.0  # every copy reaches B, A resends them all
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        assert b.counters["duplicates"] == RETRIES
        assert inbox(b) == {message_id: 1}
        assert handed == [message_id]

    run(scenario)
    # A copy with a regenerated Timestamp is the same message: not handed over again either.
    receiver = Receiver()
    receiver.get(message())
    receiver.get(message(timestamp=NOW + MIN), now=NOW + 2 * MIN)
    assert receiver.delivered[MID] == 1


# === §6.5.2 Receiving Message Behavior ======================================================================


@clause(
    "6.5.2",
    1669,
    "The Receiving MSH MUST NOT deliver the message to the application interface.",
)
def test_6_5_2_a_duplicate_that_asks_for_an_acknowledgment_is_not_delivered_again() -> None:
    # Step 1 of "If an AckRequested element is present": a duplicate is acknowledged (§6.5.3), never delivered.
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        handed: list[str] = []
        b.on_message = lambda entry_id, message_id: handed.append(message_id)
        net.faults.lose_answers = 1.0  # every copy reaches B; A resends each one
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        copy = envelope_of(stored_body(a, message_id))
        assert copy.ack_requested and copy.message_header is not None and copy.message_header.duplicate_elimination
        assert b.counters["duplicates"] == RETRIES  # each resend was a duplicate, acknowledged
        assert handed == [message_id] and inbox(b) == {message_id: 1}

    run(scenario)


@clause(
    "6.5.2",
    1676,
    "The Receiving MSH MUST NOT send an Acknowledgment Message until the message has been safely stored in "
    "persistent storage or delivered to the application interface.",
)
def test_6_5_2_no_acknowledgment_leaves_before_the_message_is_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    # B's store refuses to keep the message for a while: while it does, no Acknowledgment may reach A (A keeps
    # resending); once B can store it, the acknowledgment comes and the message is delivered once.
    from msh.store.memory import _MemoryTransaction

    failing = {"on": True}
    insert = _MemoryTransaction.insert_inbound

    def refusing(self: _MemoryTransaction, **kw: object) -> int:
        if failing["on"]:
            raise OSError("disk full (a store that cannot keep the message)")
        return insert(self, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(_MemoryTransaction, "insert_inbound", refusing)

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        message_id = await a.submit_async(order(1))
        await net.advance(RETRY_INTERVAL * 2 + SEC)  # the first send and two resends, none stored by B
        assert status(a, message_id) is OutboundStatus.AWAITING_ACK
        assert a.attempts(message_id)[-1].number >= 3 and inbox(b) == {}
        failing["on"] = False
        await net.run_until(final(a, message_id))
        assert status(a, message_id) is OutboundStatus.DELIVERED and inbox(b) == {message_id: 1}

    run(scenario)


@clause(
    "6.5.2",
    1685,
    "However, it MUST NOT filter out perceived duplicate messages from their normal processing at that node.",
)
def test_6_5_2_an_intermediary_processes_every_copy_it_receives() -> None:
    # The §10.1 check shows it: two copies of one MessageId (with DuplicateElimination) reach an intermediary;
    # both are forwarded and acknowledged as the next MSH, none is eliminated.
    from tests.conformance import test_10_b_multihop_bindings as multihop_tests

    multihop_tests.test_10_1_an_intermediary_forwards_every_copy_of_a_message_it_has_seen_before()


# === §6.5.7 Failed Message Delivery =========================================================================


@clause(
    "6.5.7",
    1760,
    "If a message sent with an AckRequested element cannot be delivered, the MSH or process handling the message "
    "(as in the case of a routing intermediary) SHALL send a delivery failure notification to the From Party.",
)
def test_6_5_7_error_when_never_transmitted() -> None:
    # Line 1763: "Error if the party who detected the problem could not transmit the message".
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        told: list[Issue] = []
        a.on_failed = lambda message_id, issue: told.append(issue)
        net.faults.down.add(B_URL)
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        [issue] = told
        assert (issue.error_code, issue.severity) == (ErrorCode.DELIVERY_FAILURE, Severity.ERROR)
        assert b.inbox(None) == []

    run(scenario)


@clause(
    "6.5.7",
    1760,
    "If a message sent with an AckRequested element cannot be delivered, the MSH or process handling the message "
    "(as in the case of a routing intermediary) SHALL send a delivery failure notification to the From Party.",
)
def test_6_5_7_warning_when_transmitted_but_never_acknowledged() -> None:
    # Line 1765: "Warning if the message was transmitted, but an Acknowledgment Message was not received".
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        told: list[Issue] = []
        a.on_failed = lambda message_id, issue: told.append(issue)
        net.faults.lose_answers = 1.0
        message_id = await a.submit_async(order(1))
        await net.run_until(final(a, message_id))
        [issue] = told
        assert (issue.error_code, issue.severity) == (ErrorCode.DELIVERY_FAILURE, Severity.WARNING)

    run(scenario)


@clause(
    "6.5.7",
    1760,
    "If a message sent with an AckRequested element cannot be delivered, the MSH or process handling the message "
    "(as in the case of a routing intermediary) SHALL send a delivery failure notification to the From Party.",
)
def test_6_5_7_a_transmitted_attempt_makes_the_failure_a_warning_even_after_refusals() -> None:
    sender = Sender(reliability(retries=2))
    sender.submit()
    sender.feed(TransmitFailed("timed out waiting for the answer", transmitted=True))
    sender.advance(timedelta(days=1), outcome=TransmitFailed("connection refused", transmitted=False))
    (failed,) = sender.failures
    assert (failed.issue.error_code, failed.issue.severity) == (ErrorCode.DELIVERY_FAILURE, Severity.WARNING)
    never = Sender(reliability(retries=2))
    never.submit()
    never.feed(TransmitFailed("connection refused", transmitted=False))
    never.advance(timedelta(days=1), outcome=TransmitFailed("connection refused", transmitted=False))
    (failed,) = never.failures
    assert (failed.issue.error_code, failed.issue.severity) == (ErrorCode.DELIVERY_FAILURE, Severity.ERROR)


def run_routed(scenario: Callable[[TestNetwork], Awaitable[None]]) -> None:
    async def main() -> None:
        net = TestNetwork(seed=1)
        try:
            await scenario(net)
        finally:
            await net.close()

    asyncio.run(main())


@clause(
    "6.5.7",
    1760,
    "If a message sent with an AckRequested element cannot be delivered, the MSH or process handling the message "
    "(as in the case of a routing intermediary) SHALL send a delivery failure notification to the From Party.",
)
def test_6_5_7_a_routing_intermediary_that_cannot_deliver_sends_the_from_party_a_delivery_failure() -> None:
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(de=True, e2e=True, hop=True))
        await net.start()
        recorder = Recorder(p.a)
        listen(net, A_URL, recorder)
        net.faults.down.add(C_URL)
        message_id = await p.a.submit_async(routed_order(1))
        await net.run_until(final(p.a, message_id))
        # The intermediary never got the message to C: it sent A an Error Message with errorCode DeliveryFailure
        # and severity Error (line 1763: it could not transmit the message).
        failures = [n for n in recorder.envelopes if n.error_list is not None]
        assert failures, "no error message reached A"
        (notice,) = failures
        assert notice.message_header is not None
        assert notice.message_header.message_data.ref_to_message_id == message_id
        assert notice.message_header.to_party.party_ids[0].value == A_ID.value
        assert notice.error_list is not None
        assert [(e.code, e.severity) for e in notice.error_list.errors] == [
            (ErrorCode.DELIVERY_FAILURE, Severity.ERROR)
        ]
        stored = p.a.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.FAILED
        assert stored.state.evidence is Evidence.ERROR_MESSAGE

    run_routed(scenario)


@clause(
    "6.5.7",
    1769,
    "If this occurs, then the From Party, the ultimate destination for the Error Message, MUST be informed of the "
    "problem by other means.",
)
def test_6_5_7_an_intermediary_with_no_way_back_journals_the_delivery_failure_and_logs_it_at_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(net: TestNetwork) -> None:
        # The intermediary knows the way to C only: no route back to A, and no agreement of its own.
        only_to_c = Route("i1-to-c", C.value, C_URL, to_party_id_type=C.type, retries=2, retry_interval=xs(20 * SEC))
        p = multihop(net, routed_cpa(de=True, e2e=True, hop=True), intermediary_routes={1: (only_to_c,)})
        await net.start()
        net.faults.down.add(C_URL)
        message_id = await p.a.submit_async(routed_order(1))
        await net.run_until(lambda: p.hops[0].counters["delivery-failures-unsent"] > 0)
        with p.hops[0].store.transaction(readonly=True) as tx:
            kinds = [e.kind for e in tx.message_events(message_id, limit=1000)]
        assert "delivery-failure-unsent" in kinds

    with caplog.at_level(logging.ERROR, logger="msh"):
        run_routed(scenario)
    assert any(
        r.levelno >= logging.ERROR and "DeliveryFailure" in r.getMessage() and "other means" in r.getMessage()
        for r in caplog.records
    )


@clause(
    "6.5.7",
    1769,
    "If this occurs, then the From Party, the ultimate destination for the Error Message, MUST be informed of the "
    "problem by other means.",
)
def test_6_5_7_a_delivery_failure_that_cannot_reach_the_from_party_is_logged_at_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(net: TestNetwork) -> None:
        p = multihop(net, routed_cpa(de=True, e2e=True, hop=True), hop_retries=2)
        await net.start()
        net.faults.down.add(C_URL)
        message_id = await p.a.submit_async(routed_order(1))
        await net.settle()  # the intermediary took it (and acknowledged the hop)
        net.faults.down.add(A_URL)  # from now on A cannot be reached: the DeliveryFailure cannot get there
        await net.run_until(lambda: p.hops[0].counters["signal-failed"] > 0, limit=timedelta(days=2))
        with p.hops[0].store.transaction(readonly=True) as tx:
            kinds = [e.kind for e in tx.message_events(message_id, limit=1000)]
        assert "delivery-failure-queued" in kinds

    with caplog.at_level(logging.WARNING, logger="msh"):
        run_routed(scenario)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("DeliveryFailure" in r.getMessage() and "other means" in r.getMessage() for r in errors), [
        (r.levelname, r.getMessage()) for r in caplog.records
    ]
