"""``msh journal generate``: realistic synthetic journals, with reconciliation faults planted at known places.

A hub MSH exchanges messages with many partners whose volumes are skewed (Zipf-like: a few partners send
most of the traffic); every fifth partner is reached through an intermediary. Each message leaves the events
the MSHs on its path would journal (:mod:`msh.analytics.columns`): the sender's ``submitted``, one
``transmission`` per attempt (its ``detail`` with the URL, the HTTP status and the transport error of the
failed ones), the end-to-end ``delivered``,
``sent`` (a message that asked for no acknowledgment, handed over) or a ``failed`` DeliveryFailure (for
some, an ``expired`` event beside it: the TimeToLive ended them);
the intermediary's ``forward``; the receiver's ``received``, the ``duplicate`` it eliminated,
``app-delivered`` and ``app-taken``. Some messages need retries, some fail
(never reached the partner: severity Error), a few are still pending at the end (some past their retry
window: overdue).

A message planted as refused by its receiver has the receiver's ``rejected`` event and, at the sender, the
``error-received`` ErrorList (SecurityFailure, Inconsistent or NotSupported, with a description) and the
``failed`` DeliveryFailure; every ``failed`` event says why in its ``description``.

Planted faults, one list of MessageIds per reconciliation case, are written to ``faults.json`` beside the
journal (:data:`FAULT_CASES`), so that tests and reviewers can check that the report finds exactly them.
Everything follows from ``seed``: the same arguments give the same journal.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pyarrow as pa

from msh.analytics.columns import SCHEMA
from msh.analytics.dataset import write_days
from msh.errors import ConfigurationError
from msh.store.events import EventKind

__all__ = ["FAULT_CASES", "Generated", "generate_journal"]

FAULT_CASES: Final = (
    "sent_not_received",
    "received_twice",
    "acked_not_delivered",
    "delivered_not_acked",
    "failed_but_delivered",
    "refused_by_receiver",
)
"""The reconciliation cases (:mod:`msh.analytics.reconcile`), in the order the report lists them."""

HUB: Final = "urn:msh:hub"
RELAY: Final = "urn:msh:relay"
_SERVICES: Final = (("urn:svc:orders", ("NewOrder", "ChangeOrder", "CancelOrder")), ("urn:svc:invoices", ("Invoice",)))
_SERVICE_WEIGHTS: Final = (0.7, 0.3)
_TRANSPORT_ERRORS: Final = ("connection refused", "timeout", "TLS handshake failed", "HTTP 503")
# What a receiver says when it refuses a message (ebMS2 §4.2.3.4): errorCode, location, description.
_REFUSALS: Final = (
    ("SecurityFailure", "//Header/Signature", "the signature does not verify with the agreement's certificate"),
    ("Inconsistent", "//Header/MessageHeader/Service", "the agreement has no such service for this party"),
    ("NotSupported", "//Header/SyncReply", "synchronous replies are not supported"),
)
_RETRY: Final = timedelta(minutes=1)
_RETRIES: Final = 3
_WINDOW: Final = _RETRY * (_RETRIES + 1)
_CHUNK_EVENTS: Final = 250_000


@dataclass
class Generated:
    """What was generated: events and messages written, and the planted faults by case."""

    events: int = 0
    messages: int = 0
    files: int = 0
    faults: dict[str, list[str]] = field(default_factory=lambda: {case: [] for case in FAULT_CASES})


class _Columns:
    """The journal being generated, column by column, flushed to files every so many events."""

    def __init__(self, out: Path, flush: Callable[[pa.Table, str], int]) -> None:
        self.out = out
        self.flush_to = flush
        self.cols: dict[str, list[Any]] = {f.name: [] for f in SCHEMA}
        self.ids: dict[str, int] = {}
        self.parts = 0
        self.files = 0
        self.events = 0

    def add(
        self,
        source: str,
        at: datetime,
        kind: EventKind,
        facts: tuple[Any, ...],
        role: str,
        direction: str,
        *,
        attempt: int | None = None,
        severity: str | None = None,
        cause: str | None = None,
        deadline: datetime | None = None,
        detail: str = "{}",
    ) -> None:
        event_id = self.ids.get(source, 0) + 1
        self.ids[source] = event_id
        message_id, cpa_id, from_party, to_party, service, action, conversation_id, size = facts
        c = self.cols
        c["source"].append(source)
        c["event_id"].append(event_id)
        c["at"].append(at)
        c["kind"].append(kind)
        c["message_id"].append(message_id)
        c["direction"].append(direction)
        c["role"].append(role)
        c["cpa_id"].append(cpa_id)
        c["from_party"].append(from_party)
        c["to_party"].append(to_party)
        c["service"].append(service)
        c["action"].append(action)
        c["conversation_id"].append(conversation_id)
        c["size"].append(size)
        c["attempt"].append(attempt)
        c["severity"].append(severity)
        c["cause"].append(cause)
        c["deadline"].append(deadline)
        c["detail"].append(detail)
        self.events += 1

    def pending(self) -> int:
        return len(self.cols["source"])

    def flush(self) -> None:
        if not self.pending():
            return
        table = pa.table({name: pa.array(values, SCHEMA.field(name).type) for name, values in self.cols.items()})
        self.files += self.flush_to(table, f"part-generated-{self.parts:06d}")
        self.parts += 1
        for values in self.cols.values():
            values.clear()


def _partners(count: int) -> tuple[list[str], list[float]]:
    names = [f"urn:msh:partner:{i:03d}" for i in range(count)]
    # Zipf-like skew: partner i carries a share proportional to 1/(i+1).
    weights = [1.0 / (i + 1) for i in range(count)]
    return names, weights


def _plan_faults(rng: random.Random, messages: int, per_case: int) -> dict[int, str]:
    """Which message numbers get which planted fault (distinct messages, spread over the whole span)."""
    wanted = min(per_case * len(FAULT_CASES), max(0, messages // 4))
    chosen = rng.sample(range(messages), wanted)
    return {number: FAULT_CASES[i % len(FAULT_CASES)] for i, number in enumerate(sorted(chosen))}


def generate_journal(
    events: int,
    out: Path,
    *,
    seed: int = 14,
    partners: int = 40,
    days: int = 30,
    start: datetime = datetime(2026, 10, 1, tzinfo=UTC),
    faults_per_case: int = 5,
    progress: Callable[[int, int], None] | None = None,
) -> Generated:
    """Write a synthetic journal of about ``events`` events (at least that many: the last message is
    finished) under ``out``, and its planted faults in ``out/faults.json`` (see the module docs)."""
    if events < 1:
        raise ConfigurationError(f"--events must be at least 1, not {events}")
    if partners < 1 or days < 1:
        raise ConfigurationError("--partners and --days must be at least 1")
    if out.exists() and any(out.glob("day=*")):
        raise ConfigurationError(f"{out} already holds a journal; give an empty or new folder (--out)")
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    names, weights = _partners(partners)
    # About seven events per message over all journals on its path.
    messages = max(1, events // 7)
    faults = _plan_faults(rng, messages, faults_per_case)
    spacing = timedelta(days=days) / messages
    result = Generated()
    columns = _Columns(out, lambda table, name: write_days(table, out, name))
    number = 0
    while columns.events < events:
        partner = rng.choices(range(partners), weights)[0]
        outbound = rng.random() < 0.6
        sender, receiver = (HUB, names[partner]) if outbound else (names[partner], HUB)
        relayed = partner % 5 == 0
        service_index = 0 if rng.random() < _SERVICE_WEIGHTS[0] else 1
        service, actions = _SERVICES[service_index]
        action = actions[min(int(rng.expovariate(1.5)), len(actions) - 1)]
        message_id = f"{number:09d}.{rng.getrandbits(32):08x}@{sender.rsplit(':', 1)[-1]}.example"
        facts = (
            message_id,
            f"cpa:{HUB}:{names[partner]}",
            sender,
            receiver,
            service,
            action,
            f"conv-{number // 3}",
            int(min(rng.lognormvariate(9, 1.2), 50_000_000)),
        )
        submitted = start + spacing * number + timedelta(microseconds=rng.randrange(1_000_000))
        _message(columns, rng, facts, submitted, relayed, faults.get(number))
        if number in faults:
            result.faults[faults[number]].append(message_id)
        number += 1
        if columns.pending() >= _CHUNK_EVENTS:
            columns.flush()
            if progress is not None:
                progress(columns.events, events)
    columns.flush()
    if progress is not None:
        progress(columns.events, events)
    result.events, result.messages, result.files = columns.events, number, columns.files
    manifest = {"events": result.events, "messages": result.messages, "seed": seed, "faults": result.faults}
    (out / "faults.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return result


def _url(party: str) -> str:
    """The endpoint URL of a party's MSH (or of the intermediary, for a party behind it)."""
    return f"https://{'-'.join(party.split(':')[-2:])}.example/msh"


