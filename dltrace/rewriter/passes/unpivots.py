"""DuckDB's UNPIVOT statement as the UNION ALL it stands for.

``UNPIVOT m ON jan, feb INTO NAME month VALUE amount`` gives, per row of m and per column listed, the row's other
columns, the column's name and its value, where the value is not NULL (DuckDB's plan: the names and values unnested
side by side, then ``IS NOT NULL``). As a UNION ALL of one SELECT per column::

    SELECT id, name, 'jan' AS month, jan AS amount FROM m WHERE jan IS NOT NULL
    UNION ALL SELECT id, name, 'feb' AS month, feb AS amount FROM m WHERE feb IS NOT NULL

the same rows (in another order: an UNPIVOT has none the query can rely on), each row's lineage the row of m it came
from. Names as DuckDB gives them: the columns m does not unpivot, in its order, then the name column (``name``
without INTO) and the value column (``value``); a column's name is its alias (``jan AS j``) or its name as the table
stores it (``ON JAN`` gives ``jan``). Applied before the checks (they read SELECTs).

Valid over a registered table read directly, whose columns the schema lists. Refused, naming the UNPIVOT: another
source (a subquery, a CTE: its columns are not known before qualification), ``COLUMNS(...)`` or an expression among
the columns, several value columns, columns of different types (DuckDB asks for a cast, where a UNION ALL would cast
them), and a name or value column named like a column the table keeps (DuckDB renames it).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnknownColumn, UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.shape import defining_cte, is_unpivot_statement


def unpivots(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not any(is_unpivot_statement(node) for node in expression.find_all(exp.Pivot)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for node in reversed([n for n in tree.find_all(exp.Pivot) if is_unpivot_statement(n)]):
        union = _union_all(node, context)
        if node is tree:
            tree = union
        else:
            node.replace(union)
    return tree


def _refuse(node: exp.Pivot, why: str) -> UnsupportedQuery:
    return UnsupportedQuery(f"{why}, at {position(node)}")


def _union_all(node: exp.Pivot, context: PassContext) -> exp.Expression:
    source = node.this
    schema = {t.lower(): cols for t, cols in (context.schema or {}).items()}
    if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier) \
            or defining_cte(source) is not None or source.name.lower() not in schema:
        raise _refuse(node, "an UNPIVOT is supported over a registered table read directly (its other columns are "
                            "the table's)")
    columns = schema[source.name.lower()]
    stored = {c.lower(): c for c in columns}
    unpivoted = []  # (stored name, the name column's value)
    for item in node.expressions:
        column, alias = (item.this, item.alias) if isinstance(item, exp.Alias) else (item, "")
        if not isinstance(column, exp.Column) or column.table:
            raise _refuse(node, f"an UNPIVOT ON {item.sql(context.dialect)} is not supported: list the columns")
        if column.name.lower() not in stored:
            raise UnknownColumn(f"UNPIVOT column {column.name!r} is not a column of {source.name!r}, at "
                                f"{position(node)}")
        unpivoted.append((stored[column.name.lower()], alias or stored[column.name.lower()]))
    types = {str(columns[c]).upper() for c, _ in unpivoted}
    if len(types) > 1:
        raise _refuse(node, f"an UNPIVOT over columns of different types ({', '.join(sorted(types))}) is not "
                            f"supported: DuckDB asks for a cast")
    into = node.args.get("into")
    values = into.expressions if into is not None else []
    if len(values) > 1:
        raise _refuse(node, "an UNPIVOT into several value columns is not supported")
    name_column = into.this.name if into is not None else "name"
    value_column = values[0].name if values else "value"
    kept = [c for c in columns if c.lower() not in {u.lower() for u, _ in unpivoted}]
    clash = next((n for n in (name_column, value_column) if n.lower() in {k.lower() for k in kept}), None)
    if clash is not None:
        raise _refuse(node, f"an UNPIVOT whose column {clash!r} is named like a column the table keeps is not "
                            f"supported (DuckDB renames it): name it apart with INTO NAME ... VALUE ...")
    branches = []
    for column, name in unpivoted:
        items = [exp.column(k, quoted=True) for k in kept]
        items += [exp.alias_(exp.Literal.string(name), name_column, quoted=True),
                  exp.alias_(exp.column(column, quoted=True), value_column, quoted=True)]
        test = exp.Not(this=exp.Is(this=exp.column(column, quoted=True), expression=exp.null()))
        branches.append(exp.select(*items).from_(source.copy(), copy=False).where(test, copy=False))
    union = branches[0]
    for branch in branches[1:]:
        union = exp.union(union, branch, distinct=False, copy=False)
    if node.args.get("with_") is not None:  # (WITH ... UNPIVOT ...: the statement's CTEs)
        union.set("with_", node.args["with_"].copy())
    return union
