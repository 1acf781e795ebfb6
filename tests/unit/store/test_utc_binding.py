"""The fused SQLite binding of :class:`msh.store.schema.UtcDateTime` writes the text SQLAlchemy's own chain
(the type's check, then SQLite's DATETIME format) writes, and refuses what it refuses."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.types import TypeDecorator

from msh.store.schema import UtcDateTime


def _pair() -> tuple[Any, Any]:
    dialect = sqlite.dialect()
    bound: Any = UtcDateTime().dialect_impl(dialect)
    return bound.bind_processor(dialect), TypeDecorator.bind_processor(bound, dialect)


def test_the_fused_sqlite_binding_writes_the_same_text_as_the_chain() -> None:
    fused, chain = _pair()
    assert fused is not None and chain is not None and fused is not chain
    rng = random.Random(7)
    for _ in range(20_000):
        zone = timezone(timedelta(minutes=rng.randint(-14 * 60, 14 * 60)))
        moment = datetime(
            rng.randint(2, 9998),
            rng.randint(1, 12),
            rng.randint(1, 28),
            rng.randint(0, 23),
            rng.randint(0, 59),
            rng.randint(0, 59),
            rng.choice((0, rng.randint(0, 999_999))),
            tzinfo=zone,
        )
        assert fused(moment) == chain(moment)
    assert fused(None) is None


def test_the_fused_sqlite_binding_refuses_a_naive_time() -> None:
    fused, chain = _pair()
    processors: tuple[Any, ...] = (fused, chain)
    for processor in processors:
        with pytest.raises(ValueError, match="naive datetime"):
            processor(datetime(2026, 12, 1, 9, 0))


def test_postgresql_keeps_the_type_s_own_binding() -> None:
    dialect = postgresql.dialect()
    bound = UtcDateTime().dialect_impl(dialect)
    processor = bound.bind_processor(dialect)
    assert processor is not None
    moment = datetime(2026, 12, 1, 10, 0, tzinfo=timezone(timedelta(hours=1)))
    assert processor(moment) == datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
