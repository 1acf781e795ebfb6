"""The journal's columns are declared once, by the store's table, and every other list agrees with it: the
record the store hands out (msh.store.records.Event), the SQL insert (EVENT_KEYS, derived from the table) and
the Parquet files of the analytics (msh.analytics.columns.SCHEMA, which adds the journal's ``source``)."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("pyarrow", reason="the analytics extra (pyarrow) is not installed")

from msh.analytics.columns import SCHEMA
from msh.store.records import Event
from msh.store.schema import events
from msh.store.sql.statements import EVENT_KEYS


def test_the_journal_columns_agree_wherever_they_are_named() -> None:
    table = [c.name for c in events.columns]
    assert [f.name for f in dataclasses.fields(Event)] == table or sorted(
        f.name for f in dataclasses.fields(Event)
    ) == sorted(table)
    assert tuple(c for c in table if c != "id") == EVENT_KEYS
    parquet = set(SCHEMA.names)
    assert parquet == {"source", "event_id"} | (set(table) - {"id"}), parquet ^ ({"source", "event_id"} | set(table))
