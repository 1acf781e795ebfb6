"""Why each failed message failed: the cause underneath its DeliveryFailure, read from its sender's journal.

A DeliveryFailure names only its errorCode, ``DeliveryFailure`` (ebMS2 §6.5.7); the sender's journal says
why. For each message its application was told failed (and that the To party did not acknowledge after all,
:func:`msh.analytics.figures.messages`), its ``transmission`` events (``url``, ``httpStatus``, ``error``),
``error-received`` events (the partner's ErrorList: ``errorCode``, ``severity``, ``description``),
``expired`` event and the ``failed`` event (its ``description``) are read, and the first of these reasons
that applies is its cause (:class:`Reason`):

``security-failure``
    The partner refused it with an ErrorList whose Error is ``SecurityFailure`` (ebMS2 §4.2.3.4.1: a
    signature or decryption that failed).
``refused``
    The partner (or the path) refused it with an ErrorList of another errorCode (ebMS2 §4.2.3.4).
``reported``
    The partner or an intermediary on the path reported a DeliveryFailure of its own (ebMS2 §6.5.7, §10:
    e.g. it could not forward the message).
``expired``
    Its TimeToLive ended it before it was acknowledged (ebMS2 §3.1.6.4).
``unreachable``
    No transmission reached the partner's MSH: each ended in a transport error or an HTTP error status
    (ebMS2 §6.5.4 counts them as lost messages); the URL and the last error are given.
``unacknowledged``
    It was transmitted, but no Acknowledgment came before the retries ran out (ebMS2 §6.5.4, §6.5.7).
``other``
    None of these: the DeliveryFailure's own description.

Each failed message gets a ``headline`` (the reason with the errorCode or URL: what the report counts and
charts) and a ``explanation`` (the headline with the partner's description or the transport error).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from msh.store.events import EventKind

__all__ = ["Reason", "failed_messages"]


class Reason(StrEnum):
    """Why a message failed (module docs), most telling first."""

    SECURITY_FAILURE = "security-failure"
    REFUSED = "refused"
    REPORTED = "reported"
    EXPIRED = "expired"
    UNREACHABLE = "unreachable"
    UNACKNOWLEDGED = "unacknowledged"
    OTHER = "other"


_ERROR = T.StructType(
    [T.StructField(name, T.StringType()) for name in ("errorCode", "severity", "location", "description")]
)
_DETAIL: Final = T.StructType(
    [
        T.StructField("url", T.StringType()),
        T.StructField("httpStatus", T.IntegerType()),
        T.StructField("error", T.StringType()),
        T.StructField("description", T.StringType()),
        T.StructField("errors", T.ArrayType(_ERROR)),
    ]
)
"""The keys of ``detail`` read here (as :mod:`msh.runtime.attempts` and the sending actions write them)."""

_REPORTED: Final = "DeliveryFailure reported by the partner or the path"
_READ: Final = (EventKind.TRANSMISSION, EventKind.ERROR_RECEIVED, EventKind.FAILED)


def _partner_error() -> Column:
    """The Error of an ErrorList that says why (its first of severity Error, else a DeliveryFailure)."""
    errors = F.col("d.errors")
    first_error = F.try_element_at(F.filter(errors, lambda e: e["severity"] == "Error"), F.lit(1))
    failure = F.try_element_at(F.filter(errors, lambda e: e["errorCode"] == "DeliveryFailure"), F.lit(1))
    return F.coalesce(first_error, failure)


def _per_message(journal: DataFrame, ids: DataFrame) -> DataFrame:
    """The facts of the failed messages ``ids`` (source, message_id) read from their events' details."""
    kind = F.col("kind")
    events = (
        journal.filter((F.col("role") == "sender") & kind.isin(*(k.value for k in _READ)))
        .join(F.broadcast(ids), ["source", "message_id"])
        .withColumn("d", F.from_json("detail", _DETAIL))
    )
    transmission = kind == EventKind.TRANSMISSION
    # The last transmission (highest attempt, then latest): where it went and how it ended.
    last = F.struct(
        F.col("d.url").alias("url"),
        F.col("d.httpStatus").alias("http_status"),
        F.coalesce(F.col("d.error"), F.col("cause")).alias("error"),
    )
    order = F.when(transmission, F.struct(F.coalesce("attempt", F.lit(0)), "at"))
    said = F.when(kind == EventKind.ERROR_RECEIVED, _partner_error())
    return events.groupBy("source", "message_id").agg(
        F.max_by(last, order).alias("last"),
        F.min_by(said, F.when(said.isNotNull(), F.col("at"))).alias("said"),
        F.max(F.when(kind == EventKind.FAILED, F.col("d.description"))).alias("failure_description"),
    )


