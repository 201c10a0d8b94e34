"""Add the lineage columns: bottom-up, every query node gets lineage slot columns (one rule per operator).

The order of rules within a SELECT follows evaluation order: CTEs, then FROM/JOIN (base tables, derived
tables, decorrelated subqueries), then the subqueries left in clauses, then either aggregation (DLUNION) or
projection, then DISTINCT. Set operations align and group their sides. At the root, each base table read
gets one final ``dl_<table>`` column (an empty one where the table is read only where witnesses are empty,
under negation), and the hoisted constant lineage's CTEs join the query's WITH.

With ``context.shared_lineage`` the hoisted lineage -- the same for every output row -- is not merged into each
row: ``meta[SHARED_LINEAGE]`` is a one-row query of its own giving it per base table (same column names), and
the result keeps it once. Valid because hoisting is (:func:`.rules.subqueries.reaches_every_output_row`):
every output row's lineage is its row-level lineage plus exactly this.

The result's ``meta[LINEAGE_COLUMNS]`` maps each base table to its lineage column.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from dltrace.engines.lineage_sql import is_bitmap_build
from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.analysis import base_tables, is_aggregate
from dltrace.rewriter.shape import one_row_aggregate, ungrouped
from dltrace.rewriter.lineage_on import ON_COLUMN
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.scalar_lookups import guard_lineage, item_guards
from dltrace.rewriter.rules.aggregate import aggregate
from dltrace.rewriter.rules.covered_lineage import without_covered
from dltrace.rewriter.rules.distinct import group_all
from dltrace.rewriter.rules.nested_lineage import nested_group_lineage
from dltrace.rewriter.rules.output import project
from dltrace.rewriter.rules.setops import instrument_setop
from dltrace.rewriter.rules.sources import from_slots
from dltrace.rewriter.rules.subqueries import predicate_slots
from dltrace.rewriter.slots import Context, Exported

LINEAGE_COLUMNS = "dl_lineage_columns"  # meta key of the rewritten root: {base table: lineage column}
SHARED_LINEAGE = "dl_shared_lineage"  # meta key of the rewritten root: the one-row query of the shared lineage


def instrument(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    root = exp.maybe_copy(expression, copy)
    on = context.on
    ctx = Context(fns=context.fns, semantics=context.semantics, wide=context.wide, root=root,
                  instrument=instrument_node, from_slots=from_slots, composed=context.composed,
                  shared=context.shared_lineage, estimate_rows=context.estimate_rows,
                  integer_range=context.integer_range,
                  read_in_place=context.read_in_place, schema=context.schema or {}, kept_rids=context.kept_rids)
    if on is not None:
        ctx.only_tables = on.tables
        if on.table:
            ctx.names = {on.table: ON_COLUMN}
    # a composed source stands for the base tables its rows came from
    bases = [b for t in base_tables(root) for b in ([b for b, _ in ctx.composed[t]] if t in ctx.composed else [t])]
    read = [t for t in dict.fromkeys(bases) if ctx.only_tables is None or t in ctx.only_tables]
    out, exported = instrument_node(root, ctx, final=True)
    lineage = {e.table: e.name for e in exported}
    # (a table the shared lineage has and no row carries: base_tables() leaves out a name some CTE also has)
    read += [t for t in dict.fromkeys(t for t, _ in ctx.hoisted) if t not in read]
    for table in read:
        if table not in lineage:  # read only where witnesses are empty (a negated subquery): an empty column
            lineage[table] = f"dl_{table}"
            empty = exp.alias_(ctx.fns.finish(ctx.fns.null_set(), table in ctx.wide), lineage[table], quoted=True)
            for select in [out] if isinstance(out, exp.Select) else [out.left, out.right]:
                select.select(empty.copy(), append=True, copy=False)
    lineage = _in_order(out, lineage, ctx.root_order)
    if ctx.shared and ctx.hoisted:  # (the user's CTEs stay on the root when a wrapper reads it)
        out.meta[SHARED_LINEAGE] = _shared_query(out.args.get("with_") or root.args.get("with_"), ctx, lineage)
    elif ctx.hoisted_ctes:
        if out is not root and root.args.get("with_"):  # the wrapper must see the user's CTEs too
            out.set("with_", root.args["with_"])
            root.set("with_", None)
        with_ = out.args.get("with_") or exp.With(expressions=[])
        with_.set("expressions", [*with_.expressions, *ctx.hoisted_ctes])
        out.set("with_", with_)
    out.meta[LINEAGE_COLUMNS] = lineage
    return out


def _in_order(out: exp.Expression, lineage: dict[str, str], order: list[str]) -> dict[str, str]:
    """The lineage columns of a root SELECT with those of ``order``'s tables first, in that order: a table whose
    rows' lineage was left to the shared lineage keeps the place its rows gave it (its column, empty, was
    added after the others)."""
    ranked = sorted(lineage, key=lambda t: order.index(t) if t in order else len(order))
    if ranked == list(lineage) or not isinstance(out, exp.Select):
        return lineage
    names = {lineage[t] for t in ranked}
    columns = {p.alias_or_name: p for p in out.expressions if p.alias_or_name in names}
    own = [p for p in out.expressions if p.alias_or_name not in names]
    out.set("expressions", own + [columns[lineage[t]] for t in ranked])
    return {t: lineage[t] for t in ranked}


def _shared_query(user: exp.With | None, ctx: Context, lineage: dict[str, str]) -> exp.Select:
    """``WITH <the query's CTEs>, <the hoisted aggregates> SELECT <union per table> FROM <them>``: one row."""
    hoisted = {cte.alias_or_name: cte for cte in ctx.hoisted_ctes}
    read = _one_row_reads(ctx.hoisted, hoisted)
    found: dict[str, list[exp.Expression]] = {}
    for table, sub in ctx.hoisted:
        found.setdefault(table, []).append(sub if read is None else read[id(sub)])
    fns = ctx.fns
    if fns.builds_bitmaps and fns.lists_inside and fns.finish_on_read:
        # one row, read by the session's result: its ids as lists, the bitmap built when read (NULL: none)
        columns = [fns.concat([_unbuilt(s) for s in subs], [True] * len(subs)) for subs in found.values()]
    else:
        columns = [fns.final_union([], [], subs, table in ctx.wide) for table, subs in found.items()]
    shared = exp.select(*[exp.alias_(c, lineage[table], quoted=True) for c, table in zip(columns, found)])
    ctes = [c.copy() for c in user.expressions] if user else []
    if read is None:
        shared.set("with_", exp.With(expressions=[*ctes, *ctx.hoisted_ctes]))
        return shared
    for name in hoisted:  # one row each: their cross join is the one row, every aggregate computed once
        shared = shared.join(exp.to_table(name, quoted=True), join_type="CROSS", copy=False) if shared.args.get(
            "from_") else shared.from_(exp.to_table(name, quoted=True), copy=False)
    shared.set("with_", exp.With(expressions=[*ctes, *[_without_any_value(c) for c in hoisted.values()]]))
    return shared


