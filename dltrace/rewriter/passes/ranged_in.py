"""A one-value ``x IN (S)`` correlated by more than equalities, as a filter, is read as an EXISTS of a matching row.

"A salary a colleague of the same department earns": ``WHERE e.salary IN (SELECT x.salary FROM emp AS x WHERE
x.dept = e.dept AND x.id <> e.id)`` was refused ("could not be decorrelated"): sqlglot decorrelates an IN only where
its subquery reads the outer row through equalities, where the same test written as an EXISTS runs (an EXISTS
correlated by an equality and a range is read by the lineage rules). As a positive filter of a WHERE (through AND,
OR and parentheses: NULL and FALSE both drop the row), the IN keeps the rows that::

    EXISTS (SELECT 1 FROM <S's FROM> WHERE <S's WHERE> AND x.salary = e.salary)

keeps, and the EXISTS's witnesses are the IN's: the rows of S (for this outer row) comparing TRUE (docs/design.md,
"Semantics"). Taken only where S is plain rows of its FROM with a column as its item (nothing moved into the WHERE
can raise an error of its own for a row S's WHERE drops), ``x`` reads the outer row's own columns alone, holds no
subquery or random draw and names no table S names (which would bind it there), and S's WHERE reads the outer row
otherwise than by equalities of a column of each (an IN correlated by equalities alone is decorrelated as it is).
Witness semantics only: the control lineage of an IN is all of S's rows for the outer row, the EXISTS's only those
matching ``x``.

Runs after ``quantified_types``: an IN over DECIMALs whose digits together pass 38 is compared in its common type
there, the cast written on both sides (then no column is S's item, and the IN is left as it was), which an ``=``
would not do.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import is_correlated, outer_columns, positive_filter, where_correlation
from dltrace.rewriter.passes.decorrelatable import WRITTEN_AS
from dltrace.rewriter.passes.row_in_subqueries import filter_clause, movable, plain_rows, rows_matching
from dltrace.rewriter.shape import from_items, random_call


def ranged_in(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if context.control or not any(_ranged(i) for i in expression.find_all(exp.In)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for holder in [i for i in tree.find_all(exp.In) if _ranged(i)]:
        holder.replace(_matching_row_exists(holder))
    return tree


def _ranged(holder: exp.In) -> bool:
    """Is ``holder`` an IN the module docstring reads as an EXISTS?"""
    query = holder.args.get("query")
    query = query.this if isinstance(query, exp.Subquery) else query
    if isinstance(holder.this, exp.Tuple) or not isinstance(query, exp.Select) or not positive_filter(holder) \
            or not isinstance(filter_clause(holder), exp.Where) or not is_correlated(query) \
            or not plain_rows(query) or len(query.expressions) != 1:
        return False
    owner = holder.find_ancestor(exp.Select)
    own = {item.alias_or_name.lower() for item in from_items(owner)} if owner is not None else set()
    if any(not c.table or c.table.lower() not in own for c in holder.this.find_all(exp.Column)) \
            or random_call(holder.this) is not None or not movable(exp.Tuple(expressions=[holder.this.copy()]), query):
        return False
    others = where_correlation(query, {id(c) for c in outer_columns(query)})[3]
    return bool(others)  # (a conjunct reading both sides other than an equality of a column of each)


def _matching_row_exists(holder: exp.In) -> exp.Exists:
    query = holder.args["query"]
    exists = exp.Exists(this=rows_matching(query.this if isinstance(query, exp.Subquery) else query, [holder.this]))
    exists.meta[WRITTEN_AS] = query.copy()  # (what a refusal names: the user's subquery)
    return exists
