"""The delivery figures computed again in plain Python, from the journal files, without Spark: what the
Spark report (msh.analytics.figures, msh.analytics.reconcile) is checked against.

Written from the definitions in those modules' docs, not from their code: one loop over the events, dicts
of per-message facts, sorted lists for the percentiles.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds

Key = tuple[str, str | None, str | None, str | None, str | None, str]
"""(source, cpa_id, partner, service, action, day as YYYY-MM-DD)."""


def read_events(*folders: Path) -> list[dict[str, Any]]:
    """Every event of the journal folders, as dicts."""
    rows: list[dict[str, Any]] = []
    for folder in folders:
        files = sorted(str(p) for p in folder.glob("day=*/*.parquet"))
        rows += ds.dataset(files, format="parquet").to_table().to_pylist()
    return rows


def percentile(values: list[float], p: float) -> float | None:
    """The p-quantile with linear interpolation between the closest ranks (position p * (n - 1))."""
    if not values:
        return None
    ordered = sorted(values)
    position = p * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class Sent:
    source: str
    message_id: str
    cpa_id: str | None = None
    partner: str | None = None
    from_party: str | None = None
    service: str | None = None
    action: str | None = None
    submitted_at: datetime | None = None
    delivered_at: datetime | None = None
    handed_over_at: datetime | None = None
    failed_at: datetime | None = None
    severity: str | None = None
    cause: str | None = None
    attempts: int = 0
    reached: bool = False
    expired: bool = False
    deadline: datetime | None = None

    @property
    def key(self) -> Key:
        assert self.submitted_at is not None
        return (self.source, self.cpa_id, self.partner, self.service, self.action, self.submitted_at.date().isoformat())


def _earliest(current: datetime | None, at: datetime) -> datetime:
    return at if current is None or at < current else current


@dataclass
class Reference:
    """The figures of a journal: per key, and the reconciliation cases."""

    traffic: dict[Key, dict[str, Any]] = field(default_factory=dict)
    failures: Counter[tuple[Any, ...]] = field(default_factory=Counter)
    attempts: Counter[tuple[Any, ...]] = field(default_factory=Counter)
    cases: dict[str, set[str]] = field(default_factory=dict)
    forwarded_by: dict[str, str] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)


def _partner(event: dict[str, Any]) -> str | None:
    return event["from_party"] if event["role"] == "receiver" else event["to_party"]


def _day(at: datetime) -> str:
    return at.date().isoformat() if isinstance(at, datetime) else date.fromisoformat(str(at)).isoformat()


def compute(events: Iterable[dict[str, Any]], as_of: datetime | None = None) -> Reference:
    """The reference figures (see the module docs)."""
    events = list(events)
    latest = max(e["at"] for e in events)
    as_of = as_of or latest
    sent: dict[tuple[str, str], Sent] = {}
    inbound: dict[Key, Counter[str]] = defaultdict(Counter)
    received_copies: Counter[str] = Counter()
    receiver_parties: set[str] = set()
    sender_parties: set[str] = set()
    forwarders: dict[str, set[str]] = defaultdict(set)
    refused: set[str] = set()
    ref = Reference()
    for e in events:
        kind, role = e["kind"], e["role"]
        if kind == "submitted" and e["from_party"]:
            sender_parties.add(e["from_party"])
        if role == "sender" and e["message_id"] is not None:
            m = sent.setdefault((e["source"], e["message_id"]), Sent(e["source"], e["message_id"]))
            for name in ("cpa_id", "from_party", "service", "action"):
                if getattr(m, name) is None and e[name] is not None:
                    setattr(m, name, e[name])
            if m.partner is None and e["to_party"] is not None:
                m.partner = e["to_party"]
            if e["deadline"] is not None:
                m.deadline = e["deadline"] if m.deadline is None else max(m.deadline, e["deadline"])
            if kind == "submitted":
                m.submitted_at = _earliest(m.submitted_at, e["at"])
            elif kind == "delivered":
                m.delivered_at = _earliest(m.delivered_at, e["at"])
            elif kind == "sent":
                m.handed_over_at = _earliest(m.handed_over_at, e["at"])
            elif kind == "failed":
                m.failed_at = _earliest(m.failed_at, e["at"])
                m.severity, m.cause = e["severity"], e["cause"]
                ref.failures[
                    (
                        e["source"],
                        e["cpa_id"],
                        _partner(e),
                        e["service"],
                        e["action"],
                        _day(e["at"]),
                        e["severity"],
                        e["cause"],
                    )
                ] += 1
            elif kind == "expired":
                m.expired = True
            elif kind == "transmission":
                m.attempts = max(m.attempts, e["attempt"] or 0)
                if e["cause"] is None:
                    m.reached = True
        if role in ("receiver", "intermediary"):
            key = (e["source"], e["cpa_id"], _partner(e), e["service"], e["action"], _day(e["at"]))
            if kind == "received" and role == "receiver":
                inbound[key]["received"] += 1
                received_copies[e["message_id"]] += 1
                receiver_parties.add(e["to_party"])
            elif kind == "duplicate":
                inbound[key]["duplicates"] += 1
            elif kind == "rejected" and role == "receiver":
                refused.add(e["message_id"])
            elif kind == "forward" and role == "intermediary":
                inbound[key]["forwarded"] += 1
                forwarders[e["message_id"]].add(e["source"])
    submitted = [m for m in sent.values() if m.submitted_at is not None]
    latencies: dict[Key, list[float]] = defaultdict(list)
    zero = dict.fromkeys(
        (
            "sent",
            "received",
            "forwarded",
            "delivered",
            "unacknowledged",
            "failed",
            "failed_error",
            "failed_warning",
            "expired",
            "retried",
            "duplicates",
            "pending",
            "overdue",
        ),
        0,
    )
    for m in submitted:
        row = ref.traffic.setdefault(m.key, dict(zero))
        row["sent"] += 1
        delivered, failed = m.delivered_at is not None, m.failed_at is not None
        # The To party's word after a DeliveryFailure makes it delivered: the failure is not the outcome.
        row["delivered"] += delivered
        row["unacknowledged"] += m.handed_over_at is not None and not delivered and not failed
        row["failed"] += failed and not delivered
        row["failed_error"] += m.severity == "Error" and not delivered
        row["failed_warning"] += m.severity == "Warning" and not delivered
        row["expired"] += m.expired
        row["retried"] += m.attempts > 1
        still_open = not delivered and not failed and m.handed_over_at is None
        row["pending"] += still_open
        row["overdue"] += still_open and m.deadline is not None and m.deadline < as_of
        if m.delivered_at is not None and m.submitted_at is not None:
            latencies[m.key].append((m.delivered_at - m.submitted_at).total_seconds())
        ref.attempts[(*m.key, m.attempts)] += 1
    for key, counts in inbound.items():
        row = ref.traffic.setdefault(key, dict(zero))
        for name, n in counts.items():
            row[name] += n
    for key, row in list(ref.traffic.items()):
        if row["sent"] + row["received"] + row["duplicates"] + row["forwarded"] == 0:
            del ref.traffic[key]
            continue
        row["delivery_rate"] = row["delivered"] / row["sent"] if row["sent"] else None
        for p, name in ((0.5, "latency_p50_s"), (0.95, "latency_p95_s"), (0.99, "latency_p99_s")):
            row[name] = percentile(latencies.get(key, []), p)
    # Reconciliation (msh.analytics.reconcile's docs).
    covered = sender_parties | receiver_parties
    cases: dict[str, set[str]] = defaultdict(set)
    by_id = {m.message_id: m for m in submitted}
    for m in submitted:
        copies = received_copies.get(m.message_id, 0)
        judged = m.partner in covered
        acked, failed = m.delivered_at is not None, m.failed_at is not None
        if judged and copies == 0 and not acked and m.message_id in refused:
            cases["refused_by_receiver"].add(m.message_id)
        elif copies >= 2:
            cases["received_twice"].add(m.message_id)
        elif judged and copies == 0 and not acked and m.reached:
            cases["sent_not_received"].add(m.message_id)
        elif judged and copies == 0 and acked:
            cases["acked_not_delivered"].add(m.message_id)
        elif copies >= 1 and not acked and not failed and m.handed_over_at is None:
            cases["delivered_not_acked"].add(m.message_id)
        elif copies >= 1 and failed:
            cases["failed_but_delivered"].add(m.message_id)
    for message_id, copies in received_copies.items():
        if copies >= 2 and message_id not in by_id:
            cases["received_twice"].add(message_id)
    ref.cases = dict(cases)
    involved = set().union(*cases.values()) if cases else set()
    ref.forwarded_by = {m: ",".join(sorted(forwarders[m])) for m in involved if m in forwarders}
    ref.totals = {
        name: sum(int(row[name]) for row in ref.traffic.values())
        for name in (
            "sent",
            "received",
            "forwarded",
            "delivered",
            "unacknowledged",
            "failed_error",
            "failed_warning",
            "expired",
            "duplicates",
            "pending",
            "overdue",
        )
    }
    return ref


def _refused_with(detail: dict[str, Any]) -> dict[str, Any] | None:
    """The Error of an ErrorList that says why: the first of severity Error, else a DeliveryFailure."""
    errors = [e for e in detail.get("errors") or [] if isinstance(e, dict)]
    return next((e for e in errors if e.get("severity") == "Error"), None) or next(
        (e for e in errors if e.get("errorCode") == "DeliveryFailure"), None
    )


def failure_causes(events: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per failed message (source, MessageId) of the sending applications, its cause as
    msh.analytics.causes defines it: ``reason``, ``headline``, ``partner_code``, ``url``, ``error``."""
    import json

    sent: dict[tuple[str, str], dict[str, Any]] = {}
    for e in sorted(events, key=lambda e: (e["at"], e["event_id"])):
        if e["role"] != "sender" or e["message_id"] is None:
            continue
        m = sent.setdefault((e["source"], e["message_id"]), {"tries": [], "said": None, "expired": False})
        detail = json.loads(e["detail"]) if e["detail"] else {}
        kind = e["kind"]
        if kind == "submitted":
            m["submitted"] = True
        elif kind == "delivered":
            m["delivered"] = True
        elif kind == "failed":
            m["failed"] = True
        elif kind == "expired":
            m["expired"] = True
        elif kind == "transmission":
            m["tries"].append((e["attempt"] or 0, detail.get("url"), detail.get("error") or e["cause"], e["cause"]))
        elif kind == "error-received" and m["said"] is None:
            m["said"] = _refused_with(detail)
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for key, m in sent.items():
        if not (m.get("submitted") and m.get("failed")) or m.get("delivered"):
            continue
        last = max(m["tries"], key=lambda t: t[0]) if m["tries"] else None
        reached = any(t[3] is None for t in m["tries"])
        code = m["said"]["errorCode"] if m["said"] else None
        url = last[1] if last else None
        if code == "SecurityFailure":
            reason, headline = "security-failure", f"refused by the partner: {code}"
        elif code == "DeliveryFailure":
            reason, headline = "reported", "DeliveryFailure reported by the partner or the path"
        elif code is not None:
            reason, headline = "refused", f"refused by the partner: {code}"
        elif m["expired"]:
            reason, headline = "expired", "TimeToLive expired"
        elif not reached and last is not None:
            reason, headline = "unreachable", f"partner unreachable at {url or 'its endpoint'}"
        elif reached:
            reason, headline = "unacknowledged", "transmitted, never acknowledged"
        else:
            reason, headline = "other", "other"
        error = last[2] if last else None
        found[key] = {"reason": reason, "headline": headline, "partner_code": code, "url": url, "error": error}
    return found
