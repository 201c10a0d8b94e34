"""A subquery in a LEFT JOIN's ON that reads only the joined (right) side moves into a filter of that side.

``FROM o LEFT JOIN c ON c.id = o.cust AND c.region IN (SELECT r FROM active)`` was refused: a subquery in an
outer join's ON has no lineage rule (the padded rows keep no witnesses of it). Written as ::

    FROM o LEFT JOIN (SELECT c.id, c.region, ... FROM c AS c WHERE c.region IN (SELECT r FROM active)) AS c
         ON c.id = o.cust

the subquery is a WHERE filter of the right side's rows, decorrelated and traced like any.

Valid: a LEFT JOIN keeps every left row; a right row joins a left row where the whole ON is true, so a conjunct
that reads only the right row decides whether that right row can join at all, which filtering the right side
first decides the same way; a left row no remaining right row joins is padded with NULLs, as before. (Not for a
RIGHT or FULL join, whose right rows are kept unjoined too, nor for a conjunct reading the left side.) Lineage: a
joined row's witnesses of the conjunct are those of its right row, the rows that made it true -- the witnesses the
conjunct had in the ON; a padded row has none, as before. Only under witness semantics (control lineage gives a
predicate subquery's whole lineage to every row it decides, the padded ones included, which a filter of the
right side does not). The right side must be a table, a CTE or a derived table with known columns, and the query
must not read ``dl_rid`` (the filter's SELECT lists the side's own columns only). Applied after qualification.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.parse import mentions_rid
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import outer_columns
from dltrace.rewriter.shape import conjuncts, enclosing_query, own_subqueries


def outer_join_filters(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if context.control or mentions_rid(expression) or not any(
            _movable(join) for join in expression.find_all(exp.Join)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for join in list(tree.find_all(exp.Join)):
        moved = _movable(join)
        columns = _side_columns(join.this, tree, context) if moved else None
        if not moved or columns is None:
            continue
        kept = [c for c in conjuncts(join.args["on"]) if not any(c is m for m in moved)]
        side = join.this
        alias = side.alias_or_name
        inner = side.copy()
        filtered = exp.select(*[exp.alias_(exp.column(c, table=alias, quoted=True), c, quoted=True) for c in columns]) \
            .from_(inner).where(*[m.copy() for m in moved])
        join.set("this", filtered.subquery(exp.TableAlias(this=exp.to_identifier(alias, quoted=True))))
        join.set("on", exp.and_(*[c.copy() for c in kept]) if kept else exp.true())
    return tree


def _movable(join: exp.Join) -> list[exp.Expression]:
    """The ON conjuncts of a LEFT ``join`` that hold a subquery and read only its right side."""
    on = join.args.get("on")
    if on is None or join.side != "LEFT" or (join.kind or "").upper() not in ("", "OUTER") \
            or not isinstance(join.this, (exp.Table, exp.Subquery)) or not join.this.alias_or_name:
        return []
    if isinstance(join.this, exp.Table) and not isinstance(join.this.this, exp.Identifier):
        return []  # (a table function)
    alias = join.this.alias_or_name
    return [c for c in conjuncts(on) if own_subqueries(c) and all(col.table == alias for col in _reads(c))]


def _reads(conjunct: exp.Expression) -> list[exp.Column]:
    """The columns ``conjunct`` reads of its SELECT's sources: directly, or as a correlation of its subqueries."""
    direct = [c for c in conjunct.find_all(exp.Column) if enclosing_query(c, conjunct) is None]
    return direct + [c for q in own_subqueries(conjunct) for c in outer_columns(q)]


def _side_columns(side: exp.Expression, tree: exp.Expression, context: PassContext) -> list[str] | None:
    """The output columns of a join's right side (normalised, as qualification wrote them), or None."""
    if isinstance(side, exp.Subquery):
        names = side.this.named_selects if isinstance(side.this, exp.Query) else []
        return names if names and all(names) and len(set(names)) == len(names) else None
    ctes = [c for c in tree.find_all(exp.CTE) if c.alias_or_name == side.name]
    if ctes:
        names = ctes[0].this.named_selects if len(ctes) == 1 else []
        return names if names and all(names) and len(set(names)) == len(names) else None
    columns = (context.schema or {}).get(side.name.lower())
    if not columns:
        return None
    return [str(c).lower() for c in columns]  # (DuckDB and Spark resolve names case-insensitively: qualified lower)
