"""Composition: a step's result registered as a source of the next step, so lineage spans a whole pipeline.

A result that carries lineage becomes a :class:`~dltrace.engines.sources.LineageSource`: its rows, their own
``dl_rid`` (positions, for one-step lineage) and one lineage column per base table they came from, all in the
source's private rows relation; the user's relation shows only the result's columns. A forward query reading
it (end to end) takes those columns as its rows' lineage (:mod:`dltrace.rewriter.rules.sources`), so its
lineage is in the original tables' row ids. A backward trace reads it as a base table and then maps each of
its rids to the stored lineage of that row (:func:`compose_traced`).

Also here: :func:`definition`, which reads ``CREATE [TEMPORARY|MATERIALIZED] TABLE|VIEW name AS query``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from dltrace.catalog import Catalog, TableState, written_at
from dltrace.engines import BITS64
from dltrace.engines.sources import LineageSource
from dltrace.errors import DltraceError, ParseError, ReservedName, StaleLineage, UnsupportedQuery
from dltrace.lineage_data import LineageData, is_bitmap_type
from dltrace.names import RID, reserved_prefix
from dltrace.rewriter.grammar import parse, parse_plain
from dltrace.rewriter.parse import create_as_body, parse_error_text
from dltrace.rewriter.shape import is_pivot_statement, is_unpivot_statement
from dltrace.udafs import encode_bitmaps
from dltrace.udafs.bitmap_arrow import to_list_arrow

SET_TYPE = pa.list_(pa.int64())


def lineage_source(result: LineageData, catalog: Catalog) -> LineageSource:
    """``result``'s rows with their lineage, as a source ``catalog`` can register (checked first)."""
    if result.strategy is None:
        raise DltraceError("this result has no lineage (run with lineage='set' or 'bitmap'): register its "
                           "rows, r.table, as a plain table instead")
    if result.on_values is not None:
        raise UnsupportedQuery("a result with LINEAGE ON values cannot be a source with lineage: its sets hold "
                               "value ids, not row ids")
    if getattr(result, "traced", None) is not None:  # a backward result of some rows only
        raise DltraceError("only some rows of this backward result were traced: trace every row (rows=None) "
                           "to register it as a source with lineage")
    names = list(result.table.column_names)
    for n in names:
        if reserved_prefix(n):
            raise ReservedName(f"result column {n!r} uses a reserved prefix: alias it in the query")
    dupes = sorted({n for n in names if [m.lower() for m in names].count(n.lower()) > 1})
    if dupes:
        raise DltraceError(f"the result has two columns named {dupes[0]!r}: alias them in the query")
    missing = sorted(t for t in result.lineage_columns if t not in catalog.tables)
    if missing:
        raise DltraceError(f"the result's lineage is in table {missing[0]!r}, which is not registered here")
    strategy = "bitmap" if result.strategy == "bitmap" else "set"
    table = result.table.append_column(RID, pa.array(np.arange(result.num_rows), type=pa.int64()))
    # each row's whole lineage (the part every row shares included); a result in an earlier step's own ids (run
    # with end_to_end=False over it) in that step's base tables' ids, so that its rows always carry the original
    # tables' ids (read end to end, they were the step's ids, named as if they were a base table's)
    lineage = {base: result.sets(base) for base in result.lineage_columns}
    through = {t: src for t, src in composed_sources(catalog).items() if t in lineage}
    if through:
        check_semantics(through, result.semantics, registering=True)
        lineage = compose_traced(catalog, {t: _as_sets(c, is_bitmap_type(c.type)) for t, c in lineage.items()})
    pairs = []
    for base, col in lineage.items():
        column = f"dl_{base}"
        table = table.append_column(column, _as_strategy(col, strategy, _wide(catalog, base)))
        pairs.append((base, column))
    bases = {base for base, _ in pairs}
    based_on = tuple((t, v) for t, v in (result.base_snapshot or {}).items() if t in bases)
    return LineageSource(table, lineage=tuple(pairs), strategy=strategy, based_on=based_on,
                         semantics=result.semantics)


def converted(source: LineageSource, strategy: str, catalog: Catalog) -> LineageSource:
    """``source`` with its lineage columns in ``strategy``'s form (exact: the same ids)."""
    if source.strategy == strategy:
        return source
    table = source.table
    for base, column in source.lineage:
        i = table.column_names.index(column)
        table = table.set_column(i, column, _as_strategy(table.column(column), strategy, _wide(catalog, base)))
    return replace(source, table=table, strategy=strategy)  # (its rows' types too: ``typed_by``)


def _wide(catalog: Catalog, table: str) -> bool:
    return catalog.num_rows(table) >= BITS64


