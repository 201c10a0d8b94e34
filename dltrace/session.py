"""A dltrace session: one engine, its registered tables, and the lineage entry points."""

from __future__ import annotations

import os
import numbers
from collections.abc import Iterable
from dataclasses import replace as replace_fields
from typing import Any, Callable

import pyarrow as pa
import sqlglot

from dltrace.catalog import Catalog
from dltrace.compose import definition, lineage_source
from dltrace.engines import STRATEGIES, make_engine
from dltrace.engines.sources import ArrowSource, ParquetSource, check_storage, with_rid
from dltrace.engines.guest import ClosedEngine, closed_error
from dltrace.errors import (ArgumentError, DltraceError, DuplicateTable, ParseError, UnknownTable, UnsupportedQuery,
                             check_choice, check_flag, check_text, got, refuses_deep_nesting)
from dltrace.impact import Impact, impact
from dltrace.names import unknown_table
from dltrace.forward_plan import plain_text, rows_query
from dltrace.result import BackwardResult, LineageResult, run_forward, trace_backward
from dltrace.rewriter.analysis import SEMANTICS
from dltrace.rewriter.grammar import dialect as grammar_dialect
from dltrace.rewriter.grammar import parse_plain
from dltrace.rewriter.parse import mentions_rid, parse_error_text, statement_word, without_leading_comments
from dltrace.rewriter.passes.rows_relations import with_rows_relations
from dltrace.tpch_data import TABLES as TPCH_TABLES
from dltrace.tpch_data import ensure_tpch


