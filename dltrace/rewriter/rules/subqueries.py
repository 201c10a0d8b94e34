"""Subqueries: decorrelated ones (FROM/JOIN items made by decorrelation) and those left in a SELECT's clauses.

In witness mode a decorrelated subquery contributes its lineage only where it made the predicate true
(:func:`dltrace.rewriter.analysis.contributes`): IN/EXISTS joins used positively contribute their group's rows,
used under NOT (NOT EXISTS) nothing. A non-equality correlation keeps, beside each aggregated value, the rids
of its row, and only the elements the witness test accepts contribute: exact witnesses, never a superset.
A subquery left in a clause contributes its whole lineage (:func:`analysis.whole_lineage_subqueries`), once:
hoisted to the output when every row of its SELECT reaches the output, else cross joined as a constant.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.analysis import array_witness, contributes, whole_lineage_subqueries
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.array_witness import ArrayWitness
from dltrace.rewriter.rules.aggregate import aggregate
from dltrace.rewriter.slots import Context, Slot, by_table


def decorrelated_slots(sub: exp.Subquery, select: exp.Select, ctx: Context) -> list[Slot]:
    alias = sub.alias_or_name
    inner = sub.this
    if not contributes(sub, ctx.control):
        return []
    witness = array_witness(sub)
    if witness is not None:
        return _witness_array_slots(sub, select, ctx, witness)
    join = sub.parent if isinstance(sub.parent, exp.Join) else None
    single_row = join is not None and join.args.get("kind") == "CROSS" and not join.args.get("on")
    if single_row and reaches_every_output_row(select, ctx):
        hoist(inner.copy(), ctx)  # an uncorrelated scalar subquery: its lineage, once
        return []
    new_inner, exported = ctx.instrument(inner, ctx, final=False)
    sub.set("this", new_inner)
    return [e.via(alias) for e in exported]


def _on_field(body: exp.Expression, var: str, field: str) -> exp.Expression:
    """``body`` with the lambda variable ``var`` replaced by ``var.field``."""

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name == var:
            return exp.Dot(this=exp.to_identifier(var), expression=exp.to_identifier(field))
        if isinstance(node, exp.Identifier) and node.name == var and not isinstance(node.parent, (exp.Column, exp.Dot)):
            return exp.Dot(this=exp.to_identifier(var), expression=exp.to_identifier(field))
        return node

    return body.copy().transform(swap)


def _witness_array_slots(sub: exp.Subquery, select: exp.Select, ctx: Context, witness: ArrayWitness) -> list[Slot]:
    fns = ctx.fns
    alias = sub.alias_or_name
    inner: exp.Select = sub.this
    row_slots = ctx.from_slots(inner, ctx.scoped())
    if any(s.kind != "rid" for s in row_slots):
        raise UnsupportedQuery(
            f"a non-equality correlated subquery over an aggregate or set operation is not supported, at {position(select)}"
        )
    fields = {"v": witness.value.copy()}
    fields.update({f"r{i}": s.expr for i, s in enumerate(row_slots)})
    name = ctx.fresh("_dl_w")
    inner.select(exp.alias_(fns.agg_list(fns.struct(fields)), name), append=True, copy=False)
    column = exp.column(name, table=alias)
    out = []
    for table, group in by_table(row_slots).items():
        idx = [row_slots.index(s) for s in group]
        lists = []
        for var, body in witness.tests or (("_dl_x", exp.true()),):
            kept = fns.filter(column.copy(), _on_field(body, var, "v"), var)
            for i in idx:
                lists.append(fns.transform(kept.copy(), exp.Dot(this=exp.to_identifier(var), expression=exp.to_identifier(f"r{i}")), var))
        ids = lists[0] if len(lists) == 1 else fns._concat(lists, [False] * len(lists))
        out.append(Slot(table, fns.ids_to_set(ids, table in ctx.wide), "set", nullable=True))
    return out


def reaches_every_output_row(select: exp.Select, ctx: Context) -> bool:
    """Does every row of ``select`` feed the query's output rows unconditionally?

    True along FROM items, inner/cross joins and the preserved side of outer joins up to the query's
    root; false under a set operation, a CTE, a predicate, or the null-padded side of an outer join.
    Lineage that is constant over such a select can be computed once and added to every output row,
    instead of being copied into each of its rows (the cost Perm's rewrites pay).
    """
    if not ctx.fns.scalar_subquery_arguments:
        return False
    node = select
    while node is not ctx.root:
        parent = node.parent
        if parent is None:
            return False
        if isinstance(parent, exp.Join):
            if (parent.side or "").upper() in ("LEFT", "FULL") or parent.args.get("kind") in ("SEMI", "ANTI"):
                return False
        elif isinstance(parent, exp.Select):
            if node.arg_key not in ("from_", "joins"):
                return False
            if any((j.side or "").upper() in ("RIGHT", "FULL") for j in parent.args.get("joins") or []):
                return False
        elif not isinstance(parent, (exp.Subquery, exp.From)):
            return False
        node = parent
    return True


def _lineage_aggregate(query: exp.Expression, ctx: Context):
    """``SELECT DLUNION(...) FROM (query)``: the whole lineage of ``query`` as one row."""
    inner, exported = ctx.instrument(query, ctx.scoped(), final=False)
    holder = ctx.fresh("_dl_q")
    agg = exp.select().from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(holder))))
    return aggregate(agg, [e.via(holder) for e in exported], ctx, final=False)


def hoist(query: exp.Expression, ctx: Context) -> None:
    """Record the whole lineage of ``query`` as lineage of every output row of the root query."""
    agg, exported = _lineage_aggregate(query, ctx)
    name = ctx.fresh("_dl_h")
    ctx.hoisted_ctes.append(exp.CTE(this=agg, alias=exp.TableAlias(this=exp.to_identifier(name))))
    for e in exported:
        one = exp.select(exp.column(e.name, quoted=True)).from_(exp.Table(this=exp.to_identifier(name)))
        ctx.hoisted.append((e.table, exp.Subquery(this=one)))


def lineage_join(select: exp.Select, query: exp.Expression, ctx: Context) -> list[Slot]:
    """The whole lineage of ``query`` (one row) for every row of ``select``: hoisted to the output when
    every row of ``select`` reaches it, else cross joined (constant slots)."""
    if reaches_every_output_row(select, ctx):
        hoist(query, ctx)
        return []
    agg, agg_exported = _lineage_aggregate(query, ctx)
    if not agg.expressions:
        return []
    alias = ctx.fresh("_dl_l")
    sub = exp.Subquery(this=agg, alias=exp.TableAlias(this=exp.to_identifier(alias)))
    if select.args.get("from_") is None:
        select.from_(sub, copy=False)
    else:
        select.join(sub, join_type="CROSS", copy=False)
    return [Slot(e.table, exp.column(e.name, table=alias), "set", const=True, nullable=True) for e in agg_exported]


def predicate_slots(select: exp.Select, ctx: Context) -> list[Slot]:
    """Lineage of the subqueries still written inside ``select`` after decorrelation."""
    slots: list[Slot] = []
    for query in whole_lineage_subqueries(select, ctx.control):
        slots += lineage_join(select, query.copy(), ctx)
    return slots
