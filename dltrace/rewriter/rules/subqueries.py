"""Subqueries: decorrelated ones (FROM/JOIN items made by decorrelation) and those left in a SELECT's clauses.

In witness mode a decorrelated subquery contributes its lineage only where it made the predicate true
(:func:`dltrace.rewriter.analysis.contributes`): IN/EXISTS joins used positively contribute their group's rows,
used under NOT (NOT EXISTS) nothing. A non-equality correlation keeps, beside each aggregated value, the rids
of its row, and only the elements the witness test accepts contribute: exact witnesses, never a superset.
A subquery left in a clause (:func:`analysis.clause_subqueries`) contributes its whole lineage, once: hoisted to
the output when every row of its SELECT reaches the output, else cross joined as a constant; or, for IN / ANY /
ALL, exactly its witnesses (:func:`witness_slots`).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.analysis import (
    ClauseSubquery,
    array_witness,
    clause_subqueries,
    contributes,
    is_aggregate,
    witness_condition,
)
from dltrace.rewriter.build import add_join
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.array_witness import ArrayWitness, with_variable_as
from dltrace.rewriter.rules.aggregate import aggregate
from dltrace.rewriter.rules.whole_lineage import whole_lineage_query
from dltrace.rewriter.passes.decorrelate import SCALAR_IN_PLACE
from dltrace.rewriter.shape import (differs_in_another_statement, global_aggregate_row, in_aggregate_argument,
                                   makes_rows_from_nothing, one_row_aggregate)
from dltrace.rewriter.slots import Context, Slot, by_table


def decorrelated_slots(sub: exp.Subquery, select: exp.Select, ctx: Context) -> list[Slot]:
    alias = sub.alias_or_name
    inner = sub.this
    if not contributes(sub, ctx.control):
        return []
    witness = array_witness(sub)
    if witness is not None:
        return _witness_array_slots(sub, select, ctx, witness)
    condition = None if ctx.control else witness_condition(sub)
    join = sub.parent if isinstance(sub.parent, exp.Join) else None
    single_row = join is not None and join.args.get("kind") == "CROSS" and not join.args.get("on")
    if single_row and condition is None and differs_in_another_statement(inner) is None \
            and reaches_every_output_row(select, ctx, per_input_row=True):
        # an uncorrelated scalar subquery: its lineage, once (computed apart from its value: not for a random draw
        # or the clock, whose lineage the cross join carries beside the value, from the same evaluation)
        hoist(inner.copy(), ctx, select)
        return []
    new_inner, exported = ctx.instrument(inner, ctx, final=False)
    sub.set("this", new_inner)
    return [only_where(e.via(alias), condition) for e in exported]


def only_where(slot: Slot, condition: exp.Expression | None) -> Slot:
    """``slot`` where ``condition`` holds, nothing elsewhere (NULL: every union ignores it)."""
    if condition is None:
        return slot
    guarded = exp.Case(ifs=[exp.If(this=condition.copy(), true=slot.expr)])
    return Slot(slot.table, guarded, slot.kind, const=False, nullable=True, grouped=slot.grouped)


def _on_field(body: exp.Expression, var: str, field: str) -> exp.Expression:
    """``body`` with the lambda variable ``var`` replaced by ``var.field`` (members of it read under it)."""
    return with_variable_as(body, var, lambda: exp.Dot(this=exp.to_identifier(var),
                                                       expression=exp.to_identifier(field)))


def _witness_array_slots(sub: exp.Subquery, select: exp.Select, ctx: Context, witness: ArrayWitness) -> list[Slot]:
    fns = ctx.fns
    alias = sub.alias_or_name
    inner: exp.Select = sub.this
    row_slots = ctx.from_slots(inner, ctx.scoped())
    if any(s.kind != "rid" for s in row_slots):
        raise UnsupportedQuery(
            "a correlated subquery whose witnesses are chosen per outer row by a value or non-equality test (an IN, "
            "a non-equality correlation) over an aggregate, a set operation or a subquery of its own in its FROM or "
            f"WHERE is not supported, at {position(select)}")
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
        ids = lists[0] if len(lists) == 1 else fns.concat(lists, [False] * len(lists))
        out.append(Slot(table, fns.ids_to_set(ids, table in ctx.wide), "set", nullable=True))
    return out


def reaches_every_output_row(select: exp.Select, ctx: Context, per_input_row: bool = False) -> bool:
    """Does every output row of the query derive from the rows of ``select`` unconditionally?

    True along FROM items, inner/cross joins and the preserved side of outer joins up to the query's
    root; false under a set operation, a CTE, a predicate, or the null-padded side of an outer join, and
    under a global aggregate or a grand total (GROUPING SETS with (), ROLLUP, CUBE: a row that exists even when
    no row reaches it). ``per_input_row``: the lineage belongs to the rows *entering* ``select`` (a WHERE/ON
    subquery), so ``select`` itself must not make such rows either. Lineage that is constant over such a select
    can be computed once and added to every output row, instead of being copied into each of its rows (the cost
    Perm's rewrites pay).
    """
    if not ctx.fns.scalar_subquery_arguments and not ctx.shared:
        return False  # (kept apart, the shared lineage needs no scalar subquery as an argument)
    if per_input_row and makes_rows_from_nothing(select):
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
            if node.arg_key not in ("from_", "joins") or makes_rows_from_nothing(parent):
                return False
            if any((j.side or "").upper() in ("RIGHT", "FULL") for j in parent.args.get("joins") or []):
                return False
        elif not isinstance(parent, (exp.Subquery, exp.From)):
            return False
        node = parent
    return True


def _lineage_aggregate(query: exp.Expression, ctx: Context):
    """``SELECT DLUNION(...) FROM (query)``: the whole lineage of ``query`` as one row (of a query with the same
    whole lineage, cheaper: :mod:`.whole_lineage`)."""
    names = {c.alias_or_name.lower() for c in ctx.root.find_all(exp.CTE)} if ctx.root is not None else set()
    query = whole_lineage_query(query, ctx.cte_bodies, names)
    inner, exported = ctx.instrument(query, ctx.scoped(), final=False)
    holder = ctx.fresh("_dl_q")
    agg = exp.select().from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(holder))))
    return aggregate(agg, [e.via(holder) for e in exported], ctx, final=False)


def hoist(query: exp.Expression, ctx: Context, select: exp.Select, holder: exp.Subquery | None = None) -> None:
    """Record the whole lineage of ``query`` (written in ``select``) as lineage of every output row of the root
    query. Its aggregate becomes a CTE beside the root's: the CTEs of WITHs between ``select`` and the root that
    it reads are defined inside it (the root's own are beside it).

    ``holder``: the scalar subquery left in place that ``query`` is (``meta[SCALAR_IN_PLACE]``). Where the
    session stores a one-row query before the query runs (:attr:`LineageFunctions.shared_preludes`, with the
    shared lineage) and the subquery is an aggregate without GROUP BY over base tables, one of them read from its
    source at each read (parquet: ``Context.read_in_place``), whose lineage is computed from the query itself,
    its value joins its lineage in that one row (``PRELUDE_VALUE``), the CTE is stored as
    a temporary table of that name (``meta[PRELUDE]``, taken out of the shared lineage's WITH by
    :func:`dltrace.rewriter.rewrite_tree`) and the subquery in the query reads the value from it. The value is
    the subquery's (its one row, computed once, where the query as written computes it once too), and its
    lineage is that evaluation's: the query and its shared lineage no longer compute the same rows twice
    (TPC-H Q22 over parquet 1.3x -> 1.1x of the query, Q11 1.4x -> 1.2x). Over the engine's own tables the
    second read costs less than storing the row and dropping it (Q11 in memory 1.5x -> 2x): the shared lineage
    computes it again there."""
    written = query.copy()  # (instrumenting may change it in place)
    prelude = holder is not None and _value_beside_lineage(query, holder, ctx)
    agg, exported = _lineage_aggregate(query, ctx)
    if not exported:  # it reads no table (``(SELECT 1)``): no lineage to keep, and a CTE of no columns is no SQL
        return
    carried = _nested_ctes_read(agg, select, ctx.root)
    if carried:
        agg.set("with_", exp.With(expressions=carried))
    name = ctx.fresh("_dl_h")
    ctx.hoisted_from.append((select, written))
    cte = exp.CTE(this=agg, alias=exp.TableAlias(this=exp.to_identifier(name)))
    if prelude:
        source = agg.args["from_"].this.alias_or_name  # (the one row of the instrumented subquery)
        value = exp.column(written.expressions[0].alias_or_name, table=source, quoted=True)
        agg.select(exp.alias_(ctx.fns.any_value(value), PRELUDE_VALUE, quoted=True), append=True, copy=False)
        cte.meta[PRELUDE] = True
        ctx.preludes.add(name)
        holder.replace(exp.Subquery(this=exp.select(exp.column(PRELUDE_VALUE, quoted=True)).from_(
            exp.Table(this=exp.to_identifier(name)))))
    ctx.hoisted_ctes.append(cte)
    for e in exported:  # the value final already (built once), as the root's lineage columns are
        column = exp.column(e.name, quoted=True)
        value = ctx.fns.finished(column, e.table in ctx.wide)
        value = value if value is column else exp.alias_(value, e.name, quoted=True)
        one = exp.select(value).from_(exp.Table(this=exp.to_identifier(name)))
        ctx.hoisted.append((e.table, exp.Subquery(this=one)))


PRELUDE = "dl_prelude"  # meta key of a hoisted CTE stored as a temporary table before the query runs
PRELUDE_VALUE = "_dl_value"  # its column holding the scalar subquery's value


def _value_beside_lineage(query: exp.Expression, holder: exp.Subquery, ctx: Context) -> bool:
    """May ``query`` (the scalar subquery ``holder`` left in place) give its value beside its lineage, in one
    stored row? When the engine's session stores such rows, with the shared lineage, for an aggregate without
    GROUP BY (one row, whatever its input) of one value over base tables, whose whole lineage is computed from
    itself (:mod:`.whole_lineage` keeps it): the instrumented subquery's one row then holds the value too."""
    if not (ctx.fns.shared_preludes and ctx.shared and holder.meta.get(SCALAR_IN_PLACE)):
        return False
    if not (isinstance(query, exp.Select) and len(query.expressions) == 1 and one_row_aggregate(query)):
        return False
    names = {c.alias_or_name.lower() for c in ctx.root.find_all(exp.CTE)} if ctx.root is not None else set()
    tables = list(query.find_all(exp.Table))
    if any(t.name.lower() in names or t.args.get("db") for t in tables):
        return False  # a CTE's rows (or another schema's table) would have to be stored with it
    if not any(t.name.lower() in ctx.read_in_place for t in tables):
        return False  # the engine's own tables: reading them again costs less than storing a row (Q11: 1.5x -> 2x)
    return whole_lineage_query(query, ctx.cte_bodies, names) is query


def _nested_ctes_read(query: exp.Expression, select: exp.Select, root: exp.Expression) -> list[exp.CTE]:
    """Copies of the (instrumented) CTEs that WITHs enclosing ``select`` below ``root`` define and ``query``
    reads, directly or through each other, in definition order (outer WITHs first)."""
    visible: dict[str, exp.CTE] = {}
    scopes = []
    node = select
    while node is not None and node is not root:
        with_ = node.args.get("with_") if isinstance(node, (exp.Select, exp.SetOperation)) else None
        if isinstance(with_, exp.With):
            scopes.append(with_.expressions)
        node = node.parent
    order: list[exp.CTE] = []
    for ctes in reversed(scopes):  # outer first: an inner name shadows an outer one
        for cte in ctes:
            visible[cte.alias_or_name.lower()] = cte
            order.append(cte)
    needed: set[int] = set()
    todo = [query]
    while todo:
        for table in todo.pop().find_all(exp.Table):
            cte = visible.get(table.name.lower()) if not table.args.get("db") else None
            if cte is not None and id(cte) not in needed:
                needed.add(id(cte))
                todo.append(cte.this)
    carried = [c for c in order if id(c) in needed]
    names = [c.alias_or_name.lower() for c in carried]
    if len(set(names)) < len(names):
        raise UnsupportedQuery(f"a subquery reading nested CTEs of one name is not supported, at {position(select)}")
    return [c.copy() for c in carried]


def _cross_join(select: exp.Select, query: exp.Select, ctx: Context) -> str:
    """Cross join the one-row ``query`` into ``select``; returns its alias."""
    alias = ctx.fresh("_dl_l")
    sub = exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(alias)))
    if select.args.get("from_") is None:
        select.from_(sub, copy=False)
    else:
        add_join(select, sub, kind="CROSS")
    return alias


