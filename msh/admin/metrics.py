"""``/metrics``: what one MSH does, in the Prometheus text format, with the official ``prometheus-client``.

Every MSH has a :class:`~prometheus_client.CollectorRegistry` of its own (no global state: several MSHs in
one process, as in the test network, each count their own). Nothing is counted twice over:

* the counters and histograms are fed by the journal: the store writer tells :class:`MshMetrics` of each
  commit (:meth:`msh.store.writer.Writer.watch`) with the events its units appended, so a count moves only
  when what it counts is durable, and the commit's own duration feeds ``msh_store_commit_seconds``;
* the gauges are read when scraped (:class:`_Gauges`): the transmissions in flight, the timers due and the
  inbox from the store (:meth:`msh.store.api.Transaction.backlog`), each certificate's days to expiry
  (:mod:`msh.runtime.certificates`), the agreements loaded, the build.

Counters start at zero when the MSH starts and count what this process commits (Prometheus' ``rate()`` and
``increase()`` take restarts in their stride). :data:`METRICS` lists every family with its labels and
meaning: docs/operating.md's table, the sample alert rules and the Grafana dashboard use only these names
(a test checks it).
"""

from __future__ import annotations

import logging
import platform
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from msh.runtime.certificates import NamedCertificate
from msh.runtime.msh import Msh
from msh.store.api import Event, EventKind, InboxState
from msh.store.writer import Committed

__all__ = ["METRICS", "MetricInfo", "MshMetrics", "build_version", "metrics_table"]

log = logging.getLogger("msh.admin")

_PENDING_LIMIT: Final = 100_000  # submitted messages awaiting their acknowledgment, remembered for the latency
_LATENCY_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600)
_COMMIT_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


@dataclass(frozen=True, slots=True)
class MetricInfo:
    """A metric family as exposed: its name (as in the text format), type, labels and meaning."""

    name: str
    type: str
    labels: tuple[str, ...]
    meaning: str


_PARTY = ("partner", "agreement")

METRICS: Final = (
    MetricInfo(
        "msh_messages_submitted_total",
        "counter",
        _PARTY,
        "messages the applications submitted for sending through this process (Python API, REST, SOAP; a "
        "message `msh send` commits is counted by `msh_messages_sent_total` and `msh_transmissions_total` only)",
    ),
    MetricInfo(
        "msh_messages_sent_total",
        "counter",
        (*_PARTY, "outcome"),
        "our messages whose sending ended well: `delivered` (acknowledged) or `sent` (no acknowledgment by design)",
    ),
    MetricInfo("msh_messages_received_total", "counter", _PARTY, "messages received and stored for the application"),
    MetricInfo(
        "msh_messages_forwarded_total", "counter", _PARTY, "messages received for another party, stored to forward"
    ),
    MetricInfo(
        "msh_messages_failed_total",
        "counter",
        (*_PARTY, "severity", "role"),
        "DeliveryFailures: our messages (`role` sender) or forwards (`role` intermediary) given up, by severity "
        "(`Error`: never reached the partner, `Warning`: reached it, not acknowledged)",
    ),
    MetricInfo(
        "msh_messages_rejected_total",
        "counter",
        (*_PARTY, "severity"),
        "received messages refused with an ErrorList, by the severity of the errors",
    ),
    MetricInfo(
        "msh_duplicates_eliminated_total",
        "counter",
        _PARTY,
        "copies of received messages eliminated as duplicates (ebMS2 §6.4.1)",
    ),
    MetricInfo(
        "msh_transmissions_total",
        "counter",
        (*_PARTY, "outcome"),
        "transmissions (first sends and resends) by outcome: `acknowledged` (on the connection), `accepted` "
        "(HTTP 2xx, nothing wrong), `refused` (an error answer: HTTP error, ErrorList, SOAP Fault), "
        "`unreachable` (no answer: connection, TLS, timeout)",
    ),
    MetricInfo(
        "msh_acknowledgment_latency_seconds",
        "histogram",
        ("partner",),
        "from a message's submission to its acknowledgment (retries included), for messages submitted through "
        "this process",
    ),
    MetricInfo("msh_store_commit_seconds", "histogram", (), "the duration of each store commit (the disk flush)"),
    MetricInfo("msh_transmissions_in_flight", "gauge", (), "transmissions under way (waiting for their answer)"),
    MetricInfo("msh_timers_due", "gauge", (), "timers due and not yet taken by a timer loop (the backlog)"),
    MetricInfo("msh_timer_lag_seconds", "gauge", (), "how long the oldest due timer has waited (0: none waits)"),
    MetricInfo("msh_inbox_messages", "gauge", ("state",), "inbox entries in each state"),
    MetricInfo(
        "msh_inbox_oldest_age_seconds",
        "gauge",
        (),
        "the age of the oldest received message the application has not settled (new or delivered-to-app)",
    ),
    MetricInfo("msh_store_reachable", "gauge", (), "1 when the store answered the scrape's read, else 0"),
    MetricInfo("msh_agreements_loaded", "gauge", (), "agreements in force"),
    MetricInfo(
        "msh_certificate_expiry_days",
        "gauge",
        ("source", "name", "subject"),
        "days until a certificate expires (negative: expired): ours (`source` the setting) and the agreements' "
        "(`source` agreement CPAID)",
    ),
    MetricInfo("msh_build_info", "gauge", ("version", "python", "party"), "always 1: the version running"),
)
"""Every metric family ``/metrics`` exposes."""

