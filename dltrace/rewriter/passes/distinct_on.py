"""``SELECT DISTINCT ON (k) ... ORDER BY o`` -> ``SELECT ... QUALIFY row_number() OVER (PARTITION BY k ORDER BY o) = 1
ORDER BY o``.

DISTINCT ON keeps, for each value of the keys, the first row in the query's ORDER BY (any one without it). The
window numbers the rows of each key value in that order and QUALIFY keeps the first: the same rows, and a row's
lineage is that of the one row it is (the QUALIFY rules: a window over the SELECT's rows). Among rows tied in the
ORDER BY both pick any one, as the engine does. The ORDER BY, LIMIT and OFFSET stay as written (they apply after
QUALIFY as after DISTINCT ON).

Valid when the window reads the keys and the order as DISTINCT ON does: a position (``DISTINCT ON (1)``, ``ORDER
BY 2``) is replaced by the SELECT's expression there; a name that is an output alias of another expression is
refused (DISTINCT ON reads it as the alias, a window as the input column), as is a SELECT that has a QUALIFY
already (DISTINCT ON applies after it; the window would number rows it removes) or a star with a position.
``ORDER BY ALL`` orders by every output column: the window's order is their positions, read as above.
Applied before qualification, which then resolves the window's names as the SELECT's own.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.order_by import every_column, is_order_by_all


def distinct_on(expression: exp.Expression, context: PassContext | None = None,
                copy: bool = True) -> exp.Expression:
    if not any(_keys(s) for s in expression.find_all(exp.Select)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for select in list(tree.find_all(exp.Select)):
        keys = _keys(select)
        if not keys:
            continue
        if select.args.get("qualify") is not None:
            raise UnsupportedQuery(f"DISTINCT ON with a QUALIFY is not supported, at {position(select)}")
        partition = [_as_written(k, select, "DISTINCT ON") for k in keys]
        order = select.args.get("order")
        order_keys = order.expressions if order is not None else []
        if is_order_by_all(order):  # every output column (DuckDB refuses ALL in a window): by position, read below
            if select.is_star:
                raise UnsupportedQuery(f"ORDER BY ALL over a star with DISTINCT ON is not supported (name the "
                                       f"columns), at {position(order)}")
            order_keys = every_column(order, len(select.expressions))
        ordered = []
        for item in order_keys:
            copy_ = item.copy()
            copy_.set("this", _as_written(item.this, select, "ORDER BY"))
            ordered.append(copy_)
        window = exp.Window(this=exp.RowNumber(), partition_by=partition,
                            order=exp.Order(expressions=ordered) if ordered else None, over="OVER")
        select.set("distinct", None)
        select.set("qualify", exp.Qualify(this=exp.EQ(this=window, expression=exp.Literal.number(1))))
    return tree


def _keys(select: exp.Select) -> list[exp.Expression]:
    distinct = select.args.get("distinct")
    on = distinct.args.get("on") if isinstance(distinct, exp.Distinct) else None
    if on is None:
        return []
    return list(on.expressions) if isinstance(on, exp.Tuple) else [on]


def _as_written(node: exp.Expression, select: exp.Select, clause: str) -> exp.Expression:
    """``node`` (a key or an order expression) as the window must read it: the SELECT's expression for a position."""
    items = select.expressions
    if isinstance(node, exp.Literal) and node.is_int:
        i = int(node.name)
        if not 1 <= i <= len(items) or select.is_star:
            raise UnsupportedQuery(f"{clause} position {i} with DISTINCT ON is not supported here (name the "
                                   f"expression), at {position(node)}")
        return items[i - 1].unalias().copy()
    for column in [node] if isinstance(node, exp.Column) else node.find_all(exp.Column):
        if column.table:
            continue
        for item in items:
            if isinstance(item, exp.Alias) and item.alias.lower() == column.name.lower() and not (
                    isinstance(item.this, exp.Column) and item.this.name.lower() == column.name.lower()):
                raise UnsupportedQuery(f"{clause} {column.name!r} with DISTINCT ON names the output alias of an "
                                       f"expression (write the expression), at {position(column)}")
    return node.copy()
