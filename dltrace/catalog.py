"""The tables registered on one engine: what every layer above the engines reads.

A :class:`Catalog` knows each table's source, its row count and its columns, and checks that a query names
only registered tables. :class:`dltrace.Session` is a catalog with the lineage entry points on top; the
modules below the session (backward tracing, results, lookups, persistence) take a catalog, never a session.
"""

from __future__ import annotations

import os
from typing import Any, Callable, TypeVar

from sqlglot import exp

from dltrace.engines import Engine, resolve_source
from dltrace.errors import DuplicateTable, ReservedName, UnknownTable
from dltrace.names import RESERVED_PREFIX

T = TypeVar("T")


class Catalog:
    """Registered tables on one engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.tables: dict[str, Any] = {}  # name -> resolved source
        self.origins: dict[str, str] = {}  # name -> absolute path it was registered from (for saved lineage)
        self._counts: dict[str, int] = {}  # row counts of engine-native sources (frozen when registered)
        self._derived: dict[str, dict[str, Any]] = {}  # name -> values computed from its source, by kind

    @property
    def dialect(self) -> str:
        return self.engine.name

    def register(self, name: str, source: Any, replace: bool = False) -> None:
        """Register ``source`` (parquet file/folder/glob, CSV, Arrow, pandas, Spark DataFrame) as ``name``.

        Every row gets the stable dense id ``dl_rid`` in ``[0, n)``: its position in the source.
        """
        key = name.lower()
        if key.startswith(RESERVED_PREFIX):
            raise ReservedName(f"table name {name!r} uses the reserved prefix {RESERVED_PREFIX!r}")
        if key in self.tables and not replace:
            raise DuplicateTable(f"table {name!r} is already registered (pass replace=True to replace it)")
        resolved = resolve_source(source)
        self.engine.register(key, resolved)
        self.tables[key] = resolved
        self._counts.pop(key, None)
        self._derived.pop(key, None)
        if isinstance(source, (str, os.PathLike)):
            self.origins[key] = os.path.abspath(os.fspath(source))
        else:
            self.origins.pop(key, None)

    def schema(self) -> dict[str, dict[str, str]]:
        """``{table: {column: type}}`` of the registered tables (without ``dl_rid``), for sqlglot."""
        return {name: self.engine.columns(name) for name in self.tables}

    def num_rows(self, name: str) -> int:
        key = name.lower()
        n = getattr(self.tables[key], "num_rows", None)
        if n is not None:
            return int(n)
        if key not in self._counts:  # a Spark DataFrame: counted once, every run asks (64-bit bitmaps?)
            sql = f"SELECT count(*) AS n FROM {exp.to_identifier(key).sql(self.dialect)}"
            self._counts[key] = int(self.engine.sql(sql)[0][0].as_py())
        return self._counts[key]

    def derived(self, name: str, kind: str, compute: Callable[[Any], T]) -> T:
        """``compute(source)`` of registered table ``name``, computed once per registration and kept with it
        (an in-memory table's content hash, its row store): released when the table is replaced or the catalog
        goes, never keyed by an ``id()`` that outlives the object."""
        per_table = self._derived.setdefault(name.lower(), {})
        if kind not in per_table:
            per_table[kind] = compute(self.tables[name.lower()])
        return per_table[kind]

    def check_known_tables(self, tree: exp.Expression) -> None:
        """Raise :class:`UnknownTable` when the query reads a table that is neither registered nor its own CTE."""
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for table in tree.find_all(exp.Table):
            name = table.name.lower()
            if not name or name in ctes or name in self.tables or table.args.get("db"):
                continue
            if isinstance(table.this, exp.Identifier):
                raise UnknownTable(f"unknown table {table.name!r}; registered: {', '.join(sorted(self.tables)) or 'none'}")

    def close(self) -> None:
        self.engine.close()