def _detail(**values: Any) -> str:
    """An event's ``detail`` as the store keeps it (JSON, the keys :mod:`msh.runtime.attempts` writes)."""
    return json.dumps(values, separators=(",", ":"))


def _transmissions(
    columns: _Columns, rng: random.Random, facts: tuple[Any, ...], at: datetime, outcome: str, url: str
) -> tuple[datetime | None, int, str | None]:
    """The sender's transmissions of a message: when the one that reached the partner did (None: none
    did), how many there were, and the last transport error."""
    sender = facts[2]
    attempts = 1 + min(int(rng.expovariate(2.2)), _RETRIES) if outcome != "failed" else _RETRIES + 1
    reached_at: datetime | None = None
    error: str | None = None
    answer = {"refused": "ErrorList", "sent": "no body", "lost": "no body"}.get(outcome, "Acknowledgment")
    for attempt in range(1, attempts + 1):
        last = attempt == attempts
        if last and outcome not in ("failed", "pending"):
            detail = _detail(attempt=attempt, url=url, httpStatus=200, error=None, answer=answer)
            columns.add(sender, at, EventKind.TRANSMISSION, facts, "sender", "outbound", attempt=attempt, detail=detail)
            reached_at = at
        else:
            error = rng.choice(_TRANSPORT_ERRORS)
            status = 503 if error == "HTTP 503" else None
            detail = _detail(
                attempt=attempt, url=url, httpStatus=status, error=error, answer=None if status is None else "no body"
            )
            columns.add(
                sender,
                at,
                EventKind.TRANSMISSION,
                facts,
                "sender",
                "outbound",
                attempt=attempt,
                cause=error,
                detail=detail,
            )
        if not last:
            at = at + _RETRY + timedelta(milliseconds=rng.randrange(0, 300))
    return reached_at, attempts, error


