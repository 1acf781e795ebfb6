"""``msh revalidate``: stored messages checked again, in parallel on Spark, for audits after an agreement
changes.

An archive is a store (an SQLite file, or a store URL such as ``postgresql+psycopg://…``: every message it
received and every message it sent or forwarded) or a folder of message files (raw HTTP captures, MIME
packages, SOAP envelopes: every file in it, recursively), or one message file. Each message is checked:

``schema``
    parsed strictly: the envelope against the ebMS schemas, the MIME package (ebMS2 §2); where the
    strict reading refuses it, the lenient one is tried so that the other checks still run.
``agreement``
    its header against the agreements given (:func:`cpa.check.check`, at the message's own Timestamp).
``signature``
    its XML signature as the agreement's channels ask (:func:`msh.security.verify_message`), when the
    agreement was found.

One row per violation (:data:`COLUMNS`), written as Parquet and CSV. The messages are spread over the
Spark tasks; each task opens the archive and loads the agreements itself.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from msh.errors import ConfigurationError, EbmsError, Issue

__all__ = ["COLUMNS", "Item", "RevalidateResult", "check_message", "list_items", "revalidate"]

COLUMNS: Final = (
    "archive",
    "item",
    "message_id",
    "direction",
    "check",
    "error_code",
    "severity",
    "location",
    "description",
)

_STORE_SUFFIXES: Final = (".db", ".sqlite", ".sqlite3")


@dataclass(frozen=True, slots=True)
class Item:
    """One message to check: in a store (``key`` = ``inbound:ID`` or ``outbound:MESSAGEID``) or a file."""

    archive: str
    key: str


@dataclass(frozen=True, slots=True)
class RevalidateResult:
    """How many messages were checked, how many violations were found, where the tables are."""

    messages: int
    violations: int
    parquet: Path
    csv: Path


def _is_store(archive: str) -> bool:
    if "://" in archive:
        return True
    path = Path(archive)
    if path.suffix.lower() in _STORE_SUFFIXES:
        return True
    if path.is_file():
        with path.open("rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    return False


def list_items(archives: Sequence[str]) -> list[Item]:
    """Every message of the archives (:class:`ConfigurationError` for an archive that is not there)."""
    items: list[Item] = []
    for archive in archives:
        if _is_store(archive):
            items += _store_items(archive)
            continue
        path = Path(archive)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            items += [Item(archive, str(p)) for p in files]
        elif path.is_file():
            items.append(Item(archive, str(path)))
        else:
            raise ConfigurationError(
                f"{archive}: no such file or folder; give a store (SQLite file or URL) or a folder of message files"
            )
    return items


def _store_items(archive: str) -> list[Item]:
    from sqlalchemy import text

    from msh.store import open_store
    from msh.store.sql import SqlStore

    if "://" not in archive and not Path(archive).is_file():
        raise ConfigurationError(f"{archive}: no such store file; give an SQLite store file or a store URL")
    store = open_store(archive, migrate=False)
    try:
        assert isinstance(store, SqlStore)
        with store.engine.connect() as conn:
            inbound = conn.execute(text("SELECT id FROM inbound_messages ORDER BY id")).scalars().all()
            outbound = conn.execute(
                text("SELECT message_id FROM outbound_messages WHERE kind <> 'signal' ORDER BY message_id")
            ).scalars()
            return [Item(archive, f"inbound:{i}") for i in inbound] + [Item(archive, f"outbound:{m}") for m in outbound]
    finally:
        store.close()


def _row(item: Item, message_id: str | None, direction: str | None, check: str, issue: Issue) -> tuple[Any, ...]:
    return (
        item.archive,
        item.key,
        message_id,
        direction,
        check,
        issue.error_code.value,
        issue.severity.value,
        issue.location or None,
        issue.description,
    )


def _timestamp(envelope: Any) -> datetime:
    header = envelope.message_header
    stamp: datetime | None = header.message_data.timestamp if header is not None else None
    if stamp is None:
        return datetime.now(UTC)
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def check_message(
    item: Item, source: bytes | Path, content_type: str | None, registry: Any, direction: str | None
) -> list[tuple[Any, ...]]:
    """The violations of one message (rows of :data:`COLUMNS`): ``source`` is its HTTP body (sent with
    ``content_type``) or a message file."""
    from cpa.check import check
    from msh.ebms.message import ParseMode, parse_message, read_message_file

    rows: list[tuple[Any, ...]] = []

    def parse(mode: ParseMode) -> Any:
        if isinstance(source, Path):
            return read_message_file(source, mode=mode)
        return parse_message(io.BytesIO(source), content_type, mode=mode)

    try:
        message = parse(ParseMode.STRICT)
    except EbmsError as exc:
        rows += [_row(item, None, direction, "schema", i) for i in exc.issues]
        try:
            message = parse(ParseMode.LENIENT)
        except EbmsError:
            return rows
    try:
        envelope = message.envelope
        header = envelope.message_header
        message_id = header.message_id if header is not None else None
        rows = [(*r[:2], message_id, *r[3:]) for r in rows]
        at = _timestamp(envelope)
        result = check(envelope, registry, now=at)
        rows += [_row(item, message_id, direction, "agreement", i) for i in result.issues]
        if result.cpa is not None and result.sending_channel_id is not None:
            rows += _signature(item, message, result, at, message_id, direction)
    finally:
        message.close()
    return rows


def _signature(
    item: Item, message: Any, result: Any, at: datetime, message_id: str | None, direction: str | None
) -> list[tuple[Any, ...]]:
    try:
        from msh.security import content_locations, verification_policy, verify_message
    except ImportError:  # the security library cannot load here (no libxmlsec1): nothing to say about signatures
        return []
    payloads = {(p.content_id or f"(part {i})"): p.body for i, p in enumerate(message.payloads, 2)}
    try:
        policy = verification_policy(result.cpa, result.sending_channel_id, result.receiving_channel_id)
        verify_message(message.soap, payloads, policy, at=at, locations=content_locations(message.payloads))
    except EbmsError as exc:
        return [_row(item, message_id, direction, "signature", i) for i in exc.issues]
    except ConfigurationError as exc:
        from msh.errors import ErrorCode, Severity

        issue = Issue(ErrorCode.SECURITY_FAILURE, Severity.ERROR, str(exc))
        return [_row(item, message_id, direction, "signature", issue)]
    return []


def _registry(cpa_files: Sequence[str]) -> Any:
    from cpa.loader import load
    from cpa.registry import CpaRegistry

    return CpaRegistry([load(path) for path in cpa_files])


def _check_partition(cpa_files: Sequence[str], items: Iterable[Item]) -> Iterator[tuple[Any, ...]]:
    """A Spark task: open each archive once, load the agreements once, check the task's messages."""
    registry = _registry(cpa_files)
    stores: dict[str, Any] = {}
    try:
        for item in items:
            yield from _check_item(item, registry, stores)
    finally:
        for store in stores.values():
            with contextlib.suppress(Exception):
                store.close()