class Session(Catalog):
    """Registered tables on one engine (a :class:`~dltrace.catalog.Catalog`) and what to ask about queries on
    them: :meth:`run` (forward lineage), :meth:`trace` (backward), :meth:`impact`, :meth:`sql`. Create with
    :func:`dltrace.connect`."""

    def __repr__(self) -> str:  # (the default named only the class and an address: a new user's)
        tables = sorted(self.tables)
        listed = ", ".join(tables[:8]) + (", ..." if len(tables) > 8 else "")
        closed = isinstance(self.engine, ClosedEngine)
        return (f"<dltrace.Session on {self.engine.name}{' (closed)' if closed else ''}: {len(tables)} "
                f"table{'s' * (len(tables) != 1)}{' (' + listed + ')' if tables else ''}>")

    # -- tables ---------------------------------------------------------------------------------
    def register(self, name: str, source: Any, replace: bool = False, storage: str = "source") -> None:
        """Register ``source`` (parquet file/folder/glob, CSV, Arrow, pandas, Spark DataFrame) as ``name``.

        Every row gets the stable dense id ``dl_rid`` in ``[0, n)``: its position in the source. A
        :class:`LineageResult` (a step of a pipeline) registers its rows with their lineage: a query reading
        ``name`` then gets lineage in the original tables' row ids (``end_to_end=False``: in ``name``'s own).
        ``storage``: ``"source"`` (default) reads the source at each query, ``"memory"`` copies it once into the
        engine (see :meth:`Catalog.register`).
        """
        _check_name_argument(name)
        if isinstance(source, LineageResult):
            names = self.engine.table_column_names(source.table.column_names)
            if names != source.table.column_names:  # (SELECT * over a join: amount, amount_1, as the engine's table)
                source = replace_fields(source, table=source.table.rename_columns(names))
            source = replace_fields(lineage_source(source, self), typed_by=rows_query(self, source))
        super().register(name, source, replace=replace, storage=storage)

    def adopt(self, name: str, replace: bool = False) -> None:
        """Trace your relation ``name`` as it is: :meth:`Catalog.adopt`."""
        _check_name_argument(name)
        super().adopt(name, replace=replace)

    def load_tpch(self, sf: float = 0.01, progress: Callable[[str], None] | None = None,
                  storage: str = "source") -> None:
        """Generate (once, cached) and register the 8 TPC-H tables at scale factor ``sf``: views over the
        parquet files (``storage="source"``) or copied into the engine's memory (``"memory"``, see
        :meth:`register`)."""
        check_storage(storage)
        if isinstance(sf, bool) or not isinstance(sf, numbers.Real) or not 0 < sf < float("inf"):
            raise ArgumentError(f"sf (the TPC-H scale factor) must be a number > 0, got {got(sf)}")
        folder = ensure_tpch(float(sf), progress=progress)
        for t in TPCH_TABLES:
            self.register(t, str(folder / f"{t}.parquet"), replace=True, storage=storage)

    def check_open(self) -> None:
        """Raise :class:`SessionClosed` once the session is closed (what needs no engine call checks here)."""
        if isinstance(self.engine, ClosedEngine):
            raise closed_error()

    # -- plain SQL ------------------------------------------------------------------------------
    def to_engine_sql(self, text: str, dialect: str | None = None) -> str:
        """Check ``text`` parses and names only registered tables, and transpile it to the engine."""
        check_text(text, "the SQL text")
        read = dialect or self.dialect
        try:
            statements = [s for s in parse_plain(text, read) if s is not None]
        except sqlglot.errors.ParseError as e:
            raise ParseError(f"SQL does not parse: {parse_error_text(e)}") from None
        if len(statements) != 1:
            raise ParseError(f"expected one SQL statement, got {len(statements)}")
        tree = statements[0]
        _check_reads_only(tree, text, read)
        self.check_known_tables(tree, views=True)
        self.check_views_fresh(tree)
        self.check_numbering(self._ids_read(tree))
        if mentions_rid(tree):  # row ids live in the rows relations
            ctes = {c.alias_or_name.lower() for c in tree.find_all(sqlglot.exp.CTE)}
            if all(t.name.lower() in self.tables or t.name.lower() in ctes for t in tree.find_all(sqlglot.exp.Table)):
                # over registered tables only: expanded as a run without lineage is, `*` leaving dl_rid out
                return plain_text(self, tree)
            return with_rows_relations(tree, self.rows_relations()).sql(self.dialect)
        if read == self.dialect:
            return text
        return tree.sql(self.dialect)

    def _ids_read(self, tree: sqlglot.exp.Expression) -> list[str]:
        """The registered tables whose row ids plain SQL reads: all it names when it names ``dl_rid``, and those
        whose rows relation it reads by name."""
        rows = {relation.lower(): t for t, relation in self.rows_relations().items()}
        read = [t.name.lower() for t in tree.find_all(sqlglot.exp.Table)]
        every = mentions_rid(tree)
        return [rows.get(name, name) for name in read if every or name in rows]

    @refuses_deep_nesting
    def sql(self, text: str, dialect: str | None = None) -> pa.Table:
        """Run SQL (in the engine's dialect, or in ``dialect``, transpiled) and return Arrow."""
        return self.engine.sql(self.to_engine_sql(text, dialect))

    # -- lineage --------------------------------------------------------------------------------
    @refuses_deep_nesting
    def run(self, sql: str, lineage: str | None = "set", dialect: str | None = None,
            semantics: str = "witness", end_to_end: bool = True) -> LineageResult | None:
        """Run ``sql`` with forward lineage (``lineage`` = "set" | "bitmap" | None for the plain query).

        ``CREATE [OR REPLACE] TABLE|VIEW name AS query`` runs the query and registers its result with its
        lineage as ``name`` (a source of the next step); ``CREATE TABLE|VIEW IF NOT EXISTS`` over a name that
        exists (registered here, or a relation of yours on the engine) does nothing and returns None, as the
        engine does. A source with lineage read by ``sql`` contributes its rows' lineage (``end_to_end``, in the
        original tables' row ids) or its own row ids (one step)."""
        check_text(sql, "the SQL text")
        check_choice(lineage, "lineage", STRATEGIES, noun="lineage strategy", none_ok=True)
        check_choice(semantics, "semantics", SEMANTICS)
        check_flag(end_to_end, "end_to_end")
        made = definition(sql, dialect or self.dialect) if _creates(sql) else None
        if made is not None:
            if made.kind == "streaming table":
                raise UnsupportedQuery(f"CREATE STREAMING TABLE {made.name}: streaming is not supported; "
                                       "define it as a materialized view")
            self._check_name(made.name)
            if made.if_not_exists and self._exists(made.name):
                return None
            if made.name.lower() in self.adopted:  # (the hint below led to the refusal of OR REPLACE: a review's)
                raise DuplicateTable(f"table {made.name!r} is your own relation (adopted): dltrace does not replace "
                                     f"it; create the result under another name")
            if not made.replace and made.name.lower() in self.tables:  # (replace=True is the API's, not SQL's)
                kind = made.kind.upper()
                raise DuplicateTable(f"table {made.name!r} is already registered: write CREATE OR REPLACE {kind} to "
                                     f"replace it (or CREATE {kind} IF NOT EXISTS to keep it)")
            r = run_forward(self, made.query, lineage=lineage, dialect=made.dialect, semantics=semantics,
                            end_to_end=end_to_end)
            self.register(made.name, r if r.strategy is not None else _plain_rows(self, r), replace=made.replace)
            return r
        return run_forward(self, sql, lineage=lineage, dialect=dialect, semantics=semantics, end_to_end=end_to_end)

    @refuses_deep_nesting
    def trace(self, sql: str, rows: list[int] | None = None, dialect: str | None = None,
              semantics: str = "witness", end_to_end: bool = True) -> BackwardResult:
        """Backward lineage by Cui-Widom reverse queries: all rows (``rows=None``) or the given ones; through
        a source with lineage (``end_to_end``) composed with its rows' stored lineage."""
        check_text(sql, "the SQL text")
        check_choice(semantics, "semantics", SEMANTICS)
        check_flag(end_to_end, "end_to_end")
        return trace_backward(self, sql, rows=rows, dialect=dialect, semantics=semantics, end_to_end=end_to_end)

    @refuses_deep_nesting
    def impact(self, sql: str, table: str, rids: int | Iterable[int],
               saved: str | os.PathLike | LineageResult | None = None, lineage: str = "set",
               dialect: str | None = None, semantics: str | None = None) -> Impact:
        """Which output rows of ``sql`` depend on rows ``rids`` of ``table`` (e.g. faulty input rows).

        From ``saved`` lineage (a folder written by ``r.save`` or a result, of every row, with the ``semantics``
        asked; None: the saved lineage's) when given; otherwise by running the query with lineage for ``table``
        only, where only those rows carry a rid (``semantics`` None: witness). Returns an
        :class:`dltrace.impact.Impact`: ``.rows`` (output row indices) and ``.result`` (``rows, r = ...``).
        """
        check_text(sql, "the SQL text")
        check_text(table, "table")
        check_choice(lineage, "lineage", STRATEGIES, noun="lineage strategy", none_ok=True)
        check_choice(semantics, "semantics", SEMANTICS, none_ok=True)
        return impact(self, sql, table, rids, saved=saved, lineage=lineage, dialect=dialect, semantics=semantics)

    def _exists(self, name: str) -> bool:
        """Is ``name`` a table or view of this session, or a relation on the engine (yours, another session's)?"""
        key = name.lower()
        return key in self.tables or key in self.views or self.engine.exists(key)

    # -- lineage as plain SQL ------------------------------------------------------------------------
    def lineage_view(self, result: LineageResult, name: str, replace: bool = False) -> dict[str, str]:
        """Expose ``result`` as views of this session (``result.register(name)``): ``<name>`` (its rows with
        their index ``row``), ``<name>_lineage`` ``(row, table, rid)``, ``<name>_lineage_<table>`` ``(row, rid)``.
        Query them with :meth:`sql`; a query naming ``dl_rid`` of a base table joins rids to its rows."""
        if not isinstance(result, LineageResult):
            raise ArgumentError(f"lineage_view takes a result (s.run(...)) and a name, got {type(result).__name__} "
                                f"{result!r:.60} as the result")
        if result.session is not self:
            raise DltraceError("the result belongs to another session: register it there")
        return result.register(name, replace=replace)

    def rows(self, table: str) -> str:
        """The engine relation that holds registered ``table``'s rows with their row id ``dl_rid``, quoted for
        SQL you run on the engine yourself (``s.sql`` finds it when a query names ``dl_rid``)."""
        key = check_text(table, "table").lower()
        if key not in self.tables:
            raise UnknownTable(unknown_table(table, self.tables))
        return self.engine.quote(self.engine.rows_name(key))

    def _repr_html_(self) -> str:
        return f"<p>dltrace session on {self.dialect}: {len(self.tables)} tables</p>"

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_name_argument(name: object) -> None:
    """A blank table name passed to register or adopt is an :class:`ArgumentError`, an argument that names nothing
    (as an empty path is); the catalog checks the rest of a name, from an argument or a CREATE alike."""
    if isinstance(name, str) and not name.strip():
        raise ArgumentError(f"a table name must be a non-empty string, got {name!r}")


