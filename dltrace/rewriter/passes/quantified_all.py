"""A correlated ``x op ALL (subquery)`` filtering a WHERE, read as a NOT EXISTS and a count of the same rows.

sqlglot decorrelates no ALL, and one kept in place that reads the outer query was refused. In a top-level,
positive WHERE conjunct -- where NULL and FALSE both drop the row -- it is written as::

    t.d > ALL (SELECT u.d FROM u WHERE u.k = t.k)
    ->  (NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND NOT (t.d > u.d) IS TRUE)
         AND NOT (SELECT COUNT(*) FROM u WHERE u.k = t.k) IS NULL)

Valid (same rows) because ``x op ALL (S)`` is TRUE exactly when no row of S makes ``x op y`` FALSE or NULL (over
no rows: TRUE, also for a NULL x), and the count is never NULL (its test is TRUE for every row). Same lineage:
an ALL that is TRUE has every row of S as its witnesses (each comparison held), which are the count's rows for
that outer row -- a scalar used as a value, whose rows are its witnesses -- while a NOT EXISTS that passes has
no rows and gives none. ``x`` moves into the subquery, so it may not read a name the subquery binds itself, a
subquery, an aggregate or a window. Taken when the subquery is a correlated SELECT with a FROM and one deterministic
projection, without aggregates, windows, GROUP BY, HAVING, DISTINCT, QUALIFY, LIMIT, OFFSET, FETCH or a nested
query (an ORDER BY alone is dropped); elsewhere (under NOT or OR, in the SELECT list, uncorrelated) the ALL is
left as it is.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.correlation import movable_quantified
from dltrace.rewriter.passes.decorrelatable import over_the_same_rows


def read_all_as_not_exists(tree: exp.Expression, written_as: str) -> None:
    """Rewrite, in place, every ALL the module docstring describes; the count and the EXISTS carry
    ``meta[written_as]``, the user's comparison, for a refusal to name."""
    for comparison, query in movable_quantified(tree, exp.All):
        users = comparison.copy()
        value = query.expressions[0].unalias()
        held = type(comparison)(this=comparison.this.copy(), expression=value.copy())
        failing = over_the_same_rows(query, exp.Literal.number(1), "_dl_one")
        failing.where(exp.Not(this=exp.Is(this=exp.paren(held), expression=exp.true())), copy=False)
        count = exp.Subquery(this=over_the_same_rows(query, exp.Count(this=exp.Star()), "_dl_rows"))
        count.meta[written_as] = users
        none_fails = exp.Not(this=exp.Exists(this=failing))
        none_fails.this.meta[written_as] = users  # (a refusal of the NOT EXISTS names the user's ALL too)
        comparison.replace(exp.paren(exp.and_(none_fails, exp.Not(this=exp.Is(this=count, expression=exp.null())))))

