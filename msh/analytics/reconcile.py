"""Reconciliation: does the sender's record of each message agree with the receiver's?

Given the journals of both partners (or of the sender, the intermediaries and the receiver), read together,
each message the sender's application submitted is compared with what the To party's journal holds. A
journal speaks for the parties it sends for (``from_party`` of its ``submitted`` events) and receives for
(``to_party`` of its ``received`` events); a message whose To party has no journal among those read is not
judged. The cases (:data:`msh.analytics.generate.FAULT_CASES`):

``sent_not_received``
    A transmission reached the partner's MSH (no transport error), the receiver's journal has no copy,
    and no acknowledgment came back.
``received_twice``
    The receiver's journal has the message received (stored for the application) more than once.
``acked_not_delivered``
    The sender holds the end-to-end acknowledgment, the receiver's journal has no copy.
``delivered_not_acked``
    The receiver has it, the sender has neither an acknowledgment nor a DeliveryFailure.
``failed_but_delivered``
    The sender's application was told the message failed (DeliveryFailure), yet the receiver has it.

Each row also names the intermediaries whose journals forwarded the message (``forwarded_by``).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

__all__ = ["reconcile"]


def reconcile(events: DataFrame, sent: DataFrame) -> DataFrame:
    """One row per message in one of the cases (see the module docs); ``sent`` is
    :func:`msh.analytics.figures.messages` of ``events``."""
    kind = F.col("kind")
    parties = (
        events.filter(kind == "submitted")
        .select(F.col("from_party").alias("party"))
        .union(events.filter((kind == "received") & (F.col("role") == "receiver")).select(F.col("to_party")))
        .where(F.col("party").isNotNull())
        .distinct()
        .withColumn("covered", F.lit(True))
    )
    receipts = events.filter((kind == "received") & (F.col("role") == "receiver"))
    received = receipts.groupBy("message_id").agg(
        F.count(F.lit(1)).alias("received_copies"), F.min("at").alias("received_at")
    )
    forwarded = (
        events.filter((kind == "forward") & (F.col("role") == "intermediary"))
        .groupBy("message_id")
        .agg(F.array_join(F.array_sort(F.collect_set("source")), ",").alias("forwarded_by"))
    )
    ours = sent.select(
        "message_id",
        F.col("source").alias("sender_journal"),
        "from_party",
        "to_party",
        "cpa_id",
        "service",
        "action",
        "submitted_at",
        "delivered_at",
        "failed_at",
        "reached",
        F.lit(True).alias("in_sender_journal"),
    )
    both = (
        ours.join(received, "message_id", "full_outer")
        .join(parties, F.col("to_party") == F.col("party"), "left")
        .join(forwarded, "message_id", "left")
    )
    copies = F.coalesce(F.col("received_copies"), F.lit(0))
    acked = F.col("delivered_at").isNotNull()
    failed = F.col("failed_at").isNotNull()
    judged = F.coalesce(F.col("covered"), F.lit(False))
    sender = F.coalesce(F.col("in_sender_journal"), F.lit(False))
    case = (
        F.when(sender & judged & (copies == 0) & ~acked & F.col("reached"), F.lit("sent_not_received"))
        .when(copies >= 2, F.lit("received_twice"))
        .when(sender & judged & (copies == 0) & acked, F.lit("acked_not_delivered"))
        .when(sender & (copies >= 1) & ~acked & ~failed, F.lit("delivered_not_acked"))
        .when(sender & (copies >= 1) & failed, F.lit("failed_but_delivered"))
    )
    outcome = F.when(acked, F.lit("acknowledged")).when(failed, F.lit("failed")).when(sender, F.lit("pending"))
    found = both.withColumn("case", case).filter(F.col("case").isNotNull()).withColumn("sender_outcome", outcome)
    # Who received each one and under which agreement, from its receipts (only those of the cases).
    names = ("receiver_journal", "r_from", "r_to", "r_cpa", "r_service", "r_action")
    receipt_facts = (
        receipts.join(F.broadcast(found.select("message_id")), "message_id")
        .select(
            "message_id",
            F.col("source").alias("receiver_journal"),
            F.col("from_party").alias("r_from"),
            F.col("to_party").alias("r_to"),
            F.col("cpa_id").alias("r_cpa"),
            F.col("service").alias("r_service"),
            F.col("action").alias("r_action"),
        )
        .groupBy("message_id")
        .agg(*(F.min(name).alias(name) for name in names))
    )
    return found.join(receipt_facts, "message_id", "left").select(
        "case",
        "message_id",
        F.coalesce("from_party", "r_from").alias("from_party"),
        F.coalesce("to_party", "r_to").alias("to_party"),
        F.coalesce("cpa_id", "r_cpa").alias("cpa_id"),
        F.coalesce("service", "r_service").alias("service"),
        F.coalesce("action", "r_action").alias("action"),
        "sender_journal",
        "receiver_journal",
        "submitted_at",
        "sender_outcome",
        copies.alias("received_copies"),
        "forwarded_by",
    )
