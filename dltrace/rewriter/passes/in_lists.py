"""An IN list that holds a subquery is read as the OR of its comparisons.

``k IN (1, (SELECT max(k) FROM u))`` tests ``k`` against a list of values, one of them a scalar subquery: it is not
``k IN (SELECT ...)``. sqlglot's decorrelation, and the rules that read a subquery's witnesses, took any subquery
under an IN for the IN's own: the rewrite joined ``k = _u.max`` alone, and every other value of the list was lost
(``k IN (1, (SELECT max(k) FROM u))`` kept only the rows of the maximum; found by a probe). The same held for a
subquery on the IN's left (``(SELECT max(k) FROM u) IN (k, 2)``).

SQL defines ``x IN (a, b)`` as ``x = a OR x = b``, three-valued logic included (a NULL comparison and no TRUE one
give NULL; NOT IN is the negation of the whole). Written so, each subquery is a scalar subquery compared with a
value, which decorrelation and the witness rules read as such, wherever the IN is (WHERE, HAVING, ON, the SELECT
list, under NOT).

Refused against NULL (``NULL IN (1, (SELECT ...))``, a parameter left NULL) or a constant expression that may
fold to it (``NULL + 1``, ``TRY_CAST('x' AS INT)``: anything constant but a plain literal): the IN is then NULL
whatever the list holds, but DuckDB evaluates the list's subquery, and raises where a lookup finds several rows,
while it folds ``NULL = (SELECT ...)`` unevaluated (found by the long generator profile: dltrace answered no rows
where the engine raised). A form the engine cannot fold gives the subquery's witnesses to a comparison never
TRUE.

Valid when ``x`` gives the same value each time it is evaluated: it is written once per value of the list, so one
that calls a random draw is refused when the list has two values or more. (Each comparison takes the types of its
pair, as an IN list of one type does; an engine that unifies a list of mixed types before comparing -- ``k IN
('1', (SELECT ...))`` -- may compare otherwise.)
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.shape import enclosing_query, random_call


def in_lists(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not any(_holds_a_query_in_its_list(node) for node in expression.find_all(exp.In)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    # innermost first: a list inside a subquery of another list is rewritten before that subquery is copied
    for node in reversed(list(tree.find_all(exp.In))):
        if _holds_a_query_in_its_list(node):
            node.replace(_as_comparisons(node))
    return tree


def _holds_a_query_in_its_list(node: exp.In) -> bool:
    """Is ``node`` a list IN (not ``x IN (subquery)`` nor ``IN UNNEST``) with a query on either side?"""
    values = node.expressions
    return bool(values) and not node.args.get("query") and not node.args.get("unnest") and any(
        part.find(exp.Query) is not None for part in (node.this, *values))


def _as_comparisons(node: exp.In) -> exp.Expression:
    values = node.expressions
    if len(values) > 1 and (call := random_call(node.this)) is not None:
        raise UnsupportedQuery(f"an IN list holding a subquery, whose left side calls a random draw "
                               f"({call.sql()}), is not supported (it would be evaluated once per value), "
                               f"at {position(node)}")
    if _folded(node.this):
        raise UnsupportedQuery(f"an IN list holding a subquery, tested against {node.this.sql()}, is not supported: "
                               f"the engine may fold that before it runs (to NULL, making the whole IN NULL), and "
                               f"whether it still evaluates the subquery (and raises where a lookup finds several "
                               f"rows) depends on its plan; test a plain value or a column, at {position(node)}")
    comparisons = [exp.EQ(this=node.this.copy(), expression=value.copy()) for value in values]
    return exp.paren(exp.or_(*comparisons, copy=False), copy=False) if len(comparisons) > 1 else comparisons[0]


def _folded(node: exp.Expression) -> bool:
    """Is ``node`` a constant the engine folds at planning -- no column, subquery or parameter in it -- other than a
    plain value (a literal, negated, cast or in parentheses)? NULL is one, and so is what may give NULL (``NULL +
    1``, ``TRY_CAST('x' AS INT)``, ``coalesce(NULL, NULL)``; a review found those after NULL alone was refused)."""
    if any(enclosing_query(n, node) is None for n in node.find_all(exp.Null)):
        return True  # (NULL beside a column folds too: `u.x + NULL`, a review)
    if node.find(exp.Column, exp.Query, exp.Placeholder, exp.Parameter) is not None:
        return False
    while isinstance(node, (exp.Paren, exp.Neg)) or type(node) is exp.Cast:
        node = node.this
    return not isinstance(node, (exp.Literal, exp.Boolean))
