"""Versioned migrations: an empty database upgrades to head, reopening is a no-op, downgrade round-trips;
each revision carries stored rows forward and back."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Boolean, Engine, Float, Integer, Text, column, create_engine, event, inspect, table, text
from sqlalchemy.exc import IntegrityError

from cpa.duration import XsDuration
from msh.engine import OutboundStatus, ReliableMessagingMethod
from msh.errors import ConfigurationError
from msh.store import OutboundKind, SqlStore, Store, migrations
from msh.store.app_records import InboxClaim
from msh.store.schema import UtcDateTime, metadata
from msh.store.sql import resolve_url
from tests.support.store import RELIABILITY, T0, add_inbound, add_outbound, outbound_state

ROOT = Path(__file__).resolve().parents[3]

STORE_TABLES = {
    "blobs",
    "blob_chunks",
    "outbound_messages",
    "inbound_messages",
    "inbox",
    "timers",
    "events",
    "app_requests",
    "inbox_claims",
    "inbox_batches",
    "app_cursors",
    "sequence_counters",
    "order_positions",
}


@pytest.fixture
def raw_engine(store_url: str) -> Iterator[Engine]:
    """A plain engine on the test database, for looking at it from outside the store."""
    engine = create_engine(resolve_url(store_url))
    yield engine
    engine.dispose()


@pytest.fixture
def statements() -> Iterator[list[str]]:
    """Every SQL statement any engine executes while the test runs."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    yield seen
    event.remove(Engine, "before_cursor_execute", record)


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def _revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return migrations.current_revision(conn)


def _differences(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"version_table": migrations.VERSION_TABLE})
        return list(compare_metadata(context, metadata))


