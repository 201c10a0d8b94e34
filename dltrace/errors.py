"""The errors dltrace raises: every bad input ends in one of these, with a one-line message."""

from __future__ import annotations

import operator


class DltraceError(Exception):
    """Base class of every error dltrace raises on purpose."""


class SourceError(DltraceError):
    """A table source cannot be registered (missing file, unknown format, reserved column name)."""


class UnknownTable(DltraceError):
    """A query names a table that is not registered."""


class UnknownColumn(DltraceError):
    """A query names a column that no table in scope has."""


class DuplicateTable(DltraceError):
    """A table name is registered twice."""


class ParseError(DltraceError):
    """The SQL text does not parse."""


class ReservedName(DltraceError):
    """A query or a source defines a name with the reserved prefix ``dl_``."""


class UnsupportedQuery(DltraceError):
    """The query uses a construct that dltrace cannot give exact lineage for."""

    @classmethod
    def expanded_columns(cls, items: int, columns: int) -> UnsupportedQuery:
        """The engine expanded one SELECT item into more columns than dltrace's rewrite lists (DuckDB's unnest of
        a struct; a ``*`` over a USING join and a later source with a column of the USING column's name, which
        sqlglot's expansion lists once where the engine lists both): known from the engine's names for the query,
        or once it ran, from the count of columns it returned."""
        return cls(f"a SELECT item that gives several columns (an unnest of a struct, a * over a USING join and a "
                   f"later join with a column of the same name, ...) is not supported: the query's {items} items "
                   f"gave {columns} columns; name each column")


class RowOutOfRange(DltraceError, IndexError):
    """A row index the result (or the query's output) does not have."""


def row_index(i: object, n: int) -> int:
    """``i`` as a row index of a result of ``n`` rows (a negative one counts from the end, as in Python), or the
    one-line error naming what is wrong with it: every reader of a row checks it here."""
    try:
        index = None if isinstance(i, bool) else operator.index(i)  # an int, numpy's integers (True is no row)
    except TypeError:  # a float, a string, None
        index = None
    if index is None:
        raise DltraceError(f"a row index must be an int, got {type(i).__name__} {i!r}")
    if not -n <= index < n:
        raise RowOutOfRange(f"row {index} out of range: the result has {n} rows")
    return index % n


class SessionClosed(DltraceError):
    """The session was closed: nothing more runs on it."""


class QueryError(DltraceError):
    """The engine rejected or failed to run a query."""


class StaleLineage(DltraceError):
    """Saved lineage refers to base tables that have changed since it was saved."""


class PipelineError(DltraceError):
    """A pipeline cannot be read or run: a cycle, an unknown dataset, a streaming table, a failing step."""