def lineage_join(select: exp.Select, query: exp.Expression, ctx: Context, per_input_row: bool = False,
                 hoistable: bool = True, per_group: bool = False, holder: exp.Subquery | None = None) -> list[Slot]:
    """The whole lineage of ``query`` (one row) for every row of ``select``: hoisted to the output when
    every row of ``select`` reaches it, else cross joined (constant slots). ``per_group``: for the one row of
    a global aggregate (its HAVING or SELECT list), which exists over zero input rows too: read by a scalar
    subquery, as a cross-joined row would not be there. ``holder``: the scalar subquery in ``select`` that
    ``query`` copies (:func:`hoist`)."""
    if hoistable and reaches_every_output_row(select, ctx, per_input_row):
        hoist(query, ctx, select, holder)
        return []
    agg, agg_exported = _lineage_aggregate(query, ctx)
    if not agg.expressions:
        return []
    if per_group:
        return [Slot(e.table, _one_value(agg, e.name, ctx), "set", nullable=True, grouped=True) for e in agg_exported]
    alias = _cross_join(select, agg, ctx)
    return [Slot(e.table, exp.column(e.name, table=alias), "set", const=True, nullable=True) for e in agg_exported]


def _one_value(query: exp.Select, column: str, ctx: Context) -> exp.Subquery:
    """``(SELECT column FROM (query))``: a column of a one-row query as a value."""
    holder = ctx.fresh("_dl_q")
    return exp.Subquery(this=exp.select(exp.column(column, table=holder, quoted=True)).from_(
        exp.Subquery(this=query.copy(), alias=exp.TableAlias(this=exp.to_identifier(holder)))))


