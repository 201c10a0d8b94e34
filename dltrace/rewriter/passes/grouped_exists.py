"""A correlated EXISTS over a subquery that groups, as an EXISTS over its groups correlated outside them.

``EXISTS (SELECT 1 FROM o WHERE o.cust = c.id GROUP BY o.day HAVING count(*) > 1)`` ("a customer with two orders on
one day") was refused: sqlglot does not decorrelate a subquery that groups. Where the subquery reads the outer row
only through equalities of its own columns with the outer row's in its WHERE (and tests of the outer row alone),
an outer row's groups are the groups of the subquery's rows without those equalities, grouped by the equalities'
inner sides too, whose inner sides equal its outer sides::

    EXISTS (SELECT 1 FROM (SELECT o.cust AS _dl_ek1 FROM o GROUP BY o.day, o.cust HAVING count(*) > 1)
                          AS _dl_groups1
            WHERE _dl_groups1._dl_ek1 = c.id)

an EXISTS over plain rows of a derived table, which the decorrelation takes. NOT EXISTS alike. Each group is the
same rows either way, and passes HAVING alike, so EXISTS is TRUE for the same outer rows and its witnesses (the
rows of the groups that pass) are the same.

Valid where the inner sides group as the equalities compare (not where a collation or a cast makes two groups
equal one value: ``passes/coarse_keys.py``), over a GROUP BY of plain keys (GROUPING SETS, ROLLUP, CUBE or ``()``
have a grand total over no rows, which an outer row without rows would not find), without DISTINCT, QUALIFY, a
window, a LIMIT or OFFSET, a random draw (drawn once per outer row), a set-returning call in the SELECT list (a row
per element: none for a group whose list is empty), a WITH, or a nested subquery reading the outer row; the outer
row read only in the WHERE. An ORDER BY orders nothing EXISTS reads and goes, where its keys cannot raise an error
of their own (``shape.order_key_cannot_raise``). Anything else is left as it is
(refused as before).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.coarse_keys import coarse_equality
from dltrace.rewriter.passes.decorrelatable import WRITTEN_AS
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import (is_correlated, outer_columns, reaches_past_itself,
                                                 where_correlation)
from dltrace.rewriter.shape import (order_key_cannot_raise, plain_keys, random_call, read_in_where_only,
                                   returns_rows_per_row)


def grouped_exists(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not any(_correlation(e.this) for e in expression.find_all(exp.Exists)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    taken = [(e, parts) for e in tree.find_all(exp.Exists) if (parts := _correlation(e.this)) is not None]
    for n, (exists, (keys, filters, outer_tests)) in enumerate(taken, 1):
        if coarse_equality(tree, keys, context):
            continue  # (its groups would not be the partitions the equalities compare: left, refused)
        exists.meta.setdefault(WRITTEN_AS, exists.copy())  # (what a refusal names: the user's EXISTS)
        exists.set("this", _over_groups(exists.this, n, keys, filters, outer_tests))
    return tree


def _correlation(query: exp.Expression) -> tuple[list, list, list] | None:
    """(keys, filters, outer tests) of a correlated SELECT that groups by plain keys, read by the rewrite (the
    module docstring: ``correlation.where_correlation``); None for any other."""
    if not isinstance(query, exp.Select) or not is_correlated(query) or reaches_past_itself(query):
        return None
    group = query.args.get("group")
    if group is None or not group.expressions or not plain_keys(group):
        return None  # (``GROUP BY ()``, a ROLLUP: a group over no rows too, which no outer row without rows finds)
    if any(query.args.get(k) for k in ("distinct", "qualify", "windows", "limit", "offset", "fetch", "with_",
                                       "laterals")) or query.find(exp.Window) is not None \
            or random_call(query) is not None or returns_rows_per_row(query):
        return None  # (a set-returning call: a group of an empty list gives no row, and the SELECT list goes)
    order = query.args.get("order")
    if order is not None and not all(order_key_cannot_raise(o.this, query) for o in order.expressions):
        return None  # (the ORDER BY goes: a key that could raise the engine's error stays, refused)
    outer = outer_columns(query)
    keys, filters, outer_tests, others = where_correlation(query, {id(c) for c in outer})
    return None if others or not read_in_where_only(query, outer) else (keys, filters, outer_tests)


def _over_groups(query: exp.Select, n: int, keys: list, filters: list, outer_tests: list) -> exp.Select:
    """The EXISTS's new query (the module docstring), its groups built from ``query`` in place."""
    alias = f"_dl_groups{n}"
    inner = [k for k, _ in keys]
    query.set("expressions", [exp.alias_(k.copy(), f"_dl_ek{i}", quoted=True) for i, k in enumerate(inner, 1)]
              or [exp.alias_(exp.Literal.number(1), "_dl_one", quoted=True)])
    query.set("where", exp.Where(this=exp.and_(*filters, copy=False)) if filters else None)
    query.set("order", None)
    query.args["group"].set("expressions", list(query.args["group"].expressions) + [k.copy() for k in inner])
    over = exp.select(exp.alias_(exp.Literal.number(1), "_dl_one", quoted=True))
    over.set("from_", exp.From(this=exp.Subquery(this=query, alias=exp.TableAlias(
        this=exp.to_identifier(alias, quoted=True)))))
    tests = [exp.EQ(this=exp.column(f"_dl_ek{i}", table=alias, quoted=True), expression=outer_side.copy())
             for i, (_, outer_side) in enumerate(keys, 1)] + [t.copy() for t in outer_tests]
    over.set("where", exp.Where(this=exp.and_(*tests, copy=False)))
    return over
