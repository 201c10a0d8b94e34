"""A correlated scalar subquery in an inner join's ON moves to its SELECT's WHERE.

``FROM t JOIN u ON u.k = t.k AND u.w > (SELECT avg(v.w) FROM v WHERE v.k = u.k)`` was refused: decorrelation
reads a scalar subquery in WHERE (or a SELECT list), not in a join's condition. An inner join's ON conjunct is a
filter of the rows the join gives, which the WHERE applies as well, so the conjunct holding the subquery is written
there (``... ON u.k = t.k WHERE u.w > (SELECT ...)``), and decorrelated and traced like any WHERE subquery.

Valid for an inner, CROSS or comma join with an ON (not a LEFT, RIGHT or FULL one, whose ON keeps unmatched rows
padded, nor ASOF / POSITIONAL) followed by no RIGHT or FULL join (which would pad the rows the ON had dropped) and
no POSITIONAL join (which pairs rows by their place, the dropped rows' places counted): the
conjunct reads the tables up to the join alone, so a later inner or LEFT join repeats or pads a row without
changing its value, and the WHERE drops exactly the rows the ON dropped. The same rows pass, with the same
witnesses of the subquery (witness and control semantics alike). A conjunct holding no correlated scalar
subquery stays where it is (EXISTS and IN there are decorrelated in place). Applied after qualification, before
decorrelation.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import is_correlated
from dltrace.rewriter.shape import conjuncts, own_subqueries


def inner_join_lookups(expression: exp.Expression, context: PassContext | None = None,
                       copy: bool = True) -> exp.Expression:
    if not any(_movable(select, join) for select in expression.find_all(exp.Select)
               for join in select.args.get("joins") or []):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for select in list(tree.find_all(exp.Select)):
        for join in select.args.get("joins") or []:
            moved = _movable(select, join)
            if not moved:
                continue
            kept = [c for c in conjuncts(join.args["on"]) if not any(c is m for m in moved)]
            join.set("on", exp.and_(*[c.copy() for c in kept]) if kept else exp.true())
            select.where(*[exp.paren(m.copy(), copy=False) for m in moved], copy=False)
    return tree


def _movable(select: exp.Select, join: exp.Join) -> list[exp.Expression]:
    """The conjuncts of inner ``join``'s ON that hold a correlated scalar subquery, when they may move to WHERE."""
    on = join.args.get("on")
    if on is None or join.side or (join.kind or "").upper() not in ("", "INNER", "CROSS") \
            or (join.args.get("method") or "").upper() in ("ASOF", "POSITIONAL", "NATURAL"):
        return []
    joins = select.args.get("joins") or []
    at = next(i for i, j in enumerate(joins) if j is join)
    if any(later.side in ("RIGHT", "FULL") or (later.args.get("method") or "").upper() == "POSITIONAL"
           for later in joins[at + 1:]):
        return []  # (a POSITIONAL join pairs rows by their place: the ON's dropped rows count there; a review)
    return [c for c in conjuncts(on) if _holds_correlated_scalar(c)]


def _holds_correlated_scalar(conjunct: exp.Expression) -> bool:
    """Does ``conjunct`` hold, outside any nested query, a correlated subquery used as a value (not under EXISTS,
    IN, ANY or ALL)?"""
    return any(isinstance(sub, exp.Subquery) and not isinstance(sub.parent, (exp.Exists, exp.In, exp.Any, exp.All))
               and is_correlated(sub.this) for sub in own_subqueries(conjunct))
