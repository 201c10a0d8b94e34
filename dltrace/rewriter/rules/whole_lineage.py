"""Whole lineage: a cheaper query with the same union of its rows' lineage, where only that union is read.

An uncorrelated subquery left in a clause contributes its *whole* lineage, the union over all of its rows
(:func:`.subqueries.hoist`, :func:`.subqueries.lineage_join`); nothing reads its values there. Two facts let
that union be computed from fewer, larger rows:

* **An aggregate's groups partition its input rows** (a group's lineage is the union of its rows', and every
  input row is in some group): the union over the groups is the union over the input rows. So
  ``SELECT k, sum(v) FROM t WHERE p GROUP BY k`` -> ``SELECT 1 FROM t WHERE p`` (no list per group). A global
  aggregate over zero rows has one row with empty lineage: the same empty union.
* **A SELECT that keeps every row of its one FROM item** (no WHERE, join, LIMIT, aggregate or window) has the
  union of that item's rows: ``SELECT max(c) FROM (<q>)`` -> ``<q>``, and a CTE reference reads its definition.

TPC-H Q15's ``(SELECT max(total_revenue) FROM revenue0)`` becomes ``SELECT 1 FROM lineitem WHERE <the view's
filter>``: one list of the view's rows instead of a list per supplier flattened again.

Valid when the query is one SELECT (no set operation) with, at each step:
- no HAVING, QUALIFY, window, LIMIT, OFFSET or FETCH (they drop groups or rows); DISTINCT and ORDER BY are
  dropped (DISTINCT merges rows' lineage, the union is unchanged);
- no subquery anywhere but the FROM item being inlined (a clause subquery brings lineage of its own, per group
  or per row; a decorrelated one is a join dltrace made, with its own lineage rule);
- a FROM item inlined is a derived table the user wrote (not one of dltrace's: LINEAGE ON's dictionary, a
  semi-join reduction) or a CTE that is not recursive and reads tables no CTE of the query is named after (its
  text means the same where it is inlined), and no TABLESAMPLE.
Anything else keeps the query as it is.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.parse import marked_by_passes
from dltrace.rewriter.shape import is_aggregate

_ROW_DROPPING = ("having", "qualify", "limit", "offset", "fetch", "windows", "connect", "prewhere", "sample")


def whole_lineage_query(query: exp.Expression, cte_bodies: dict[str, exp.Expression],
                        cte_names: set[str]) -> exp.Expression:
    """``query`` (not modified), or a cheaper query whose rows' lineage has the same union (see the module).

    ``cte_bodies``: the CTEs visible where ``query`` is written (name -> its query as written, before
    instrumenting); ``cte_names``: the names of every CTE of the whole query, lower case."""
    current, saved = query, False
    while isinstance(current, exp.Select) and plain(current):
        if is_aggregate(current) or current.args.get("distinct") or current.args.get("order"):
            # fewer rows' lineage to build only when there are groups (a global aggregate is one row already)
            saved = saved or bool(current.args.get("group") or current.args.get("distinct"))
            current = _rows_of(current)
            continue
        inner = _inlined_source(current, cte_bodies, cte_names)
        if inner is None:
            break
        current, saved = inner, True
    return current if saved else query


def plain(select: exp.Select) -> bool:
    """No clause that drops rows or groups, and no subquery beside a FROM item."""
    if any(select.args.get(k) for k in _ROW_DROPPING) or select.find(exp.Window):
        return False
    for key, value in select.args.items():
        if key in ("from_", "with_"):
            continue
        for node in value if isinstance(value, list) else [value]:
            if isinstance(node, exp.Expression) and node.find(exp.Select, exp.Subquery, exp.Exists):
                return False
    if select.args.get("with_"):
        return False
    from_ = select.args.get("from_")
    return from_ is None or not from_.this.find(exp.Exists) and not _nested_select(from_.this)


def _nested_select(item: exp.Expression) -> bool:
    """Is there a SELECT inside ``item`` other than a derived table's own query?"""
    body = item.this if isinstance(item, exp.Subquery) else item
    selects = list(body.find_all(exp.Select, exp.Subquery))
    return any(s is not body for s in selects)


def _rows_of(select: exp.Select) -> exp.Select:
    """The SELECT's input rows: FROM, joins and WHERE as written, one constant column."""
    rows = exp.select(exp.alias_(exp.Literal.number(1), "_dl_one", quoted=True))
    for key in ("from_", "joins", "where"):
        value = select.args.get(key)
        if value:
            rows.set(key, [j.copy() for j in value] if isinstance(value, list) else value.copy())
    return rows


def _inlined_source(select: exp.Select, cte_bodies: dict[str, exp.Expression],
                    cte_names: set[str]) -> exp.Expression | None:
    """The query of ``select``'s one FROM item when ``select`` keeps all of its rows, else None."""
    from_ = select.args.get("from_")
    if from_ is None or select.args.get("joins") or select.args.get("where"):
        return None
    item = from_.this
    if isinstance(item, exp.Subquery):
        if marked_by_passes(item) or not isinstance(item.this, exp.Select) or item.args.get("sample"):
            return None  # (a subquery of dltrace's carries meta: LINEAGE ON's dictionary, a key list)
        return item.this.copy()
    if not isinstance(item, exp.Table) or item.args.get("db") or item.args.get("sample"):
        return None
    body = cte_bodies.get(item.name)
    if body is None or not isinstance(body, exp.Select) or body.args.get("with_"):
        return None
    if any(t.name.lower() in cte_names for t in body.find_all(exp.Table)):
        return None  # reads another CTE (or a table a CTE shadows somewhere): its meaning depends on the scope
    return body.copy()
