"""Running a trace: materialised intermediates, the top-down pass over segments, and cleanup.

Everything a trace creates in the engine (materialised children, tracing-query results, child target sets,
the registered Arrow table of target rows) is named ``_dl_<kind>_<token>_<n>`` and recorded before it is
created, so :meth:`Run.cleanup` drops all of it -- also when tracing fails half-way.
"""

from __future__ import annotations

import secrets

import numpy as np
import pyarrow as pa
from sqlglot import exp

from dltrace.backward.assemble import Collector
from dltrace.backward.exact import Types
from dltrace.backward.segment_sql import Prov, col, subquery, table_ref
from dltrace.backward.segments import (
    Node,
    bw_id,
    make_node,
    output_names,
    scope_env,
    simple_whole,
    unwrap,
)
from dltrace.backward.tracing import TID, Builder, Targets
from dltrace.engines.sources import ArrowSource
from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.build import add_join
from dltrace.rewriter.grammar import generate
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.rows_relations import read_rows_relations


class Run:
    """The engine side of one trace: SQL out, Arrow back, and every relation it made."""

    def __init__(self, engine, dialect: str, context: PassContext) -> None:
        self.engine = engine
        self.dialect = dialect
        self.context = context  # which tables are read from their rows relations (where the rids are)
        self.token = secrets.token_hex(4)
        self.count = 0
        self.created: list[str] = []
        self.log: list[str] = []

    def _name(self, kind: str) -> str:
        self.count += 1
        return self.engine.fresh_name(f"_dl_{kind}_{self.token}_{self.count}")

    def text(self, query: exp.Expression) -> str:
        return generate(read_rows_relations(query, self.context), self.dialect)

    def fetch(self, query: exp.Expression) -> pa.Table:
        text = self.text(query)
        self.log.append(text)
        return self.engine.sql(text)

    def materialize(self, kind: str, query: exp.Expression) -> str:
        name = self._name(kind)
        text = self.text(query)
        self.created.append(name)  # before: a half-made relation is dropped too
        self.log.append(f"-- {name}\n{text}")
        self.engine.materialize(name, text)
        return name

    def register(self, kind: str, table: pa.Table) -> str:
        name = self._name(kind)
        self.created.append(name)
        self.engine.register(name, ArrowSource(table))
        return name

    def cleanup(self) -> None:
        """Drop everything this run made (latest first); never raises."""
        while self.created:
            name = self.created.pop()
            try:
                self.engine.drop(name)
            except Exception:  # noqa: BLE001 - keep dropping the rest
                pass


