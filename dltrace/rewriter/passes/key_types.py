"""Which GROUP BY keys group by identity: every row of a group holds the very same value of the key.

Two passes read something over a group's keys once per input row rather than once per group
(:mod:`having_to_where`, :func:`decorrelatable.read_group_constants_per_row`). That is the engine's value only
when each row of the group holds the value the engine groups by. For integers, decimals (one scale per column),
dates, timestamps and booleans the rows of a group are identical, and for strings where no collation applies. A
collation groups 'x' with 'X' (DuckDB's ``COLLATE NOCASE`` column, its ``default_collation`` setting, Spark's
``UTF8_LCASE``), and the column types sqlglot reads do not carry it, so ``HAVING s::BLOB::VARCHAR IN (...)`` read
per row kept a row of a group whose key failed (found by a probe): strings count only when the query writes no
``COLLATE`` and the engine says none of its tables' string columns has a collation
(``PassContext.collations``: ``Engine.collated_strings``). Not for floats:
``0.0`` and ``-0.0`` are one group, and ``CAST(k AS VARCHAR)`` or ``1 / k`` tell them apart (DuckDB evaluates a
subquery over the group's key once, with one of them; per row, each row gets its own). Nor intervals, where
``INTERVAL 1 MONTH`` and ``INTERVAL 30 DAYS`` are one group, nor a type sqlglot cannot tell (an unknown
function's result): refused there rather than risked.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types

from dltrace.rewriter.passes.qualify import schema_for
from dltrace.rewriter.passes.row_generators import typed_stand_in
from dltrace.rewriter.shape import is_row_generator

T = exp.DataType.Type
IDENTICAL_WHEN_GROUPED = frozenset({
    T.TINYINT, T.SMALLINT, T.MEDIUMINT, T.INT, T.BIGINT, T.INT128, T.INT256, T.UTINYINT, T.USMALLINT, T.UMEDIUMINT,
    T.UINT, T.UBIGINT, T.UINT128, T.UINT256, T.BIGDECIMAL, T.DECIMAL, T.DECIMAL32, T.DECIMAL64, T.DECIMAL128,
    T.DECIMAL256, T.UDECIMAL, T.BOOLEAN, T.DATE, T.DATE32, T.DATETIME, T.TIMESTAMP, T.TIMESTAMPNTZ, T.TIMESTAMP_S,
    T.TIMESTAMP_MS, T.TIMESTAMP_NS,
})
STRINGS = frozenset({T.VARCHAR, T.TEXT, T.CHAR, T.NCHAR, T.NVARCHAR, T.BPCHAR})  # identical unless collated


def typed_twins(tree: exp.Expression, schema: dict, dialect: str) -> dict[int, exp.Expression] | None:
    """A copy of ``tree`` annotated with sqlglot's types over ``schema``, as a map from each node of ``tree`` (its
    ``id``) to its typed twin; None when sqlglot cannot type the query (the caller then acts as without types).
    ``tree`` itself is left untyped: a pass's output carries no type a later pass could take for its own."""
    twin = tree.copy()
    twins = dict(zip(map(id, tree.walk()), twin.walk()))  # (paired before annotating, which may wrap nodes)
    for table in [t for t in twin.find_all(exp.Table) if is_row_generator(t)]:
        stand_in = typed_stand_in(table, dialect)  # (sqlglot types no table function's columns)
        if stand_in is not None:
            table.replace(stand_in)
    try:
        annotate_types(twin, schema=schema_for(twin, schema, dialect), dialect=dialect)
    except (SqlglotError, KeyError, ValueError, TypeError, AttributeError):
        return None
    return twins


def strings_identical(select: exp.Select, collations: bool) -> bool:
    """Do the rows of a group of ``select`` hold the very string they are grouped by: no collation among the
    tables' columns (``collations`` false, the engine's answer) nor written in the query (``s COLLATE nocase``)?"""
    return not collations and select.root().find(exp.Collate) is None


def identity_keys(select: exp.Select, schema: dict | None, dialect: str, collations: bool = True) -> list[exp.Column]:
    """The GROUP BY keys of ``select`` (plain columns, nodes of ``select`` itself) whose type groups by identity,
    typed by sqlglot over the whole query (a CTE's or derived table's column takes its expression's type); strings
    only where no collation applies (``collations``: may one of the tables' string columns have one).

    Valid on a qualified tree; reads a copy (annotating types sets them on every node it visits)."""
    group = select.args.get("group")
    if group is None or schema is None or not any(isinstance(k, exp.Column) for k in group.expressions):
        return []
    typed = _typed_keys(select, schema, dialect)
    identical = IDENTICAL_WHEN_GROUPED | STRINGS if strings_identical(select, collations) else IDENTICAL_WHEN_GROUPED
    return [key for key, key_type in typed or []
            if isinstance(key, exp.Column) and key_type is not None and key_type.this in identical
            and not key_type.args.get("collate")]


def may_hold_maps(select: exp.Select, schema: dict | None, dialect: str) -> bool:
    """May a GROUP BY key of ``select`` be a MAP or hold one (in a struct or a list)? Also when sqlglot cannot
    tell a key's type. Spark groups by maps but compares none (``<=>`` refuses them): a rule that finds a group's
    rows again by its keys does not apply there (rules/late_lineage.py, rules/nested_lineage.py)."""
    group = select.args.get("group")
    if group is None:
        return False
    typed = _typed_keys(select, schema, dialect) if schema is not None else None
    if typed is None:
        return True
    return any(t is None or any(isinstance(n, exp.DataType) and n.this in (T.MAP, T.UNKNOWN) for n in t.walk())
               for _, t in typed)


def _typed_keys(select: exp.Select, schema: dict, dialect: str) -> list[tuple[exp.Expression, exp.DataType | None]] \
        | None:
    """Each GROUP BY key of ``select`` with the type sqlglot gives it over the whole query (None: no types)."""
    twins = typed_twins(select.root(), schema, dialect)
    twin = twins.get(id(select)) if twins is not None else None
    if twin is None:  # (no types, or a SELECT whose parent no longer holds it: a pass replaced that parent)
        return None
    return [(key, typed.type) for key, typed in zip(select.args["group"].expressions, twin.args["group"].expressions)]
