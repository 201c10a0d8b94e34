"""Roaring-bitmap lineage sets, vectorised: functions over Arrow arrays, one call per engine batch.

The scalar core (format, ``load``, ``build``, ``merge``, ...) is :mod:`dltrace.udafs.bitmap`; the numpy writer and
reader of the portable format are :mod:`dltrace.udafs.bitmap_codec`.

The vectorised helpers take and return Arrow arrays (one call per engine batch; DuckDB batches 2048 rows,
Spark 10,000). Many *small* 32-bit bitmaps (the common case: one per output group) are handled without a
Python loop per row:

* writing: the batch's (row, id) pairs are sorted once, split into roaring containers with numpy and written
  straight into the portable format, byte-identical to ``BitMap(ids); run_optimize(); serialize()`` (tests
  check this); rows with more than 65,536 ids or a container of more than 4096 ids (a roaring bitset) go through
  pyroaring instead, built from a sorted ``array('I')`` (the fast path of its constructor);
* reading: the portable headers are parsed with numpy (``dl_count`` never decodes a container: cardinalities are
  in the header), containers are expanded with numpy (array, run) or ``unpackbits`` (bitset);
* merging: a row with one bitmap passes it through untouched; rows whose bitmaps hold <= 65,536 ids in total are
  decoded and re-written in one pass; larger rows and 64-bit bitmaps are unioned by pyroaring (container-wise).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64

from dltrace.udafs.arrow_lists import (
    as_array,
    binary_array,
    binary_from_buffer,
    broadcast,
    is_binary,
    list_array,
    list_parts,
)
from dltrace.udafs.bitmap import (
    _MAX_ARRAY,
    EMPTY32,
    EMPTY64,
    MAX_ID32,
    _as_ids,
    _bitmap_from_sorted,
    _bm_contains,
    _check_ids,
    _sorted,
    _to_bytes,
    _union_loaded,
    load,
)
from dltrace.udafs.bitmap_codec import (
    _binary_parts,
    _cardinalities,
    _parse32,
    _serialize_rows32,
    _values32,
)

# ---------------------------------------------------------------------------------------------------------------
# vectorised functions over Arrow arrays (one call per engine batch)
# ---------------------------------------------------------------------------------------------------------------


#: Rows with more ids than this skip the vectorised writer/reader: their per-row pyroaring cost is negligible
#: next to their size, and pyroaring is faster on them (bitset and run containers, no per-id numpy passes).
_VECTOR_MAX_ROW = 1 << 16
#: Building from ids, a row of more ids than this goes to pyroaring (its C bulk insert, a few ns per id, after a
#: fixed ~10 us per row): the vectorised writer sorts every (row, id) pair of the batch, ~60 ns per id, which only
#: rows of a few hundred ids repay. TPC-H Q9 (175 rows of ~1,800 unsorted ids, six columns): 73 -> 40 ms.
_BUILD_VECTOR_MAX_ROW = 256


def _assemble(n: int, parts: list[tuple[np.ndarray, pa.Array]], large: bool) -> pa.Array:
    """One binary array of ``n`` rows from pieces: (row numbers, binary array of those rows)."""
    parts = [(rows, a) for rows, a in parts if len(rows)]
    typ = pa.large_binary() if large else pa.binary()
    assert sum(len(rows) for rows, _ in parts) == n, "the pieces must cover every row once"
    if not parts:
        return pa.array([], typ)
    if len(parts) == 1 and len(parts[0][0]) == n and (parts[0][0] == np.arange(n)).all():
        return parts[0][1].cast(typ)
    index = np.zeros(n, np.int64)
    base = 0
    for rows, a in parts:
        index[rows] = base + np.arange(len(rows))
        base += len(a)
    return pa.concat_arrays([a.cast(typ) for _, a in parts]).take(pa.array(index))


def _build_pairs32(n: int, row: np.ndarray, v: np.ndarray, large: bool = False) -> pa.Array:
    """32-bit bitmaps of ``n`` rows from (row, id) pairs in any order, duplicates allowed, ids already checked.
    Meant for rows of <= ``_BUILD_VECTOR_MAX_ROW`` ids (callers send bigger rows to pyroaring)."""
    key = np.sort((row << 32) | v)  # ids < 2^32, row < 2^31: one sort orders by row, then id
    if key.size > 1:
        dup = np.empty(key.size, bool)
        dup[0] = False
        np.equal(key[1:], key[:-1], out=dup[1:])
        if dup.any():
            key = key[~dup]
    row = key >> 32
    v = key & 0xFFFFFFFF
    sizes, buf, big = _serialize_rows32(n, row, v)
    vec = binary_from_buffer(sizes, buf, large)
    fallback = np.flatnonzero(big)
    if not fallback.size:
        return vec
    # pyroaring writes the rows with a bitset-sized container (the vectorised writer left an empty-bitmap
    # placeholder for them)
    sb = np.searchsorted(row, np.arange(n + 1))
    extra = [_to_bytes(_bitmap_from_sorted(v[sb[i]:sb[i + 1]], False)) for i in fallback]
    rows = np.flatnonzero(~big)
    return _assemble(n, [(rows, vec.take(pa.array(rows))), (fallback, binary_array(extra, large))], large)


def build_arrow(lists: pa.Array | pa.ChunkedArray, wide: bool = False, large: bool = False) -> pa.Array:
    """``dl_bitmap_build``: list<int> array -> binary array of serialised bitmaps (never NULL)."""
    arr = as_array(lists)
    n = len(arr)
    if pa.types.is_null(arr.type):
        return binary_array([EMPTY64 if wide else EMPTY32] * n, large)
    _, bounds, v = list_parts(arr)
    _check_ids(v, wide)
    if wide:
        out = [_to_bytes(_bitmap_from_sorted(_sorted(v[bounds[i]:bounds[i + 1]]), True)) for i in range(n)]
        return binary_array(out, large)
    lengths = np.diff(bounds)
    huge = lengths > _BUILD_VECTOR_MAX_ROW
    if not huge.any():
        return _build_pairs32(n, np.repeat(np.arange(n, dtype=np.int64), lengths), v, large)
    # huge rows straight to pyroaring (no per-id numpy passes over them); the rest vectorised
    hrows, srows = np.flatnonzero(huge), np.flatnonzero(~huge)
    out = [_to_bytes(_bitmap_from_sorted(_sorted(v[bounds[i]:bounds[i + 1]]), False)) for i in hrows]
    parts = [(hrows, binary_array(out, large))]
    if srows.size:
        sv = v[np.repeat(~huge, lengths)]
        srow = np.repeat(np.arange(srows.size, dtype=np.int64), lengths[srows])
        parts.append((srows, _build_pairs32(srows.size, srow, sv, large)))
    return _assemble(n, parts, large)


def merge_arrow(lists: pa.Array | pa.ChunkedArray, wide: bool = False, large: bool = False) -> pa.Array:
    """``dl_bitmap_merge``: list<binary> array -> binary array of the per-row unions (never NULL).

    A row with one bitmap of the right width passes it through; rows of small 32-bit bitmaps are decoded and
    re-encoded in one vectorised pass; big rows of small bitmaps are decoded with numpy and built by pyroaring;
    the rest (64-bit, or big bitmaps) are unioned by pyroaring, container-wise.
    """
    arr = as_array(lists)
    n = len(arr)
    empty = EMPTY64 if wide else EMPTY32
    if pa.types.is_null(arr.type) or n == 0:
        return binary_array([empty] * n, large)
    valid = np.ones(n, bool) if arr.null_count == 0 else np.asarray(arr.is_valid().to_numpy(zero_copy_only=False))
    loff = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    values = arr.values.slice(int(loff[0]), int(loff[-1] - loff[0]))
    loff = loff - loff[0]
    ev, eoff, d = _binary_parts(values)  # the elements
    erow = np.repeat(np.arange(n, dtype=np.int64), np.diff(loff))
    if not valid.all():
        ev = ev & valid[erow]
    card, e32, parsed = _cardinalities(ev, eoff, d, directory=True)
    nelem = np.bincount(erow[ev], minlength=n)
    n64 = np.bincount(erow[ev & ~e32], minlength=n)
    rcard = np.bincount(erow, weights=card, minlength=n)
    if not wide and n64.any():
        raise ValueError("a 64-bit bitmap cannot be merged into a 32-bit one; use dl_bitmap_merge64")
    # one bitmap of the right width: pass it through (it is ours, already run-optimised)
    single = (nelem == 1) & ((n64 == 1) if wide else True)
    if wide:
        vector = decoded = np.zeros(n, bool)
    else:
        vector = ~single & (rcard <= _VECTOR_MAX_ROW)
        # a big union of many small bitmaps: decode them all with numpy, build once (a pyroaring union would
        # deserialise each small bitmap in Python)
        decoded = ~single & ~vector & (rcard <= _MAX_ARRAY * np.maximum(nelem, 1))
    python = ~single & ~vector & ~decoded
    parts: list[tuple[np.ndarray, pa.Array]] = []
    ce, key, c, kind, cstart = parsed  # containers of all 32-bit elements (ce: element index)
    srows = np.flatnonzero(single)
    if srows.size:
        # the one valid element of each single row
        eidx = np.flatnonzero(ev & single[erow])
        parts.append((srows, values.take(pa.array(eidx))))
    vrows = np.flatnonzero(vector)
    if vrows.size:
        sel = vector[erow[ce]]
        elem, ids = _values32(d, ce[sel], key[sel], c[sel], kind[sel], cstart[sel])
        renum = np.zeros(n, np.int64)
        renum[vrows] = np.arange(vrows.size)  # rows renumbered 0..len(vrows)-1
        rown = renum[erow[elem]]
        parts.append((vrows, _build_pairs32(vrows.size, rown, ids, large)))
    drows = np.flatnonzero(decoded)
    if drows.size:
        sel = decoded[erow[ce]]
        elem, ids = _values32(d, ce[sel], key[sel], c[sel], kind[sel], cstart[sel])
        k = np.sort((erow[elem] << 32) | ids)
        bounds = np.searchsorted(k >> 32, np.append(drows, n))
        out = []
        for i in range(drows.size):
            seg = k[bounds[i]:bounds[i + 1]] & 0xFFFFFFFF
            if seg.size > 1:
                seg = seg[np.concatenate(([True], seg[1:] != seg[:-1]))]
            out.append(_to_bytes(_bitmap_from_sorted(seg, False)))
        parts.append((drows, binary_array(out, large)))
    prows = np.flatnonzero(python)
    if prows.size:
        out = []
        for i in prows:
            items = [d[eoff[e]:eoff[e + 1]].tobytes() for e in range(loff[i], loff[i + 1]) if ev[e]]
            out.append(_to_bytes(_union_loaded([load(b) for b in items], wide)))
        parts.append((prows, binary_array(out, large)))
    if not parts:
        return binary_array([empty] * n, large)
    return _assemble(n, parts, large)


def _binary_values(arr: pa.Array) -> list:
    """Python bytes (or None) of a binary array."""
    return arr.to_pylist()


def count_arrow(x: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``dl_count``: set (list<int>) or bitmap (binary) array -> int64 (NULL lineage counts 0).

    Sets are trusted to be sets (sorted, distinct: what the rewriter builds); their NULL elements are ignored.
    """
    arr = as_array(x)
    if is_binary(arr.type):
        return pa.array(_cardinalities(*_binary_parts(arr))[0])
    if pa.types.is_null(arr.type):
        return pa.array(np.zeros(len(arr), np.int64))
    _, off, _ = list_parts(arr)  # a set is distinct by contract: its non-null elements
    return pa.array(np.diff(off))


