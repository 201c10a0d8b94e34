"""dltrace: tuple-level data lineage for SQL, by query rewriting, on DuckDB and Spark SQL.

The modules form layers; each imports only from its own layer or below (``tests/test_architecture.py`` checks
it). Bottom to top:

* foundation: :mod:`~dltrace.errors`, :mod:`~dltrace.names`, :mod:`~dltrace.cache`,
  :mod:`~dltrace.fingerprints`, :mod:`~dltrace.version`, :mod:`~dltrace.tpch_data`
* engines: :mod:`~dltrace.engines`, :mod:`~dltrace.udafs` (the dl_* functions), :mod:`~dltrace.catalog`
  (the tables registered on an engine)
* :mod:`~dltrace.rewriter` (forward lineage by query rewriting), then :mod:`~dltrace.backward` (tracing by
  reverse queries)
* results: :mod:`~dltrace.lineage_data`, :mod:`~dltrace.rowstore`, :mod:`~dltrace.fetch`,
  :mod:`~dltrace.explore`, :mod:`~dltrace.oracle`, :mod:`~dltrace.save_folder`, :mod:`~dltrace.result`,
  :mod:`~dltrace.store`, :mod:`~dltrace.impact`
* :mod:`~dltrace.session`, :mod:`~dltrace.pipelines` (lineage through a pipeline of steps) and this package's
  functions
* :mod:`dltrace.tpch` (the benchmark, which uses the library) and :mod:`dltrace.cli`
"""

from __future__ import annotations

import os
from typing import Any

from dltrace import store
from dltrace.engines import STRATEGIES, add_rids_on, install_functions_on
from dltrace.errors import (
    ArgumentError,
    DltraceError,
    DuplicateTable,
    ParseError,
    PipelineError,
    QueryError,
    ReservedName,
    RowOutOfRange,
    SessionClosed,
    SourceError,
    StaleLineage,
    UnknownChoice,
    UnknownColumn,
    UnknownTable,
    UnsupportedQuery,
    check_choice,
    check_flag,
    check_mapping,
    refuses_deep_nesting,
    check_path,
    check_text,
)
from dltrace.rewriter import SEMANTICS
from dltrace.rewriter import rewrite as _rewrite
from dltrace.pipelines import PipelineResult, run_pipeline
from dltrace.session import Session, connect
from dltrace.store import SavedLineageResult
from dltrace.version import __version__


@refuses_deep_nesting
def rewrite(sql: str, dialect: str = "duckdb", strategy: str = "set", semantics: str = "witness",
            schema: dict | None = None, read: str | None = None, pretty: bool = False) -> str:
    """Return ``sql`` rewritten to also compute forward lineage: one ``dl_<table>`` column per base table.

    ``sql`` is written in ``read`` (default: ``dialect``); the result is ``dialect`` SQL. ``schema`` maps
    table -> {column: type} for the tables the query reads (``dltrace.tpch.TPCH_SCHEMA`` for TPC-H,
    ``session.schema()`` for a session's tables): the rewriter resolves unqualified columns and ``*`` with it. A
    string column that groups by a collation says so in its type (``"VARCHAR COLLATE NOCASE"``; on a DuckDB
    connection with a ``default_collation``, every string column): the rewriter then takes no two rows of a
    group for holding the same string.
    """
    check_text(sql, "the SQL text")
    check_choice(strategy, "strategy", STRATEGIES, noun="lineage strategy")
    check_choice(semantics, "semantics", SEMANTICS)
    check_flag(pretty, "pretty")
    if schema is not None:
        for table, columns in check_mapping(schema, "schema", "table -> {column: type}").items():
            check_mapping(columns, f"schema[{table!r}]", "column -> type")
    return _rewrite(sql, dialect=dialect, strategy=strategy, semantics=semantics, schema=schema, read=read,
                    pretty=pretty)


def load(path: str | os.PathLike, session: Session, allow_stale: bool = False) -> SavedLineageResult:
    """Reopen lineage saved with ``r.save(path)`` as a result bound to ``session``.

    Raises :class:`StaleLineage` naming the table when a base table changed (or is not registered) since the
    save, unless ``allow_stale=True``.
    """
    check_path(path, "path")
    if not isinstance(session, Session):
        raise ArgumentError(f"load needs the session to bind the lineage to (dltrace.connect(...)), got "
                            f"{type(session).__name__} {session!r:.60}")
    check_flag(allow_stale, "allow_stale")
    session.check_open()  # (a closed session's tables are still listed: the save loaded, bound to no engine)
    return store.load(path, session, allow_stale=allow_stale)


def pipeline(path: str | os.PathLike, session: Session | None = None, engine: str | None = None,
             lineage: str | None = "set", method: str = "forward", tables: dict[str, Any] | None = None,
             tpch: float | None = None, **engine_options: Any) -> PipelineResult:
    """Run the pipeline at ``path`` -- a Spark Declarative Pipelines project (``spark-pipeline.yml`` and its SQL
    libraries) or a folder of ``CREATE ... AS SELECT`` files -- step by step with end-to-end lineage.

    Sources: the tables of ``session``, or a new session on ``engine`` with ``tables`` ({name: source}) and/or
    TPC-H at ``tpch``. Returns every dataset (``p["name"]``: a result whose lineage is in the sources' row
    ids), ``p.impact(table, rids)`` across the graph, ``p.trace(name)`` and ``p.stale()``.
    """
    return run_pipeline(path, session=session, engine=engine, lineage=lineage, method=method, tables=tables,
                        tpch=tpch, **engine_options)


def install(target: Any) -> None:
    """Register the dl_* SQL functions on your own DuckDB connection or SparkSession (those it lacks; they stay
    when a session on it closes). A function of yours of one of their names is refused (:class:`ReservedName`),
    never replaced."""
    install_functions_on(target)


def add_rids(target: Any, table: str) -> None:
    """Give ``table``, your own on a DuckDB connection or SparkSession, the row id column ``dl_rid`` that SQL
    from :func:`rewrite` reads (outside a session, tables carry their ids themselves).

    DuckDB: a column added to the table, rows numbered 0..n-1 in insertion (``rowid``) order. Spark: the temp
    view ``table`` replaced by its rows plus ids in partition order, frozen. Then ``install(target)`` and run
    the rewritten SQL there.
    """
    add_rids_on(target, check_text(table, "table"))


__all__ = [
    "ArgumentError", "DltraceError", "DuplicateTable", "ParseError", "QueryError", "ReservedName", "RowOutOfRange",
    "SessionClosed", "SourceError", "StaleLineage", "UnknownChoice", "UnknownColumn", "UnknownTable",
    "UnsupportedQuery",
    "PipelineError", "Session", "connect", "rewrite", "pipeline", "install", "add_rids", "load", "__version__",
]