def _plain_rows(session: Session, result: LineageResult) -> ArrowSource:
    """The rows of ``result``, run without lineage, as a table of their own (its ids are its rows' positions)
    in the types of its query."""
    return ArrowSource(with_rid(result.table), typed_by=rows_query(session, result))


def _creates(sql: str) -> bool:
    """Does ``sql`` start with CREATE, comments before it aside (a cheap test before parsing it as a definition)?"""
    return without_leading_comments(sql).lstrip("(").upper().startswith("CREATE")


def connect(engine: str = "duckdb", **options: Any) -> Session:
    """Open a session on ``engine``: "duckdb" (in-process; ``connection=`` your own DuckDB connection) or
    "spark" (``spark=`` your own SparkSession, or ``master=``).

    On your own connection or SparkSession dltrace is a guest: it sees your tables and views (trace one as it
    is with ``s.adopt(name)``), refuses to register a table over one of them (:class:`DuplicateTable`), and
    ``close()`` drops only the relations it made, leaving the connection open and your objects as they were.
    """
    return Session(make_engine(engine, **options))


__all__ = ["Session", "connect", "ParquetSource"]


# s.sql runs what reads the engine's tables: a query, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN, a PRAGMA or CALL of the
# engine's catalog functions. Anything else may change the tables or settings under the session (DROP TABLE dropped
# a user's own table on a guest connection; COPY ... FROM added rows to an adopted one, and the next run answered from
# the rows it had copied; PRAGMA enable_profiling printed a plan after every query): refused, by name
_READS = (sqlglot.exp.Query, sqlglot.exp.Values, sqlglot.exp.Pivot, sqlglot.exp.Describe, sqlglot.exp.Show,
          sqlglot.exp.Summarize)
