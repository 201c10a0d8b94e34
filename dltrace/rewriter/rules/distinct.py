"""DISTINCT: the row's lineage is the DLUNION of the duplicates merged into it.

Rewritten as a GROUP BY over every output column of the query, wrapped around it (ORDER BY and LIMIT move
to the wrapper, since they apply after duplicates are removed)."""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.slots import Exported

_AFTER = ("order", "limit", "offset", "fetch")


def user_columns(query: exp.Query, exported: list[Exported]) -> list[str]:
    names = {e.name for e in exported}
    cols = [n for n in query.named_selects if n not in names]
    if len(set(cols)) != len(cols) or any(not c for c in cols):
        raise UnsupportedQuery(f"duplicate or unnamed output columns under DISTINCT/set operation, at {position(query)}")
    return cols


def group_all(inner: exp.Query, exported: list[Exported], holder: str) -> exp.Select:
    """``SELECT cols FROM (inner) AS holder GROUP BY cols``, taking ORDER BY/LIMIT from ``inner``."""
    cols = user_columns(inner, exported)
    after = {k: inner.args.get(k) for k in _AFTER if inner.args.get(k) is not None}
    for k in after:
        inner.set(k, None)
    outer = exp.select(*[exp.column(c, table=holder, quoted=True).as_(c, quoted=True) for c in cols])
    outer = outer.from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(holder))))
    if cols:
        outer = outer.group_by(*[exp.column(c, table=holder, quoted=True) for c in cols])
    for k, v in after.items():
        outer.set(k, requalify_order(v, cols, holder) if k == "order" else v)
    return outer


def requalify_order(order: exp.Order, cols: list[str], holder: str) -> exp.Order:
    """``order`` (moved onto a wrapper of the query it ordered) reading its qualified columns from ``holder``,
    where only the output columns ``cols`` are."""
    for o in order.find_all(exp.Column):
        if o.table:
            if o.name not in cols:
                raise UnsupportedQuery(f"ORDER BY {o.sql()} is not an output column of a DISTINCT query, at "
                                       f"{position(o)}")
            o.set("table", exp.to_identifier(holder))
    return order
