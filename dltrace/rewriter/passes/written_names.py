"""Names as the query writes them, kept through qualification, which aliases every SELECT item and normalises
every identifier (DuckDB's ``AS MyK`` becomes ``AS "myk"``, a column list ``x(A, B)`` moves onto the items as
new aliases). Marked on the nodes before sqlglot runs (node meta survives its rewrites and copies) for the steps
after it that must name or bind as the engine does (:mod:`.order_by`, :mod:`.whole_rows`)."""

from __future__ import annotations

from sqlglot import exp

WRITTEN_ALIAS = "dl_written_alias"  # meta of a SELECT item the query aliases itself: the alias as written
WRITTEN_COLUMNS = "dl_written_columns"  # meta of a derived table or CTE with a column list: its names as written
WRITTEN_FIELD = "dl_written_field"  # meta of a struct field's key, alias or type field: its name (struct_fields.py)


def mark_written_names(tree: exp.Expression) -> None:
    """Mark every SELECT item the query aliases itself, and every relation it names the columns of."""
    for select in tree.find_all(exp.Select):
        for item in select.expressions:
            if isinstance(item, exp.Alias) and item.alias:
                item.meta[WRITTEN_ALIAS] = item.alias
    for alias in tree.find_all(exp.TableAlias):
        if alias.columns and alias.parent is not None:
            alias.parent.meta[WRITTEN_COLUMNS] = [c.name for c in alias.columns]


def written_alias(item: exp.Expression) -> str | None:
    """The alias the query gave SELECT item ``item``, as written; None when qualification named it."""
    return item.meta.get(WRITTEN_ALIAS)


def written_columns(source: exp.Expression) -> list[str]:
    """The column names a derived table or CTE's column list gives (its first columns), as written."""
    return list(source.meta.get(WRITTEN_COLUMNS) or [])
