#!/usr/bin/env python3
"""Bulk-load past messages into an MSH store, so that a benchmark measures a store that has grown.

``prefill(url, n, role)`` migrates the store at ``url`` (an SQLite path or a PostgreSQL URL, as ``msh``
takes them) and inserts ``n`` finished past messages, with the rows the running MSH writes for a message
in that role (the shapes were taken from the stores of a real exchange of the demo agreement):

sender (partner A)
    per message: one ``blobs`` row and one ``blob_chunks`` row (the stored message; ``--body-bytes``, 256
    by default, instead of the ~7 KB of a real signed message, so that a million rows load in minutes),
    one ``outbound_messages`` row (status ``delivered``, evidence ``to-party-acknowledgment``), and three
    journal ``events`` (``submitted``, ``transmission``, ``delivered``) with their typed columns.
receiver (partner B)
    per message: one ``blobs`` + ``blob_chunks`` row (the received message), one ``inbound_messages`` row
    received under DuplicateElimination (so it is a duplicate-elimination record: the partial unique index
    on MessageId holds a million keys) with a stored acknowledgment (``--body-bytes`` long) and a content
    digest, one ``inbox`` entry taken and acknowledged by the application (``acknowledged-by-app``), and
    one journal event (``received``).

No ``timers`` rows: the MSH deletes a timer when its work is done, so a store of finished messages holds
none. MessageIds are ``prefill-<n>@bench.invalid``, times spread over the 30 days before now, one
conversation per message. Rows go in through the database driver: ``executemany`` in one transaction on
SQLite (with ``synchronous=OFF`` for the load only), ``COPY`` on PostgreSQL; then the key sequences are
moved past the loaded ids and the tables analysed.

Run alone: ``python scripts/prefill_store.py STORE_URL --messages 1000000 --role sender``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CPAID = "cpa-demo-a-b"
PARTY_A = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088:123456789"
PARTY_B = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088:987654321"
SERVICE, ACTION = "urn:example:services:ordering", "NewOrder"
CONTENT_TYPE = 'multipart/related; type="text/xml"; boundary="=_MSH_prefilled"; start="<ebxml-envelope@msh>"'
ROLES = ("sender", "receiver")

Row = dict[str, Any]


class Sql(str):
    """An SQL expression of the row number ``n`` (``{n}``) and of times (``{t:<milliseconds>}``)."""


def _mid() -> Sql:
    return Sql("'prefill-' || {n} || '@bench.invalid'")


def _conv() -> Sql:
    return Sql("'conv-' || {n} || '@bench.invalid'")


def _typed() -> Row:
    return {
        "cpa_id": CPAID,
        "from_party": PARTY_A,
        "to_party": PARTY_B,
        "service": SERVICE,
        "action": ACTION,
        "conversation_id": _conv(),
        "size": 6793,
    }


def _event(event_id: str, at: int, kind: str, direction: str, role: str, detail: Row) -> Row:
    return {
        "id": Sql(event_id),
        "at": Sql(f"{{t:{at}}}"),
        "message_id": _mid(),
        "direction": direction,
        "kind": kind,
        "detail": detail,
        "role": role,
        **_typed(),
    }


def _blob(body: bytes) -> dict[str, Row]:
    return {
        "blobs": {"id": Sql("{n}"), "size": len(body), "chunk_count": 1, "created_at": Sql("{t:0}")},
        "blob_chunks": {"blob_id": Sql("{n}"), "seq": 0, "data": body},
    }


def sender_rows(body: bytes) -> list[tuple[str, Row]]:
    """The rows of past sent message ``n``, by table, in insertion order."""
    outbound = {
        "message_id": _mid(),
        "cpaid": CPAID,
        "conversation_id": _conv(),
        "service": SERVICE,
        "action": ACTION,
        "from_party": PARTY_A,
        "to_party": PARTY_B,
        "endpoint_url": "https://127.0.0.1:8082/msh",
        "content_type": CONTENT_TYPE,
        "body_blob_id": Sql("{n}"),
        "retries": 5,
        "retry_interval": "PT5S",
        "first_resend_timeout": "PT5S",
        "persist_duration": "P1D",
        "ack_requested": True,
        "ack_actor": "urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH",
        "hop_ack": False,
        "status": "delivered",
        "attempts": 1,
        "first_sent_at": Sql("{t:5}"),
        "refused_attempts": 0,
        "evidence": "to-party-acknowledgment",
        "created_at": Sql("{t:0}"),
        "updated_at": Sql("{t:60}"),
        "kind": "own",
    }
    submitted = _event(
        "3 * {n} - 2",
        0,
        "submitted",
        "outbound",
        "sender",
        {"cpaid": CPAID, "action": ACTION, "to": PARTY_B, "signed": True, "encrypted": False},
    )
    submitted["deadline"] = Sql("{t:30000}")
    transmission = _event(
        "3 * {n} - 1",
        5,
        "transmission",
        "outbound",
        "sender",
        {
            "attempt": 1,
            "url": "https://127.0.0.1:8082/msh",
            "httpStatus": 200,
            "error": None,
            "answer": "Acknowledgment",
        },
    )
    transmission["attempt"] = 1
    delivered = _event("3 * {n}", 60, "delivered", "outbound", "sender", {"evidence": "to-party-acknowledgment"})
    blob = _blob(body)
    return [
        ("blobs", blob["blobs"]),
        ("blob_chunks", blob["blob_chunks"]),
        ("outbound_messages", outbound),
        ("events", submitted),
        ("events", transmission),
        ("events", delivered),
    ]


def receiver_rows(body: bytes) -> list[tuple[str, Row]]:
    """The rows of past received message ``n``, by table, in insertion order."""
    inbound = {
        "id": Sql("{n}"),
        "message_id": _mid(),
        "duplicate_elimination": True,
        "from_party": PARTY_A,
        "to_party": PARTY_B,
        "cpaid": CPAID,
        "conversation_id": _conv(),
        "service": SERVICE,
        "action": ACTION,
        "received_at": Sql("{t:0}"),
        "content_type": CONTENT_TYPE,
        "body_blob_id": Sql("{n}"),
        "ack_envelope": body,
        "duplicate_count": 0,
        "content_digest": Sql("'content-sha256:' || {n}"),
    }
    entry = {
        "inbound_id": Sql("{n}"),
        "message_id": _mid(),
        "state": "acknowledged-by-app",
        "received_at": Sql("{t:0}"),
        "delivered_at": Sql("{t:1000}"),
        "acknowledged_at": Sql("{t:2000}"),
    }
    received = _event(
        "{n}",
        0,
        "received",
        "inbound",
        "receiver",
        {"cpaid": CPAID, "action": ACTION, "acknowledged": True, "signed": True, "issues": []},
    )
    blob = _blob(body)
    return [
        ("blobs", blob["blobs"]),
        ("blob_chunks", blob["blob_chunks"]),
        ("inbound_messages", inbound),
        ("inbox", entry),
        ("events", received),
    ]


ROWS: dict[str, Callable[[bytes], list[tuple[str, Row]]]] = {"sender": sender_rows, "receiver": receiver_rows}


def _statement(dialect: str, table: str, row: Row, n: int, start: datetime, span_ms: float) -> tuple[str, list[Any]]:
    """``INSERT INTO table SELECT … FROM`` a series 1..n: one statement, the database makes the rows."""
    marker = "?" if dialect == "sqlite" else "%s"
    step_ms = span_ms / max(n, 1)
    params: list[Any] = []
    values: list[str] = []

    def time_sql(match: re.Match[str]) -> str:
        offset = int(match.group(1))
        if dialect == "sqlite":
            day_ms = 86_400_000.0
            julian = f"({_julian(start)!r} + (n * {step_ms!r} + {offset}) / {day_ms!r})"
            return f"(strftime('%Y-%m-%d %H:%M:%f', {julian}) || '000')"
        return f"(timestamptz '{start.isoformat()}' + (n * {step_ms!r} + {offset}) * interval '1 millisecond')"

    for value in row.values():
        if isinstance(value, Sql):
            values.append(re.sub(r"\{t:(\d+)\}", time_sql, value.replace("{n}", "n")))
        elif isinstance(value, dict):
            values.append(marker if dialect == "sqlite" else f"{marker}::jsonb")
            params.append(json.dumps(value))
        elif isinstance(value, bool) and dialect == "sqlite":
            values.append(marker)
            params.append(int(value))
        else:
            values.append(marker)
            params.append(value)
    if dialect == "sqlite":
        series = f"WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {n}) "
        source = "FROM s"
    else:
        series, source = "", f"FROM generate_series(1, {n}) AS s(n)"
    sql = f"{series}INSERT INTO {table} ({', '.join(row)}) SELECT {', '.join(values)} {source}"
    return sql, params


def _julian(at: datetime) -> float:
    return at.timestamp() / 86_400.0 + 2_440_587.5


def _load(raw: Any, dialect: str, role: str, n: int, body: bytes, now: datetime) -> None:
    start = now - timedelta(days=30)
    span_ms = timedelta(days=30).total_seconds() * 1000
    cursor = raw.cursor()
    try:
        if dialect == "sqlite":
            cursor.execute("PRAGMA synchronous=OFF")
            cursor.execute("BEGIN IMMEDIATE")
        for table, row in ROWS[role](body):
            cursor.execute(*_statement(dialect, table, row, n, start, span_ms))
        if dialect == "sqlite":
            cursor.execute("COMMIT")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("ANALYZE")
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        else:
            for table in ("blobs", "events", "inbound_messages"):
                cursor.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"GREATEST((SELECT max(id) FROM {table}), 1))"
                )
            raw.commit()
            raw.autocommit = True
            cursor.execute("VACUUM ANALYZE")
            raw.autocommit = False
    finally:
        cursor.close()


def prefill(url: str, n: int, role: str, *, body_bytes: int = 256) -> float:
    """Migrate the store at ``url`` and load ``n`` past messages of ``role``; return the seconds it took.

    The store must hold no messages yet (the loaded ids start at 1)."""
    from msh.store.sql.connect import connect

    if role not in ROLES:
        raise ValueError(f"role {role!r}: expected one of {', '.join(ROLES)}")
    body = (b"<prefilled/>" * (body_bytes // 12 + 1))[:body_bytes]
    start = time.perf_counter()
    engine = connect(url, migrate=True)
    try:
        pooled = engine.raw_connection()
        try:
            raw = pooled.driver_connection
            now = datetime.now(UTC)
            _load(raw, engine.dialect.name, role, n, body, now)
        finally:
            pooled.close()
    finally:
        engine.dispose()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the store: an SQLite file path or a postgresql+psycopg:// URL")
    parser.add_argument("--messages", type=int, default=1_000_000, help="past messages to load (default 1000000)")
    parser.add_argument("--role", choices=ROLES, default="sender", help="whose store it is (default sender)")
    parser.add_argument("--body-bytes", type=int, default=256, help="bytes of each stored body (default 256)")
    args = parser.parse_args()
    seconds = prefill(args.url, args.messages, args.role, body_bytes=args.body_bytes)
    print(f"loaded {args.messages:,} past messages ({args.role}) in {seconds:.1f} s")


if __name__ == "__main__":
    main()
