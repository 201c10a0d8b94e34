"""Questions asked of captured lineage, at interactive speed.

* :func:`backward` -- the actual base tuples behind one output row, fetched by rid. Parquet sources are read
  with a private DuckDB connection: ``read_parquet(file, file_row_number=true)`` with one ``BETWEEN`` per
  cluster of nearby rids, which DuckDB pushes into the reader (row groups and vectors outside the ranges are
  skipped); the exact rows are then picked in Arrow. In-memory (Arrow/CSV) sources are a ``take``; anything
  else (a Spark DataFrame) is a filtered query on the session's engine.
* :func:`forward` -- the output rows whose lineage contains any of some rids, answered on the lineage values
  themselves: roaring bitmaps are deserialised once per result and table (cached) and probed with
  ``rid in bm`` / ``isdisjoint``; set columns are probed by binary search in their sorted lists. Both skip
  rows whose [min, max] rid range cannot hold a probe.
* :func:`explain` -- a readable summary of one row's lineage.
* :func:`impact` -- the paper's revision use case: which output rows depend on some (faulty) input rows,
  from saved lineage or by a run in which only those rows carry a lineage id.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from dltrace.dialects.base import RID, ArrowSource, ParquetSource
from dltrace.errors import DltraceError, UnknownTable, UnsupportedQuery

if TYPE_CHECKING:
    from dltrace.result import LineageResult
    from dltrace.session import Session

#: Rids closer than this (in rows) are fetched with one range: reading a few unwanted rows of the same
#: vectors is cheaper than another range predicate.
CLUSTER_GAP = 2048
#: Above this many clusters per file, one scan bounded by [min, max] with a semi-join replaces the ranges.
MAX_CLUSTERS = 256
#: forward on a set column: up to this many candidate rows are probed one by one (binary search in each
#: sorted list); beyond, one vectorised pass over all the column's values.
LOOP_ROWS = 4096
#: Row stores (see :func:`rowstore`): "auto" builds one for a parquet table on its first scattered lookup (or
#: at once for a small table); "off" never builds one (existing ones are still used).
ROWSTORE = os.environ.get("DLTRACE_ROWSTORE", "auto")
#: A lookup is "scattered" (pruned parquet reads decode most of the table) above this many rid clusters.
SCATTERED_CLUSTERS = 8
#: ... or when its ranges cover more than this many rows (a pruned read decodes them all).
SCATTERED_SPAN = 250_000
#: Tables up to this many rows get a row store on their first lookup (building it takes well under a second).
SMALL_TABLE_ROWS = 250_000
#: Row stores are evicted, least recently used first, beyond this many bytes (``$DLTRACE_ROWSTORE_MAX_GB``).
ROWSTORE_MAX_BYTES = int(float(os.environ.get("DLTRACE_ROWSTORE_MAX_GB", "20")) * 2**30)
ROWSTORE_BATCH = 1 << 16


# ---------------------------------------------------------------------------------------------------------------
# lineage values -> numpy
# ---------------------------------------------------------------------------------------------------------------


def _as_rids(rids: int | Iterable[int] | np.ndarray) -> np.ndarray:
    """Sorted distinct int64 rids from an int, an iterable or an array."""
    if isinstance(rids, (int, np.integer)):
        return np.array([int(rids)], dtype=np.int64)
    if isinstance(rids, (pa.Array, pa.ChunkedArray)):
        rids = rids.to_numpy(zero_copy_only=False)
    arr = np.asarray(rids if isinstance(rids, np.ndarray) else list(rids), dtype=np.int64)
    if arr.ndim == 1 and (arr.size < 2 or bool(np.all(arr[1:] > arr[:-1]))):
        return arr  # already sorted and distinct (lineage values are)
    return np.unique(arr)


def _value_ids(value: Any) -> np.ndarray:
    """One lineage value (a list scalar, a bitmap, Python list/bytes or None) as sorted distinct int64 rids."""
    if isinstance(value, pa.Scalar):
        if not value.is_valid:
            return np.empty(0, np.int64)
        if pa.types.is_binary(value.type) or pa.types.is_large_binary(value.type):
            value = value.as_buffer()
        else:
            vals = value.values
            if vals is None:
                return np.empty(0, np.int64)
            if vals.null_count:
                vals = vals.drop_null()
            return np.unique(vals.to_numpy(zero_copy_only=False).astype(np.int64, copy=False))
    if value is None:
        return np.empty(0, np.int64)
    if isinstance(value, (bytes, bytearray, memoryview, pa.Buffer)):
        from dltrace.udafs.bitmap import load

        bm = load(memoryview(value))
        return np.asarray(bm.to_array(), dtype=np.int64) if len(bm) else np.empty(0, np.int64)
    return _as_rids([v for v in value if v is not None])


def _is_bitmap_type(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or getattr(pa.types, "is_binary_view", lambda _: False)(t)


def row_rids(result: "LineageResult", table: str, i: int) -> np.ndarray:
    """Row ``i``'s lineage in ``table`` as a sorted int64 numpy array."""
    col = result.lineage_columns[table]
    return _value_ids(col[i])


