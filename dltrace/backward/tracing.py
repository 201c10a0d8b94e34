"""Tracing queries, as sqlglot trees: a segment's rows with their provenance, joined to the target rows.

For a segment root ``pi_A sigma_H alpha_G sigma_C (R1 x ... x Rm)`` and a relation of targets
``(_dl_tid, _dl_v0, ...)`` the tracing query is

    SELECT tg._dl_tid, q.<provenance columns>
    FROM (SELECT <A, or G for an aggregation> AS _dl_k<j>, <provenance> FROM R1, ..., Rm WHERE C) AS q
    JOIN targets AS tg ON q._dl_k0 IS NOT DISTINCT FROM tg._dl_v0 AND ...

(the Split of Cui-Widom: one column per base-table occurrence and per child). The provenance columns, and the
segment's SELECT read over its materialised children, are :mod:`.segment_sql`'s; this module adds the match
columns, the rows a LIMIT may have kept, and the join with the targets. Nothing here runs SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from dltrace.backward.segment_sql import Prov, SegmentSql, col, subquery, table_ref
from dltrace.backward.segments import Node, scope_env
from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.build import add_join, ordered_like
from dltrace.rewriter.parse import position

TID = "_dl_tid"


class Builder(SegmentSql):
    """Builds the SQL of segments over materialised children and, on top, their tracing queries."""

    # -- tracing queries -----------------------------------------------------------------------------
    def single_scan(self, node: Node) -> bool:
        """Does the segment read one base table and nothing else (each of its rows at most once per target)?"""
        q = node.query
        if not isinstance(q, exp.Select) or q.args.get("joins"):
            return False
        from_ = q.args.get("from_")
        source = from_.this if from_ is not None else None
        return isinstance(source, exp.Table) and source.name not in scope_env(q, node.env)

    def provenance_select(self, node: Node) -> tuple[exp.Select, int, list[Prov]]:
        """The segment's input rows: its match columns ``_dl_k<j>`` (the output expressions, or the group
        keys of an aggregation), ``_dl_a`` for a non-equality witness, and the provenance columns."""
        select, provs = self.select(node.query, node.env, prov=True)
        limited = any(select.args.get(k) is not None for k in ("limit", "offset", "fetch"))
        if node.kind == "spj" and limited and select.args.get("distinct") is None:
            return self.limited_provenance(select, provs)
        if node.kind == "agg":
            match = [k.copy() for k in (select.args["group"].expressions if select.args.get("group") else [])]
        else:
            several = next((e for e in select.expressions if isinstance(e, exp.Aliases)), None)
            if several is not None:  # (its columns are not one expression each for a row to be matched by)
                raise UnsupportedQuery(f"backward tracing of a generator giving several columns in the SELECT list "
                                       f"(`posexplode(x) AS (a, b)`) is not supported, at {position(several)}: "
                                       f"forward lineage (run) reads it, or trace it from a derived table")
            match = [e.unalias().copy() for e in select.expressions]
        projection = [exp.alias_(m, f"_dl_k{j}", quoted=True) for j, m in enumerate(match)]
        if node.array_col is not None:
            arg = next(e.unalias().this for e in select.expressions if e.alias_or_name == node.array_col)
            projection.append(exp.alias_(arg.copy(), "_dl_a", quoted=True))
        select.set("expressions", projection)
        # (Spark's SORT BY, DISTRIBUTE BY and CLUSTER BY place rows, keep them all, and may read an output alias the
        # match columns replace)
        drop = ["order", "limit", "offset", "fetch", "distinct", "sort", "distribute", "cluster"]
        if node.kind == "agg":
            drop += ["group", "having", "qualify", "windows"]
        for k in drop:
            select.set(k, None)
        return select, len(match), self.expose(select, provs)

    def limited_provenance(self, select: exp.Select, provs: list[Prov]) -> tuple[exp.Select, int, list[Prov]]:
        """The provenance of a LIMIT/OFFSET segment: only rows the LIMIT may have kept are derivations.

        A row is kept when its position in the ORDER BY could fall within the window: its rank (the first
        position of its ties) within OFFSET + LIMIT and its last tie past OFFSET. With a total order that is
        exactly the rows the query kept; with ties at the cut (the engine chose among them) every tied row,
        the derivation pool of the row the engine kept; without ORDER BY every row."""
        order = select.args.get("order")
        limit, offset = _int_arg(select, "limit"), _int_arg(select, "offset")
        # a LIMIT / OFFSET that is not a whole number written as a literal: which rows it keeps is not known here
        unknown = next((select.args[k] for k, v in (("limit", limit), ("offset", offset))
                        if select.args.get(k) is not None and v is None), None)
        if order is not None and unknown is not None:
            # (read as no LIMIT, every row of the same values was a row's lineage: `ORDER BY k LIMIT 20%` gave the
            # rows past the cut too; a new user's probe)
            raise UnsupportedQuery(f"backward tracing of ORDER BY with a LIMIT, FETCH or OFFSET other than a whole "
                                   f"number written as it is (a percentage, an expression, a subquery) is not "
                                   f"supported, at {position(unknown)}: forward lineage (run) reads it")
        known = unknown is None
        for k in ("order", "limit", "offset", "fetch"):
            select.set(k, None)
        names = list(select.named_selects)
        items = [e.unalias() for e in select.expressions]
        # an output alias in ORDER BY means its expression; a name several outputs have is a position there
        # (passes/order_by.py), which means the expression at that position
        outputs = {n: e for n, e in zip(names, items) if names.count(n) == 1}
        order = _without_order_by_all(order, select)
        ordered = []
        for j, o in enumerate(order.expressions if order is not None else []):
            if isinstance(o.this, exp.Literal) and o.this.is_int:
                key = items[int(o.this.name) - 1].copy()
            else:
                key = o.this.copy().transform(
                    lambda n: outputs[n.name].copy() if isinstance(n, exp.Column) and not n.table and n.name in outputs
                    else n)
            select.select(exp.alias_(key, f"_dl_o{j}", quoted=True), append=True, copy=False)
            ordered.append(j)
        # the output columns read by names of their own: of two columns of one name the second read the first
        for j, item in enumerate(select.expressions[:len(names)]):
            item.replace(exp.alias_(item.unalias().copy(), f"_dl_c{j}", quoted=True))
        exposed = self.expose(select, provs)
        lim = "_dl_lim"
        keys = [col(f"_dl_c{j}", lim).as_(f"_dl_k{j}", quoted=True) for j in range(len(names))]
        provs = [p.via(lim) for p in exposed]
        if not ordered or not known or limit is None and offset is None:
            outer = exp.select(*keys).from_(subquery(select, lim))
            return outer, len(names), self.expose(outer, provs)
        window_order = exp.Order(expressions=[
            ordered_like(col(f"_dl_o{j}"), o) for j, o in enumerate(order.expressions)])
        rank = exp.Window(this=exp.Anonymous(this="rank"), order=window_order)
        ties = exp.Window(this=exp.Count(this=exp.Star()),
                          partition_by=[col(f"_dl_o{j}") for j in range(len(order.expressions))])
        ranked = exp.select(exp.Star(), rank.as_("_dl_rank", quoted=True), ties.as_("_dl_ties", quoted=True))
        ranked = ranked.from_(subquery(select, "_dl_r"))
        first, last = col("_dl_rank", lim), exp.Sub(this=exp.Add(this=col("_dl_rank", lim), expression=col("_dl_ties", lim)),
                                                     expression=exp.Literal.number(1))
        conds = [exp.GT(this=last, expression=exp.Literal.number(offset or 0))]
        if limit is not None:
            conds.append(exp.LTE(this=first, expression=exp.Literal.number((offset or 0) + limit)))
        outer = exp.select(*keys).from_(subquery(ranked, lim)).where(exp.and_(*conds))
        return outer, len(names), self.expose(outer, provs)

    def tracing_query(self, node: Node, targets: "Targets | None") -> tuple[exp.Select, list[Prov]]:
        """``SELECT tg._dl_tid, q.<provenance> FROM (segment) q JOIN targets tg ON keys``."""
        inner, nmatch, provs = self.provenance_select(node)
        q, tg = "q", "tg"
        outs = [col(p.name, q).as_(p.name, quoted=True) for pr in provs for p in pr.cols]
        if targets is None:
            query = exp.select(exp.cast(exp.Literal.number(0), "BIGINT").as_(TID, quoted=True), *outs)
            query = query.from_(subquery(inner, q))
        else:
            query = exp.select(col(TID, tg).as_(TID, quoted=True), *outs).from_(subquery(inner, q))
            conds: list[exp.Expression] = []
            for j in range(nmatch):
                conds.append(exp.NullSafeEQ(this=targets.compared(j, col(f"_dl_k{j}", q)), expression=col(targets.cols[j], tg)))
            if targets.tests:
                tests = [_bind(t, q, tg, targets.outer) for t in targets.tests]
                conds.append(exp.paren(exp.or_(*tests)) if len(tests) > 1 else tests[0])
            right = targets.relation(tg)
            if conds:
                query = add_join(query, right, kind="INNER", on=exp.and_(*conds))
            else:
                query = add_join(query, right, kind="CROSS")
        return query, provs


def _without_order_by_all(order: exp.Order | None, select: exp.Select) -> exp.Order | None:
    """``order`` with DuckDB's ``ORDER BY ALL`` written as the keys it means: every output column, left to right,
    each in its direction and NULLS placement. The rows a LIMIT keeps are ranked by the keys themselves (a window's
    ORDER BY has no ALL: the generated SQL did not parse)."""
    if order is None or len(order.expressions) != 1:
        return order
    (ordered,) = order.expressions
    if not (isinstance(ordered.this, exp.Var) and ordered.this.name.upper() == "ALL"):
        return order
    keys = [ordered_like(e.unalias().copy(), ordered) for e in select.expressions]
    return exp.Order(expressions=keys)


def _int_arg(select: exp.Select, key: str) -> int | None:
    """The integer of a LIMIT (or FETCH FIRST n ROWS ONLY, which sqlglot keeps as the LIMIT) / OFFSET clause; None
    when absent, not a literal, a percentage or WITH TIES."""
    clause = select.args.get(key)
    if clause is None:
        return None
    options = clause.args.get("limit_options")
    if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
        return None
    value = clause.args.get("count" if isinstance(clause, exp.Fetch) else "expression")
    return int(value.name) if isinstance(value, exp.Literal) and value.is_int else None


@dataclass
class Targets:
    """Rows to trace: ``_dl_tid`` (the output row they serve) and the columns ``cols`` to match, in order.

    ``tests``/``outer``: a non-equality correlation's witness test and the outer values it compares with.
    ``exact``: the targets are known to be rows of the node; the values of a UNION's row need not be rows of
    each side, which matters where the node's output is not all the rows its input could make (LIMIT, HAVING,
    aggregate values, INTERSECT/EXCEPT): there they are first semi-joined with the node's materialisation.
    ``casts``: per column, the types the engine cast the node's value to on its way to the targets' values (the
    output types of the set operations the node is a side of, innermost first; none for a column not cast).
    """

    source: exp.Expression  # a Table or a query
    cols: list[str]
    mode: str = "keys"  # "keys": cols match the node's key_cols; "values": its output columns
    tests: list[exp.Expression] = field(default_factory=list)
    outer: list[str] = field(default_factory=list)
    exact: bool = True  # every target is a row of the node (False for the sides of a UNION)
    casts: list[tuple[exp.DataType, ...]] = field(default_factory=list)

    def relation(self, alias: str) -> exp.Expression:
        if isinstance(self.source, exp.Table):
            return table_ref(self.source.name, alias)
        return subquery(self.source.copy(), alias)

    def chain(self, j: int) -> tuple[exp.DataType, ...]:
        """The casts of column ``j`` (see the class)."""
        return self.casts[j] if j < len(self.casts) else ()

    def compared(self, j: int, value: exp.Expression) -> exp.Expression:
        """``value``, the node's column ``j``, in the type the targets' column ``j`` holds it in: cast as the engine
        cast it (DuckDB's UNION of DECIMAL(18,4) and DECIMAL(38,0) holds 1.5 as 2, which 1.5 itself never equals)."""
        for kind in self.chain(j):
            value = exp.Cast(this=value, to=kind.copy())
        return value


def _bind(test: exp.Expression, q: str, tg: str, outer: list[str]) -> exp.Expression:
    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table:
            if node.name == "_dl_a":
                return col("_dl_a", q)
            if node.name.startswith("_dl_o"):
                return col(outer[int(node.name[5:])], tg)
        return node

    return test.copy().transform(swap)
