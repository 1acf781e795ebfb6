"""The delivery figures, as Spark DataFrame transformations of the journal (no I/O here).

Keys: every figure is per ``source`` (the MSH whose journal it is), agreement (``cpa_id``), ``partner``
(the other party: the To party of what we send or forward, the From party of what we receive), ``service``,
``action`` and ``day`` (UTC). A sent message counts on the day it was submitted.

- :func:`messages`: one row per message our application submitted (role ``sender``): when it was
  submitted, delivered (the To party's acknowledgment or StatusResponse), handed over without an
  acknowledgment by design (status ``sent``, ``handed_over_at``) or failed, with which severity and cause,
  how many transmissions it took, whether one reached the partner, whether its TimeToLive ended it
  (``expired``), its retry deadline.
- :func:`traffic`: volumes (sent, received, forwarded), delivered, delivery rate (delivered / sent),
  ``unacknowledged`` (handed over, no acknowledgment by design: ebMS2 §6.6 rows 3, 4, 7, 8), DeliveryFailures
  by severity (a message the To party acknowledged after its DeliveryFailure counts as delivered, not
  failed: its status is what happened), messages sent that expired (their TimeToLive ended them),
  duplicates eliminated, latency from submission to the end-to-end acknowledgment (p50/p95/p99, exact
  percentiles with linear interpolation, in seconds), messages still pending at ``as_of`` and those of them
  overdue (past their agreement's retry window).
- :func:`failures`: DeliveryFailures by severity and cause (on the day they were reported).
- :func:`attempts`: how many messages took 0 (never transmitted), 1, 2, ... transmissions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from msh.store.events import EventKind

__all__ = ["KEYS", "attempts", "failures", "messages", "prepare", "traffic"]

KEYS: Final = ("source", "cpa_id", "partner", "service", "action", "day")


_USED: Final = (
    "source",
    "at",
    "kind",
    "message_id",
    "role",
    "cpa_id",
    "from_party",
    "to_party",
    "service",
    "action",
    "attempt",
    "severity",
    "cause",
    "deadline",
)


def prepare(journal: DataFrame) -> DataFrame:
    """The journal's columns the figures use, with ``partner`` added (and ``day``, the UTC day of ``at``,
    where the journal does not carry it already: :func:`msh.analytics.report.read_journals` takes it from
    the folder names)."""
    partner = F.when(F.col("role") == "receiver", F.col("from_party")).otherwise(F.col("to_party"))
    day = F.col("day") if "day" in journal.columns else F.to_date("at")
    return journal.select(*_USED, partner.alias("partner"), day.alias("day"))


def _at_of(kind: EventKind) -> Column:
    return F.min(F.when(F.col("kind") == kind, F.col("at")))


_FACTS: Final = ("cpa_id", "partner", "from_party", "to_party", "service", "action")
_NULL: Final = "\u0000"  # stands for a missing value inside a fingerprint (journal text never holds NUL)


def _fingerprint(*names: str) -> Column:
    """A 64-bit fingerprint of the values of ``names`` (a missing value counts as itself)."""
    return F.xxhash64(*(F.coalesce(F.col(name), F.lit(_NULL)) for name in names))


def messages(events: DataFrame) -> DataFrame:
    """One row per submitted message of each source's application (see the module docs).

    One aggregation per message whose results are all fixed-width (times, counts, ranks, and 64-bit
    fingerprints of the text facts), which Spark runs as a hash aggregation; the facts behind the
    fingerprints (the message's agreement, parties, service and action as its ``submitted`` event carries
    them, and the cause of its DeliveryFailure) come back from two small tables of the distinct values,
    joined by broadcast: no per-message sort and no shuffle of text."""
    sent = events.filter(F.col("role") == "sender").filter(F.col("message_id").isNotNull())
    kind = F.col("kind")
    submitted = kind == EventKind.SUBMITTED
    failed = kind == EventKind.FAILED
    transmission = kind == EventKind.TRANSMISSION
    rank = F.when(failed & (F.col("severity") == "Error"), 2).when(failed & (F.col("severity") == "Warning"), 1)
    facts_key, cause_key = _fingerprint(*_FACTS), _fingerprint("cause")
    outcome = sent.groupBy("source", "message_id").agg(
        _at_of(EventKind.SUBMITTED).alias("submitted_at"),
        _at_of(EventKind.DELIVERED).alias("delivered_at"),
        _at_of(EventKind.SENT).alias("handed_over_at"),
        _at_of(EventKind.FAILED).alias("failed_at"),
        F.max(rank).alias("severity_rank"),
        F.coalesce(F.max(F.when(transmission, F.col("attempt"))), F.lit(0)).alias("attempts"),
        F.max(F.when(transmission & F.col("cause").isNull(), 1)).alias("reached_n"),
        F.max(F.when(kind == EventKind.EXPIRED, 1)).alias("expired_n"),
        F.max("deadline").alias("deadline"),
        F.min(F.when(submitted, facts_key)).alias("facts_key"),
        F.max(F.when(failed & F.col("cause").isNotNull(), cause_key)).alias("cause_key"),
    )
    facts = sent.filter(submitted).select(facts_key.alias("facts_key"), *_FACTS).dropDuplicates(["facts_key"])
    causes = (
        sent.filter(failed & F.col("cause").isNotNull())
        .select(cause_key.alias("cause_key"), F.col("cause").alias("failure_cause"))
        .dropDuplicates(["cause_key"])
    )
    latency = (F.unix_micros("delivered_at") - F.unix_micros("submitted_at")) / F.lit(1_000_000.0)
    # A DeliveryFailure the To party's word overturned later (delivered after all) is not the outcome.
    undone = F.col("delivered_at").isNotNull()
    severity = (
        F.when(undone, F.lit(None))
        .when(F.col("severity_rank") == 2, "Error")
        .when(F.col("severity_rank") == 1, "Warning")
    )
    return (
        outcome.filter(F.col("submitted_at").isNotNull())
        .join(F.broadcast(facts), "facts_key", "inner")
        .join(F.broadcast(causes), "cause_key", "left")
        .withColumn("failure_severity", severity)
        .withColumn("reached", F.col("reached_n").isNotNull())
        .withColumn("expired", F.col("expired_n").isNotNull())
        .withColumn("day", F.to_date("submitted_at"))
        .withColumn("latency_s", F.when(F.col("delivered_at").isNotNull(), latency))
        .drop("severity_rank", "reached_n", "expired_n", "facts_key", "cause_key")
    )


def _count_if(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0))


def traffic(events: DataFrame, sent: DataFrame, as_of: datetime) -> DataFrame:
    """Volumes, delivery, failures, duplicates, latency, pending and overdue per key (module docs)."""
    delivered, failed = F.col("delivered_at").isNotNull(), F.col("failed_at").isNotNull()
    handed_over = F.col("handed_over_at").isNotNull()
    open_ = ~delivered & ~failed & ~handed_over
    percentiles = F.percentile(F.col("latency_s"), F.array(F.lit(0.5), F.lit(0.95), F.lit(0.99)))
    outbound = sent.groupBy(*KEYS).agg(
        F.count(F.lit(1)).alias("sent"),
        _count_if(delivered).alias("delivered"),
        _count_if(handed_over & ~delivered & ~failed).alias("unacknowledged"),
        _count_if(failed & ~delivered).alias("failed"),
        _count_if(F.col("failure_severity") == "Error").alias("failed_error"),
        _count_if(F.col("failure_severity") == "Warning").alias("failed_warning"),
        _count_if(F.col("expired")).alias("expired"),
        _count_if(F.col("attempts") > 1).alias("retried"),
        _count_if(open_).alias("pending"),
        _count_if(open_ & (F.col("deadline") < F.lit(as_of))).alias("overdue"),
        percentiles.alias("latency"),
    )
    outbound = (
        outbound.withColumn("latency_p50_s", F.col("latency")[0])
        .withColumn("latency_p95_s", F.col("latency")[1])
        .withColumn("latency_p99_s", F.col("latency")[2])
        .drop("latency")
    )
    kind = F.col("kind")
    inbound = (
        events.filter(F.col("role").isin("receiver", "intermediary"))
        .groupBy(*KEYS)
        .agg(
            _count_if((kind == EventKind.RECEIVED) & (F.col("role") == "receiver")).alias("received"),
            _count_if(kind == EventKind.DUPLICATE).alias("duplicates"),
            _count_if((kind == EventKind.FORWARD) & (F.col("role") == "intermediary")).alias("forwarded"),
        )
    )
    counts = (
        "sent",
        "delivered",
        "unacknowledged",
        "failed",
        "failed_error",
        "failed_warning",
        "expired",
        "retried",
        "pending",
        "overdue",
    )
    joined = outbound.join(inbound, list(KEYS), "full_outer").fillna(
        0, subset=[*counts, "received", "duplicates", "forwarded"]
    )
    rate = F.when(F.col("sent") > 0, F.col("delivered") / F.col("sent"))
    keep = joined.filter((F.col("sent") + F.col("received") + F.col("duplicates") + F.col("forwarded")) > 0)
    return keep.withColumn("delivery_rate", rate).select(
        *KEYS,
        "sent",
        "received",
        "forwarded",
        "delivered",
        "delivery_rate",
        "unacknowledged",
        "failed",
        "failed_error",
        "failed_warning",
        "expired",
        "retried",
        "duplicates",
        "latency_p50_s",
        "latency_p95_s",
        "latency_p99_s",
        "pending",
        "overdue",
    )


def failures(events: DataFrame) -> DataFrame:
    """DeliveryFailures told to the sending application, by severity and cause, per key and day."""
    return (
        events.filter((F.col("kind") == EventKind.FAILED) & (F.col("role") == "sender"))
        .groupBy(*KEYS, "severity", "cause")
        .agg(F.count(F.lit(1)).alias("failures"))
    )


def attempts(sent: DataFrame) -> DataFrame:
    """How many submitted messages took each number of transmissions, per key and day."""
    return sent.groupBy(*KEYS, "attempts").agg(F.count(F.lit(1)).alias("messages"))
