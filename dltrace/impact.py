"""Impact analysis: which output rows depend on these input rows.

The paper's revision use case: which output rows depend on some (faulty) input rows, from saved lineage
(:func:`dltrace.explore.forward`) or by a run in which only those rows carry a lineage id.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp, parse_one

from dltrace.catalog import Catalog
from dltrace.engines.base import ArrowSource, LineageSource
from dltrace.errors import DltraceError, UnknownTable, UnsupportedQuery
from dltrace.explore import forward, is_bitmap_type
from dltrace.fetch import as_rids, table_rids
from dltrace.names import RID
from dltrace.result import LineageResult, run_forward
from dltrace.rewriter.grammar import LineageOn, generate
from dltrace.rewriter.parse import parse_query
from dltrace.rewriter.shape import engine_reads
from dltrace.store import load
from dltrace.udafs.bitmap import load as load_bitmap


@dataclass
class Impact:
    """The output rows (``rows``, indices into ``result.table``) that depend on input ``rids`` of ``table``."""

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
           lineage: str = "set", dialect: str | None = None, semantics: str = "witness") -> Impact:
    """Which output rows of ``sql`` depend on rows ``rids`` of ``table``.

    With ``saved`` (a folder written by ``r.save`` or a :class:`LineageResult`), answered on that lineage
    (``forward``); otherwise the query runs with lineage for ``table`` only, and only the given rows carry a
    rid (every other row of ``table`` has a NULL rid, i.e. contributes nothing): the rows whose lineage is
    non-empty are the impacted ones.
    """
    name = table.lower()
    if not isinstance(rids, range):
        rids = as_rids(rids)  # (a bad one named before anything runs; a range is checked against the table first)
    read = dialect or catalog.dialect
    if saved is not None:
        r = saved if isinstance(saved, LineageResult) else load(saved, catalog)
        r.check_fresh("impact")  # ``rids`` are rows of the table as registered now: the lineage's must be too
        if not _same_query(sql, r.sql, read, r.dialect):
            raise DltraceError("the saved lineage is for a different query than the one given")
        rows = forward(r, name, rids)
        return Impact(rows, r, name, as_rids(rids).tolist(), "saved")
    return _impact_run(catalog, sql, name, rids, lineage, read, semantics)


def _impact_run(catalog: Catalog, sql: str, name: str, rids: range | np.ndarray, lineage: str, read: str,
                semantics: str) -> Impact:
    if name not in catalog.tables:
        raise UnknownTable(f"unknown table {name!r}; registered: {', '.join(sorted(catalog.tables)) or 'none'}")
    tree = parse_query(sql, read)
    catalog.check_known_tables(tree)
    if tree.find(LineageOn):
        raise UnsupportedQuery("impact chooses the lineage itself: leave LINEAGE ON out of the query")
    catalog.check_numbering([name])  # (read below through its rows relation, which the run's own check misses)
    q = table_rids(rids, name, catalog.num_rows(name))
    reads = engine_reads(tree)  # (a table read inside a CTE of its own name too)
    steps = {t.name.lower() for t in reads if isinstance(catalog.tables.get(t.name.lower()), LineageSource)}
    if steps:
        # the query reads an earlier step's rows, whose lineage is stored: the run with every row's lineage
        # (end to end, or in the step's own ids when the question is about the step's rows), then forward
        r = run_forward(catalog, sql, lineage=lineage, dialect=read, semantics=semantics,
                        end_to_end=name not in steps)
        if name not in r.lineage_columns:
            raise UnknownTable(f"the query's lineage holds no rows of table {name!r}")
        return Impact(forward(r, name, q), r, name, q.tolist(), "run")
    refs = [t for t in reads if t.name.lower() == name and not t.args.get("db")]
    if not refs:
        raise UnknownTable(f"the query does not read table {name!r}")
    # the table with only rids kept: a name of dltrace's own, which no relation on the engine has (a guest)
    temp = catalog.engine.fresh_name(f"_dltrace_impact_{name}")
    d = catalog.dialect
    qi = lambda s: exp.to_identifier(s, quoted=True).sql(d)  # noqa: E731
    cols = list(catalog.engine.columns(name))
    keep_name = None
    for t in refs:
        alias = t.alias_or_name
        t.set("this", exp.to_identifier(temp, quoted=True))
        t.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
    if isinstance(tree, exp.Select):
        tree.set("lineage_on", LineageOn(tables=[exp.Table(this=exp.to_identifier(temp, quoted=True))]))
    text = generate(tree, read)
    try:
        if q.size <= 2000:
            cond = f"{qi(RID)} IN ({', '.join(map(str, q.tolist()))})" if q.size else "FALSE"
            body = (f"SELECT {', '.join(qi(c) for c in cols)}, CASE WHEN {cond} THEN {qi(RID)} END AS {qi(RID)} "
                    f"FROM {qi(catalog.engine.rows_name(name))}")
        else:
            keep_name = catalog.engine.fresh_name(f"_dltrace_impact_keep_{name}")
            catalog.engine.register(keep_name, ArrowSource(pa.table({"rid": pa.array(q, type=pa.int64())})))
            body = (f"SELECT {', '.join('t.' + qi(c) for c in cols)}, k.{qi('rid')} AS {qi(RID)} "
                    f"FROM {qi(catalog.engine.rows_name(name))} AS t "
                    f"LEFT JOIN {qi(keep_name)} AS k ON t.{qi(RID)} = k.{qi('rid')}")
        # like a registered table: the user's columns as `temp`, the rows with their (kept) rids privately
        catalog.engine.register_view(temp, parse_one(body, read=d), cols)
        catalog.tables[temp] = catalog.tables[name]
        r = run_forward(catalog, text, lineage=lineage, dialect=read, semantics=semantics)
    except UnsupportedQuery:
        r = None  # the run of some rows refused a rewrite the query's own run takes (LINEAGE ON TABLES reads
        # fewer shapes, e.g. an EXISTS whose witnesses are found after the filter): below, that run and forward
    finally:
        catalog.tables.pop(temp, None)
        catalog.engine.drop(temp)  # and its rows relation
        if keep_name:
            catalog.engine.drop(keep_name)
    if r is None:
        full = run_forward(catalog, sql, lineage=lineage, dialect=read, semantics=semantics)
        return Impact(forward(full, name, q), full, name, q.tolist(), "run")
    col = r.sets(temp) if temp in r.lineage_columns else None  # (the shared part included: it reaches every row)
    r.lineage_columns = {name: col} if col is not None else {}
    r.shared_lineage = {}
    r.sql, r.dialect = sql, read
    rows = _nonempty_rows(col) if col is not None else []
    return Impact(rows, r, name, q.tolist(), "run")


def _nonempty_rows(col: pa.ChunkedArray) -> list[int]:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if is_bitmap_type(arr.type):
        return [j for j, v in enumerate(arr) if v.is_valid and len(load_bitmap(memoryview(v.as_buffer())))]
    flat = pc.list_flatten(arr)
    parents = pc.list_parent_indices(arr)
    keep = pc.is_valid(flat)
    return np.unique(parents.filter(keep).to_numpy()).tolist() if len(flat) else []
