"""The completeness oracle: restrict every base table to one output row's lineage, rerun the query, and check
that the row comes back with the same values (``LineageResult.verify``)."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pyarrow as pa
from sqlglot import exp

from dltrace.catalog import Catalog
from dltrace.engines.sources import ArrowSource
from dltrace.names import RID
from dltrace.py_values import py_list, py_value
from dltrace.rewriter.grammar import generate
from dltrace.rewriter.lineage_on import take_clause
from dltrace.rewriter.parse import mentions_rid, parse_query
from dltrace.rewriter.shape import engine_reads


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        if not all(isinstance(x, (int, float, Decimal)) and not isinstance(x, bool) for x in (a, b)):
            return False  # (a float beside a string or a bool: a rerun whose columns came in another order is no match)
        fa, fb = float(a), float(b)
        if math.isnan(fa) and math.isnan(fb):
            return True
        return math.isclose(fa, fb, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        if not all(isinstance(x, (int, Decimal)) and not isinstance(x, bool) for x in (a, b)):
            return False
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)
    # lists, structs and maps compared element by element, so that a NaN or a float's last digit inside one is
    # compared as a value outside one is (Python's == found [nan] != [nan]: a correct row failed verify())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    return a == b


def rows_match(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))


def restricted_sql(catalog: Catalog, sql: str, dialect: str, keep: dict[str, str]) -> str:
    """``sql`` with every base table ``t`` replaced by its rows whose rid is in relation ``keep[t]``."""
    tree = parse_query(sql, dialect)
    take_clause(tree)  # (LINEAGE ON TABLES (t): lineage of ids, rerun without the clause the engine cannot parse)
    reads_rid = mentions_rid(tree)
    for table in engine_reads(tree):  # (a table read inside a CTE of its own name too)
        name = table.name.lower()
        if name not in keep:
            continue
        cols = list(catalog.table_columns(name)) + ([RID] if reads_rid else [])
        keep_rids = exp.select(exp.column("rid", quoted=True)).from_(exp.Table(this=exp.to_identifier(keep[name], quoted=True)))
        inner = (
            exp.select(*[exp.column(c, quoted=True) for c in cols])
            .from_(exp.Table(this=exp.to_identifier(catalog.engine.rows_name(name), quoted=True)))
            .where(exp.column(RID, quoted=True).isin(query=keep_rids))
        )
        # the table's own alias as written, its column list included (`t AS q(a)`: the query reads `a`), which the
        # restricted rows list in the table's order as the table itself does
        alias = table.args.get("alias")
        alias = alias.copy() if alias is not None else exp.TableAlias(this=exp.to_identifier(table.name, quoted=True))
        # (and the joins the table carries: DuckDB's FROM-first `FROM t JOIN u ... SELECT` and a parenthesised join
        # hang theirs on the first table)
        # (and the standard PIVOT it carries, `FROM t PIVOT (...)`: verify() ran the query without it)
        table.replace(exp.Subquery(this=inner, alias=alias, joins=table.args.get("joins"),
                                   pivots=table.args.get("pivots")))
    return generate(tree, catalog.dialect)


def verify_row(catalog: Catalog, sql: str, dialect: str, table: pa.Table, i: int,
               lineage: dict[str, list[int]]) -> bool:
    """Restrict each base table to ``lineage`` and check that row ``i`` of ``table`` comes back."""
    keep = {}
    try:
        for t in lineage:
            name = catalog.engine.fresh_name(f"_dl_keep_{t}")
            ids = lineage.get(t, [])
            catalog.engine.register(name, ArrowSource(pa.table({"rid": pa.array(ids, type=pa.int64())})))
            keep[t] = name
        out = catalog.engine.sql(restricted_sql(catalog, sql, dialect, keep))
    finally:
        for name in keep.values():
            catalog.engine.drop(name)
    target = tuple(py_value(table.column(c)[i]) for c in range(table.num_columns))
    for row in zip(*[py_list(out.column(c)) for c in range(out.num_columns)]):
        if rows_match(tuple(row), target):
            return True
    return False
