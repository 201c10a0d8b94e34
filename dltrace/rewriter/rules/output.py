"""Projection, WHERE, ORDER BY, LIMIT, window functions: a row keeps its input row's lineage.

Intermediate queries pass their slots through as extra columns (scalar rids stay scalar); the outermost
query merges each table's slots into the one final ``dl_<table>`` set column.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.slots import Context, Exported, Slot, by_table, slot_name


def final_set(slots: list[Slot], ctx: Context, table: str, hoisted: list[exp.Expression] = ()) -> exp.Expression:
    """One row's lineage set of ``table`` from its row-level slots and hoisted constants (never NULL)."""
    fns, wide = ctx.fns, table in ctx.wide
    rids = [s for s in slots if s.kind == "rid"]
    sets = [s for s in slots if s.kind == "set"]
    parts, nullable = [], []
    if rids:
        parts.append(fns.set_of_rids([s.expr for s in rids], wide))
        nullable.append(False)
    for s in sets:
        parts.append(s.expr)
        nullable.append(s.nullable)
    if len(parts) == 1 and not any(nullable) and not hoisted and not fns.lists_inside:
        return parts[0]  # one set that is never NULL is final as it is (with lists inside, a bitmap is built)
    return fns.final_union(parts, nullable, [h.copy() for h in hoisted], wide)


def project(select: exp.Select, slots: list[Slot], ctx: Context, final: bool) -> tuple[exp.Select, list[Exported]]:
    """Add the lineage columns of a non-aggregating SELECT."""
    taken = set(select.named_selects)
    exported: list[Exported] = []
    if final:
        hoisted = ctx.take_hoisted()
        groups = by_table(slots)
        for table in dict.fromkeys([*groups, *hoisted]):
            name = ctx.output_name(table, taken)
            expr = final_set(groups.get(table, []), ctx, table, hoisted.get(table, []))
            select.select(exp.alias_(expr, name, quoted=True), append=True, copy=False)
            exported.append(Exported(name, table, "set"))
        return select, exported
    for s in slots:
        name = slot_name(s.table, taken)
        select.select(exp.alias_(s.expr, name, quoted=True), append=True, copy=False)
        exported.append(Exported(name, s.table, s.kind, s.const, s.nullable))
    return select, exported