def _check_row(result: "LineageResult", i: int) -> int:
    n = result.num_rows
    if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
        raise DltraceError(f"row index must be an int, got {type(i).__name__}")
    if i < 0:
        i += n
    if not 0 <= i < n:
        raise IndexError(f"row {i} out of range: the result has {n} rows")
    is_traced = getattr(result, "is_traced", None)  # backward tracing of some rows only: the others are unknown
    if is_traced is not None and not is_traced(int(i)):
        raise DltraceError(f"row {i} was not traced; trace it with rows=[{i}] or rows=None")
    return int(i)


def _check_rids_lineage(result: "LineageResult", what: str) -> None:
    if not result.lineage_columns:
        raise DltraceError(f"{what}: this result has no lineage (run it with lineage='set' or 'bitmap')")
    if result.on_values is not None:
        raise DltraceError(
            f"{what}: this result's lineage is LINEAGE ON value tuples, not row ids; use r.lineage(i) for them"
        )


def _table_key(result: "LineageResult", table: str) -> str:
    key = table.lower()
    if key not in result.lineage_columns:
        have = ", ".join(result.lineage_columns) or "none"
        raise UnknownTable(f"the result has no lineage for table {table!r}; it has: {have}")
    return key


# ---------------------------------------------------------------------------------------------------------------
# fetching base tuples by rid
# ---------------------------------------------------------------------------------------------------------------

_local = threading.local()


def _duck():
    """A private DuckDB cursor per thread (never the session's connection: no temp objects leak into it)."""
    con = getattr(_local, "con", None)
    if con is None:
        import duckdb

        con = duckdb.connect(":memory:")
        con.execute("SET parquet_metadata_cache = true")
        _local.con = con
    return con


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


def _unview(table: pa.Table) -> pa.Table:
    """View types (string_view, binary_view) as their plain types: ``take`` has no kernel for them."""
    fields, changed = [], False
    for f in table.schema:
        t = f.type
        if t == pa.string_view():
            t, changed = pa.large_string(), True
        elif t == pa.binary_view():
            t, changed = pa.large_binary(), True
        fields.append(f.with_type(t))
    return table.cast(pa.schema(fields, metadata=table.schema.metadata)) if changed else table


def _fetch_parquet_file(path: str, local: np.ndarray, columns: list[str] | None) -> pa.Table:
    """Rows at positions ``local`` (sorted, distinct) of one parquet file, plus their positions as ``_pos``."""
    con = _duck()
    cols = "* EXCLUDE (file_row_number)" if columns is None else ", ".join(_quote(c) for c in columns)
    scan = f"read_parquet({exp.Literal.string(path).sql('duckdb')}, file_row_number = true)"
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


# -- row stores: a rid-addressable copy of a parquet table ------------------------------------------------------
#
# Parquet is compressed and encoded per page: a rid cannot be read without decoding its page, and scattered
# rids (a customer's orders all over ``lineitem``) touch most pages of a big table -- seconds at SF 1 however
# well the reads are pruned. A row store is the table decoded once into an uncompressed Arrow IPC file (batches
# of 65,536 rows, the types DuckDB reads), memory-mapped: rid r is row r, and a lookup touches only the pages
# holding its rows. It lives in ``<cache>/rowstore/<content hash>.arrow`` (the same content hash as the saved
# lineage's fingerprint, so a changed table gets a new one), shared by every session and every save.


