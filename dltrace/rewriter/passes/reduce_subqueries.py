"""Semi-join reduction: a decorrelated subquery computes its groups (and their lineage) only for the keys the
outer query can keep.

Decorrelation turns ``WHERE EXISTS (SELECT ... WHERE u.k = t.k)`` into ``LEFT JOIN (SELECT u.k ... GROUP BY
u.k) AS _u ON _u.k = t.k``: every group of ``u`` is computed -- with the lineage pass, a lineage set per group --
before the join discards those no outer row matches (TPC-H Q4 builds 1.5M sets to keep 52k; an engine's own
plan for the correlated subquery pushes the outer keys in first, DuckDB's "delim join"). This pass adds that
push-down to the SQL, as a join with the distinct keys the outer rows can have:

    LEFT JOIN (SELECT u.k ... FROM u JOIN (SELECT DISTINCT t.k AS k0 FROM <outer items> WHERE <their filters>)
               AS _dl_k1 ON u.k = _dl_k1.k0 ... GROUP BY u.k) AS _u ON _u.k = t.k

(a join rather than ``u.k IN (...)``: DuckDB then pushes the key list into the scan of ``u`` as a dynamic
filter, 2.3x faster on Q4).

Valid (same rows, same lineage) when, in the SELECT holding the decorrelated join:
- its ON is a conjunction of equalities ``_u.<column> = <expression over the other FROM items>``: a row of the
  subquery whose key is not among the keys the outer rows could have never joins one of them;
- the other joins are inner or cross joins with a deterministic ON that does not read a decorrelated subquery,
  so the outer rows that can survive WHERE are among ``<outer items> WHERE <their filters>`` (the decorrelated
  joins are LEFT joins and never remove an outer row);
- ``<their filters>`` are conjuncts of WHERE and the ONs that read only those items and are deterministic (no
  subquery, no random or unknown function); ``<outer items>`` are any subset of the FROM items: dropping an
  item or a conjunct only makes the key list larger. The subset taken is the key's own items, the items with a
  filter of their own and the items joining them (unfiltered leaves of the join graph are dropped: they would
  repeat the outer query's work without removing a key); with no filter among them the subquery is left alone;
  the key's own items alone when the others are tables read from their source at each read and a filter of its
  own keeps the list short (:func:`_own_items_suffice`);
- another decorrelated subquery of the same SELECT that is a plain semi-join (:func:`_semi_joins`: its test
  ``NOT _u.k IS NULL`` a top-level WHERE conjunct, its ON equalities with those items, its subquery the grouped
  keys of one table, deterministic) may join the key list as it joins the outer rows: a row that survives the
  WHERE matched it, so no key of a surviving row is lost (TPC-H Q20 91 -> 68 ms);
- the subquery is a SELECT whose rows are independent of each other's presence: grouped by every key it is
  joined on (removing a key removes whole groups), or not aggregating at all; no window, LIMIT, OFFSET,
  DISTINCT or QUALIFY; a FROM to join the key list to, and no set-returning call in its SELECT list. The key list is DISTINCT, so the added inner join removes rows and never repeats one;
  a NULL key matches nothing, as in the decorrelated ON.
The key list is dltrace's own filter, not part of the user's query: it is marked (``meta[REDUCTION]``) and
contributes no lineage (:func:`dltrace.rewriter.rules.sources.from_slots`).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.analysis import is_aggregate, is_decorrelated
from dltrace.rewriter.build import add_join
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import is_correlated
from dltrace.rewriter.passes.cross_joins import is_comma_join
from dltrace.rewriter.passes.decorrelate import DECORRELATED, REDUCTION, has_decorrelated
from dltrace.rewriter.shape import NONDETERMINISTIC, conjuncts, match_tests, returns_rows_per_row

_VOLATILE = (*NONDETERMINISTIC, exp.Subquery, exp.Exists, exp.Select)


def reduce_subqueries(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not has_decorrelated(expression):
        return expression
    tree = exp.maybe_copy(expression, copy)
    counter = [0]
    for select in list(tree.find_all(exp.Select)):  # outer first: a key list made here reduces the next level
        joins = select.args.get("joins") or []
        decorrelated = [j for j in joins if is_decorrelated(j.this)]
        from_ = select.args.get("from_")
        if not decorrelated or from_ is None or is_decorrelated(from_.this):
            continue
        others = [j for j in joins if not is_decorrelated(j.this)]
        hidden = {j.this.alias_or_name for j in decorrelated}
        if any(not _inner(j) or _reads(j.args.get("on"), hidden) for j in others):
            continue
        if not all(_standalone(item) for item in [from_.this, *[j.this for j in others]]):
            continue  # an item reading another (LATERAL, DuckDB's implicit lateral subquery) cannot be copied alone
        visible = {from_.this.alias_or_name} | {j.this.alias_or_name for j in others}
        filters = [c for c in conjuncts(select.args.get("where")) if _over(c, visible)]
        filters += [c for j in others for c in conjuncts(j.args.get("on")) if _over(c, visible)]
        semi = _semi_joins(select, decorrelated, visible)  # copies, taken before any of them is reduced
        for join in decorrelated:
            mine = [(on, sub) for j, on, sub in semi if j is not join]
            _reduce(join, [from_.this, *[j.this for j in others]], filters, visible, counter, mine,
                    context.read_in_place)
    return tree


def _semi_joins(select: exp.Select, decorrelated: list[exp.Join],
                visible: set[str]) -> list[tuple[exp.Join, exp.Expression, exp.Subquery]]:
    """The decorrelated joins of ``select`` that filter its rows as a plain semi-join: ``(join, its ON, a copy of
    its subquery)``.

    One qualifies when its test ``NOT _u.k IS NULL`` is a top-level conjunct of the WHERE (a row that survives
    matched it), its ON equates its columns with the other FROM items only, and its subquery is a deterministic
    SELECT of grouped keys over one table (an IN or EXISTS as sqlglot writes it: no aggregate, HAVING or window,
    no decorrelated subquery of its own; cheap to read again). A row that survives the WHERE has its ON values among the
    subquery's keys, so another subquery's key list may keep only the rows that match it (TPC-H Q20: the
    lineitem groups of the part-supplier pairs whose part is a 'forest' part, 350 instead of 32,000)."""
    out = []
    for join in decorrelated:
        sub = join.this
        inner = sub.this
        if not match_tests(select.args.get("where"), join) or not isinstance(inner, exp.Select) \
                or not _reducible(inner):
            continue
        if not _keys(join.args.get("on"), sub.alias_or_name, visible) or has_decorrelated(inner):
            continue
        source = inner.args.get("from_")
        if any(inner.args.get(k) for k in ("having", "joins")) or source is None or not (
                isinstance(source.this, exp.Table) and isinstance(source.this.this, exp.Identifier)):
            continue  # one table (or CTE: the key list is in its scope too), cheap to read again
        where = inner.args.get("where")
        if any(p.find(exp.AggFunc, *_VOLATILE) for p in inner.expressions) or (
                where is not None and where.find(*_VOLATILE) is not None):
            continue
        copied = sub.copy()
        copied.meta.pop(DECORRELATED, None)  # inside a key list it is dltrace's filter, not the query's subquery
        out.append((join, join.args["on"].copy(), copied))
    return out


def _reduce(join: exp.Join, items: list[exp.Expression], filters: list[exp.Expression], visible: set[str],
            counter: list[int], semi: list[tuple[exp.Expression, exp.Subquery]],
            read_in_place: frozenset = frozenset()) -> None:
    sub: exp.Subquery = join.this
    inner = sub.this
    keys = _keys(join.args.get("on"), sub.alias_or_name, visible)
    if not keys or not isinstance(inner, exp.Select) or not _reducible(inner):
        return
    semi_reads = [(on, sub, _aliases(on) - {sub.alias_or_name}) for on, sub in semi]
    start = set().union(*[_aliases(e) for _, e in keys])
    used = _selective_items(start, items, filters, visible, set().union(*[r for _, _, r in semi_reads]))
    if used is None:
        return
    if _own_items_suffice(start, used, items, filters, read_in_place):
        used = start
    projections = {e.alias_or_name: e.unalias() for e in inner.expressions}
    inner_keys = [projections.get(name) for name, _ in keys]
    if any(k is None or k.find(exp.AggFunc, exp.Window) is not None for k in inner_keys):
        return
    if is_aggregate(inner):
        grouped = {g for g in (inner.args.get("group") or exp.Group()).expressions}
        if not all(k in grouped for k in inner_keys):
            return
    kept = [item for item in items if item.alias_or_name in used]
    names = [f"k{i}" for i in range(len(keys))]
    outer_keys = exp.select(*[exp.alias_(e.copy(), n) for (_, e), n in zip(keys, names)]).from_(kept[0].copy())
    for item in kept[1:]:
        add_join(outer_keys, item.copy(), kind="CROSS")
    mine = [f for f in filters if _aliases(f) <= used]
    if mine:
        outer_keys.where(exp.and_(*[f.copy() for f in mine]), copy=False)
    for on, sub, reads in semi_reads:  # the rows that survive matched these: only their keys can be kept
        if reads <= used:
            add_join(outer_keys, sub.copy(), kind="INNER", on=on.copy())
    outer_keys.set("distinct", exp.Distinct())  # one row per key: the join below never repeats a row
    counter[0] += 1
    alias = f"_dl_k{counter[0]}"
    holder = exp.Subquery(this=outer_keys, alias=exp.TableAlias(this=exp.to_identifier(alias)))
    holder.meta[REDUCTION] = True
    on = exp.and_(*[exp.EQ(this=k.copy(), expression=exp.column(n, table=alias)) for k, n in zip(inner_keys, names)])
    for item in inner.args.get("joins") or []:  # comma items as CROSS JOINs, so the join below follows them all
        if is_comma_join(item):
            item.set("kind", "CROSS")
    add_join(inner, holder, kind="INNER", on=on)


def _selective_items(start: set[str], items: list[exp.Expression], filters: list[exp.Expression],
                     visible: set[str], semi_filtered: set[str] = frozenset()) -> set[str] | None:
    """The FROM items the key list reads: the key's own, those with a filter of their own, and those joining
    them (the join graph with its unfiltered leaves pruned); None when no filter is left to reduce with.

    Joining an unfiltered table only repeats the outer query's work for keys it would not remove (TPC-H Q18's
    key list over customer x orders x lineitem is every order); so the list is built from the filtered part."""
    # a key list this pass joined in one level up is a filter of its own (it only ever removes rows)
    local = {i.alias_or_name for i in items if isinstance(i, exp.Subquery) and i.meta.get(REDUCTION)}
    local |= {a for f in filters if len(_aliases(f)) == 1 for a in _aliases(f)} | semi_filtered
    items = set(visible)
    edges = [_aliases(f) for f in filters if len(_aliases(f)) > 1]
    pruned = True
    while pruned:
        pruned = False
        for item in sorted(items - start - local):
            touching = [e for e in edges if item in e and e <= items]
            if len({a for e in touching for a in e} - {item}) <= 1:  # a leaf (or alone): nothing beyond it
                items.discard(item)
                pruned = True
    reached = _component(start, edges, items)
    return reached if reached & local else None


def _own_items_suffice(start: set[str], used: set[str], items: list[exp.Expression], filters: list[exp.Expression],
                       read_in_place: frozenset) -> bool:
    """Is the key list better read from the key's own items alone (with their own filters)? When the others it
    would join are tables read from their source at each read (parquet files decoded again: TPC-H Q2's key list
    over part x partsupp x supplier x nation x region, over parquet 1.6x -> 1.2x of the query), and a filter of
    the key's own items keeps the list short: a larger list (any subset of the items gives one that holds every
    key a surviving row has) costs the subquery a few more groups. Over the engine's own tables the join is as
    cheap as the scans, and the smaller list is kept."""
    if used == start or not any(_aliases(f) and _aliases(f) <= start for f in filters):
        return False
    return any(isinstance(i, exp.Table) and i.alias_or_name in used - start and i.name.lower() in read_in_place
               for i in items)


def _component(start: set[str], edges: list[set[str]], items: set[str]) -> set[str]:
    seen = set(start)
    grew = True
    while grew:
        grew = False
        for e in edges:
            if e <= items and e & seen and not e <= seen:
                seen |= e
                grew = True
    return seen


def _aliases(node: exp.Expression) -> set[str]:
    return {c.table for c in node.find_all(exp.Column)}


def _keys(on: exp.Expression | None, alias: str, visible: set[str]) -> list[tuple[str, exp.Expression]]:
    """``[(subquery column, outer expression)]`` when ``on`` is a conjunction of such equalities, else []."""
    keys = []
    for c in conjuncts(on):
        if not isinstance(c, exp.EQ):
            return []
        for mine, theirs in ((c.this, c.expression), (c.expression, c.this)):
            if isinstance(mine, exp.Column) and mine.table == alias and _over(theirs, visible):
                keys.append((mine.name, theirs))
                break
        else:
            return []
    return keys


def _reducible(inner: exp.Select) -> bool:
    if any(inner.args.get(k) for k in ("limit", "offset", "qualify", "distinct")):
        return False
    # no FROM to join the key list to (`IN (SELECT unnest([1, 2]))`), or rows that are not its FROM's rows
    if inner.args.get("from_") is None or returns_rows_per_row(inner):
        return False
    return inner.find(exp.Window) is None


def _standalone(item: exp.Expression) -> bool:
    """A base table or a derived table that reads nothing of the query around it."""
    if isinstance(item, exp.Table):
        return isinstance(item.this, exp.Identifier)
    return isinstance(item, exp.Subquery) and isinstance(item.this, exp.Query) and not is_correlated(item.this)


def _inner(join: exp.Join) -> bool:
    """An inner or cross join whose ON (if any) is deterministic: its conjuncts can join the filters."""
    if join.side or (join.kind or "").upper() not in ("", "INNER", "CROSS") or join.args.get("using"):
        return False
    on = join.args.get("on")
    return on is None or on.find(*_VOLATILE) is None


def _reads(node: exp.Expression | None, aliases: set[str]) -> bool:
    return node is not None and any(c.table in aliases for c in node.find_all(exp.Column))


def _over(node: exp.Expression, aliases: set[str]) -> bool:
    """Does ``node`` read only (qualified) columns of ``aliases``, deterministically?"""
    if node.find(*_VOLATILE) is not None:
        return False
    return all(c.table in aliases for c in node.find_all(exp.Column))
