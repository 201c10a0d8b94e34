"""Subqueries in predicates and projections.

Decorrelation (sqlglot's unnest_subqueries) has already turned most of them into joins with grouped
subqueries. In witness mode a joined subquery contributes its lineage only where it made the predicate true:
IN/EXISTS joins used positively contribute their group's rows, used under NOT (NOT EXISTS) nothing. A
non-equality correlation is decorrelated into ARRAY_AGG + ARRAY_ANY; there the group holds rows that do not
satisfy the correlation, so we carry the rows' ids beside the values and keep only those the lambda accepts:
exact witnesses, never a superset. Control mode adds the whole lineage of every predicate subquery.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.normalize import PREDICATE_SUBQUERIES
from dltrace.rewriter.parse import position
from dltrace.rewriter.slots import Context, Slot, by_table

_CLAUSES = ("expressions", "where", "having", "qualify")


def _uses(select: exp.Select, alias: str) -> list[exp.Column]:
    refs = []
    for key in _CLAUSES:
        value = select.args.get(key)
        for node in value if isinstance(value, list) else [value]:
            if node is None:
                continue
            refs += [c for c in node.find_all(exp.Column) if c.table == alias]
    return refs


def negated(node: exp.Expression, select: exp.Select) -> bool:
    """Is ``node`` under an odd number of NOTs within ``select`` (``x IS NULL`` counts as a NOT)?"""
    flips = 0
    parent = node.parent
    if isinstance(parent, exp.Is) and isinstance(parent.expression, exp.Null):
        flips += 1
    child = node
    while child is not None and child is not select:
        if isinstance(child, exp.Not):
            flips += 1
        child = child.parent
    return flips % 2 == 1


def _is_existence_test(ref: exp.Column) -> bool:
    parent = ref.parent
    if isinstance(parent, exp.Is) and isinstance(parent.expression, exp.Null):
        return True
    if isinstance(parent, exp.ArrayAny):
        return True
    return isinstance(parent, exp.Anonymous) and parent.name.lower() in ("filter", "list_filter")


def contributes(select: exp.Select, alias: str, ctx: Context) -> bool:
    """Witness mode: does the decorrelated subquery ``alias`` ever make a predicate true?"""
    if ctx.control:
        return True
    for ref in _uses(select, alias):
        if not _is_existence_test(ref) or not negated(ref, select):
            return True  # a value use (scalar subquery) or a positive existence test
    return False


def decorrelated_slots(sub: exp.Subquery, select: exp.Select, ctx: Context, instrument) -> list[Slot]:
    alias = sub.alias_or_name
    inner = sub.this
    arrays = [p for p in inner.expressions if isinstance(p.unalias(), exp.ArrayAgg)] if isinstance(inner, exp.Select) else []
    if arrays:
        return _witness_array_slots(sub, select, ctx, instrument, arrays)
    if not contributes(select, alias, ctx):
        return []
    join = sub.parent if isinstance(sub.parent, exp.Join) else None
    single_row = join is not None and join.args.get("kind") == "CROSS" and not join.args.get("on")
    if single_row and reaches_every_output_row(select, ctx):
        hoist(inner.copy(), ctx, instrument)  # an uncorrelated scalar subquery: its lineage, once
        return []
    new_inner, exported = instrument(inner, ctx, final=False)
    sub.set("this", new_inner)
    return [e.via(alias) for e in exported]


def _lambda_parts(lam: exp.Lambda) -> tuple[str, exp.Expression]:
    params = lam.expressions
    if len(params) != 1:
        raise UnsupportedQuery(f"a lambda with {len(params)} parameters in a decorrelated predicate")
    return params[0].name, lam.this


def _on_field(body: exp.Expression, var: str, field: str) -> exp.Expression:
    """``body`` with the lambda variable ``var`` replaced by ``var.field``."""

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name == var:
            return exp.Dot(this=exp.to_identifier(var), expression=exp.to_identifier(field))
        if isinstance(node, exp.Identifier) and node.name == var and not isinstance(node.parent, (exp.Column, exp.Dot)):
            return exp.Dot(this=exp.to_identifier(var), expression=exp.to_identifier(field))
        return node

    return body.copy().transform(swap)


def _witness_array_slots(sub, select, ctx, instrument, arrays) -> list[Slot]:
    from dltrace.rewriter.rules.sources import from_slots

    fns = ctx.fns
    alias = sub.alias_or_name
    inner: exp.Select = sub.this
    if len(arrays) != 1:
        raise UnsupportedQuery(
            f"a correlated subquery with {len(arrays)} non-equality correlations cannot be decorrelated exactly, "
            f"at {position(select)}"
        )
    array_name = arrays[0].alias_or_name
    # ARRAY_ANY over the decorrelated group: rewritten as "some element passes the lambda", which is also
    # right when the engine's array aggregate drops NULLs (Spark's collect_list), unlike sqlglot's
    # "empty array or ..." expansion.
    tests = []
    for node in list(select.find_all(exp.ArrayAny)):
        arr = node.this
        if isinstance(arr, exp.Column) and arr.table == alias and arr.name == array_name:
            var, body = _lambda_parts(node.expression)
            node.replace(exp.paren(fns.any_element(arr.copy(), body.copy(), var)))
            tests.append((var, body))
    if not contributes(select, alias, ctx):
        return []
    row_slots = from_slots(inner, ctx.scoped(), instrument)
    if any(s.kind != "rid" for s in row_slots):
        raise UnsupportedQuery(
            f"a non-equality correlated subquery over an aggregate or set operation is not supported, at {position(select)}"
        )
    value = arrays[0].unalias().this
    fields = {"v": value.copy()}
    fields.update({f"r{i}": s.expr for i, s in enumerate(row_slots)})
    witness = ctx.fresh("_dl_w")
    inner.select(exp.alias_(fns.agg_list(fns.struct(fields)), witness), append=True, copy=False)
    column = exp.column(witness, table=alias)
    out = []
    for table, group in by_table(row_slots).items():
        idx = [row_slots.index(s) for s in group]
        lists = []
        for var, body in tests or [("_dl_x", exp.true())]:
            kept = fns.filter(column.copy(), _on_field(body, var, "v"), var)
            for i in idx:
                lists.append(fns.transform(kept.copy(), exp.Dot(this=exp.to_identifier(var), expression=exp.to_identifier(f"r{i}")), var))
        ids = lists[0] if len(lists) == 1 else fns.concat(lists, [False] * len(lists))
        out.append(Slot(table, fns.ids_to_set(ids, table in ctx.wide), "set", nullable=True))
    return out


def direct_subqueries(select: exp.Select) -> list[tuple[str, exp.Expression, exp.Expression]]:
    """(clause, predicate node, query) for subqueries written directly in ``select``'s clauses."""
    found = []
    for key in _CLAUSES:
        value = select.args.get(key)
        for node in value if isinstance(value, list) else [value]:
            if node is None:
                continue
            for holder in node.find_all(exp.Subquery, exp.Exists):
                if holder.find_ancestor(exp.Select, exp.SetOperation) is not select:
                    continue
                query = holder.this
                if isinstance(holder, exp.Subquery) and isinstance(holder.parent, exp.In):
                    holder = holder.parent
                found.append((key, holder, query))
    return found