class RowStore:
    """A memory-mapped rid-addressable copy of one table (rid = row position)."""

    def __init__(self, path: str | None = None, table: pa.Table | None = None) -> None:
        self.path = path
        self._batches: dict[int, pa.RecordBatch] = {}
        if table is not None:  # an in-memory table: its own batches (zero-copy), view types made plain once
            table = _unview(table)
            batches = table.to_batches()
            self.reader = None
            self._batches = dict(enumerate(batches))
            sizes = [b.num_rows for b in batches]
            self.schema = table.schema
        else:
            self.reader = pa.ipc.open_file(pa.memory_map(path, "r"))
            sizes = [self.reader.get_batch(i).num_rows for i in range(self.reader.num_record_batches)]
            self.schema = self.reader.schema
        self.starts = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))

    @property
    def num_rows(self) -> int:
        return int(self.starts[-1])

    def _batch(self, b: int) -> pa.RecordBatch:
        got = self._batches.get(b)
        if got is None:
            got = self._batches[b] = self.reader.get_batch(b)  # zero-copy: a view of the mapped file
        return got

    def take(self, rids: np.ndarray, columns: list[str] | None = None) -> pa.Table:
        """Rows ``rids`` (sorted, distinct) with ``columns`` (all by default), plus ``dl_rid``."""
        names = self.schema.names if columns is None else columns
        which = np.searchsorted(self.starts, rids, side="right") - 1
        parts = []
        if rids.size:
            cuts = np.flatnonzero(np.diff(which)) + 1
            for lo, hi in zip(np.concatenate(([0], cuts)).tolist(), np.concatenate((cuts, [rids.size])).tolist()):
                b = int(which[lo])
                batch = self._batch(b).select(names)
                parts.append(batch.take(pa.array(rids[lo:hi] - self.starts[b], type=pa.int64())))
        schema = pa.schema([self.schema.field(n) for n in names])
        table = pa.Table.from_batches(parts, schema=schema) if parts else schema.empty_table()
        return table.append_column(RID, pa.array(rids, type=pa.int64())).combine_chunks()


_stores: dict[tuple, RowStore | None] = {}
_arrow_stores: dict[int, tuple[pa.Table, RowStore]] = {}
_build_lock = threading.Lock()


def _rowstore_root():
    from dltrace.tpch.data import cache_root

    return cache_root() / "rowstore"


def _content_key(source: ParquetSource) -> str:
    import duckdb

    from dltrace.store import file_hash

    h = hashlib.blake2b(digest_size=16)
    h.update(f"rowstore-1;duckdb-{duckdb.__version__};".encode())
    for f, off in zip(source.files, source.offsets):
        # hive-style folders (key=value) become columns when DuckDB reads the file: part of the content
        hive = "/".join(part for part in os.path.dirname(f).split(os.sep) if "=" in part)
        h.update(f"{off}:{file_hash(f)}:{hive};".encode())
    return h.hexdigest()