def _one_row_reads(subs: list[tuple[str, exp.Expression]],
                   hoisted: dict[str, exp.CTE]) -> dict[int, exp.Expression] | None:
    """Each hoisted value ``(SELECT <e> AS c FROM h)`` as ``<e>`` over ``h``'s columns, for a query that reads
    every hoisted CTE once in its FROM: valid when each is a one-row query, as the scalar
    subquery reads one row. DuckDB computes a CTE read by several scalar subqueries once and then reads it
    once per subquery, and the cross join of the CTEs halved Q11's shared lineage query (8.3 -> 4.3 ms, with
    :func:`_without_any_value`). None when a value or a CTE has another shape: the scalar subqueries stay."""
    # hoist() makes each CTE an ungrouped aggregate of its subquery's lineage (its calls are the engine's, which
    # sqlglot may not know as aggregates): one row when nothing filters or limits the groups
    if not all(ungrouped(cte.this) for cte in hoisted.values()):
        return None
    out = {}
    for _, sub in subs:
        query = sub.this if isinstance(sub, exp.Subquery) else None
        if not (isinstance(query, exp.Select) and len(query.expressions) == 1 and query.args.get("from_")
                and not any(query.args.get(k) for k in ("joins", "where", "group", "having", "limit"))):
            return None
        source = query.args["from_"].this
        if not isinstance(source, exp.Table) or source.name not in hoisted:
            return None
        value = query.expressions[0].unalias().copy()
        for column in value.find_all(exp.Column):
            column.set("table", exp.to_identifier(source.name, quoted=True))
        out[id(sub)] = value
    return out


def _without_any_value(cte: exp.CTE) -> exp.CTE:
    """``SELECT ANY_VALUE(q.c) AS c FROM (<one row>) AS q`` as ``SELECT q.c AS c FROM (...) AS q``: the same one
    row, without copying its lists through an aggregate (Q11: 5.6 -> 3.8 ms)."""
    body = cte.this
    source = body.args.get("from_").this if body.args.get("from_") else None
    if not (isinstance(source, exp.Subquery) and one_row_aggregate(source.this) and not any(
            body.args.get(k) for k in ("joins", "where", "group", "having", "qualify", "limit", "offset"))):
        return cte
    plain = []
    for projection in body.expressions:
        value = projection.unalias()
        if not (isinstance(value, exp.Anonymous) and value.name.lower() == "any_value"
                and isinstance(value.expressions[0], exp.Column)):
            return cte
        plain.append(exp.alias_(value.expressions[0].copy(), projection.alias_or_name, quoted=True))
    cte = cte.copy()
    cte.this.set("expressions", plain)
    return cte


