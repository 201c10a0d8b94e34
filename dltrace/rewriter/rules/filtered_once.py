"""A base table's costly filter evaluated once, where the nested rewrite reads the table twice.

:mod:`.nested_lineage` computes the inner groups as written and finds their rows again by reading the inner FROM
and WHERE a second time: each base table is scanned twice and its conditions evaluated twice. Where a table's own
conditions are costly -- a pattern match over strings: TPC-H Q13's ``o_comment NOT LIKE '%special%requests%'``,
most of the query's time once DuckDB holds the comments compressed -- the table's rows that pass them are written
once, to a MATERIALIZED CTE that both reads take in the table's place::

    WITH _dl_f1 AS MATERIALIZED (SELECT <the columns of orders the inner SELECT and its row ids read>
                                 FROM orders AS orders WHERE <orders' own conditions>)
    ... FROM customer LEFT JOIN _dl_f1 AS orders ON <the other conditions> ...

(TPC-H Q13, SF 1, memory: 2.1x -> 1.7x of the query.)

Valid (each read of the inner FROM gives the same rows, with the same values and row ids) when the inner FROM is
base tables joined by inner, cross and LEFT joins without USING or NATURAL, and the conditions moved into a
table's CTE are its own: deterministic conjuncts without a subquery, reading that table's columns only, each
- a conjunct of the WHERE, for a table no LEFT join pads (its columns are never NULL-padded, so a row failing the
  conjunct is dropped either way), or
- a conjunct of the ON of the join that reads the table (inner or LEFT): for a LEFT join, a table row failing it
  matches nothing, exactly as when the table does not hold that row.
The CTE holds exactly the table's rows that pass them, each once; it projects every column of the table that the
inner SELECT (its list, the remaining conditions, GROUP BY, HAVING) and the row ids read, under its own name and
read under the table's alias, so every other expression reads the same values.
Applied only on an engine that computes a MATERIALIZED CTE once, where a moved conjunct is costly (a pattern
match: LIKE, ILIKE, GLOB, SIMILAR TO, a regular expression): over a cheap filter DuckDB's second scan (zone maps,
compressed columns) costs less than writing the rows. ``EVERY_FILTER`` (tests) applies it to any own condition.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.shape import NONDETERMINISTIC, conjuncts
from dltrace.rewriter.slots import Context, Slot

#: conditions whose evaluation costs more than writing the rows that pass them
COSTLY = (exp.Like, exp.ILike, exp.Glob, exp.SimilarTo, exp.RegexpLike, exp.RegexpILike)
#: apply to any table with conditions of its own, costly or not (the tests' switch: the generator writes no LIKE)
EVERY_FILTER = False


def filtered_once(inner: exp.Select, slots: list[Slot], ctx: Context
                  ) -> tuple[exp.Select, list[exp.CTE], dict[str, dict[str, str]]] | None:
    """(``inner`` reading each table with costly conditions of its own from a CTE of the rows that pass them, the
    CTEs, each CTE's columns as the schema types them), or None when no table qualifies (see the module)."""
    if not ctx.fns.materialized_ctes or ctx.schema is None:
        return None
    joins = inner.args.get("joins") or []
    if any(j.args.get("using") or j.args.get("method") or (j.side or "").upper() not in ("", "LEFT")
           or (j.kind or "").upper() not in ("", "INNER", "OUTER", "CROSS") for j in joins):
        return None
    items = [inner.args["from_"].this, *(j.this for j in joins)]
    aliases = [t.alias_or_name for t in items]
    if len(set(aliases)) != len(aliases):
        return None
    padded = {j.this.alias_or_name for j in joins if (j.side or "").upper() == "LEFT"}
    where = inner.args.get("where")
    moved: dict[str, list[exp.Expression]] = {}  # alias -> its own conjuncts (the nodes of inner)
    for alias, join in zip(aliases, [None, *joins]):
        own = [c for c in (conjuncts(join.args["on"]) if join is not None and join.args.get("on") else [])
               if _reads_only(c, alias)]
        if alias not in padded and where is not None:
            own += [c for c in conjuncts(where.this) if _reads_only(c, alias)]
        if own and (EVERY_FILTER or any(c.find(*COSTLY) for c in own)):
            moved[alias] = own
    if not moved:
        return None

    out = inner.copy()
    twins = dict(zip(map(id, inner.walk()), out.walk()))
    moved_twins = {a: [twins[id(c)] for c in conds] for a, conds in moved.items()}
    for conds in moved_twins.values():
        for c in conds:
            _drop_conjunct(c)
    ctes, schema = [], {}
    for item in [out.args["from_"].this, *(j.this for j in out.args.get("joins") or [])]:
        alias = item.alias_or_name
        if alias not in moved_twins:
            continue
        columns = _columns_read(out, slots, alias)
        table_schema = ctx.schema.get(item.name) or ctx.schema.get(item.name.lower()) or {}
        if columns is None or not columns:
            return None
        alias_name = item.args["alias"].this if item.args.get("alias") else item.this
        body = exp.select(*[exp.column(c.copy(), table=alias_name.copy()) for c in columns.values()])
        body = body.from_(item.copy(), copy=False).where(*[c.copy() for c in moved[alias]], copy=False)
        name = ctx.fresh("_dl_f")
        ctes.append(exp.CTE(this=body, alias=exp.TableAlias(this=exp.to_identifier(name)), materialized=True))
        projected = {n.lower() for n in columns}
        schema[name] = {k: v for k, v in table_schema.items() if k.lower() in projected}
        item.replace(exp.Table(this=exp.to_identifier(name), alias=exp.TableAlias(this=alias_name.copy())))
    return out, ctes, schema


def _reads_only(condition: exp.Expression, alias: str) -> bool:
    """Does ``condition`` read columns of ``alias`` only (at least one), deterministically, without a subquery?"""
    if condition.find(exp.Select, exp.Subquery, exp.Exists, exp.Window, *NONDETERMINISTIC):
        return False
    columns = list(condition.find_all(exp.Column))
    return bool(columns) and all(c.table == alias and isinstance(c.this, exp.Identifier) for c in columns)


def _drop_conjunct(condition: exp.Expression) -> None:
    """Remove ``condition`` from the AND it is part of (its WHERE or ON); a clause left empty goes, an ON becomes
    TRUE (a LEFT join keeps its ON)."""
    parent = condition.parent
    while isinstance(parent, exp.Paren):
        condition, parent = parent, parent.parent
    if isinstance(parent, exp.And):
        other = parent.expression if parent.this is condition else parent.this
        parent.replace(other)
    elif isinstance(parent, exp.Where):
        parent.pop()
    elif isinstance(parent, exp.Join):
        parent.set("on", exp.true())


def _columns_read(select: exp.Select, slots: list[Slot], alias: str) -> dict[str, exp.Identifier] | None:
    """The columns of ``alias`` that ``select`` (without its moved conditions) and the row ids read, by name; None
    when one is read whole (``alias.*``, a whole-row reference)."""
    found: dict[str, exp.Identifier] = {}
    nodes = [select, *(s.expr for s in slots)]
    for node in nodes:
        for star in node.find_all(exp.Star):
            if not isinstance(star.parent, exp.Count):
                return None
        for column in node.find_all(exp.Column):
            if column.table != alias:
                continue
            if not isinstance(column.this, exp.Identifier):
                return None
            found.setdefault(column.name, column.this)
    for node in select.find_all(exp.TableColumn):
        if node.name == alias:
            return None
    return found
