"""dltrace: tuple-level data lineage for SQL, by query rewriting, on DuckDB and Spark SQL."""

from dltrace.errors import (
    DltraceError,
    DuplicateTable,
    ParseError,
    QueryError,
    ReservedName,
    SourceError,
    StaleLineage,
    UnknownColumn,
    UnknownTable,
    UnsupportedQuery,
)
from dltrace.session import Session, connect
from dltrace.version import __version__


def rewrite(sql: str, dialect: str = "duckdb", strategy: str = "set", semantics: str = "witness",
            schema: dict | None = None, read: str | None = None, pretty: bool = False) -> str:
    """Return ``sql`` rewritten to also compute forward lineage: one ``dl_<table>`` column per base table.

    ``sql`` is written in ``read`` (default: ``dialect``); the result is ``dialect`` SQL. ``schema`` maps
    table -> {column: type}; without it, TPC-H tables are known and other queries must be fully qualified.
    """
    from dltrace.rewriter import rewrite as _rewrite

    return _rewrite(sql, dialect=dialect, strategy=strategy, semantics=semantics, schema=schema, read=read,
                    pretty=pretty)


def load(path, session: Session, allow_stale: bool = False):
    """Reopen lineage saved with ``r.save(path)`` as a result bound to ``session``.

    Raises :class:`StaleLineage` naming the table when a base table changed (or is not registered) since the
    save, unless ``allow_stale=True``.
    """
    from dltrace.store import load as _load

    return _load(path, session, allow_stale=allow_stale)


def install(target) -> None:
    """Register the dl_* SQL functions on your own DuckDB connection or SparkSession."""
    from dltrace.udafs import install as _install

    _install(target)


__all__ = [
    "DltraceError", "DuplicateTable", "ParseError", "QueryError", "ReservedName", "SourceError",
    "StaleLineage", "UnknownColumn", "UnknownTable", "UnsupportedQuery", "Session", "connect", "rewrite",
    "install", "load", "__version__",
]
