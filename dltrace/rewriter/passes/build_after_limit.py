"""Bitmaps after LIMIT: a query that keeps its first rows builds the bitmaps of those rows only.

Where lineage travels as id lists inside the query (``LineageFunctions.lists_inside``: DuckDB's bitmap
strategy), each final lineage column is ``dl_bitmap_build(<list>)``, which the engine computes for every row
of the projection before the LIMIT keeps a few (TPC-H Q10: 38k bitmaps built per table to return 20). This
pass moves the build above the LIMIT::

    SELECT _dl_top.c1, ..., dl_bitmap_build(_dl_top.dl_t) AS dl_t, ...
    FROM (SELECT c1, ..., <list> AS dl_t ... ORDER BY o LIMIT n) AS _dl_top
    ORDER BY <o, as the output columns it names>

The same move serves an aggregate whose HAVING keeps few groups and which is sorted: the engine calls the
(Python) build once per batch of the projection, and after HAVING the batches hold a few rows each (TPC-H Q11:
45 calls of about 0.3 ms for 1,048 rows); above the inner ORDER BY, whose sort hands on full batches, the
builds take 3 calls (Q11 38 -> 26 ms, when it still kept its HAVING: lineage after HAVING, ``rules/late_lineage.py``,
now takes Q11's groups' lineage after the filter, and this serves a HAVING over a derived table). The outer sort
is then a second one, over the kept rows.

Valid (the same rows in the same order, each with the same lineage) when the outermost query is a SELECT with
LIMIT or OFFSET, or with HAVING and ORDER BY, whose output names are distinct and whose ORDER BY items are all
output columns (the outer ORDER BY then sorts the kept rows as the inner one did; rows it ties are tied in the
query as written too). Lineage columns that are not a plain build (hoisted lineage merged in) stay where they
are. Not applied under LINEAGE ON over a table (its dictionary CTE is added to the outermost query).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.engines.lineage_sql import is_bitmap_build
from dltrace.rewriter.build import ordered_like
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.instrument import LINEAGE_COLUMNS
from dltrace.rewriter.shape import order_by_outputs


def build_after_limit(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    lineage = expression.meta.get(LINEAGE_COLUMNS)
    if (not context.fns.lists_inside or not lineage or not isinstance(expression, exp.Select)
            or not (expression.args.get("limit") or expression.args.get("offset")
                    or (expression.args.get("having") and expression.args.get("order")))
            or (context.on is not None and context.on.table)):
        return expression
    names = [p.alias_or_name for p in expression.expressions]
    if len({n.lower() for n in names}) != len(names) or not all(names):
        return expression
    finals = set(lineage.values())
    moved = [i for i, p in enumerate(expression.expressions)
             if p.alias_or_name in finals and is_bitmap_build(p.unalias())]
    order = expression.args.get("order")
    outer_order = order_by_outputs(order, expression.expressions) if order is not None else None
    if not moved or (order is not None and outer_order is None):
        return expression
    meta = dict(expression.meta)
    inner = exp.maybe_copy(expression, copy)
    inner.meta.clear()
    top = "_dl_top"
    projections = []
    for i, p in enumerate(inner.expressions):
        name = p.args["alias"].copy() if isinstance(p, exp.Alias) else exp.to_identifier(names[i])
        column = exp.column(name.copy(), table=top)
        if i in moved:
            build = p.unalias()
            p.replace(exp.alias_(build.expressions[0], name.copy()))  # the list itself; built above
            projections.append(exp.alias_(exp.Anonymous(this=build.name, expressions=[column]), name))
        else:
            projections.append(exp.alias_(column, name) if isinstance(p, exp.Alias) else column)
    outer = exp.select(*projections).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(top))), copy=False)
    if outer_order is not None:
        outer.set("order", exp.Order(expressions=[
            ordered_like(exp.column(n.copy(), table=top), o) for o, n in outer_order]))
    outer.meta.update(meta)
    return outer
