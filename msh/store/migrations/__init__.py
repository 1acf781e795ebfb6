"""Versioned schema migrations of the SQL store (Alembic, configured in code: no ``alembic.ini``).

Revisions live in ``versions/`` (``v0001_initial.py`` creates every table); the applied revision is
recorded in the ``schema_version`` table. :func:`upgrade` runs in one transaction (DDL is transactional on
both SQLite and PostgreSQL), so a failed upgrade leaves the previous schema intact; on PostgreSQL it first
takes an advisory lock, so processes that start together upgrade one after the other (the later ones
find the schema already at head and do nothing); on SQLite ``BEGIN IMMEDIATE`` does the same. Within one
process a lock keeps migrations one at a time (Alembic's ``context`` and ``op`` are module-wide).

Adding a revision: copy the newest file in ``versions/``, give it the next ``revision`` id with
``down_revision`` set to the previous one, write ``upgrade()`` and ``downgrade()``, and change
:mod:`msh.store.schema` to match (a test compares the migrated database with that module).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from msh.errors import ConfigurationError

__all__ = ["VERSION_TABLE", "current_revision", "downgrade", "head_revision", "upgrade"]

VERSION_TABLE: Final = "schema_version"
_HERE: Final = Path(__file__).resolve().parent
_IN_PROCESS: Final = threading.Lock()
# An arbitrary constant: the PostgreSQL advisory lock that serialises concurrent upgrades.
_PG_LOCK_KEY: Final = 0x6D73_6873_746F_7265 & 0x7FFF_FFFF_FFFF_FFFF  # "mshstore"
log = logging.getLogger("msh.store.migrations")


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_HERE))
    config.attributes["connection"] = connection
    return config


@contextlib.contextmanager
def _quiet_alembic() -> Iterator[None]:
    """Alembic's own INFO lines (context, DDL mode, each revision run) only when our log asks for DEBUG: at the
    default level one line of ours says what changed. A level set on the ``alembic`` logger is left alone."""
    alembic = logging.getLogger("alembic")
    if alembic.level != logging.NOTSET or log.isEnabledFor(logging.DEBUG):
        yield
        return
    alembic.setLevel(logging.WARNING)
    try:
        yield
    finally:
        alembic.setLevel(logging.NOTSET)


def head_revision() -> str:
    """The newest revision this version of the MSH knows."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None, "the migrations folder has no revision"
    return head


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at (None for a database the store never touched)."""
    with _quiet_alembic():
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()


def _known(revision: str | None) -> bool:
    if revision is None:
        return True
    try:
        return ScriptDirectory.from_config(_config()).get_revision(revision) is not None
    except CommandError:
        return False


def _run(engine: Engine, action: str, target: str) -> None:
    # Alembic's ``context`` and ``op`` are module-wide proxies: one migration at a time per process.
    with _IN_PROCESS, engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
        found = current_revision(connection)
        if not _known(found):
            raise ConfigurationError(
                f"the store's schema is at revision {found!r}, which this version of the MSH does not know "
                f"(its newest is {head_revision()!r}): the database was upgraded by a newer MSH; run that "
                "version, or point the store URL at another database"
            )
        with _quiet_alembic():
            if action == "upgrade":
                command.upgrade(_config(connection), target)
            else:
                command.downgrade(_config(connection), target)
        now = current_revision(connection)
        if now != found:
            log.info("store schema %s from revision %s to %s", f"{action}d", found or "(empty)", now or "(empty)")


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database to ``revision`` (the newest by default); nothing happens if it is there."""
    _run(engine, "upgrade", revision)


def downgrade(engine: Engine, revision: str) -> None:
    """Take the database back to ``revision`` (``base`` removes every table of the store)."""
    _run(engine, "downgrade", revision)
