"""An EXISTS over a UNION [ALL] of correlated branches is read as the OR of one EXISTS per branch.

"A product sold or returned": ``EXISTS (SELECT 1 FROM sales AS s WHERE s.pid = p.pid UNION ALL SELECT 1 FROM rets
AS r WHERE r.pid = p.pid)`` was refused: sqlglot decorrelates no set operation, and the refusal spoke of a
correlation "two levels up", which the query does not have. A union has a row exactly when one of its branches does,
so ``EXISTS (A UNION [ALL] B)`` is ``EXISTS (A) OR EXISTS (B)`` (two-valued: an EXISTS is never NULL, and under NOT
too), each read as any correlated EXISTS is. Its witnesses are the union's rows for the outer row, every branch's
rows (a UNION merging two equal rows has both rows' lineage), which are the two EXISTS's rows together; the control
lineage of an EXISTS is its rows as well. Taken where the union has no ORDER BY, LIMIT, OFFSET or WITH of its own
(a LIMIT may cut a branch's rows) and reads the outer row (an uncorrelated one runs as it is); nested unions split
in turn. INTERSECT and EXCEPT are left as they are (their rows are no union of the branches').
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import is_correlated


def exists_unions(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not any(_union_of(e) is not None for e in expression.find_all(exp.Exists)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    while (found := next((e for e in tree.find_all(exp.Exists) if _union_of(e) is not None), None)) is not None:
        union = _union_of(found)
        found.replace(exp.Paren(this=exp.Or(this=exp.Exists(this=_branch(union.this)),
                                            expression=exp.Exists(this=_branch(union.expression)))))
    return tree


def _union_of(exists: exp.Exists) -> exp.Union | None:
    """The correlated UNION [ALL] ``exists`` tests, without clauses of its own, or None."""
    query = exists.this
    while isinstance(query, exp.Subquery) and not query.alias:
        query = query.this
    if not isinstance(query, exp.Union) or not is_correlated(query) \
            or any(query.args.get(k) is not None for k in ("order", "limit", "offset", "fetch", "with_")):
        return None
    return query


def _branch(query: exp.Expression) -> exp.Expression:
    while isinstance(query, exp.Subquery) and not query.alias and not any(
            query.args.get(k) is not None for k in ("order", "limit", "offset")):
        query = query.this
    return query.copy()
