"""Lazy backward tracing by Cui-Widom reverse queries (TODS 2000), on any engine of the protocol.

``trace(catalog, sql)`` runs the query once -- over materialised intermediates, cut at every aggregation,
DISTINCT, set operation and LIMIT (:mod:`.segments`) -- and then traces its output rows top-down, one
batched tracing query per segment (:mod:`.segment_sql`, :mod:`.tracing`, :mod:`.execute`). The target rows
are a registered Arrow table joined in with null-safe equality, so values never pass through SQL text; values are
compared in the types the engine compared them in (:mod:`.exact`). The
result has the same format as forward lineage (:mod:`.assemble`); :func:`dltrace.result.trace_backward`
wraps it as a result.

Expected agreement with forward (witness) lineage: equal for queries without duplicate output rows and
without negation (the paper's Theorem 6); otherwise backward is a superset (a duplicate gets the pool of
all its derivations -- the paper's section 2.1, Table 5).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from sqlglot import exp

from dltrace.backward.assemble import Collector
from dltrace.backward.exact import root_rows
from dltrace.backward.execute import Run, Tracer
from dltrace.backward.granularity import project_onto
from dltrace.backward.segments import number_nodes
from dltrace.backward.ties import check_window_ties
from dltrace.catalog import Catalog
from dltrace.engines import lineage_functions
from dltrace.errors import DltraceError, QueryError, RowOutOfRange, UnsupportedQuery, row_indexes
from dltrace.rewriter import base_tables, counted_query, rewrite_tree
from dltrace.rewriter.analysis import SEMANTICS, prepare
from dltrace.rewriter.parse import parse_query, position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.grammar import generate
from dltrace.rewriter.lineage_on import clause_tables
from dltrace.rewriter.passes.correlation import LIMITED_ROWS
from dltrace.rewriter.passes.lateral_joins import LATERAL_ROWS
from dltrace.rewriter.passes.key_types import strings_identical
from dltrace.rewriter.passes.scalar_lookups import (CHECKED, GUARD, GUARD_RAISED, ITEM_GUARD, KEPT_LOOKUP,
                                                    lookup_probes, unguarded_lookup)
from dltrace.rewriter.shape import clock_call, random_call


@dataclass
class BackwardTrace:
    """What a trace found: every output row of the query and, per base table, the lineage of the traced ones."""

    table: pa.Table  # every output row of the query, in the engine's order
    # base table -> list<int64> per row (NULL: not traced); None: no lineage (LINEAGE ON ())
    lineage_columns: dict[str, pa.ChunkedArray] | None
    traced: tuple[int, ...] | None  # the rows traced; None: all of them
    queries: list[str] = field(default_factory=list)  # the statements the trace ran, in order
    on_values: dict[int, tuple] | None = None  # LINEAGE ON: dictionary id -> value tuple


def trace(catalog: Catalog, sql: str, rows: list[int] | None = None, dialect: str | None = None,
          semantics: str = "witness") -> BackwardTrace:
    """Backward lineage of ``sql``'s output rows: all of them (``rows=None``, reverse-all) or ``rows``.

    The trace's ``table`` is every output row of the query, in the engine's order; its lineage columns are
    indexed by that row. With ``rows`` given, only those rows are traced (``traced``); the others' lineage is
    NULL. Raises :class:`dltrace.UnsupportedQuery` for what cannot be traced.
    """
    try:
        try:
            return _trace(catalog, sql, rows, dialect, semantics)
        except QueryError as error:
            if GUARD_RAISED not in str(error) or lineage_functions(catalog.dialect, "set").kept_in_place() is None:
                raise  # (as run_forward: nothing to pin on an engine that keeps a guard where it stands)
        # a lookup's guard raised: the engine's own error where the query as written raises, else the guards kept
        # where they stand (as run_forward: DuckDB's optimizer evaluated one for a row the FROM never gives)
        tree = parse_query(sql, dialect or catalog.dialect)
        catalog.engine.sql(generate(counted_query(tree, _tracing_context(catalog, tree, semantics)), catalog.dialect))
        try:
            return _trace(catalog, sql, rows, dialect, semantics, pinned_lookups=True)
        except QueryError as error:
            if GUARD_RAISED not in str(error):
                raise
            raise UnsupportedQuery(f"a correlated scalar subquery finds several rows for a row the engine's plan of "
                                   f"the query never evaluates it for, and dltrace's reverse queries do ({error}): "
                                   f"not supported; the engine answers the query as written") from None
    except UnsupportedQuery as refusal:
        raise _forward_reads_it(refusal, catalog, sql, dialect or catalog.dialect, semantics) from None


def _forward_reads_it(refusal: UnsupportedQuery, catalog: Catalog, sql: str, read: str,
                      semantics: str) -> UnsupportedQuery:
    """``refusal``, saying so when forward lineage reads the query (a subquery correlated by a range is read over
    a domain of the outer values for forward lineage only): its user then knows ``run`` gives the lineage."""
    if "could not be decorrelated" not in str(refusal):
        return refusal
    try:
        tree = parse_query(sql, read)
        schema = catalog.schema(tree)
        rewrite_tree(tree, catalog.dialect, "set", semantics, schema, rows_relations=catalog.rows_relations(),
                     collations=catalog.collations(schema))
    except DltraceError:
        return refusal
    return UnsupportedQuery(f"{refusal}; backward tracing cannot read it, forward lineage (run) does")


def _trace(catalog: Catalog, sql: str, rows: list[int] | None, dialect: str | None,
           semantics: str, pinned_lookups: bool = False) -> BackwardTrace:
    read = dialect or catalog.dialect
    tree = parse_query(sql, read)
    catalog.check_known_tables(tree, named=clause_tables(tree))
    catalog.check_registered_not_replaced(base_tables(tree))  # (before the rewrite reads their columns)
    call = random_call(tree)
    if call is not None:  # (a row drawn by the run and not by the trace had no lineage; a sum's was other rows')
        raise UnsupportedQuery(f"backward tracing of a query calling a function that gives another value each time "
                               f"is not supported (its reverse queries evaluate the query again), at {position(call)}: "
                               f"forward lineage (run) computes lineage in the same evaluation")
    # the time of day (not the date alone: a trace sees the run's date unless it spans midnight, and refusing
    # CURRENT_DATE would refuse most reports): a row kept at the run's instant may be dropped at a later one's
    clock = clock_call(tree, dates=False)
    if clock is not None:
        raise UnsupportedQuery(f"backward tracing of a query reading the time of day is not supported (its reverse "
                               f"queries are later statements, which read a later time), at {position(clock)}: "
                               f"forward lineage (run) computes lineage in the same evaluation")
    calls = list(tree.find_all(exp.Anonymous))
    volatile = catalog.engine.volatile_functions({c.name.lower() for c in calls}) if calls else frozenset()
    for call in calls:
        if call.name.lower() in volatile:  # (a user's function with side effects: the engine says it varies)
            raise UnsupportedQuery(f"backward tracing of a query calling {call.name}, which the engine declares "
                                   f"volatile, is not supported (its reverse queries call it again), at "
                                   f"{position(call)}: forward lineage (run) computes lineage in the same evaluation")
    context = _tracing_context(catalog, tree, semantics, pinned_lookups)
    prepared = prepare(tree, context)
    on = prepared.on  # LINEAGE ON: trace per tuple, then project (granularity.py)
    if prepared.lineage_off:
        prepared = prepare(prepared.tree, context)  # still trace, to run the query the same way
    normal = prepared.tree
    kept = next((n for n in normal.find_all(exp.Subquery) if n.meta.get(KEPT_LOOKUP)), None)
    if kept is not None:
        # its reverse queries evaluate the lookup under other plans, for other rows than the query's: one raises
        # "more than one row" where the other answers (the long generator profile: the trace returned rows)
        raise UnsupportedQuery(f"backward tracing of a lookup correlated by a range, which the engine evaluates "
                               f"for the rows each plan reaches, is not supported, at {position(kept)}: forward "
                               f"lineage (run) reads it")
    for mark, what in ((LIMITED_ROWS, "a correlated scalar subquery"), (LATERAL_ROWS, "a LATERAL subquery")):
        numbered = next((n for n in normal.find_all(exp.Subquery) if n.meta.get(mark)), None)
        if numbered is not None:
            # its reverse queries number the rows again, and where rows tie in the ORDER BY they may keep another
            # row than the one whose value the query returned
            raise UnsupportedQuery(f"backward tracing of {what} with ORDER BY ... LIMIT / OFFSET is not supported, "
                                   f"at {position(numbered.meta[mark])}: forward lineage (run) reads it")
    setop = next(normal.find_all(exp.SetOperation), None)
    if setop is not None and not strings_identical(normal, context.collations):
        # a side's rows are found again by comparing them with the output's values, each in its own column's
        # collation, where the engine compared both sides in the operation's (a plain VARCHAR side lost its 'A'
        # to a NOCASE side's 'a'; found by a probe)
        raise UnsupportedQuery(f"backward tracing of a set operation where a string collation may apply is not "
                               f"supported, at {position(setop)}: forward lineage (run) reads it")
    tables = list(prepared.tables)
    check_window_ties(normal, lambda probe: catalog.engine.sql(generate(probe, catalog.dialect)).num_rows,
                      context.schema, catalog.dialect)
    _check_unread_lookups(catalog, tree, normal, context)
    number_nodes(normal)

    run = Run(catalog.engine, catalog.dialect, context)
    try:
        tracer = Tracer(run, semantics)
        root = tracer.node_for(normal, {}, None)
        query = tracer.builder.output_query(root, present=False)
        kinds = tracer.types.of(query)
        width = len(root.names)
        extra = sum(p is None for p in root.key_pos) if root.mode == "groups" else 0
        if len(kinds) != width + extra:
            raise UnsupportedQuery.expanded_columns(width, len(kinds) - extra)
        keys = _key_positions(root, width)
        fetch = root_rows(tracer.types, query, keys, width, kinds)
        out = run.fetch(fetch.query)
        table = fetch.own(out)
        n = table.num_rows
        wanted = _rows(rows, n)
        collector = Collector()
        if len(wanted):
            if not catalog.engine.compares_maps:
                for p in keys:
                    if pa.types.is_map(out.schema.field(p).type):
                        raise UnsupportedQuery(f"backward tracing of a query with a MAP column in its output "
                                               f"({out.schema.field(p).name}) is not supported on this engine, which "
                                               f"compares no MAP values (forward lineage, s.run, is)")
            labels = [table.column_names[p] if p < width else f"GROUP BY key {j + 1}" for j, p in enumerate(keys)]
            targets = fetch.targets(run, out, pa.array(wanted, type=pa.int64()), labels)
            tracer.trace(root, targets, collector)
        columns = collector.columns(n, None if rows is None else wanted, tables)
    finally:
        run.cleanup()
    on_values = None
    if on is not None:
        columns = {t: c for t, c in columns.items() if not on.off and t in on.tables}
        if on.table:
            columns[on.table], on_values = project_onto(catalog, on, columns[on.table])
    traced = None if rows is None else tuple(int(i) for i in wanted)
    # LINEAGE ON () gives no lineage, as run's does ({} read as a query reading no table: a review's)
    return BackwardTrace(table, None if on is not None and on.off else columns, traced, run.log, on_values)


def _tracing_context(catalog: Catalog, tree: exp.Expression, semantics: str,
                     pinned_lookups: bool = False) -> PassContext:
    """The context the passes read ``tree`` in for backward tracing."""
    schema = {t.lower(): c for t, c in catalog.schema(tree).items()}
    return PassContext(catalog.dialect, lineage_functions(catalog.dialect, "set"), schema, semantics,
                       rows_relations=catalog.rows_relations(), collations=catalog.collations(schema),
                       pinned_lookups=pinned_lookups)


def _check_unread_lookups(catalog: Catalog, tree: exp.Expression, normal: exp.Expression,
                          context: PassContext) -> None:
    """Raise the engine's error where the query as written raises it for a lookup no enclosing query reads.

    The engine (``LineageFunctions.checks_unread_lookups``: DuckDB) raises "more than one row" for a lookup in
    a SELECT item that no enclosing query reads, whose guard (:mod:`~dltrace.rewriter.passes.scalar_lookups`)
    its optimizer prunes from the queries tracing runs, which read no lineage column to keep it
    (:func:`~dltrace.rewriter.passes.scalar_lookups.guard_lineage` is forward lineage's way). So where a guard
    sits below the outermost SELECT, the query as written is run once, counted, for the engine to raise or not; so
    too where a lookup over no table stands in place with no guard (``scalar_lookups.unguarded_lookup``), and where
    a lookup finds several rows for some key (``scalar_lookups.lookup_probes``: the engine raises for the rows its
    plan evaluates it for, which may be more than the reverse queries' plans do). Not in a pinned trace, which
    :func:`trace` runs just after it ran the query as written."""
    if context.pinned_lookups:
        return
    if unguarded_lookup(tree, context) is None and not _guards_below_the_top(normal, context) and not any(
            catalog.engine.sql(generate(p, catalog.dialect)).num_rows for p in lookup_probes(normal)):
        return
    catalog.engine.sql(generate(counted_query(tree, context), catalog.dialect))


def _guards_below_the_top(normal: exp.Expression, context: PassContext) -> bool:
    """Is a lookup's guard below the outermost SELECT, on an engine that raises for one no query reads? (And a
    guard of a WHERE / HAVING lookup below it: the plan that finds the output rows may not evaluate that clause for
    the rows the query's own plan does -- an EXCEPT's right side, found by the long generator profile.)"""
    if not context.fns.checks_unread_lookups:
        return False
    return any((c.meta.get(ITEM_GUARD) or c.meta.get(GUARD)) and c.find_ancestor(exp.Select) is not normal
               for c in normal.find_all(exp.Case)) \
        or any(s.meta.get(CHECKED) and s is not normal for s in normal.find_all(exp.Select))


def _key_positions(root, width: int) -> list[int]:
    """Where each key of the root is in its output: a column, or an extra ``_dl_g`` column after them."""
    if root.mode != "groups":
        return list(range(width))
    out, extra = [], width
    for p in root.key_pos:
        if p is None:
            out.append(extra)
            extra += 1
        else:
            out.append(p)
    return out


def _rows(rows: list[int] | None, n: int) -> np.ndarray:
    wanted = row_indexes(rows, n)
    return np.arange(n, dtype=np.int64) if wanted is None else np.asarray(wanted, dtype=np.int64)


__all__ = ["trace", "BackwardTrace", "RowOutOfRange", "SEMANTICS"]