_READING_COMMANDS = ("EXPLAIN", "SUMMARIZE", "SHOW", "DESCRIBE")  # (what sqlglot keeps as text)
# the engines' catalog functions a PRAGMA or CALL may name (DuckDB's pragma_table_info, duckdb_tables(), ...)
_CATALOG_CALLS = ("table_info", "show", "database_size", "storage_info", "version", "platform", "functions",
                  "collations", "duckdb_", "pragma_")


def _check_reads_only(tree: sqlglot.exp.Expression, text: str, dialect: str) -> None:
    if isinstance(tree, _READS):
        return
    if isinstance(tree, (sqlglot.exp.Condition, sqlglot.exp.Alias)):
        # (a statement sqlglot reads as a bare expression, DuckDB's CHECKPOINT a column, or no statement at all:
        # quoted as written, comments aside)
        written = " ".join(t.text for t in grammar_dialect(dialect).tokenize(text))
        raise UnsupportedQuery(f"s.sql runs queries and what reads the tables, not {written[:60]!r}: run other "
                               f"statements on your own connection or SparkSession (connect(..., connection=/spark=)), "
                               f"whose tables the session then adopts")
    word = statement_word(tree)
    if isinstance(tree, sqlglot.exp.Command):
        text = tree.expression.name.strip().lower() if isinstance(tree.expression, sqlglot.exp.Literal) else ""
        if word in _READING_COMMANDS or word == "CALL" and text.startswith(_CATALOG_CALLS):
            return
    elif isinstance(tree, sqlglot.exp.Pragma):
        called = tree.this.name.lower() if tree.this is not None else ""
        if not isinstance(tree.this, sqlglot.exp.EQ) and called.startswith(_CATALOG_CALLS):
            return
    if isinstance(tree, sqlglot.exp.Create) and isinstance(tree.expression, sqlglot.exp.Query) \
            and tree.args.get("kind") in ("TABLE", "VIEW"):
        raise UnsupportedQuery("s.sql runs queries; CREATE ... AS <query> goes through s.run, which registers the "
                               "result with its lineage (other statements: on your own connection or SparkSession)")
    if isinstance(tree, sqlglot.exp.Create):
        word = f"CREATE {tree.args.get('kind') or ''}".strip()
    raise UnsupportedQuery(f"s.sql runs queries and what reads the tables, not {word} statements: run those on your "
                           f"own connection or SparkSession (connect(..., connection=/spark=)), whose tables the "
                           f"session then adopts")
