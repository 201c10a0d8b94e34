"""UNION [ALL], INTERSECT, EXCEPT.

UNION ALL keeps each row's lineage; the sides' slots are aligned column by column (a table one side lacks
is NULL there). UNION, INTERSECT and EXCEPT are distinct: both sides are stacked with a side marker and
grouped by every output column. UNION's row gets the DLUNION of its duplicates, INTERSECT's the rows of
both sides that match it, EXCEPT's the left rows only (witness) or also all of the right side (control).

INTERSECT ALL and EXCEPT ALL keep a value ``min(l, r)`` / ``l - r`` times (``l``, ``r``: its rows on each side).
The copies are equal, so no copy can be told from another: each gets the lineage of the distinct operation's
row (all matching rows, as DISTINCT gives a row all its duplicates). The grouped row counts its sides' rows and
is repeated that many times (a series unnested), before the operation's ORDER BY / LIMIT, which apply to the
copies. Valid because grouping by every output column matches rows as the set operation does (NULLs equal).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.rules.aggregate import aggregate
from dltrace.rewriter.rules.distinct import group_all, requalify_order, user_columns
from dltrace.rewriter.rules.output import final_set
from dltrace.rewriter.rules.subqueries import lineage_join
from dltrace.rewriter.slots import Context, Exported, Slot, by_table

SIDE = "_dl_side"
COPIES = "_dl_copies"


def _align(query: exp.Query, exported: list[Exported], tables: list[str], kinds: dict[str, str],
           ctx: Context, final: bool, side: int | None, counted_only: bool = False) -> exp.Select:
    """Wrap one side so it outputs its columns plus exactly one slot per table in ``tables`` order (NULL slots
    where the side is ``counted_only``: EXCEPT's right rows, which give a kept row no lineage, and whose number
    alone EXCEPT ALL reads)."""
    holder = ctx.fresh("_dl_s")
    _unique_names(query, exported)
    cols = user_columns(query, exported)
    outer = exp.select(*[exp.column(c, table=holder, quoted=True).as_(c, quoted=True) for c in cols])
    outer = outer.from_(exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(holder))))
    groups = by_table([e.via(holder) for e in exported])
    for table in tables:
        slots = [] if counted_only else groups.get(table, [])
        if final:
            expr = final_set(slots, ctx, table) if slots else ctx.fns.finish(ctx.fns.null_set(), table in ctx.wide)
        elif not slots:
            expr = ctx.fns.null_rid() if kinds[table] == "rid" else ctx.fns.null_set()
        elif kinds[table] == "rid":
            expr = slots[0].expr
        else:
            expr = _row_set(slots, ctx, table)
        name = ctx.names.get(table, f"dl_{table}") if final else f"dl_{table}"
        outer.select(exp.alias_(expr, name, quoted=True), append=True, copy=False)
    if side is not None:
        outer.select(exp.alias_(exp.Literal.number(side), SIDE), append=True, copy=False)
    return outer


def _unique_names(query: exp.Query, exported: list[Exported]) -> None:
    """Give a side's columns that repeat a name (``SELECT 0, 0``, ``SELECT k, k``) names of their own, by
    position (``_dl_c<i>``): a set operation stacks its sides by position, so a side's names are only its own
    (the output's are the engine's, read apart), and the side is read through them by name. A side that is no
    SELECT keeps its names (refused below when they repeat)."""
    while isinstance(query, exp.Subquery):  # a parenthesised side: its SELECT names the columns
        query = query.this
    if not isinstance(query, exp.Select):
        return
    lineage = {e.name for e in exported}
    seen: set[str] = set()
    for i, item in enumerate(query.expressions):
        name = item.alias_or_name
        if name in lineage:
            continue
        if not name or name in seen:
            alias = f"_dl_c{i}"
            item.replace(exp.alias_(item.unalias() if isinstance(item, exp.Alias) else item, alias, quoted=True))
            name = alias
        seen.add(name)


def _row_set(slots: list[Slot], ctx: Context, table: str) -> exp.Expression:
    fns, wide = ctx.fns, table in ctx.wide
    rids = [s.expr for s in slots if s.kind == "rid"]
    parts = [fns.set_of_rids(rids, wide)] if rids else []
    nullable = [False] * len(parts)
    for s in slots:
        if s.kind == "set":
            parts.append(s.expr)
            nullable.append(s.nullable)
    return fns.union(parts, nullable, wide)


def _kinds(sides: list[list[Exported]], tables: list[str]) -> dict[str, str]:
    kinds = {}
    for t in tables:
        per_side = [[e for e in ex if e.table == t] for ex in sides]
        scalar = all(len(p) <= 1 and all(e.kind == "rid" for e in p) for p in per_side)
        kinds[t] = "rid" if scalar else "set"
    return kinds


def instrument_setop(node: exp.SetOperation, ctx: Context, final: bool):
    """Instrument a set operation; returns the new node and its exported slots."""
    distinct = node.args.get("distinct") is not False
    right_copy = node.right.copy() if isinstance(node, exp.Except) and ctx.control else None
    left, lex = ctx.instrument(node.left, ctx, final=False)
    right, rex = ctx.instrument(node.right, ctx, final=False)
    tables = list(dict.fromkeys([e.table for e in lex] + [e.table for e in rex]))
    kinds = _kinds([lex, rex], tables)
    union_all = isinstance(node, exp.Union) and not distinct
    side = None if union_all else 0
    lq = _align(left, lex, tables, kinds, ctx, final and union_all, side)
    rq = _align(right, rex, tables, kinds, ctx, final and union_all, None if side is None else 1,
                counted_only=isinstance(node, exp.Except))
    stacked = exp.union(lq, rq, distinct=False, copy=False)
    stacked_ex = [
        Exported(ctx.names.get(t, f"dl_{t}") if final and union_all else f"dl_{t}", t,
                 "set" if final and union_all else kinds[t], nullable=True)
        for t in tables
    ]
    after = {k: node.args[k] for k in ("order", "limit", "offset") if node.args.get(k) is not None}
    bag = not distinct and not union_all  # INTERSECT ALL / EXCEPT ALL: its ORDER BY / LIMIT apply to the copies
    if not bag:  # (on the stacked rows: a UNION ALL's, or moved by group_all onto the distinct rows)
        for k, v in after.items():
            stacked.set(k, v)
    if union_all:
        return stacked, stacked_ex
    holder = ctx.fresh("_dl_u")
    outer = group_all(stacked, stacked_ex + [Exported(SIDE, "", "rid")], holder)
    side_col = exp.column(SIDE, table=holder)
    slots = [e.via(holder) for e in stacked_ex]
    left_rows, right_rows = _side_rows(side_col, 0), _side_rows(side_col, 1)  # (read under ALL)
    if isinstance(node, exp.Intersect):
        outer.set("having", exp.Having(this=exp.and_(
            exp.EQ(this=exp.Min(this=side_col.copy()), expression=exp.Literal.number(0)),
            exp.EQ(this=exp.Max(this=side_col.copy()), expression=exp.Literal.number(1)))))
    elif isinstance(node, exp.Except):
        # a value kept (l - r times under ALL) where its left rows outnumber its right ones (where it has none)
        kept = exp.GT(this=left_rows.copy(), expression=right_rows.copy()) if bag else \
            exp.EQ(this=exp.Max(this=side_col.copy()), expression=exp.Literal.number(0))
        outer.set("having", exp.Having(this=kept))
        if right_copy is not None:
            slots += lineage_join(outer, right_copy, ctx)
    if bag:
        copies = exp.Sub(this=left_rows, expression=right_rows) if isinstance(node, exp.Except) else \
            exp.Case().when(exp.LTE(this=left_rows, expression=right_rows), left_rows.copy()).else_(right_rows.copy())
        outer.select(exp.alias_(copies, COPIES, quoted=True), append=True, copy=False)
    grouped, exported = aggregate(outer, slots, ctx, final)
    if not bag:
        return grouped, exported
    return _repeated(grouped, after, ctx), exported


def _side_rows(side_col: exp.Column, side: int) -> exp.Expression:
    """The number of the group's rows from side ``side`` (0: left, 1: right)."""
    counted = exp.Case().when(exp.EQ(this=side_col.copy(), expression=exp.Literal.number(side)), exp.Literal.number(1))
    return exp.Count(this=counted)  # (a BIGINT on both engines, as a series' end)


def _repeated(grouped: exp.Select, after: dict, ctx: Context) -> exp.Select:
    """Each row of ``grouped`` repeated ``COPIES`` times, without that column, then ``after`` (ORDER BY /
    LIMIT / OFFSET of the set operation) over the copies."""
    keep = [n for n in grouped.named_selects if n != COPIES]
    holder, repeated = ctx.fresh("_dl_r"), ctx.fresh("_dl_r")
    series = exp.Explode(this=exp.GenerateSeries(start=exp.Literal.number(1),
                                                 end=exp.column(COPIES, table=holder, quoted=True)))
    inner = exp.select(*[exp.column(n, table=holder, quoted=True).as_(n, quoted=True) for n in keep],
                       exp.alias_(series, "_dl_copy", quoted=True))
    inner = inner.from_(exp.Subquery(this=grouped, alias=exp.TableAlias(this=exp.to_identifier(holder))))
    out = exp.select(*[exp.column(n, table=repeated, quoted=True).as_(n, quoted=True) for n in keep])
    out = out.from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(repeated))))
    for k, v in after.items():
        out.set(k, requalify_order(v, keep, repeated) if k == "order" else v)
    return out
