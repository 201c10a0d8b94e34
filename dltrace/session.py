"""A dltrace session: one engine, its registered tables, and the lineage entry points."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from dltrace.engines import Engine, make_engine, resolve_source
from dltrace.engines.base import ParquetSource
from dltrace.errors import DuplicateTable, ParseError, UnknownTable
from dltrace.tpch_data import TABLES as TPCH_TABLES
from dltrace.tpch_data import ensure_tpch


class Session:
    """Registered tables on one engine. Create with :func:`dltrace.connect`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.tables: dict[str, Any] = {}  # name -> resolved source
        self.origins: dict[str, str] = {}  # name -> absolute path it was registered from (for saved lineage)
        self._counts: dict[str, int] = {}  # row counts of engine-native sources (frozen when registered)

    @property
    def dialect(self) -> str:
        return self.engine.name

    # -- tables ---------------------------------------------------------------------------------
    def register(self, name: str, source: Any, replace: bool = False) -> None:
        """Register ``source`` (parquet file/folder/glob, CSV, Arrow, pandas, Spark DataFrame) as ``name``.

        Every row gets the stable dense id ``dl_rid`` in ``[0, n)``: its position in the source.
        """
        key = name.lower()
        if key.startswith("dl_"):
            from dltrace.errors import ReservedName

            raise ReservedName(f"table name {name!r} uses the reserved prefix 'dl_'")
        if key in self.tables and not replace:
            raise DuplicateTable(f"table {name!r} is already registered (pass replace=True to replace it)")
        resolved = resolve_source(source)
        self.engine.register(key, resolved)
        self.tables[key] = resolved
        self._counts.pop(key, None)
        if isinstance(source, (str, os.PathLike)):
            self.origins[key] = os.path.abspath(os.fspath(source))
        else:
            self.origins.pop(key, None)

    def load_tpch(self, sf: float = 0.01, progress=None) -> None:
        """Generate (once, cached) and register the 8 TPC-H tables at scale factor ``sf``."""
        folder = ensure_tpch(sf, progress=progress)
        for t in TPCH_TABLES:
            self.register(t, str(folder / f"{t}.parquet"), replace=True)

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

    # -- plain SQL ------------------------------------------------------------------------------
    def to_engine_sql(self, text: str, dialect: str | None = None) -> str:
        """Check ``text`` parses and names only registered tables, and transpile it to the engine."""
        read = dialect or self.dialect
        try:
            statements = [s for s in sqlglot.parse(text, read=read) if s is not None]
        except sqlglot.errors.ParseError as e:
            from dltrace.rewriter.parse import parse_error_text

            raise ParseError(f"SQL does not parse: {parse_error_text(e)}") from None
        if len(statements) != 1:
            raise ParseError(f"expected one SQL statement, got {len(statements)}")
        tree = statements[0]
        self.check_tables(tree)
        if read == self.dialect:
            return text
        return tree.sql(self.dialect)

    def check_tables(self, tree: exp.Expression) -> None:
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for table in tree.find_all(exp.Table):
            name = table.name.lower()
            if not name or name in ctes or name in self.tables or table.args.get("db"):
                continue
            if isinstance(table.this, exp.Identifier):
                raise UnknownTable(f"unknown table {table.name!r}; registered: {', '.join(sorted(self.tables)) or 'none'}")

    def sql(self, text: str, dialect: str | None = None) -> pa.Table:
        """Run SQL (in the engine's dialect, or in ``dialect``, transpiled) and return Arrow."""
        return self.engine.sql(self.to_engine_sql(text, dialect))

    # -- lineage --------------------------------------------------------------------------------
    def run(self, sql: str, lineage: str | None = "set", dialect: str | None = None,
            semantics: str = "witness"):
        """Run ``sql`` with forward lineage (``lineage`` = "set" | "bitmap" | None for the plain query)."""
        from dltrace.result import run_forward

        return run_forward(self, sql, lineage=lineage, dialect=dialect, semantics=semantics)

    def trace(self, sql: str, rows: list[int] | None = None, dialect: str | None = None,
              semantics: str = "witness"):
        """Backward lineage by Cui-Widom reverse queries: all rows (``rows=None``) or the given ones."""
        from dltrace.backward import trace

        return trace(self, sql, rows=rows, dialect=dialect, semantics=semantics)

    def impact(self, sql: str, table: str, rids, saved=None, lineage: str = "set", dialect: str | None = None,
               semantics: str = "witness"):
        """Which output rows of ``sql`` depend on rows ``rids`` of ``table`` (e.g. faulty input rows).

        From ``saved`` lineage (a folder written by ``r.save`` or a result) when given; otherwise by running
        the query with lineage for ``table`` only, where only those rows carry a rid. Returns an
        :class:`dltrace.impact.Impact`: ``.rows`` (output row indices) and ``.result`` (``rows, r = ...``).
        """
        from dltrace.impact import impact

        return impact(self, sql, table, rids, saved=saved, lineage=lineage, dialect=dialect, semantics=semantics)

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(engine: str = "duckdb", **options: Any) -> Session:
    """Open a session on ``engine``: "duckdb" (in-process) or "spark" (``spark=``, ``master=``)."""
    return Session(make_engine(engine, **options))


__all__ = ["Session", "connect", "ParquetSource"]