def _failed(
    columns: _Columns,
    facts: tuple[Any, ...],
    at: datetime,
    severity: str,
    description: str,
    evidence: str,
) -> None:
    """The DeliveryFailure told to the sender's application (ebMS2 §6.5.7), with its description."""
    detail = _detail(
        errorCode="DeliveryFailure",
        severity=severity,
        description=f"message {facts[0]}: {description}",
        evidence=evidence,
    )
    columns.add(
        facts[2],
        at,
        EventKind.FAILED,
        facts,
        "sender",
        "outbound",
        severity=severity,
        cause="DeliveryFailure",
        detail=detail,
    )


def _refused(columns: _Columns, rng: random.Random, facts: tuple[Any, ...], at: datetime, attempt: int) -> None:
    """The receiver refuses the message with an ErrorList (ebMS2 §4.2.3.4); the sender's application is told
    it failed, with what the receiver said."""
    code, location, text = rng.choice(_REFUSALS)
    issue = f"Error {code} at {location}: {text}"
    add = columns.add
    add(
        facts[3],
        at,
        EventKind.REJECTED,
        facts,
        "receiver",
        "inbound",
        severity="Error",
        cause=code,
        detail=_detail(issues=[issue]),
    )
    errors = [{"errorCode": code, "severity": "Error", "location": location, "description": text}]
    told = at + timedelta(milliseconds=30)
    add(
        facts[2],
        told,
        EventKind.ERROR_RECEIVED,
        facts,
        "sender",
        "outbound",
        attempt=attempt,
        severity="Error",
        cause=code,
        detail=_detail(attempt=attempt, errors=errors),
    )
    _failed(columns, facts, told, "Error", f"the receiving side reported an error: {issue}", "error-message")


