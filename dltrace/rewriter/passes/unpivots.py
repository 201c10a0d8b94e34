"""DuckDB's UNPIVOT statement as the query its plan runs.

``UNPIVOT m ON jan, feb INTO NAME month VALUE amount`` gives, per row of m and per column listed, the row's other
columns, the column's label and its value, where the value is not NULL. DuckDB's plan unnests the labels and the
values side by side, then keeps the values that are not NULL; written so::

    SELECT * FROM (SELECT id, label, UNNEST(['jan', 'feb']) AS month, UNNEST([jan, feb]) AS amount FROM m) AS m
    WHERE m.amount IS NOT NULL

it gives the same rows, in the same order (row by row, each row's columns in the ON list's order: a LIMIT without
ORDER BY, ``string_agg`` or a POSITIONAL JOIN over it see DuckDB's rows; a UNION ALL of a SELECT per column, the
first form, did not), and the values the type of the list ``[jan, feb]``, which is what DuckDB's UNPIVOT gives.
Each row's lineage is the row of m it came from (an unnested row's). Names as DuckDB gives them: the columns m does
not unpivot, in its order, then the name column (``name`` without INTO) and the value column (``value``); a
column's label is its alias (``jan AS j``) or its name as the table stores it (``ON JAN`` gives ``jan``). Written
by the ``pivots`` pass (:mod:`.pivots`), before the checks (they read SELECTs); the derived table takes the table's
name, in a scope of its own.

Valid over a registered table read directly, whose columns the schema lists. Refused, naming the UNPIVOT: another
source (a subquery, a CTE: its columns are not known before qualification), an empty ON list, ``COLUMNS(...)`` or
an expression among the columns, several value columns, an INTO without NAME, columns whose types are neither one
type nor all numbers (DuckDB asks for a cast of some mixes, a list would cast them), and a name or value column
named like a column the table keeps, or like each other (DuckDB renames it).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnknownColumn, UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.shape import defining_cte


def refuse(node: exp.Pivot, why: str) -> UnsupportedQuery:
    """The refusal of a PIVOT / UNPIVOT statement ``node``: ``why``, and where."""
    return UnsupportedQuery(f"{why}, at {position(node)}")


_NUMBERS = ("TINYINT", "SMALLINT", "INT", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINT", "UBIGINT",
            "UHUGEINT", "DECIMAL", "NUMERIC", "FLOAT", "REAL", "DOUBLE")


def unpivoted(node: exp.Pivot, context: PassContext) -> exp.Select:
    """DuckDB's UNPIVOT statement ``node`` as its plan runs it (the module's docstring)."""
    source = node.this
    schema = {t.lower(): cols for t, cols in (context.schema or {}).items()}
    if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier) \
            or defining_cte(source) is not None or source.name.lower() not in schema:
        raise refuse(node, "an UNPIVOT is supported over a registered table read directly (its other columns are "
                            "the table's)")
    columns = schema[source.name.lower()]
    stored = {c.lower(): c for c in columns}
    unpivoted = []  # (stored name, its label)
    for item in node.expressions:
        column, alias = (item.this, item.alias) if isinstance(item, exp.Alias) else (item, "")
        if not isinstance(column, exp.Column) or column.table:
            raise refuse(node, f"an UNPIVOT ON {item.sql(context.dialect)} is not supported: list the columns")
        if column.name.lower() not in stored:
            raise UnknownColumn(f"UNPIVOT column {column.name!r} is not a column of {source.name!r}, at "
                                f"{position(node)}")
        unpivoted.append((stored[column.name.lower()], alias or stored[column.name.lower()]))
    if not unpivoted:
        raise refuse(node, "an UNPIVOT without columns ON is not supported")
    types = {str(columns[c]).upper() for c, _ in unpivoted}
    if len(types) > 1 and not all(t.startswith(_NUMBERS) for t in types):
        raise refuse(node, f"an UNPIVOT over columns of types {', '.join(sorted(types))} is not supported: cast "
                            f"them to one type")
    into = node.args.get("into")
    values = into.expressions if into is not None else []
    if into is not None and not isinstance(into.this, exp.Expression) or len(values) > 1:
        raise refuse(node, "an UNPIVOT is supported INTO NAME one column VALUE one column")
    name_column = into.this.name if into is not None else "name"
    value = values[0] if values else None
    value_column = (value.this if isinstance(value, exp.Paren) else value).name if value is not None else "value"
    kept = [c for c in columns if c.lower() not in {u.lower() for u, _ in unpivoted}]
    taken = {k.lower() for k in kept}
    clash = next((n for n in (name_column, value_column) if n.lower() in taken), None)
    if clash is not None or name_column.lower() == value_column.lower():
        raise refuse(node, f"an UNPIVOT whose column {clash or value_column!r} is named like another column is not "
                            f"supported (DuckDB renames it): name it apart with INTO NAME ... VALUE ...")
    labels = exp.Array(expressions=[exp.Literal.string(label) for _, label in unpivoted])
    cells = exp.Array(expressions=[exp.column(c, quoted=True) for c, _ in unpivoted])
    items = [exp.column(k, quoted=True) for k in kept]
    # (exp.alias_ would name an UNNEST as a table's alias)
    items += [exp.Alias(this=exp.Unnest(expressions=[labels]), alias=exp.to_identifier(name_column, quoted=True)),
              exp.Alias(this=exp.Unnest(expressions=[cells]), alias=exp.to_identifier(value_column, quoted=True))]
    alias = source.alias_or_name
    unnested = exp.Subquery(this=exp.select(*items).from_(source.copy(), copy=False),
                            alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
    kept_value = exp.Not(this=exp.Is(this=exp.column(value_column, table=alias, quoted=True), expression=exp.null()))
    select = exp.select(exp.Star()).from_(unnested, copy=False).where(kept_value, copy=False)
    if node.args.get("with_") is not None:  # (WITH ... UNPIVOT ...: the statement's CTEs)
        select.set("with_", node.args["with_"].copy())
    return select
