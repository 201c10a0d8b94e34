"""An OR in a correlated subquery's WHERE that does not read the outer row, written without OR (De Morgan).

``EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND (u.status = 'open' OR u.qty > 2))`` was refused ("could not be
decorrelated", with no reason): sqlglot 30.30 does not decorrelate a subquery whose WHERE holds an OR anywhere
(``unnest_subqueries.decorrelate``: ``where.find(exp.Or)``), though only the correlation needs to be AND-ed. Each
such OR is written ``NOT (NOT a AND NOT b)``, which sqlglot decorrelates, leaving it in the subquery's own filter.

Valid anywhere in an expression: De Morgan's law holds in SQL's three-valued (Kleene) logic -- ``NOT (a OR b)`` is
``NOT a AND NOT b`` for TRUE, FALSE and NULL alike -- so the test gives each row the same truth value and keeps the
same rows, and with them the same witnesses. An OR that reads the outer row stays as written: split by
``passes/or_correlations.py`` where that is exact, refused otherwise ("correlated under OR"). Applied just before
decorrelation, to the WHERE of every correlated subquery (its nested queries' ORs too, which sqlglot's test finds).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import outer_columns


def uncorrelated_ors(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not any(_plain_ors(s) for s in expression.find_all(exp.Select)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for select in list(tree.find_all(exp.Select)):
        # (innermost first within a WHERE: an OR inside another's side is rewritten before the outer one moves)
        for node in reversed(_plain_ors(select)):
            node.replace(exp.paren(exp.not_(exp.and_(*[exp.not_(exp.paren(d.unnest().copy(), copy=False),
                                                                copy=False)
                                                        for d in node.flatten()], copy=False), copy=False),
                                   copy=False))
    return tree


def _plain_ors(select: exp.Select) -> list[exp.Or]:
    """The ORs of a correlated SELECT's WHERE (of its nested queries too) that read none of its outer columns."""
    where = select.args.get("where")
    if where is None or where.find(exp.Or) is None:
        return []
    outer = {id(c) for c in outer_columns(select)}
    if not outer:
        return []
    return [o for o in where.find_all(exp.Or) if not isinstance(o.parent, exp.Or)
            and not outer & {id(c) for c in o.find_all(exp.Column)}]
