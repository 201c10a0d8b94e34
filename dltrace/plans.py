"""Rewritten queries kept per catalog, so running the same query again does not parse and rewrite it again.

Rewriting a TPC-H query takes 3-16 ms of Python (sqlglot's parse, qualification, decorrelation and generation),
as much as running it on DuckDB at SF 1 for the short ones (Q2, Q11: 10-14 ms). A :class:`ForwardPlan` is what
a rewrite produced: the SQL texts to run and what the result needs to read their output (the column count, the
lineage column names, the engine's own names for the query's columns, LINEAGE ON's dictionary query).

A plan is valid while the catalog is as it was when it was made, and is found again only then:
- the key is the query text with every option that changes the rewrite (read dialect, strategy, semantics,
  end to end) and the catalog's *generation*, which every registration, adoption or replacement bumps
  (:meth:`dltrace.catalog.Catalog._forget`), with the names of the registered tables (code that adds or takes a
  table directly changes them);
- a table read in place from its source (``storage="source"``: parquet or CSV files, read at each query) may
  have new columns when its files are rewritten: the plan keeps the columns it was made with for those tables
  and is dropped when the engine reports others (a qualified ``*`` would otherwise keep the old columns); the
  engine is asked again only once a parquet file's size or modification time changed
  (:meth:`dltrace.catalog.Catalog.source_columns`);
- queries reading an earlier step's result (a composed source) are not kept: reading one may convert and
  register it again.
- an adopted relation's rows are frozen, but the user may give it other columns, which the engine names the
  output by: the plan keeps its columns too, and asking them raises :class:`~dltrace.errors.StaleLineage` then.
Nothing else a rewrite reads can change under a catalog: a memory copy is frozen rows.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

#: plans kept per catalog, least recently used dropped first
CAPACITY = 128


@dataclass(frozen=True)
class ForwardPlan:
    """What running a query with forward lineage needs, once rewritten."""

    text: str  # the rewritten query
    shared_text: str | None  # the one-row query of every row's common lineage (None: no shared lineage)
    width: int  # how many of the output columns are the query's own
    lineage: tuple[tuple[str, str], ...]  # (base table, lineage column) in output order
    names: tuple[str, ...]  # the engine's names for the query's own columns
    rows: tuple[tuple[str, int], ...]  # (table, row count): 64-bit bitmaps for tables of 2^32 rows or more
    off: bool  # LINEAGE ON (): no lineage
    dictionary_text: str | None  # LINEAGE ON over a table: the query of its value tuples' dictionary ids
    source_columns: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]  # in-place tables read: their columns
    sets_on_read: bool = False  # "set" lineage returned as id lists, sorted and deduplicated by the reader
    # tables whose ids come packed with others': (table, column, shift, bits, offset) (rewriter/passes/pack_ids.py)
    packed: tuple[tuple[str, str, int, int, int], ...] = ()
    # tables whose lineage columns are bit strings of their ids, ``rows`` bits each (rewriter/passes/dense_ids.py)
    dense: tuple[str, ...] = ()
    # (temporary table, its one-row query): stored before the query runs, dropped after (Rewritten.preludes)
    preludes: tuple[tuple[str, str], ...] = ()
    standalone_text: str | None = None  # with preludes: the query with them as CTEs (Rewritten.standalone_sql)
    reads: tuple[str, ...] = ()  # the registered tables the query names (a result's snapshot: Catalog.snapshot)
    # the query as written, counted, run first where the engine may raise for a lookup the rewrite's plan does not
    # evaluate (scalar_lookups.unguarded_lookup); None elsewhere
    check_text: str | None = None
    # queries that give a row where a lookup finds several rows for a key (Rewritten.lookup_probes): where one
    # does, the query as written runs first, counted, as check_text
    probe_texts: tuple[str, ...] = ()


class PlanCache:
    """The plans of one catalog (:attr:`dltrace.catalog.Catalog.plans`)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._plans: OrderedDict[tuple, ForwardPlan] = OrderedDict()

    def get(self, key: tuple, columns: Any) -> ForwardPlan | None:
        """The plan for ``key``, or None; ``columns(table)`` gives an in-place table's columns now."""
        plan = self._plans.get(key)
        if plan is None:
            return None
        if any(tuple(columns(t).items()) != cols for t, cols in plan.source_columns):
            del self._plans[key]  # a source's files changed their columns: rewrite
            return None
        self._plans.move_to_end(key)
        return plan

    def put(self, key: tuple, plan: ForwardPlan) -> None:
        self._plans[key] = plan
        self._plans.move_to_end(key)
        while len(self._plans) > self.capacity:
            self._plans.popitem(last=False)

    def clear(self) -> None:
        self._plans.clear()

    def __len__(self) -> int:
        return len(self._plans)
