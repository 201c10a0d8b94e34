"""Lineage after HAVING: an aggregate whose groups a HAVING filters gets its lineage for the kept groups only.

DLUNION in the aggregating SELECT itself builds a lineage set for every group before HAVING discards most of
them (TPC-H Q18's ``l_orderkey IN (SELECT l_orderkey ... GROUP BY l_orderkey HAVING sum(l_quantity) > 300)``
builds 1.5M sets to keep 57). Instead the groups are computed as written, and the rows of each kept group are
found again by its keys::

    SELECT ANY_VALUE(_dl_g.c) AS c, ..., DLUNION(_dl_i.r1), ...
    FROM (SELECT <the SELECT as written>, <key 1> AS _dl_k1, ...) AS _dl_g
    JOIN (SELECT <key 1> AS _dl_k1, ..., <rid 1> AS _dl_r1, ... FROM <its FROM> WHERE <its WHERE>) AS _dl_i
      ON _dl_g._dl_k1 IS NOT DISTINCT FROM _dl_i._dl_k1 AND ...
    GROUP BY _dl_g._dl_k1, ...

    [ORDER BY <the outermost query's ORDER BY, on the output columns it names>]

Valid (the same rows, each with the same lineage) when the SELECT
- has no LIMIT, OFFSET, QUALIFY or DISTINCT, and no ORDER BY unless it is the outermost query and every ORDER
  BY item is one of its output columns: the rebuilt SELECT sorts the same output rows by the same values (rows
  it ties are tied in the query as written too; without ORDER BY the order is the engine's choice either way);
- groups by plain expressions (no GROUPING SETS, ROLLUP, CUBE): every group is one row of ``_dl_g`` with
  distinct keys, and the rows of a group are exactly the input rows whose keys are not distinct from the
  group's (GROUP BY's own equivalence: NULLs together);
- takes its lineage from its FROM rows only (scalar rids: no subquery's lineage, no sets of a nested
  aggregate), so that re-reading the FROM finds all of it;
- reads base tables only (a derived table or a CTE would be computed a second time: no cheaper than a set per
  group), besides cross joins of exactly one row (an aggregate without GROUP BY, HAVING or LIMIT: an
  uncorrelated scalar subquery joined in for the HAVING, Q11's threshold) that no WHERE, key or lineage reads:
  each row of the FROM is one row of the FROM without them, so the second read leaves them out;
- is deterministic: the FROM, WHERE and keys read again give the same rows (no random or unknown function, no
  sampling, no subquery in a clause).
Every group has at least one input row, so the inner join keeps every group, and each output group holds one
row of ``_dl_g``: ANY_VALUE returns its values (the same on every joined row).
Applied where HAVING is present: its filter is what makes the second read cheaper than a set per group.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.build import add_join, ordered_like
from dltrace.rewriter.passes.key_types import may_hold_maps
from dltrace.rewriter.shape import NONDETERMINISTIC, one_row_aggregate, order_by_outputs
from dltrace.rewriter.slots import Context, Slot

_CLAUSES_KEPT_OFF = ("limit", "offset", "qualify", "distinct", "windows", "prewhere", "connect", "sample")


def late_group_lineage(select: exp.Select, slots: list[Slot], ctx: Context,
                       final: bool) -> tuple[exp.Select, list[Slot]] | None:
    """``select`` rebuilt to compute its groups' lineage after HAVING, with the slots to DLUNION, or None when
    the rewrite does not apply (see the module's conditions)."""
    if not select.args.get("having"):
        return None
    # the joins read again with the rows: all but one-row constants nothing below reads
    joins = [j for j in select.args.get("joins") or [] if not _one_row_constant(j, select, slots)]
    if not regroupable(select, slots, ctx, final, joins):
        return None
    kept, sorted_by = kept_order(select)
    if not kept:
        return None
    keys = list(select.args["group"].expressions)
    g, i = ctx.fresh("_dl_g"), ctx.fresh("_dl_i")
    key_names = [f"_dl_k{n}" for n in range(1, len(keys) + 1)]
    rows = exp.select(*[exp.alias_(k.copy(), n) for k, n in zip(keys, key_names)],
                      *[exp.alias_(s.expr.copy(), f"_dl_r{n}") for n, s in enumerate(slots, 1)])
    rows.set("from_", select.args["from_"].copy())
    if joins:
        rows.set("joins", [j.copy() for j in joins])
    if select.args.get("where"):
        rows.set("where", select.args["where"].copy())
    out = regrouped(select, keys, g, exp.Subquery(this=rows, alias=exp.TableAlias(this=exp.to_identifier(i))), i,
                    key_names, sorted_by, ctx)
    moved = [Slot(s.table, exp.column(f"_dl_r{n}", table=i), s.kind) for n, s in enumerate(slots, 1)]
    return out, moved


def kept_order(select: exp.Select) -> tuple[bool, list | None]:
    """(can the rebuilt SELECT keep ``select``'s order, the ORDER BY items with the output columns they name):
    without ORDER BY, (True, None); with one naming anything but output columns, (False, None)."""
    order = select.args.get("order")
    if order is None:
        return True, None
    sorted_by = order_by_outputs(order, select.expressions)
    return sorted_by is not None, sorted_by


def regrouped(select: exp.Select, keys: list[exp.Expression], g: str, rows: exp.Expression, r: str,
              key_names: list[str], sorted_by: list | None, ctx: Context, side: str | None = None,
              per_group: bool = False) -> exp.Select:
    """``SELECT ANY_VALUE(g.<output>) ... FROM (<select as written, its keys named key_names>) AS g JOIN <rows>
    ON g.<key> IS NOT DISTINCT FROM r.<key> ... GROUP BY g.<key> ... [ORDER BY <sorted_by>]``: ``select``'s
    groups, each joined to its rows (``rows``, aliased ``r``, naming the same keys); ``side`` "LEFT" keeps a
    group without rows. ``per_group``: ``rows`` holds one row per group (its lineage aggregated already), joined
    to it as it is: ``SELECT g.<output> ... FROM g JOIN <rows> ON ...``, no GROUP BY."""
    groups = select.copy()
    groups.set("order", None)
    groups.set("with_", None)  # (the CTEs stay with the rebuilt SELECT, where every part of it sees them)
    for key, name in zip(keys, key_names):
        groups.select(exp.alias_(key.copy(), name), append=True, copy=False)
    on = null_safe_keys(g, r, key_names)
    values = [exp.column(output_identifier(p), table=g) for p in select.expressions]
    out = exp.select(*[exp.alias_(v if per_group else ctx.fns.any_value(v), output_identifier(p))
                       for v, p in zip(values, select.expressions)])
    out = out.from_(exp.Subquery(this=groups, alias=exp.TableAlias(this=exp.to_identifier(g))), copy=False)
    add_join(out, rows, kind=None if side else "INNER", side=side, on=on)
    if not per_group:
        out = out.group_by(*[exp.column(n, table=g) for n in key_names], copy=False)
    if select.args.get("with_"):
        out.set("with_", select.args["with_"].copy())
    if sorted_by is not None:  # the outermost query's order, by the output columns it names
        out.set("order", exp.Order(expressions=[
            ordered_like(exp.column(n.copy()), o) for o, n in sorted_by]))
    return out


def null_safe_keys(left: exp.Identifier | str, right: str, names: list[str], quoted: bool = False) -> exp.Expression:
    """``left.<name> IS NOT DISTINCT FROM right.<name> AND ...``: the same group keys (GROUP BY's NULLs together);
    ``quoted``: every name quoted."""
    def column(name: str, table: exp.Identifier | str) -> exp.Column:
        if not quoted:  # (an Identifier copied: a node belongs to one tree)
            return exp.column(name, table=table.copy() if isinstance(table, exp.Identifier) else table)
        return exp.column(exp.to_identifier(name, quoted=True), table=exp.to_identifier(
            table.name if isinstance(table, exp.Identifier) else table, quoted=True))

    return exp.and_(*[exp.NullSafeEQ(this=column(n, left), expression=column(n, right)) for n in names])


def output_identifier(projection: exp.Expression) -> exp.Identifier:
    """The output column name of ``projection``, spelt (quoted or not) as the query spells it."""
    if isinstance(projection, exp.Alias):
        return projection.args["alias"].copy()
    if isinstance(projection, exp.Column):
        return projection.this.copy()
    return exp.to_identifier(projection.alias_or_name)


def _one_row_constant(join: exp.Join, select: exp.Select, slots: list[Slot]) -> bool:
    """Is ``join`` a cross join of one row that no WHERE, key or lineage of ``select`` reads (an uncorrelated
    scalar subquery joined in for HAVING, Q11's threshold)? Each row of the FROM is then one row of the FROM
    with it, so finding a group's rows again can leave it out."""
    source = join.this
    if not (isinstance(source, exp.Subquery) and isinstance(source.this, exp.Select)):
        return False
    if (join.side or join.args.get("on") or join.args.get("using")
            or (join.kind or "CROSS").upper() not in ("CROSS", "INNER")):
        return False
    if not one_row_aggregate(source.this):
        return False
    alias = source.alias_or_name
    readers = [select.args.get("where"), select.args.get("group"), *[s.expr for s in slots]]
    return not any(c.table == alias for node in readers if node is not None for c in node.find_all(exp.Column))


def plain_keys(select: exp.Select) -> bool:
    """Does ``select`` group by plain expressions (at least one; no GROUPING SETS, ROLLUP, CUBE, GROUP BY ALL)?
    Then each group is one output row with distinct keys, and its rows are the input rows whose keys are not
    distinct from the group's."""
    group = select.args.get("group")
    if group is None or not group.expressions or any(group.args.get(k) for k in ("grouping_sets", "cube",
                                                                                   "rollup", "all")):
        return False
    return not group.find(exp.Rollup, exp.Cube, exp.GroupingSets)  # (sqlglot keeps them among the keys)


def regroupable(select: exp.Select, slots: list[Slot], ctx: Context, final: bool, joins: list[exp.Join]) -> bool:
    """May ``select``'s groups be found again by their keys, reading ``joins`` besides its FROM (the module's
    conditions, HAVING aside)? ``slots``: its FROM rows' slots. Also: the engine compares the keys' values
    (Spark groups by a MAP and compares none)."""
    if not plain_keys(select):
        return False
    if any(select.args.get(k) for k in _CLAUSES_KEPT_OFF) or (select.args.get("order") and not final):
        return False
    if not slots or any(s.kind != "rid" or s.const or s.grouped for s in slots):
        return False
    names = [n.lower() for n in select.named_selects]
    if not all(names) or len(set(names)) != len(names) or any(n.startswith("_dl_") for n in names):
        return False
    for clause in ("where", "group", "having"):
        node = select.args.get(clause)
        if node is not None and node.find(*NONDETERMINISTIC, exp.Select, exp.Subquery, exp.Exists) is not None:
            return False
    if any(p.find(exp.Select, exp.Subquery, exp.Exists) for p in select.expressions):
        return False
    items = [select.args["from_"], *joins]
    if not all(isinstance(item.this, exp.Table) and item.this.name not in ctx.ctes for item in items):
        return False  # a derived table or a CTE would be computed twice
    if any(item.find(*NONDETERMINISTIC, exp.TableSample) for item in items):
        return False
    return ctx.fns.compares_maps or not may_hold_maps(select, ctx.schema, ctx.fns.dialects[0])
