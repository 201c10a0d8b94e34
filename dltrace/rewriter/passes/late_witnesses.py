"""Witnesses found after the filter: an aggregating query's correlated EXISTS stays in place, and its witnesses
are joined to the rows that passed.

sqlglot decorrelates ``EXISTS (SELECT * FROM l2 WHERE l2.k = l1.k AND l2.s <> l1.s)`` into a join with one
list of (value, row id) per key and a filter of that list on every outer row (``passes/array_witness.py``);
semi-join reduction (``passes/reduce_subqueries.py``) reads the outer join again to keep the lists few. TPC-H
Q21 pays that twice (an EXISTS and a NOT EXISTS) and takes 2.4x the original query. Here the engine evaluates
the EXISTS as written (its own semi-join), the rows that pass are computed once, and the witnesses are the
subquery's rows joined to those rows by the subquery's own WHERE (Q21: 1.07x, measured by hand)::

    WITH _dl_kept AS (SELECT t.a AS _dl_c1, ... FROM <FROM> WHERE <WHERE, its EXISTS in place>)
    SELECT _dl_g.<output>, ...
    FROM (SELECT <the SELECT over _dl_kept>, <key 1> AS _dl_k1, ... FROM _dl_kept GROUP BY ... HAVING ...
          [ORDER BY ... LIMIT ...]) AS _dl_g
    LEFT JOIN (SELECT <key 1> AS _dl_k1, ... FROM _dl_kept CROSS JOIN <the subquery's FROM and joins>
               WHERE <its WHERE, the outer columns read from _dl_kept> GROUP BY <keys>) AS _dl_w1
      ON _dl_g._dl_k1 IS NOT DISTINCT FROM _dl_w1._dl_k1 AND ...
    [ORDER BY <the output columns the ORDER BY names>]

(a global aggregate: ``_dl_w1`` a global aggregate too, cross joined to the one row of ``_dl_g``).

The lineage is exactly the query's (witness semantics): a row of ``_dl_g`` has its group's kept rows (the
EXISTS left in ``_dl_kept`` is marked ``meta[LATE_WITNESS]`` and contributes nothing there; a NOT EXISTS
contributes nothing anyway); a row of ``_dl_w1`` has, for each kept row of the group, the subquery's rows its
WHERE accepts for it -- the EXISTS's witnesses, its rows for this outer row (``_dl_kept`` is read there as a
filter of dltrace's, ``meta[REDUCTION]``, which contributes no lineage: ``_dl_g`` has it). Every kept row passed
the EXISTS, so every group of ``_dl_g`` meets a row of ``_dl_w1`` (joined LEFT all the same), and the group keys
are joined by GROUP BY's own equivalence (``IS NOT DISTINCT FROM``: NULLs together).

``_dl_kept`` joins the outermost query's WITH (it reads base tables only; a CTE there is seen everywhere).

Valid (decided by :func:`.late_witness_exists.late_witness_exists` during decorrelation, which then leaves those
EXISTS in place; forward lineage only, witness semantics, no LINEAGE ON clause or composed source) when:
- the SELECT's rows are output rows -- the outermost query, or a derived table, CTE or set operation branch
  reached from it, not a clause's subquery -- and it reads no enclosing query's column; it aggregates: plain
  GROUP BY keys (not positions; no GROUPING SETS, ROLLUP, CUBE) or none; no DISTINCT, QUALIFY or window; an ORDER
  BY only in the outermost query, by its output columns (re-applied to the same rows outside); its output
  columns named, distinct and not ``_dl_``-prefixed;
- its FROM and joins are base tables (no CTE: ``_dl_kept`` reads them once, as written), no sampling; it reads
  columns (a whole row, DuckDB's ``count(t)``, is its columns since qualification: :mod:`.whole_rows`), and
  unqualified names only of its outputs; it is
  deterministic (``_dl_kept`` may be read twice: no random or unknown function anywhere in it);
- its subqueries are all WHERE conjuncts ``EXISTS (q)`` / ``NOT EXISTS (q)``, each ``q`` a correlated SELECT
  over base tables with inner or cross joins (not POSITIONAL, ASOF or NATURAL: they pair rows by their own
  inputs, which ``_dl_kept`` cross joined in front would change), no aggregate, GROUP BY, HAVING, DISTINCT,
  window, QUALIFY, LIMIT or OFFSET and no subquery of its own, whose outer columns (in its WHERE or its joins'
  ON) are columns of the SELECT's FROM items (a table of ``q`` that takes one of their aliases is renamed
  first: the same query, its columns then telling by their table whose row they read);
- and it pays: some positive EXISTS has a correlation other than equalities ``inner = outer`` (where sqlglot
  filters a list per row). With equalities only, the decorrelated join and its key list measured cheaper
  (Q4: 1.66x against 2.07x here, a second scan of lineitem for the witnesses).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.build import add_join, ordered_like
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.decorrelate import REDUCTION
from dltrace.rewriter.passes.late_witness_exists import LATE_WITNESS
from dltrace.rewriter.rules.late_lineage import null_safe_keys, output_identifier
from dltrace.rewriter.shape import conjuncts, from_items, order_by_outputs


def late_witnesses(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    """Every SELECT whose EXISTS decorrelation left in place, rebuilt as in the module docstring; their
    ``_dl_kept`` CTEs join the outermost query's WITH (they read base tables only, and are seen everywhere)."""
    if not any(_marked(s) for s in expression.find_all(exp.Select)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    taken = {i.name.lower() for i in tree.find_all(exp.Identifier)}
    kept_ctes = []
    for select in reversed([s for s in tree.find_all(exp.Select) if _marked(s)]):  # (inner ones first)
        out, kept = _rebuilt(select, taken, outermost=select is tree)
        if select is tree:
            tree = out
        else:
            select.replace(out)
        kept_ctes.append(kept)
    holder = tree
    while isinstance(holder, exp.Subquery):  # (a parenthesised query: its WITH goes on the query inside)
        holder = holder.this
    with_ = holder.args.get("with_") or exp.With(expressions=[])
    with_.set("expressions", [*kept_ctes, *with_.expressions])
    holder.set("with_", with_)
    return tree


def _rebuilt(select: exp.Select, taken: set[str], outermost: bool) -> tuple[exp.Select, exp.CTE]:
    """``select`` as ``_dl_g`` LEFT JOIN ``_dl_w1`` ... over its kept rows, and the CTE of those rows."""
    kept_name, g = _fresh("_dl_kept", taken), _fresh("_dl_g", taken)
    outer = {item.alias_or_name for item in from_items(select)}
    positive = [c.this for c in conjuncts(select.args["where"]) if isinstance(c, exp.Exists)]
    sorted_by = order_by_outputs(select.args["order"], select.expressions) \
        if outermost and select.args.get("order") else None

    # the columns the groups and the witnesses read, each once, under a name of _dl_kept's
    read: dict[tuple[str, str], str] = {}
    for node in [*select.expressions, *[select.args.get(k) for k in ("group", "having", "order")],
                 *[n for q in positive for n in (q.args.get("where"), *(q.args.get("joins") or []))]]:
        for column in node.find_all(exp.Column) if node is not None else ():
            if column.table in outer and (column.table, column.name) not in read:
                read[(column.table, column.name)] = _fresh(f"_dl_c{len(read) + 1}", taken)
    kept = exp.select(*[exp.alias_(exp.column(c, table=t, quoted=True), n, quoted=True)
                        for (t, c), n in read.items()])
    kept.set("from_", select.args["from_"].copy())
    kept.set("joins", [j.copy() for j in select.args.get("joins") or []])
    kept.set("where", select.args["where"].copy())

    def over_kept(node: exp.Expression) -> exp.Expression:  # a copy reading _dl_kept's columns
        return node.transform(lambda n: exp.column(read[(n.table, n.name)], table=kept_name, quoted=True)
                              if isinstance(n, exp.Column) and n.table in outer else n)

    keys = [over_kept(k) for k in select.args["group"].expressions] if select.args.get("group") else []
    key_names = [_fresh(f"_dl_k{n}", taken) for n in range(1, len(keys) + 1)]
    groups = exp.select(*[over_kept(p) if isinstance(p, exp.Alias) else
                          exp.alias_(over_kept(p), output_identifier(p)) for p in select.expressions],
                        *[exp.alias_(k.copy(), n, quoted=True) for k, n in zip(keys, key_names)])
    groups.set("from_", exp.From(this=_table(kept_name)))
    for key in ("group", "having", "order", "limit", "offset"):
        if select.args.get(key) is not None:
            groups.set(key, over_kept(select.args[key]))

    g_alias = exp.to_identifier(g, quoted=True)
    out = exp.select(*[exp.column(output_identifier(p), table=g_alias.copy()) for p in select.expressions])
    out.set("from_", exp.From(this=exp.Subquery(this=groups, alias=exp.TableAlias(this=g_alias))))
    for n, query in enumerate(positive, 1):
        w = _fresh(f"_dl_w{n}", taken)
        witnesses = exp.select(*[exp.alias_(k.copy(), name, quoted=True) for k, name in zip(keys, key_names)]
                               or [exp.alias_(exp.Count(this=exp.Star()), "_dl_n", quoted=True)])
        kept_rows = _table(kept_name)
        kept_rows.meta[REDUCTION] = True  # their lineage is _dl_g's already: here they only pick the witnesses
        witnesses.set("from_", exp.From(this=kept_rows))
        add_join(witnesses, query.args["from_"].this.copy(), kind="CROSS")
        for join in query.args.get("joins") or []:
            witnesses.append("joins", over_kept(join))
        if query.args.get("where") is not None:
            witnesses.set("where", over_kept(query.args["where"]))
        if keys:
            witnesses.set("group", exp.Group(expressions=[k.copy() for k in keys]))
        item = exp.Subquery(this=witnesses, alias=exp.TableAlias(this=exp.to_identifier(w, quoted=True)))
        if keys:
            add_join(out, item, side="LEFT", on=null_safe_keys(g, w, key_names, quoted=True))
        else:  # a global aggregate: one row on each side
            add_join(out, item, kind="CROSS")
    if sorted_by is not None:
        out.set("order", exp.Order(expressions=[
            ordered_like(exp.column(name.copy()), o) for o, name in sorted_by]))
    if select.args.get("with_"):  # (the outermost query's own CTEs, which the rebuilt one keeps)
        out.set("with_", select.args["with_"])
        select.set("with_", None)
    out.meta.update(select.meta)
    return out, exp.CTE(this=kept, alias=exp.TableAlias(this=exp.to_identifier(kept_name, quoted=True)))


def _table(name: str) -> exp.Table:
    return exp.Table(this=exp.to_identifier(name, quoted=True))


def _marked(select: exp.Select) -> bool:
    """Does ``select`` have an EXISTS left in place for this rewrite (a top-level WHERE conjunct, maybe NOT-ed)?"""
    return any((c.this.unnest() if isinstance(c, exp.Not) else c).meta.get(LATE_WITNESS)
               for c in conjuncts(select.args.get("where")))


def _fresh(name: str, taken: set[str]) -> str:
    """``name``, or ``name`` with a number, not among ``taken`` (lower case), which it joins."""
    candidate, n = name, 1
    while candidate.lower() in taken:
        n += 1
        candidate = f"{name}_{n}"
    taken.add(candidate.lower())
    return candidate
