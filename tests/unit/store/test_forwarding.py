"""Outbound rows of a multi-hop MSH (ebMS2 §10): their kind, the hop acknowledgment and the status
'forwarded', requeueing another copy of a forwarded message, and listings; identical on SQLite,
PostgreSQL and the in-memory twin."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from msh.engine import OutboundStatus
from msh.store import (
    OutboundKind,
    OutboundMessage,
    SqlStore,
    Store,
    StoreError,
    Transaction,
    UnknownBlob,
    UnknownMessage,
)
from msh.store.schema import OUTBOUND_KINDS, OUTBOUND_STATUSES
from tests.support.store import RELIABILITY, T0, FakeClock, add_inbound, add_outbound, outbound_state

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
        refused=0,
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
    for change in ("kind = 'relay'", "status = 'shipped'"):
        with pytest.raises(IntegrityError), sql_store.engine.begin() as conn:
            conn.execute(text(f"UPDATE outbound_messages SET {change}"))


# ------------------------------------------------------------------------------------------------ requeue


def _forward(tx: Transaction, message_id: str, body: bytes = b"copy 1", **overrides: object) -> OutboundMessage:
    """A message this MSH forwards as an intermediary, transmitted twice and awaiting its acknowledgment."""
    state = outbound_state(
        message_id,
        status=OutboundStatus.AWAITING_ACK,
        attempts=2,
        first_sent_at=T0,
        refused=0,
        next_due_at=T0 + timedelta(minutes=1),
    )
    values: dict[str, object] = {"kind": OutboundKind.FORWARD, "state": state, **overrides}
    return add_outbound(tx, message_id, body, **values)  # type: ignore[arg-type]


def _requeue(tx: Transaction, message_id: str, body: bytes = b"copy 2", **changes: object) -> OutboundMessage:
    """Requeue another copy of ``message_id``: a fresh pending state, a new body, endpoint and content type."""
    values: dict[str, object] = {
        "state": outbound_state(message_id),
        "body_blob_id": tx.put_blob(body),
        "content_type": 'multipart/related; type="text/xml"; boundary="b2"; start="<soap@msh>"',
        "endpoint_url": "https://next-hop.example/msh",
        **changes,
    }
    return tx.requeue_outbound(**values)  # type: ignore[arg-type]


def test_requeue_replaces_state_body_and_endpoint_and_keeps_the_rest(store: Store, clock: FakeClock) -> None:
    with store.transaction() as tx:
        first = _forward(tx, "fwd@example.com")
    clock.advance(60)
    with store.transaction() as tx:
        again = _requeue(tx, "fwd@example.com")
        assert tx.get_outbound("fwd@example.com") == again
        with pytest.raises(UnknownBlob):
            tx.open_blob(first.body_blob_id)  # no row names it any more
    assert again == replace(
        first,
        # A forward's promise ends at the next MSH: the store reads end_to_end back from the kind.
        state=outbound_state("fwd@example.com", replace(RELIABILITY, end_to_end=False)),
        body_blob_id=again.body_blob_id,
        content_type='multipart/related; type="text/xml"; boundary="b2"; start="<soap@msh>"',
        endpoint_url="https://next-hop.example/msh",
        updated_at=clock.now,
    )
    assert again.created_at == T0 and again.kind is OutboundKind.FORWARD
    with store.transaction(readonly=True) as tx:
        assert tx.get_outbound("fwd@example.com") == again
    with store.open_blob(again.body_blob_id) as body:
        assert body.read() == b"copy 2"
    with pytest.raises(UnknownBlob):
        store.open_blob(first.body_blob_id)


def test_requeue_keeps_a_body_another_row_names(store: Store) -> None:
    """The received copy of a forwarded message may share its body blob: the blob stays while named."""
    with store.transaction() as tx:
        received = add_inbound(tx, "shared@example.com", body=b"as received", deliver=False)
        first = _forward(tx, "shared@example.com", kind=OutboundKind.SIGNAL, body_blob_id=received.body_blob_id)
        again = _requeue(tx, "shared@example.com")
        assert again.kind is OutboundKind.SIGNAL
        kept = _forward(tx, "same-body@example.com")
        assert _requeue(tx, "same-body@example.com", body_blob_id=kept.body_blob_id).body_blob_id == kept.body_blob_id
    assert first.body_blob_id == received.body_blob_id != again.body_blob_id
    with store.open_blob(received.body_blob_id) as body:
        assert body.read() == b"as received"
    with store.open_blob(kept.body_blob_id) as body:
        assert body.read() == b"copy 1"


def test_the_replaced_body_stays_readable_outside_until_the_commit(store: Store) -> None:
    with store.transaction() as tx:
        first = _forward(tx, "late@example.com")
    with store.transaction() as tx:
        _requeue(tx, "late@example.com")
        with store.open_blob(first.body_blob_id) as body:  # another reader, outside the transaction
            assert body.read() == b"copy 1"
    with pytest.raises(UnknownBlob):
        store.open_blob(first.body_blob_id)


def test_requeue_refuses_own_messages_unknown_ids_and_missing_blobs(store: Store) -> None:
    with store.transaction() as tx:
        own = add_outbound(tx, "own@example.com")
    with store.transaction() as tx:
        with pytest.raises(ValueError, match=r"'own@example.com' is the application's own message .* cannot be"):
            _requeue(tx, "own@example.com")
        with pytest.raises(UnknownMessage, match=r"nobody@example\.com"):
            _requeue(tx, "nobody@example.com")
        _forward(tx, "fwd@example.com")
        with pytest.raises(UnknownBlob):
            _requeue(tx, "fwd@example.com", body_blob_id=987654)
        with pytest.raises(ValueError, match="endpoint_url"):
            _requeue(tx, "fwd@example.com", endpoint_url="")
        with pytest.raises(ValueError, match="content_type"):
            _requeue(tx, "fwd@example.com", content_type="")
        with pytest.raises(ValueError, match="state must be an OutboundState"):
            _requeue(tx, "fwd@example.com", state=None)
        assert tx.get_outbound("own@example.com") == own
    with store.transaction(readonly=True) as tx, pytest.raises(StoreError, match="read-only"):
        tx.requeue_outbound(
            state=outbound_state("fwd@example.com"), body_blob_id=1, content_type="text/xml", endpoint_url="x"
        )


def test_a_requeue_undone_by_a_savepoint_or_a_rollback_leaves_the_row_and_its_body(store: Store) -> None:
    with store.transaction() as tx:
        first = _forward(tx, "fwd@example.com")
        with pytest.raises(Boom), tx.savepoint():
            again = _requeue(tx, "fwd@example.com")
            assert tx.get_outbound("fwd@example.com") == again
            raise Boom
        assert tx.get_outbound("fwd@example.com") == first
        with pytest.raises(UnknownBlob):
            tx.open_blob(again.body_blob_id)
        with tx.open_blob(first.body_blob_id) as body:
            assert body.read() == b"copy 1"
    with pytest.raises(Boom), store.transaction() as tx:
        _requeue(tx, "fwd@example.com")
        raise Boom
    with store.transaction(readonly=True) as tx:
        assert tx.get_outbound("fwd@example.com") == first
    with store.open_blob(first.body_blob_id) as body:
        assert body.read() == b"copy 1"


# ------------------------------------------------------------------------------------------------ listing


def _ids(found: list[OutboundMessage]) -> list[str]:
    return [m.message_id for m in found]


def _fill(store: Store, clock: FakeClock) -> list[str]:
    """Messages of every kind and several statuses; the MessageIds in listing order."""
    with store.transaction() as tx:
        add_outbound(tx, "z-first@x")
    clock.advance(1)
    with store.transaction() as tx:
        # Created at the same time: MessageId in code point order ("B" < "a" < "b"), on every store.
        add_outbound(tx, "b@x", kind=OutboundKind.FORWARD)
        add_outbound(tx, "a@x", kind=OutboundKind.SIGNAL)
        add_outbound(tx, "B@x", kind=OutboundKind.FORWARD)
    clock.advance(1)
    with store.transaction() as tx:
        add_outbound(tx, "last@x")
        tx.update_outbound_state(outbound_state("b@x", HOP, status=OutboundStatus.FORWARDED))
        tx.update_outbound_state(outbound_state("last@x", status=OutboundStatus.FORWARDED))
    return ["z-first@x", "B@x", "a@x", "b@x", "last@x"]


def test_list_outbound_orders_by_creation_then_message_id_and_filters(store: Store, clock: FakeClock) -> None:
    order = _fill(store, clock)
    with store.transaction(readonly=True) as tx:
        everything = tx.list_outbound()
        assert _ids(everything) == order
        assert everything[3] == tx.get_outbound("b@x")
        assert _ids(tx.list_outbound(kind=OutboundKind.FORWARD)) == ["B@x", "b@x"]
        assert _ids(tx.list_outbound(kind="own")) == ["z-first@x", "last@x"]  # type: ignore[arg-type]
        assert _ids(tx.list_outbound(status=OutboundStatus.FORWARDED)) == ["b@x", "last@x"]
        assert _ids(tx.list_outbound(kind=OutboundKind.FORWARD, status=OutboundStatus.PENDING)) == ["B@x"]
        assert tx.list_outbound(kind=OutboundKind.SIGNAL, status=OutboundStatus.FAILED) == []
        assert _ids(tx.list_outbound(limit=2)) == order[:2]


def test_list_outbound_pages_on_after_the_last_message_id_seen(store: Store, clock: FakeClock) -> None:
    order = _fill(store, clock)
    with store.transaction(readonly=True) as tx:
        pages: list[list[str]] = []
        after: str | None = None
        while page := _ids(tx.list_outbound(limit=2, after=after)):
            pages.append(page)
            after = page[-1]
        assert pages == [order[0:2], order[2:4], order[4:]]
        assert _ids(tx.list_outbound(after="a@x")) == ["b@x", "last@x"]
        # The position is the listing's order, whatever the filter: "B@x" is not forwarded.
        assert _ids(tx.list_outbound(status=OutboundStatus.FORWARDED, after="B@x")) == ["b@x", "last@x"]
        assert _ids(tx.list_outbound(kind=OutboundKind.FORWARD, after="b@x")) == []


def test_list_outbound_refuses_bad_arguments(store: Store, clock: FakeClock) -> None:
    _fill(store, clock)
    with store.transaction(readonly=True) as tx:
        with pytest.raises(UnknownMessage, match="nobody@x"):
            tx.list_outbound(after="nobody@x")
        with pytest.raises(ValueError, match="after"):
            tx.list_outbound(after="")
        with pytest.raises(ValueError, match="limit"):
            tx.list_outbound(limit=0)
        with pytest.raises(ValueError, match=r"status must be one of \['pending', 'awaiting-ack', 'forwarded'"):
            tx.list_outbound(status="shipped")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="kind must be one of"):
            tx.list_outbound(kind="relay")  # type: ignore[arg-type]