def _stat_key(source: ParquetSource) -> tuple:
    out = []
    for f in source.files:
        st = os.stat(f)
        out.append((f, st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)


def rowstore(source: ParquetSource, build: bool = False) -> RowStore | None:
    """The row store of a parquet source: the open one, one on disk, or (``build``) a new one."""
    try:
        key = _stat_key(source)
    except OSError:
        return None
    if key in _stores and (_stores[key] is not None or not build):
        return _stores[key]
    path = _rowstore_root() / f"{_content_key(source)}.arrow"
    if not path.is_file():
        if not build:
            _stores[key] = None
            return None
        with _build_lock:
            if not path.is_file():
                _build_rowstore(source, path)
    try:
        os.utime(path)  # recently used: evicted last
        store = RowStore(str(path))
    except (OSError, pa.ArrowInvalid):
        return None
    if store.num_rows != source.num_rows:
        return None
    _stores[key] = store
    return store


def _build_rowstore(source: ParquetSource, path) -> None:
    con = _duck()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    writer = None
    schema = None
    try:
        with pa.OSFile(str(tmp), "wb") as sink:
            for f in source.files:
                lit = exp.Literal.string(f).sql("duckdb")
                # One plain scan per file: DuckDB keeps a scan's row order (preserve_insertion_order),
                # checked below through file_row_number all the same.
                reader = con.sql(f"SELECT * FROM read_parquet({lit}, file_row_number = true)").to_arrow_reader(
                    ROWSTORE_BATCH)
                expect = 0
                for batch in reader:
                    pos = batch.column(batch.num_columns - 1).to_numpy()
                    if pos.size and (pos[0] != expect or np.any(np.diff(pos) != 1)):
                        raise DltraceError(f"row order not preserved reading {f!r}")
                    expect += pos.size
                    batch = batch.drop_columns(["file_row_number"])
                    if writer is None:
                        schema = batch.schema
                        writer = pa.ipc.new_file(sink, schema)
                    elif batch.schema != schema:
                        batch = batch.cast(schema)
                    if batch.num_rows:
                        writer.write_batch(batch)
            if writer is None:
                raise DltraceError("empty source")
            writer.close()
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _evict(keep=path)


def _evict(keep) -> None:
    root = _rowstore_root()
    try:
        files = [(p.stat().st_mtime, p.stat().st_size, p) for p in root.glob("*.arrow")]
    except OSError:
        return
    total = sum(size for _, size, _ in files)
    for _, size, p in sorted(files):
        if total <= ROWSTORE_MAX_BYTES:
            break
        if p == keep:
            continue
        try:
            p.unlink()  # an open memory map stays valid until closed
            total -= size
        except OSError:
            pass


def clear_rowstores() -> None:
    """Delete every row store (they are rebuilt on demand)."""
    _stores.clear()
    root = _rowstore_root()
    for p in root.glob("*.arrow") if root.is_dir() else []:
        try:
            p.unlink()
        except OSError:
            pass


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
    con = _duck()
    cols = "* EXCLUDE (file_row_number)" if columns is None else ", ".join(_quote(c) for c in columns)
    path = exp.Literal.string(source.files[0]).sql("duckdb") if source.files else None
    if path is None:
        return pa.table({RID: pa.array([], pa.int64())})
    got = con.sql(f"SELECT {cols}, file_row_number AS {RID} FROM read_parquet({path}, file_row_number = true) LIMIT 0")
    t = got.to_arrow_table()
    return t.set_column(t.num_columns - 1, RID, t.column(RID).cast(pa.int64()))


def fetch(session: "Session", table: str, rids: Iterable[int] | np.ndarray, columns: list[str] | None = None) -> pa.Table:
    """The base tuples of registered ``table`` with these rids (all columns, or ``columns``, plus ``dl_rid``),
    in rid order. Rids outside the table are an error."""
    name = table.lower()
    if name not in session.tables:
        raise UnknownTable(f"unknown table {table!r}; registered: {', '.join(sorted(session.tables)) or 'none'}")
    ids = _as_rids(rids)
    n = session.num_rows(name)
    if ids.size and (ids[0] < 0 or ids[-1] >= n):
        bad = int(ids[0]) if ids[0] < 0 else int(ids[-1])
        raise DltraceError(f"rid {bad} is outside table {name!r} (it has {n} rows)")
    if columns is not None:
        known = session.engine.columns(name)
        lower = {c.lower(): c for c in known}
        missing = [c for c in columns if c.lower() not in lower]
        if missing:
            from dltrace.errors import UnknownColumn

            raise UnknownColumn(f"table {name!r} has no column {missing[0]!r}")
        columns = [lower[c.lower()] for c in columns if c.lower() != RID]
    src = session.tables[name]
    if isinstance(src, ParquetSource):
        return fetch_parquet(src, ids, columns)
    if isinstance(src, ArrowSource):
        # rids are row positions of the Arrow table (dl_rid = position): a take per batch.
        hit = _arrow_stores.get(id(src.table))
        if hit is None or hit[0] is not src.table:
            own = src.table.drop_columns([RID]) if RID in src.table.column_names else src.table
            hit = _arrow_stores[id(src.table)] = (src.table, RowStore(table=own))
        return hit[1].take(ids, columns)
    return _fetch_engine(session, name, ids, columns)


def _fetch_engine(session: "Session", name: str, ids: np.ndarray, columns: list[str] | None) -> pa.Table:
    """Any other source (a Spark DataFrame): a filtered query on the session's engine."""
    d = session.dialect
    q = lambda s: exp.to_identifier(s, quoted=True).sql(d)  # noqa: E731
    cols = "*" if columns is None else ", ".join(q(c) for c in [*columns, RID])
    if ids.size == 0:
        where = "FALSE"
    else:
        ranges = clusters(ids, gap=0)
        where = " OR ".join(f"{q(RID)} BETWEEN {a} AND {b}" for a, b in ranges[:1000])
        if len(ranges) > 1000:
            where = f"{q(RID)} IN ({', '.join(map(str, ids.tolist()))})"
    out = session.engine.sql(f"SELECT {cols} FROM {q(name)} WHERE {where}")
    if RID in out.column_names and out.column_names[-1] != RID:
        rid = out.column(RID)
        out = out.drop_columns([RID]).append_column(RID, rid)
    return out.sort_by(RID) if out.num_rows > 1 else out


# ---------------------------------------------------------------------------------------------------------------
# backward / forward / explain
# ---------------------------------------------------------------------------------------------------------------


def backward(result: "LineageResult", i: int, tables: Iterable[str] | str | None = None,
             columns: dict[str, list[str]] | None = None, limit: int | None = None) -> dict[str, pa.Table]:
    """``{table: base tuples}`` of output row ``i`` (every column plus ``dl_rid``, in rid order).

    ``tables`` restricts the tables, ``columns`` maps a table to the columns to read, ``limit`` keeps the
    first ``limit`` tuples per table (by rid).
    """
    _check_rids_lineage(result, "backward")
    i = _check_row(result, i)
    if isinstance(tables, str):
        tables = [tables]
    keys = list(result.lineage_columns) if tables is None else [_table_key(result, t) for t in tables]
    out = {}
    for t in keys:
        ids = row_rids(result, t, i)
        if limit is not None:
            ids = ids[: max(0, int(limit))]
        out[t] = fetch(result.session, t, ids, (columns or {}).get(t))
    return out


@dataclass
class _Probe:
    """One table's lineage column prepared for probing (built once per result and table)."""

    kind: str  # "bitmap" | "set"
    lo: np.ndarray  # per row: smallest rid (or MAX when empty)
    hi: np.ndarray  # per row: largest rid (or -1 when empty)
    bitmaps: list | None = None
    values: np.ndarray | None = None  # set: the list values, rows' slices sorted
    offsets: np.ndarray | None = None
    sorted_rows: bool = True


_EMPTY_LO = np.iinfo(np.int64).max


def _probe(result: "LineageResult", table: str) -> _Probe:
    cache = result.__dict__.setdefault("_dl_probes", {})
    col = result.lineage_columns[table]
    hit = cache.get(table)
    if hit is not None and hit[0] is col:
        return hit[1]
    probe = _build_probe(col)
    cache[table] = (col, probe)
    return probe


def _build_probe(col: pa.ChunkedArray | pa.Array) -> _Probe:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    n = len(arr)
    if _is_bitmap_type(arr.type):
        from dltrace.udafs.bitmap import load

        bitmaps, lo, hi = [], np.full(n, _EMPTY_LO, np.int64), np.full(n, -1, np.int64)
        for j, v in enumerate(arr.to_pylist()):
            if v is None:
                bitmaps.append(None)
                continue
            bm = load(v)
            bitmaps.append(bm)
            if len(bm):
                lo[j], hi[j] = bm.min(), bm.max()
        return _Probe("bitmap", lo, hi, bitmaps=bitmaps)
    if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        raise DltraceError(f"cannot probe a lineage column of type {arr.type}")
    offsets = arr.offsets.to_numpy().astype(np.int64, copy=False)
    values_arr = arr.values
    if values_arr.null_count:
        values_arr = pc.fill_null(values_arr, -1)
    values = values_arr.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    starts, ends = offsets[:-1], offsets[1:]
    lengths = ends - starts
    if arr.null_count:
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        lengths = np.where(valid, lengths, 0)
        ends = starts + lengths
    nonempty = lengths > 0
    lo = np.full(n, _EMPTY_LO, np.int64)
    hi = np.full(n, -1, np.int64)
    # Sorted lists (the set strategy's contract): min/max are the ends. Check it, vectorised, once.
    seg = values[offsets[0]: offsets[-1]] if n else values[:0]
    sorted_rows = True
    if seg.size > 1:
        dec = np.flatnonzero(np.diff(seg) <= 0) + 1 + offsets[0]  # positions p with values[p] <= values[p-1]
        if dec.size:
            # allowed only where p starts a row (a new list begins)
            sorted_rows = bool(np.isin(dec, starts[nonempty]).all())
    if sorted_rows:
        lo[nonempty] = values[starts[nonempty]]
        hi[nonempty] = values[ends[nonempty] - 1]
    else:
        for j in np.flatnonzero(nonempty).tolist():
            s = values[starts[j]: ends[j]]
            lo[j], hi[j] = s.min(), s.max()
    return _Probe("set", lo, hi, values=values, offsets=np.stack([starts, ends]), sorted_rows=sorted_rows)


def forward(result: "LineageResult", table: str, rids: int | Iterable[int] | np.ndarray) -> list[int]:
    """Indices (ascending) of the output rows whose lineage in ``table`` contains any of ``rids``."""
    _check_rids_lineage(result, "forward")
    key = _table_key(result, table)
    q = _as_rids(rids)
    if q.size == 0 or result.num_rows == 0:
        return []
    p = _probe(result, key)
    cand = np.flatnonzero((p.lo <= q[-1]) & (p.hi >= q[0]))
    if cand.size == 0:
        return []
    hits: list[int] = []
    if p.kind == "bitmap":
        if q.size == 1:
            rid = int(q[0])
            for j in cand.tolist():
                bm = p.bitmaps[j]
                if bm is not None and rid in bm:
                    hits.append(j)
        else:
            from pyroaring import BitMap, BitMap64

            qbm32 = BitMap(q.astype(np.uint32)) if q[-1] < 2**32 else None
            qbm64 = None
            for j in cand.tolist():
                bm = p.bitmaps[j]
                if bm is None:
                    continue
                if isinstance(bm, BitMap64):
                    if qbm64 is None:
                        qbm64 = BitMap64(q.astype(np.uint64))
                    other = qbm64
                else:
                    other = qbm32 if qbm32 is not None else BitMap(q[q < 2**32].astype(np.uint32))
                if not bm.isdisjoint(other):
                    hits.append(j)
        return hits
    starts, ends = p.offsets
    values = p.values
    if p.sorted_rows and cand.size <= LOOP_ROWS:
        if q.size == 1:
            rid = int(q[0])
            for j in cand.tolist():
                s = values[starts[j]: ends[j]]
                k = int(s.searchsorted(rid))
                if k < s.size and s[k] == rid:
                    hits.append(j)
            return hits
        for j in cand.tolist():
            s = values[starts[j]: ends[j]]
            at = s.searchsorted(q)
            ok = at < s.size
            if np.any(s[at[ok]] == q[ok]):
                hits.append(j)
        return hits
    # Many candidate rows (or unsorted lists): one vectorised pass over all values.
    lo, hi = int(starts.min()) if starts.size else 0, int(ends.max()) if ends.size else 0
    seg = values[lo:hi]
    if q.size == 1:
        mask = seg == q[0]
    else:
        at = np.minimum(np.searchsorted(q, seg), q.size - 1)
        mask = q[at] == seg
    where = np.flatnonzero(mask) + lo
    if where.size == 0:
        return []
    # map value positions back to rows: the non-empty rows' [start, end) ranges are disjoint
    rows = np.flatnonzero(ends > starts)
    rows = rows[np.argsort(starts[rows], kind="stable")]
    row = rows[np.maximum(np.searchsorted(starts[rows], where, side="right") - 1, 0)]
    ok = (where >= starts[row]) & (where < ends[row])
    return np.unique(row[ok]).tolist()


def format_ranges(rids: np.ndarray, max_ranges: int = 8) -> str:
    """``"1200-1260, 4001, ..."``: sorted rids as runs of consecutive ids."""
    if rids.size == 0:
        return "-"
    breaks = np.flatnonzero(np.diff(rids) != 1)
    lo = np.concatenate(([rids[0]], rids[breaks + 1]))
    hi = np.concatenate((rids[breaks], [rids[-1]]))
    parts = [str(a) if a == b else f"{a}-{b}" for a, b in zip(lo[:max_ranges].tolist(), hi[:max_ranges].tolist())]
    more = lo.size - max_ranges
    if more > 0:
        parts.append(f"... (+{more} more ranges)")
    return ", ".join(parts)


def _short(v: Any, width: int = 24) -> str:
    text = "NULL" if v is None else str(v)
    return text if len(text) <= width else text[: width - 3] + "..."


def plain_table(table: pa.Table, width: int = 30) -> str:
    """A table as aligned text, every column shown (values cut at ``width`` characters)."""
    names = list(table.column_names)
    rows = [[_short(v, width) for v in rec.values()] for rec in table.to_pylist()]
    widths = [max([len(n)] + [len(r[j]) for r in rows]) for j, n in enumerate(names)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    out = [line(names), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def explain(result: "LineageResult", i: int, samples: int = 3) -> str:
    """A readable summary of row ``i``'s lineage: per table the count, the rid ranges and a few tuples."""
    i = _check_row(result, i)
    row = result.row(i)
    head = ", ".join(f"{k}={_short(v)}" for k, v in row.items())
    lines = [f"row {i} of {result.num_rows}: {head}"]
    if not result.lineage_columns:
        lines.append("  (no lineage captured)")
        return "\n".join(lines)
    if result.on_values is not None:
        values = result.lineage(i)
        lines.append(f"  lineage on values: {len(values)} distinct value tuples")
        for v in values[:samples]:
            lines.append("    " + ", ".join(_short(x) for x in v))
        if len(values) > samples:
            lines.append(f"    ... (+{len(values) - samples} more)")
        return "\n".join(lines)
    width = max(len(t) for t in result.lineage_columns)
    for t in result.lineage_columns:
        ids = row_rids(result, t, i)
        noun = "tuple" if ids.size == 1 else "tuples"
        lines.append(f"  {t:<{width}}  {ids.size} {noun}" + (f"; rids {format_ranges(ids)}" if ids.size else ""))
        if ids.size and samples:
            try:
                tuples = fetch(result.session, t, ids[:samples])
            except DltraceError as e:  # the table is no longer registered: the summary still stands
                lines.append(f"    (tuples unavailable: {e})")
                continue
            names = [c for c in tuples.column_names if c != RID]
            for rec in tuples.to_pylist():
                body = ", ".join(f"{c}={_short(rec[c])}" for c in names[:8])
                if len(names) > 8:
                    body += ", ..."
                lines.append(f"    [{rec[RID]}] {body}")
            if ids.size > samples:
                lines.append(f"    ... (+{ids.size - samples} more)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# impact: which output rows depend on these input rows
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Impact:
    """The output rows (``rows``, indices into ``result.table``) that depend on input ``rids`` of ``table``."""

    rows: list[int]
    result: "LineageResult"
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
    from dltrace.rewriter.grammar import generate
    from dltrace.rewriter.parse import parse_query

    try:
        return generate(parse_query(a, dialect_a), "duckdb") == generate(parse_query(b, dialect_b), "duckdb")
    except DltraceError:
        return a.strip() == b.strip()


def impact(session: "Session", sql: str, table: str, rids: int | Iterable[int], saved: Any = None,
           lineage: str = "set", dialect: str | None = None, semantics: str = "witness") -> Impact:
    """Which output rows of ``sql`` depend on rows ``rids`` of ``table``.

    With ``saved`` (a folder written by ``r.save`` or a :class:`LineageResult`), answered on that lineage
    (``forward``); otherwise the query runs with lineage for ``table`` only, and only the given rows carry a
    rid (every other row of ``table`` has a NULL rid, i.e. contributes nothing): the rows whose lineage is
    non-empty are the impacted ones.
    """
    name = table.lower()
    q = _as_rids(rids)
    read = dialect or session.dialect
    if saved is not None:
        from dltrace.result import LineageResult

        r = saved
        if not isinstance(r, LineageResult):
            from dltrace.store import load

            r = load(saved, session)
        if not _same_query(sql, r.sql, read, r.dialect):
            raise DltraceError("the saved lineage is for a different query than the one given")
        return Impact(forward(r, name, q), r, name, q.tolist(), "saved")
    return _impact_run(session, sql, name, q, lineage, read, semantics)


def _impact_run(session: "Session", sql: str, name: str, q: np.ndarray, lineage: str, read: str,
                semantics: str) -> Impact:
    from dltrace.result import run_forward
    from dltrace.rewriter.grammar import LineageOn, generate
    from dltrace.rewriter.parse import parse_query

    if name not in session.tables:
        raise UnknownTable(f"unknown table {name!r}; registered: {', '.join(sorted(session.tables)) or 'none'}")
    tree = parse_query(sql, read)
    session.check_tables(tree)
    if tree.find(LineageOn):
        raise UnsupportedQuery("impact chooses the lineage itself: leave LINEAGE ON out of the query")
    n = session.num_rows(name)
    if q.size and (q[0] < 0 or q[-1] >= n):
        raise DltraceError(f"rid {int(q[0] if q[0] < 0 else q[-1])} is outside table {name!r} (it has {n} rows)")
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    refs = [t for t in tree.find_all(exp.Table)
            if t.name.lower() == name and name not in ctes and not t.args.get("db")]
    if not refs:
        raise UnknownTable(f"the query does not read table {name!r}")
    temp = f"_dltrace_impact_{name}"
    d = session.dialect
    qi = lambda s: exp.to_identifier(s, quoted=True).sql(d)  # noqa: E731
    cols = list(session.engine.columns(name))
    keep_name = None
    if q.size <= 2000:
        cond = f"{qi(RID)} IN ({', '.join(map(str, q.tolist()))})" if q.size else "FALSE"
        body = (f"SELECT {', '.join(qi(c) for c in cols)}, CASE WHEN {cond} THEN {qi(RID)} END AS {qi(RID)} "
                f"FROM {qi(name)}")
    else:
        keep_name = f"_dltrace_impact_keep_{name}"
        session.engine.register(keep_name, ArrowSource(pa.table({"rid": pa.array(q, type=pa.int64())})))
        body = (f"SELECT {', '.join('t.' + qi(c) for c in cols)}, k.{qi('rid')} AS {qi(RID)} "
                f"FROM {qi(name)} AS t LEFT JOIN {qi(keep_name)} AS k ON t.{qi(RID)} = k.{qi('rid')}")
    for t in refs:
        alias = t.alias_or_name
        t.set("this", exp.to_identifier(temp, quoted=True))
        t.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
    if isinstance(tree, exp.Select):
        tree.set("lineage_on", LineageOn(tables=[exp.Table(this=exp.to_identifier(temp, quoted=True))]))
    text = generate(tree, read)
    session.engine.sql(f"CREATE OR REPLACE TEMPORARY VIEW {qi(temp)} AS {body}")
    session.tables[temp] = session.tables[name]
    try:
        r = run_forward(session, text, lineage=lineage, dialect=read, semantics=semantics)
    finally:
        session.tables.pop(temp, None)
        session.engine.drop(temp)
        if keep_name:
            session.engine.drop(keep_name)
    col = r.lineage_columns.get(temp)
    r.lineage_columns = {name: col} if col is not None else {}
    r.sql, r.dialect = sql, read
    rows = _nonempty_rows(col) if col is not None else []
    return Impact(rows, r, name, q.tolist(), "run")


def _nonempty_rows(col: pa.ChunkedArray) -> list[int]:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if _is_bitmap_type(arr.type):
        from dltrace.udafs.bitmap import load

        return [j for j, v in enumerate(arr) if v.is_valid and len(load(memoryview(v.as_buffer())))]
    flat = pc.list_flatten(arr)
    parents = pc.list_parent_indices(arr)
    keep = pc.is_valid(flat)
    return np.unique(parents.filter(keep).to_numpy()).tolist() if len(flat) else []
