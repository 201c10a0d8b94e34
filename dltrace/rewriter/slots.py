"""Lineage slots: where a relation's rows carry their lineage, one slot per base-table occurrence.

Below the first aggregation a row carries one scalar rid per table occurrence ("rid" slots, no sets);
aggregation, DISTINCT and set operators turn them into sets ("set" slots). A "const" slot has the same value
on every row of its relation (the lineage of a cross-joined global aggregate, e.g. an uncorrelated scalar
subquery); aggregations take it once (ANY_VALUE) instead of re-unioning it per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from sqlglot import exp

from dltrace.engines import LineageFunctions


@dataclass(frozen=True)
class Slot:
    table: str  # base table name, lower case
    expr: exp.Expression  # the slot's value in the consuming query's scope
    kind: str  # "rid" (scalar BIGINT) | "set" (array or bitmap)
    const: bool = False
    nullable: bool = False
    grouped: bool = False  # already one set per group (a HAVING witness): an aggregation unions it as it is
    origin: str | None = None  # the alias of the consuming SELECT's FROM item it comes from (rules/sources.py)

    def demoted(self) -> "Slot":
        """The slot seen through the null-padded side of an outer join."""
        return replace(self, const=False, nullable=True)


@dataclass(frozen=True)
class Exported:
    """A slot as an output column of a relation."""

    name: str
    table: str
    kind: str
    const: bool = False
    nullable: bool = False

    def via(self, alias: str) -> Slot:
        return Slot(self.table, exp.column(self.name, table=alias, quoted=True), self.kind, self.const, self.nullable)


#: impact lists up to this many kept ids; beyond, it keeps the ids in their range (see :class:`KeptRids`)
IN_LIST = 2000


@dataclass(frozen=True)
class KeptRids:
    """Impact's run (:mod:`dltrace.impact`): of ``table``'s rows only those asked about carry their row id into the
    lineage, every other row none. Only the lineage slots change: the query reads the table as written (its
    ``dl_rid`` too), so its rows are the query's own. Up to :data:`IN_LIST` ids are listed; more keep every id in
    their range, which the reader tells apart (a list of that size costs more to parse than the ids it spares)."""

    table: str  # lower case
    rids: tuple[int, ...]  # sorted, distinct

    def guard(self, rid: exp.Expression) -> exp.Expression:
        """``rid`` where it is kept, else NULL (a lineage union ignores NULL ids, as an outer join's padding)."""
        if not self.rids:
            kept: exp.Expression = exp.false()
        elif len(self.rids) <= IN_LIST:
            kept = exp.In(this=rid.copy(), expressions=[exp.Literal.number(i) for i in self.rids])
        else:
            kept = exp.Between(this=rid.copy(), low=exp.Literal.number(self.rids[0]),
                               high=exp.Literal.number(self.rids[-1]))
        return exp.Case(ifs=[exp.If(this=kept, true=rid)])


@dataclass
class Context:
    fns: LineageFunctions
    semantics: str = "witness"
    wide: frozenset = frozenset()  # tables that need 64-bit bitmaps
    ctes: dict = field(default_factory=dict)  # CTE name -> list[Exported]
    cte_bodies: dict = field(default_factory=dict)  # CTE name -> its query before instrumenting (whole_lineage)
    counter: list = field(default_factory=lambda: [0])
    only_tables: frozenset | None = None  # LINEAGE ON: lineage only for these base tables
    kept_rids: KeptRids | None = None  # impact: only these rows of one table carry their id
    names: dict = field(default_factory=dict)  # base table -> name of its final lineage column
    composed: dict = field(default_factory=dict)  # source -> ((base table, lineage column), ...): see PassContext
    hoisted: list = field(default_factory=list)  # (table, scalar subquery): lineage of every output row
    hoisted_ctes: list = field(default_factory=list)  # the CTEs those scalar subqueries read
    hoisted_from: list = field(default_factory=list)  # (the SELECT it is written in, subquery as written), each hoist
    # the root SELECT's tables in the order of its row-level slots before any were left to the shared lineage:
    # the order of the result's lineage columns (rules/covered_lineage.py)
    root_order: list = field(default_factory=list)
    # the hoisted lineage is the result's shared lineage, computed by a query of its own (instrument's
    # meta[SHARED_LINEAGE]) and kept once, instead of being merged into every output row
    shared: bool = False
    # the hoisted CTEs a session stores before the query runs (their value and lineage one evaluation), by name
    preludes: set = field(default_factory=set)
    # the engine's estimate of a query's rows (None: no estimate; see rules/nested_lineage.py)
    estimate_rows: Callable[[exp.Expression], int | None] | None = None
    integer_range: Callable[[exp.Expression], tuple[int, int] | None] | None = None  # (PassContext.integer_range)
    read_in_place: frozenset = frozenset()  # (PassContext.read_in_place)
    schema: dict = field(default_factory=dict)  # (PassContext.schema: table -> {column: type})
    root: exp.Expression | None = None  # the query being instrumented
    # the instrument pass's entry points, handed to the rules so that they can recurse into nested queries
    # and FROM clauses without importing the pass (rules sit below it)
    instrument: Callable | None = None  # (node, ctx, final) -> (node, exported)
    from_slots: Callable | None = None  # (select, ctx) -> row-level slots of its FROM clause

    @property
    def control(self) -> bool:
        return self.semantics == "control"

    def fresh(self, prefix: str) -> str:
        self.counter[0] += 1
        return f"{prefix}{self.counter[0]}"

    def scoped(self) -> "Context":
        """A context for a nested scope: its own CTE names; everything else shared."""
        return replace(self, ctes=dict(self.ctes), cte_bodies=dict(self.cte_bodies))

    def take_hoisted(self) -> dict[str, list[exp.Expression]]:
        """The hoisted constant lineage, per table, for the final lineage columns (taken once; nothing when
        it is kept as the result's shared lineage)."""
        out: dict[str, list[exp.Expression]] = {}
        if self.shared:
            return out
        for table, sub in self.hoisted:
            out.setdefault(table, []).append(sub)
        self.hoisted.clear()
        return out

    def output_name(self, table: str, taken: set[str]) -> str:
        """The final lineage column of ``table``: ``dl_<table>`` (or ``dl_on`` under LINEAGE ON)."""
        if table in self.names:
            taken.add(self.names[table])
            return self.names[table]
        return slot_name(table, taken)


def by_table(slots: list[Slot]) -> dict[str, list[Slot]]:
    out: dict[str, list[Slot]] = {}
    for s in slots:
        out.setdefault(s.table, []).append(s)
    return out


def slot_name(table: str, taken: set[str]) -> str:
    base = f"dl_{table}"
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}__{k}"
    taken.add(name)
    return name
