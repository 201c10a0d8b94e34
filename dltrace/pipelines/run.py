"""Running a pipeline with end-to-end lineage, and the questions a pipeline user asks of it.

Every step runs in dependency order on one session; its result is registered under the step's name with its
lineage (:mod:`dltrace.compose`), so the next step's lineage is in the original sources' row ids. Forward
(``method="forward"``, the rewritten queries) or backward (``"backward"``: every step traced by reverse
queries, composed with the earlier steps' traced lineage). A pipeline run without lineage (``lineage=None``)
registers plain rows: what the lineage costs is measured against it.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from dltrace.compose import composed_sources
from dltrace.engines import STRATEGIES, resolve_source
from dltrace.engines.sources import ArrowSource, LineageSource, ParquetSource, with_rid
from dltrace.errors import (
    ArgumentError,
    DltraceError,
    PipelineError,
    StaleLineage,
    UnknownTable,
    check_choice,
    check_mapping,
    check_path,
    check_text,
    row_indexes,
)
from dltrace.fingerprints import arrow_hash, file_hash
from dltrace.lineage_data import ByTable
from dltrace.names import row_key
from dltrace.pipelines.graph import Pipeline, Step, read_pipeline
from dltrace.py_values import py_list
from dltrace.forward_plan import rows_query
from dltrace.result import BackwardResult, LineageResult
from dltrace.session import Session, connect

METHODS = ("forward", "backward")


@dataclass(repr=False)  # (__repr__ below: one line)
class PipelineResult:
    """Every dataset of a pipeline run (``datasets``, in run order) with lineage in the sources' row ids."""

    pipeline: Pipeline
    session: Session
    strategy: str | None  # "set" | "bitmap" | None (the plain pipeline)
    method: str
    datasets: dict[str, LineageResult] = field(default_factory=dict)
    fingerprints: dict[str, str] = field(default_factory=dict)  # source table -> its content when the run began
    owns_session: bool = False
    # step -> the registration (Catalog.versions) the run made for its result: a trace reads the step's inputs from
    # the session, which another run of the pipeline registers again (a source converted to another lineage form
    # when read keeps its registration: on Spark every bitmap step was read so, and every trace refused)
    registered: dict[str, int] = field(default_factory=dict)

    def __repr__(self) -> str:  # (the dataclass's printed every step's SQL and the session: a new user's)
        lineage = f"{self.strategy} lineage ({self.method})" if self.strategy else "no lineage"
        return (f"<PipelineResult: {len(self.datasets)} dataset{'s' * (len(self.datasets) != 1)} "
                f"({', '.join(self.datasets)}) over {', '.join(self.sources) or 'no source'}, {lineage}>")

    def __getitem__(self, name: str) -> LineageResult:
        key = check_text(name, "a dataset name").lower()
        if key not in self.datasets:
            raise UnknownTable(f"the pipeline has no dataset {name!r}; its datasets: {', '.join(self.datasets)}")
        return self.datasets[key]

    def __iter__(self):
        return iter(self.datasets)

    @property
    def sources(self) -> list[str]:
        return self.pipeline.sources

    # -- which source rows produced this row (backward through every step) ----------------------------------
    def lineage(self, dataset: str, row: int) -> dict[str, list[int]]:
        """``{source table: [dl_rid, ...]}``: the source rows behind row ``row`` of ``dataset``."""
        return self[dataset].lineage(row)

    def backward(self, dataset: str, row: int, **options: Any) -> dict[str, pa.Table]:
        """The source tuples behind row ``row`` of ``dataset`` (``LineageResult.backward``'s options)."""
        return self[dataset].backward(row, **options)

    def trace(self, dataset: str, rows: list[int] | None = None) -> BackwardResult:
        """Backward tracing by reverse queries of ``dataset``'s step, composed with the stored lineage of the
        earlier steps' rows it reaches: lineage in the sources' row ids, row ``i`` being ``dataset``'s row
        ``i`` as this run stored it."""
        self._needs_lineage("trace")  # (the earlier steps' rows hold none: an empty lineage would be a wrong one)
        step = self.pipeline.step(dataset)
        stored = self[dataset]
        wanted = row_indexes(rows, stored.num_rows)  # (checked before the step runs again)
        # the trace's ids are matched to the rows this run stored and read back against the sources as they were
        # then: a source changed since (even with as many rows) would give the new rows as the old rows' lineage
        changed = self.session.changed_since(stored.base_snapshot or {})
        if changed:
            why = "; ".join(f"table {t!r} {reason}" for t, reason in changed)
            raise StaleLineage(f"trace of {dataset!r}: the pipeline's sources changed since it ran: {why}; the ids "
                               "it stored name other rows now: run the pipeline again")
        replaced = sorted(n for n in self.pipeline.upstream(dataset)
                          if n in self.registered and self.session.versions.get(n) != self.registered[n])
        if replaced:
            raise PipelineError(f"trace of {dataset!r}: {', '.join(map(repr, replaced))}, which it reads, "
                                f"{'was' if len(replaced) == 1 else 'were'} registered again since this run (by "
                                "another run of the pipeline, or s.register): trace the newest run, or run this "
                                "pipeline again")
        traced = self.session.trace(step.query, dialect=step.dialect)
        take = pa.array(_same_rows(stored.table, traced.table, step), type=pa.int64())
        lineage = {}
        for t, col in traced.lineage_columns.items():
            col = col.take(take)
            if wanted is not None:
                keep = set(wanted)
                col = pa.chunked_array([pa.array([v if i in keep else None for i, v in enumerate(col.to_pylist())],
                                                 type=col.type)])
            lineage[t] = col
        return BackwardResult(self.session, step.query, step.dialect, stored.table, lineage,
                              "reverse-all" if wanted is None else "reverse-one", traced.semantics, None,
                              base_snapshot=stored.base_snapshot, composed_from=traced.composed_from,
                              traced=None if wanted is None else tuple(wanted), queries=traced.queries)

    # -- which outputs of every step does this source row reach (forward impact across the graph) -----------
    def impact(self, table: str, rids: int | Iterable[int]) -> dict[str, list[int]]:
        """``{dataset: [row, ...]}``: the rows of every dataset whose lineage holds any of ``rids`` of source
        ``table`` (datasets not reading it, directly or through other steps, map to ``[]``)."""
        self._needs_lineage("impact")  # (no dataset holds lineage: "reaches nothing" would be a wrong answer)
        key = check_text(table, "table").lower()
        if key not in self.sources:
            raise DltraceError(f"{table!r} is not a source of the pipeline; its sources: {', '.join(self.sources)}")
        out = ByTable()  # (keyed in lower case, read in any case: p.impact(...)["Customer Value"])
        for name, r in self.datasets.items():
            out[name] = r.forward(key, rids) if key in r.lineage_columns else []
        return out

    def _needs_lineage(self, what: str) -> None:
        if self.strategy is None:
            raise DltraceError(f"{what} needs lineage: this pipeline ran with lineage=None; run it with "
                               "lineage='set' or 'bitmap'")

    # -- what changed downstream after a source changes (stale datasets) -----------------------------------
    def stale(self) -> dict[str, list[str]]:
        """``{dataset: [changed sources]}`` for every dataset that reads (through any step) a source whose
        content is not what the run read: its file(s) on disk for a table registered from a path (a CSV file read
        when it was registered, before it changed, counts), the registered table otherwise. Datasets not listed are
        up to date."""
        changed = [t for t, fp in self.fingerprints.items() if source_fingerprint(self.session, t) != fp]
        out = {}
        for name in self.datasets:
            hit = sorted(set(changed) & self.pipeline.upstream(name))
            if hit:
                out[name] = hit
        return out

    def close(self) -> None:
        """Close the session when the run opened it."""
        if self.owns_session:
            self.session.close()


