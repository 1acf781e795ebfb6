"""``Prepared.binder`` (msh.store.prepared): rows given as values in a fixed order reach the driver exactly as
``Prepared.params`` gives the same values by name, on a positional driver (SQLite) and a named one (psycopg)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import bindparam, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect

from msh.store import records
from msh.store.prepared import Prepared
from msh.store.schema import events
from msh.store.sql import rows
from msh.store.sql.statements import EVENT_WRITE_KEYS

AT = datetime(2026, 12, 7, 12, 0, 1, 250_000, tzinfo=UTC)
DIALECTS = [sqlite.dialect(), postgresql.psycopg.dialect()]  # type: ignore[attr-defined]


def _plain(params: object) -> object:
    """Parameters comparable by value (psycopg wraps JSON in a ``Jsonb`` holder, equal only to itself)."""
    if isinstance(params, dict):
        return {key: _plain(value) for key, value in params.items()}
    if isinstance(params, list | tuple):
        return [_plain(value) for value in params]
    wrapped = getattr(params, "obj", None)
    return ("json", wrapped) if wrapped is not None else params


def _events(dialect: Dialect) -> Prepared:
    return Prepared(insert(events), dialect, keys=EVENT_WRITE_KEYS)


def _event(**changes: object) -> records.Event:
    event = records.Event(
        0,
        AT,
        "delivered",
        "m1@example.com",
        records.Direction.OUTBOUND,
        {"attempt": 2, "evidence": "to-party-acknowledgment", "note": "ü <&>"},
        role="sender",
        cpa_id="cpa-1",
        from_party="urn:a",
        to_party="urn:b",
        service="svc",
        action="Order",
        conversation_id="c-1",
        size=2310,
        attempt=2,
    )
    return dataclasses.replace(event, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
@pytest.mark.parametrize(
    "event",
    [
        _event(),
        _event(direction=None, message_id=None, detail={}),  # the columns that may be empty
        _event(at=AT.astimezone(timezone(timedelta(hours=-5))), deadline=AT + timedelta(days=1), severity="Error"),
    ],
    ids=["full", "empty-columns", "other-offset-and-deadline"],
)
def test_a_journal_row_binds_as_its_columns_by_name(dialect: Dialect, event: records.Event) -> None:
    prepared = _events(dialect)
    by_name = {name: getattr(event, name) for name in rows.EVENT_ROW_NAMES}
    by_name["id"] = 41
    by_name["direction"] = None if event.direction is None else event.direction.value
    assert _plain(prepared.binder(rows.EVENT_ROW_NAMES)(rows.event_row(event, 41))) == _plain(prepared.params(by_name))


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
def test_the_order_of_the_names_is_the_callers(dialect: Dialect) -> None:
    prepared = _events(dialect)
    names = tuple(reversed(rows.EVENT_ROW_NAMES))
    row = list(reversed(rows.event_row(_event(), 7)))
    expected = prepared.binder(rows.EVENT_ROW_NAMES)(rows.event_row(_event(), 7))
    assert _plain(prepared.binder(names)(row)) == _plain(expected)
    assert prepared.binder(names) is prepared.binder(list(names))  # made once per order of names


def test_a_positional_driver_gets_a_sequence_and_a_named_one_a_mapping() -> None:
    row = rows.event_row(_event(), 3)
    assert isinstance(_events(sqlite.dialect()).binder(rows.EVENT_ROW_NAMES)(row), list)
    named = _events(postgresql.psycopg.dialect()).binder(rows.EVENT_ROW_NAMES)(row)  # type: ignore[attr-defined]
    assert isinstance(named, dict) and named["id"] == 3 and named["kind"] == "delivered"


def test_a_value_missing_from_the_names_is_refused_when_the_binder_is_made() -> None:
    prepared = _events(sqlite.dialect())
    with pytest.raises(ValueError, match="no value is given for kind"):
        prepared.binder(tuple(n for n in rows.EVENT_ROW_NAMES if n != "kind"))


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
def test_a_statement_of_one_bound_value(dialect: Dialect) -> None:
    prepared = Prepared(select(events.c.id).where(events.c.at > bindparam("b_at", type_=events.c.at.type)), dialect)
    assert _plain(prepared.binder(["b_at"])([AT])) == _plain(prepared.params({"b_at": AT}))
    assert prepared.binder(["b_at"])([None]) == prepared.params({"b_at": None})  # None is not converted