def is_correlated(query: exp.Expression) -> bool:
    inner = {t.alias_or_name for t in query.find_all(exp.Table)}
    inner |= {s.alias_or_name for s in query.find_all(exp.Subquery) if s.alias_or_name}
    inner |= {c.alias_or_name for c in query.find_all(exp.CTE)}
    return any(c.table and c.table not in inner for c in query.find_all(exp.Column))


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


def _lineage_aggregate(query: exp.Expression, ctx: Context, instrument):
    """``SELECT DLUNION(...) FROM (query)``: the whole lineage of ``query`` as one row."""
    from dltrace.rewriter.rules.aggregate import aggregate

    inner, exported = instrument(query, ctx.scoped(), final=False)
    holder = ctx.fresh("_dl_q")
    agg = exp.select().from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(holder))))
    return aggregate(agg, [e.via(holder) for e in exported], ctx, final=False)


def hoist(query: exp.Expression, ctx: Context, instrument) -> None:
    """Record the whole lineage of ``query`` as lineage of every output row of the root query."""
    agg, exported = _lineage_aggregate(query, ctx, instrument)
    name = ctx.fresh("_dl_h")
    ctx.hoisted_ctes.append(exp.CTE(this=agg, alias=exp.TableAlias(this=exp.to_identifier(name))))
    for e in exported:
        one = exp.select(exp.column(e.name, quoted=True)).from_(exp.Table(this=exp.to_identifier(name)))
        ctx.hoisted.append((e.table, exp.Subquery(this=one)))


def lineage_join(select: exp.Select, query: exp.Expression, ctx: Context, instrument) -> list[Slot]:
    """The whole lineage of ``query`` (one row) for every row of ``select``: hoisted to the output when
    every row of ``select`` reaches it, else cross joined (constant slots)."""
    if reaches_every_output_row(select, ctx):
        hoist(query, ctx, instrument)
        return []
    agg, agg_exported = _lineage_aggregate(query, ctx, instrument)
    if not agg.expressions:
        return []
    alias = ctx.fresh("_dl_l")
    sub = exp.Subquery(this=agg, alias=exp.TableAlias(this=exp.to_identifier(alias)))
    if select.args.get("from_") is None:
        select.from_(sub, copy=False)
    else:
        select.join(sub, join_type="CROSS", copy=False)
    return [Slot(e.table, exp.column(e.name, table=alias), "set", const=True, nullable=True) for e in agg_exported]


def predicate_slots(select: exp.Select, ctx: Context, instrument) -> list[Slot]:
    """Lineage of the subqueries still written inside ``select`` after decorrelation."""
    slots: list[Slot] = []
    pending = direct_subqueries(select)
    for clause, holder, query in pending:
        negative = negated(holder, select) if clause != "expressions" else False
        correlated = is_correlated(query)
        if negative and not ctx.control:
            continue  # NOT IN / NOT EXISTS: witness lineage is empty
        if correlated:
            raise UnsupportedQuery(
                f"a correlated subquery that could not be decorrelated ({'control lineage of ' if negative else ''}"
                f"{'NOT ' if negative else ''}{type(holder).__name__.upper()}), at {position(holder)}"
            )
        if ctx.control and clause in ("where", "having"):
            continue  # taken whole below, with the other predicate subqueries
        is_scalar = isinstance(holder, exp.Subquery) and not isinstance(holder.parent, exp.In)
        if clause in ("where", "having") and not (is_scalar or isinstance(holder, exp.Exists)):
            raise UnsupportedQuery(f"this IN subquery could not be decorrelated, at {position(holder)}")
        slots += lineage_join(select, query.copy(), ctx, instrument)
    if ctx.control:
        for query in select.meta.get(PREDICATE_SUBQUERIES, []):
            slots += lineage_join(select, query.copy(), ctx, instrument)
    return slots
