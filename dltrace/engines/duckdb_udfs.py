"""The dl_* functions on DuckDB: vectorised Arrow UDFs, and TEMP macros that give both strategies one name.

DuckDB has no Python aggregate functions, so DLUNION over bitmaps is ``dl_bitmap_build(list(t.dl_rid))`` (ids) or
``dl_bitmap_merge(list(sub.dl_x))`` (bitmaps): ``list`` aggregates natively, one Arrow UDF call per 2048 rows
finishes the job.

One name for both strategies: a Python UDF has one signature and DuckDB refuses a second UDF of the same name
("creating multiple functions with the same name is not supported yet"), so each shared name is a TEMP macro
over native list functions (sets) and a bitmap UDF (bitmaps):

* ``dl_count``, ``dl_contains``, ``dl_to_list``: ``CASE WHEN typeof(x) = 'BLOB' THEN <bitmap UDF> ELSE <native>``
  -- typeof is constant at bind time, the optimiser folds the CASE, so the plan holds only the right branch.
* ``dl_union`` returns its input's type, which a CASE cannot: two typed macro overloads ``(BIGINT[], BIGINT[])``
  and ``(BLOB, BLOB)`` (DuckDB 2.0 macros overload by parameter type). Limitation: DuckDB cannot pick an overload
  when an argument contains an aggregate or window function ("multiple overloads match"); wrap that in a
  subquery, or call ``dl_bitmap_union`` / ``dl_set_union`` directly.

Signatures (NULL lineage = the empty set):

=====================================  =========================================================================
``dl_bitmap_build(BIGINT[]) BLOB``      32-bit bitmap of the non-null ids; NULL/empty list -> empty bitmap
``dl_bitmap_build64(BIGINT[]) BLOB``    same, 64-bit format (tables with >= 2^32 rows)
``dl_bitmap_merge(BLOB[]) BLOB``        union of the non-null bitmaps; NULL/empty list -> empty bitmap
``dl_bitmap_merge64(BLOB[]) BLOB``      same, 64-bit output (accepts 32-bit inputs)
``dl_count(BIGINT[] | BLOB) BIGINT``    number of ids; NULL -> 0
``dl_contains(BIGINT[] | BLOB, BIGINT) BOOLEAN``  NULL lineage -> false; NULL rid -> NULL
``dl_to_list(BIGINT[] | BLOB) BIGINT[]``  sorted distinct ids; NULL -> []
``dl_union(BIGINT[], BIGINT[]) BIGINT[]``, ``dl_union(BLOB, BLOB) BLOB``  NULL only when both are NULL
=====================================  =========================================================================

A set value (BIGINT[]) is trusted to be a set, sorted and distinct, as the rewriter builds it; the helpers only
drop NULL elements (``dl_count([7, 7])`` is 2). ``dl_union`` of sets returns a proper set (sorted, distinct).

The halves are also callable directly: ``dl_bitmap_count``, ``dl_bitmap_contains``, ``dl_bitmap_to_list``,
``dl_bitmap_union`` (bitmaps), ``dl_set_union`` (sets; a vectorised UDF, since list_distinct is slow on large
lists).
"""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Collection
from typing import Any, Callable

import duckdb
import sqlglot
from duckdb import sqltypes as T
from sqlglot import exp

from dltrace.errors import ReservedName
from dltrace.udafs import bitmap_arrow as B
from dltrace.udafs import sets_arrow

_BIGINT_LIST = duckdb.list_type(T.BIGINT)
_BLOB_LIST = duckdb.list_type(T.BLOB)

# name -> (function over Arrow arrays, parameter types, return type); DuckDB reads the arity off the Python
# signature, hence the lambdas
_UDFS = {
    "dl_bitmap_build": (lambda x: B.build_arrow(x, wide=False), [_BIGINT_LIST], T.BLOB),
    "dl_bitmap_build64": (lambda x: B.build_arrow(x, wide=True), [_BIGINT_LIST], T.BLOB),
    "dl_bitmap_merge": (lambda x: B.merge_arrow(x, wide=False), [_BLOB_LIST], T.BLOB),
    "dl_bitmap_merge64": (lambda x: B.merge_arrow(x, wide=True), [_BLOB_LIST], T.BLOB),
    "dl_bitmap_count": (lambda x: B.count_arrow(x), [T.BLOB], T.BIGINT),
    "dl_bitmap_contains": (lambda x, r: B.contains_arrow(x, r), [T.BLOB, T.BIGINT], T.BOOLEAN),
    "dl_bitmap_to_list": (lambda x: B.to_list_arrow(x), [T.BLOB], _BIGINT_LIST),
    "dl_bitmap_union": (lambda a, b: B.union_arrow(a, b), [T.BLOB, T.BLOB], T.BLOB),
    "dl_set_union": (lambda a, b: sets_arrow.set_union_arrow(a, b), [_BIGINT_LIST, _BIGINT_LIST], _BIGINT_LIST),
}

