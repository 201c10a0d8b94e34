"""Fetching base tuples by rid (:func:`fetch`).

Parquet sources read in place are read from their row store (:mod:`dltrace.rowstore`) when they have one,
otherwise with a private DuckDB connection: ``read_parquet(file, file_row_number=true)`` with one ``BETWEEN`` per
cluster of nearby rids, which DuckDB pushes into the reader (row groups and vectors outside the ranges are
skipped); the exact rows are then picked in Arrow. In-memory (Arrow/CSV) sources are a ``take``; anything else (a
parquet table copied into the engine's memory, whose ids name the copy's rows however its files change since; an
adopted relation; a Spark DataFrame) is a query of the table's rows relation on the session's engine.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from dltrace.catalog import Catalog
from dltrace.engines.sources import RID, ArrowSource, ParquetSource, duckdb_path
from dltrace.errors import ArgumentError, RowOutOfRange, UnknownColumn, UnknownTable, got
from dltrace.names import unknown_table
from dltrace.rowstore import RowStore, rowstore, thread_duckdb

#: Rids closer than this (in rows) are fetched with one range: reading a few unwanted rows of the same
#: vectors is cheaper than another range predicate.
CLUSTER_GAP = 2048
#: Above this many clusters per file, one scan bounded by [min, max] with a semi-join replaces the ranges.
MAX_CLUSTERS = 256
#: Row stores (see :func:`rowstore`): "auto" builds one for a parquet table on its first scattered lookup (or
#: at once for a small table); "off" never builds one (existing ones are still used).
ROWSTORE = os.environ.get("DLTRACE_ROWSTORE", "auto")
#: A lookup is "scattered" (pruned parquet reads decode most of the table) above this many rid clusters.
SCATTERED_CLUSTERS = 8
#: ... or when its ranges cover more than this many rows (a pruned read decodes them all).
SCATTERED_SPAN = 250_000
#: Tables up to this many rows get a row store on their first lookup (building it takes well under a second).
SMALL_TABLE_ROWS = 250_000
#: An engine lookup of more rid ranges than this joins the rids as a relation: DuckDB evaluates every ``OR``-ed
#: ``BETWEEN`` on every row (SF 1 lineitem in memory, one thread: 128 ranges 0.53 s, the join 0.035 s; 8 ranges
#: 0.006 s, the join 0.010 s).
ENGINE_RANGES = 16


def as_rids(rids: int | Iterable[int] | np.ndarray) -> np.ndarray:
    """Sorted distinct int64 rids from an int, an iterable (a range without a Python list) or an array."""
    try:
        if isinstance(rids, (int, np.integer)) and not isinstance(rids, bool):
            return np.array([int(rids)], dtype=np.int64)
        if isinstance(rids, range):
            return as_sorted(np.arange(rids.start, rids.stop, rids.step, dtype=np.int64))
    except OverflowError:
        raise RowOutOfRange(f"rids must be 64-bit integers, got {rids!r:.60}") from None
    if isinstance(rids, (pa.Array, pa.ChunkedArray)):
        rids = rids.to_numpy(zero_copy_only=False)
    if isinstance(rids, (str, bytes, float, bool)) or (
            isinstance(rids, np.ndarray) and rids.size and rids.dtype.kind not in "iu"):
        raise ArgumentError(f"rids must be integers, got {got(rids)}")
    try:
        if isinstance(rids, np.ndarray):
            return as_sorted(rids.astype(np.int64, copy=False))
        values = list(rids)
        if any(isinstance(v, (bool, str, bytes, float)) for v in values):
            raise TypeError
        arr = np.asarray(values, dtype=np.int64)
    except OverflowError:  # beyond int64: no table has such a row
        raise RowOutOfRange(f"rids must be 64-bit integers, got {rids!r:.60}") from None
    except (TypeError, ValueError):
        raise ArgumentError(f"rids must be integers, got {got(rids)}") from None
    return as_sorted(arr)


def table_rids(rids: int | Iterable[int] | np.ndarray, table: str, n: int | None) -> np.ndarray:
    """``rids`` (see :func:`as_rids`) as rows of ``table``, which has ``n`` rows (None: not known here), or the
    error naming the first one outside it. A range is checked by its ends before it is expanded: ``range(10**9)``
    over a small table took gigabytes before it was refused, or failed with a MemoryError."""
    if isinstance(rids, range) and len(rids) and n is not None:
        _check_inside(min(rids[0], rids[-1]), max(rids[0], rids[-1]), table, n)
    q = as_rids(rids)
    if q.size and n is not None:
        _check_inside(int(q[0]), int(q[-1]), table, n)
    return q


def _check_inside(lo: int, hi: int, table: str, n: int) -> None:
    if lo < 0 or hi >= n:
        raise RowOutOfRange(f"rid {lo if lo < 0 else hi} is outside table {table!r} (it has {n} rows)")


def as_sorted(arr: np.ndarray) -> np.ndarray:
    """``arr`` as sorted distinct rids (returned as is when it already is)."""
    if arr.ndim == 1 and (arr.size < 2 or bool(np.all(arr[1:] > arr[:-1]))):
        return arr  # already sorted and distinct (lineage values are)
    return np.unique(arr)


def _quote(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql("duckdb")


def clusters(rids: np.ndarray, gap: int = CLUSTER_GAP) -> list[tuple[int, int]]:
    """Sorted ``rids`` as [lo, hi] ranges; rids at most ``gap`` apart share a range."""
    if rids.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(rids) > gap)
    lo = np.concatenate(([rids[0]], rids[breaks + 1]))
    hi = np.concatenate((rids[breaks], [rids[-1]]))
    return list(zip(lo.tolist(), hi.tolist()))


def _fetch_parquet_file(path: str, local: np.ndarray, columns: list[str] | None) -> pa.Table:
    """Rows at positions ``local`` (sorted, distinct) of one parquet file, plus their positions as ``_pos``."""
    con = thread_duckdb()
    cols = "* EXCLUDE (file_row_number)" if columns is None else ", ".join(_quote(c) for c in columns)
    scan = f"read_parquet({exp.Literal.string(duckdb_path(path)).sql('duckdb')}, file_row_number = true)"
    ranges = clusters(local)
    if len(ranges) <= MAX_CLUSTERS:
        pred = " OR ".join(
            f"file_row_number = {a}" if a == b else f"file_row_number BETWEEN {a} AND {b}" for a, b in ranges
        )
        sql = f"SELECT {cols}, file_row_number AS _pos FROM {scan} WHERE {pred}"
        got = con.sql(sql).to_arrow_table()
        pos = got.column("_pos").to_numpy()
        order = None
        if pos.size > 1 and np.any(np.diff(pos) < 0):  # rid order, whatever order the scan produced
            order = np.argsort(pos, kind="stable")
            pos = pos[order]
        if got.num_rows != local.size:  # the ranges read some neighbours too: pick the exact rows
            at = np.minimum(np.searchsorted(pos, local), max(pos.size - 1, 0))
            at = at[pos[at] == local] if pos.size else at[:0]
            idx = order[at] if order is not None else at
            got = got.take(pa.array(idx, type=pa.int64()))
        elif order is not None:
            got = got.take(pa.array(order, type=pa.int64()))
        return got
    con.register("_dl_fetch_rids", pa.table({"r": pa.array(local, type=pa.int64())}))
    try:
        sql = (
            f"SELECT {cols}, file_row_number AS _pos FROM {scan} "
            f"WHERE file_row_number BETWEEN {int(local[0])} AND {int(local[-1])} "
            f"AND file_row_number IN (SELECT r FROM _dl_fetch_rids) ORDER BY file_row_number"
        )
        return con.sql(sql).to_arrow_table()
    finally:
        con.unregister("_dl_fetch_rids")


def fetch_parquet(source: ParquetSource, rids: np.ndarray, columns: list[str] | None = None) -> pa.Table:
    """Base tuples with the given (sorted, distinct) rids of a parquet source, ``dl_rid`` last, in rid order.

    From the table's row store when it has one (or gets one: ``ROWSTORE == "auto"`` builds it for a small
    table, or on a scattered lookup); otherwise pruned parquet reads.
    """
    store = rowstore(source)
    if store is None and ROWSTORE == "auto" and rids.size:
        ranges = clusters(rids)
        span = sum(b - a + 1 for a, b in ranges)
        if source.num_rows <= SMALL_TABLE_ROWS or len(ranges) > SCATTERED_CLUSTERS or span > SCATTERED_SPAN:
            store = rowstore(source, build=True)
    if store is not None:
        return store.take(rids, columns)
    return fetch_parquet_files(source, rids, columns)


def fetch_parquet_files(source: ParquetSource, rids: np.ndarray, columns: list[str] | None = None) -> pa.Table:
    """:func:`fetch_parquet` by pruned reads of the parquet files themselves."""
    offsets = np.asarray(source.offsets, dtype=np.int64)
    which = np.searchsorted(offsets, rids, side="right") - 1
    parts = []
    for f in np.unique(which).tolist():
        local = rids[which == f] - offsets[f]
        got = _fetch_parquet_file(source.files[f], local, columns)
        pos = got.column("_pos")
        rid = pc.add(pos.cast(pa.int64()), pa.scalar(int(offsets[f]), pa.int64()))
        got = got.drop_columns(["_pos"]).append_column(RID, rid)
        parts.append(got)
    if not parts:
        return _empty_parquet(source, columns)
    out = pa.concat_tables(parts, promote_options="permissive") if len(parts) > 1 else parts[0]
    return out.combine_chunks()


def _empty_parquet(source: ParquetSource, columns: list[str] | None) -> pa.Table:
    con = thread_duckdb()
    cols = "* EXCLUDE (file_row_number)" if columns is None else ", ".join(_quote(c) for c in columns)
    path = exp.Literal.string(duckdb_path(source.files[0])).sql("duckdb") if source.files else None
    if path is None:
        return pa.table({RID: pa.array([], pa.int64())})
    got = con.sql(f"SELECT {cols}, file_row_number AS {RID} FROM read_parquet({path}, file_row_number = true) LIMIT 0")
    t = got.to_arrow_table()
    return t.set_column(t.num_columns - 1, RID, t.column(RID).cast(pa.int64()))


def fetch(catalog: Catalog, table: str, rids: Iterable[int] | np.ndarray, columns: list[str] | None = None) -> pa.Table:
    """The base tuples of registered ``table`` with these rids (all columns, or ``columns``, plus ``dl_rid``),
    in rid order. Rids outside the table are an error."""
    name = table.lower()
    if name not in catalog.tables:
        raise UnknownTable(unknown_table(table, catalog.tables))
    ids = table_rids(rids, name, catalog.num_rows(name))
    if columns is not None:
        known = catalog.table_columns(name)
        lower = {c.lower(): c for c in known}
        missing = [c for c in columns if c.lower() not in lower]
        if missing:
            raise UnknownColumn(f"table {name!r} has no column {missing[0]!r}")
        columns = [lower[c.lower()] for c in columns if c.lower() != RID]
    src = catalog.tables[name]
    if isinstance(src, ParquetSource) and (catalog.storage.get(name) == "source" or catalog.copy_changed(name) is None):
        # read in place, or copied from files still as they were copied (the same rows, numbered alike): pruned
        # reads of the files, where a lookup in the engine's copy costs a Spark job (1-5 s each on local[1])
        return fetch_parquet(src, ids, columns)
    if isinstance(src, ArrowSource):
        # rids are row positions of the Arrow table (dl_rid = position): a take per batch.
        return catalog.derived(name, "row store", _arrow_rowstore).take(ids, columns)
    return _fetch_engine(catalog, name, ids, columns)


def _arrow_rowstore(source: ArrowSource) -> RowStore:
    # the user's columns only: not dl_rid (appended by the store), nor a step's private lineage columns
    hidden = [c for c in (RID, *source.private) if c in source.table.column_names]
    return RowStore(table=source.table.drop_columns(hidden))


def _fetch_engine(catalog: Catalog, name: str, ids: np.ndarray, columns: list[str] | None) -> pa.Table:
    """Any other source (a memory copy, an adopted relation, a Spark DataFrame): a query of its rows relation on
    the catalog's engine, by rid ranges, or joined to the rids as a relation when they make many ranges."""
    q = lambda s: exp.to_identifier(s, quoted=True).sql(catalog.dialect)  # noqa: E731
    cols = "*" if columns is None else ", ".join(q(c) for c in [*columns, RID])
    rows = q(catalog.engine.rows_name(name))
    ranges = clusters(ids, gap=0)
    if len(ranges) > ENGINE_RANGES:
        with _rids_relation(catalog, name, ids) as keep:
            out = catalog.engine.sql(f"SELECT {cols} FROM {rows} WHERE {q(RID)} IN (SELECT rid FROM {q(keep)})")
    else:
        where = " OR ".join(f"{q(RID)} BETWEEN {a} AND {b}" for a, b in ranges) or "FALSE"
        out = catalog.engine.sql(f"SELECT {cols} FROM {rows} WHERE {where}")
    # last, and 64-bit as every lookup gives it (a DuckDB memory copy stores it in 4 bytes)
    rid = out.column(RID).cast(pa.int64())
    out = out.drop_columns([RID]).append_column(RID, rid)
    return out.sort_by(RID) if out.num_rows > 1 else out


@contextmanager
def _rids_relation(catalog: Catalog, name: str, ids: np.ndarray) -> Iterator[str]:
    """A relation of ``ids`` (column ``rid``) on the catalog's engine while the block runs, dropped after."""
    keep = catalog.engine.fresh_name(f"_dl_fetch_{name}")
    catalog.engine.register(keep, ArrowSource(pa.table({"rid": pa.array(ids, type=pa.int64())})))
    try:
        yield keep
    finally:
        catalog.engine.drop(keep)