_ABOUT: Final = {m.name: m for m in METRICS}


def metrics_table() -> str:
    """The Markdown table of :data:`METRICS` (docs/operating.md's "Metrics" holds it; a test compares)."""
    rows = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for m in METRICS:
        labels = ", ".join(f"`{label}`" for label in m.labels) or "—"
        rows.append(f"| `{m.name}` | {m.type} | {labels} | {m.meaning} |")
    return "\n".join(rows) + "\n"


def build_version() -> str:
    try:
        return metadata.version("pymsh")
    except metadata.PackageNotFoundError:
        return "unknown"


def _partner(event: Event) -> str:
    """The other party of an event's message: the To party of what we send, the From party of what we get."""
    party = event.to_party if event.direction is not None and event.direction.value == "outbound" else event.from_party
    return party or ""


def _transmission_outcome(detail: dict[str, object]) -> str:
    if detail.get("httpStatus") is None:
        return "unreachable"
    if detail.get("error") is not None:
        return "refused"
    answer = detail.get("answer")
    return "acknowledged" if isinstance(answer, str) and "Acknowledgment" in answer else "accepted"


class MshMetrics:
    """The metrics of one MSH in a registry of their own (see the module docs); :meth:`watch` starts the
    counting from the journal."""

    def __init__(self, msh: Msh, certificates: Callable[[], Iterable[NamedCertificate]] = tuple) -> None:
        self.msh = msh
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry

        def counter(name: str) -> Counter:
            about = _ABOUT[name]
            return Counter(name.removesuffix("_total"), about.meaning, about.labels, registry=r)

        self.submitted = counter("msh_messages_submitted_total")
        self.sent = counter("msh_messages_sent_total")
        self.received = counter("msh_messages_received_total")
        self.forwarded = counter("msh_messages_forwarded_total")
        self.failed = counter("msh_messages_failed_total")
        self.rejected = counter("msh_messages_rejected_total")
        self.duplicates = counter("msh_duplicates_eliminated_total")
        self.transmissions = counter("msh_transmissions_total")
        latency, commits = _ABOUT["msh_acknowledgment_latency_seconds"], _ABOUT["msh_store_commit_seconds"]
        self.latency = Histogram(latency.name, latency.meaning, latency.labels, buckets=_LATENCY_BUCKETS, registry=r)
        self.commits = Histogram(commits.name, commits.meaning, buckets=_COMMIT_BUCKETS, registry=r)
        r.register(_Gauges(msh, certificates))
        self._pending: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def text(self) -> bytes:
        """The scrape: every family in the Prometheus text format, without the ``_created`` samples (the text
        format would turn each into a gauge series of its own beside the counter)."""
        return generate_latest(_WithoutCreated(self.registry))

    def watch(self) -> None:
        """Count from the MSH's commits from now on."""
        self.msh.writer.watch(self.committed)

    def committed(self, commit: Committed) -> None:
        """One commit's journal events and duration, counted (the writer's watcher)."""
        self.commits.observe(commit.commit_seconds)
        for event in commit.events:
            self.count(event)

    def count(self, event: Event) -> None:
        """One committed journal event, counted where it counts."""
        party = (_partner(event), event.cpa_id or "")
        kind = event.kind
        if kind == EventKind.SUBMITTED:
            self.submitted.labels(*party).inc()
            self._remember(event)
        elif kind in (EventKind.DELIVERED, EventKind.SENT):
            self.sent.labels(*party, kind).inc()
            self._acknowledged(event, party[0] if kind == EventKind.DELIVERED else None)
        elif kind == EventKind.RECEIVED:
            self.received.labels(*party).inc()
        elif kind == EventKind.FORWARD:
            self.forwarded.labels(*party).inc()
        elif kind in (EventKind.FAILED, EventKind.FORWARD_FAILED):
            role = "sender" if kind == EventKind.FAILED else "intermediary"
            self.failed.labels(*party, event.severity or "Error", role).inc()
            self._acknowledged(event, None)
        elif kind == EventKind.REJECTED:
            self.rejected.labels(*party, event.severity or "Error").inc()
        elif kind == EventKind.DUPLICATE:
            self.duplicates.labels(*party).inc()
        elif kind == EventKind.TRANSMISSION:
            self.transmissions.labels(*party, _transmission_outcome(event.detail)).inc()

    def _remember(self, event: Event) -> None:
        if event.message_id is None:
            return
        with self._lock:
            if len(self._pending) >= _PENDING_LIMIT:
                self._pending.pop(next(iter(self._pending)))  # the oldest submission goes unmeasured
            self._pending[event.message_id] = event.at

    def _acknowledged(self, event: Event, partner: str | None) -> None:
        """The sending of ``event``'s message ended; with ``partner``, by an acknowledgment (measured)."""
        if event.message_id is None:
            return
        with self._lock:
            submitted = self._pending.pop(event.message_id, None)
        if submitted is not None and partner is not None:
            self.latency.labels(partner).observe(max(0.0, (event.at - submitted).total_seconds()))


