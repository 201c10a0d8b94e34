"""``GROUP BY ALL`` becomes the GROUP BY it means, so that every later pass reads a plain GROUP BY.

The engine groups by the SELECT items that call no aggregate of the SELECT and no window: on DuckDB those that
read a column of the SELECT's own sources, directly or as a correlation of a subquery (a constant item, an
uncorrelated subquery, a lambda's variables are no key: ``SELECT 1 AS k, sum(a) ... GROUP BY ALL`` gives one row
over no rows, as a global aggregate does); on Spark every such item, constants too (the same query gives no row
over no rows: ``LineageFunctions.group_by_all_groups_constants``). Written as those items' expressions (after
qualification: stars expanded, lateral aliases read), the keys group the rows as the engine did, and the passes
that read GROUP BY keys -- a HAVING conjunct over keys moved to the WHERE, a correlated subquery over keys read
per row, decorrelation, the lineage rules, backward tracing's reverse queries -- take the query as they take
one with its keys written out. Without such an item there is no GROUP BY (a global aggregate, as the engine
reads it). Spark's constant items are all one key, ``TRUE``: each has one value on every row of the SELECT, so
grouping by them makes one group of all the rows when there are rows and none otherwise, as grouping by TRUE
does (an item that draws a random value per row is refused; an integer written as a key would be a position).
A key holding a subquery is then refused where any GROUP BY's is (:func:`dltrace.rewriter.analysis
.direct_subqueries`).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import outer_columns, source_names
from dltrace.rewriter.shape import aggregates, random_call


def group_by_all(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not any(_by_all(s) for s in expression.find_all(exp.Select)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for select in list(tree.find_all(exp.Select)):
        if _by_all(select):
            keys = group_by_all_keys(select, context.fns.group_by_all_groups_constants)
            select.set("group", exp.Group(expressions=keys) if keys else None)
    return tree


def _by_all(select: exp.Select) -> bool:
    group = select.args.get("group")
    return group is not None and bool(group.args.get("all")) and not group.expressions \
        and not group.args.get("totals")


def group_by_all_keys(select: exp.Select, constants: bool) -> list[exp.Expression]:
    """The keys ``GROUP BY ALL`` groups ``select`` (qualified) by, as copies of its items' expressions;
    ``constants``: the engine groups by the items that read no column too (see the module)."""
    keys: list[exp.Expression] = []
    constant_items = []
    for item in select.expressions:
        value = item.unalias()
        if aggregates(value, select) or any(w.find_ancestor(exp.Select) is select for w in value.find_all(exp.Window)):
            continue
        if _reads_a_column(value, select):
            keys.append(value.copy())
        else:
            constant_items.append(value)
    if constants and constant_items:
        for value in constant_items:
            call = random_call(value)
            if call is not None:  # (one value per row: grouping by it is no grouping by a constant)
                raise UnsupportedQuery(f"GROUP BY ALL over an item that draws a random value and reads no column is "
                                       f"not supported (write its GROUP BY), at {position(call)}")
        keys.append(exp.true())
    return keys


def _reads_a_column(value: exp.Expression, select: exp.Select) -> bool:
    """Does ``value`` (an item of ``select``) read a column of ``select``'s own sources: in ``select`` itself, or as
    the correlation of a subquery (a lambda's variable has no table, a subquery's own columns are its sources')?"""
    own = source_names(select)
    if any(c.table in own for c in value.find_all(exp.Column) if c.find_ancestor(exp.Select) is select):
        return True
    return any(c.table in own for query in value.find_all(exp.Select) if query.find_ancestor(exp.Select) is select
               for c in outer_columns(query))
