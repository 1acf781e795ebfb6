"""Fixtures shared by the test layers (``tests/unit/<layer>``, ``tests/property``, ``tests/integration``,
``tests/interop``): stores on an SQLite file, on PostgreSQL and the in-memory twin, and the endpoint under
test (party B served for real on 127.0.0.1, :mod:`tests.support.endpoint`).

PostgreSQL is ``MSH_TEST_POSTGRES_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``);
each test gets a schema of its own (``msh_test_<random>``, made the connections' search_path) that is
dropped afterwards. Where no server answers within 2 seconds the PostgreSQL cases are skipped with the
reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy.engine import make_url

from msh.store import SqlStore, Store
from msh.store import open_store as open_store_at
from tests.support.endpoint import party_b, party_b_small  # noqa: F401 (fixtures for the integration tests)
from tests.support.store import FakeClock

PG_URL = os.environ.get("MSH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")

SQL_BACKENDS = ["sqlite", "postgresql"]
ALL_BACKENDS = [*SQL_BACKENDS, "memory"]


def _connect_pg(autocommit: bool = True) -> Any:
    import psycopg

    url = make_url(PG_URL)
    return psycopg.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 5432,
        user=url.username or "postgres",
        password=url.password,
        dbname=url.database or "postgres",
        connect_timeout=2,
        autocommit=autocommit,
    )


@cache
def postgres_unavailable() -> str | None:
    """Why PostgreSQL cannot be used for the tests, or None when it can."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (it is a dependency of pymsh: pip install -e .)"
    try:
        _connect_pg().close()
    except Exception as exc:
        shown = make_url(PG_URL).render_as_string(hide_password=True)
        reason = " ".join(str(exc).split())
        return f"no PostgreSQL reachable at {shown} (set MSH_TEST_POSTGRES_URL): {reason}"
    return None


@pytest.fixture
def pg_url() -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL schema (dropped after the test)."""
    reason = postgres_unavailable()
    if reason is not None:
        pytest.skip(reason)
    schema = f"msh_test_{uuid.uuid4().hex[:12]}"
    with _connect_pg() as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{separator}options={quote(f'-csearch_path={schema}', safe='')}"
    finally:
        with _connect_pg() as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The path of a fresh SQLite store file."""
    return str(tmp_path / "store.db")


@pytest.fixture(params=SQL_BACKENDS)
def store_url(request: pytest.FixtureRequest) -> str:
    """A fresh database of each SQL kind."""
    name = "pg_url" if request.param == "postgresql" else "sqlite_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_store(clock: FakeClock) -> Iterator[Callable[..., Store]]:
    """Open stores (closed after the test): ``open_store(url, **options)``."""
    opened: list[Store] = []

    def _open(url: str, **options: Any) -> Store:
        options.setdefault("clock", clock)
        store = open_store_at(url, **options)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


@pytest.fixture
def sql_store(store_url: str, open_store: Callable[..., Store]) -> SqlStore:
    """A migrated SQL store (SQLite file and PostgreSQL schema)."""
    store = open_store(store_url)
    assert isinstance(store, SqlStore)
    return store


@pytest.fixture(params=ALL_BACKENDS)
def make_store(request: pytest.FixtureRequest, open_store: Callable[..., Store]) -> Callable[..., Store]:
    """Open a store of every kind (SQLite, PostgreSQL, the in-memory twin): ``make_store(**options)``.

    Every call on an SQL kind opens the same fresh database again.
    """
    if request.param == "memory":
        return lambda **options: open_store("memory:", **options)
    name = "pg_url" if request.param == "postgresql" else "sqlite_url"
    url = str(request.getfixturevalue(name))
    return lambda **options: open_store(url, **options)


@pytest.fixture
def store(make_store: Callable[..., Store]) -> Store:
    """A fresh store of every kind: SQLite, PostgreSQL, and the in-memory twin."""
    return make_store()
