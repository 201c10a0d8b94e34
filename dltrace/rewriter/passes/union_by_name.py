"""``A UNION [ALL] BY NAME B`` -> a positional union of both sides projected onto the same named columns.

BY NAME matches columns by name (case-insensitively), not position: the result has A's columns in A's order,
then B's columns A lacks; a side that lacks a column gives NULL there (DuckDB's semantics). Every rule after
this pass aligns set operations by position, so each side is wrapped in ``SELECT <the result's columns> FROM
(side)``, NULL for a missing one. Valid for every BY NAME set operation once stars are expanded (after
qualification): the wrapper only reorders and pads columns, so rows and their lineage are the side's own.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext


def union_by_name(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not any(n.args.get("by_name") for n in expression.find_all(exp.SetOperation)):
        return expression  # nothing to rebuild: no copy
    tree = exp.maybe_copy(expression, copy)
    counter = [0]
    # innermost first, so that a BY NAME side is already positional when its parent is rebuilt
    for node in reversed(list(tree.find_all(exp.SetOperation))):
        if not node.args.get("by_name"):
            continue
        left, right = _names(node.left), _names(node.right)
        lower = {n.lower() for n in left}
        result = left + [n for n in right if n.lower() not in lower]
        node.set("this", _project(node.left, result, counter))
        node.set("expression", _project(node.right, result, counter))
        node.set("by_name", None)
    return tree


def _names(query: exp.Expression) -> list[str]:
    while isinstance(query, exp.Subquery):
        query = query.this
    if isinstance(query, exp.SetOperation):
        return _names(query.left)
    return list(query.named_selects)


def _project(side: exp.Expression, result: list[str], counter: list[int]) -> exp.Select:
    counter[0] += 1
    holder = f"_dl_bn{counter[0]}"
    own = {n.lower(): n for n in _names(side)}
    columns = [
        exp.alias_(exp.column(own[name.lower()], table=holder, quoted=True), name, quoted=True)
        if name.lower() in own else exp.alias_(exp.Null(), name, quoted=True)
        for name in result
    ]
    query = side.this if isinstance(side, exp.Subquery) and not side.alias else side
    return exp.select(*columns).from_(exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(holder))))