_COMPARE = {"=": exp.EQ, "<>": exp.NEQ, ">": exp.GT, ">=": exp.GTE, "<": exp.LT, "<=": exp.LTE}


def witness_slots(select: exp.Select, use: ClauseSubquery, ctx: Context) -> list[Slot]:
    """Lineage of ``x IN (S)`` / ``x op ANY (S)`` / ``x op ALL (S)`` kept in place: the rows of S with their
    rids, gathered once into one array (a cross-joined row), filtered per row by the comparison.

    Valid anywhere the predicate is evaluated: a row gets the rows ``s`` with ``x op s`` TRUE (ANY), or all
    of them when every comparison is TRUE (ALL) -- exactly the witnesses, empty when the predicate is not
    TRUE. In an aggregating SELECT's projection or HAVING the test is per group.
    """
    fns = ctx.fns
    inner, exported = ctx.instrument(_without_distinct(use.query.copy()), ctx.scoped(), final=False)
    if any(e.kind != "rid" for e in exported):
        raise UnsupportedQuery(f"IN / ANY / ALL kept in place (an uncorrelated ANY / ALL by another comparison than "
                               f"=, or one outside a positive WHERE filter, or over QUALIFY, a window or unnest) over "
                               f"a subquery whose rows each carry the lineage of several (an aggregate, DISTINCT "
                               f"before a LIMIT, a set operation, a subquery inside it) is not supported, at "
                               f"{position(use.operand)}: where the subquery gives one value, compare with it as a "
                               f"scalar subquery (x > (SELECT avg(v) ...))")
    names = {e.name for e in exported}
    value = next(n for n in inner.named_selects if n not in names)
    holder, array = ctx.fresh("_dl_q"), ctx.fresh("_dl_w")
    fields = {"v": exp.column(value, table=holder, quoted=True)}
    fields.update({f"r{i}": exp.column(e.name, table=holder, quoted=True) for i, e in enumerate(exported)})
    rows = exp.select(exp.alias_(fns.agg_list(fns.struct(fields)), array)).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(holder))))
    # inside an aggregate's argument the test is per input row, its witnesses unioned over the group like the
    # rows' own lineage; elsewhere in an aggregating SELECT's projection or HAVING it is per group
    per_input_row = in_aggregate_argument(use.operand, select)
    grouped = is_aggregate(select) and use.clause in ("expressions", "having") and not per_input_row
    arr: exp.Expression
    if global_aggregate_row(select, use.clause) and not per_input_row:  # no input row to carry the array
        if not fns.subqueries_in_lambdas:
            raise UnsupportedQuery(f"IN / ANY / ALL over a subquery in the SELECT list or HAVING of an aggregate "
                                   f"without GROUP BY is not supported on {ctx.fns.dialect}, at "
                                   f"{position(use.operand)}")
        arr = _one_value(rows, array, ctx)
    else:
        arr = exp.column(array, table=_cross_join(select, rows, ctx))
        if grouped:
            arr = fns.any_value(arr)  # one value for the whole query: any row of the group has it
    var = "_dl_e"
    element = exp.Dot(this=exp.to_identifier(var), expression=exp.to_identifier("v"))
    passes = exp.func("coalesce", _COMPARE[use.comparison](this=use.operand.copy(), expression=element),
                      exp.false())
    kept = fns.filter(arr.copy(), passes, var)
    out = []
    for i, e in enumerate(exported):
        field = exp.Dot(this=exp.to_identifier(var), expression=exp.to_identifier(f"r{i}"))
        ids = fns.transform((kept if use.quantifier == "any" else arr).copy(), field, var)
        found = fns.ids_to_set(ids, e.table in ctx.wide)
        if use.quantifier == "all":
            every = exp.EQ(this=exp.ArraySize(this=kept.copy()), expression=exp.ArraySize(this=arr.copy()))
            found = exp.Case(ifs=[exp.If(this=every, true=found)])
        out.append(Slot(e.table, found, "set", nullable=True, grouped=grouped))
    return out


