"""Row stores: a rid-addressable copy of a parquet table.

Parquet is compressed and encoded per page: a rid cannot be read without decoding its page, and scattered
rids (a customer's orders all over ``lineitem``) touch most pages of a big table -- seconds at SF 1 however
well the reads are pruned. A row store is the table decoded once into an uncompressed Arrow IPC file (batches
of 65,536 rows, the types DuckDB reads), memory-mapped: rid r is row r, and a lookup touches only the pages
holding its rows. It lives in ``<cache>/rowstore/<content hash>.arrow`` (the same content hash as the saved
lineage's fingerprint, so a changed table gets a new one), shared by every session and every save.
"""

from __future__ import annotations

import hashlib
import os
import threading

import duckdb
import numpy as np
import pyarrow as pa
from sqlglot import exp

from dltrace.cache import cache_root
from dltrace.engines.sources import RID, ParquetSource, duckdb_path
from dltrace.errors import DltraceError
from dltrace.fingerprints import file_hash

#: Row stores are evicted, least recently used first, beyond this many bytes (``$DLTRACE_ROWSTORE_MAX_GB``).
ROWSTORE_MAX_BYTES = int(float(os.environ.get("DLTRACE_ROWSTORE_MAX_GB", "20")) * 2**30)
ROWSTORE_BATCH = 1 << 16

_local = threading.local()


def thread_duckdb() -> duckdb.DuckDBPyConnection:
    """A private DuckDB cursor per thread (never the session's connection: no temp objects leak into it)."""
    con = getattr(_local, "con", None)
    if con is None:
        con = duckdb.connect(":memory:")
        con.execute("SET parquet_metadata_cache = true")
        _local.con = con
    return con


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
_build_lock = threading.Lock()


def _rowstore_root():
    return cache_root() / "rowstore"


def _content_key(source: ParquetSource) -> str:
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
    con = thread_duckdb()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    writer = None
    schema = None
    try:
        with pa.OSFile(str(tmp), "wb") as sink:
            for f in source.files:
                lit = exp.Literal.string(duckdb_path(f)).sql("duckdb")
                # One plain scan per file: DuckDB keeps a scan's row order (preserve_insertion_order),
                # checked below through file_row_number all the same.
                reader = con.sql(f"SELECT * FROM read_parquet({lit}, file_row_number = true)").to_arrow_reader(
                    ROWSTORE_BATCH)
                expect = 0
                for batch in reader:
                    # (by name: DuckDB puts a hive partition's columns, k=v folders, after it)
                    pos = batch.column("file_row_number").to_numpy()
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
