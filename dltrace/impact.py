"""Impact analysis: which output rows depend on these input rows.

The paper's revision use case: which output rows depend on some (faulty) input rows, from saved lineage
(:func:`dltrace.explore.forward`) or by a run in which only those rows carry a lineage id
(:class:`dltrace.rewriter.slots.KeptRids`). Either way the answer is ``forward`` on a run of the query as written:
the run of some rows changes the lineage it gathers, never the rows the query reads (a copy of the table with the
other rows' ``dl_rid`` NULL was read before, and a query reading ``dl_rid`` then computed other rows).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from sqlglot import exp

from dltrace.catalog import Catalog
from dltrace.engines.sources import LineageSource
from dltrace.errors import ArgumentError, DltraceError, UnknownTable, UnsupportedQuery, got
from dltrace.names import unknown_table
from dltrace.explore import forward
from dltrace.fetch import table_rids
from dltrace.result import LineageResult, run_forward
from dltrace.rewriter.grammar import LineageOn, generate
from dltrace.rewriter.parse import parse_query
from dltrace.rewriter.passes.identifier_tables import identifier_tables
from dltrace.rewriter.shape import engine_reads
from dltrace.rewriter.slots import KeptRids
from dltrace.store import load


@dataclass
class Impact:
    """The output rows (``rows``, indices into ``result.table``) that depend on input ``rids`` of ``table``.

    ``result``: the lineage the answer was read from -- the saved one, or the run's: of ``table`` only, holding the
    given rids that reach each row (more than :data:`dltrace.rewriter.slots.IN_LIST` of them: every rid in their
    range); the query's own run, every table's lineage, where that run was needed (a query over an earlier step,
    a shape lineage of one table does not read)."""

    rows: list[int]
    result: LineageResult
    table: str
    rids: list[int]
    source: str  # "saved" | "run"

    def __iter__(self):  # rows, result = session.impact(...)
        return iter((self.rows, self.result))

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def impacted(self) -> pa.Table:
        """The impacted output rows themselves."""
        return self.result.table.take(pa.array(self.rows, type=pa.int64()))


def _same_query(a: str, b: str, dialect_a: str, dialect_b: str) -> bool:
    try:
        return generate(parse_query(a, dialect_a), "duckdb") == generate(parse_query(b, dialect_b), "duckdb")
    except DltraceError:
        return a.strip() == b.strip()


def impact(catalog: Catalog, sql: str, table: str, rids: int | Iterable[int],
           saved: str | os.PathLike | LineageResult | None = None,
           lineage: str = "set", dialect: str | None = None, semantics: str | None = None) -> Impact:
    """Which output rows of ``sql`` depend on rows ``rids`` of ``table``: ``forward`` of the query's lineage.

    With ``saved`` (a folder written by ``r.save`` or a :class:`LineageResult`), answered on that lineage, which
    must be of every row of ``sql`` with the ``semantics`` asked (None: the saved lineage's); otherwise the query
    runs with lineage for ``table`` only, in which only the given rows carry their id (``semantics`` None:
    witness).
    """
    name = table.lower()
    # (a bad id named before anything runs; a range is checked against the table's size before it is expanded)
    q = table_rids(rids, name, catalog.num_rows(name) if name in catalog.tables else None)
    read = dialect or catalog.dialect  # (lineage and semantics checked by the session: check_choice)
    if saved is not None:
        return _impact_saved(catalog, sql, name, q, saved, read, semantics)
    # (a run without lineage would answer nothing: None reads as the default strategy)
    return _impact_run(catalog, sql, name, q, lineage or "set", read, semantics or "witness")


def _impact_saved(catalog: Catalog, sql: str, name: str, q: np.ndarray, saved: object, read: str,
                  semantics: str | None) -> Impact:
    if isinstance(saved, LineageResult):
        r = saved
    elif isinstance(saved, (str, os.PathLike)):
        r = load(saved, catalog)
    else:
        raise ArgumentError(f"saved must be a result (s.run(...)) or the folder r.save wrote, got {got(saved)}")
    r.check_fresh("impact")  # ``rids`` are rows of the table as registered now: the lineage's must be too
    if not _same_query(sql, r.sql, read, r.dialect):
        raise DltraceError("the saved lineage is for a different query than the one given")
    if semantics is not None and semantics != r.semantics:
        # control lineage holds every predicate subquery's rows, witness lineage those that made it true
        raise DltraceError(f"the saved lineage has {r.semantics} semantics, not the {semantics} asked for: run the "
                           f"query with semantics={semantics!r}, or leave semantics out to read the saved lineage's")
    r.check_every_row("impact")  # (a trace of some rows: an untraced row would read as reached by nothing)
    return Impact(forward(r, name, q), r, name, q.tolist(), "saved")


def _impact_run(catalog: Catalog, sql: str, name: str, q: np.ndarray, lineage: str, read: str,
                semantics: str) -> Impact:
    if name not in catalog.tables:
        raise UnknownTable(unknown_table(name, catalog.tables))
    tree = parse_query(sql, read)
    catalog.check_known_tables(tree)
    if tree.find(LineageOn):
        raise UnsupportedQuery("impact chooses the lineage itself: leave LINEAGE ON out of the query")
    catalog.check_numbering([name])  # (the ids asked for are rows of the table as its files are now)
    q = table_rids(q, name, catalog.num_rows(name))
    # the tables it reads as the run reads them: Spark's FROM IDENTIFIER('t') reads t (it was "does not read
    # table 't'" where s.run traced it; on DuckDB the run raises the engine's error for the call)
    tree = identifier_tables(tree)
    steps = _steps_read(catalog, tree)
    if steps:
        # the query reads an earlier step's rows, whose lineage is stored: the run with every row's lineage
        # (end to end, or in the step's own ids when the question is about the step's rows), then forward
        r = run_forward(catalog, sql, lineage=lineage, dialect=read, semantics=semantics,
                        end_to_end=name not in steps)
        if name not in r.lineage_columns:
            raise UnknownTable(f"the query's lineage holds no rows of table {name!r}")
        return Impact(forward(r, name, q), r, name, q.tolist(), "run")
    if not _reads(tree, name):
        raise UnknownTable(f"the query does not read table {name!r}")
    try:
        r = run_forward(catalog, sql, lineage=lineage, dialect=read, semantics=semantics,
                        kept_rids=KeptRids(name, tuple(q.tolist())))
    except UnsupportedQuery:
        # lineage of one table reads fewer shapes than the query's own run (as LINEAGE ON TABLES: an EXISTS whose
        # witnesses are found after the filter): that run, every row's lineage
        r = run_forward(catalog, sql, lineage=lineage, dialect=read, semantics=semantics)
    return Impact(forward(r, name, q), r, name, q.tolist(), "run")


def _steps_read(catalog: Catalog, tree: exp.Expression) -> set[str]:
    """The sources carrying lineage (earlier steps' results) the query reads (inside a CTE of their name too)."""
    return {t.name.lower() for t in engine_reads(tree) if isinstance(catalog.tables.get(t.name.lower()), LineageSource)}


def _reads(tree: exp.Expression, name: str) -> bool:
    """Does the query read registered table ``name`` (not a CTE of that name, but inside one of its name too;
    not ``s2.name``)?"""
    return any(t.name.lower() == name and not t.args.get("db") for t in engine_reads(tree))
