"""The SQL store: SQLite (one file, the embedded default) or PostgreSQL (shared by several MSH processes).

SQLAlchemy Core over the tables of :mod:`msh.store.schema`; the rules every store follows are in
:mod:`msh.store.api`. What is particular to SQL:

URLs
    A plain path (``/var/lib/msh/store.db``, ``store.db``) or ``sqlite:///path`` is an SQLite file (created
    if absent; its folder must exist). ``postgresql+psycopg://user:pass@host:5432/db`` is PostgreSQL with
    psycopg 3 (``postgresql://`` and ``postgres://`` mean the same; install the ``postgres`` extra); add
    ``?options=-csearch_path%3Dmyschema`` to keep the tables in a schema of their own. Anything else (an
    unknown database or driver, an in-memory SQLite database, a folder that does not exist, a server that
    does not answer) is a :class:`~msh.errors.ConfigurationError` naming the store URL.

SQLite
    Every connection is set up by a connect listener: ``journal_mode=WAL`` (readers never wait for the
    writer), ``synchronous=FULL`` (a commit is on disk when it returns: a crash, even of the machine, loses
    no committed transaction), ``foreign_keys=ON`` and ``busy_timeout`` (30 s: a writer waits for another
    rather than failing). The driver's own transaction handling is turned off and each transaction starts
    with ``BEGIN IMMEDIATE`` (plain ``BEGIN`` when read-only), so writers queue up at the start instead of
    failing when a read turns into a write; SQLite has one writer at a time, which also serialises timer
    claims.

PostgreSQL
    READ COMMITTED transactions; ``get_outbound(for_update=True)`` is ``SELECT … FOR UPDATE`` and timer
    claims are ``SELECT … FOR UPDATE SKIP LOCKED`` followed by the lease update, so processes sharing the
    database never claim the same timer and never wait for each other's claims. Read-only transactions are
    ``SET TRANSACTION READ ONLY``. Concurrent upgrades are serialised by an advisory lock.

Duplicates
    Inserts of messages are ``INSERT … ON CONFLICT (message_id) DO NOTHING RETURNING …`` (for received
    messages against the partial unique index of the duplicate-elimination records): a duplicate MessageId
    writes nothing and raises :class:`~msh.store.api.DuplicateMessage` with the transaction intact, no
    savepoint needed. On PostgreSQL a concurrent insert of the same MessageId waits for the first
    transaction and then finds the duplicate.

Payloads
    A blob is written chunk by chunk inside the caller's transaction (``blob_chunks`` rows of at most
    1 MiB) and read back by a reader that selects one chunk per read: memory use does not grow with the
    size of a message.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO, Final

from sqlalchemy import (
    and_,
    bindparam,
    case,
    create_engine,
    delete,
    event,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL, Connection, Dialect, Engine, RowMapping, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.sql.schema import Table

from msh.errors import ConfigurationError
from msh.store import migrations
from msh.store.api import (
    Clock,
    Direction,
    DuplicateMessage,
    Event,
    InboundMessage,
    InboxEntry,
    InboxState,
    OutboundMessage,
    OutboundState,
    OutboundStatus,
    ReliabilityParameters,
    Store,
    StoreError,
    Timer,
    Transaction,
    TransactionLost,
    UnknownBlob,
    UnknownMessage,
    check_aware,
    check_limit,
    check_text,
    normalise_detail,
    utc_now,
)
from msh.store.blobs import DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, iter_chunks, open_chunks
from msh.store.prepared import Prepared
from msh.store.schema import (
    DE_WHERE,
    UtcDateTime,
    blob_chunks,
    blobs,
    events,
    inbound_messages,
    inbox,
    outbound_messages,
    timers,
)

__all__ = ["SqlStore", "resolve_url"]

SQLITE_BUSY_TIMEOUT_MS: Final = 30_000
PG_CONNECT_TIMEOUT_S: Final = 10
_READONLY: Final = "msh_readonly"

_URL_HELP: Final = (
    "give a file path for an SQLite store (e.g. /var/lib/msh/store.db), sqlite:///path, "
    "or postgresql+psycopg://user@host:5432/database"
)


# ------------------------------------------------------------------------------------------------- URLs


def resolve_url(url: str) -> URL:
    """The SQLAlchemy URL for a store URL or path; :class:`ConfigurationError` says what is wrong."""
    text = url.strip() if isinstance(url, str) else ""
    if not text:
        raise ConfigurationError(f"store URL is empty: {_URL_HELP}")
    if "://" not in text and not text.lower().startswith("sqlite:"):
        return _sqlite_file(Path(text).expanduser(), text)
    try:
        parsed = make_url(text)
    except (ArgumentError, ValueError) as exc:
        raise ConfigurationError(f"store URL {text!r} cannot be read ({exc}): {_URL_HELP}") from None
    backend, _, driver = parsed.drivername.partition("+")  # (get_driver_name() would load the dialect)
    shown = parsed.render_as_string(hide_password=True)
    if backend == "sqlite":
        if parsed.drivername not in ("sqlite", "sqlite+pysqlite"):
            raise ConfigurationError(f"store URL {shown!r}: the SQLite driver must be pysqlite (sqlite:///path)")
        if not parsed.database or parsed.database == ":memory:" or parsed.database.startswith("file:"):
            raise ConfigurationError(
                f"store URL {shown!r} names no database file: an SQLite store is a file (sqlite:///path/store.db); "
                "use 'memory:' for a store that lives in memory"
            )
        return _sqlite_file(Path(parsed.database).expanduser(), shown)
    if backend in ("postgresql", "postgres"):
        if parsed.drivername not in ("postgresql", "postgres", "postgresql+psycopg"):
            raise ConfigurationError(
                f"store URL {shown!r}: driver {driver!r} is not supported; use postgresql+psycopg:// (psycopg 3)"
            )
        if importlib.util.find_spec("psycopg") is None:
            raise ConfigurationError(
                f"store URL {shown!r} needs psycopg 3, which is not installed: pip install 'pymsh[postgres]'"
            )
        return parsed.set(drivername="postgresql+psycopg")
    raise ConfigurationError(f"store URL {shown!r}: database {backend!r} is not supported; {_URL_HELP}")


def _sqlite_file(path: Path, shown: str) -> URL:
    path = path.resolve()
    if path.is_dir():
        raise ConfigurationError(f"store URL {shown!r} is a folder; give the path of the database file in it")
    if not path.parent.is_dir():
        raise ConfigurationError(
            f"store URL {shown!r}: the folder {str(path.parent)!r} does not exist; create it or choose another path"
        )
    return URL.create("sqlite+pysqlite", database=str(path))


# ----------------------------------------------------------------------------------------------- engine


def _sqlite_engine(url: URL) -> Engine:
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transactions out of the driver's hands: BEGIN is emitted in _on_begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            _enable_wal(cursor)
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        readonly = connection.get_execution_options().get(_READONLY, False)
        connection.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")

    return engine


def _enable_wal(cursor: Any) -> None:
    """Switch the database file to WAL (once: the mode is stored in the file).

    Connections that open a new file at the same moment race for the switch, and SQLite answers the
    losers "database is locked" at once, without waiting for the busy timeout: they try again, for at
    most the busy timeout.
    """
    if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if str(cursor.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower() == "wal":
                return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
        if time.monotonic() > deadline:
            return  # SqlStore.open reports a database that is not in WAL mode
        time.sleep(0.01)


def _postgres_engine(url: URL) -> Engine:
    connect_args: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args)


# ---------------------------------------------------------------------------------------------- records


def _outbound(row: RowMapping) -> OutboundMessage:
    return OutboundMessage(
        message_id=row["message_id"],
        cpaid=row["cpaid"],
        conversation_id=row["conversation_id"],
        service=row["service"],
        action=row["action"],
        from_party=row["from_party"],
        to_party=row["to_party"],
        endpoint_url=row["endpoint_url"],
        content_type=row["content_type"],
        body_blob_id=int(row["body_blob_id"]),
        parameters=ReliabilityParameters(
            retries=row["retries"],
            retry_interval=row["retry_interval"],
            first_resend_timeout=row["first_resend_timeout"],
            persist_duration=row["persist_duration"],
            time_to_live=row["time_to_live"],
            ack_requested=row["ack_requested"],
            ack_actor=row["ack_actor"],
        ),
        state=_state(row),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _state(row: RowMapping) -> OutboundState:
    return OutboundState(
        status=OutboundStatus(row["status"]),
        attempts=row["attempts"],
        first_sent_at=row["first_sent_at"],
        reached_peer=row["reached_peer"],
        next_due_at=row["next_due_at"],
        failure_code=row["failure_code"],
        failure_severity=row["failure_severity"],
        failure_description=row["failure_description"],
    )


def _state_values(state: OutboundState) -> dict[str, object]:
    return {
        "status": state.status.value,
        "attempts": state.attempts,
        "first_sent_at": state.first_sent_at,
        "reached_peer": state.reached_peer,
        "next_due_at": state.next_due_at,
        "failure_code": state.failure_code,
        "failure_severity": None if state.failure_severity is None else state.failure_severity.value,
        "failure_description": state.failure_description,
    }


def _inbound(row: RowMapping) -> InboundMessage:
    ack = row["ack_envelope"]
    return InboundMessage(
        id=int(row["id"]),
        message_id=row["message_id"],
        duplicate_elimination=bool(row["duplicate_elimination"]),
        from_party=row["from_party"],
        to_party=row["to_party"],
        cpaid=row["cpaid"],
        conversation_id=row["conversation_id"],
        service=row["service"],
        action=row["action"],
        received_at=row["received_at"],
        content_type=row["content_type"],
        body_blob_id=int(row["body_blob_id"]),
        ack_envelope=None if ack is None else bytes(ack),
        duplicate_count=row["duplicate_count"],
        last_duplicate_at=row["last_duplicate_at"],
        content_digest=row["content_digest"],
    )


def _inbox(row: RowMapping) -> InboxEntry:
    return InboxEntry(
        id=int(row["inbound_id"]),
        message_id=row["message_id"],
        state=InboxState(row["state"]),
        received_at=row["received_at"],
        delivered_at=row["delivered_at"],
        acknowledged_at=row["acknowledged_at"],
    )


def _timer(row: RowMapping, owner: str | None = None, until: datetime | None = None) -> Timer:
    return Timer(
        id=int(row["id"]),
        message_id=row["message_id"],
        kind=row["kind"],
        due_at=row["due_at"],
        lease_owner=owner if owner is not None else row["lease_owner"],
        lease_until=until if until is not None else row["lease_until"],
    )


def _event(row: RowMapping) -> Event:
    direction = row["direction"]
    return Event(
        id=int(row["id"]),
        at=row["at"],
        kind=row["kind"],
        message_id=row["message_id"],
        direction=None if direction is None else Direction(direction),
        detail=dict(row["detail"]),
    )


def _blob_bytes(value: object) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise StoreError(f"a blob chunk was read back as {type(value).__name__}, not bytes")


# ------------------------------------------------------------------------------------------- statements
# The statements of every message step, compiled once per store and run on the driver's cursor
# (msh.store.prepared: the SQL and the value conversions are SQLAlchemy's, the per-call machinery is not).


def _insert_new_statement(table: Table, where: str | None) -> Callable[[Dialect], Any]:
    """``INSERT … ON CONFLICT (message_id) DO NOTHING RETURNING <key>`` (for the partial unique index
    ``where`` when given): RETURNING tells whether a row went in."""

    def build(dialect: Dialect) -> Any:
        index_where = None if where is None else text(where)
        dialect_insert = pg_insert if dialect.name == "postgresql" else sqlite_insert
        statement = dialect_insert(table).on_conflict_do_nothing(index_elements=["message_id"], index_where=index_where)
        return statement.returning(next(iter(table.primary_key.columns)))

    return build


def _fixed(statement: Any) -> Callable[[Dialect], Any]:
    return lambda _dialect: statement


_FIRST_COPY = (
    select(func.min(inbound_messages.c.id))
    .where(inbound_messages.c.message_id == bindparam("b_message_id"))
    .scalar_subquery()
)
_OUTBOUND = select(outbound_messages).where(outbound_messages.c.message_id == bindparam("b_message_id"))

_BLOB_KEYS: Final = ("size", "chunk_count", "created_at")
_BLOB_SIZE_KEYS: Final = ("size", "chunk_count")
_CHUNK_KEYS: Final = ("blob_id", "seq", "data")
_STATE_KEYS: Final = (
    "status",
    "attempts",
    "first_sent_at",
    "reached_peer",
    "next_due_at",
    "failure_code",
    "failure_severity",
    "failure_description",
    "updated_at",
)
_EVENT_KEYS: Final = ("at", "kind", "message_id", "direction", "detail")

_STATEMENTS: Final[dict[str, Callable[[Dialect], Any]]] = {
    "blob-id": _fixed(select(blobs.c.id).where(blobs.c.id == bindparam("b_id"))),
    "blob-insert": _fixed(insert(blobs).returning(blobs.c.id)),
    "blob-size": _fixed(update(blobs).where(blobs.c.id == bindparam("b_id"))),
    "chunk-insert": _fixed(insert(blob_chunks)),
    "outbound": _fixed(_OUTBOUND),
    "outbound-for-update": _fixed(_OUTBOUND.with_for_update()),
    "outbound-insert": _insert_new_statement(outbound_messages, None),
    "outbound-state": _fixed(
        update(outbound_messages).where(outbound_messages.c.message_id == bindparam("b_message_id"))
    ),
    "inbound-find": _fixed(select(inbound_messages).where(inbound_messages.c.id == _FIRST_COPY)),
    "inbound": _fixed(select(inbound_messages).where(inbound_messages.c.id == bindparam("b_id"))),
    "inbound-insert-de": _insert_new_statement(inbound_messages, DE_WHERE),
    "inbound-insert": _fixed(insert(inbound_messages).returning(inbound_messages.c.id)),
    "inbox-insert": _fixed(insert(inbox)),
    "inbox-entry": _fixed(select(inbox).where(inbox.c.inbound_id == bindparam("b_id"))),
    "timer-insert": _fixed(insert(timers).returning(timers.c.id)),
    "timer-cancel": _fixed(delete(timers).where(timers.c.message_id == bindparam("b_message_id"))),
    "timer-cancel-kind": _fixed(
        delete(timers).where(timers.c.message_id == bindparam("b_message_id"), timers.c.kind == bindparam("b_kind"))
    ),
    "timer-complete": _fixed(
        delete(timers).where(timers.c.id == bindparam("b_id"), timers.c.lease_owner == bindparam("b_owner"))
    ),
    "event-insert": _fixed(insert(events).returning(events.c.id)),
}


# ------------------------------------------------------------------------------------------ transaction


class _SqlTransaction(Transaction):
    def __init__(self, store: SqlStore, connection: Connection, readonly: bool) -> None:
        self._store = store
        self._conn = connection
        self._readonly = readonly
        self._postgres = connection.dialect.name == "postgresql"
        self._cursor: Any = None
        self._savepoints = 0
        self.closed = False

    def close(self) -> None:
        self.closed = True
        if self._cursor is not None:
            with contextlib.suppress(Exception):
                self._cursor.close()
            self._cursor = None

    def _driver_cursor(self) -> Any:
        """The DBAPI cursor of this transaction's connection (for the prepared statements)."""
        self._use()
        if self._cursor is None:
            self._cursor = self._conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        return self._cursor

    def _run(self, name: str, values: Mapping[str, object], *, keys: tuple[str, ...] | None = None) -> Any:
        """Run the prepared statement ``name`` on this transaction's driver cursor (``keys``: the columns
        an INSERT or UPDATE sets); the cursor."""
        prepared = self._store.prepared(name, keys)
        cursor = self._driver_cursor()
        try:
            return prepared.execute(cursor, values)
        except self._store.driver_error as exc:
            raise self._store.failure(exc) from exc

    def _one(self, name: str, values: Mapping[str, object], *, keys: tuple[str, ...] | None = None) -> Any:
        """Run the prepared statement ``name`` and return its first row (column key -> value), or None."""
        cursor = self._run(name, values, keys=keys)
        try:
            return self._store.prepared(name, keys).first(cursor)
        except self._store.driver_error as exc:
            raise self._store.failure(exc) from exc

    def _scalar(self, name: str, values: Mapping[str, object], *, keys: tuple[str, ...] | None = None) -> Any:
        row = self._one(name, values, keys=keys)
        return None if row is None else next(iter(row.values()))

    def _sql(self, statement: str) -> None:
        cursor = self._driver_cursor()
        try:
            cursor.execute(statement)
        except self._store.driver_error as exc:
            raise self._store.failure(exc) from exc

    @property
    def readonly(self) -> bool:
        return self._readonly

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        self._write()
        self._savepoints += 1
        name = f"msh_sp{self._savepoints}"
        self._sql(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException as exc:
            try:
                self._sql(f"ROLLBACK TO SAVEPOINT {name}")
                self._sql(f"RELEASE SAVEPOINT {name}")
            except StoreError as lost:
                raise TransactionLost(
                    f"the store at {self._store.url} ended the transaction ({lost}) after: {exc}"
                ) from exc
            raise
        try:
            self._sql(f"RELEASE SAVEPOINT {name}")
        except StoreError as lost:
            raise TransactionLost(f"the store at {self._store.url} ended the transaction: {lost}") from lost

    # -- helpers

    def _use(self) -> Connection:
        if self.closed:
            raise StoreError("the transaction has ended; open a new one")
        return self._conn

    def _write(self) -> Connection:
        conn = self._use()
        if self._readonly:
            raise StoreError("this transaction is read-only; open store.transaction() to write")
        return conn

    def _now(self) -> datetime:
        return self._store.now()

    def _insert_new(self, name: str, values: Mapping[str, object]) -> Any:
        """Run the insert-unless-duplicate statement ``name`` (see :func:`_insert_new_statement`); the row's
        primary key, or None if the row would have repeated a message_id and nothing was inserted."""
        self._write()
        return self._scalar(name, values, keys=tuple(values))

    def _require_blob(self, blob_id: int) -> None:
        if self._one("blob-id", {"b_id": blob_id}) is None:
            raise UnknownBlob(blob_id)

    # -- blobs

    def put_blob(self, source: BinaryIO | bytes) -> int:
        self._write()
        chunk_size = self._store.blob_chunk_size
        known = isinstance(source, (bytes, bytearray, memoryview))
        # The size of bytes is known up front: the blob row is written once; a stream's when it has been read.
        size = len(source) if known else 0  # type: ignore[arg-type]
        count = -(-size // chunk_size) if known else 0
        blob_id = int(
            self._scalar(
                "blob-insert", {"size": size, "chunk_count": count, "created_at": self._now()}, keys=_BLOB_KEYS
            )
        )
        size = count = 0
        for chunk in iter_chunks(source, chunk_size):
            self._run("chunk-insert", {"blob_id": blob_id, "seq": count, "data": chunk}, keys=_CHUNK_KEYS)
            size += len(chunk)
            count += 1
            del chunk
        if not known:
            self._run("blob-size", {"b_id": blob_id, "size": size, "chunk_count": count}, keys=_BLOB_SIZE_KEYS)
        return blob_id

    def _blob_row(self, blob_id: int) -> RowMapping:
        row = self._use().execute(select(blobs).where(blobs.c.id == blob_id)).mappings().first()
        if row is None:
            raise UnknownBlob(blob_id)
        return row

    def open_blob(self, blob_id: int) -> BinaryIO:
        row = self._blob_row(blob_id)

        def fetch(seq: int) -> bytes | None:
            where = and_(blob_chunks.c.blob_id == blob_id, blob_chunks.c.seq == seq)
            return _blob_bytes(self._use().execute(select(blob_chunks.c.data).where(where)).scalar_one_or_none())

        return open_chunks(fetch, int(row["chunk_count"]), int(row["size"]))

    def blob_size(self, blob_id: int) -> int:
        return int(self._blob_row(blob_id)["size"])

    # -- outbound

    def insert_outbound(
        self,
        *,
        message_id: str,
        cpaid: str,
        conversation_id: str,
        service: str,
        action: str,
        to_party: str,
        endpoint_url: str,
        content_type: str,
        body_blob_id: int,
        parameters: ReliabilityParameters,
        from_party: str | None = None,
        state: OutboundState | None = None,
    ) -> OutboundMessage:
        self._write()
        check_text("message_id", message_id)
        state = state or OutboundState()
        self._require_blob(body_blob_id)
        now = self._now()
        record = OutboundMessage(
            message_id=message_id,
            cpaid=cpaid,
            conversation_id=conversation_id,
            service=service,
            action=action,
            from_party=from_party,
            to_party=to_party,
            endpoint_url=endpoint_url,
            content_type=content_type,
            body_blob_id=body_blob_id,
            parameters=parameters,
            state=state,
            created_at=now,
            updated_at=now,
        )
        values: dict[str, object] = {
            "message_id": message_id,
            "cpaid": cpaid,
            "conversation_id": conversation_id,
            "service": service,
            "action": action,
            "from_party": from_party,
            "to_party": to_party,
            "endpoint_url": endpoint_url,
            "content_type": content_type,
            "body_blob_id": body_blob_id,
            "retries": parameters.retries,
            "retry_interval": parameters.retry_interval,
            "first_resend_timeout": parameters.first_resend_timeout,
            "persist_duration": parameters.persist_duration,
            "time_to_live": parameters.time_to_live,
            "ack_requested": parameters.ack_requested,
            "ack_actor": parameters.ack_actor,
            "created_at": now,
            "updated_at": now,
            **_state_values(state),
        }
        if self._insert_new("outbound-insert", values) is None:
            raise DuplicateMessage(message_id, Direction.OUTBOUND)
        return record

    def get_outbound(self, message_id: str, *, for_update: bool = False) -> OutboundMessage | None:
        name = "outbound-for-update" if for_update and not self._readonly else "outbound"
        row = self._one(name, {"b_message_id": message_id})
        return None if row is None else _outbound(row)

    def update_outbound_state(self, message_id: str, state: OutboundState) -> None:
        if not isinstance(state, OutboundState):
            raise ValueError("state must be an OutboundState")
        self._write()
        values = _state_values(state)
        values["updated_at"] = self._now()
        values["b_message_id"] = message_id
        result = self._run("outbound-state", values, keys=_STATE_KEYS)
        if result.rowcount == 0:
            raise UnknownMessage(message_id, "outbound message")

    def outbound_status(self, message_id: str) -> OutboundState | None:
        columns = [outbound_messages.c[name] for name in _state_values(OutboundState())]
        statement = select(*columns).where(outbound_messages.c.message_id == message_id)
        row = self._use().execute(statement).mappings().first()
        return None if row is None else _state(row)

    # -- inbound

    def find_inbound(self, message_id: str) -> InboundMessage | None:
        row = self._one("inbound-find", {"b_message_id": message_id})
        return None if row is None else _inbound(row)

    def get_inbound(self, inbound_id: int) -> InboundMessage | None:
        row = self._one("inbound", {"b_id": inbound_id})
        return None if row is None else _inbound(row)

    def insert_inbound(
        self,
        *,
        message_id: str,
        from_party: str,
        cpaid: str,
        conversation_id: str,
        service: str,
        action: str,
        received_at: datetime,
        content_type: str,
        body_blob_id: int,
        ack_envelope: bytes | None,
        deliver: bool,
        duplicate_elimination: bool = True,
        to_party: str | None = None,
        content_digest: str | None = None,
    ) -> InboundMessage:
        self._write()
        check_text("message_id", message_id)
        received = check_aware("received_at", received_at)
        assert received is not None
        self._require_blob(body_blob_id)
        values: dict[str, object] = {
            "message_id": message_id,
            "duplicate_elimination": bool(duplicate_elimination),
            "from_party": from_party,
            "to_party": to_party,
            "cpaid": cpaid,
            "conversation_id": conversation_id,
            "service": service,
            "action": action,
            "received_at": received,
            "content_type": content_type,
            "body_blob_id": body_blob_id,
            "ack_envelope": None if ack_envelope is None else bytes(ack_envelope),
            "duplicate_count": 0,
            "last_duplicate_at": None,
            "content_digest": content_digest,
        }
        if duplicate_elimination:
            # ebMS2 §6.4.1: one duplicate-elimination record per MessageId (the partial unique index).
            key = self._insert_new("inbound-insert-de", values)
            if key is None:
                raise DuplicateMessage(message_id, Direction.INBOUND)
        else:
            key = self._scalar("inbound-insert", values, keys=tuple(values))
        inbound_id = int(key)
        if deliver:
            # DESIGN.md §5.3: the inbox row is written in the duplicate-elimination record's transaction.
            entry = {
                "inbound_id": inbound_id,
                "message_id": message_id,
                "state": InboxState.NEW.value,
                "received_at": received,
                "delivered_at": None,
                "acknowledged_at": None,
            }
            self._run("inbox-insert", entry, keys=tuple(entry))
        return InboundMessage(
            id=inbound_id,
            message_id=message_id,
            duplicate_elimination=bool(duplicate_elimination),
            from_party=from_party,
            to_party=to_party,
            cpaid=cpaid,
            conversation_id=conversation_id,
            service=service,
            action=action,
            received_at=received,
            content_type=content_type,
            body_blob_id=body_blob_id,
            ack_envelope=None if ack_envelope is None else bytes(ack_envelope),
            duplicate_count=0,
            last_duplicate_at=None,
            content_digest=content_digest,
        )

    def increment_duplicate(self, message_id: str, at: datetime) -> int:
        moment = check_aware("at", at)
        conn = self._write()
        count = conn.execute(
            update(inbound_messages)
            .where(inbound_messages.c.id == _FIRST_COPY)
            .values(duplicate_count=inbound_messages.c.duplicate_count + 1, last_duplicate_at=moment)
            .returning(inbound_messages.c.duplicate_count),
            {"b_message_id": message_id},
        ).scalar_one_or_none()
        if count is None:
            raise UnknownMessage(message_id, "inbound message")
        return int(count)

    def record_acknowledgment(self, message_id: str, ack_envelope: bytes) -> bool:
        if not isinstance(ack_envelope, (bytes, bytearray)):
            raise ValueError("ack_envelope must be bytes")
        conn = self._write()
        first = conn.execute(select(_FIRST_COPY), {"b_message_id": message_id}).scalar_one_or_none()
        if first is None:
            raise UnknownMessage(message_id, "inbound message")
        result = conn.execute(
            update(inbound_messages)
            .where(inbound_messages.c.id == first, inbound_messages.c.ack_envelope.is_(None))
            .values(ack_envelope=bytes(ack_envelope))
        )
        return bool(result.rowcount)

    # -- inbox

    def inbox_list(self, state: InboxState | None = None, *, limit: int = 100) -> list[InboxEntry]:
        check_limit(limit)
        statement = select(inbox).order_by(inbox.c.received_at, inbox.c.inbound_id).limit(limit)
        if state is not None:
            statement = statement.where(inbox.c.state == InboxState(state).value)
        return [_inbox(row) for row in self._use().execute(statement).mappings()]

    def inbox_entry(self, entry_id: int) -> InboxEntry | None:
        row = self._one("inbox-entry", {"b_id": entry_id})
        return None if row is None else _inbox(row)

    def _existing_entry(self, entry_id: int) -> InboxEntry:
        entry = self.inbox_entry(entry_id)
        if entry is None:
            raise UnknownMessage(entry_id, "inbox entry")
        return entry

    def inbox_mark_delivered(self, entry_id: int, at: datetime) -> InboxEntry:
        moment = check_aware("at", at)
        self._write().execute(
            update(inbox)
            .where(inbox.c.inbound_id == entry_id, inbox.c.state == InboxState.NEW.value)
            .values(state=InboxState.DELIVERED_TO_APP.value, delivered_at=moment)
        )
        return self._existing_entry(entry_id)

    def inbox_ack(self, entry_id: int, at: datetime) -> InboxEntry:
        moment = check_aware("at", at)
        self._write().execute(
            update(inbox)
            .where(inbox.c.inbound_id == entry_id, inbox.c.state != InboxState.ACKNOWLEDGED_BY_APP.value)
            .values(
                state=InboxState.ACKNOWLEDGED_BY_APP.value,
                acknowledged_at=moment,
                delivered_at=func.coalesce(inbox.c.delivered_at, moment),
            )
        )
        return self._existing_entry(entry_id)

    # -- timers

    def schedule_timer(self, message_id: str, kind: str, due_at: datetime, *, replace_existing: bool = False) -> Timer:
        check_text("message_id", message_id)
        check_text("kind", kind)
        due = check_aware("due_at", due_at)
        assert due is not None
        self._write()
        if replace_existing:
            self.cancel_timers(message_id, kind)
        values = {"message_id": message_id, "kind": kind, "due_at": due, "created_at": self._now()}
        key = self._scalar("timer-insert", values, keys=tuple(values))
        return Timer(int(key), message_id, kind, due, None, None)

    def cancel_timers(self, message_id: str, kind: str | None = None) -> int:
        self._write()
        if kind is None:
            return int(self._run("timer-cancel", {"b_message_id": message_id}).rowcount)
        return int(self._run("timer-cancel-kind", {"b_message_id": message_id, "b_kind": kind}).rowcount)

    def claim_due_timers(self, now: datetime, owner: str, lease: timedelta, limit: int = 100) -> list[Timer]:
        moment = check_aware("now", now)
        assert moment is not None
        check_text("owner", owner)
        if not isinstance(lease, timedelta) or lease <= timedelta(0):
            raise ValueError("lease must be a positive timedelta")
        check_limit(limit)
        conn = self._write()
        until = moment + lease
        claimable = and_(timers.c.due_at <= moment, or_(timers.c.lease_until.is_(None), timers.c.lease_until <= moment))
        statement = select(timers).where(claimable).order_by(timers.c.due_at, timers.c.id).limit(limit)
        if self._postgres:
            # DESIGN.md §8: rows another process is claiming right now are skipped, not waited for.
            statement = statement.with_for_update(skip_locked=True)
        rows = conn.execute(statement).mappings().all()
        if not rows:
            return []
        ids = [row["id"] for row in rows]
        conn.execute(update(timers).where(timers.c.id.in_(ids)).values(lease_owner=owner, lease_until=until))
        return [_timer(row, owner, until) for row in rows]

    def complete_timer(self, timer_id: int, owner: str) -> bool:
        self._write()
        result = self._run("timer-complete", {"b_id": timer_id, "b_owner": owner})
        return bool(result.rowcount)

    def next_timer_due(self) -> datetime | None:
        ready = case(
            (and_(timers.c.lease_until.is_not(None), timers.c.lease_until > timers.c.due_at), timers.c.lease_until),
            else_=timers.c.due_at,
        )
        value = self._use().execute(select(func.min(ready, type_=UtcDateTime()))).scalar_one_or_none()
        return check_aware("next_timer_due", value) if value is not None else None

    # -- journal

    def append_event(
        self,
        *,
        at: datetime,
        kind: str,
        message_id: str | None = None,
        direction: Direction | None = None,
        detail: Mapping[str, object] | None = None,
    ) -> int:
        moment = check_aware("at", at)
        check_text("kind", kind)
        values = {
            "at": moment,
            "kind": kind,
            "message_id": message_id,
            "direction": None if direction is None else Direction(direction).value,
            "detail": normalise_detail(detail),
        }
        self._write()
        return int(self._scalar("event-insert", values, keys=_EVENT_KEYS))

    def list_events(self, after_id: int = 0, *, limit: int = 1000) -> list[Event]:
        check_limit(limit)
        statement = select(events).where(events.c.id > after_id).order_by(events.c.id).limit(limit)
        return [_event(row) for row in self._use().execute(statement).mappings()]

    def message_events(
        self, message_id: str, *, direction: Direction | None = None, limit: int = 1000
    ) -> list[Event]:
        check_text("message_id", message_id)
        check_limit(limit)
        statement = select(events).where(events.c.message_id == message_id)
        if direction is not None:
            statement = statement.where(events.c.direction == Direction(direction).value)
        newest = statement.order_by(events.c.id.desc()).limit(limit)
        return [_event(row) for row in reversed(self._use().execute(newest).mappings().all())]


# ------------------------------------------------------------------------------------------------ store


class SqlStore(Store):
    """The store on SQLite or PostgreSQL; build it with :meth:`open` (or :meth:`Store.open`)."""

    def __init__(self, engine: Engine, *, clock: Clock | None = None, blob_chunk_size: int | None = None) -> None:
        super().__init__()
        self._engine = engine
        self._clock: Clock = clock or utc_now
        self.blob_chunk_size = _chunk_size(blob_chunk_size)
        self._closed = False
        self._prepared: dict[tuple[str, tuple[str, ...] | None], Prepared] = {}
        self.driver_error: type[Exception] = engine.dialect.loaded_dbapi.Error

    def prepared(self, name: str, keys: tuple[str, ...] | None = None) -> Prepared:
        """The statement ``name`` of the hot path, compiled for this store's database once."""
        found = self._prepared.get((name, keys))
        if found is None:
            found = Prepared(_STATEMENTS[name](self._engine.dialect), self._engine.dialect, keys=keys)
            self._prepared[(name, keys)] = found
        return found

    def failure(self, exc: Exception) -> StoreError:
        """The :class:`StoreError` for an error of the database driver."""
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return StoreError(f"the store at {self.url} failed: {reason}")

    @classmethod
    def open(
        cls,
        url: str,
        *,
        clock: Clock | None = None,
        migrate: bool = True,
        blob_chunk_size: int | None = None,
    ) -> SqlStore:
        """Connect to the database at ``url`` (see the module docs) and bring its schema up to date.

        Without ``migrate`` a schema that is not at the newest revision is a :class:`ConfigurationError`.
        """
        chunk_size = _chunk_size(blob_chunk_size)
        resolved = resolve_url(url)
        shown = resolved.render_as_string(hide_password=True)
        try:
            engine = _sqlite_engine(resolved) if resolved.get_backend_name() == "sqlite" else _postgres_engine(resolved)
        except (ArgumentError, NoSuchModuleError, ImportError) as exc:
            raise ConfigurationError(f"store URL {shown!r} cannot be used: {exc}") from None
        try:
            current = _check_connection(engine, shown)
            if migrate:
                try:
                    migrations.upgrade(engine)
                except DBAPIError as exc:
                    raise ConfigurationError(
                        f"upgrading the store at {shown!r} to schema revision {migrations.head_revision()!r} "
                        f"failed: {_reason(exc)}; nothing was changed (the upgrade is one transaction). Give the "
                        "store a database (or PostgreSQL schema) of its own that holds only the MSH's tables"
                    ) from None
            elif current != migrations.head_revision():
                raise ConfigurationError(
                    f"the store at {shown!r} is at schema revision {current!r}, not {migrations.head_revision()!r}: "
                    "open it with migrate=True (the default) to upgrade it"
                )
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, clock=clock, blob_chunk_size=chunk_size)

    @property
    def url(self) -> str:
        return self._engine.url.render_as_string(hide_password=True)

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for migrations and maintenance tools)."""
        return self._engine

    def now(self) -> datetime:
        """The store clock's current time (aware UTC)."""
        value = check_aware("the store clock's time", self._clock())
        assert value is not None
        return value

    @contextmanager
    def transaction(self, *, readonly: bool = False) -> Iterator[Transaction]:
        if self._closed:
            raise StoreError("the store is closed")
        self._enter_thread()
        tx: _SqlTransaction | None = None
        try:
            with self._engine.connect() as connection:
                if readonly:
                    connection.execution_options(**{_READONLY: True})
                with connection.begin():
                    if readonly and connection.dialect.name == "postgresql":
                        connection.exec_driver_sql("SET TRANSACTION READ ONLY")
                    tx = _SqlTransaction(self, connection, readonly)
                    yield tx
        except DBAPIError as exc:
            raise StoreError(f"the store at {self.url} failed: {_reason(exc)}") from exc
        finally:
            if tx is not None:
                tx.close()
            self._leave_thread()

    def open_blob(self, blob_id: int) -> BinaryIO:
        if self._closed:
            raise StoreError("the store is closed")
        try:
            with self._engine.connect() as connection:
                connection.execution_options(**{_READONLY: True})
                row = connection.execute(select(blobs).where(blobs.c.id == blob_id)).mappings().first()
        except DBAPIError as exc:
            raise StoreError(f"the store at {self.url} failed: {_reason(exc)}") from exc
        if row is None:
            raise UnknownBlob(blob_id)
        statement = select(blob_chunks.c.data)

        def fetch(seq: int) -> bytes | None:
            if self._closed:
                raise StoreError("the store is closed")
            try:
                with self._engine.connect() as conn:
                    conn.execution_options(**{_READONLY: True})
                    where = and_(blob_chunks.c.blob_id == blob_id, blob_chunks.c.seq == seq)
                    return _blob_bytes(conn.execute(statement.where(where)).scalar_one_or_none())
            except DBAPIError as exc:
                raise StoreError(f"the store at {self.url} failed: {_reason(exc)}") from exc

        return open_chunks(fetch, int(row["chunk_count"]), int(row["size"]))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._engine.dispose()


def _check_connection(engine: Engine, shown: str) -> str | None:
    """Connect once (a clear error if that fails); the schema revision found."""
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1")
            if engine.dialect.name == "sqlite":
                mode = connection.exec_driver_sql("PRAGMA journal_mode").scalar()
                if str(mode).lower() != "wal":
                    raise ConfigurationError(
                        f"store URL {shown!r}: SQLite refused WAL mode (journal_mode is {mode}); "
                        "put the database file on a local file system"
                    )
            current = migrations.current_revision(connection)
            connection.rollback()
            return current
    except DBAPIError as exc:
        raise ConfigurationError(
            f"cannot use the store at {shown!r}: {_reason(exc)}; check that the database server runs and "
            "that the URL's host, port, user, password and database are right"
        ) from None


def _reason(exc: DBAPIError) -> str:
    """The driver's message on one line."""
    return " ".join(str(exc.orig).split()) or " ".join(str(exc).split())


def _chunk_size(value: int | None) -> int:
    if value is None:
        return DEFAULT_CHUNK_SIZE
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CHUNK_SIZE:
        raise ConfigurationError(f"blob_chunk_size must be a number of bytes from 1 to {MAX_CHUNK_SIZE} (1 MiB)")
    return value
