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
    The receiver has it, the sender has neither an acknowledgment nor a DeliveryFailure (and did not ask
    for an acknowledgment either: a message ``sent`` without one by design is not a case).
``failed_but_delivered``
    The sender's application was told the message failed (DeliveryFailure), yet the receiver has it.
``refused_by_receiver``
    The receiver's journal has no copy because it refused the message: it journaled a ``rejected`` event
    for that MessageId and answered with an ErrorList (ebMS2 §4.2.3.4); ``refused_with`` is the errorCode
    it gave. Said so rather than counted as sent but never received.

Each row also names the intermediaries whose journals forwarded the message (``forwarded_by``).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from msh.store.events import EventKind

__all__ = ["reconcile"]


def reconcile(events: DataFrame, sent: DataFrame) -> DataFrame:
    """One row per message in one of the cases (see the module docs); ``sent`` is
    :func:`msh.analytics.figures.messages` of ``events``.

    The cases are found by one join of narrow columns (the sender's outcome and the receivers' copy count
    per MessageId), computed when this is called; the few messages found are then described from the
    sender's facts, the receipts and
    the intermediaries' forwards, each looked up for those messages only (broadcast joins)."""
    kind = F.col("kind")
    receipt = (kind == EventKind.RECEIVED) & (F.col("role") == "receiver")
    parties = (
        events.filter(kind == EventKind.SUBMITTED)
        .select(F.col("from_party").alias("party"))
        .union(events.filter(receipt).select(F.col("to_party")))
        .where(F.col("party").isNotNull())
        .distinct()
        .withColumn("covered", F.lit(True))
    )
    receipts = events.filter(receipt)
    received = receipts.groupBy("message_id").agg(F.count(F.lit(1)).alias("received_copies"))
    # ebMS2 §4.2.3.4: the receiver refused it (journaled as rejected, with the errorCode it sent back).
    refusals = (
        events.filter((kind == EventKind.REJECTED) & (F.col("role") == "receiver"))
        .groupBy("message_id")
        .agg(F.min("cause").alias("refused_code"), F.min("source").alias("refused_in"), F.lit(True).alias("refused"))
    )
    ours = sent.select(
        "message_id",
        F.col("source").alias("sender_journal"),
        "to_party",
        F.col("delivered_at").isNotNull().alias("acked"),
        F.col("failed_at").isNotNull().alias("failed"),
        F.col("handed_over_at").isNotNull().alias("handed_over"),
        "reached",
        F.lit(True).alias("in_sender_journal"),
    )
    both = (
        ours.join(received, "message_id", "full_outer")
        .join(F.broadcast(parties), F.col("to_party") == F.col("party"), "left")
        .join(refusals, "message_id", "left")
    )
    copies = F.coalesce(F.col("received_copies"), F.lit(0))
    acked = F.coalesce(F.col("acked"), F.lit(False))
    failed = F.coalesce(F.col("failed"), F.lit(False))
    handed_over = F.coalesce(F.col("handed_over"), F.lit(False))
    judged = F.coalesce(F.col("covered"), F.lit(False))
    sender = F.coalesce(F.col("in_sender_journal"), F.lit(False))
    refused = F.coalesce(F.col("refused"), F.lit(False))
    case = (
        F.when(sender & judged & (copies == 0) & ~acked & refused, F.lit("refused_by_receiver"))
        .when(sender & judged & (copies == 0) & ~acked & F.col("reached"), F.lit("sent_not_received"))
        .when(copies >= 2, F.lit("received_twice"))
        .when(sender & judged & (copies == 0) & acked, F.lit("acked_not_delivered"))
        .when(sender & (copies >= 1) & ~acked & ~failed & ~handed_over, F.lit("delivered_not_acked"))
        .when(sender & (copies >= 1) & failed, F.lit("failed_but_delivered"))
    )
    outcome = (
        F.when(acked, F.lit("acknowledged"))
        .when(failed, F.lit("failed"))
        .when(handed_over, F.lit("sent"))
        .when(sender, F.lit("pending"))
    )
    found = (
        both.withColumn("case", case)
        .filter(F.col("case").isNotNull())
        .select(
            "case",
            "message_id",
            "sender_journal",
            copies.alias("received_copies"),
            outcome.alias("sender_outcome"),
            F.when(F.col("case") == "refused_by_receiver", F.col("refused_code")).alias("refused_with"),
            F.when(F.col("case") == "refused_by_receiver", F.col("refused_in")).alias("refused_in"),
        )
    )
    ids = F.broadcast(found.select("message_id").distinct())
    facts = sent.join(ids, "message_id").select(
        "message_id",
        F.col("source").alias("sender_journal"),
        "from_party",
        "to_party",
        "cpa_id",
        "service",
        "action",
        "submitted_at",
    )
    # Who received each one and under which agreement, from its receipts.
    names = ("receiver_journal", "r_from", "r_to", "r_cpa", "r_service", "r_action")
    receipt_facts = (
        receipts.join(ids, "message_id")
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
    forwarded = (
        events.filter((kind == EventKind.FORWARD) & (F.col("role") == "intermediary"))
        .join(ids, "message_id")
        .groupBy("message_id")
        .agg(F.array_join(F.array_sort(F.collect_set("source")), ",").alias("forwarded_by"))
    )
    return (
        found.join(facts, ["message_id", "sender_journal"], "left")
        .join(receipt_facts, "message_id", "left")
        .join(forwarded, "message_id", "left")
        .select(
            "case",
            "message_id",
            F.coalesce("from_party", "r_from").alias("from_party"),
            F.coalesce("to_party", "r_to").alias("to_party"),
            F.coalesce("cpa_id", "r_cpa").alias("cpa_id"),
            F.coalesce("service", "r_service").alias("service"),
            F.coalesce("action", "r_action").alias("action"),
            "sender_journal",
            F.coalesce("receiver_journal", "refused_in").alias("receiver_journal"),
            "submitted_at",
            "sender_outcome",
            "received_copies",
            "refused_with",
            "forwarded_by",
        )
    )
