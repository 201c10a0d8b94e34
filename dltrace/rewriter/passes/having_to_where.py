"""A HAVING conjunct with a subquery that reads only the group's keys moves to the WHERE.

sqlglot decorrelates an EXISTS / IN / ANY / ALL in a WHERE, not in a HAVING: ``SELECT t.k, count(*) FROM t GROUP
BY t.k HAVING EXISTS (SELECT 1 FROM u WHERE u.k = t.k)`` was refused ("could not be decorrelated"). Written as
``... FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k) GROUP BY t.k`` it is decorrelated like any WHERE's.

Valid (same rows, same lineage) when the conjunct's value is the group's for every row of the group: it calls no
aggregate, window or random function of its SELECT (an aggregate inside its subquery over the SELECT's columns is
the SELECT's), and every column of the SELECT's own sources it reads --
directly or as a correlation of a subquery -- is a plain GROUP BY key of a type whose grouped values are
identical (:mod:`key_types`: integers, decimals, dates, timestamps, booleans, strings where no collation applies;
not floats, whose 0.0 and -0.0 are one group, nor intervals, whose '1 month' and '30 days' are). A group then
keeps or loses all of its rows at once, so the WHERE keeps exactly the rows of the groups the HAVING kept, and the
aggregates, windows and QUALIFY after it see the same groups; a GROUP BY group has at least one row, so no group is
made or lost. Witnesses: a HAVING subquery's belong to the group's row, a WHERE subquery's to each input row, unioned
over the group -- the same rows, since each row of the group evaluates it with the same keys. Only under a plain
GROUP BY (not GROUPING SETS, ROLLUP, CUBE, ALL or WITH TOTALS, where a subtotal's key is NULL and its rows' are
not), and only where sqlglot can tell the key's type (a base table's from the schema, a CTE's or a derived
table's from its expression).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import outer_columns, source_names
from dltrace.rewriter.passes.key_types import identity_keys
from dltrace.rewriter.rules.late_lineage import plain_keys
from dltrace.rewriter.shape import aggregates, conjuncts, random_call


def having_to_where(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not any(s.args.get("having") is not None and s.args["having"].find(exp.Query)
               for s in expression.find_all(exp.Select)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for select in list(tree.find_all(exp.Select)):
        having = select.args.get("having")
        if having is None or not plain_keys(select) or select.args["group"].args.get("totals"):
            continue
        keys = identity_keys(select, context.schema, context.dialect, context.collations)
        moved = [c for c in conjuncts(having.this) if c.find(exp.Query) is not None and _reads_only(c, select, keys)]
        if not moved:
            continue
        kept = [c for c in conjuncts(having.this) if not any(c is m for m in moved)]
        select.set("having", exp.Having(this=exp.and_(*[c.copy() for c in kept])) if kept else None)
        select.where(*[c.copy() for c in moved], copy=False)
    return tree


def _reads_only(conjunct: exp.Expression, select: exp.Select, keys: list[exp.Column]) -> bool:
    """Does ``conjunct`` read nothing of ``select``'s rows but ``keys`` (nor aggregate, window or draw)?"""
    if aggregates(conjunct, select) or random_call(conjunct) is not None or any(
            w.find_ancestor(exp.Select) is select for w in conjunct.find_all(exp.Window)):
        return False
    own = source_names(select)
    read = [c for c in conjunct.find_all(exp.Column) if c.find_ancestor(exp.Select) is select]
    for query in conjunct.find_all(exp.Select):
        if query.find_ancestor(exp.Select) is select:  # (a subquery directly in the conjunct; nested ones inside it)
            read += outer_columns(query)
    if any(c in read for agg in conjunct.find_all(exp.AggFunc) for c in agg.find_all(exp.Column)):
        return False  # an aggregate in a subquery over the SELECT's columns aggregates the SELECT's group
    return all(c.table not in own or any(c == k for k in keys) for c in read if c.table)
