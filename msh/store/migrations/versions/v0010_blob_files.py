"""Large bodies as files beside an SQLite store: the ``blobs`` row names its file and SHA-256.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06

A body over 1 MiB written to an SQLite store went through its write-ahead log as chunk rows, and the log
grew to the size of each large message until a checkpoint. Such a body is now a file in the folder beside
the database (:mod:`msh.store.blob_files`); ``file`` is its name there and ``sha256`` its digest, checked
when it is read. Both are NULL for a body kept as chunk rows (every body before this revision, and every
body on PostgreSQL).

Written by hand and frozen: later changes go in new revisions, never here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # Nullable columns: added in place on both databases (no copy of the table).
    op.add_column("blobs", sa.Column("file", sa.Text(), nullable=True))
    op.add_column("blobs", sa.Column("sha256", sa.Text(), nullable=True))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN in place (SQLite 3.35+): a copied table would break the foreign keys to it.
    # Bodies stored as files are then no longer named by any row: the folder beside the database is left to
    # the operator (docs/operating.md).
    op.drop_column("blobs", "sha256")
    op.drop_column("blobs", "file")