def _as_strategy(col: pa.ChunkedArray | pa.Array, strategy: str, wide: bool) -> pa.ChunkedArray:
    """A lineage column as sorted distinct list<int64> sets (NULL: empty) or as portable roaring bitmaps."""
    col = col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col])
    is_bitmap = is_bitmap_type(col.type)
    if strategy == "bitmap":
        return col.cast(pa.binary()) if is_bitmap else encode_bitmaps(_as_sets(col, False), wide=wide)
    return _as_sets(col, is_bitmap)


def _as_sets(col: pa.ChunkedArray, is_bitmap: bool) -> pa.ChunkedArray:
    if is_bitmap:  # decoded vectorised, NULL -> [] (dl_to_list's kernel)
        return pa.chunked_array([to_list_arrow(col)], type=SET_TYPE)
    col = col.cast(SET_TYPE)
    if col.null_count:
        col = pa.chunked_array([pa.array([v or [] for v in col.to_pylist()], type=SET_TYPE)], type=SET_TYPE)
    return col


def composed_sources(catalog: Catalog) -> dict[str, LineageSource]:
    """The registered sources whose rows carry lineage, by name."""
    return {name: src for name, src in catalog.tables.items() if isinstance(src, LineageSource)}


def check_semantics(sources: dict[str, LineageSource], semantics: str, registering: bool = False) -> None:
    """Refuse to read the stored lineage of ``sources`` (composed sources, by name) into lineage of ``semantics``
    when one was computed with the other semantics: the result would hold witness lineage through that step and
    control lineage in its own subqueries (or the reverse), labelled as one of them. ``registering``: a one-step
    result (in the sources' own ids) is being registered, composed through them."""
    for name, src in sources.items():
        if not src.lineage or src.semantics is None or src.semantics == semantics:
            continue
        if registering:
            raise UnsupportedQuery(
                f"{name!r} holds {src.semantics} lineage, and this result over it has {semantics} semantics: "
                f"registered, its lineage would be composed through {name!r}'s and mix the two; run the query with "
                f"semantics={src.semantics!r} to register it")
        raise UnsupportedQuery(
            f"{name!r} holds {src.semantics} lineage, and this query asks for {semantics} semantics: end to end its "
            f"lineage would mix the two; run {name!r} with semantics={semantics!r}, or ask for one-step lineage "
            "(end_to_end=False)")


def compose_traced(catalog: Catalog, lineage: dict[str, pa.ChunkedArray]) -> dict[str, pa.ChunkedArray]:
    """Backward lineage that names composed sources, re-expressed in their base tables' row ids: a composed row
    reached by an output row contributes its stored lineage (``None`` rows, not traced, stay ``None``)."""
    composed = composed_sources(catalog)
    through = [t for t in lineage if t in composed]
    if not through:
        return lineage
    n = len(next(iter(lineage.values())))
    known = {t: lineage[t].to_pylist() for t in lineage}
    out: dict[str, list] = {t: v for t, v in known.items() if t not in composed}
    for t in through:
        src = composed[t]
        stored = {base: _as_sets(src.table.column(col), src.strategy == "bitmap").combine_chunks()
                  for base, col in src.lineage}
        for base, sets in stored.items():
            mine = out.setdefault(base, [[] if known[t][i] is not None else None for i in range(n)])
            for i, rids in enumerate(known[t]):
                if rids is None:
                    continue
                reached = pc.list_flatten(sets.take(pa.array(rids, type=pa.int64()))).to_numpy()
                mine[i] = sorted(set(mine[i] or ()) | set(reached.tolist()))
    return {t: pa.chunked_array([pa.array([None if v is None else sorted(set(v)) for v in vals], type=SET_TYPE)])
            for t, vals in out.items()}


def snapshot_read(catalog: Catalog, reads: Iterable[str], lineage: Iterable[str],
                   end_to_end: bool) -> dict[str, TableState]:
    """The snapshot (:meth:`Catalog.snapshot`) of the tables a query reads and of its ``lineage`` tables, taken
    before it runs, once the tables it reads are known to number their rows as registered
    (:meth:`Catalog.check_numbering`: else it would make wrong ids). A composed source read end to end stands for
    its base tables as they were when its lineage was computed (``based_on``: its rows carry those ids, so a base
    table's files rewritten since make this result stale too; the step itself replaced later leaves this lineage
    as it is)."""
    reads = list(reads)
    catalog.check_numbering(reads)
    steps = composed_sources(catalog)
    names, inherited, direct = [], {}, []
    for t in reads:
        if t in steps and end_to_end:
            names.extend(base for base, _ in steps[t].lineage)
            inherited.update(steps[t].based_on)
        else:
            names.append(t)
            direct.append(t)
    now = catalog.snapshot(dict.fromkeys([*names, *lineage]))
    _check_one_version(steps if end_to_end else {}, reads, now, direct)
    return {**now, **inherited}


