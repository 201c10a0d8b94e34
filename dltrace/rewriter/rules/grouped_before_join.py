"""The counted side of a join grouped by its join key before the join, where a CTE hides what the engine needs to
do so itself.

Over its own tables DuckDB computes ``SELECT c.k, COUNT(o.x) FROM c LEFT JOIN o ON c.k = o.k GROUP BY c.k`` by
grouping ``o`` per ``o.k`` first and joining the groups (its statistics say that pays: TPC-H Q13 groups 1.5M orders
into 100,000 customers' counts, then joins 100,000 rows). When :mod:`.filtered_once` has put ``o``'s rows that pass
its own conditions into a MATERIALIZED CTE, DuckDB has no statistics for them and joins every row, then groups
(Q13 at SF 1: 100 ms against the original's 32; at SF 10, 1.6 s against 0.9). So where the nested rewrite reads a
join's right side from such a CTE, its inner groups are computed the way DuckDB computes them over the table::

    SELECT <l's columns>, COUNT(r.x), MIN(r.y) FROM l LEFT JOIN _dl_f1 AS r ON l.a = r.b [WHERE <on l>]
    GROUP BY <l's columns> [HAVING ...]
    ->
    SELECT <l's columns>, CAST(COALESCE(SUM(_dl_e1._dl_p1), 0) AS BIGINT), MIN(_dl_e1._dl_p2)
    FROM l LEFT JOIN (SELECT r.b AS _dl_j1, COUNT(r.x) AS _dl_p1, MIN(r.y) AS _dl_p2 FROM _dl_f1 AS r
                      GROUP BY r.b) AS _dl_e1 ON l.a = _dl_e1._dl_j1
    [WHERE <on l>] GROUP BY <l's columns> [HAVING ...]

Valid (the same groups with the same values) when the SELECT reads ``l`` and one INNER or LEFT join of ``r`` whose
ON is ``=`` between columns of ``l`` and columns of ``r`` of the same integer type (one or more, AND-ed), and ``r``'s
columns are read only as the whole argument of ``COUNT``, ``MIN`` or ``MAX`` (not DISTINCT, no FILTER, ORDER BY or
window), those calls are the only aggregates (one over ``l``, such as ``SUM(l.v)``, sees each ``l`` row once per
``r`` row it meets, and only once after the grouping), and every other column reads ``l``: the WHERE, GROUP BY,
HAVING and the list, deterministic, without subqueries or functions sqlglot does not know (one might aggregate).
Then each ``l`` row that passes the WHERE meets the ``r`` rows whose keys equal its own (``=``: never on NULL), all
in its own group, and
- ``COUNT(r.x)`` over a group is the sum, over its ``l`` rows, of the count of their ``r`` rows with ``x`` not NULL:
  the sum of the partial counts of the keys they meet (a row that meets none -- padded by the LEFT join, ``x``
  NULL -- adds 0: NULL in the SUM, and 0 where every row of the group meets none; SUM of BIGINT is a HUGEINT in
  DuckDB, cast back to COUNT's BIGINT);
- ``MIN``/``MAX`` over a group is the least/greatest of its rows' partial minima/maxima (NULLs, of padded rows or
  of ``r`` rows, are skipped alike; the type is kept);
- a group exists when one of its ``l`` rows passes the WHERE (LEFT) or meets an ``r`` row (INNER): alike, as a
  partial exists exactly for the keys some ``r`` row has.
The same integer type on both sides makes grouping by ``r.b`` and ``=`` the same equality (a string's collation or
a float's zero could group values ``=`` tells apart). Only the values are computed so: the rows of each group are
found again from the CTE itself (:mod:`.nested_lineage`), and their lineage is theirs.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.rules.inner_equi_joins import column_of, equated_columns, same_integer_type
from dltrace.rewriter.shape import NONDETERMINISTIC, conjuncts
from dltrace.rewriter.slots import Context

#: the aggregates over the counted side that its per-key parts combine into: (the part's aggregate, combined by)
PARTS = {exp.Count: exp.Sum, exp.Min: exp.Min, exp.Max: exp.Max}


def grouped_before_join(select: exp.Select, hidden: set[str], schema: dict, ctx: Context) -> exp.Select | None:
    """``select`` with its join's right side, a table read from one of the CTEs ``hidden`` (``schema`` types their
    columns), grouped by its join keys before the join; None when the module's conditions do not hold."""
    joins = select.args.get("joins") or []
    if len(joins) != 1 or select.args.get("from_") is None or not select.args.get("group"):
        return None
    join = joins[0]
    if (join.args.get("using") or join.args.get("method") or (join.side or "").upper() not in ("", "LEFT")
            or (join.kind or "").upper() not in ("", "INNER", "OUTER")):
        return None
    left, right = select.args["from_"].this, join.this
    if not (isinstance(left, exp.Table) and isinstance(right, exp.Table)) or right.name not in hidden:
        return None
    l_alias, r_alias = left.alias_or_name, right.alias_or_name
    if l_alias == r_alias:
        return None
    pairs = _equated(join.args.get("on"), l_alias, r_alias)
    if not pairs or not all(same_integer_type(schema, left.name, a.name, right.name, b.name) for a, b in pairs):
        return None
    clauses = [*select.expressions, *(select.args.get(k) for k in ("where", "group", "having"))]
    clauses = [c for c in clauses if c is not None]
    calls = []
    for clause in clauses:
        if clause.find(exp.Star, exp.Select, exp.Subquery, exp.Exists, exp.Window, *NONDETERMINISTIC):
            return None
        for node in clause.find_all(exp.AggFunc):
            if not _part_of(node, r_alias) or isinstance(node.parent, (exp.Filter, exp.IgnoreNulls,
                                                                        exp.RespectNulls, exp.WithinGroup)):
                return None
            calls.append(node)
        for column in clause.find_all(exp.Column):
            if not isinstance(column.this, exp.Identifier) or column.table not in (l_alias, r_alias):
                return None
            if column.table == r_alias and not any(column.parent is call for call in calls):
                return None
    if not calls:
        return None

    out = select.copy()
    twins = dict(zip(map(id, select.walk()), out.walk()))
    parts_alias = ctx.fresh("_dl_e")
    keys = [exp.alias_(b.copy(), f"_dl_j{n}") for n, (_, b) in enumerate(pairs, 1)]
    parts: list[tuple[exp.Expression, str]] = []  # (the part's call, its column): one column per distinct call
    for call in calls:
        name = next((n for c, n in parts if c == call), None)
        if name is None:
            name = f"_dl_p{len(parts) + 1}"
            parts.append((call, name))
        part = exp.column(name, table=parts_alias)
        combined = PARTS[type(call)](this=part)
        if isinstance(call, exp.Count):  # (a key no r row meets: NULL, counted 0; SUM's HUGEINT back to BIGINT)
            combined = exp.cast(exp.func("coalesce", combined, exp.Literal.number(0)), "BIGINT")
        twins[id(call)].replace(combined)
    grouped = exp.select(*keys, *[exp.alias_(c.copy(), n) for c, n in parts]).from_(right.copy(), copy=False)
    grouped = grouped.group_by(*[b.copy() for _, b in pairs], copy=False)
    on = exp.and_(*[exp.EQ(this=a.copy(), expression=exp.column(k.alias, table=parts_alias))
                    for (a, _), k in zip(pairs, keys)])
    out_join = out.args["joins"][0]
    out_join.set("this", exp.Subquery(this=grouped, alias=exp.TableAlias(this=exp.to_identifier(parts_alias))))
    out_join.set("on", on)
    return out


def _equated(on: exp.Expression | None, l_alias: str, r_alias: str) -> list[tuple[exp.Column, exp.Column]]:
    """``on``'s conjuncts as (column of ``l_alias``, column of ``r_alias``) equated pairs; [] unless every conjunct
    is one."""
    pairs = [equated_columns(c, l_alias, r_alias) for c in conjuncts(on)]
    return [] if None in pairs else pairs


def _part_of(call: exp.AggFunc, alias: str) -> bool:
    """Is ``call`` COUNT, MIN or MAX of one column of ``alias``, with nothing else (DISTINCT, ORDER BY, more
    arguments)?"""
    if type(call) not in PARTS or not column_of(call.this, alias):
        return False
    return not any(v for k, v in call.args.items() if k not in ("this", "big_int"))  # (big_int: COUNT's type)
