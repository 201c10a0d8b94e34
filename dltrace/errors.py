"""The errors dltrace raises: every bad input ends in one of these, with a one-line message."""

from __future__ import annotations

import codecs
import functools
import operator
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Callable, TypeVar

T = TypeVar("T")


class DltraceError(Exception):
    """Base class of every error dltrace raises on purpose."""


class SourceError(DltraceError):
    """A table source cannot be registered (missing file, unknown format, reserved column name, a table name with a
    capital letter outside ASCII)."""


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
    def expanded_columns(cls, items: int, columns: int, where: str | None = None) -> UnsupportedQuery:
        """The engine expanded one SELECT item into more columns than dltrace's rewrite lists (DuckDB's unnest of
        a struct; a ``*`` over a USING join and a later source with a column of the USING column's name, which
        sqlglot's expansion lists once where the engine lists both): known from the engine's names for the query,
        or once it ran, from the count of columns it returned; ``where``: the position of the item that may."""
        return cls(f"a SELECT item that gives several columns (an unnest of a struct, a * over a USING join and a "
                   f"later join with a column of the same name, ...) is not supported: the query's {items} items "
                   f"gave {columns} columns; name each column" + (f", at {where}" if where else ""))


def refuses_deep_nesting(function: Callable[..., T]) -> Callable[..., T]:
    """``function`` (a call that parses and rewrites a query), a query nested past Python's recursion limit refused
    by name: a UNION ALL of about 100 queries raised a bare RecursionError through s.run (a review)."""
    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> T:
        try:
            return function(*args, **kwargs)
        except RecursionError:
            raise UnsupportedQuery("a query nested this deeply is not supported (Python's recursion limit: a UNION "
                                   "ALL of about 100 queries, or expressions nested as deep): split it into steps "
                                   "(CREATE TABLE ... AS each part, then query those)") from None
    return guarded


class ArgumentError(DltraceError, TypeError):
    """A public function got an argument of the wrong type (a query that is not a string, a flag that is not a
    bool...): named with what it got, before any of it is used (a TypeError too, as Python's own would be)."""


class UnknownChoice(DltraceError, ValueError):
    """An argument names an option that does not exist (an engine, a lineage strategy, a semantics): named with
    the choices (a ValueError too, as Python's own would be for a value of the right type that is no option)."""


class RowOutOfRange(DltraceError, IndexError):
    """A row index the result (or the query's output) does not have."""


def rows_held(n: int) -> str:
    """"no rows", "1 row (0)", "3 rows (0-2)": what a result of ``n`` rows holds, as a row index reads it."""
    return "no rows" if n == 0 else f"{n:,} rows (0-{n - 1})" if n > 1 else "1 row (0)"


def row_index(i: object, n: int) -> int:
    """``i`` as a row index of a result of ``n`` rows (a negative one counts from the end, as in Python), or the
    one-line error naming what is wrong with it: every reader of a row checks it here."""
    try:
        index = None if isinstance(i, bool) else operator.index(i)  # an int, numpy's integers (True is no row)
    except TypeError:  # a float, a string, None
        index = None
    if index is None:
        raise ArgumentError(f"a row index must be an int, got {got(i)}")
    if not -n <= index < n:
        raise RowOutOfRange(f"row {index} out of range: the result has {rows_held(n)}")
    return index % n


def row_indexes(rows: object, n: int) -> list[int] | None:
    """``rows`` -- None (every row) or an iterable of row indexes, each checked as :func:`row_index` checks one --
    as the sorted distinct indexes of a result of ``n`` rows: every ``rows=`` argument is checked here."""
    if rows is None:
        return None
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
        raise ArgumentError(f"rows must be a list of row indexes or None, got {got(rows)}")
    wanted = sorted({row_index(i, n) for i in rows})
    if not wanted:  # (a trace of rows=[] held every row, none traced: a review's)
        raise ArgumentError("rows=[] names no row: list the rows to trace, or pass rows=None for every row")
    return wanted


class SessionClosed(DltraceError):
    """The session was closed: nothing more runs on it."""


class QueryError(DltraceError):
    """The engine rejected or failed to run a query."""


class StaleLineage(DltraceError):
    """Saved lineage refers to base tables that have changed since it was saved."""


class PipelineError(DltraceError):
    """A pipeline cannot be read or run: a cycle, an unknown dataset, a streaming table, a failing step."""


# -- arguments of the public entry points ----------------------------------------------------------------------
# Checked where the user's call enters (session, result, pipeline, the package's functions): deeper down a wrong
# type fails as Python's AttributeError on `.lower()` or a TypeError on iteration, which names neither the
# argument nor the function the user called.