def _check_one_version(steps: dict, reads: list[str], now: dict[str, TableState], direct: list[str]) -> None:
    """Raise :class:`StaleLineage` where one query would give ids of two versions of a base table: a step's
    lineage names its rows as they were when the step ran, and the query reads the table itself as it is now (or
    another step read another version). A new user: a step over a parquet file rewritten since, joined to that
    file's table, gave a row ids of both versions, and forward tracing answered with the wrong rows."""
    seen = {t: ("the query itself reads it as it is now", now[t]) for t in direct if t in now}
    for step in reads:
        if step not in steps:
            continue
        for base, state in steps[step].based_on:
            other = seen.setdefault(base, (f"step {step!r}'s names them as they were when that step ran", state))
            if other[1] != state:
                raise StaleLineage(f"step {step!r}'s lineage names the rows of table {base!r} as they were when the "
                                   f"step ran, and {other[0]} (its rows changed between: registered again, or its "
                                   f"files rewritten): the query's ids would name rows of two versions of "
                                   f"{base!r}; run the step again, or ask for one-step lineage (end_to_end=False)")


# -- CREATE ... AS -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Definition:
    """``CREATE <kind> name AS query``: kind "table", "view", "materialized view", "temporary view" or
    "streaming table"; ``query`` is the query's SQL in ``dialect``; ``if_not_exists``: written ``IF NOT EXISTS``
    (nothing to do when ``name`` exists)."""

    name: str
    kind: str
    query: str
    dialect: str
    replace: bool = False
    if_not_exists: bool = False


def definition(statement: exp.Expression | str, dialect: str) -> Definition | None:
    """The ``CREATE ... AS query`` in ``statement``, or None when it is another kind of statement."""
    if isinstance(statement, str):
        text = statement
        try:
            trees = [t for t in parse_plain(statement, dialect) if t is not None]
        except sqlglot.errors.ParseError as e:
            raise ParseError(f"SQL does not parse: {parse_error_text(e)}") from None
        if len(trees) != 1:
            return None
        statement = trees[0]
        if isinstance(statement, exp.Command) and statement.name.upper() == "CREATE":
            return _pivot_definition(text, dialect)
    if not isinstance(statement, exp.Create) or statement.kind not in ("TABLE", "VIEW"):
        return None
    query = statement.expression
    if isinstance(query, exp.Subquery):
        query = query.this
    if isinstance(query, (exp.Table, exp.Column)) and not any(query.args.get(k) for k in ("db", "catalog", "table")):
        # (sqlglot reads `AS SELEC`, a misspelt SELECT, as a table name: no engine takes a name there)
        raise ParseError(f"SQL does not parse: CREATE {statement.kind} {statement.this.sql(dialect)} AS "
                         f"{query.sql(dialect)}: {query.name!r} after AS is not a query (SELECT ...)"
                         f"{written_at(query)}")
    if not isinstance(query, exp.Query):
        return None
    target = statement.this
    if isinstance(target, exp.Schema):
        raise UnsupportedQuery(f"CREATE {statement.kind} {target.this.name} (columns) AS ...: a column list is not "
                               "supported; name the columns in the query")
    if isinstance(target, exp.Table) and (target.args.get("db") or target.args.get("catalog")):
        # (CREATE TABLE s2.y AS ... made main.y: the step is registered by its plain name, as tables are read)
        raise UnsupportedQuery(f"CREATE {statement.kind} {target.sql(dialect)} AS ...: a schema-qualified name is not "
                               "supported; lineage is traced through relations made under a plain name")
    props = {type(p).__name__ for p in (statement.args.get("properties") or exp.Properties()).expressions}
    kind = statement.kind.lower()
    if "StreamingTableProperty" in props:
        kind = "streaming table"
    elif "MaterializedProperty" in props:
        kind = "materialized view"
    elif "TemporaryProperty" in props:
        kind = "temporary " + kind
    return Definition(target.name, kind, query.sql(dialect), dialect, bool(statement.args.get("replace")),
                      bool(statement.args.get("exists")))


def _pivot_definition(text: str, dialect: str) -> Definition | None:
    """``CREATE ... AS PIVOT ...`` (DuckDB's PIVOT / UNPIVOT statement), which sqlglot keeps as a bare command: its
    head read over a stand-in query, the statement as the query (``passes/pivots.py`` reads it); None for another
    command (which does not parse: the caller says where)."""
    split = create_as_body(text, dialect)
    if split is None:
        return None
    head, body = split
    try:
        trees = [t for t in parse(body, dialect) if t is not None]
        stand_in = definition(f"{head} SELECT 1", dialect)
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ParseError):
        return None
    if len(trees) != 1 or stand_in is None or not (is_pivot_statement(trees[0]) or is_unpivot_statement(trees[0])):
        return None
    return replace(stand_in, query=body.strip())