def _same_rows(stored: pa.Table, again: pa.Table, step: Step) -> list[int]:
    """For each row of ``stored``, the position of the same row in ``again``, the step's rows from another run (the
    engine may give them in another order), or a :class:`PipelineError` when the two runs gave other rows."""
    where: dict[tuple, deque[int]] = {}
    for j, values in enumerate(_value_rows(again)):
        where.setdefault(row_key(values), deque()).append(j)
    order = []
    for values in _value_rows(stored):
        found = where.get(row_key(values))
        if not found:
            raise PipelineError(f"{step.where}: tracing it again gave other rows than the run: the sources "
                                "changed (see stale())")
        order.append(found.popleft())
    return order


def _value_rows(table: pa.Table):
    """The rows of ``table`` as tuples of Python values (by position: a query may repeat a column name)."""
    return zip(*[py_list(c) for c in table.columns])


def source_fingerprint(session: Session, table: str, registered: bool = False) -> str:
    """A digest of source ``table``'s content now: of the files its path names today (a file rewritten or
    added counts), else (or with ``registered``) of the registered table, what a run reads: a CSV file read when it
    was registered, the files of a folder as then listed (a run over a CSV file changed since read the rows as
    registered, which its fingerprint must say: a new user's rerun after fixing a file showed nothing stale)."""
    origin = None if registered else session.origins.get(table)
    src = session.tables.get(table)
    if origin is not None:
        try:
            src = resolve_source(origin)
        except DltraceError:
            return "gone"
    if src is None:
        return "unregistered"
    if isinstance(src, ParquetSource):
        return ";".join(f"{os.path.basename(f)}:{file_hash(f)}" for f in src.files)
    if isinstance(src, ArrowSource):
        return arrow_hash(src.table)
    n, h = session.engine.content_hash(table)
    return f"{n}:{h}"


