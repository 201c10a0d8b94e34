"""Read every base table from its rows relation: the user's table with its row id ``dl_rid``.

A session registers each table twice (:func:`dltrace.names.rows_relation`): as the user's own relation with
only the user's columns -- so that ``SELECT *``, NATURAL JOIN and USING in the user's SQL see exactly what the
engine shows -- and privately with ``dl_rid``. This last pass points every base-table reference of the rewritten
query at the private one, under the same alias. Valid for every query: the relations hold the same rows, the
private one one column more, which only dltrace's own SQL names. Only the tables named in
``context.rows_relations`` are read so (SQL rewritten for tables that carry ``dl_rid`` themselves names none).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.names import rows_relation
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.shape import defining_cte


def read_rows_relations(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    return with_rows_relations(expression, context.rows_relations, copy)


def with_rows_relations(expression: exp.Expression, tables: frozenset | set, copy: bool = True) -> exp.Expression:
    """``expression`` (a copy, unless ``copy=False``) with every reference to one of ``tables`` reading its rows
    relation."""
    if not tables:
        return expression
    tree = exp.maybe_copy(expression, copy)
    for table in list(tree.find_all(exp.Table)):
        name = table.name.lower()
        if table.args.get("db") or not isinstance(table.this, exp.Identifier) or name not in tables:
            continue
        if defining_cte(table) is not None:  # a CTE of the same name in scope: the query's, not the table
            continue
        alias = table.alias_or_name
        table.set("this", exp.to_identifier(rows_relation(name), quoted=True))
        table.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
    return tree
