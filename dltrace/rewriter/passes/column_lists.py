"""Relations whose alias lists column names, written so that qualification resolves them:

- ``FROM t AS x(a, b)`` -> ``FROM (SELECT * FROM t) AS x(a, b)``: a table read under an alias that renames its
  columns becomes a derived table with the same alias. Qualification resolved no column of such a read (a
  renamed name is no column of the table's schema) and the engine read the list against the relation dltrace
  points the table at (its rows with ``dl_rid``): a failed query on both engines.
- ``(SELECT v FROM t ORDER BY v LIMIT 1) AS x(c)`` (or a CTE ``q(c) AS (...)``) whose SELECT has an ORDER BY or
  a QUALIFY -> ``(SELECT * FROM (SELECT v FROM t ORDER BY v LIMIT 1) AS _dl_l1) AS x(c)``: sqlglot 30.30's
  qualification renames the inner SELECT's items to the listed names and then cannot resolve ``ORDER BY v``
  (a failed query named as an unknown column).

Valid: ``SELECT *`` of a table gives exactly the user's columns in the table's order (``dl_rid`` is never in
``*``), and of a derived table its items in order, so the list renames the same columns to the same names; the
rows are the same rows, each with its own lineage (the rules for a derived table). The wrapped query's ORDER BY,
LIMIT and QUALIFY stay where they were. Applied before qualification.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.shape import is_paren

WRAPPER = "_dl_l"  # alias prefix of the derived table a listed query is wrapped in


def column_lists(expression: exp.Expression, context: PassContext | None = None, copy: bool = True) -> exp.Expression:
    if not any(_renamed_table(n) or _renamed_ordered_query(n) for n in expression.find_all(exp.Table, exp.Subquery,
                                                                                            exp.CTE)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for table in [t for t in tree.find_all(exp.Table) if _renamed_table(t)]:
        alias = table.args["alias"]
        read = table.copy()
        read.set("alias", None)
        read.set("joins", None)
        derived = exp.Subquery(this=exp.select(exp.Star()).from_(read, copy=False), alias=alias.copy())
        if table.args.get("joins"):  # (the first table of a parenthesised join carries the parenthesis's joins)
            derived.set("joins", table.args["joins"])
        table.replace(derived)
    for n, holder in enumerate([h for h in tree.find_all(exp.Subquery, exp.CTE) if _renamed_ordered_query(h)], 1):
        inner = exp.Subquery(this=holder.this, alias=exp.TableAlias(this=exp.to_identifier(f"{WRAPPER}{n}")))
        holder.set("this", exp.select(exp.Star()).from_(inner, copy=False))
    return tree


def _renamed_table(table: exp.Expression) -> bool:
    """A table (or CTE) read by name in FROM / JOIN (or first in a parenthesised join) whose alias lists column
    names."""
    alias = table.args.get("alias")
    return isinstance(table, exp.Table) and alias is not None and bool(alias.columns) \
        and isinstance(table.this, exp.Identifier) \
        and (isinstance(table.parent, (exp.From, exp.Join)) or is_paren(table.parent))


def _renamed_ordered_query(holder: exp.Expression) -> bool:
    """A derived table or CTE whose alias lists column names over a SELECT with an ORDER BY or a QUALIFY."""
    if not isinstance(holder, (exp.Subquery, exp.CTE)):
        return False
    alias = holder.args.get("alias")
    query = holder.this
    return alias is not None and bool(alias.columns) and isinstance(query, exp.Select) \
        and (query.args.get("order") is not None or query.args.get("qualify") is not None)