def _unbuilt(sub: exp.Expression) -> exp.Expression:
    """A hoisted lineage value ``(SELECT dl_bitmap_build(<list>) AS c FROM h)`` as ``(SELECT <list> AS c FROM h)``
    (``dl_bitmap_build(h.c)`` as ``h.c``)."""
    sub = sub.copy()
    if is_bitmap_build(sub):  # (a value read from the cross join of the hoisted CTEs)
        return sub.expressions[0]
    query = sub.this if isinstance(sub, exp.Subquery) else None
    if isinstance(query, exp.Select) and len(query.expressions) == 1:
        projection = query.expressions[0]
        value = projection.unalias()
        if is_bitmap_build(value):
            value.replace(value.expressions[0])
    return sub


def instrument_node(node: exp.Expression, ctx: Context, final: bool = False) -> tuple[exp.Expression, list[Exported]]:
    """Instrument ``node`` (a SELECT, a set operation or a parenthesised query) in place."""
    if isinstance(node, exp.Subquery):
        inner, exported = instrument_node(node.this, ctx, final)
        node.set("this", inner)
        return node, exported
    if isinstance(node, exp.Select):
        return _instrument_select(node, ctx, final)
    if isinstance(node, exp.SetOperation):
        out, exported = instrument_setop(node, _with_ctes(node, ctx), final)
        if out is not node and node.args.get("with_"):  # the set operation's CTEs go with what replaces it
            out.set("with_", node.args["with_"])
            node.set("with_", None)
        return out, exported
    # (in SQL's words: "Values has no lineage rule" named sqlglot's class to a new user)
    what = {exp.Values: "a VALUES list", exp.Table: "a table"}.get(type(node), f"a {type(node).__name__} node")
    raise UnsupportedQuery(f"{what} where a query stands is not supported (select from it: SELECT * FROM ...), at "
                           f"{position(node)}")


def _with_ctes(node: exp.Expression, ctx: Context) -> Context:
    with_ = node.args.get("with_")
    if not with_:
        return ctx
    ctx = ctx.scoped()
    recursive = bool(with_.args.get("recursive"))
    for cte in with_.expressions:
        if recursive:
            ctx.cte_bodies.pop(cte.alias_or_name, None)
        else:  # as written: a subquery's whole lineage may read it instead of the instrumented CTE
            ctx.cte_bodies[cte.alias_or_name] = cte.this.copy()
        inner, exported = instrument_node(cte.this, ctx, final=False)
        cte.set("this", inner)
        ctx.ctes[cte.alias_or_name] = exported
    return ctx


def _instrument_select(select: exp.Select, ctx: Context, final: bool) -> tuple[exp.Expression, list[Exported]]:
    ctx = _with_ctes(select, ctx)
    nested = nested_group_lineage(select, ctx, final)
    if nested is not None:  # groups of many small groups: their rows found again (before the FROM is instrumented)
        return nested
    slots = from_slots(select, ctx)
    slots += predicate_slots(select, ctx)
    if select is ctx.root:
        ctx.root_order.extend(dict.fromkeys(s.table for s in slots))
    # the rows' lineage a subquery hoisted from this SELECT holds whole is not carried (rules/covered_lineage.py)
    slots = without_covered(select, slots, [q for s, q in ctx.hoisted_from if s is select], ctx)
    distinct = select.args.get("distinct")
    if distinct is not None:
        select.set("distinct", None)
    grouped = is_aggregate(select)
    # lookups' tests, kept in the lineage too, where no pruned item drops them: a test over the group's
    # aggregates in the aggregated column, one of a row's values (also a key a semi-join groups by) in its slot
    guards = item_guards(select) if ctx.fns.checks_unread_lookups else []
    of_groups = [g for g in guards if g.args["ifs"][0].this.find(exp.AggFunc)]
    of_rows = [g for g in guards if g not in of_groups]
    if of_rows and slots:
        first = next((i for i, s in enumerate(slots) if not s.const), 0)
        slots = [*slots[:first], replace(slots[first], expr=guard_lineage(slots[first].expr, of_rows)),
                 *slots[first + 1:]]
    if distinct is None:
        out, exported = (aggregate if grouped else project)(select, slots, ctx, final)
        _guard_column(out, of_groups, exported)
        return out, exported
    # DISTINCT: compute the rows with their lineage, then merge duplicates with a GROUP BY.
    select, exported = (aggregate if grouped else project)(select, slots, ctx, False)
    _guard_column(select, of_groups, exported)
    holder = ctx.fresh("_dl_d")
    outer = group_all(select, exported, holder)
    return aggregate(outer, [e.via(holder) for e in exported], ctx, final)


def _guard_column(select: exp.Select, guards: list[exp.Case], exported: list[Exported]) -> None:
    """Test the lookups' ``guards`` of a grouped SELECT in its first lineage column (after HAVING, as the item)."""
    kept = [g for g in guards if g.find_ancestor(exp.Select) is select]
    names = {e.name for e in exported}
    column = next((a for a in select.expressions if isinstance(a, exp.Alias) and a.alias in names), None)
    if kept and column is not None:
        column.set("this", guard_lineage(column.this, kept))