# what a user calls, for each bitmap UDF a macro dispatches to: the name a malformed BLOB's error gives
_CALLED_AS = {"dl_bitmap_count": "dl_count", "dl_bitmap_contains": "dl_contains", "dl_bitmap_to_list": "dl_to_list",
              "dl_bitmap_union": "dl_union"}


def _named(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` whose failure to decode a BLOB names the function and what was wrong: DuckDB shows a UDF's
    exception as its message alone, and "Could not deserialize bitmap" did not say which call got which value."""
    called = f"{_CALLED_AS[name]} ({name})" if name in _CALLED_AS else name

    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except ValueError as e:
            raise ValueError(f"{called} got a BLOB that is not a dltrace lineage bitmap ({e})") from None

    call.__signature__ = inspect.signature(fn)  # DuckDB reads the arity off the signature
    return call


# Shared names. dl_count/dl_contains/dl_to_list: one untyped macro that dispatches on typeof(x). typeof is a
# bind-time constant, so the optimiser folds the CASE and drops the dead branch together with its identity CAST
# (EXPLAIN shows just ``dl_bitmap_count(x)`` or ``len(list_filter(x, ...))``); the dead branch still has to bind,
# which CAST(BLOB AS BIGINT[]) and CAST(BIGINT[] AS BLOB) do (they would only fail at run time). Unlike typed
# overloads this also works when the argument contains an aggregate or window (``dl_count(list(x))``).
# dl_union returns the type of its input, so it cannot be one CASE: it is a typed overload pair, which DuckDB
# resolves from the argument types -- except when an argument contains an aggregate/window function (DuckDB then
# reports "multiple overloads match"): use a subquery there, or dl_bitmap_union / dl_set_union.
# A set value is trusted to be a set (sorted, distinct: what the rewriter builds); only NULL elements are dropped.
# Re-deduplicating here would be a trap: DuckDB 2.0's list_distinct/list_unique cost ~4 us per distinct element
# (5-7 s on one 1.5M-id lineage) where len() is O(1) and list_filter ~20 ns per element.
_IS_BLOB = "typeof(x) = 'BLOB'"
_SET = "list_filter(CAST(x AS BIGINT[]), lambda e: e IS NOT NULL)"
_MACROS = [
    f"dl_count(x) AS CASE WHEN {_IS_BLOB} THEN dl_bitmap_count(CAST(x AS BLOB)) "
    f"ELSE coalesce(len({_SET}), 0) END",
    f"dl_contains(x, r) AS CASE WHEN {_IS_BLOB} THEN dl_bitmap_contains(CAST(x AS BLOB), r) "
    "ELSE CASE WHEN r IS NULL THEN NULL ELSE coalesce(list_contains(CAST(x AS BIGINT[]), r), false) END END",
    f"dl_to_list(x) AS CASE WHEN {_IS_BLOB} THEN dl_bitmap_to_list(CAST(x AS BLOB)) "
    f"ELSE coalesce({_SET}, []::BIGINT[]) END",
    "dl_union(a BIGINT[], b BIGINT[]) AS dl_set_union(a, b), (a BLOB, b BLOB) AS dl_bitmap_union(a, b)",
]


# every name dltrace defines (public: the README documents them): a macro's name is the text before "("
_MACRO_NAMES = tuple(m.split("(", 1)[0] for m in _MACROS)
UDF_NAMES = tuple(_UDFS)
NAMES = (*UDF_NAMES, *_MACRO_NAMES)


def _definitions(con: duckdb.DuckDBPyConnection) -> dict[str, frozenset]:
    """name -> its definitions on ``con`` (kind, parameters and their types, return type, a macro's body), for
    every one of dltrace's names that the connection has, in any schema (a user's persistent macro, a temp one,
    a Python function)."""
    rows = con.execute(
        "SELECT function_name, function_type, parameters, parameter_types, return_type, macro_definition "
        "FROM duckdb_functions() WHERE list_contains(?, function_name)", [list(NAMES)]).fetchall()
    found: dict[str, set] = {}
    for name, *definition in rows:
        found.setdefault(name, set()).add(tuple(tuple(v) if isinstance(v, list) else v for v in definition))
    return {name: frozenset(d) for name, d in found.items()}


@functools.lru_cache(maxsize=1)
def _own_definitions() -> dict[str, frozenset]:
    """dltrace's functions as DuckDB lists them, read off a private connection they were installed on: a
    function of one of these names is dltrace's when it is defined exactly so (installed by ``dltrace.install``,
    another session on the connection, or on the parent of a cursor)."""
    con = duckdb.connect()
    try:
        _create(con, NAMES)
        return _definitions(con)
    finally:
        con.close()


def _create(con: duckdb.DuckDBPyConnection, names: tuple[str, ...] | set[str]) -> None:
    for name, (fn, params, ret) in _UDFS.items():
        if name in names:
            if any(p in (T.BLOB, _BLOB_LIST) for p in params):  # (a ValueError of the others is about no bitmap)
                fn = _named(name, fn)
            con.create_function(name, fn, params, ret, type="arrow", null_handling="special", side_effects=False)
    for name, macro in zip(_MACRO_NAMES, _MACROS):
        if name in names:
            # TEMP: lives in the connection's temp catalog, so it is never persisted into a user's database file
            # (where it would refer to Python UDFs that another process does not have).
            con.execute(f"CREATE TEMP MACRO {macro}")


def install(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Register the dl_* functions ``con`` does not have yet; returns the names it made (idempotent).

    A function of one of dltrace's names defined otherwise (the user's) is refused, never replaced: dltrace's
    SQL would call the user's function, and the user's SQL dltrace's. The Python UDFs live in the database's
    catalog and are seen by every cursor of it; the macros are TEMP, per connection: call this on each
    ``con.cursor()`` that runs dl_count/dl_contains/dl_to_list/dl_union.
    """
    present, own = _definitions(con), _own_definitions()
    clash = sorted(name for name, definition in present.items() if definition != own[name])
    if clash:
        raise ReservedName(f"the DuckDB connection has function{'s' if len(clash) > 1 else ''} {', '.join(clash)} "
                           "that dltrace did not define: dltrace's SQL calls its own dl_* functions and does not "
                           "replace yours; rename or drop them, or give dltrace another connection")
    missing = {name for name in NAMES if name not in present}
    _create(con, missing)
    return missing


def uninstall(con: duckdb.DuckDBPyConnection, names: set[str]) -> None:
    """Remove the functions of ``names`` that :func:`install` made on ``con`` (macros first: they call UDFs)."""
    for name in _MACRO_NAMES:
        if name in names:
            con.execute(f"DROP MACRO IF EXISTS temp.{name}")
    for name in _UDFS:
        if name in names:
            try:
                con.remove_function(name)
            except duckdb.Error:
                pass  # gone with the connection's database already


def share_functions(con: duckdb.DuckDBPyConnection, other: Any) -> bool:
    """Does ``other`` see the Python functions made on ``con`` (one database: a cursor of it, or its connection)?
    A probe function of a fresh name made on a cursor of ``con``, looked for from a cursor of ``other`` (the user's
    connections keep their pending results), and removed; a probe that cannot be made counts as shared (the
    functions then stay rather than vanish under another user of them)."""
    if not isinstance(other, duckdb.DuckDBPyConnection):
        return False
    name = f"dl_probe_{uuid.uuid4().hex}"
    try:
        mine = con.cursor()
    except duckdb.Error:
        return True
    try:
        try:
            mine.create_function(name, _probe, [T.INTEGER], T.INTEGER, side_effects=False)
        except duckdb.Error:
            return True
        try:
            theirs = other.cursor()
        except duckdb.Error:
            return False  # (the other connection is closed: it uses nothing)
        try:
            return bool(theirs.execute("SELECT count(*) FROM duckdb_functions() WHERE function_name = ?",
                                       [name]).fetchall()[0][0])
        finally:
            theirs.close()
    finally:
        try:
            mine.remove_function(name)
        except duckdb.Error:
            pass
        mine.close()


def _probe(x: int) -> int:
    return x


def macros_reading_relations(con: duckdb.DuckDBPyConnection, names: Collection[str]) -> frozenset[str]:
    """Those of ``names`` that are the user's macros on ``con`` whose body holds a query (see
    ``DuckDBEngine.functions_reading_relations``)."""
    if not names:
        return frozenset()
    found = con.execute(
        "SELECT DISTINCT lower(function_name), macro_definition FROM duckdb_functions() WHERE function_type = "
        "'macro' AND NOT internal AND list_contains(?, lower(function_name))", [sorted(names)]).fetchall()
    return frozenset(name for name, body in found if _reads_relations(body))


def _reads_relations(body: str | None) -> bool:
    """Does a macro's body (as ``duckdb_functions()`` writes it) hold a query, or is it one sqlglot cannot read?"""
    if not body:
        return False
    try:
        tree = sqlglot.parse_one(body, read="duckdb")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return True
    return tree.find(exp.Query, exp.Subquery, exp.Exists, exp.Table) is not None
