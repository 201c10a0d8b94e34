"""A ``LIMIT n`` (n >= 1) on an aggregate without GROUP BY is dropped, with an ORDER BY of its own output.

``(SELECT max(p.price) FROM prices p WHERE p.item = t.item LIMIT 1)`` is a common habit ("one value, please"):
the aggregate gives one row anyway. sqlglot does not decorrelate a subquery with a LIMIT, so the correlated form
was refused ("it has a LIMIT or OFFSET"); the uncorrelated form ran, the same query without the LIMIT.

Valid: a SELECT that aggregates without GROUP BY gives exactly one row (none after a HAVING or QUALIFY that
fails), unless its SELECT list calls a set-returning function (``unnest(list(x))``, Spark's ``explode``: left as
it is), so a LIMIT of at least one row keeps every row it gives, and an ORDER BY has nothing to order: the same
rows, each with the lineage it had (a LIMIT's lineage rules choose among tied rows, and there is one row or none).
Not with an OFFSET other than 0 (it would remove the row), a percentage or WITH TIES, a count that is not a
constant integer, or LIMIT 0. The ORDER BY goes only where each of its keys is an output column (a position, an
output name or an expression of the SELECT list, which the engine computes anyway): a key of its own could raise
an error (a cast, a subquery of two rows) that the engine would raise, so the LIMIT then stays, as written.
Aggregates are sqlglot's aggregate functions in the SELECT list or HAVING of the SELECT itself (not a window's, not
a nested query's: ``shape.global_aggregate``); a function sqlglot does not know as an aggregate leaves the query as
it is.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.exists_limit import keeps_a_row
from dltrace.rewriter.shape import global_aggregate, returns_rows_per_row


def aggregate_limit(expression: exp.Expression, context: PassContext | None = None,
                    copy: bool = True) -> exp.Expression:
    if not any(_droppable(s) for s in expression.find_all(exp.Select)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for select in list(tree.find_all(exp.Select)):
        if _droppable(select):
            select.set("limit", None)
            select.set("offset", None)
            select.set("order", None)
    return tree


def _droppable(select: exp.Select) -> bool:
    """Does ``select`` aggregate without GROUP BY, under a LIMIT of at least one row that may go (see the module)?"""
    if select.args.get("group") is not None or not keeps_a_row(select.args.get("limit")):
        return False
    if returns_rows_per_row(select):
        return False  # (``unnest(list(x))``: an aggregate that feeds a set-returning call gives many rows)
    offset = select.args.get("offset")
    if offset is not None and not _is_int(offset.expression, 0):
        return False
    order = select.args.get("order")
    if order is not None and not all(_an_output(o.this, select) for o in order.expressions):
        return False
    return global_aggregate(select)


def _is_int(node: exp.Expression | None, value: int) -> bool:
    """Is ``node`` the integer literal ``value``?"""
    return isinstance(node, exp.Literal) and not node.is_string and node.is_int and int(node.this) == value


def _an_output(key: exp.Expression, select: exp.Select) -> bool:
    """Is the ORDER BY key a position, an output name or an expression of the SELECT list?"""
    if isinstance(key, exp.Literal) and not key.is_string and key.is_int:
        return 1 <= int(key.this) <= len(select.expressions)
    if isinstance(key, exp.Column) and not key.table and key.name in select.named_selects:
        return True
    return any(key == (e.this if isinstance(e, exp.Alias) else e) for e in select.expressions)
