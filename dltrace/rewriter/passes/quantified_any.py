"""A correlated ``x op ANY (subquery)`` filtering a WHERE, read as an EXISTS of a row that makes it hold.

sqlglot decorrelates ``= ANY`` as an IN, and no other comparison: ``t.d < ANY (SELECT u.d FROM u WHERE u.k = t.k)``
was kept in place, and refused as a correlated subquery that could not be decorrelated, while the same ALL ran
(:mod:`quantified_all`). In a top-level, positive WHERE conjunct -- where NULL and FALSE both drop the row -- it is
written as::

    t.d < ANY (SELECT u.d FROM u WHERE u.k = t.k)
    ->  EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND t.d < u.d)

Valid (same rows) because ``x op ANY (S)`` is TRUE exactly when some row of S makes ``x op y`` TRUE (over no rows,
or with no TRUE comparison, FALSE or NULL: the row is dropped either way). Same lineage: the witnesses of an ANY are
the rows of S whose comparison holds, which are the rows the EXISTS finds. Witness semantics only: control lineage
gives the outer row every row of S, where the EXISTS has only those that hold. ``x`` moves into the subquery, so it may
not read a name the subquery binds itself, a subquery, an aggregate or a window. Taken, as for ALL, when the
subquery is a correlated SELECT with a FROM and one deterministic projection, without aggregates, windows, GROUP BY,
HAVING, DISTINCT, QUALIFY, LIMIT, OFFSET, FETCH or a nested query (an ORDER BY alone is dropped), and for every
comparison but ``=`` (an IN, which sqlglot takes); elsewhere the ANY is left as it is.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.correlation import movable_quantified
from dltrace.rewriter.passes.decorrelatable import over_the_same_rows


def read_any_as_exists(tree: exp.Expression) -> None:
    """Rewrite, in place, every ANY the module docstring describes."""
    for comparison, query in movable_quantified(tree, exp.Any):
        if comparison.key == "eq":
            continue  # (an IN, which sqlglot takes)
        value = query.expressions[0].unalias()
        holds = type(comparison)(this=comparison.this.copy(), expression=value.copy())
        witness = over_the_same_rows(query, exp.Literal.number(1), "_dl_one")
        witness.where(holds, copy=False)  # (a WHERE drops a NULL comparison as a FALSE one)
        comparison.replace(exp.Exists(this=witness))
