"""A ``ROW(a, b)`` compared with a subquery, written as the row value ``(a, b)``.

DuckDB reads ``ROW(k, d) IN (SELECT k, w FROM u)`` (and ``ROW(k, d) = ANY (...)``, ``<> ALL``) as ``(k, d) IN
(...)``: both are the same unnamed ``TUPLE`` value, compared field by field with the subquery's columns. sqlglot
reads ``ROW(...)`` as an unknown function, so the rules for a row value compared with a subquery
(:mod:`.row_in_subqueries`) did not see one, and the rewrite compared the call with the subquery's first column
(DuckDB: "Unimplemented type for cast (BIGINT -> TUPLE(BIGINT, BIGINT))", where it answers the query).

Valid when the call has two or more arguments and the subquery as many output columns (no star): then the
comparison is the row value's. Left alone otherwise: ``ROW(k) IN (SELECT c ...)`` may compare a one-field
``TUPLE`` with a column that is one (``SELECT ROW(k)``), and its one column's type is not known here.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext


def row_constructors(expression: exp.Expression, context: PassContext | None = None,
                     copy: bool = True) -> exp.Expression:
    if not any(_compared_with_a_subquery(c) for c in expression.find_all(exp.Anonymous)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for call in [c for c in tree.find_all(exp.Anonymous) if _compared_with_a_subquery(c)]:
        call.replace(exp.Tuple(expressions=[a.pop() for a in list(call.expressions)]))
    return tree


def _compared_with_a_subquery(call: exp.Anonymous) -> bool:
    """Is ``call`` a ``ROW(...)`` of two or more values, the left operand of an IN or ANY / ALL comparison with a
    subquery of as many output columns?"""
    if call.name.upper() != "ROW" or len(call.expressions) < 2 or call.arg_key != "this":
        return False
    parent = call.parent
    if isinstance(parent, exp.In):
        query = parent.args.get("query")
    elif isinstance(parent, exp.Binary) and isinstance(parent.expression, (exp.Any, exp.All)):
        query = parent.expression.this
    else:
        return False
    query = query.this if isinstance(query, exp.Subquery) else query
    if not isinstance(query, exp.Query) or any(isinstance(e, exp.Star) or isinstance(e, exp.Column) and
                                               isinstance(e.this, exp.Star) for e in query.selects):
        return False
    return len(query.selects) == len(call.expressions)
