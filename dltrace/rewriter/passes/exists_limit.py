"""A ``LIMIT n`` (n >= 1) directly inside an EXISTS, without ORDER BY or OFFSET, is dropped.

``WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k LIMIT 1)`` is a common idiom ("stop at the first match"); sqlglot
does not decorrelate a subquery with a LIMIT, so it was refused ("could not be decorrelated (EXISTS)").

Valid: EXISTS asks only whether the subquery gives a row, and a LIMIT of at least one row keeps a row exactly
when there is one, whatever the subquery (a grouping, DISTINCT, QUALIFY and the rest are evaluated before the
LIMIT); NOT EXISTS alike. Lineage: a LIMIT without ORDER BY keeps rows the engine chooses among rows that are all
tied, which dltrace reads as the pool of the tied rows (docs/design.md, "Semantics"): every row the subquery gives
-- the witnesses of the EXISTS without the LIMIT. Not with an ORDER BY (the pool is then the rows tied at the
cut, not all of them), an OFFSET (which may leave no row), a percentage or WITH TIES, or a count that is not a
constant integer.

An ORDER BY inside EXISTS without a LIMIT or OFFSET orders nothing EXISTS reads, and the rewrites drop it; a key
that could raise an error of its own (``CAST('z' || u.d AS INT)``, a subquery of two rows: not a column, a position
or an expression of the SELECT list) would then lose the engine's error, so it is refused, naming it.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.shape import order_key_cannot_raise


def exists_limit(expression: exp.Expression, context: PassContext | None = None, copy: bool = True) -> exp.Expression:
    for exists in expression.find_all(exp.Exists):
        _check_order(exists.this)
    if not any(_droppable(e.this) for e in expression.find_all(exp.Exists)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for exists in tree.find_all(exp.Exists):
        if _droppable(exists.this):
            exists.this.set("limit", None)
    return tree


def _check_order(query: exp.Expression) -> None:
    """Refuse an ORDER BY without LIMIT or OFFSET whose key could raise an error of its own (see the module)."""
    order = query.args.get("order") if isinstance(query, exp.Select) else None
    if order is None or any(query.args.get(k) for k in ("limit", "offset", "fetch")):
        return
    for ordered in order.expressions:
        if not order_key_cannot_raise(ordered.this, query):
            raise UnsupportedQuery(f"an ORDER BY key inside EXISTS that is not a column or an output column (the "
                                   f"engine evaluates it, and may raise an error) is not supported, at "
                                   f"{position(ordered)}")


def _droppable(query: exp.Expression) -> bool:
    """Is ``query`` a SELECT whose only cut is a LIMIT / FETCH of a constant count of at least one row?"""
    if not isinstance(query, exp.Select) or query.args.get("offset") is not None \
            or query.args.get("order") is not None:
        return False
    return keeps_a_row(query.args.get("limit"))


def keeps_a_row(limit: exp.Expression | None) -> bool:
    """Is ``limit`` a LIMIT / FETCH of a constant count of at least one row (no percentage, WITH TIES or offset of
    its own)?"""
    if isinstance(limit, exp.Limit) and limit.args.get("offset") is None:
        count = limit.expression
    elif isinstance(limit, exp.Fetch):
        count = limit.args.get("count")
    else:
        return False
    options = limit.args.get("limit_options")
    if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
        return False
    return isinstance(count, exp.Literal) and not count.is_string and count.is_int and int(count.this) >= 1