def got(value: object) -> str:
    """``value`` as an error message shows what was passed: its type and a short repr, on one line (a pyarrow
    Table's repr has a line per column)."""
    text = " ".join(repr(value).splitlines())
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def check_text(value: object, what: str) -> str:
    """``value`` if it is a string (SQL text, a table or dataset name), else the one-line error naming ``what``."""
    if not isinstance(value, str):
        raise ArgumentError(f"{what} must be a string, got {got(value)}")
    return value


def check_flag(value: object, what: str) -> bool:
    """``value`` if it is a bool: a truthy string such as ``"no"`` must not switch an option on."""
    if not isinstance(value, bool):
        raise ArgumentError(f"{what} must be True or False, got {got(value)}")
    return value


def check_path(value: object, what: str) -> str | os.PathLike:
    """``value`` if it is a path (a string or ``os.PathLike``) that names something: ``""`` is no path (Python
    reads it as the current folder, so ``r.save("")`` wrote into it)."""
    if not isinstance(value, (str, os.PathLike)):
        raise ArgumentError(f"{what} must be a str or os.PathLike, got {got(value)}")
    if not os.fspath(value):
        raise ArgumentError(f"{what} must be a non-empty path, got ''")
    return value


def check_choice(value: object, what: str, choices: Iterable[str], noun: str | None = None,
                 none_ok: bool = False) -> str | None:
    """``value`` if it is one of ``choices`` (or None, when ``none_ok``): another type is an
    :class:`ArgumentError` naming the argument ``what`` (``lineage=True`` is no strategy), another string the
    error naming the choices (``noun``: what a value of it is called, default ``what``)."""
    choices = tuple(choices)
    if value is None and none_ok:
        return None
    listed = ", ".join(choices) + (" or None" if none_ok else "")
    if not isinstance(value, str):
        raise ArgumentError(f"{what} must be one of {listed}, got {got(value)}")
    if value not in choices:
        raise UnknownChoice(f"unknown {noun or what} {value!r}: choose one of {listed}")
    return value


def check_names(value: object, what: str) -> list[str] | None:
    """``None``, one name or an iterable of names, as a list (``None`` stays ``None``: "all")."""
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        names = list(value)
        if all(isinstance(n, str) for n in names):
            return names
    raise ArgumentError(f"{what} must be a name or a list of names, got {got(value)}")


def check_count(value: object, what: str, least: int = 0) -> int:
    """``value`` as an int of at least ``least`` (a count, a limit, a number of threads: numpy's integers too, but
    not a float, which would be truncated, nor True), else the one-line error naming ``what``."""
    try:
        count = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        count = None
    if count is None or count < least:
        kind = "a positive int" if least == 1 else f"an int >= {least}"
        raise ArgumentError(f"{what} must be {kind}, got {got(value)}")
    return count


def check_mapping(value: object, what: str, of: str = "") -> Mapping[Any, Any]:
    """``value`` if it is a mapping (a dict); ``of`` says what it maps, for the message."""
    if not isinstance(value, Mapping):
        raise ArgumentError(f"{what} must be a dict{' of ' + of if of else ''}, got {got(value)}")
    return value


# -- files and folders the user names ---------------------------------------------------------------------------
# Python's own errors for them name a byte offset ("can't decode byte 0xe9 in position 29") or the OS's word for
# a path one of whose parents is a file ("File exists", "Not a directory"), and neither says what to fix.


def read_user_text(path: str | os.PathLike, what: str, error: type[DltraceError] = DltraceError) -> str:
    """The text of the user's file ``path`` (a SQL file, a pipeline spec), read as UTF-8 (a leading byte order
    mark dropped), or ``error`` naming ``what`` and the problem: a file that is not UTF-8 is named with the line
    and column of its first bad byte."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise error(f"cannot read {what} {str(path)!r}: {e.strerror or e}") from None
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"cannot read {what} {str(path)!r}: it is not UTF-8 text (byte 0x{data[e.start]:02x} at "
                    f"{text_position(data, e.start)}); save it as UTF-8") from None


def text_position(data: bytes, offset: int) -> str:
    """``line L, col C`` of byte ``offset`` of ``data`` (both from 1; the column counts bytes)."""
    line = data.count(b"\n", 0, offset) + 1
    column = offset - data.rfind(b"\n", 0, offset)
    return f"line {line}, col {column}"


def folder_problem(path: str | os.PathLike, e: OSError) -> str:
    """Why folder ``path`` could not be made or written, in the user's terms: a path on the way that is a file is
    named, where the OS says only "File exists" or "Not a directory"."""
    for p in (Path(path).absolute(), *Path(path).absolute().parents):
        if p.exists():
            return f"{str(p)!r} is a file, not a folder" if not p.is_dir() else (e.strerror or str(e))
    return e.strerror or str(e)