def _check_item(item: Item, registry: Any, stores: dict[str, Any]) -> list[tuple[Any, ...]]:
    if not item.key.startswith(("inbound:", "outbound:")) or not _is_store(item.archive):
        path = Path(item.key)
        if not os.access(path, os.R_OK):
            from msh.errors import ErrorCode, Severity

            issue = Issue(ErrorCode.OTHER_XML, Severity.ERROR, f"{path} cannot be read")
            return [_row(item, None, None, "schema", issue)]
        return check_message(item, path, None, registry, None)
    from msh.store import open_store

    store = stores.get(item.archive)
    if store is None:
        store = stores[item.archive] = open_store(item.archive, migrate=False)
    direction, key = item.key.split(":", 1)
    with store.transaction(readonly=True) as tx:
        record = tx.get_inbound(int(key)) if direction == "inbound" else tx.get_outbound(key)
        if record is None:
            return []
        with tx.open_blob(record.body_blob_id) as blob:
            body = blob.read()
    return check_message(item, body, record.content_type, registry, direction)


def revalidate(spark: Any, archives: Sequence[str], cpa_files: Sequence[str], out: Path) -> RevalidateResult:
    """Check every message of ``archives`` against the agreements of ``cpa_files`` on Spark; write the
    violations under ``out`` as ``violations.parquet/`` and ``violations.csv/`` (module docs)."""
    from pyspark.sql import types as T

    if not cpa_files:
        raise ConfigurationError("give the agreements to check against: --cpa FILE (one or more)")
    for path in cpa_files:
        if not os.path.isfile(path):
            raise ConfigurationError(f"{path}: no such agreement file; give CPA files with --cpa")
    _registry(cpa_files)  # refuses a bad agreement here, in one line, before any task starts
    items = list_items(archives)
    if not items:
        raise ConfigurationError("the archives hold no message to check")
    slices = max(1, min(len(items), spark.sparkContext.defaultParallelism * 4))
    files = [str(Path(p).resolve()) for p in cpa_files]
    rows = spark.sparkContext.parallelize(items, slices).mapPartitions(lambda part: _check_partition(files, part))
    schema = T.StructType([T.StructField(name, T.StringType(), True) for name in COLUMNS])
    frame = spark.createDataFrame(rows, schema).cache()
    violations = frame.count()
    out.mkdir(parents=True, exist_ok=True)
    frame.coalesce(1).write.mode("overwrite").parquet(str(out / "violations.parquet"))
    frame.coalesce(1).write.mode("overwrite").option("header", "true").csv(str(out / "violations.csv"))
    frame.unpersist()
    return RevalidateResult(len(items), violations, out / "violations.parquet", out / "violations.csv")
