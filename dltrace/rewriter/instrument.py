"""Bottom-up instrumentation of a normalised query: every query node gets lineage slot columns.

The order of rules within a SELECT follows evaluation order: CTEs, then FROM/JOIN (base tables, derived
tables, decorrelated subqueries), then the subqueries left in predicates and projections, then either
aggregation (DLUNION) or projection, then DISTINCT. Set operations align and group their sides.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.rules.aggregate import aggregate, is_aggregate
from dltrace.rewriter.rules.distinct import group_all
from dltrace.rewriter.rules.output import project
from dltrace.rewriter.rules.setops import instrument_setop
from dltrace.rewriter.rules.sources import from_slots
from dltrace.rewriter.rules.subqueries import predicate_slots
from dltrace.rewriter.slots import Context, Exported


def instrument(node: exp.Expression, ctx: Context, final: bool = False) -> tuple[exp.Expression, list[Exported]]:
    """Instrument ``node`` (a SELECT, a set operation or a parenthesised query) in place."""
    if isinstance(node, exp.Subquery):
        inner, exported = instrument(node.this, ctx, final)
        node.set("this", inner)
        return node, exported
    if isinstance(node, exp.Select):
        return instrument_select(node, ctx, final)
    if isinstance(node, exp.SetOperation):
        ctx = _with_ctes(node, ctx)
        return instrument_setop(node, ctx, instrument, final)
    raise UnsupportedQuery(f"{type(node).__name__} has no lineage rule, at {position(node)}")


def _with_ctes(node: exp.Expression, ctx: Context) -> Context:
    with_ = node.args.get("with_")
    if not with_:
        return ctx
    ctx = ctx.scoped()
    for cte in with_.expressions:
        inner, exported = instrument(cte.this, ctx, final=False)
        cte.set("this", inner)
        ctx.ctes[cte.alias_or_name] = exported
    return ctx


def instrument_select(select: exp.Select, ctx: Context, final: bool) -> tuple[exp.Expression, list[Exported]]:
    ctx = _with_ctes(select, ctx)
    slots = from_slots(select, ctx, instrument)
    slots += predicate_slots(select, ctx, instrument)
    distinct = select.args.get("distinct")
    if distinct is not None:
        select.set("distinct", None)
    grouped = is_aggregate(select)
    if distinct is None:
        return (aggregate if grouped else project)(select, slots, ctx, final)
    # DISTINCT: compute the rows with their lineage, then merge duplicates with a GROUP BY.
    select, exported = (aggregate if grouped else project)(select, slots, ctx, False)
    holder = ctx.fresh("_dl_d")
    outer = group_all(select, exported, holder)
    return aggregate(outer, [e.via(holder) for e in exported], ctx, final)