def _reason(reached: Column, expired: Column) -> Column:
    code = F.col("said.errorCode")
    return (
        F.when(code == "SecurityFailure", F.lit(Reason.SECURITY_FAILURE.value))
        .when(code == "DeliveryFailure", F.lit(Reason.REPORTED.value))
        .when(code.isNotNull(), F.lit(Reason.REFUSED.value))
        .when(expired, F.lit(Reason.EXPIRED.value))
        .when(~reached & F.col("last").isNotNull(), F.lit(Reason.UNREACHABLE.value))
        .when(reached, F.lit(Reason.UNACKNOWLEDGED.value))
        .otherwise(F.lit(Reason.OTHER.value))
    )


def _texts(reason: Column) -> tuple[Column, Column]:
    """The headline and the explanation of each reason (module docs)."""
    code, said = F.col("said.errorCode"), F.col("said.description")
    url = F.coalesce(F.col("last.url"), F.lit("its endpoint"))
    error = F.coalesce(F.col("last.error"), F.lit("no answer"))
    refused = F.concat(F.lit("refused by the partner: "), code)
    unreachable = F.concat(F.lit("partner unreachable at "), url)
    tries = F.concat(F.lit(" after "), F.col("attempts").cast("string"), F.lit(" transmission(s)"))
    headline = (
        F.when(reason.isin(Reason.SECURITY_FAILURE.value, Reason.REFUSED.value), refused)
        .when(reason == Reason.REPORTED.value, F.lit(_REPORTED))
        .when(reason == Reason.EXPIRED.value, F.lit("TimeToLive expired"))
        .when(reason == Reason.UNREACHABLE.value, unreachable)
        .when(reason == Reason.UNACKNOWLEDGED.value, F.lit("transmitted, never acknowledged"))
        .otherwise(F.lit("other"))
    )
    last_try = F.concat(F.lit(" (last transmission to "), url, F.lit(": "), error, F.lit(")"))
    explanation = (
        F.when(
            reason.isin(Reason.SECURITY_FAILURE.value, Reason.REFUSED.value),
            F.concat(refused, F.when(said.isNotNull(), F.concat(F.lit(" ("), said, F.lit(")"))).otherwise("")),
        )
        .when(
            reason == Reason.REPORTED.value,
            F.concat(F.lit(_REPORTED), F.when(said.isNotNull(), F.concat(F.lit(": "), said)).otherwise("")),
        )
        .when(
            reason == Reason.EXPIRED.value,
            F.concat(
                F.lit("TimeToLive expired"),
                F.when(~F.col("reached") & F.col("last").isNotNull(), last_try).otherwise(F.lit("")),
            ),
        )
        .when(reason == Reason.UNREACHABLE.value, F.concat(unreachable, F.lit(": "), error, tries))
        .when(
            reason == Reason.UNACKNOWLEDGED.value,
            F.concat(F.lit("transmitted to "), url, F.lit(", no Acknowledgment"), tries),
        )
        .otherwise(F.coalesce(F.col("failure_description"), F.col("failure_cause"), F.lit("DeliveryFailure")))
    )
    return headline, explanation


def failed_messages(journal: DataFrame, sent: DataFrame) -> DataFrame:
    """One row per failed message of ``sent`` (:func:`msh.analytics.figures.messages`): its facts, when it
    failed, the severity, and its ``reason``, ``partner_code`` (the errorCode the partner gave),
    ``partner_description``, ``url``, ``http_status`` and ``error`` of its last transmission, ``headline``
    and ``explanation`` (module docs). ``journal`` is the journal with its ``detail`` column."""
    failed = sent.filter(F.col("failed_at").isNotNull() & F.col("delivered_at").isNull())
    ids = failed.select("source", "message_id")
    facts = _per_message(journal, ids)
    joined = failed.join(facts, ["source", "message_id"], "left")
    reason = _reason(F.col("reached"), F.col("expired"))
    with_reason = joined.withColumn("reason", reason)
    headline, explanation = _texts(F.col("reason"))
    return with_reason.select(
        "source",
        "message_id",
        "cpa_id",
        "partner",
        "service",
        "action",
        "submitted_at",
        "failed_at",
        F.col("failure_severity").alias("severity"),
        "attempts",
        "reason",
        F.col("said.errorCode").alias("partner_code"),
        F.col("said.description").alias("partner_description"),
        F.col("last.url").alias("url"),
        F.col("last.http_status").alias("http_status"),
        F.col("last.error").alias("error"),
        headline.alias("headline"),
        explanation.alias("explanation"),
    )