def contains_arrow(x: pa.Array | pa.ChunkedArray, rids: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``dl_contains``: NULL lineage -> false, NULL rid -> NULL."""
    arr, r = broadcast(as_array(x), as_array(rids))
    rl = r.to_pylist()
    if is_binary(arr.type):
        vals = _binary_values(arr)
        return pa.array([None if q is None else (False if b is None else _bm_contains(load(b), q))
                         for b, q in zip(vals, rl)], pa.bool_())
    if pa.types.is_null(arr.type):
        return pa.array([None if q is None else False for q in rl], pa.bool_())
    _, off, v = list_parts(arr)
    return pa.array([None if q is None else bool((v[off[i]:off[i + 1]] == q).any()) for i, q in enumerate(rl)],
                    pa.bool_())


def to_list_arrow(x: pa.Array | pa.ChunkedArray, large: bool = False) -> pa.Array:
    """``dl_to_list``: set or bitmap array -> list<int64> sorted distinct (NULL lineage -> []).

    A set comes back as it is (trusted sorted and distinct) without its NULL elements."""
    arr = as_array(x)
    n = len(arr)
    if is_binary(arr.type):
        return _bitmaps_to_lists(arr, large)
    if pa.types.is_null(arr.type):
        return list_array(np.zeros(n + 1, np.int64), np.zeros(0, np.int64), large)
    _, off, v = list_parts(arr)
    return list_array(off, v, large)


def _bitmaps_to_lists(arr: pa.Array, large: bool) -> pa.Array:
    n = len(arr)
    valid, off, d = _binary_parts(arr)
    card, is32 = _cardinalities(valid, off, d)
    vec = np.flatnonzero(is32 & (card <= _VECTOR_MAX_ROW))
    rows_parts: list[np.ndarray] = []
    vals_parts: list[np.ndarray] = []
    if vec.size:
        blob, ids = _values32(d, *_parse32(d, off[vec], off[vec + 1]))
        rows_parts.append(vec[blob])
        vals_parts.append(ids)
    for i in np.flatnonzero(valid & ~(is32 & (card <= _VECTOR_MAX_ROW))):
        ids = _as_ids(d[off[i]:off[i + 1]].tobytes())
        rows_parts.append(np.full(ids.size, i, np.int64))
        vals_parts.append(ids)
    if rows_parts:
        rows = np.concatenate(rows_parts)
        vals = np.concatenate(vals_parts)
        if len(rows_parts) > 1:
            order = np.argsort(rows, kind="stable")  # ids are ascending within each row already
            rows, vals = rows[order], vals[order]
    else:
        rows = vals = np.zeros(0, np.int64)
    offsets = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=n))))
    return list_array(offsets, vals, large)


def union_arrow(a: pa.Array | pa.ChunkedArray, b: pa.Array | pa.ChunkedArray, large: bool = False) -> pa.Array:
    """``dl_union`` of two bitmap arrays, or (Spark, where one name has one return type) of two arrays of any
    lineage representation: always returns bitmaps (64-bit if an input is 64-bit or an id needs it);
    NULL only when both inputs are NULL."""
    x, y = broadcast(as_array(a), as_array(b))
    out: list[bytes | None] = []
    xs = _row_values(x)
    ys = _row_values(y)
    for p, q in zip(xs, ys):
        if p is None and q is None:
            out.append(None)
            continue
        loaded = []
        for val in (p, q):
            if val is None:
                continue
            if isinstance(val, (bytes, bytearray, memoryview)):
                loaded.append(load(val))
            else:
                ids = _as_ids(val)
                _check_ids(ids, True)
                loaded.append(_bitmap_from_sorted(ids, bool(ids.size and ids[-1] > MAX_ID32)))
        wide = any(isinstance(m, BitMap64) for m in loaded)
        out.append(_to_bytes(_union_loaded(loaded, wide)))
    return binary_array(out, large)


def _row_values(arr: pa.Array) -> list:
    if is_binary(arr.type):
        return _binary_values(arr)
    if pa.types.is_null(arr.type):
        return [None] * len(arr)
    valid, off, v = list_parts(arr)
    return [v[off[i]:off[i + 1]] if valid[i] else None for i in range(len(arr))]
