"""Decorrelate subqueries (sqlglot's unnest_subqueries), keeping what lineage needs to know about them.

Marks each subquery that decorrelation turned into a join (``meta[DECORRELATED]``), and keeps a copy of every
uncorrelated WHERE/HAVING subquery on its SELECT (``meta[PREDICATE_SUBQUERIES]``): control lineage needs all
of their rows, and decorrelation rewrites IN into a join that keeps only the matching ones.

Valid where sqlglot's rewrite is: a top-level conjunct of WHERE (IN, EXISTS, scalar comparisons) becomes a
join whose NULL and FALSE both drop the row.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import traverse_scope
from sqlglot.optimizer.unnest_subqueries import unnest_subqueries

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.passes.context import PassContext

DECORRELATED = "dl_decorrelated"  # meta key of a subquery that decorrelation made a FROM/JOIN item
PREDICATE_SUBQUERIES = "dl_predicate_subqueries"  # meta key: copies of a SELECT's WHERE/HAVING subqueries


def decorrelate(expression: exp.Expression, context: PassContext) -> exp.Expression:
    tree = expression.copy()
    _remember_predicate_subqueries(tree)
    before = {id(s) for s in tree.find_all(exp.Subquery)}
    try:
        tree = unnest_subqueries(tree)
    except SqlglotError as e:
        raise UnsupportedQuery(f"cannot decorrelate the query: {str(e).splitlines()[0]}") from None
    for sub in tree.find_all(exp.Subquery):
        if id(sub) not in before and isinstance(sub.parent, (exp.Join, exp.From)):
            sub.meta[DECORRELATED] = True
    return tree


def _remember_predicate_subqueries(tree: exp.Expression) -> None:
    for scope in traverse_scope(tree):
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        copies = []
        for sub_scope in scope.subquery_scopes:
            node = sub_scope.expression
            if _enclosing_clause(node, select) in ("where", "having") and not sub_scope.is_correlated_subquery:
                copies.append(node.copy())
        if copies:
            select.meta[PREDICATE_SUBQUERIES] = copies


def _enclosing_clause(node: exp.Expression, select: exp.Select) -> str | None:
    child, parent = node, node.parent
    while parent is not None and parent is not select:
        child, parent = parent, parent.parent
    return None if parent is None else child.arg_key
