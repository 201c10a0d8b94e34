"""Bitmaps built on read: a session's query returns its final lineage columns as the id lists themselves.

Where lineage travels as id lists inside the query (``LineageFunctions.lists_inside``: DuckDB's bitmap
strategy), each final lineage column is ``dl_bitmap_build(<list>)``: a Python function the engine calls once per
batch, on one thread, while the query runs (TPC-H Q1 at SF 1: 107 of its 340 ms, for 5.9M ids in 4 rows). A
session's result does not need the bitmaps before its lineage is read, so this pass leaves the list::

    SELECT c1, ..., dl_bitmap_build(<list>) AS dl_t      ->      SELECT c1, ..., <list> AS dl_t

and the result builds the same bitmaps (``udafs.encode_bitmaps``, byte for byte the function's output) the first
time the column is read (:class:`dltrace.lineage_data.FinishedOnRead`). Applied when the lineage functions finish
on read (``LineageFunctions.finish_on_read``: a session's run); text for a user's own connection
(``dltrace.rewrite``) keeps the builds: nobody would build them afterwards.

Valid (the same rows, each with the same lineage once built) when the outermost query is a SELECT without
DISTINCT (a list and its bitmap are not equal alike: two lists of the same ids in another order are two
values) and the column is a plain build of one list; anything else (a set operation at the top, hoisted lineage
merged in, a stored bitmap passed through) keeps its build. Not applied under LINEAGE ON over a table.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.engines.lineage_sql import is_bitmap_build
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.instrument import LINEAGE_COLUMNS


def build_on_read(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    lineage = expression.meta.get(LINEAGE_COLUMNS)
    fns = context.fns
    if (not fns.finish_on_read or not fns.builds_bitmaps or not fns.lists_inside or not lineage
            or not isinstance(expression, exp.Select) or expression.args.get("distinct")
            or (context.on is not None and context.on.table)):
        return expression
    finals = set(lineage.values())
    built = [i for i, p in enumerate(expression.expressions)
             if isinstance(p, exp.Alias) and p.alias_or_name in finals and is_bitmap_build(p.this)]
    if not built:
        return expression
    tree = exp.maybe_copy(expression, copy)
    for i in built:
        projection = tree.expressions[i]
        projection.set("this", projection.this.expressions[0])
    return tree
