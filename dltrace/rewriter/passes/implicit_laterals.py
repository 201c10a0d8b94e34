"""A derived table that reads a FROM item before it is a LATERAL one, on an engine that reads it so (DuckDB).

DuckDB takes ``FROM t, (SELECT u.c FROM u WHERE u.a = t.a) AS x`` as ``FROM t, LATERAL (...) AS x``: a subquery in
FROM may read the items before it without the keyword. sqlglot's qualification does not, and failed with "Column
'a' could not be resolved for table: 't'", naming a column the table has. So, before qualification, such a derived
table is written with LATERAL and taken by ``passes/lateral_joins.py`` (or refused there, naming it).

Valid: the engine binds the column to the FROM item before the subquery, which is what a LATERAL reads (the
nearest scope first: a FROM item of the SELECT the subquery is in comes before a query outside it). Found by the
qualifier of the column (``t.a``): one without a qualifier cannot be told from the subquery's own before
qualification, and still fails as before. Only where the engine reads implicit laterals
(``LineageFunctions.implicit_lateral``); elsewhere the engine's own error stays.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import outer_columns
from dltrace.rewriter.shape import from_items, names_of


def implicit_laterals(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not context.fns.implicit_lateral or not list(_implicit(expression)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for derived in list(_implicit(tree)):
        derived.replace(exp.Lateral(this=exp.Subquery(this=derived.this), alias=derived.args["alias"]))
    return tree


def _implicit(tree: exp.Expression):
    """Each derived table joined to a SELECT that reads, by qualified name, a FROM item before it."""
    for select in tree.find_all(exp.Select):
        items = from_items(select)
        for i, join in enumerate(select.args.get("joins") or [], 1):
            derived = join.this
            if not isinstance(derived, exp.Subquery) or derived.args.get("alias") is None \
                    or not isinstance(derived.this, exp.Query):
                continue
            before = set(names_of(items[:i]))
            if any(c.table.lower() in before for c in outer_columns(derived.this)):  # (names fold case there)
                yield derived