class _WithoutCreated(Collector):
    """``registry``'s metrics without their ``_created`` samples."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield metric


class _Gauges(Collector):
    """The gauges, read at scrape time (see the module docs)."""

    def __init__(self, msh: Msh, certificates: Callable[[], Iterable[NamedCertificate]]) -> None:
        self.msh = msh
        self.certificates = certificates

    def describe(self) -> Iterable[Metric]:
        return []  # read at scrape time: nothing to describe ahead

    def collect(self) -> Iterator[Metric]:
        msh = self.msh
        now = msh.clock()
        info = _ABOUT

        def gauge(name: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, info[name].meaning, value=value)

        yield gauge("msh_transmissions_in_flight", msh.sender.transmissions_in_flight)
        yield gauge("msh_agreements_loaded", len(msh.registry))
        build = GaugeMetricFamily(
            "msh_build_info", info["msh_build_info"].meaning, labels=info["msh_build_info"].labels
        )
        build.add_metric([build_version(), platform.python_version(), msh.party[0]], 1)
        yield build
        yield from self._store(now, info)
        expiry = info["msh_certificate_expiry_days"]
        days = GaugeMetricFamily(expiry.name, expiry.meaning, labels=expiry.labels)
        for certificate in self.certificates():
            days.add_metric([certificate.source, certificate.name, certificate.subject], certificate.days_left(now))
        yield days

    def _store(self, now: datetime, info: Mapping[str, MetricInfo]) -> Iterator[Metric]:
        try:
            with self.msh.store.transaction(readonly=True) as tx:
                backlog = tx.backlog(now)
        except Exception as exc:  # an unreachable store is a value to scrape, not a failed scrape
            log.warning("metrics: the store cannot be read: %s", exc)
            yield GaugeMetricFamily("msh_store_reachable", info["msh_store_reachable"].meaning, value=0)
            return
        yield GaugeMetricFamily("msh_store_reachable", info["msh_store_reachable"].meaning, value=1)
        yield GaugeMetricFamily("msh_timers_due", info["msh_timers_due"].meaning, value=backlog.timers_due)
        lag = 0.0 if backlog.oldest_due is None else max(0.0, (now - backlog.oldest_due).total_seconds())
        yield GaugeMetricFamily("msh_timer_lag_seconds", info["msh_timer_lag_seconds"].meaning, value=lag)
        states = GaugeMetricFamily("msh_inbox_messages", info["msh_inbox_messages"].meaning, labels=("state",))
        counts = dict(backlog.inbox)
        for state in InboxState:
            states.add_metric([state.value], counts.get(state, 0))
        yield states
        oldest = backlog.oldest_waiting
        age = 0.0 if oldest is None else max(0.0, (now - oldest).total_seconds())
        yield GaugeMetricFamily("msh_inbox_oldest_age_seconds", info["msh_inbox_oldest_age_seconds"].meaning, value=age)
