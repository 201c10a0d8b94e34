"""FROM and JOIN: base tables carry ``{dl_rid}``; derived tables and CTEs carry their own slots; a join's
row carries the union of its inputs' slots (the null-padded side of an outer join contributes nothing).

A composed source (an earlier step's result, ``ctx.composed``) carries its rows' lineage already: one set per
base table it came from, read from its rows relation as "set" slots -- joins union them and aggregations
DLUNION them like the sets of a derived table that aggregates -- instead of its own ``dl_rid``."""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.names import RID
from dltrace.rewriter.analysis import is_decorrelated
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.decorrelate import REDUCTION
from dltrace.rewriter.passes.dictionary_ids import ON_TABLE
from dltrace.rewriter.rules.subqueries import decorrelated_slots
from dltrace.rewriter.shape import is_row_generator
from dltrace.rewriter.slots import Context, Slot


def from_slots(select: exp.Select, ctx: Context) -> list[Slot]:
    """The row-level slots of ``select``'s FROM clause and joins, instrumenting derived tables in place."""
    from_ = select.args.get("from_")
    if from_ is None:
        return []
    slots: list[Slot] = []
    entries = [(from_.this, None)] + [(j.this, j) for j in select.args.get("joins") or []]
    for source, join in entries:
        side = (join.side or "").upper() if join is not None else ""
        if source.meta.get(REDUCTION):
            continue  # a key list of dltrace's (passes/reduce_subqueries.py): it only removes rows, no lineage
        if is_decorrelated(source):
            found = decorrelated_slots(source, select, ctx)
        else:
            found = relation_slots(source, ctx)
        found = [replace(s, origin=source.alias_or_name) for s in found]
        if side in ("LEFT", "FULL"):
            found = [s.demoted() for s in found]
        if side in ("RIGHT", "FULL"):
            slots = [s.demoted() for s in slots]
        slots += found
    return slots


def relation_slots(source: exp.Expression, ctx: Context) -> list[Slot]:
    """Slots of one FROM item as seen by the query that reads it."""
    slots = _relation_slots(source, ctx)
    if ctx.only_tables is not None:
        slots = [s for s in slots if s.table in ctx.only_tables]
    return slots


def _relation_slots(source: exp.Expression, ctx: Context) -> list[Slot]:
    if isinstance(source, exp.Subquery) and source.meta.get(ON_TABLE):
        # an occurrence of the LINEAGE ON table: its dl_rid column is the row's dictionary id
        return [Slot(source.meta[ON_TABLE], exp.column(RID, table=source.alias_or_name, quoted=True), "rid")]
    if isinstance(source, exp.Table):
        alias = source.alias_or_name
        name = source.name
        if not source.args.get("db") and name in ctx.ctes:
            return [e.via(alias) for e in ctx.ctes[name]]
        if is_row_generator(source):
            return []  # literal rows: no base tuples behind them
        if not isinstance(source.this, exp.Identifier):
            raise UnsupportedQuery(f"table function in FROM has no row ids, at {position(source)}")
        if not source.args.get("db") and name.lower() in ctx.composed:
            return [Slot(base, ctx.fns.from_stored(exp.column(column, table=alias, quoted=True)), "set")
                    for base, column in ctx.composed[name.lower()]]
        rid = exp.column(RID, table=alias, quoted=True)
        kept = ctx.kept_rids
        return [Slot(name.lower(), kept.guard(rid) if kept and kept.table == name.lower() else rid, "rid")]
    if isinstance(source, exp.Subquery):
        inner, exported = ctx.instrument(source.this, ctx, final=False)
        source.set("this", inner)
        return [e.via(source.alias_or_name) for e in exported]
    if isinstance(source, (exp.Values, exp.Unnest)):
        return []  # literal rows: no base tuples behind them
    raise UnsupportedQuery(f"{type(source).__name__} in FROM is not supported, at {position(source)}")
