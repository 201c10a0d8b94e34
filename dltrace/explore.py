"""Lineage queries on a result, at interactive speed.

* :func:`backward` -- the actual base tuples behind one output row, fetched by rid (:mod:`dltrace.fetch`).
* :func:`forward` -- the output rows whose lineage contains any of some rids, answered on the lineage values
  themselves: roaring bitmaps are deserialised once per result and table (cached) and probed with
  ``rid in bm`` / ``isdisjoint``; set columns are probed by binary search in their sorted lists. Both skip
  rows whose [min, max] rid range cannot hold a probe.
* :func:`explain` -- a readable summary of one row's lineage.

Impact analysis (which output rows depend on some input rows) is :mod:`dltrace.impact`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap, BitMap64

from dltrace.errors import DltraceError, check_count, check_mapping, check_names
from dltrace.fetch import as_rids, fetch, table_rids
from dltrace.lineage_data import ByTable, LineageData, is_bitmap_type
from dltrace.names import RID
from dltrace.py_values import py_records
from dltrace.udafs.bitmap import load as load_bitmap

#: forward on a set column: up to this many candidate rows are probed one by one (binary search in each
#: sorted list); beyond, one vectorised pass over all the column's values.
LOOP_ROWS = 4096


# ---------------------------------------------------------------------------------------------------------------
# lineage values -> numpy
# ---------------------------------------------------------------------------------------------------------------


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
        bm = load_bitmap(memoryview(value))
        return np.asarray(bm.to_array(), dtype=np.int64) if len(bm) else np.empty(0, np.int64)
    return as_rids([v for v in value if v is not None])


def row_rids(result: LineageData, table: str, i: int) -> np.ndarray:
    """Row ``i``'s lineage in ``table`` as a sorted int64 numpy array (the shared part included)."""
    col = result.lineage_columns[table]
    own = _value_ids(col[i])
    shared = result.shared_ids(table) if result.shared_lineage else ()
    if not len(shared):
        return own
    return np.union1d(own, np.asarray(shared, dtype=np.int64))


# ---------------------------------------------------------------------------------------------------------------
# backward / forward / explain
# ---------------------------------------------------------------------------------------------------------------


def backward(result: LineageData, i: int, tables: Iterable[str] | str | None = None,
             columns: dict[str, list[str]] | None = None, limit: int | None = None) -> dict[str, pa.Table]:
    """``{table: base tuples}`` of output row ``i`` (every column plus ``dl_rid``, in rid order).

    ``tables`` restricts the tables, ``columns`` maps a table to the columns to read, ``limit`` keeps the
    first ``limit`` tuples per table (by rid).
    """
    result.check_rid_lineage("backward")
    i = result.check_row(i)
    tables = check_names(tables, "tables")
    keys = list(result.lineage_columns) if tables is None else [result.table_key(t) for t in tables]
    # a table named in columns must be one of the row's: a misspelt one was ignored, every column read
    wanted = {}
    for t, names in check_mapping(columns or {}, "columns", "table -> [column, ...]").items():
        wanted[result.table_key(t)] = check_names(names, f"columns[{t!r}]")
    out = {}
    for t in keys:
        ids = row_rids(result, t, i)
        if limit is not None:
            ids = ids[:check_count(limit, "limit")]
        out[t] = fetch(result.session, t, ids, wanted.get(t))
    return ByTable(out)


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


def _probe(result: LineageData, table: str) -> _Probe:
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
    if is_bitmap_type(arr.type):
        bitmaps, lo, hi = [], np.full(n, _EMPTY_LO, np.int64), np.full(n, -1, np.int64)
        for j, v in enumerate(arr.to_pylist()):
            if v is None:
                bitmaps.append(None)
                continue
            bm = load_bitmap(v)
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


def forward(result: LineageData, table: str, rids: int | Iterable[int] | np.ndarray) -> list[int]:
    """Indices (ascending) of the output rows whose lineage in ``table`` contains any of ``rids``."""
    result.check_rid_lineage("forward")
    result.check_every_row("forward")
    key = result.table_key(table)
    q = table_rids(rids, key, result.table_rows(key))  # (the table as the ids name it: registered again
    # since, it may be smaller)
    if q.size == 0 or result.num_rows == 0:
        return []
    shared = result.shared_ids(key) if result.shared_lineage else ()
    if len(shared) and np.isin(q, np.asarray(shared, dtype=np.int64)).any():
        return list(range(result.num_rows))  # in every row's lineage
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
    rows = [[_short(v, width) for v in rec.values()] for rec in py_records(table)]
    widths = [max([len(n)] + [len(r[j]) for r in rows]) for j, n in enumerate(names)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    out = [line(names), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def explain(result: LineageData, i: int, samples: int = 3) -> str:
    """A readable summary of row ``i``'s lineage: per table the count, the rid ranges and a few tuples."""
    check_count(samples, "samples")
    i = result.row_index(i)
    row = result.row(i)
    head = ", ".join(f"{k}={_short(v)}" for k, v in row.items())
    lines = [f"row {i} of {result.num_rows}: {head}"]
    if not result.lineage_columns:  # (a query reading no table has lineage: empty)
        lines.append("  (no lineage captured)" if result.strategy is None else "  (no base table read: empty lineage)")
        return "\n".join(lines)
    result.check_row(i)  # (a row a backward trace of other rows did not reach: nothing is known of it)
    if result.on_values is not None:
        values = [v for per_table in result.lineage(i).values() for v in per_table]
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
            for rec in py_records(tuples):
                body = ", ".join(f"{c}={_short(rec[c])}" for c in names[:8])
                if len(names) > 8:
                    body += ", ..."
                lines.append(f"    [{rec[RID]}] {body}")
            if ids.size > samples:
                lines.append(f"    ... (+{ids.size - samples} more)")
    return "\n".join(lines)
