"""GROUP BY / global aggregates / HAVING: DLUNION of the group's rows.

Scalar rids are aggregated into a set; sets are merged; a constant slot (the same set on every row, e.g. a
cross-joined scalar subquery) is taken once with ANY_VALUE rather than re-unioned for every row.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.rules.late_lineage import late_group_lineage
from dltrace.rewriter.slots import Context, Exported, Slot, by_table, slot_name


def dlunion(group: list[Slot], ctx: Context, table: str) -> tuple[list[exp.Expression], list[bool]]:
    """The aggregate expressions whose union is the group's lineage of ``table`` (non-constant part)."""
    fns, wide = ctx.fns, table in ctx.wide
    rids = [s.expr for s in group if s.kind == "rid"]
    parts: list[exp.Expression] = []
    if len(rids) == 1:
        parts.append(fns.dlunion_rids(rids[0], wide))
    elif rids:
        parts.append(fns.dlunion_rid_lists(rids, wide))
    parts += [fns.dlunion_sets(s.expr, wide) for s in group if s.kind == "set" and not s.const and not s.grouped]
    nullable = [False] * len(parts)
    for s in group:
        if s.grouped:
            parts.append(s.expr)
            nullable.append(True)
    return parts, nullable


def aggregate(select: exp.Select, slots: list[Slot], ctx: Context, final: bool) -> tuple[exp.Select, list[Exported]]:
    """Add DLUNION columns to an aggregating SELECT."""
    late = late_group_lineage(select, slots, ctx, final)
    if late is not None:  # groups a HAVING filters: their lineage is found again for the kept groups only
        select, slots = late
    global_agg = not select.args.get("group")
    taken = set(select.named_selects)
    exported: list[Exported] = []
    fns = ctx.fns
    hoisted = ctx.take_hoisted() if final else {}
    groups = by_table(slots)
    for table in dict.fromkeys([*groups, *hoisted]):
        group = groups.get(table, [])
        wide = table in ctx.wide
        parts, nullable = dlunion(group, ctx, table)
        consts = [fns.any_value(s.expr) for s in group if s.const]
        if final:
            merged = fns.final_union(parts + consts, nullable + [True] * len(consts),
                                     [h.copy() for h in hoisted.get(table, [])], wide)
            name = ctx.output_name(table, taken)
            select.select(exp.alias_(merged, name, quoted=True), append=True, copy=False)
            exported.append(Exported(name, table, "set"))
            continue
        if parts:
            name = slot_name(table, taken)
            select.select(exp.alias_(fns.union(parts, nullable, wide), name, quoted=True), append=True, copy=False)
            exported.append(Exported(name, table, "set", const=global_agg, nullable=global_agg))
        for c in consts:
            name = slot_name(table, taken)
            select.select(exp.alias_(c, name, quoted=True), append=True, copy=False)
            exported.append(Exported(name, table, "set", const=True, nullable=True))
    return select, exported
