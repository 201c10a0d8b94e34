"""The output names of a rewritten query spelled as the user's query gives them.

Qualification normalises identifiers (DuckDB and Spark resolve names case-insensitively, and sqlglot lower-cases
them), so ``SELECT deptId, sum(Salary) AS TotalPay FROM emp`` came back as ``... AS "deptid", ... AS "totalpay"``:
run by the user, the rewritten SQL named its columns otherwise than their own query does. A session asks the
engine for the names (``forward_plan.engine_names``); :func:`dltrace.rewrite` has no engine, so it gives back the
spelling of the query's own projections (an alias, a column as written) and, for a column a ``*`` expands, the
schema's. A name the engine makes up for an expression (DuckDB's ``sum(Salary)``) is not reproduced: the rewrite
keeps sqlglot's ``_col_1`` there. Only the case of a name changes, never the name, so the SQL's meaning is the same
(both engines resolve names case-insensitively; Spark with ``spark.sql.caseSensitive`` on is not supported by the
rewriter's normalisation anyway).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.engines import names_columns_as_written


def _leftmost_select(tree: exp.Expression) -> exp.Select | None:
    node = tree
    while isinstance(node, (exp.SetOperation, exp.Subquery)):
        node = node.this
    return node if isinstance(node, exp.Select) else None


def _is_star(item: exp.Expression) -> bool:
    return isinstance(item, exp.Star) or isinstance(item, exp.Column) and isinstance(item.this, exp.Star)


def output_spellings(written: exp.Expression, schema: dict | None, dialect: str,
                     names: list[str]) -> list[str | None]:
    """The engine's spelling of each output name of ``written``, the normalised ``names`` of its columns (None
    where not known).

    An alias is named as written; a bare column as its table stores it on DuckDB (``SELECT DEPTID`` over
    ``deptId`` gives ``deptId``) and as written on Spark (``DEPTID``); a ``*``'s columns as stored. A name the
    schema does not give (a CTE's, a derived table's) takes the spelling of an alias of that name in the query."""
    stored: dict[str, str] = {}
    for columns in (schema or {}).values():
        for column in columns:
            stored.setdefault(str(column).lower(), str(column))
    for alias in written.find_all(exp.Alias, exp.TableAlias):
        for name in [alias.alias] + [c.name for c in alias.args.get("columns") or []]:
            if name:
                stored.setdefault(name.lower(), name)
    select = _leftmost_select(written)
    items = list(select.expressions) if select is not None else []

    def spelled(item: exp.Expression) -> str | None:
        if isinstance(item, exp.Alias):
            return item.alias
        if isinstance(item, exp.Column) and item.name:
            return item.name if names_columns_as_written(dialect) else stored.get(item.name.lower(), item.name)
        return None

    if len(items) == len(names) and not any(_is_star(i) for i in items):
        return [spelled(i) for i in items]
    by_name: dict[str, str] = {}
    for item in items:  # a * expands to columns of its own: spell by name
        name = None if _is_star(item) else spelled(item)
        if name:
            by_name.setdefault(name.lower(), name)
    return [by_name.get(n.lower()) or stored.get(n.lower()) for n in names]


def spell_output_names(tree: exp.Expression, written: exp.Expression, schema: dict | None, dialect: str,
                       count: int) -> exp.Expression:
    """``tree`` (a rewritten query, not modified) with the names of its first ``count`` output columns (the
    query's own; the lineage columns follow) spelled as the engine names the columns of ``written``, the query
    the user wrote. Only the case of a name changes."""
    select = _leftmost_select(tree)
    if select is None or len(select.expressions) < count \
            or not all(isinstance(i, exp.Alias) for i in select.expressions[:count]):
        return tree
    aliases = [item.alias for item in select.expressions[:count]]
    spellings = output_spellings(written, schema, dialect, aliases)
    renames = {i: spelled for i, (alias, spelled) in enumerate(zip(aliases, spellings))
               if spelled and spelled != alias and spelled.lower() == alias.lower()}
    if not renames:
        return tree
    out = tree.copy()
    target = _leftmost_select(out)
    for i, spelled in renames.items():
        target.expressions[i].set("alias", exp.to_identifier(spelled, quoted=True))
    return out
