"""Read every base table from its rows relation: the user's table with its row id ``dl_rid``.

A session registers each table twice (:func:`dltrace.names.rows_relation`): as the user's own relation with
only the user's columns -- so that ``SELECT *``, NATURAL JOIN and USING in the user's SQL see exactly what the
engine shows -- and privately with ``dl_rid``. This last pass points every base-table reference of the rewritten
query at the private one, under the same alias. Valid for every query: the relations hold the same rows, the
private one one column more, which only dltrace's own SQL names. Only the tables named in
``context.rows_relations`` are read so (SQL rewritten for tables that carry ``dl_rid`` themselves names none),
each from the relation named there (an engine picks a name no object of the user's has; a bare collection of
tables reads the default :func:`dltrace.names.rows_relation`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from sqlglot import exp

from dltrace.names import rows_relation
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.shape import defining_cte


def read_rows_relations(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    return with_rows_relations(expression, context.rows_relations, copy)


def with_rows_relations(expression: exp.Expression, tables: Mapping[str, str] | Collection[str],
                        copy: bool = True) -> exp.Expression:
    """``expression`` (a copy, unless ``copy=False``) with every reference to one of ``tables`` reading its rows
    relation (``tables``: table -> its rows relation, or the tables alone, read from their default ones)."""
    if not tables:
        return expression
    relations = tables if isinstance(tables, Mapping) else {t: rows_relation(t) for t in tables}
    tree = exp.maybe_copy(expression, copy)
    for table in list(tree.find_all(exp.Table)):
        name = table.name.lower()
        if table.args.get("db") or not isinstance(table.this, exp.Identifier) or name not in relations:
            continue
        if defining_cte(table) is not None:  # a CTE of the same name in scope: the query's, not the table
            continue
        alias = table.alias_or_name
        table.set("this", exp.to_identifier(relations[name], quoted=True))
        table.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
    return tree