def run_pipeline(path: str | os.PathLike | Pipeline, session: Session | None = None, engine: str | None = None,
                 lineage: str | None = "set", method: str = "forward", tables: dict[str, Any] | None = None,
                 tpch: float | None = None, **engine_options: Any) -> PipelineResult:
    """Read the pipeline at ``path`` and run every step with end-to-end lineage.

    The sources come from ``session`` (a dltrace session with the tables the pipeline reads), or from a new session
    on ``engine`` (default duckdb; with ``engine_options``) with ``tables`` ({name: path or table}) and/or TPC-H at
    scale ``tpch``. ``lineage``: "set" | "bitmap" | None (the plain pipeline); ``method``: "forward" (rewritten
    queries) or "backward" (reverse queries). Each step's dataset is registered in the session under its name
    (replacing an earlier run's). Errors are one-line :class:`PipelineError` naming the step and its file.
    """
    # every argument checked before a session opens or a step runs: a bad one found after the steps ran wasted them
    if not isinstance(path, Pipeline):
        check_path(path, "path")
    check_choice(method, "method", METHODS)
    check_choice(lineage, "lineage", STRATEGIES, noun="lineage strategy", none_ok=True)
    if session is not None and not isinstance(session, Session):
        raise ArgumentError(f"session must be a dltrace session (dltrace.connect(...)), got {type(session).__name__}")
    check_mapping(tables or {}, "tables", "name -> source")
    if session is not None and (engine is not None or engine_options):  # (they would be ignored: the run is session's)
        given = ", ".join(["engine"] * (engine is not None) + sorted(engine_options))
        raise ArgumentError(f"{given} would open a new session, and session= is given (its engine, "
                            f"{session.dialect}, runs the pipeline): pass one or the other")
    owns = session is None
    if session is None:
        session = connect(engine or "duckdb", **engine_options)
    try:
        if tpch is not None:
            session.load_tpch(tpch)
        for name, src in (tables or {}).items():
            session.register(name, src, replace=True)
        pipeline = path if isinstance(path, Pipeline) else read_pipeline(Path(path), dialect=session.dialect)
        result = _run(pipeline, session, lineage, method)
    except BaseException:
        if owns:
            session.close()
        raise
    result.owns_session = owns
    return result


def _plain(session: Session, result: LineageResult) -> LineageSource:
    """A dataset of a run without lineage: its rows (in its query's types) and row ids, no lineage columns (yet
    a pipeline's own)."""
    return LineageSource(with_rid(result.table), typed_by=rows_query(session, result), lineage=(), strategy="set")


def _run(pipeline: Pipeline, session: Session, lineage: str | None, method: str) -> PipelineResult:
    ours = set(composed_sources(session))  # an earlier run's datasets (a plain run's carry no lineage columns)
    known = {t for t in session.tables if t not in pipeline.names}
    pipeline.check_sources(known, session.not_registered)
    for s in pipeline.steps:  # a step must not replace a table the user registered as a source
        if s.name in session.tables and s.name not in ours or s.name in session.adopted:
            raise PipelineError(f"{s.where} defines {s.name!r}, a table registered in the session: rename the "
                                "step or the table")
    for s in pipeline.steps:  # forget an earlier run's datasets, so no step reads a stale one
        session.tables.pop(s.name, None)
    result = PipelineResult(pipeline, session, lineage, method)
    result.fingerprints = {t: source_fingerprint(session, t, registered=True) for t in pipeline.sources}
    for step in pipeline.steps:
        try:
            if method == "backward" and lineage is not None:
                r: LineageResult = session.trace(step.query, dialect=step.dialect)
            else:
                r = session.run(step.query, lineage=lineage, dialect=step.dialect)
            session.register(step.name, r if lineage is not None else _plain(session, r), replace=True)
        except DltraceError as e:
            text = " ".join(str(e).split())
            raise PipelineError(f"{step.where} failed: {text}") from None
        result.datasets[step.name] = r
        result.registered[step.name] = session.versions.get(step.name)
    return result