def _message(
    columns: _Columns,
    rng: random.Random,
    facts: tuple[Any, ...],
    submitted: datetime,
    relayed: bool,
    fault: str | None,
) -> None:
    """The events of one message on its path (see the module docs)."""
    sender, receiver = facts[2], facts[3]
    add = columns.add
    deadline = submitted + _WINDOW
    add(sender, submitted, EventKind.SUBMITTED, facts, "sender", "outbound", deadline=deadline)
    roll = rng.random()
    # How it ends, unless a fault is planted: delivered (most), sent without an acknowledgment by design (an
    # agreement that asks for none, ebMS2 §6.6 rows 4 and 8), failed without reaching the partner, pending.
    outcome = "delivered" if roll < 0.965 else "sent" if roll < 0.975 else "failed" if roll < 0.99 else "pending"
    if fault is not None:
        outcome = {
            "sent_not_received": "lost",
            "received_twice": "delivered",
            "acked_not_delivered": "ack-without-delivery",
            "delivered_not_acked": "ack-lost",
            "failed_but_delivered": "failed-reached",
            "refused_by_receiver": "refused",
        }[fault]
    at = submitted + timedelta(milliseconds=rng.randrange(5, 400))
    url = _url(RELAY if relayed else receiver)
    reached_at, attempts, error = _transmissions(columns, rng, facts, at, outcome, url)
    if outcome == "failed":
        expired = rng.random() < 0.3  # its TimeToLive is what ended it (ebMS2 §3.1.6.4)
        why = f"could not be transmitted in {attempts} attempts (Retries {_RETRIES}): {error}"
        _failed(columns, facts, deadline, "Error", why, "time-to-live" if expired else "retries-exhausted")
        if expired:
            add(
                sender,
                deadline,
                EventKind.EXPIRED,
                facts,
                "sender",
                "outbound",
                severity="Error",
                cause="TimeToLiveExpired",
                detail=_detail(errorCode="TimeToLiveExpired", severity="Error"),
            )
        return
    if outcome == "pending" or reached_at is None:
        return
    if relayed:
        add(RELAY, reached_at + timedelta(milliseconds=20), EventKind.FORWARD, facts, "intermediary", "inbound")
        add(
            RELAY,
            reached_at + timedelta(milliseconds=40),
            EventKind.TRANSMISSION,
            facts,
            "intermediary",
            "outbound",
            attempt=1,
            detail=_detail(attempt=1, url=_url(receiver), httpStatus=200, error=None, answer="Acknowledgment"),
        )
    latency = timedelta(seconds=min(rng.lognormvariate(0, 0.9), _WINDOW.total_seconds() / 2))
    arrived = reached_at + latency / 2
    if outcome == "refused":
        _refused(columns, rng, facts, arrived, attempts)
        return
    if outcome == "sent":
        add(sender, reached_at + timedelta(milliseconds=10), EventKind.SENT, facts, "sender", "outbound")
    if outcome in ("delivered", "sent", "ack-lost", "failed-reached"):
        copies = 2 if fault == "received_twice" else 1
        for copy in range(copies):
            add(receiver, arrived + timedelta(seconds=copy), EventKind.RECEIVED, facts, "receiver", "inbound")
        if fault is None and rng.random() < 0.02:
            add(receiver, arrived + _RETRY, EventKind.DUPLICATE, facts, "receiver", "inbound")
        add(receiver, arrived + timedelta(seconds=5), EventKind.APP_DELIVERED, facts, "receiver", "inbound")
        add(receiver, arrived + timedelta(seconds=6), EventKind.APP_TAKEN, facts, "receiver", "inbound")
    if outcome in ("delivered", "ack-without-delivery"):
        add(sender, reached_at + latency, EventKind.DELIVERED, facts, "sender", "outbound")
    elif outcome == "failed-reached":
        why = (
            f"no Acknowledgment after {attempts} transmissions (Retries {_RETRIES}); it was transmitted, "
            "so it may have been delivered"
        )
        _failed(columns, facts, deadline, "Warning", why, "retries-exhausted")