def test_an_empty_database_upgrades_to_head(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    assert _tables(raw_engine) == set()
    assert _revision(raw_engine) is None
    open_store(store_url)
    assert _tables(raw_engine) == STORE_TABLES | {migrations.VERSION_TABLE}
    assert _revision(raw_engine) == migrations.head_revision() == "0012"


def test_the_migrated_schema_is_what_the_store_queries(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    open_store(store_url)
    assert _differences(raw_engine) == []


def test_the_comparison_would_see_a_difference(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    open_store(store_url)
    with raw_engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_timers_due_at"))
    assert [d[0] for d in _differences(raw_engine)] == ["add_index"]


def test_a_second_open_is_a_no_op(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store], statements: list[str]
) -> None:
    first = open_store(store_url)
    with first.transaction() as tx:
        add_outbound(tx, "kept@example.com")
    first.close()
    created = [s for s in statements if s.lstrip().upper().startswith("CREATE")]
    assert len(created) >= len(STORE_TABLES)  # the listener does see DDL
    statements.clear()
    second = open_store(store_url)
    ddl = [s for s in statements if s.lstrip().upper().startswith(("CREATE", "ALTER", "DROP", "INSERT", "UPDATE"))]
    assert ddl == []
    assert _revision(raw_engine) == migrations.head_revision()
    with second.transaction(readonly=True) as tx:
        assert tx.get_outbound("kept@example.com") is not None


def test_downgrade_and_upgrade_round_trip(store_url: str, raw_engine: Engine, open_store: Callable[..., Store]) -> None:
    store = open_store(store_url)
    assert isinstance(store, SqlStore)
    with store.transaction() as tx:
        add_outbound(tx, "gone@example.com")
    migrations.downgrade(store.engine, "base")
    assert _tables(raw_engine) <= {migrations.VERSION_TABLE}
    assert _revision(raw_engine) is None
    migrations.upgrade(store.engine)
    assert _tables(raw_engine) == STORE_TABLES | {migrations.VERSION_TABLE}
    assert _revision(raw_engine) == migrations.head_revision()
    assert _differences(raw_engine) == []
    with store.transaction() as tx:
        assert tx.get_outbound("gone@example.com") is None
        add_outbound(tx, "new@example.com")


def test_messages_received_before_revision_0003_keep_no_digest(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    """Upgrading from 0001 adds inbound_messages.content_digest, NULL for the rows already there (the
    engine takes a later copy of them as identical); downgrading to 0001 drops it and keeps the rows."""
    store = open_store(store_url)
    assert isinstance(store, SqlStore)
    migrations.downgrade(store.engine, "0001")
    assert "content_digest" not in {c["name"] for c in inspect(raw_engine).get_columns("inbound_messages")}
    with raw_engine.begin() as conn:
        blob = conn.execute(
            text("INSERT INTO blobs (size, chunk_count, created_at) VALUES (0, 0, :t) RETURNING id"),
            {"t": "2025-01-01 00:00:00"},
        ).scalar_one()
        conn.execute(
            text(
                "INSERT INTO inbound_messages (message_id, duplicate_elimination, from_party, cpaid, "
                "conversation_id, service, action, received_at, content_type, body_blob_id, duplicate_count) "
                "VALUES ('old@example.com', :de, 'a', 'cpa', 'conv', 'svc', 'act', :t, 'text/xml', :blob, 0)"
            ),
            {"de": True, "t": "2025-01-01 00:00:00", "blob": blob},
        )
    migrations.upgrade(store.engine)
    assert _revision(raw_engine) == migrations.head_revision() and _differences(raw_engine) == []
    with store.transaction(readonly=True) as tx:
        old = tx.find_inbound("old@example.com")
    assert old is not None and old.content_digest is None
    migrations.downgrade(store.engine, "0001")
    with raw_engine.connect() as conn:
        assert conn.execute(text("SELECT message_id FROM inbound_messages")).scalars().all() == ["old@example.com"]
    migrations.upgrade(store.engine)


def test_without_migrate_an_old_schema_is_a_configuration_error(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    with pytest.raises(ConfigurationError, match="migrate=True"):
        open_store(store_url, migrate=False)
    assert _tables(raw_engine) == set()
    open_store(store_url)
    open_store(store_url, migrate=False)  # at head: fine


def test_a_schema_from_a_newer_msh_is_a_configuration_error(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    open_store(store_url).close()
    with raw_engine.begin() as conn:
        conn.execute(text(f"UPDATE {migrations.VERSION_TABLE} SET version_num = '9999'"))
    with pytest.raises(ConfigurationError, match="'9999', which this version of the MSH does not know"):
        open_store(store_url)
    assert _revision(raw_engine) == "9999"  # left as it was


def test_a_failed_upgrade_leaves_the_database_untouched(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    """DDL runs in one transaction: a table in the way makes the upgrade fail and leaves nothing half done."""
    with raw_engine.begin() as conn:
        conn.execute(text("CREATE TABLE events (id INTEGER PRIMARY KEY)"))
    with pytest.raises(ConfigurationError, match=r"failed: .*nothing was changed"):
        open_store(store_url)
    assert _tables(raw_engine) == {"events"}
    assert _revision(raw_engine) is None


CHILD = """
import sys
from msh.store import open_store
print("ready", flush=True)
sys.stdin.readline()  # all children start opening at once, when the parent says so
open_store(sys.argv[1]).close()
print("opened", flush=True)
"""


def test_processes_starting_together_upgrade_one_after_the_other(store_url: str, raw_engine: Engine) -> None:
    """Several MSH processes opening an empty database at once: one creates the schema, the others wait
    and find it done (PostgreSQL: advisory lock; SQLite: BEGIN IMMEDIATE)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, store_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        for _ in range(3)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline() == "ready\n"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        results = [child.communicate(timeout=60) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=10)
    assert [(child.returncode, out) for child, (out, _) in zip(children, results, strict=True)] == [
        (0, "opened\n")
    ] * 3, [err for _, err in results]
    assert _revision(raw_engine) == migrations.head_revision()


def test_threads_starting_together_upgrade_one_after_the_other(store_url: str, raw_engine: Engine) -> None:
    """The same within one process (Alembic's module-wide context is used by one thread at a time)."""
    barrier = threading.Barrier(3)
    outcomes: list[str] = []

    def start() -> None:
        barrier.wait(timeout=10)
        try:
            SqlStore.open(store_url).close()
            outcomes.append("ok")
        except BaseException as exc:
            outcomes.append(repr(exc))

    threads = [threading.Thread(target=start) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert outcomes == ["ok", "ok", "ok"]
    assert _revision(raw_engine) == migrations.head_revision()


# Revision 0002: durations as xs:duration text (an agreement's RetryInterval may count months).

OUTBOUND_0001 = table(
    "outbound_messages",
    *(
        column(name, type_)
        for name, type_ in {
            "message_id": Text(),
            "cpaid": Text(),
            "conversation_id": Text(),
            "service": Text(),
            "action": Text(),
            "to_party": Text(),
            "endpoint_url": Text(),
            "content_type": Text(),
            "body_blob_id": Integer(),
            "retries": Integer(),
            "retry_interval_s": Float(),
            "first_resend_timeout_s": Float(),
            "persist_duration_s": Float(),
            "ack_requested": Boolean(),
            "status": Text(),
            "attempts": Integer(),
            "reached_peer": Boolean(),
            "created_at": UtcDateTime(),
            "updated_at": UtcDateTime(),
        }.items()
    ),
)
BLOBS = table("blobs", column("id", Integer()), column("size", Integer()), column("chunk_count", Integer()))
BLOBS.append_column(column("created_at", UtcDateTime()))

# (retry_interval_s, first_resend_timeout_s, persist_duration_s) as revision 0001 kept them, and the text 0002 makes.
OLD_ROWS = {
    "a@x": ((30.0, 60.0, 86400.0), ("PT30S", "PT1M", "P1D")),
    "b@x": ((0.3, 1.5, None), ("PT0.3S", "PT1.5S", None)),
    "c@x": ((90061.25, 0.0, 3600.0), ("P1DT1H1M1.25S", "PT0S", "PT1H")),
}


def _rows_of_revision_0001(engine: Engine) -> None:
    migrations.upgrade(engine, "0001")
    with engine.begin() as conn:
        conn.execute(BLOBS.insert().values(id=1, size=0, chunk_count=0, created_at=T0))
        for message_id, ((retry, first, persist), _) in OLD_ROWS.items():
            conn.execute(
                OUTBOUND_0001.insert().values(
                    message_id=message_id,
                    cpaid="cpa",
                    conversation_id="c",
                    service="s",
                    action="a",
                    to_party="p",
                    endpoint_url="https://p.example/",
                    content_type="text/xml",
                    body_blob_id=1,
                    retries=3,
                    retry_interval_s=retry,
                    first_resend_timeout_s=first,
                    persist_duration_s=persist,
                    ack_requested=True,
                    status="pending",
                    attempts=0,
                    reached_peer=False,
                    created_at=T0,
                    updated_at=T0,
                )
            )


def test_revision_0002_carries_stored_durations_forward_and_back(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    _rows_of_revision_0001(raw_engine)
    store = open_store(store_url)  # upgrades to head
    assert _revision(raw_engine) == migrations.head_revision()
    assert _differences(raw_engine) == []
    with raw_engine.connect() as conn:
        stored = conn.execute(
            text("SELECT message_id, retry_interval, first_resend_timeout, persist_duration FROM outbound_messages")
        ).all()
    assert {row[0]: tuple(row[1:]) for row in stored} == {m: new for m, (_, new) in OLD_ROWS.items()}
    with store.transaction(readonly=True) as tx:
        message = tx.get_outbound("c@x")
    assert message is not None
    assert message.state.reliability.retry_interval.to_timedelta() == timedelta(seconds=90061.25)
    # Back to 0001: the seconds come back as they were.
    assert isinstance(store, SqlStore)
    migrations.downgrade(store.engine, "0001")
    with raw_engine.connect() as conn:
        old = conn.execute(
            text(
                "SELECT message_id, retry_interval_s, first_resend_timeout_s, persist_duration_s FROM outbound_messages"
            )
        ).all()
    assert {row[0]: tuple(row[1:]) for row in old} == {m: before for m, (before, _) in OLD_ROWS.items()}


def test_downgrading_below_0002_refuses_month_durations_and_changes_nothing(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    store = open_store(store_url)
    assert isinstance(store, SqlStore)
    with store.transaction() as tx:
        add_outbound(tx, "seconds@x")
        add_outbound(tx, "months@x", reliability=replace(RELIABILITY, persist_duration=XsDuration(months=1)))
    with pytest.raises(ConfigurationError) as caught:
        migrations.downgrade(store.engine, "0001")
    assert str(caught.value) == (
        "the store cannot go back to revision 0001: outbound message 'months@x' keeps persist_duration P1M, which "
        "counts months, and revision 0001 keeps durations in seconds only; let such messages finish (or delete "
        "them) before downgrading. Nothing was changed."
    )
    assert _revision(raw_engine) == migrations.head_revision()  # the whole downgrade was rolled back
    assert _differences(raw_engine) == []
    with store.transaction(readonly=True) as tx:
        kept = tx.get_outbound("months@x")
    assert kept is not None and kept.state.reliability.persist_duration == XsDuration(months=1)


# Revision 0004: multi-hop messaging (ebMS2 §10): the kind of an outbound row, hop_ack, the status 'forwarded'.

OUTBOUND_0003 = table(
    "outbound_messages",
    *(
        column(name, type_)
        for name, type_ in {
            "message_id": Text(),
            "cpaid": Text(),
            "conversation_id": Text(),
            "service": Text(),
            "action": Text(),
            "to_party": Text(),
            "endpoint_url": Text(),
            "content_type": Text(),
            "body_blob_id": Integer(),
            "retries": Integer(),
            "retry_interval": Text(),
            "first_resend_timeout": Text(),
            "ack_requested": Boolean(),
            "ack_actor": Text(),
            "status": Text(),
            "attempts": Integer(),
            "reached_peer": Boolean(),
            "created_at": UtcDateTime(),
            "updated_at": UtcDateTime(),
        }.items()
    ),
)
HOP = replace(RELIABILITY, hop_ack=True)
OLD_STATUS_CHECK = "ck_outbound_messages_ck_outbound_messages_status"  # revision 0001 named it twice over
OLD_SEVERITY_CHECK = "ck_outbound_messages_ck_outbound_messages_failure_severity"


def _rows_of_revision_0003(engine: Engine) -> None:
    migrations.upgrade(engine, "0003")
    with engine.begin() as conn:
        # The database numbers the blob (on PostgreSQL an id given here would not advance its identity).
        blob_id = conn.execute(
            BLOBS.insert().values(size=0, chunk_count=0, created_at=T0).returning(BLOBS.c.id)
        ).scalar_one()
        for message_id, status in (("p@x", "pending"), ("w@x", "awaiting-ack"), ("d@x", "delivered")):
            conn.execute(
                OUTBOUND_0003.insert().values(
                    message_id=message_id,
                    cpaid="cpa",
                    conversation_id="c",
                    service="s",
                    action="a",
                    to_party="p",
                    endpoint_url="https://p.example/",
                    content_type="text/xml",
                    body_blob_id=blob_id,
                    retries=3,
                    retry_interval="PT30S",
                    first_resend_timeout="PT1M",
                    ack_requested=True,
                    ack_actor="urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH",
                    status=status,
                    attempts=0 if status == "pending" else 1,
                    reached_peer=status != "pending",
                    created_at=T0,
                    updated_at=T0,
                )
            )


def _checks(engine: Engine) -> dict[str, str]:
    """The check constraints of outbound_messages, name -> text (as the database shows it)."""
    return {c["name"]: c["sqltext"] for c in inspect(engine).get_check_constraints("outbound_messages")}


def _indexes(engine: Engine, table_name: str) -> set[str]:
    return {str(index["name"]) for index in inspect(engine).get_indexes(table_name)}


def test_revision_0004_makes_the_stored_rows_the_applications_own(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    _rows_of_revision_0003(raw_engine)
    store = open_store(store_url)  # upgrades to head
    assert _revision(raw_engine) == migrations.head_revision()
    assert _differences(raw_engine) == []
    with raw_engine.connect() as conn:
        stored = conn.execute(text("SELECT message_id, kind, hop_ack FROM outbound_messages ORDER BY 1")).all()
    assert [tuple(row) for row in stored] == [("d@x", "own", False), ("p@x", "own", False), ("w@x", "own", False)]
    with store.transaction(readonly=True) as tx:
        listed = [tx.get_outbound(message_id) for message_id in ("d@x", "p@x", "w@x")]
    assert [(m.message_id, m.kind, m.state.status, m.state.reliability.hop_ack) for m in listed if m] == [
        ("d@x", OutboundKind.OWN, OutboundStatus.DELIVERED, False),
        ("p@x", OutboundKind.OWN, OutboundStatus.PENDING, False),
        ("w@x", OutboundKind.OWN, OutboundStatus.AWAITING_ACK, False),
    ]
    checks = _checks(raw_engine)
    assert set(checks) == {
        "ck_outbound_messages_status",
        "ck_outbound_messages_kind",
        "ck_outbound_messages_reliable_messaging_method",  # revision 0012
        OLD_SEVERITY_CHECK,
    }
    assert "forwarded" in checks["ck_outbound_messages_status"]
    assert all(kind in checks["ck_outbound_messages_kind"] for kind in ("own", "forward", "signal"))
    assert {"ix_outbound_messages_kind_status", "ix_outbound_messages_body_blob_id"} <= _indexes(
        raw_engine, "outbound_messages"
    )
    assert "ix_inbound_messages_body_blob_id" in _indexes(raw_engine, "inbound_messages")
    with store.transaction() as tx:  # the new status and kinds go in
        tx.update_outbound_state(outbound_state("w@x", HOP, status=OutboundStatus.FORWARDED))
        add_outbound(tx, "fwd@x", kind=OutboundKind.FORWARD)
    with pytest.raises(IntegrityError), raw_engine.begin() as conn:
        conn.execute(text("UPDATE outbound_messages SET kind = 'relay' WHERE message_id = 'p@x'"))


def test_downgrading_below_0004_refuses_forwarded_and_foreign_rows_and_changes_nothing(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    store = open_store(store_url)
    assert isinstance(store, SqlStore)
    stored = ("own@x", "forwarded@x", "relay@x", "signal@x")
    with store.transaction() as tx:
        add_outbound(tx, "own@x", reliability=HOP)
        add_outbound(tx, "forwarded@x", state=outbound_state("forwarded@x", HOP, status=OutboundStatus.FORWARDED))
        add_outbound(tx, "relay@x", kind=OutboundKind.FORWARD)
        add_outbound(tx, "signal@x", kind=OutboundKind.SIGNAL)
        before = [tx.get_outbound(message_id) for message_id in stored]
    checks = _checks(raw_engine)
    with pytest.raises(ConfigurationError) as caught:
        migrations.downgrade(store.engine, "0003")
    assert str(caught.value) == (
        "the store cannot go back to revision 0003: 3 outbound message(s) cannot be kept there, the first "
        "'forwarded@x' (kind own, status forwarded); revision 0003 knows neither the status 'forwarded' (an "
        "intermediary acknowledged the message, the end-to-end acknowledgment is awaited) nor messages other than "
        "the application's own (kind 'forward': forwarded as an intermediary; kind 'signal': signals sent hop by "
        "hop). Let forwarded messages end (delivered or failed) and delete the rows of kind 'forward' and 'signal' "
        "before downgrading. Nothing was changed."
    )
    assert _revision(raw_engine) == migrations.head_revision()
    assert _differences(raw_engine) == [] and _checks(raw_engine) == checks
    with store.transaction(readonly=True) as tx:
        assert [tx.get_outbound(message_id) for message_id in stored] == before


def test_revision_0004_downgrades_the_applications_own_messages_and_back(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    store = open_store(store_url)
    assert isinstance(store, SqlStore)
    with store.transaction() as tx:
        add_outbound(tx, "hop@x", reliability=HOP)
        add_outbound(tx, "done@x", state=outbound_state("done@x", status=OutboundStatus.DELIVERED))
    migrations.downgrade(store.engine, "0003")
    assert _revision(raw_engine) == "0003"
    columns = {c["name"] for c in inspect(raw_engine).get_columns("outbound_messages")}
    assert not {"kind", "hop_ack"} & columns
    checks = _checks(raw_engine)  # as revision 0003 had them, names included
    assert set(checks) == {OLD_STATUS_CHECK, OLD_SEVERITY_CHECK} and "forwarded" not in checks[OLD_STATUS_CHECK]
    assert not {"ix_outbound_messages_kind_status", "ix_outbound_messages_body_blob_id"} & _indexes(
        raw_engine, "outbound_messages"
    )
    assert "ix_inbound_messages_body_blob_id" not in _indexes(raw_engine, "inbound_messages")
    with raw_engine.connect() as conn:
        kept = conn.execute(text("SELECT message_id, status FROM outbound_messages ORDER BY 1")).all()
    assert [tuple(row) for row in kept] == [("done@x", "delivered"), ("hop@x", "pending")]
    with pytest.raises(IntegrityError), raw_engine.begin() as conn:
        conn.execute(text("UPDATE outbound_messages SET status = 'forwarded'"))
    migrations.upgrade(store.engine)
    assert _differences(raw_engine) == []
    with store.transaction(readonly=True) as tx:
        hop = tx.get_outbound("hop@x")
    assert hop is not None and hop.kind is OutboundKind.OWN and hop.state.reliability.hop_ack is False


# --- revision 0007: truthful outcomes -------------------------------------------------------------------


def test_revision_0007_takes_every_stored_attempt_as_possibly_transmitted_and_adds_evidence(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    _rows_of_revision_0003(raw_engine)
    migrations.upgrade(raw_engine, "0006")
    store = open_store(store_url)  # upgrades to head
    assert _revision(raw_engine) == migrations.head_revision() and _differences(raw_engine) == []
    columns = {c["name"] for c in inspect(raw_engine).get_columns("outbound_messages")}
    assert {"refused_attempts", "evidence", "receipt_problem", "unreachable_since"} <= columns
    assert "reached_peer" not in columns
    with store.transaction(readonly=True) as tx:
        kept = {m: tx.get_outbound(m) for m in ("p@x", "w@x", "d@x")}
    # ebMS2 §6.5.7: nothing recorded which attempt was refused, so each may have arrived (Warning, never an
    # Error that could be untrue); no evidence was recorded for the statuses reached before.
    assert {m: (r.state.refused, r.state.transmitted, r.state.evidence) for m, r in kept.items() if r} == {
        "p@x": (0, False, None),  # no attempt yet
        "w@x": (0, True, None),
        "d@x": (0, True, None),
    }
    with store.transaction() as tx:  # the new status goes in
        tx.update_outbound_state(outbound_state("p@x", status=OutboundStatus.SENT))
    assert "'sent'" in _checks(raw_engine)["ck_outbound_messages_status"]


def test_downgrading_below_0007_refuses_sent_rows_and_changes_nothing(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    store = open_store(store_url)
    assert isinstance(store, SqlStore)
    with store.transaction() as tx:
        add_outbound(tx, "sent@x", state=outbound_state("sent@x", status=OutboundStatus.SENT))
        add_outbound(tx, "done@x", state=outbound_state("done@x", status=OutboundStatus.DELIVERED, attempts=2))
        add_outbound(tx, "down@x", state=outbound_state("down@x", status=OutboundStatus.FAILED, attempts=2, refused=2))
    with pytest.raises(ConfigurationError, match=r"1 outbound message\(s\) have the status 'sent', the first 'sent@x'"):
        migrations.downgrade(store.engine, "0006")
    assert _revision(raw_engine) == migrations.head_revision() and _differences(raw_engine) == []
    with raw_engine.begin() as conn:
        conn.execute(text("DELETE FROM outbound_messages WHERE message_id = 'sent@x'"))
    migrations.downgrade(store.engine, "0006")
    with raw_engine.connect() as conn:
        reached = dict(conn.execute(text("SELECT message_id, reached_peer FROM outbound_messages")).all())
    assert {m: bool(v) for m, v in reached.items()} == {"done@x": True, "down@x": False}
    migrations.upgrade(store.engine)
    assert _differences(raw_engine) == []
    with store.transaction(readonly=True) as tx:
        done = tx.get_outbound("done@x")
    assert done is not None and done.state.transmitted and done.state.status is OutboundStatus.DELIVERED


# --- revision 0008: MessageOrder ------------------------------------------------------------------------


def test_downgrading_below_0008_refuses_held_entries_and_changes_nothing(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    store = open_store(store_url)
    assert isinstance(store, SqlStore)
    with store.transaction() as tx:
        add_inbound(tx, "held@x", deliver=False, hold=True, sequence_number=3)
        add_inbound(tx, "new@x", sequence_number=0)
    with pytest.raises(ConfigurationError, match=r"1 inbox entr\(y/ies\) are held or abandoned"):
        migrations.downgrade(store.engine, "0007")
    assert _revision(raw_engine) == migrations.head_revision() and _differences(raw_engine) == []
    with raw_engine.begin() as conn:
        conn.execute(text("UPDATE inbox SET state = 'new' WHERE message_id = 'held@x'"))
    migrations.downgrade(store.engine, "0007")
    assert not {"sequence_counters", "order_positions"} & _tables(raw_engine)
    with pytest.raises(IntegrityError), raw_engine.begin() as conn:
        conn.execute(text("UPDATE inbox SET state = 'held'"))
    migrations.upgrade(store.engine)
    assert _differences(raw_engine) == []
    with store.transaction(readonly=True) as tx:
        kept = tx.find_inbound("new@x")
    assert kept is not None and kept.sequence_number is None  # the column came back empty


def test_revision_0008_keeps_every_inbox_entry_and_claim_both_ways(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    """Changing the inbox's state constraint rebuilds the table on SQLite; the entries and the applications'
    claims on them (leases, rejections) come through unchanged, up and down."""
    store = open_store(store_url)
    assert isinstance(store, SqlStore)
    claim = InboxClaim(0, "erp", T0 + timedelta(minutes=5), None, None, None, 2)
    with store.transaction() as tx:
        entry = add_inbound(tx, "claimed@x")
        claim = replace(claim, entry_id=entry.id)
        tx.put_inbox_claim(claim)
    for step in ("0007", "head"):
        if step == "head":
            migrations.upgrade(store.engine)
        else:
            migrations.downgrade(store.engine, step)
        with raw_engine.connect() as conn:
            kept = conn.execute(text("SELECT application, takes FROM inbox_claims")).all()
            entries = conn.execute(text("SELECT message_id, state FROM inbox")).all()
        assert [tuple(row) for row in kept] == [("erp", 2)], step
        assert [tuple(row) for row in entries] == [("claimed@x", "new")], step
    with store.transaction(readonly=True) as tx:
        assert tx.inbox_claim(entry.id) == claim


# --- revision 0012: ReliableMessagingMethod ---------------------------------------------------------------


def test_revision_0012_reads_every_stored_row_as_sent_by_the_ebxml_protocol(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    """Rows stored before the method was kept were sent by the ebXML rules: the Reliable Messaging draft's
    default method, "ebXML"."""
    _rows_of_revision_0003(raw_engine)
    migrations.upgrade(raw_engine, "0011")
    store = open_store(store_url)  # upgrades to head
    assert _revision(raw_engine) == migrations.head_revision() and _differences(raw_engine) == []
    with store.transaction(readonly=True) as tx:
        kept = {m: tx.get_outbound(m) for m in ("p@x", "w@x", "d@x")}
    assert {m: r.state.reliability.method for m, r in kept.items() if r} == dict.fromkeys(
        ("p@x", "w@x", "d@x"), ReliableMessagingMethod.EBXML
    )
    assert "'Transport'" in _checks(raw_engine)["ck_outbound_messages_reliable_messaging_method"]


def test_a_transport_row_round_trips_and_downgrading_below_0012_refuses_it(
    store_url: str, raw_engine: Engine, open_store: Callable[..., Store]
) -> None:
    store = open_store(store_url)
    assert isinstance(store, SqlStore)
    by_transport = replace(RELIABILITY, method=ReliableMessagingMethod.TRANSPORT)
    with store.transaction() as tx:
        add_outbound(tx, "queued@x", reliability=by_transport)
        add_outbound(tx, "ebxml@x")
    with store.transaction(readonly=True) as tx:
        row = tx.get_outbound("queued@x")
    assert row is not None and row.state.reliability == by_transport
    with pytest.raises(ConfigurationError, match=r"1 outbound message\(s\) are sent with ReliableMessagingMethod Tra"):
        migrations.downgrade(store.engine, "0011")
    assert _revision(raw_engine) == migrations.head_revision() and _differences(raw_engine) == []
    with raw_engine.begin() as conn:
        conn.execute(text("DELETE FROM outbound_messages WHERE message_id = 'queued@x'"))
    migrations.downgrade(store.engine, "0011")
    migrations.upgrade(store.engine)
    assert _differences(raw_engine) == []
    with store.transaction(readonly=True) as tx:
        kept = tx.get_outbound("ebxml@x")
    assert kept is not None and kept.state.reliability.method is ReliableMessagingMethod.EBXML