class Tracer:
    """Top-down tracing over the segments of one normalised query."""

    def __init__(self, run: Run, semantics: str) -> None:
        self.run = run
        self.semantics = semantics
        self.nodes: dict[int, Node] = {}
        self.wholes: dict[int, dict[str, np.ndarray]] = {}
        self.types = Types(run)
        self.node_types: dict[int, list[str]] = {}
        self.builder = Builder(run.dialect, semantics, self.materialize, self.node_for)

    # -- nodes and their materialisations ---------------------------------------------------------
    def node_for(self, query: exp.Expression, env: dict, names: list[str] | None) -> Node:
        query = unwrap(query)
        key = bw_id(query)
        node = self.nodes.get(key)
        if node is None:
            node = self.nodes[key] = make_node(query, env, names)
        return node

    def materialize(self, node: Node) -> str:
        if node.mat is None:
            if len(set(node.names)) != len(node.names) or any(not n for n in node.names):
                raise UnsupportedQuery(f"a derived table or subquery with duplicate or unnamed output columns "
                                       f"({', '.join(node.names)}), at {position(node.query)}")
            node.mat = self.run.materialize("m", self.builder.output_query(node, present=True))
        return node.mat

    def types_of(self, node: Node) -> list[str]:
        """The engine's types of ``node``'s output columns (asked once per node; bound, not run)."""
        if node.ident not in self.node_types:
            kinds = self.types.of(self.builder.output_query(node, present=False))
            self.node_types[node.ident] = kinds[: len(node.names)]
        return self.node_types[node.ident]

    # -- tracing -------------------------------------------------------------------------------------
    def trace(self, node: Node, targets: Targets | None, into: Collector) -> None:
        """Trace ``targets`` (rows of ``node``; None: all its rows as one pseudo-row 0) into ``into``."""
        if targets is not None and not targets.exact and not _keeps_all(node):
            targets = self.restrict(node, targets)
        if node.kind == "setop":
            self.trace_setop(node, targets, into)
            return
        if targets is None and not simple_whole(node):
            targets = self.all_rows(node)  # (in "values" mode: an aggregation's output values, mapped below)
        if targets is not None and node.kind == "agg" and "values" in (targets.mode, node.mode):
            targets = self.values_to_groups(node, targets)  # (a DISTINCT aggregation's keys are its values)
        query, provs = self.builder.tracing_query(node, targets)
        # One base table and targets without outer values: every (target, rid) pair comes out once.
        unique = self.builder.single_scan(node) and (targets is None or not targets.outer)
        self.consume(query, provs, into, unique)

    def trace_setop(self, node: Node, targets: Targets | None, into: Collector) -> None:
        q = node.query
        if targets is None:
            targets = self.all_rows(node)
        env = scope_env(q, node.env)
        left = self.node_for(q.this, env, None)
        right = self.node_for(q.expression, env, None)
        sides = [left] if isinstance(q, exp.Except) else [left, right]
        # A row of a UNION need not be a row of each side; a row of INTERSECT/EXCEPT is one of its (left) sides.
        exact = targets.exact and not isinstance(q, exp.Union)
        out = self.types_of(node)
        for side in sides:
            # a side's value is compared as the engine cast it to the operation's type, then on to the targets'
            casts = self.types.casts(self.types_of(side), out, side.query)
            chains = [((c,) if c is not None else ()) + targets.chain(j) for j, c in enumerate(casts)]
            self.trace(side, Targets(targets.source, targets.cols, "values", exact=exact, casts=chains), into)
        if isinstance(q, exp.Except) and self.semantics == "control":
            tids = self.run.fetch(exp.select(col(TID, "tg")).distinct().from_(targets.relation("tg")))
            into.add_const(tids.column(0).to_numpy(), self.whole(right))

    def whole(self, node: Node) -> dict[str, np.ndarray]:
        """The lineage of all of ``node``'s rows together (traced once per node)."""
        if node.ident not in self.wholes:
            sub = Collector()
            self.trace(node, None, sub)
            self.wholes[node.ident] = sub.flatten()
        return self.wholes[node.ident]

    def all_rows(self, node: Node) -> Targets:
        """Every row of ``node`` (from its materialisation) as targets of the pseudo-row 0."""
        mat = self.materialize(node)
        keys = node.key_cols
        cols = [f"_dl_v{j}" for j in range(len(keys))]
        query = exp.select(exp.cast(exp.Literal.number(0), "BIGINT").as_(TID, quoted=True),
                           *[col(k, "m").as_(c, quoted=True) for k, c in zip(keys, cols)])
        query = query.distinct().from_(table_ref(mat, "m"))
        return Targets(query, cols, "keys")

    def restrict(self, node: Node, targets: Targets) -> Targets:
        """Keep the targets (by values) that are rows of ``node``: a semi-join with its materialisation."""
        mat = self.materialize(node)
        keep = [TID, *targets.cols, *targets.outer]
        on = exp.and_(*[exp.NullSafeEQ(this=targets.compared(j, col(n, "m")), expression=col(c, "tg"))
                        for j, (n, c) in enumerate(zip(node.names, targets.cols))])
        query = exp.select(*[col(c, "tg").as_(c, quoted=True) for c in keep]).distinct()
        query = add_join(query.from_(targets.relation("tg")), table_ref(mat, "m"), kind="INNER", on=on)
        return Targets(query, targets.cols, targets.mode, targets.tests, targets.outer, exact=True, casts=targets.casts)

    def values_to_groups(self, node: Node, targets: Targets) -> Targets:
        """Targets given by an aggregation's output values -> by its group keys."""
        if all(p is not None for p in node.key_pos):
            return Targets(targets.source, [targets.cols[p] for p in node.key_pos], "keys",
                           targets.tests, targets.outer, casts=[targets.chain(p) for p in node.key_pos])
        if node.gmat is None:
            node.gmat = self.run.materialize("g", self.builder.groups_query(node))
        own = output_names(node.query)
        keys = [f"_dl_g{j}" for j in range(len(node.keys))]
        cols = [f"_dl_v{j}" for j in range(len(keys))]
        query = exp.select(col(TID, "tg").as_(TID, quoted=True),
                           *[col(k, "m").as_(c, quoted=True) for k, c in zip(keys, cols)],
                           *[col(o, "tg").as_(o, quoted=True) for o in targets.outer]).distinct()
        on = exp.and_(*[exp.NullSafeEQ(this=targets.compared(j, col(n, "m")), expression=col(c, "tg"))
                        for j, (n, c) in enumerate(zip(own, targets.cols))])
        query = add_join(query.from_(table_ref(node.gmat, "m")), targets.relation("tg"), kind="INNER", on=on)
        return Targets(query, cols, "keys", targets.tests, targets.outer)

    def consume(self, query: exp.Select, provs: list[Prov], into: Collector, unique: bool = False) -> None:
        """Run a tracing query: base-table pairs and constant parts into ``into`` (one fetch), children
        traced further down with this query's rows as their targets."""
        entries: list[tuple[Prov, exp.Expression]] = []  # what the one fetch returns, by entry index
        children: list[Prov] = []
        for p in provs:
            if p.kind == "rid":
                entries.append((p, col(p.cols[0].name, "r")))
            elif p.kind == "const":
                present = exp.Is(this=col(p.cols[0].name, "r"), expression=exp.Null())
                entries.append((p, exp.Case(ifs=[exp.If(this=exp.not_(present), true=exp.Literal.number(0))])))
            else:
                children.append(p)
        if not entries and not children:
            return
        # Stored when more than one query reads it (a child's targets are read by the child's tracing query).
        stored = self.run.materialize("tq", query) if children and (entries or len(children) > 1) else None

        def rel(alias: str) -> exp.Expression:
            return table_ref(stored, alias) if stored else subquery(query.copy(), alias)

        if entries:
            self.fetch_entries(rel, entries, into, unique and len(entries) == 1 and entries[0][0].kind == "rid")
        for p in children:
            present, keys, outer = p.cols[0], p.cols[1: 1 + p.nkeys], p.cols[1 + p.nkeys:]
            cols = [f"_dl_v{j}" for j in range(len(keys))]
            onames = [f"_dl_o{k}" for k in range(len(outer))]
            sel = exp.select(
                col(TID, "r").as_(TID, quoted=True),
                *[col(k.name, "r").as_(c, quoted=True) for k, c in zip(keys, cols)],
                *[col(o.name, "r").as_(c, quoted=True) for o, c in zip(outer, onames)],
            ).distinct().from_(rel("r")).where(exp.not_(exp.Is(this=col(present.name, "r"), expression=exp.Null())))
            tests = p.witness.tests if p.witness is not None else []
            self.trace(p.node, Targets(sel, cols, "keys", list(tests), onames), into)

    def fetch_entries(self, rel, entries: list[tuple[Prov, exp.Expression]], into: Collector,
                      unique: bool = False) -> None:
        """One query for every rid column and presence flag: ``(entry, tid, rid)`` rows, distinct.

        Unpivoted by a cross join with the entry numbers, so the tracing query is read once."""
        if len(entries) == 1:
            value = entries[0][1]
            which: exp.Expression = exp.Literal.number(0)
            source = rel("r")
            query = exp.select(which.as_("_dl_e", quoted=True), col(TID, "r").as_(TID, quoted=True),
                               value.as_("_dl_rid", quoted=True)).from_(source)
        else:
            k = col("_dl_e", "k")
            value = exp.Case(this=k, ifs=[exp.If(this=exp.Literal.number(i), true=e) for i, (_, e) in enumerate(entries)])
            numbers = exp.values([(exp.Literal.number(i),) for i in range(len(entries))], alias="k", columns=["_dl_e"])
            query = exp.select(k.copy().as_("_dl_e", quoted=True), col(TID, "r").as_(TID, quoted=True),
                               value.as_("_dl_rid", quoted=True)).from_(rel("r"))
            add_join(query, numbers, kind="CROSS")
        query = query.where(exp.not_(exp.Is(this=value.copy(), expression=exp.Null())))
        if not unique:
            query = query.distinct()
        out = self.run.fetch(query)
        which_col, tids, rids = (_ints(out.column(i)) for i in range(3))
        for i, (p, _) in enumerate(entries):
            mine = slice(None) if len(entries) == 1 else which_col == i
            if p.kind == "rid":
                into.add_pairs(p.table, tids[mine], rids[mine])
            elif len(tids[mine]):
                into.add_const(tids[mine], self.whole(p.node))


def _keeps_all(node: Node) -> bool:
    """Is every input row that matches a target's values a derivation of a row of the node?

    True for a select-project-join without LIMIT (DISTINCT and QUALIFY included) and for a UNION (its sides
    are checked in turn); not for aggregations, LIMIT, INTERSECT and EXCEPT."""
    q = node.query
    if node.kind == "setop":
        return isinstance(q, exp.Union)
    return node.kind == "spj" and not any(q.args.get(k) is not None for k in ("limit", "offset", "fetch"))


def _ints(column: pa.ChunkedArray) -> np.ndarray:
    return column.to_numpy().astype(np.int64, copy=False) if len(column) else np.empty(0, dtype=np.int64)
