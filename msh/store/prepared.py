"""Statements compiled once and run on the driver's cursor: the store's hot path.

SQLAlchemy writes the SQL (for the connection's dialect) and converts the values (the column types' bind
and result processors, e.g. :class:`~msh.store.schema.UtcDateTime`); what it no longer does is its per-call
execution machinery (compiled-cache lookup, execution context, events, result objects), which cost about
ten times what SQLite itself spends on a one-row statement (measured with ``scripts/bench_exchange.py
--profile``: 4,000 statements, 0.76 s in SQLAlchemy around 0.05 s in ``sqlite3.Cursor.execute``). The
statements of every message step (insert a message, read and update its state, timers, journal) go this
way; the rest of :mod:`msh.store.sql` uses SQLAlchemy Core as usual, on the same connection and in the same
transaction.

Errors of the driver are raised as they come (the store turns them into
:class:`~msh.store.api.StoreError`); a statement that needs a feature a dialect lacks fails when it is
compiled, at the first use.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["Prepared"]

_Processor = Callable[[Any], Any]


class Prepared:
    """``statement`` compiled for ``dialect`` (``keys``: the columns an INSERT/UPDATE sets, in any order)."""

    __slots__ = ("_binders", "_binds", "_dialect", "_names", "_order", "_results", "_types", "columns", "sql")

    def __init__(self, statement: ClauseElement, dialect: Dialect, *, keys: Sequence[str] | None = None) -> None:
        compiled = statement.compile(dialect=dialect, column_keys=list(keys) if keys is not None else None)
        assert isinstance(compiled, SQLCompiler), "only SQL statements can be prepared"
        self.sql: str = compiled.string
        binds: dict[str, _Processor | None] = {}
        for name, bind in compiled.binds.items():
            binds[name] = bind.type.dialect_impl(dialect).bind_processor(dialect)
        self._binds = binds
        # qmark/format drivers (sqlite3) take a tuple in this order; pyformat ones (psycopg) a dict.
        self._names: tuple[str, ...] | None = tuple(compiled.positiontup or ()) if compiled.positional else None
        # What params() walks: each bound name (in the driver's order) with its converter, if any.
        order = self._names if self._names is not None else tuple(binds)
        self._order: tuple[tuple[str, _Processor | None], ...] = tuple((name, binds[name]) for name in order)
        exported = getattr(statement, "exported_columns", ())
        self.columns: tuple[str, ...] = tuple(c.key for c in exported)
        self._types = tuple(c.type.dialect_impl(dialect) for c in exported)
        self._dialect = dialect
        # Result processors depend on the type the driver reports (cursor.description): made at the first row.
        self._results: tuple[_Processor | None, ...] | None = None
        self._binders: dict[tuple[str, ...], Callable[[Sequence[object]], Sequence[object] | dict[str, object]]] = {}

    def params(self, values: Mapping[str, object]) -> Sequence[object] | dict[str, object]:
        """The driver's parameters for ``values`` (every bound name must be given)."""
        if self._names is None:
            converted: dict[str, object] = {}
            for name, processor in self._order:
                value = values[name]
                converted[name] = value if processor is None or value is None else processor(value)
            return converted
        return [
            value if processor is None or value is None else processor(value)
            for name, processor in self._order
            for value in (values[name],)
        ]

    def binder(self, names: Sequence[str]) -> Callable[[Sequence[object]], Sequence[object] | dict[str, object]]:
        """A function from values given in the order of ``names`` to the driver's parameters, converted as
        :meth:`params` converts them, for rows written many at a time (the journal's): no mapping is built
        per row, and only the values with a converter are looked at twice. Made once per ``names``."""
        key = tuple(names)
        found = self._binders.get(key)
        if found is not None:
            return found
        index = {name: at for at, name in enumerate(key)}
        missing = [name for name, _processor in self._order if name not in index]
        if missing:
            raise ValueError(f"no value is given for {', '.join(missing)} of: {self.sql}")
        places = [index[name] for name, _processor in self._order]
        pick: Callable[[Sequence[object]], Sequence[object]]
        if len(places) == 1:
            only = places[0]
            pick = lambda values: (values[only],)  # noqa: E731 (itemgetter of one index gives no tuple)
        else:
            pick = operator.itemgetter(*places)
        convert = tuple((at, processor) for at, (_name, processor) in enumerate(self._order) if processor is not None)
        keys = tuple(name for name, _processor in self._order)
        positional = self._names is not None

        def bind(values: Sequence[object]) -> Sequence[object] | dict[str, object]:
            out = list(pick(values))
            for at, processor in convert:
                value = out[at]
                if value is not None:
                    out[at] = processor(value)
            return out if positional else dict(zip(keys, out, strict=True))

        self._binders[key] = bind
        return bind

    def execute(self, cursor: Any, values: Mapping[str, object]) -> Any:
        """Run the statement on the DBAPI ``cursor``; the cursor, for ``rowcount`` or fetching."""
        cursor.execute(self.sql, self.params(values))
        return cursor

    def first(self, cursor: Any) -> dict[str, Any] | None:
        """The first row of the statement just run on ``cursor``, converted, or None."""
        raw = cursor.fetchone()
        if raw is None:
            return None
        results = self._results
        if results is None:
            codes = [d[1] for d in cursor.description]
            results = tuple(t.result_processor(self._dialect, code) for t, code in zip(self._types, codes, strict=True))
            self._results = results
        return {
            key: (processor(value) if processor is not None else value)
            for key, processor, value in zip(self.columns, results, raw, strict=True)
        }