def predicate_slots(select: exp.Select, ctx: Context) -> list[Slot]:
    """Lineage of the subqueries still written in ``select``'s clauses after decorrelation."""
    slots: list[Slot] = []
    for use in clause_subqueries(select, ctx.control):
        # inside an aggregate's argument or FILTER a subquery is evaluated per input row: its lineage is unioned
        # over the group like a WHERE subquery's (none for a global aggregate over no rows)
        holder = use.query.parent if isinstance(use.query.parent, exp.Subquery) else None
        in_aggregate = in_aggregate_argument(holder or use.query, select)
        per_group = global_aggregate_row(select, use.clause) and not in_aggregate
        if use.how == "witness":
            slots += witness_slots(select, use, ctx)
        elif use.condition is not None:  # only where its comparison is TRUE: per row, never hoisted
            found = lineage_join(select, use.query.copy(), ctx, per_input_row=True, hoistable=False,
                                 per_group=per_group)
            slots += [only_where(slot, use.condition) for slot in found]
        else:
            slots += lineage_join(select, use.query.copy(), ctx,
                                  per_input_row=use.clause in ("where", "on") or in_aggregate,
                                  per_group=per_group, holder=holder)
    return slots


def _without_distinct(query: exp.Expression) -> exp.Expression:
    """``query`` without a plain DISTINCT where that leaves the witnesses of IN / ANY / ALL over it the same.

    Valid when DISTINCT is the last step before the rows are compared (no LIMIT or OFFSET after it; QUALIFY and
    windows come before it): the distinct values are the values of the rows without it, so every comparison
    ``x op s`` has the same truth value, and the rows of a distinct value ``s`` are the rows with that value --
    its witnesses either way. (Written with DISTINCT, each value would carry a set of rows, which the per-row
    witness test does not read.)"""
    distinct = query.args.get("distinct") if isinstance(query, exp.Select) else None
    if distinct is None or distinct.args.get("on") is not None or query.args.get("limit") or \
            query.args.get("offset") or query.args.get("fetch"):
        return query
    query.set("distinct", None)
    return query
