"""The result of a query run with lineage, and the two ways to compute one.

:class:`LineageResult` is a query's rows and their lineage (:class:`~dltrace.lineage_data.LineageData`) plus
the questions one asks of it: ``backward`` / ``forward`` / ``explain`` (:mod:`dltrace.explore`), ``verify``
(:mod:`dltrace.oracle`), ``save`` (:mod:`dltrace.save_folder`). :func:`run_forward` computes one by running the
rewritten query (:mod:`dltrace.rewriter`); :func:`trace_backward` by reverse queries (:mod:`dltrace.backward`),
as a :class:`BackwardResult`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dltrace import explore, lineage_relations, oracle, save_folder
from dltrace.backward import trace as reverse_trace
from dltrace.catalog import Catalog
from dltrace.compose import check_semantics, composed_sources, compose_traced, snapshot_read
from dltrace.engines import BITS64, lineage_functions
from dltrace.errors import (ArgumentError, DltraceError, QueryError, UnknownChoice, UnknownTable, UnsupportedQuery,
                             check_names, check_path, got)
from dltrace.forward_plan import counted_text, engine_names, make_plan, plain_text
from dltrace.lineage_data import FinishedOnRead, LineageData
from dltrace.names import one_zero
from dltrace.py_values import py_list
from dltrace.rewriter import base_tables
from dltrace.rewriter.grammar import LineageOn
from dltrace.rewriter.lineage_on import clause_tables
from dltrace.rewriter.parse import mentions_rid, parse_query
from dltrace.rewriter.passes.scalar_lookups import GUARD_RAISED
from dltrace.rewriter.slots import KeptRids


@dataclass(repr=False)  # (LineageData.__repr__: a few lines, not the session and every column)
class LineageResult(LineageData):
    """Rows of a query (``table``) and, per row, the base rows they came from (``lineage(i)``).

    ``composed_from``: the sources carrying lineage (earlier steps' results) the query read end to end; its
    lineage is then in their base tables' row ids."""

    composed_from: tuple[str, ...] = ()

    def verify(self, i: int, unrestricted: tuple[str, ...] = ()) -> bool:
        """The completeness oracle: restrict every base table to row ``i``'s lineage, rerun the query,
        and check that row ``i`` comes back with the same values.

        Under negation (NOT EXISTS, NOT IN, EXCEPT) witness lineage leaves out the rows that did *not*
        match, and restricting them away can let other rows through; name such tables in
        ``unrestricted`` to keep them whole while the others are restricted.
        """
        if self.on_values is not None:
            raise DltraceError("verify needs row ids: this result's lineage is LINEAGE ON value tuples")
        if self.composed_from:
            raise DltraceError(f"verify reruns one query, and this one reads {', '.join(self.composed_from)}, an "
                               "earlier step's result: verify the steps inlined as CTEs, or run with end_to_end=False")
        self.check_fresh("verify")
        lineage = self.lineage(i)
        for t in check_names(unrestricted, "unrestricted") or ():
            if t.lower() not in lineage:  # (a misspelt name would leave the table restricted, and say nothing)
                raise UnknownTable(f"unrestricted names {t!r}, which this query does not read: it reads "
                                   f"{', '.join(sorted(lineage)) or 'no table'}")
            lineage.pop(t.lower(), None)
        return oracle.verify_row(self.session, self.sql, self.dialect, self.table, i, lineage)

    def backward(self, i: int, tables: Iterable[str] | str | None = None, columns: dict[str, list[str]] | None = None,
                 limit: int | None = None) -> dict[str, pa.Table]:
        """``{table: pyarrow.Table}``: the base tuples (all columns plus ``dl_rid``, in rid order) behind row ``i``,
        fetched by rid. ``tables`` restricts the tables, ``columns`` maps a table to the columns to read,
        ``limit`` keeps the first tuples per table."""
        self.check_fresh("backward")
        return explore.backward(self, i, tables=tables, columns=columns, limit=limit)

    def forward(self, table: str, rids: int | Iterable[int] | np.ndarray) -> list[int]:
        """Indices of the output rows whose lineage in ``table`` contains any of ``rids`` (an int or ints)."""
        return explore.forward(self, table, rids)

    def explain(self, i: int, samples: int = 3) -> str:
        """A readable summary of row ``i``'s lineage: per table the count, rid ranges and a few tuples."""
        if self.on_values is None:  # (LINEAGE ON's value tuples were captured with the lineage: no base read)
            self.check_fresh("explain")
        return explore.explain(self, i, samples=samples)

    def save(self, path: str | os.PathLike) -> Path:
        """Save rows, lineage and a manifest (with base table fingerprints) to folder ``path``, atomically."""
        check_path(path, "path")
        self.check_fresh("save")  # (the fingerprints taken now must be of the tables the ids name)
        return save_folder.save(self, path)

    # -- lineage as relations (:mod:`dltrace.lineage_relations`) ---------------------------------------
    def lineage_batches(self, table: str | None = None,
                        batch_rows: int = lineage_relations.BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """The lineage as ``(row, table, rid)`` record batches (``(row, rid)`` of one ``table``), expanded
        ``batch_rows`` output rows at a time: a large set is decoded only when its batch is reached."""
        return lineage_relations.lineage_batches(self, table, batch_rows)

    def lineage_table(self, table: str | None = None) -> pa.Table:
        """Every lineage triple ``(row, table, rid)`` as Arrow (``(row, rid)`` with ``table``): all of it at
        once; :meth:`lineage_batches` streams it."""
        return lineage_relations.lineage_table(self, table)

    def to_pandas(self, lineage: str | None = "count") -> Any:
        """The rows as a pandas DataFrame with, per base table ``t``: ``dl_count_<t>`` (``lineage="count"``,
        the size of the row's lineage in ``t``), ``dl_<t>`` (``"ids"``: the list of rids, decoded for every
        row), or nothing (``None``). Under LINEAGE ON, ``"ids"`` gives the value tuples."""
        if lineage is not None and not isinstance(lineage, str):
            raise ArgumentError(f"to_pandas(lineage=...) takes 'count', 'ids' or None, got {got(lineage)}")
        if lineage == "count":
            return _as_pandas(lineage_relations.with_counts(self))
        frame = _as_pandas(self.table)
        if lineage == "ids":
            every = self.lineage_all() if self.lineage_columns else []
            for t in self.lineage_columns:
                frame[f"dl_{t}"] = [None if row is None else row[t] for row in every]
        elif lineage is not None:
            raise UnknownChoice(f"to_pandas(lineage=...) takes 'count', 'ids' or None, not {lineage!r}")
        return frame

    def register(self, name: str, replace: bool = False) -> dict[str, str]:
        """Expose this result as views of its session, so its lineage is plain SQL: ``<name>`` (the rows, with
        their index ``row``), ``<name>_lineage`` ``(row, table, rid)`` and ``<name>_lineage_<table>``
        ``(row, rid)``. Returns ``{"rows": ..., "lineage": ..., <table>: ...}``. See the README for joining a
        rid to its base row."""
        return lineage_relations.register_views(self.session, self, name, replace=replace)

    def _repr_html_(self) -> str:
        return lineage_relations.to_html(self)


@dataclass(repr=False)  # (LineageData.__repr__: a few lines, not the session and every column)
class BackwardResult(LineageResult):
    """A :class:`LineageResult` computed by backward tracing.

    ``table`` always holds every output row of the query, so row ``i`` is the query's row ``i``. With
    ``rows=[...]`` (reverse-one/-some) only those rows were traced: ``traced`` lists them, their lineage
    columns are NULL elsewhere, and ``lineage(i)`` of an untraced row raises instead of answering "nothing".
    ``queries`` are the statements the trace ran, in order.
    """

    traced: tuple[int, ...] | None = None  # None: every row was traced (reverse-all)
    queries: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._traced = None if self.traced is None else frozenset(self.traced)

    def is_traced(self, i: int) -> bool:
        return self._traced is None or i in self._traced

    def check_row(self, i: Any) -> int:
        """As :meth:`LineageData.check_row`, and row ``i`` must be one that was traced: of the others nothing
        is known (their lineage columns are NULL), which must not read as "no lineage"."""
        i = super().check_row(i)
        if not self.is_traced(i):
            shown = ", ".join(map(str, sorted(self._traced)[:10]))
            raise DltraceError(f"row {i} was not traced (traced rows: {shown}); trace it with rows=[{i}] or rows=None")
        return i

    def lineage_all(self) -> list[dict[str, list[int]] | None]:
        """Lineage of every output row; ``None`` for rows that were not traced."""
        full = super().lineage_all()
        return [lin if self.is_traced(i) else None for i, lin in enumerate(full)]

    # What reads every row's lineage: over a trace of some rows an untraced row would read as having none (a
    # forward question answered "nothing reaches", a saved lineage of empty sets), so it is refused.
    def check_every_row(self, what: str) -> None:
        if self._traced is not None:
            shown = ", ".join(map(str, sorted(self._traced)[:10]))
            raise DltraceError(f"{what} reads every row's lineage, and this trace holds rows {shown} only: trace "
                               f"with rows=None")

    def save(self, path: str | os.PathLike) -> Path:
        self.check_every_row("save")
        return super().save(path)

    def lineage_batches(self, table: str | None = None,
                        batch_rows: int = lineage_relations.BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        self.check_every_row("lineage_batches")
        return super().lineage_batches(table, batch_rows)

    def lineage_table(self, table: str | None = None) -> pa.Table:
        self.check_every_row("lineage_table")
        return super().lineage_table(table)

    def to_pandas(self, lineage: str | None = "count") -> Any:
        if lineage is not None:
            self.check_every_row(f"to_pandas(lineage={lineage!r})")
        return super().to_pandas(lineage)

    def register(self, name: str, replace: bool = False) -> dict[str, str]:
        self.check_every_row("register")
        return super().register(name, replace)


def _as_pandas(table: pa.Table) -> Any:
    """``table`` as a pandas DataFrame, or one line naming the column pandas has no type for (a UNION: Arrow's
    sparse union)."""
    try:
        return table.to_pandas()
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, ValueError, OverflowError):
        for j, field in enumerate(table.schema):
            try:
                pa.table({field.name: table.column(j)}).to_pandas()
            except pa.ArrowNotImplementedError:
                raise DltraceError(f"to_pandas: column {field.name!r} is of a type pandas cannot hold ({field.type}); "
                                   f"read it from r.table (Arrow), or cast it in the query") from None
            except (pa.ArrowInvalid, ValueError, OverflowError) as e:
                # (a DATE 'infinity' or BC raised Python's "year ... is out of range": a review's)
                raise DltraceError(f"to_pandas: column {field.name!r} holds a value pandas cannot hold ({e}: a date or "
                                   f"time outside years 1-9999, DuckDB's infinity); read it from r.table (Arrow), or "
                                   f"cast it in the query") from None
        raise


def run_forward(catalog: Catalog, sql: str, lineage: str | None = "set", dialect: str | None = None,
                semantics: str = "witness", end_to_end: bool = True,
                kept_rids: KeptRids | None = None, pinned_lookups: bool = False) -> LineageResult:
    """Run ``sql`` rewritten to carry forward lineage (``lineage`` = "set" | "bitmap" | None for the plain query).

    A source registered from a result with lineage (an earlier step) contributes its rows' stored lineage when
    ``end_to_end`` (the lineage is in the original tables' row ids), else its own row ids (one step).
    The rewrite is kept with the catalog and used again for the same query on the same tables
    (:mod:`dltrace.plans`), except impact's (``kept_rids``: lineage of one table, of some of its rows only).

    Where a guard of a lookup raises "more than one row" (:mod:`dltrace.rewriter.passes.scalar_lookups`), the
    query as written runs, counted: the engine's own error where it raises. Where it answers, the guard raised for
    a row the engine's plan never evaluated the lookup for (DuckDB's optimizer joined the lookup's table to it
    before the FROM's other joins; ``tests/found_by_generator.md`` #37), and the query runs again with its guards
    kept where they stand (``pinned_lookups``: a slower plan, only then); if one raises still, the query is
    refused, by name."""
    read = dialect or catalog.dialect
    engine_bitmaps = lineage == "bitmap" and lineage_functions(catalog.dialect, lineage).builds_bitmaps
    key = (sql, read, lineage, semantics, end_to_end, catalog.generation, tuple(catalog.tables))
    reuse = lineage is not None and kept_rids is None and not pinned_lookups  # (a plan kept with the catalog)
    plan = catalog.plans.get(key, catalog.source_columns) if reuse else None
    if plan is None:
        tree = parse_query(sql, read)
        catalog.check_known_tables(tree, named=clause_tables(tree))
        if lineage is None and tree.find(LineageOn):
            lineage = "set"  # the clause asks for lineage; LINEAGE ON () below turns it off again
        if lineage is None:
            if mentions_rid(tree):  # the rows' ids are read (from the rows relations): one per row?
                catalog.check_numbering(base_tables(tree))
            table = catalog.engine.sql(plain_text(catalog, tree))
            # the engine's names for the text as written (sqlglot respells string_agg(x) as listagg(x))
            table = table.rename_columns(engine_names(catalog, sql, read, tree))
            return LineageResult(catalog, sql, read, table, {}, None, semantics, None)
        # (before the rewrite reads their columns; a run without lineage reads the user's relation, as s.sql does)
        catalog.check_registered_not_replaced(base_tables(tree))
        plan, composed = make_plan(catalog, tree, sql, read, lineage, semantics, end_to_end, engine_bitmaps, kept_rids,
                                   pinned_lookups)
        if reuse and not composed:  # reading a composed source may convert and register it: not kept
            catalog.plans.put(key, plan)
    else:
        composed = {}
    if engine_bitmaps:
        catalog.engine.install_functions()
    snapshot = snapshot_read(catalog, plan.reads, [*dict(plan.lineage), *(t for t, *_ in plan.packed)], end_to_end)
    asked = plan.check_text is not None or pinned_lookups
    if plan.check_text is not None:  # (the query as written first: the engine raises where it raises)
        catalog.engine.sql(plan.check_text)
    elif not asked and any(catalog.engine.sql(p).num_rows for p in plan.probe_texts):
        # a lookup finds several rows for a key: the engine raises for the rows its plan evaluates it for, which
        # may be more than the rewrite's plan does (a decorrelated IN or a join filtering first: dltrace answered
        # where DuckDB raised, a review) -- its verdict first
        catalog.engine.sql(counted_text(catalog, parse_query(sql, read)))
        asked = True
    try:
        with _preludes_stored(catalog, plan.preludes):
            out = catalog.engine.sql(plan.text)
            common = catalog.engine.sql(plan.shared_text) if plan.shared_text is not None else None
        catalog.check_unchanged_while_run(snapshot, plan.reads)
    except QueryError as error:
        if GUARD_RAISED not in str(error) or lineage_functions(catalog.dialect, "set").kept_in_place() is None:
            # (an engine that keeps a guard where it stands (Spark) evaluates it for the rows it evaluates the
            # lookup for: its error is the engine's, where the query as written counted may not raise, its optimizer
            # pruning the unread lookup; pinning changes nothing there: a Spark user's probe)
            raise
        if pinned_lookups:
            raise UnsupportedQuery(f"a correlated scalar subquery finds several rows for a row the engine's plan of "
                                   f"the query never evaluates it for, and dltrace's plans do ({error}): not "
                                   f"supported; the engine answers the query as written") from None
        if not asked:
            catalog.engine.sql(counted_text(catalog, parse_query(sql, read)))  # (the engine's error where it raises)
        return run_forward(catalog, sql, lineage, dialect, semantics, end_to_end, kept_rids, pinned_lookups=True)
    columns = dict(plan.lineage)  # table -> its column
    fields = {}  # a packed table: (shift, bits, offset) of its ids in its column, read out when first read
    for t, column, *spec in plan.packed:
        columns[t], fields[t] = column, tuple(spec)
    lineage_width = len(set(columns.values()))
    if out.num_columns != plan.width + lineage_width:
        # one SELECT item the engine expanded into several columns (DuckDB's unnest of a struct): the lineage
        # columns are no longer where the rewrite put them
        raise UnsupportedQuery.expanded_columns(plan.width, out.num_columns - lineage_width)
    own = out.select(list(range(plan.width)))
    sets = {t: out.column(name) for t, name in columns.items()}
    shared = {}
    if common is not None:  # every row's common lineage: one row, kept once
        shared = {t: common.column(name) for t, name in plan.lineage if name in common.column_names}
    if lineage == "bitmap":
        # columns the engine left as id lists (or, on an engine that does not build bitmaps, as sets) are built
        # when first read, byte for byte what the engine's dl_bitmap_build writes; the one-row shared part too
        rows = dict(plan.rows)
        wide = frozenset(t for t in [*sets, *shared] if rows.get(t, 0) >= BITS64)
        sets = FinishedOnRead.bitmaps(sets, wide, fields, {t: rows[t] for t in plan.dense})
        shared = FinishedOnRead.bitmaps(shared, wide)
    elif plan.sets_on_read:  # the rows' id lists as the engine gathered them: sorted and deduplicated when read
        sets = FinishedOnRead.sets(sets, fields)
        shared = FinishedOnRead.sets(shared)
    own = own.rename_columns(list(plan.names))
    # no lineage only when the clause turned it off (LINEAGE ON ()); a query reading no table has empty lineage
    # (with preludes, the text that runs without them stored: what the user reads is one statement that runs)
    result = LineageResult(catalog, sql, read, own, sets, None if plan.off else lineage, semantics,
                           plan.standalone_text or plan.text,
                           shared_lineage=shared, base_snapshot=snapshot, composed_from=tuple(composed))
    if plan.dictionary_text is not None:
        words = catalog.engine.sql(plan.dictionary_text)
        keys = words.column_names[:-1]
        cols = [py_list(words.column(k)) for k in keys]
        ids = words.column(-1).to_pylist()
        result.on_values = {int(i): one_zero(tuple(c[j] for c in cols)) for j, i in enumerate(ids)}
    return result


@contextmanager
def _preludes_stored(catalog: Catalog, preludes: tuple[tuple[str, str], ...]) -> Iterator[None]:
    """The plan's one-row preludes stored as the engine's temporary tables while the block runs, and dropped
    after it however it ends (dltrace's own relations: the user's session keeps nothing of them)."""
    made, failed = [], False
    try:
        for name, text in preludes:
            catalog.engine.materialize(name, text)
            made.append(name)
        yield
    except BaseException:
        failed = True
        raise
    finally:
        for name in reversed(made):
            try:
                catalog.engine.drop(name)
            except Exception:  # noqa: BLE001 (the engine's own error type, whatever it is)
                # after the query's own error, that is the one to see: in the transaction it failed, the engine
                # refuses the drop too (and rolls the table back with the transaction)
                if not failed:
                    raise


def trace_backward(catalog: Catalog, sql: str, rows: list[int] | None = None, dialect: str | None = None,
                   semantics: str = "witness", end_to_end: bool = True) -> BackwardResult:
    """Backward lineage of ``sql``'s output rows by Cui-Widom reverse queries: all of them (``rows=None``,
    reverse-all) or ``rows`` (reverse-one), as a result whose row ``i`` is the query's row ``i``.

    A source registered from a result with lineage is traced to its own rows; with ``end_to_end`` each of them
    then contributes its stored lineage (the composition of this step's trace with the earlier steps')."""
    reads = base_tables(parse_query(sql, dialect or catalog.dialect))
    if end_to_end:  # (before the reverse queries run: their lineage could not be composed)
        check_semantics({t: src for t, src in composed_sources(catalog).items() if t in reads}, semantics)
    snapshot = snapshot_read(catalog, reads, (), end_to_end)
    found = reverse_trace(catalog, sql, rows=rows, dialect=dialect, semantics=semantics)
    names = engine_names(catalog, sql, dialect or catalog.dialect)
    if len(names) != found.table.num_columns:  # the engine lists columns the reverse query's items do not
        raise UnsupportedQuery.expanded_columns(found.table.num_columns, len(names))
    table = found.table.rename_columns(names)
    off = found.lineage_columns is None  # (LINEAGE ON (): no lineage, as run gives none)
    lineage, through = found.lineage_columns or {}, ()
    if end_to_end and not off:
        through = tuple(t for t in lineage if t in composed_sources(catalog))
        if through and found.on_values is not None:
            raise UnsupportedQuery(f"LINEAGE ON over {', '.join(through)}, a source carrying its own lineage, is "
                                   "not supported: ask for one-step lineage (end_to_end=False)")
        lineage = compose_traced(catalog, lineage)
    return BackwardResult(
        catalog, sql, dialect or catalog.dialect, table, lineage,
        None if off else "reverse-all" if rows is None else "reverse-one", semantics, None, found.on_values,
        base_snapshot=snapshot, composed_from=through, traced=found.traced, queries=found.queries,
    )

