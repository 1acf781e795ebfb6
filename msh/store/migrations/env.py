"""Alembic environment of the store: run on the connection :mod:`msh.store.migrations` hands over.

There is no ``alembic.ini`` and no URL here: the caller opens the connection (inside its transaction) and
puts it in ``config.attributes["connection"]``. The version table is ``schema_version``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from msh.store.schema import metadata

VERSION_TABLE = "schema_version"


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        transactional_ddl=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


_connection = context.config.attributes.get("connection")
if not isinstance(_connection, Connection):
    raise RuntimeError(
        "msh.store migrations run through msh.store.migrations.upgrade()/downgrade(), "
        "which pass an open connection; there is no alembic.ini"
    )
_run(_connection)
