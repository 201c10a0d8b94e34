"""Lineage of an aggregate over many small groups: the inner groups' rows found again, not a list per group.

An aggregation over the groups of another (TPC-H Q13: customers per order count, over the orders of each
customer) carries a list of row ids per inner group and merges those lists per outer group. DuckDB's list
aggregate costs microseconds per group: Q13's 150,000 inner lists, merged into 42, took 4-5x the query. When the
engine estimates that the inner SELECT makes many groups for its input rows (``Context.estimate_rows``), the
outer groups are computed as written and the rows of each are found again through the inner groups' keys::

    SELECT ANY_VALUE(_dl_g.c) AS c, ..., DLUNION(_dl_m._dl_r1), ...
    FROM (SELECT <the outer SELECT as written>, <outer key 1> AS _dl_o1, ...) AS _dl_g
    JOIN (SELECT <outer key 1> AS _dl_o1, ..., _dl_i._dl_r1, ...
          FROM (SELECT <the inner SELECT as written>, <inner key 1> AS _dl_k1, ...) AS <its alias>
          JOIN (SELECT <inner key 1> AS _dl_k1, ..., <rid 1> AS _dl_r1, ... FROM <its FROM> WHERE <its WHERE>) AS _dl_i
            ON <alias>._dl_k1 IS NOT DISTINCT FROM _dl_i._dl_k1 AND ...
          [WHERE <the outer WHERE>]) AS _dl_m
      ON _dl_g._dl_o1 IS NOT DISTINCT FROM _dl_m._dl_o1 AND ...
    GROUP BY _dl_g._dl_o1, ...
    [ORDER BY <the outermost query's ORDER BY, on the output columns it names>]

Valid (the same rows, each with the same lineage: the union of its inner groups' input rows) when
- the inner SELECT may have its groups found again by their keys (:func:`.late_lineage.regroupable`: plain
  GROUP BY keys, deterministic, base tables only, scalar row ids, no LIMIT, OFFSET, QUALIFY, DISTINCT or ORDER
  BY): each inner group is one row of the derived table, with distinct keys, and its input rows are exactly the
  rows of its FROM and WHERE whose keys are not distinct from the group's; its HAVING stays where it is (a
  dropped group has no row to join);
- the outer SELECT reads that derived table alone (or a CTE of the query, whose body as written is then read in its
  place: the same rows, its body being deterministic), groups by plain expressions or is a global aggregate (its
  one group keyed by a constant and joined LEFT: its row exists over no input rows too, and its HAVING may still
  drop it), is deterministic, has no subquery, no DISTINCT, LIMIT,
  OFFSET, QUALIFY or window, and no ORDER BY unless it is the outermost query and every ORDER BY item is one of
  its output columns (the rebuilt SELECT sorts the same rows by the same values); its output names are
  distinct. Every outer group but a global aggregate's has a row of the derived table, which has an input row,
  so the inner joins keep every outer group, and ANY_VALUE returns its values (one row of ``_dl_g`` per group).
On an engine that joins far faster on ``=`` than on ``IS NOT DISTINCT FROM`` or through an outer join (DuckDB),
the inner groups meet their rows through inner equality joins instead (:mod:`.inner_equi_joins`: the same pairs).
On an engine that computes a MATERIALIZED CTE once, when a table of the inner FROM is read from its source at
each read (``Context.read_in_place``: parquet, an Arrow table), the inner FROM and WHERE are written once with the
keys, the row ids and the columns the inner SELECT reads, and both the inner groups and the rows found again read
that (:func:`_read_once`): TPC-H Q13 over parquet 1.9x -> 1.3x of the query. Over the engine's own tables a
second read is cheaper than writing the rows (Q13 in memory: 2.3x either way, the engine's plan of the outer join
as written slower than its plan of the query), so the FROM is read twice there.
Where a table's costly own conditions are written once instead (:mod:`.filtered_once`), the inner groups' join to
that CTE is computed as the engine computes it over the table, its right side grouped first
(:mod:`.grouped_before_join`).
Without HAVING or a global aggregate outside, the rows' lineage is aggregated per outer key before it meets the
outer groups (:func:`_lineage_per_group`: one row per key joined, not every row joined and grouped again).
The derived table is computed twice (its values decide the outer keys), its FROM read once more: cheaper only
when the inner groups are many for their rows, which the engine's estimate decides; without an estimate (Spark,
``dltrace.rewrite()``) the lists stay.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.build import add_join
from dltrace.rewriter.rules.aggregate import aggregate
from dltrace.rewriter.rules.filtered_once import filtered_once
from dltrace.rewriter.rules.grouped_before_join import grouped_before_join
from dltrace.rewriter.rules.inner_equi_joins import null_safe_branches, preserved_side_apart, within_spans
from dltrace.rewriter.rules.late_lineage import (kept_order, null_safe_keys, output_identifier, plain_keys,
                                                 regrouped, regroupable)
from dltrace.rewriter.parse import marked_by_passes
from dltrace.rewriter.shape import NONDETERMINISTIC, is_aggregate
from dltrace.rewriter.slots import Context, Exported, Slot

#: the engine's estimate that makes finding the rows again cheaper than a list per group (see _many_groups)
MIN_GROUPS = 1000
ROWS_PER_GROUP = 32

_CLAUSES_KEPT_OFF = ("limit", "offset", "qualify", "distinct", "windows", "prewhere", "connect", "sample", "joins",
                     "laterals", "pivots")


def nested_group_lineage(select: exp.Select, ctx: Context, final: bool) -> tuple[exp.Select, list[Exported]] | None:
    """``select`` rebuilt to find its groups' rows through its derived table's groups, with its lineage columns,
    or None when the rewrite does not apply (see the module's conditions) or the engine does not estimate many
    inner groups."""
    if ctx.estimate_rows is None or not _outer_applies(select, final):
        return None
    select = _reading_derived(select, ctx)
    if select is None:
        return None
    derived = select.args["from_"].this
    inner = derived.this
    if not isinstance(inner, exp.Select) or not is_aggregate(inner) or inner.args.get("with_"):
        return None
    items = [inner.args.get("from_"), *(inner.args.get("joins") or [])]
    if not all(item is not None and isinstance(item.this, exp.Table) and not item.this.args.get("db")
               and item.this.name not in ctx.ctes and isinstance(item.this.this, exp.Identifier) for item in items):
        return None  # base tables only (checked before reading their slots: a nested query would be instrumented)
    if any(j.find(exp.Query, exp.Exists) for j in inner.args.get("joins") or []):
        return None  # a subquery kept in a join's ON: its lineage (hoisted, or its witnesses) is not re-read
    rows = _rows_query(inner)
    slots = ctx.from_slots(rows, ctx)
    if not regroupable(inner, slots, ctx, False, inner.args.get("joins") or []):
        return None
    if not _many_groups(inner, rows, ctx.estimate_rows):
        return None
    kept, sorted_by = kept_order(select)
    if not kept:
        return None
    # On an engine that computes a MATERIALIZED CTE once, the derived table is written once and read by the outer
    # groups and by each branch below (TPC-H Q13, SF 1: 2.1x -> 1.8x of the query; the same rows: it is
    # deterministic). Not under a `*`, which would read the keys added to it.
    written_once = ctx.fns.materialized_ctes and not any(p.is_star for p in select.expressions)
    in_place = any(item.this.name.lower() in ctx.read_in_place for item in items)
    schema = ctx.schema
    bounds = _key_bounds(inner, ctx)  # (before the filtered rows replace a table of its FROM)
    filtered = filtered_once(inner, slots, ctx) if written_once and not in_place else None
    if filtered is not None:  # a table's costly conditions evaluated once (rules/filtered_once)
        inner, filtered_ctes, filtered_schema = filtered
        rows = _rows_query(inner)
        schema = {**(schema or {}), **filtered_schema}
    inner_keys = list(inner.args["group"].expressions)
    whole = select.args.get("group") is None  # a global aggregate: one group, of every row, kept without rows
    outer_keys = [exp.Literal.number(1)] if whole else list(select.args["group"].expressions)
    k_names = [f"_dl_k{n}" for n in range(1, len(inner_keys) + 1)]
    o_names = [f"_dl_o{n}" for n in range(1, len(outer_keys) + 1)]
    r_names = [f"_dl_r{n}" for n in range(1, len(slots) + 1)]
    g, m, i = ctx.fresh("_dl_g"), ctx.fresh("_dl_m"), ctx.fresh("_dl_i")

    for key, name in zip(inner_keys, k_names):  # the inner groups' rows, with their keys and row ids
        rows.select(exp.alias_(key.copy(), name), append=True, copy=False)
    for slot, name in zip(slots, r_names):
        rows.select(exp.alias_(slot.expr.copy(), name), append=True, copy=False)
    keyed = inner.copy()  # the inner groups, with their keys named
    for key, name in zip(inner_keys, k_names):
        keyed.select(exp.alias_(key.copy(), name), append=True, copy=False)
    if filtered is not None:  # its values as the engine computes them over its tables (rules/grouped_before_join)
        keyed = grouped_before_join(keyed, {c.alias for c in filtered_ctes}, schema, ctx) or keyed
    alias = derived.args["alias"].this
    cte = ctx.fresh("_dl_c") if written_once else None

    def derived_read() -> exp.Expression:
        if cte is None:
            return exp.Subquery(this=keyed.copy(), alias=derived.args["alias"].copy())
        return exp.Table(this=exp.to_identifier(cte), alias=derived.args["alias"].copy())

    if cte is not None:
        select = select.copy()
        select.args["from_"].this.replace(derived_read())
    found: exp.Expression = rows
    ons = None
    written = _read_once(inner, rows, inner_keys, k_names, ctx) if cte is not None and in_place else None
    if written is not None:  # the rows written once: the groups and the rows found again both read them
        keyed, found = written
    elif ctx.fns.only_inner_equi_joins_fast:  # the same rows through inner equality joins (rules/inner_equi_joins)
        found = preserved_side_apart(rows, r_names, schema) or rows
    if ctx.fns.only_inner_equi_joins_fast:
        ons = null_safe_branches(alias, i, k_names, inner_keys, slots)
    if ons is not None and bounds is not None:  # the = branch by spans of its one integer key (inner_equi_joins)
        key = exp.column(k_names[0], table=alias.copy())
        ons = [*within_spans(ons[0], key, bounds, ctx.fns.perfect_join_span), *ons[1:]]
    branches = []
    for on in ons or [null_safe_keys(alias, i, k_names)]:
        branch = exp.select(*[exp.alias_(k.copy(), n) for k, n in zip(outer_keys, o_names)],
                            *[exp.column(n, table=i) for n in r_names])
        branch = branch.from_(derived_read(), copy=False)
        read = exp.Table(this=exp.to_identifier(written[1].alias), alias=exp.TableAlias(
            this=exp.to_identifier(i))) if written is not None else _subquery(found.copy(), i)
        add_join(branch, read, kind="INNER", on=on)
        if select.args.get("where"):
            branch.set("where", select.args["where"].copy())
        branches.append(branch)
    members = branches[0] if len(branches) == 1 else exp.union(*branches, distinct=False)

    apart = found is not rows and written is None  # (each side's rids NULL on the other side's rows)
    moved = [Slot(s.table, exp.column(n, table=m), s.kind, nullable=s.nullable or whole or apart)
             for s, n in zip(slots, r_names)]
    if whole or select.args.get("having"):
        out = regrouped(select, outer_keys, g, _subquery(members, m), m, o_names, sorted_by, ctx,
                        side="LEFT" if whole else None)
        out, exported = aggregate(out, moved, ctx, final)
    else:
        out, exported = _lineage_per_group(select, outer_keys, g, _subquery(members, m), o_names, sorted_by,
                                           moved, ctx, final)
    if cte is not None:  # after the query's own CTEs (it reads base tables only, none of them)
        with_ = out.args.get("with_") or exp.With(expressions=[])
        ours = [exp.CTE(this=keyed, alias=exp.TableAlias(this=exp.to_identifier(cte)), materialized=True)]
        if written is not None:
            ours.insert(0, exp.CTE(this=written[1].this, alias=written[1].args["alias"].copy(), materialized=True))
        if filtered is not None:
            ours[:0] = filtered_ctes
        with_.set("expressions", [*with_.expressions, *ours])
        out.set("with_", with_)
    return out, exported


def _lineage_per_group(select: exp.Select, keys: list[exp.Expression], g: str, members: exp.Subquery,
                       key_names: list[str], sorted_by: list | None, moved: list[Slot], ctx: Context,
                       final: bool) -> tuple[exp.Select, list[Exported]]:
    """The outer groups (``g``) joined to their lineage aggregated per group of ``members`` beforehand::

        SELECT _dl_g.c, ..., <final lineage over _dl_a's aggregates> FROM (<select, its keys>) AS _dl_g
        JOIN (SELECT _dl_m._dl_o1, ..., <the aggregates of the lineage> FROM <members> AS _dl_m
              GROUP BY _dl_m._dl_o1, ...) AS _dl_a ON _dl_g._dl_o1 IS NOT DISTINCT FROM _dl_a._dl_o1 AND ...

    rather than every member row joined to its group and grouped again (TPC-H Q13, SF 1: 1.6M rows probed and
    grouped with ANY_VALUE of each output, 2.45x -> 2.3x of the query). The same rows and lineage: ``_dl_g`` has
    one row per key tuple and ``_dl_a`` one per key tuple of ``members``, so each group meets exactly the rows
    the regrouping would have aggregated for it (every group has one: the module's conditions; a global aggregate
    or a HAVING, which may keep a group without rows or drop most of them, take the regrouping instead). The
    lineage's aggregate calls are computed in ``_dl_a`` and what the final columns do with them (a bitmap build,
    a hoisted part) in the outer SELECT, where the passes after this one find them as the regrouping writes them;
    a column whose rows' ids are read outside an aggregate call, or that reads one in a lambda, is computed whole
    in ``_dl_a``."""
    a = ctx.fresh("_dl_a")
    m = members.alias_or_name
    grouped = [exp.column(n, table=m) for n in key_names]
    pre = exp.select(*[exp.alias_(k, n) for k, n in zip(grouped, key_names)]).from_(members, copy=False)
    pre = pre.group_by(*[k.copy() for k in grouped], copy=False)
    pre, exported = aggregate(pre, moved, ctx, final)
    names = {e.name for e in exported}
    projections, values = [], {}
    calls: list[tuple[exp.Expression, str]] = []  # (aggregate call, its column in _dl_a): one column per call

    def lifted(node: exp.Expression, taken: list[tuple[exp.Expression, str]]) -> exp.Expression:
        if isinstance(node, (exp.Subquery, exp.Select)):
            return node.copy()  # (a hoisted part's own aggregate stays in it; a copy is not descended into)
        if not ctx.fns.is_aggregate_call(node):
            return node
        # the same call twice (DuckDB's sorted set filters its own ordered list) is one column, computed once
        name = next((n for call, n in [*calls, *taken] if call == node), None)
        if name is None:
            name = f"_dl_p{len(calls) + len(taken) + 1}"
            taken.append((node.copy(), name))
        return exp.column(name, table=a)

    for p in pre.expressions:
        name = p.alias_or_name
        if name not in names:
            projections.append(p)  # a key
            continue
        taken: list[tuple[exp.Expression, str]] = []  # (this column's new calls, kept only if it is lifted)
        value = p.this.copy().transform(lambda n: lifted(n, taken))  # noqa: B023 (used at once)
        # ids outside an aggregate call, or an aggregate read inside a lambda (DuckDB computes an aggregate repeated
        # there once per group, a column it reads once per element): the column computed whole in _dl_a
        if any(c.table == m for c in value.find_all(exp.Column)) or any(
                c.table == a for lam in value.find_all(exp.Lambda) for c in lam.find_all(exp.Column)):
            projections.append(p)
            values[name] = exp.column(name, table=a, quoted=True)
        else:
            calls.extend(taken)
            projections.extend(exp.alias_(call, n) for call, n in taken)
            values[name] = value
    pre.set("expressions", projections)
    _own_ids_only(pre, m, moved, ctx)  # (after the calls are lifted: the passes after this one find them as written)
    out = regrouped(select, keys, g, _subquery(pre, a), a, key_names, sorted_by, ctx, per_group=True)
    for e in exported:
        out.select(exp.alias_(values[e.name], e.name, quoted=True), append=True, copy=False)
    return out, exported


def _own_ids_only(select: exp.Select, members: str, moved: list[Slot], ctx: Context) -> None:
    """In place: the engine's list of a member column that may be NULL (``fns.agg_list``, read back by
    ``fns.listed``) takes its non-NULL values only, ``LIST(x) FILTER (WHERE NOT x IS NULL)``. DuckDB's list keeps
    NULLs, and the rows read apart (``preserved_side_apart``) each
    carry one table's id: TPC-H Q13 at SF 10 put 16.3M entries into each of its two lists, 15M and 1.5M of them
    NULL (4.38 -> 3.89 s; the query 2.2 s). The same lineage: a NULL id is no row, which every union drops; a group
    whose ids are all NULL gets a NULL list where it got a list of NULLs, both read as no ids (``flatten`` and
    ``list_concat`` skip a NULL list, a final column or a reader finishing it takes NULL for the empty set)."""
    nullable = {s.expr.name for s in moved if s.nullable}
    for call in list(select.find_all(exp.Anonymous)):
        x = ctx.fns.listed(call)
        if isinstance(x, exp.Column) and x.table == members and x.name in nullable \
                and not isinstance(call.parent, exp.Filter):
            kept = exp.Where(this=exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null())))
            call.replace(exp.Filter(this=call.copy(), expression=kept))


def _many_groups(inner: exp.Select, rows: exp.Select, estimate) -> bool:
    """Does the engine estimate at least :data:`MIN_GROUPS` groups of ``inner``, and one group for at most
    :data:`ROWS_PER_GROUP` of its input rows? A list per group costs DuckDB about 3 us a group besides its ids
    (TPC-H SF 1: 100,000 lists of 1.5M ids 350 ms, one list of them 26 ms), while finding the rows again costs
    about the query once more whatever the groups: Q13 (150,000 groups of 1.5M rows) 5.3x -> 2.8x of the query,
    a grouping of millions of rows into a few hundred groups would lose."""
    groups = estimate(inner)
    if groups is None or groups < MIN_GROUPS:
        return False
    counted = rows.copy()
    counted.set("expressions", [exp.alias_(exp.Literal.number(1), "_dl_one")])
    read = estimate(counted)
    return read is not None and groups * ROWS_PER_GROUP >= read


def _key_bounds(inner: exp.Select, ctx: Context) -> tuple[int, int] | None:
    """The statistics' bounds of ``inner``'s one GROUP BY key, a column of a base table of its FROM, where the
    engine joins narrow integer ranges faster (:attr:`LineageFunctions.perfect_join_span`); else None."""
    keys = inner.args["group"].expressions
    if not ctx.fns.perfect_join_span or ctx.integer_range is None or len(keys) != 1 \
            or not isinstance(keys[0], exp.Column) or not keys[0].table:
        return None
    items = [inner.args["from_"], *(inner.args.get("joins") or [])]
    tables = [item.this for item in items
              if isinstance(item.this, exp.Table) and item.this.alias_or_name == keys[0].table]
    if len(tables) != 1:
        return None
    column = exp.alias_(keys[0].copy(), "_dl_key")
    return ctx.integer_range(exp.select(column).from_(tables[0].copy(), copy=False))


def _outer_applies(select: exp.Select, final: bool) -> bool:
    from_ = select.args.get("from_")
    if from_ is None or not isinstance(from_.this, (exp.Subquery, exp.Table)) or marked_by_passes(from_.this):
        return False  # (a decorrelated subquery, a key list or LINEAGE ON's table carry meta of the passes)
    if any(select.args.get(k) for k in _CLAUSES_KEPT_OFF) or (select.args.get("order") and not final):
        return False
    if not is_aggregate(select) or not (plain_keys(select) or select.args.get("group") is None):
        return False
    names = [n.lower() for n in select.named_selects]
    if not all(names) or len(set(names)) != len(names) or any(n.startswith("_dl_") for n in names):
        return False
    clauses = [select.args.get(c) for c in ("where", "group", "having")] + list(select.expressions)
    return not any(c is not None and c.find(*NONDETERMINISTIC, exp.Select, exp.Subquery, exp.Exists,
                                            exp.Window) for c in clauses)


def _reading_derived(select: exp.Select, ctx: Context) -> exp.Select | None:
    """``select`` reading its FROM item as a derived table: as it is when it is one; a copy reading the body of
    the CTE it names, as written, under the same alias (the rebuilt query reads that body twice instead of the
    instrumented CTE, whose lists are then computed only where something else reads it); None for a table."""
    source = select.args["from_"].this
    if isinstance(source, exp.Subquery):
        return select
    body = ctx.cte_bodies.get(source.name) if not source.args.get("db") else None
    if not isinstance(body, exp.Select):
        return None
    select = select.copy()
    alias = exp.TableAlias(this=exp.to_identifier(source.alias_or_name, quoted=True))
    select.set("from_", exp.From(this=exp.Subquery(this=body.copy(), alias=alias)))
    return select


def _read_once(inner: exp.Select, rows: exp.Select, keys: list[exp.Expression], k_names: list[str],
               ctx: Context) -> tuple[exp.Select, exp.Subquery] | None:
    """(the inner groups computed from ``rows`` written once, ``rows`` as that CTE: a Subquery holding its body
    under its name) -- or None when a column of the inner SELECT's list or HAVING is not a plain qualified column
    outside its keys (a lambda's variable, a whole row), which the groups could not read from the written rows.

    ``rows`` (the inner FROM and WHERE, its keys named ``k_names`` and rids projected) gets every other column the
    inner SELECT list and HAVING read, as ``_dl_v1, ...``; the groups are the inner SELECT over it, grouped by the
    key columns, each key expression in its list and HAVING read as its column and every other column as its
    ``_dl_v``: the same groups with the same values (each key column holds its expression's value, each
    ``_dl_v`` its column's, row for row). An engine that computes a MATERIALIZED CTE once then reads the FROM,
    its joins and WHERE once, where finding the rows again read them a second time (TPC-H Q13 over parquet: the
    orders' comments decoded and matched by NOT LIKE twice, 1.9x -> 1.3x of the query)."""
    w = ctx.fresh("_dl_w")
    values: dict[tuple[str, str], str] = {}
    sources: list[exp.Column] = []
    parts = [p if isinstance(p, exp.Alias) else exp.alias_(p.copy(), output_identifier(p))
             for p in inner.expressions]
    having = inner.args.get("having")
    for part in [*parts, *([having] if having is not None else [])]:
        if part.find(exp.TableColumn, exp.Lambda) or any(
                isinstance(star, exp.Star) and not isinstance(star.parent, exp.Count) for star in part.find_all(exp.Star)):
            return None
        for column in part.find_all(exp.Column):
            if not column.table or isinstance(column.this, exp.Star):
                return None

    def read(node: exp.Expression) -> exp.Expression:
        for key, name in zip(keys, k_names):
            if node == key:
                return exp.column(name, table=w)
        if isinstance(node, exp.Column):
            spot = (node.table, node.name)
            if spot not in values:
                values[spot] = f"_dl_v{len(values) + 1}"
                sources.append(node.copy())
            return exp.column(values[spot], table=w)
        return node

    groups = exp.select(*[p.transform(read) for p in parts]).from_(exp.to_table(w), copy=False)
    groups = groups.group_by(*[exp.column(n, table=w) for n in k_names], copy=False)
    if having is not None:
        groups.set("having", having.transform(read))
    for name in k_names:
        groups.select(exp.alias_(exp.column(name, table=w), name), append=True, copy=False)
    for column, name in zip(sources, values.values()):
        rows.select(exp.alias_(column, name), append=True, copy=False)
    return groups, exp.Subquery(this=rows, alias=exp.TableAlias(this=exp.to_identifier(w)))


def _rows_query(inner: exp.Select) -> exp.Select:
    """``SELECT FROM <inner's FROM and joins> WHERE <its WHERE>``: its input rows (projections added later)."""
    rows = exp.Select()
    rows.set("from_", inner.args["from_"].copy())
    if inner.args.get("joins"):
        rows.set("joins", [j.copy() for j in inner.args["joins"]])
    if inner.args.get("where"):
        rows.set("where", inner.args["where"].copy())
    return rows


def _subquery(query: exp.Expression, alias: str) -> exp.Subquery:
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(alias)))

