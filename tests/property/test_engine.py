"""Property-based tests: one sender and one receiver, driven only by the engine, over a hostile network.

Each transmission may be refused (the receiver is not there: nothing left the sender), lost on the way,
arrive twice, or arrive and lose its HTTP response; each asynchronous signal (acknowledgment, error) may be
lost or duplicated; the clock jumps arbitrarily and timers fire late. In-memory dicts stand in for the two
stores. Whatever happens, every submitted message ends either delivered to the receiving application
exactly once, or reported failed to the sender (and then the receiver saw it at most once); with
DuplicateElimination nothing is ever delivered twice. The oracles come from the specification's text:
``delivered`` only after the receiver committed the message (ebMS2 §6.5.2), ``sent`` only for a message
that asked for no acknowledgment (§6.6 rows 4 and 8), and a DeliveryFailure of severity Error only when no
attempt could be transmitted (§6.5.7: "Error if the party who detected the problem could not transmit the
message"), Warning when one was.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from hypothesis import event, given, settings
from hypothesis import strategies as st

from cpa.check import check
from cpa.duration import XsDuration
from cpa.model import CollaborationProtocolAgreement, PerMessage, SyncReplyMode
from msh.ebms import model as m
from msh.engine import timers
from msh.engine.receiving import (
    InboundDecision,
    OutboundEvent,
    RecordAcknowledgment,
    Reject,
    ReplySync,
    ResendStoredAck,
    SendAsync,
    StoredAck,
    StoredInbound,
    StoreInbound,
    receive,
)
from msh.engine.sending import (
    Action,
    CancelTimer,
    Event,
    NotifyDelivered,
    NotifyFailed,
    NotifySent,
    OutboundState,
    OutboundStatus,
    Reliability,
    ScheduleTimer,
    Submit,
    TimerDue,
    Transmit,
    TransmitFailed,
    TransmitSucceeded,
    step,
)
from msh.errors import Issue, Severity
from tests.support.cpa_factory import NOW, make_cpa, make_envelope

MIN = timedelta(minutes=1)
XS_MIN = XsDuration(0, 60_000_000)


@dataclass(frozen=True)
class Setup:
    reliability: Reliability
    ttl_after: timedelta | None
    sync: bool
    duplicate_elimination: bool
    drain_delivers: bool


@st.composite
def setups(draw: st.DrawFn) -> Setup:
    reliability = Reliability(
        retries=draw(st.integers(0, 4)),
        retry_interval=draw(st.integers(1, 30)) * XS_MIN,
        first_resend_timeout=draw(st.integers(1, 30)) * XS_MIN,
        persist_duration=draw(st.none() | st.integers(5, 180).map(lambda n: n * XS_MIN)),
        time_to_live=None,
        ack_requested=draw(st.booleans() | st.just(True)),
    )
    return Setup(
        reliability,
        draw(st.none() | st.integers(5, 240).map(lambda n: n * MIN)),
        draw(st.booleans()),
        draw(st.booleans() | st.just(True)),
        draw(st.booleans()),
    )


index = st.integers(0, 20)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("submit")),
        st.tuples(st.just("arrive"), index, st.booleans(), st.booleans()),
        st.tuples(st.just("arrive"), index, st.booleans(), st.booleans()),
        st.tuples(st.just("lose"), index, st.booleans()),
        st.tuples(st.just("signal"), index, st.booleans()),
        st.tuples(st.just("signal"), index, st.booleans()),
        st.tuples(st.just("drop-signal"), index),
        st.tuples(st.just("advance"), st.integers(0, 150)),
    ),
    max_size=80,
)
# Every run starts with a few messages submitted; more may come among the operations.
programs = st.tuples(st.integers(1, 3), operations).map(lambda p: [("submit",)] * p[0] + p[1])


@dataclass
class World:
    """The two MSHs and the wire between them. Only the engine decides; this class only carries."""

    setup: Setup
    cpa: CollaborationProtocolAgreement
    now: datetime = NOW
    # sender store
    states: dict[str, OutboundState] = field(default_factory=dict)
    outbox: dict[str, m.Envelope] = field(default_factory=dict)
    timer_rows: dict[str, datetime] = field(default_factory=dict)
    notices: dict[str, list[Action]] = field(default_factory=dict)
    transmitted: set[str] = field(default_factory=set)
    """The messages of which at least one copy left the sender (arrived, or was lost on the way)."""
    refusals: Counter[str] = field(default_factory=Counter)
    """Attempts the sender was told were refused (never left)."""
    all_refused_when_failed: dict[str, bool] = field(default_factory=dict)
    """At the DeliveryFailure: did the sender know every attempt it had issued was refused?"""
    # receiver store
    inbound: dict[str, StoredInbound] = field(default_factory=dict)
    delivered: Counter[str] = field(default_factory=Counter)
    receiver_duplicates: Counter[str] = field(default_factory=Counter)
    # the wire: HTTP exchanges in flight, asynchronous signals travelling back
    wire: list[str] = field(default_factory=list)
    back: list[StoredAck] = field(default_factory=list)
    ids: int = 0

    def new_id(self, side: str) -> str:
        self.ids += 1
        return f"{side}-{self.ids}@example"

    # --- sender -------------------------------------------------------------------------------------

    def submit(self) -> None:
        mid = self.new_id("m")
        ttl = self.now + self.setup.ttl_after if self.setup.ttl_after is not None else None
        env = make_envelope(
            timestamp=self.now,
            time_to_live=ttl,
            duplicate_elimination=self.setup.duplicate_elimination,
            ack_requested=self.setup.reliability.ack_requested,
            sync_reply=self.setup.sync,
        )
        assert env.message_header is not None
        data = replace(env.message_header.message_data, message_id=mid)
        self.outbox[mid] = replace(env, message_header=replace(env.message_header, message_data=data))
        self.notices[mid] = []
        self.sender_step(mid, Submit(mid, replace(self.setup.reliability, time_to_live=ttl)))

    def sender_step(self, mid: str, event: Event) -> None:
        before = self.states.get(mid)
        state, actions = step(before, event, self.now)
        self.states[mid] = state
        for action in actions:
            if isinstance(action, ScheduleTimer):
                assert action.due_at > self.now or action.due_at == state.next_due_at
                if state.first_sent_at is not None:
                    limit = timers.deadline(state.reliability, state.first_sent_at)
                    assert limit is None or action.due_at <= limit, "timer scheduled past the deadline"
                self.timer_rows[mid] = action.due_at
            elif isinstance(action, CancelTimer):
                self.timer_rows.pop(mid, None)
            elif isinstance(action, Transmit):
                assert action.attempt == state.attempts <= state.reliability.retries + 1
                self.wire.append(mid)
            elif isinstance(action, (NotifyDelivered, NotifySent, NotifyFailed)):
                if isinstance(action, NotifyFailed):
                    self.all_refused_when_failed[mid] = self.refusals[mid] >= state.attempts
                told = self.notices[mid]
                told.append(action)
                # Told once; only the To party's word may follow a verdict that could not see it (ebMS2 §6.5.2).
                assert len(told) == 1 or (len(told) == 2 and isinstance(action, NotifyDelivered)), told

    def sender_inbound(self, message: StoredAck) -> None:
        assert isinstance(message, m.Envelope)
        decision = receive(
            message,
            check_result=check(message, self.cpa, now=self.now),
            duplicate=None,
            now=self.now,
            new_message_id=self.new_id("a"),
        )
        for action in decision.actions:
            # Signals are never answered: no loop of acknowledgments or errors.
            assert not isinstance(action, (ReplySync, SendAsync, ResendStoredAck, Reject, StoreInbound)), action
            if isinstance(action, OutboundEvent) and action.message_id in self.states:
                self.sender_step(action.message_id, action.event)

    def fire_timers(self) -> None:
        while True:
            due = sorted((at, mid) for mid, at in self.timer_rows.items() if at <= self.now)
            if not due:
                return
            _, mid = due[0]
            del self.timer_rows[mid]
            self.sender_step(mid, TimerDue())

    # --- receiver -----------------------------------------------------------------------------------

    def receiver_take(self, mid: str) -> InboundDecision:
        env = self.outbox[mid]  # the identical stored message, every attempt (docs/design.md §5.1)
        decision = receive(
            env,
            check_result=check(env, self.cpa, now=self.now),
            duplicate=self.inbound.get(mid),
            now=self.now,
            new_message_id=self.new_id("r"),
        )
        if decision.duplicate:
            self.receiver_duplicates[mid] += 1
        for action in decision.actions:
            if isinstance(action, StoreInbound):
                self.inbound.setdefault(mid, StoredInbound(mid, action.record_ack, False))
                if action.deliver:
                    self.delivered[mid] += 1
            elif isinstance(action, RecordAcknowledgment):
                self.inbound[mid] = replace(self.inbound[mid], acknowledgment=action.acknowledgment)
        self.back.extend(message for message, _ in decision.async_replies)
        return decision

    # --- the wire -----------------------------------------------------------------------------------

    def arrive(self, i: int, twice: bool, response_lost: bool) -> None:
        mid = self.wire.pop(i % len(self.wire))
        self.transmitted.add(mid)
        decision = self.receiver_take(mid)
        if twice:
            self.receiver_take(mid)  # a network duplicate: its own response goes nowhere
        if response_lost:
            self.sender_step(mid, TransmitFailed("timed out waiting for the response"))
            return
        if decision.sync_reply is not None:
            self.sender_inbound(decision.sync_reply)
        self.sender_step(mid, TransmitSucceeded())

    def lose(self, i: int, refused: bool) -> None:
        mid = self.wire.pop(i % len(self.wire))
        if refused:
            # Nobody listening: the request never left (the transport tells the sender so).
            self.refusals[mid] += 1
            self.sender_step(mid, TransmitFailed("connection refused", transmitted=False))
            return
        self.transmitted.add(mid)  # lost on the way: it was transmitted
        self.sender_step(mid, TransmitFailed("connection reset"))

    def signal(self, i: int, twice: bool) -> None:
        message = self.back.pop(i % len(self.back))
        self.sender_inbound(message)
        if twice:
            self.sender_inbound(message)

    def run(self, ops: list[tuple[object, ...]]) -> None:
        for op in ops:
            kind = op[0]
            if kind == "submit":
                self.submit()
            elif kind == "arrive" and self.wire:
                self.arrive(int(op[1]), bool(op[2]), bool(op[3]))  # type: ignore[call-overload]
            elif kind == "lose" and self.wire:
                self.lose(int(op[1]), bool(op[2]))  # type: ignore[call-overload]
            elif kind == "signal" and self.back:
                self.signal(int(op[1]), bool(op[2]))  # type: ignore[call-overload]
            elif kind == "drop-signal" and self.back:
                self.back.pop(int(op[1]) % len(self.back))  # type: ignore[call-overload]
            elif kind == "advance":
                self.now += int(op[1]) * MIN  # type: ignore[call-overload]
                self.fire_timers()
            if self.setup.duplicate_elimination:
                assert max(self.delivered.values(), default=0) <= 1, self.delivered

    def drain(self) -> None:
        """Let the network settle (perfect or dead) and time run until every message is final."""
        for _ in range(10_000):
            if all(s.status.final for s in self.states.values()):
                return
            if self.wire:
                if self.setup.drain_delivers:
                    self.arrive(0, False, False)
                else:
                    self.lose(0, refused=True)
            elif self.back:
                if self.setup.drain_delivers:
                    self.signal(0, False)
                else:
                    self.back.pop(0)
            else:
                assert self.timer_rows, f"a live message without a timer: {self.states}"
                self.now = max(self.now, min(self.timer_rows.values()))
                self.fire_timers()
        raise AssertionError("the messages never settled")


def _from_peer(issue: Issue) -> bool:
    return "reported an error" in issue.description


@settings(max_examples=500, deadline=None)
@given(setup=setups(), ops=programs)
def test_every_message_is_delivered_once_or_reported_failed(setup: Setup, ops: list[tuple[object, ...]]) -> None:
    cpa = make_cpa(
        sync_reply_mode=SyncReplyMode.MSH_SIGNALS_ONLY if setup.sync else SyncReplyMode.NONE,
        ack_requested=PerMessage.PER_MESSAGE,
        duplicate_elimination=PerMessage.PER_MESSAGE,
    )
    world = World(setup, cpa)
    world.run(ops)
    world.drain()
    statuses = Counter(s.status.value for s in world.states.values())
    delivered, failed = statuses["delivered"] > 0, statuses["failed"] > 0
    event(f"messages: {min(len(world.states), 3)}+, delivered: {delivered}, failed: {failed}")
    event(f"receiver saw a duplicate: {any(world.receiver_duplicates.values())}")
    refused = any(s.failure is not None and _from_peer(s.failure) for s in world.states.values())
    event(f"refused by the receiver: {refused}")
    for mid, state in world.states.items():
        told = world.notices[mid]
        notice = told[-1]
        seen = world.delivered[mid]
        if setup.duplicate_elimination:
            assert seen <= 1
        if state.status is OutboundStatus.DELIVERED:
            assert isinstance(notice, NotifyDelivered) and setup.reliability.ack_requested
            # ebMS2 §6.5.2: acknowledged only after the receiver committed it.
            assert seen == 1 if setup.duplicate_elimination else seen >= 1
        elif state.status is OutboundStatus.SENT:
            # ebMS2 §6.6 rows 4 and 8: no acknowledgment asked; the receiver's HTTP server took it.
            assert isinstance(notice, NotifySent) and not setup.reliability.ack_requested
            assert seen == 1 if setup.duplicate_elimination else seen >= 1
        else:
            assert state.status is OutboundStatus.FAILED
            assert isinstance(notice, NotifyFailed)
            assert notice.issue == state.failure
            if not _from_peer(notice.issue):
                # ebMS2 §6.5.7: "Error if the party who detected the problem could not transmit the message",
                # "Warning if the message was transmitted, but an Acknowledgment Message was not received".
                if mid in world.transmitted:
                    assert notice.issue.severity is Severity.WARNING
                elif world.all_refused_when_failed[mid]:
                    assert notice.issue.severity is Severity.ERROR
                # (Else an attempt's outcome was not yet known when the sender gave up: it may have left, and
                # Warning, "may have been delivered", is the only severity that cannot be untrue.)
            if notice.issue.severity is Severity.ERROR:
                assert seen == 0  # an Error says it was not delivered: it must not have been
        if len(told) == 2:
            # A late delivery follows only a verdict that left room for it (sent, or failed with Warning).
            first = told[0]
            assert isinstance(first, NotifySent) or (
                isinstance(first, NotifyFailed) and first.issue.severity is Severity.WARNING
            )
        assert mid not in world.timer_rows


# Durations as agreements write them: minutes, or months and minutes (P1M, P2MT30M), so that the day of the
# month moves (a start on the 31st is pinned to the end of shorter months).
_waits = st.builds(
    lambda months, minutes: XsDuration(months, minutes * 60_000_000), st.integers(0, 2), st.integers(0, 60)
)


@settings(max_examples=300, deadline=None)
@given(
    retries=st.integers(0, 6),
    first=_waits,
    interval=_waits,
    persist=st.none() | _waits.map(lambda d: 7 * d),
    ttl=st.none() | st.integers(0, 400 * 24 * 60),
    start=st.sampled_from([NOW, NOW.replace(month=1, day=31), NOW.replace(year=2028, month=2, day=29)]),
    lateness=st.lists(st.integers(0, 30), min_size=8, max_size=8),
)
def test_the_retry_schedule_respects_every_bound(
    retries: int,
    first: XsDuration,
    interval: XsDuration,
    persist: XsDuration | None,
    ttl: int | None,
    start: datetime,
    lateness: list[int],
) -> None:
    r = Reliability(retries, interval, first, persist, None if ttl is None else start + ttl * MIN, True)
    sends, fail_at, _ = timers.nominal_schedule(r, start)
    limit = timers.deadline(r, start)
    assert 1 <= len(sends) <= retries + 1
    assert limit is None or fail_at <= limit or sends == (start,)
    # Drive the machine with late timers: gaps are never shorter than the waits, nothing past the deadline.
    now, (state, actions) = start, step(None, Submit("x", r), start)
    sent = [now] if any(isinstance(a, Transmit) for a in actions) else []
    for late in lateness:
        if state.next_due_at is None:
            break
        now = state.next_due_at + late * MIN
        state, actions = step(state, TimerDue(), now)
        if any(isinstance(a, Transmit) for a in actions):
            sent.append(now)
    assert len(sent) <= retries + 1
    for k in range(1, len(sent)):
        wait = r.first_resend_timeout if k == 1 else r.retry_interval
        # XML Schema Part 2 Appendix E: the wait ends at the duration added to the previous transmission.
        assert sent[k] >= wait.add_to(sent[k - 1])
        assert limit is None or sent[k] < limit


_starts = st.sampled_from(
    [
        NOW,
        NOW.replace(month=1, day=31),
        NOW.replace(year=2028, month=2, day=29),
        NOW.replace(year=1990),
        NOW.replace(year=9999, month=12, day=30),
    ]
)


# A wait of 8,500 years: the schedule from any first send reaches the latest representable instant.
_ages = st.just(XsDuration(0, 8_500 * 365 * 86_400 * 10**6))


@settings(max_examples=300, deadline=None)
@given(
    retries=st.integers(0, 6),
    first=_waits | _ages,
    interval=_waits | _ages,
    persist=st.none() | _waits.map(lambda d: 7 * d) | _ages,
    ttl=st.none() | st.integers(0, 400 * 24 * 60),
    starts=st.lists(_starts, min_size=1, max_size=4),
)
def test_the_end_to_end_deadline_is_where_the_schedule_gives_up(
    retries: int,
    first: XsDuration,
    interval: XsDuration,
    persist: XsDuration | None,
    ttl: int | None,
    starts: list[datetime],
) -> None:
    # ebMS2 §6.4.3, §6.4.6, §3.1.6.4: the window ends where the retry schedule gives up, from whatever first
    # send; the same parameters from several first sends (one agreement, many messages) each get their own.
    for start in starts:
        r = Reliability(retries, interval, first, persist, None if ttl is None else NOW + ttl * MIN, True)
        assert timers.end_to_end_deadline(r, start) == timers.nominal_schedule(r, start)[1]
