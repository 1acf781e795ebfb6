"""Outbound rows of a multi-hop MSH (ebMS2 §10): their kind, the hop acknowledgment and the status
'forwarded'; identical on SQLite, PostgreSQL and the in-memory twin."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from msh.engine import OutboundStatus
from msh.store import (
    OutboundKind,
    SqlStore,
    Store,
)
from msh.store.schema import OUTBOUND_KINDS, OUTBOUND_STATUSES
from tests.support.store import RELIABILITY, T0, FakeClock, add_outbound, outbound_state

HOP = replace(RELIABILITY, hop_ack=True)
"""Asks the To Party MSH and the next MSH for an acknowledgment (ebMS2 §10.1.3)."""


class Boom(Exception):
    """Raised inside a transaction or savepoint to make it roll back."""


def test_the_schema_lists_every_status_and_kind() -> None:
    assert tuple(s.value for s in OutboundStatus) == OUTBOUND_STATUSES
    assert tuple(k.value for k in OutboundKind) == OUTBOUND_KINDS


# ------------------------------------------------------------------------------- hop_ack and forwarded


def test_hop_ack_and_the_forwarded_status_read_back(store: Store, clock: FakeClock) -> None:
    forwarded = outbound_state(
        "hop@example.com",
        HOP,
        status=OutboundStatus.FORWARDED,
        attempts=1,
        first_sent_at=T0,
        reached_peer=True,
        next_due_at=T0 + timedelta(hours=1),
    )
    with store.transaction() as tx:
        written = add_outbound(tx, "hop@example.com", reliability=HOP)
        add_outbound(tx, "plain@example.com")
    assert written.state.reliability.hop_ack is True
    clock.advance(5)
    with store.transaction() as tx:
        tx.update_outbound_state(forwarded)
    with store.transaction(readonly=True) as tx:
        assert tx.outbound_status("hop@example.com") == forwarded
        read = tx.get_outbound("hop@example.com")
        plain = tx.get_outbound("plain@example.com")
    assert read is not None and read.state == forwarded and read.updated_at == clock.now
    assert plain is not None and plain.state.reliability.hop_ack is False


def test_sql_stores_keep_hop_ack_and_forwarded_in_their_columns(sql_store: SqlStore) -> None:
    with sql_store.transaction() as tx:
        add_outbound(
            tx, "hop@example.com", state=outbound_state("hop@example.com", HOP, status=OutboundStatus.FORWARDED)
        )
        add_outbound(tx, "plain@example.com")
    with sql_store.engine.connect() as conn:
        stored = conn.execute(text("SELECT message_id, hop_ack, status FROM outbound_messages ORDER BY 1")).all()
    assert [tuple(row) for row in stored] == [
        ("hop@example.com", True, "forwarded"),
        ("plain@example.com", False, "pending"),
    ]


# ------------------------------------------------------------------------------------------------- kind


def test_the_kind_defaults_to_own_and_reads_back(store: Store) -> None:
    with store.transaction() as tx:
        own = add_outbound(tx, "own@example.com")
        forward = add_outbound(tx, "forward@example.com", kind=OutboundKind.FORWARD)
        signal = add_outbound(tx, "signal@example.com", kind="signal")  # its token will do
    assert (own.kind, forward.kind, signal.kind) == (OutboundKind.OWN, OutboundKind.FORWARD, OutboundKind.SIGNAL)
    with store.transaction(readonly=True) as tx:
        assert tx.get_outbound("own@example.com") == own
        assert tx.get_outbound("forward@example.com") == forward
        assert tx.get_outbound("signal@example.com") == signal
    assert signal.kind is OutboundKind.SIGNAL


def test_an_unknown_kind_is_refused(store: Store) -> None:
    with store.transaction() as tx:
        with pytest.raises(ValueError, match=r"kind must be one of \['own', 'forward', 'signal'\], not 'relay'"):
            add_outbound(tx, "relay@example.com", kind="relay")
        assert tx.get_outbound("relay@example.com") is None


def test_sql_stores_check_kind_and_status_in_the_database(sql_store: SqlStore) -> None:
    with sql_store.transaction() as tx:
        add_outbound(tx, "checked@example.com", kind=OutboundKind.FORWARD)
    with sql_store.engine.connect() as conn:
        assert conn.execute(text("SELECT kind FROM outbound_messages")).scalar_one() == "forward"
    for change in ("kind = 'relay'", "status = 'sent'"):
        with pytest.raises(IntegrityError), sql_store.engine.begin() as conn:
            conn.execute(text(f"UPDATE outbound_messages SET {change}"))
