"""Roaring-bitmap lineage sets: the pure pyroaring/numpy/Arrow core shared by both engines (no engine imports).

A lineage value of strategy ``bitmap`` is a roaring bitmap of row ids in the *portable* roaring serialisation
(the format CRoaring, Java RoaringBitmap and Go roaring all read), ``run_optimize()``-d before it is written:

* 32-bit (``pyroaring.BitMap``): for tables with fewer than 2^32 rows. Produced by ``dl_bitmap_build`` /
  ``dl_bitmap_merge``.
* 64-bit (``pyroaring.BitMap64``, the portable 64-bit format: a uint64 bucket count, then per bucket a uint32 high
  key and a 32-bit portable bitmap): for tables with >= 2^32 rows. Produced by ``dl_bitmap_build64`` /
  ``dl_bitmap_merge64``.

**Telling the two apart (readers accept both).** No extra byte is added (that would break portability). Instead
the first two bytes decide: every 32-bit portable bitmap starts with its little-endian cookie, ``3A 30``
(SERIAL_COOKIE_NO_RUNCONTAINER = 12346) or ``3B 30`` (SERIAL_COOKIE = 12347, high half = containers - 1).
A 64-bit portable bitmap starts with its uint64 bucket count, whose low 16 bits equal 12346 or 12347 only if it
has at least 12346 distinct high 32-bit words, i.e. holds an id >= 12345 * 2^32 (about 5.3e13). Row ids are
dense in ``[0, n)``, so that would need a table of 5.3e13 rows; the 64-bit writers refuse such ids
(:data:`MAX_ID64`) so that the rule is exact for everything we write. pyroaring cannot tell the formats apart
itself (each ``deserialize`` simply rejects the other format).

**NULL is the empty set.** Builders and mergers skip NULL elements and NULL inputs and always return a bitmap
(the empty one when nothing is left); readers treat a NULL lineage value as the empty set.

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

from array import array
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
from pyroaring import BitMap, BitMap64

MAX_ID32 = (1 << 32) - 1
#: Largest id a 64-bit bitmap may hold so that its first two bytes can never look like a 32-bit cookie.
MAX_ID64 = (12345 << 32) - 1

_COOKIE_NORUN = 12346
_COOKIE_RUN = 12347
_MAX_ARRAY = 4096  # roaring's array-container limit
_NO_OFFSET_THRESHOLD = 4

EMPTY32 = BitMap().serialize()
EMPTY64 = BitMap64().serialize()


# ---------------------------------------------------------------------------------------------------------------
# scalar core
# ---------------------------------------------------------------------------------------------------------------


def is_64(blob: bytes | bytearray | memoryview) -> bool:
    """Whether a serialised bitmap is in the 64-bit portable format (see the module docstring)."""
    head = bytes(blob[:2])
    return head not in (b"\x3a\x30", b"\x3b\x30")


def load(blob: bytes | bytearray | memoryview) -> BitMap | BitMap64:
    """Deserialise a 32- or 64-bit portable bitmap."""
    data = bytes(blob)
    if is_64(data):
        return BitMap64.deserialize(data)
    return BitMap.deserialize(data)


def _to_bytes(bm: BitMap | BitMap64) -> bytes:
    bm.run_optimize()
    return bm.serialize()


def _check_ids(v: np.ndarray, wide: bool) -> None:
    if v.size == 0:
        return
    lo, hi = int(v.min()), int(v.max())
    if lo < 0:
        raise ValueError(f"lineage row ids must be >= 0, got {lo}")
    if not wide and hi > MAX_ID32:
        raise ValueError(f"row id {hi} does not fit a 32-bit bitmap; use the 64-bit functions (dl_bitmap_build64)")
    if wide and hi > MAX_ID64:
        raise ValueError(f"row id {hi} is beyond the supported 64-bit range (< 12345 * 2^32)")


def _bitmap_from_sorted(v: np.ndarray, wide: bool) -> BitMap | BitMap64:
    """A bitmap from a sorted (not necessarily distinct) int64 array of valid ids."""
    cls = BitMap64 if wide else BitMap
    if v.size > _MAX_ARRAY:
        # clustered ids (the usual lineage: rids follow the keys) are few runs: add them as ranges
        breaks = np.flatnonzero(np.diff(v) != 1)
        if (breaks.size + 1) * 16 <= v.size:
            bm = cls()
            starts = v[np.concatenate(([0], breaks + 1))].tolist()
            ends = (v[np.append(breaks, v.size - 1)] + 1).tolist()
            for a, b in zip(starts, ends):
                bm.add_range(a, b)
            return bm
    buf = array("Q" if wide else "I")
    buf.frombytes(v.astype(np.uint64 if wide else np.uint32, copy=False).tobytes())
    return cls(buf)


def _sorted(v: np.ndarray) -> np.ndarray:
    """``v`` sorted (engines often hand over already sorted lists: checking is cheaper than sorting)."""
    if v.size < 2 or bool((v[1:] >= v[:-1]).all()):
        return v
    return np.sort(v)


def build(ids: Iterable[int | None] | np.ndarray | None, wide: bool = False) -> bytes:
    """Serialised bitmap of the non-null ``ids`` (32-bit, or 64-bit when ``wide``)."""
    if ids is None:
        return EMPTY64 if wide else EMPTY32
    if isinstance(ids, np.ndarray):
        v = ids.astype(np.int64, copy=False)
    else:
        v = np.fromiter((i for i in ids if i is not None), dtype=np.int64)
    _check_ids(v, wide)
    return _to_bytes(_bitmap_from_sorted(_sorted(v), wide))


def _widen(bm: BitMap | BitMap64) -> BitMap64:
    if isinstance(bm, BitMap64):
        return bm
    return BitMap64(array("Q", np.asarray(bm.to_array(), dtype=np.uint64).tobytes()))


def _union_loaded(bms: list, wide: bool) -> BitMap | BitMap64:
    if wide:
        bms = [_widen(b) for b in bms]
        if not bms:
            return BitMap64()
        out = BitMap64.union(*bms) if len(bms) > 1 else bms[0]
        if len(out) and out.max() > MAX_ID64:
            raise ValueError(f"row id {out.max()} is beyond the supported 64-bit range (< 12345 * 2^32)")
        return out
    if any(isinstance(b, BitMap64) for b in bms):
        raise ValueError("a 64-bit bitmap cannot be merged into a 32-bit one; use dl_bitmap_merge64")
    if not bms:
        return BitMap()
    return BitMap.union(*bms) if len(bms) > 1 else bms[0]


def merge(blobs: Iterable[bytes | None] | None, wide: bool = False) -> bytes:
    """Union of serialised bitmaps (NULLs skipped), serialised (32-bit, or 64-bit when ``wide``)."""
    loaded = [load(b) for b in (blobs or ()) if b is not None]
    return _to_bytes(_union_loaded(loaded, wide))


def _as_ids(value: Any) -> np.ndarray:
    """Distinct sorted int64 ids of one lineage value: a list/array of ints (NULLs skipped), a bitmap, or None."""
    if value is None:
        return np.empty(0, np.int64)
    if isinstance(value, (bytes, bytearray, memoryview)):
        bm = load(value)
        dtype = np.uint64 if isinstance(bm, BitMap64) else np.uint32
        return np.frombuffer(bm.to_array(), dtype=dtype).astype(np.int64)
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        if value.dtype.kind == "f":  # pandas turns an int array with NULLs into floats with NaN
            value = value[~np.isnan(value)]
        return np.unique(value.astype(np.int64))
    return np.unique(np.fromiter((int(i) for i in value if i is not None), dtype=np.int64))


def decode(value: Any) -> list[int]:
    """One lineage value as it comes back from an engine (a list of ints, a 32- or 64-bit bitmap as bytes,
    or None) as a sorted list of distinct ints."""
    return _as_ids(value).tolist()


def count(value: Any) -> int:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(load(value))
    return int(_as_ids(value).size)


def _bm_contains(bm: BitMap | BitMap64, rid: int) -> bool:
    limit = MAX_ID64 if isinstance(bm, BitMap64) else MAX_ID32
    return 0 <= rid <= limit and rid in bm


def contains(value: Any, rid: int | None) -> bool | None:
    if rid is None:
        return None
    if value is None:
        return False
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bm_contains(load(value), rid)
    return any(i == rid for i in value if i is not None)


def to_list(value: Any) -> list[int]:
    return decode(value)


def union(a: Any, b: Any) -> bytes | None:
    """Union of two bitmaps (either may be NULL; NULL only when both are). 64-bit if either input is."""
    if a is None and b is None:
        return None
    loaded = [load(x) for x in (a, b) if x is not None]
    wide = any(isinstance(x, BitMap64) for x in loaded)
    return _to_bytes(_union_loaded(loaded, wide))


# ---------------------------------------------------------------------------------------------------------------
# Arrow plumbing
# ---------------------------------------------------------------------------------------------------------------


def _array(x: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(x, pa.ChunkedArray):
        if x.num_chunks == 1:
            return x.chunk(0)
        if x.num_chunks == 0:
            return pa.array([], type=x.type)
        return x.combine_chunks()
    return x


def _list_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row valid mask, offsets (n + 1, into the values), values as int64) of a list array.

    NULL elements and the values under NULL rows are dropped, so row ``i`` is ``values[offsets[i]:offsets[i+1]]``
    and a NULL row is empty.
    """
    t = arr.type
    if pa.types.is_list_view(t) or pa.types.is_fixed_size_list(t):
        arr = arr.cast(pa.list_(t.value_type))
    elif pa.types.is_large_list_view(t):
        arr = arr.cast(pa.large_list(t.value_type))
    n = len(arr)
    valid = np.ones(n, bool) if arr.null_count == 0 else np.asarray(arr.is_valid().to_numpy(zero_copy_only=False))
    offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    values = arr.values.slice(lo, hi - lo)
    offsets = offsets - lo
    keep = None
    if values.null_count:
        keep = np.asarray(values.is_valid().to_numpy(zero_copy_only=False))
    if not valid.all():
        lengths = np.diff(offsets)
        if lengths[~valid].any():
            in_valid_row = np.repeat(valid, lengths)
            keep = in_valid_row if keep is None else keep & in_valid_row
    if keep is not None:
        offsets = np.concatenate(([0], np.cumsum(keep, dtype=np.int64)))[offsets]
        values = values.filter(pa.array(keep))
    if not pa.types.is_int64(values.type):
        values = values.cast(pa.int64())
    v = values.to_numpy(zero_copy_only=False) if len(values) else np.empty(0, np.int64)
    return valid, offsets, np.asarray(v, dtype=np.int64)


def _binary_array(chunks: list[bytes | None], large: bool = False) -> pa.Array:
    return pa.array(chunks, type=pa.large_binary() if large else pa.binary())


def _binary_from_buffer(sizes: np.ndarray, buf: np.ndarray, large: bool) -> pa.Array:
    offsets = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
    if large:
        typ, off = pa.large_binary(), offsets.astype(np.int64)
    else:
        if offsets[-1] > np.iinfo(np.int32).max:
            return _binary_from_buffer(sizes, buf, True).cast(pa.binary())  # raises if too big
        typ, off = pa.binary(), offsets.astype(np.int32)
    return pa.Array.from_buffers(typ, len(sizes), [None, pa.py_buffer(off), pa.py_buffer(buf)])


# ---------------------------------------------------------------------------------------------------------------
# vectorised writer of many small 32-bit bitmaps
# ---------------------------------------------------------------------------------------------------------------


def _put16(buf: np.ndarray, pos: np.ndarray, val: np.ndarray | int) -> None:
    val = np.asarray(val, dtype=np.int64)
    buf[pos] = val & 0xFF
    buf[pos + 1] = (val >> 8) & 0xFF


def _put32(buf: np.ndarray, pos: np.ndarray, val: np.ndarray | int) -> None:
    val = np.asarray(val, dtype=np.int64)
    buf[pos] = val & 0xFF
    buf[pos + 1] = (val >> 8) & 0xFF
    buf[pos + 2] = (val >> 16) & 0xFF
    buf[pos + 3] = (val >> 24) & 0xFF


def _serialize_rows32(nrows: int, row: np.ndarray, val: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Portable serialisation of ``nrows`` run-optimised 32-bit bitmaps at once.

    ``row``/``val``: the (row, id) pairs, sorted by row then id, distinct, ids in [0, 2^32). Returns
    (sizes per row, byte buffer of all rows back to back, mask of rows NOT written because they have a container
    of more than 4096 ids: those rows hold an empty-bitmap placeholder and must be rewritten by pyroaring).
    """
    m = val.size
    hi = val >> 16
    lo = val & 0xFFFF
    if m:
        new_c = np.empty(m, bool)
        new_c[0] = True
        np.not_equal(row[1:], row[:-1], out=new_c[1:])
        new_c[1:] |= hi[1:] != hi[:-1]
    else:
        new_c = np.zeros(0, bool)
    cstart = np.flatnonzero(new_c)
    card = np.diff(np.append(cstart, m))
    crow = row[cstart]
    big_rows = np.zeros(nrows, bool)
    if card.size and card.max() > _MAX_ARRAY:
        big_rows[crow[card > _MAX_ARRAY]] = True
        keep = ~big_rows[row]
        row, val = row[keep], val[keep]
        sizes, buf, _ = _serialize_rows32(nrows, row, val)  # big rows written as empty placeholders
        return sizes, buf, big_rows
    ckey = hi[cstart]
    nc_total = cstart.size
    # runs: a run starts at a container start or where the id is not the previous id + 1
    new_run = new_c.copy()
    if m > 1:
        new_run[1:] |= lo[1:] != lo[:-1] + 1
    rstart = np.flatnonzero(new_run)
    nruns = np.add.reduceat(new_run.astype(np.int64), cstart) if nc_total else np.zeros(0, np.int64)
    is_run = 2 + 4 * nruns < 2 * card
    csize = np.where(is_run, 2 + 4 * nruns, 2 * card)

    nc = np.bincount(crow, minlength=nrows).astype(np.int64)
    runs_in_row = np.bincount(crow, weights=is_run, minlength=nrows) > 0
    data_row = np.bincount(crow, weights=csize, minlength=nrows).astype(np.int64)
    has_off = ~runs_in_row | (nc >= _NO_OFFSET_THRESHOLD)
    hdr = np.where(runs_in_row, 4 + (nc + 7) // 8, 8)  # cookie (+ count | + run flags)
    hstart_rel = hdr
    dstart_rel = hdr + 4 * nc + np.where(has_off, 4 * nc, 0)
    sizes = dstart_rel + data_row
    base = np.concatenate(([0], np.cumsum(sizes)))[:-1]
    buf = np.zeros(int(sizes.sum()), np.uint8)

    norun = ~runs_in_row
    _put32(buf, base[norun], _COOKIE_NORUN)
    _put32(buf, base[norun] + 4, nc[norun])
    _put16(buf, base[runs_in_row], _COOKIE_RUN)
    _put16(buf, base[runs_in_row] + 2, nc[runs_in_row] - 1)
    if nc_total:
        first_c = np.concatenate(([0], np.cumsum(nc)))[:-1]  # index of the row's first container
        j = np.arange(nc_total) - first_c[crow]  # container index within its row
        cbase = base[crow]
        # run flags (only rows with runs have them; only run containers set a bit)
        rc = np.flatnonzero(is_run)
        if rc.size:
            np.add.at(buf, cbase[rc] + 4 + j[rc] // 8, (1 << (j[rc] % 8)).astype(np.uint8))
        hpos = cbase + hstart_rel[crow] + 4 * j
        _put16(buf, hpos, ckey)
        _put16(buf, hpos + 2, card - 1)
        cum = np.cumsum(csize)
        coff = (cum - csize) - (cum - csize)[first_c[crow]]  # offset of the container within the row's data
        cdata_rel = dstart_rel[crow] + coff  # from the start of the row's bitmap
        oc = np.flatnonzero(has_off[crow])
        if oc.size:
            _put32(buf, cbase[oc] + hstart_rel[crow[oc]] + 4 * nc[crow[oc]] + 4 * j[oc], cdata_rel[oc])
        cdata = cbase + cdata_rel
        # array containers: the low 16 bits of each id
        cid = np.cumsum(new_c) - 1
        arr_v = ~is_run[cid]
        if arr_v.any():
            idx = np.flatnonzero(arr_v)
            _put16(buf, cdata[cid[idx]] + 2 * (idx - cstart[cid[idx]]), lo[idx])
        # run containers: run count, then (start, length - 1) pairs
        if rc.size:
            _put16(buf, cdata[rc], nruns[rc])
            rlen = np.diff(np.append(rstart, m))
            rcid = cid[rstart]
            sel = is_run[rcid]
            rs, rl, rcid = rstart[sel], rlen[sel], rcid[sel]
            first_run = np.concatenate(([0], np.cumsum(nruns)))[:-1]  # global index of a container's first run
            run_idx = np.flatnonzero(sel) - first_run[rcid]
            p = cdata[rcid] + 2 + 4 * run_idx
            _put16(buf, p, lo[rs])
            _put16(buf, p + 2, rl - 1)
    return sizes, buf, big_rows


# ---------------------------------------------------------------------------------------------------------------
# vectorised reader of many 32-bit bitmaps
# ---------------------------------------------------------------------------------------------------------------


def _u16(d: np.ndarray, p: np.ndarray) -> np.ndarray:
    return d[p].astype(np.int64) | (d[p + 1].astype(np.int64) << 8)


def _u32(d: np.ndarray, p: np.ndarray) -> np.ndarray:
    return _u16(d, p) | (_u16(d, p + 2) << 16)


def _binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(valid mask, offsets (n + 1) into the data, data as uint8) of a binary array."""
    if pa.types.is_binary_view(arr.type):
        arr = arr.cast(pa.binary())
    n = len(arr)
    valid = np.ones(n, bool) if arr.null_count == 0 else np.asarray(arr.is_valid().to_numpy(zero_copy_only=False))
    bufs = arr.buffers()
    if n == 0 or bufs[1] is None:
        return valid, np.zeros(n + 1, np.int64), np.zeros(0, np.uint8)
    odt = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    offsets = np.frombuffer(bufs[1], dtype=odt, count=arr.offset + n + 1)[arr.offset:].astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return valid, offsets, data


def _is32_at(d: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which blobs (given by start/end in ``d``) are 32-bit bitmaps: they start with a 32-bit cookie."""
    ok = ends - starts >= 2
    out = np.zeros(starts.size, bool)
    if ok.any():
        lo = _u16(d, starts[ok])
        out[ok] = (lo == _COOKIE_NORUN) | (lo == _COOKIE_RUN)
    return out


def _parse32(d: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """Container directory of 32-bit portable bitmaps: per container (blob index, key, cardinality,
    kind 0 array / 1 bitset / 2 run, absolute start in ``d``). Raises ValueError on a malformed blob."""
    nb = starts.size
    if (ends - starts < 8).any():
        raise ValueError("malformed roaring bitmap (too short)")
    lo, hi = _u16(d, starts), _u16(d, starts + 2)
    run = lo == _COOKIE_RUN
    if not (run | ((lo == _COOKIE_NORUN) & (hi == 0))).all():
        raise ValueError("not a 32-bit portable roaring bitmap")
    n = hi + 1
    if (~run).any():
        n[~run] = _u32(d, starts[~run] + 4)
    desc = np.where(run, starts + 4 + (n + 7) // 8, starts + 8)
    has_off = ~run | (n >= _NO_OFFSET_THRESHOLD)
    if (desc + 4 * n + np.where(has_off, 4 * n, 0) > ends).any():
        raise ValueError("malformed roaring bitmap (header)")
    total = int(n.sum())
    cb = np.repeat(np.arange(nb, dtype=np.int64), n)
    j = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    hpos = desc[cb] + 4 * j
    key = _u16(d, hpos)
    card = _u16(d, hpos + 2) + 1
    isrun = np.zeros(total, bool)
    rc = np.flatnonzero(run[cb])
    if rc.size:
        isrun[rc] = ((d[starts[cb[rc]] + 4 + j[rc] // 8] >> (j[rc] % 8)) & 1).astype(bool)
    kind = np.where(isrun, 2, np.where(card > _MAX_ARRAY, 1, 0))
    cstart = np.zeros(total, np.int64)
    ho = has_off[cb]
    if ho.any():
        cstart[ho] = starts[cb[ho]] + _u32(d, desc[cb[ho]] + 4 * n[cb[ho]] + 4 * j[ho])
    no = np.flatnonzero(~ho)  # run-cookie blobs with < 4 containers: containers follow each other
    for jj in range(_NO_OFFSET_THRESHOLD - 1):
        sel = no[j[no] == jj]
        if not sel.size:
            break
        if jj == 0:
            cstart[sel] = desc[cb[sel]] + 4 * n[cb[sel]]
        else:
            prev = sel - 1
            cstart[sel] = cstart[prev] + _container_sizes(d, kind[prev], card[prev], cstart[prev])
    size = _container_sizes(d, kind, card, cstart) if total else np.zeros(0, np.int64)
    if total and ((cstart < starts[cb]) | (cstart + size > ends[cb])).any():
        raise ValueError("malformed roaring bitmap (containers)")
    return cb, key, card, kind, cstart


def _container_sizes(d, kind, card, cstart) -> np.ndarray:
    size = np.where(kind == 1, 8192, 2 * card)
    r = np.flatnonzero(kind == 2)
    if r.size:
        size[r] = 2 + 4 * _u16(d, cstart[r])
    return size


def _ranges(start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Concatenation of range(start[i], start[i] + length[i])."""
    total = int(length.sum())
    ends = np.cumsum(length)
    return np.arange(total, dtype=np.int64) - np.repeat(ends - length - start, length)


def _values32(d: np.ndarray, cb, key, card, kind, cstart) -> tuple[np.ndarray, np.ndarray]:
    """(blob index, id) of every id of the parsed bitmaps, in blob order and ascending within a blob."""
    out_off = np.cumsum(card) - card
    vals = np.empty(int(card.sum()), np.int64)
    a = np.flatnonzero(kind == 0)
    if a.size:
        pos = _ranges(out_off[a], card[a])
        src = _ranges(np.zeros(a.size, np.int64), card[a])  # index within the container
        ca = np.repeat(a, card[a])
        vals[pos] = (key[ca] << 16) | _u16(d, cstart[ca] + 2 * src)
    r = np.flatnonzero(kind == 2)
    if r.size:
        nr = _u16(d, cstart[r])
        rr = np.repeat(r, nr)  # container of each run
        k = _ranges(np.zeros(r.size, np.int64), nr)  # run index within its container
        p = cstart[rr] + 2 + 4 * k
        rstart, rlen = _u16(d, p), _u16(d, p + 2) + 1
        if (np.bincount(np.repeat(np.arange(r.size), nr), weights=rlen, minlength=r.size) != card[r]).any():
            raise ValueError("malformed roaring bitmap (run container)")
        # runs are ascending within a container, so their expansion lands in order at the container's offset
        vals[_ranges(out_off[r], card[r])] = (key[rr].repeat(rlen) << 16) | _ranges(rstart, rlen)
    for c in np.flatnonzero(kind == 1):
        bits = np.flatnonzero(np.unpackbits(d[cstart[c]:cstart[c] + 8192], bitorder="little"))
        if bits.size != card[c]:
            raise ValueError("malformed roaring bitmap (bitset container)")
        vals[out_off[c]:out_off[c] + card[c]] = (int(key[c]) << 16) | bits
    return np.repeat(cb, card), vals


def _cardinalities(valid, offsets, d, directory: bool = False):
    """(cardinality per blob, mask of the 32-bit blobs[, container directory of the 32-bit blobs with blob
    indexes into the whole array]) -- from the headers alone for 32-bit blobs, by pyroaring for 64-bit ones;
    NULL counts 0."""
    n = valid.size
    starts, ends = offsets[:-1], offsets[1:]
    is32 = valid & _is32_at(d, starts, ends)
    out = np.zeros(n, np.int64)
    i32 = np.flatnonzero(is32)
    z = np.zeros(0, np.int64)
    parsed = (z, z, z, z, z)
    if i32.size:
        cb, key, card, kind, cstart = _parse32(d, starts[i32], ends[i32])
        out[i32] = np.bincount(cb, weights=card, minlength=i32.size).astype(np.int64)
        parsed = (i32[cb], key, card, kind, cstart)
    for i in np.flatnonzero(valid & ~is32):
        out[i] = len(BitMap64.deserialize(d[starts[i]:ends[i]].tobytes()))
    return (out, is32, parsed) if directory else (out, is32)


# ---------------------------------------------------------------------------------------------------------------
# vectorised functions over Arrow arrays (one call per engine batch)
# ---------------------------------------------------------------------------------------------------------------


#: Rows with more ids than this skip the vectorised writer/reader: their per-row pyroaring cost is negligible
#: next to their size, and pyroaring is faster on them (bitset and run containers, no per-id numpy passes).
_VECTOR_MAX_ROW = 1 << 16


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
    Meant for rows of <= ``_VECTOR_MAX_ROW`` ids (callers send bigger rows to pyroaring)."""
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
    vec = _binary_from_buffer(sizes, buf, large)
    fallback = np.flatnonzero(big)
    if not fallback.size:
        return vec
    # pyroaring writes the rows with a bitset-sized container (the vectorised writer left an empty-bitmap
    # placeholder for them)
    sb = np.searchsorted(row, np.arange(n + 1))
    extra = [_to_bytes(_bitmap_from_sorted(v[sb[i]:sb[i + 1]], False)) for i in fallback]
    rows = np.flatnonzero(~big)
    return _assemble(n, [(rows, vec.take(pa.array(rows))), (fallback, _binary_array(extra, large))], large)


def build_arrow(lists: pa.Array | pa.ChunkedArray, wide: bool = False, large: bool = False) -> pa.Array:
    """``dl_bitmap_build``: list<int> array -> binary array of serialised bitmaps (never NULL)."""
    arr = _array(lists)
    n = len(arr)
    if pa.types.is_null(arr.type):
        return _binary_array([EMPTY64 if wide else EMPTY32] * n, large)
    _, bounds, v = _list_parts(arr)
    _check_ids(v, wide)
    if wide:
        out = [_to_bytes(_bitmap_from_sorted(_sorted(v[bounds[i]:bounds[i + 1]]), True)) for i in range(n)]
        return _binary_array(out, large)
    lengths = np.diff(bounds)
    huge = lengths > _VECTOR_MAX_ROW
    if not huge.any():
        return _build_pairs32(n, np.repeat(np.arange(n, dtype=np.int64), lengths), v, large)
    # huge rows straight to pyroaring (no per-id numpy passes over them); the rest vectorised
    hrows, srows = np.flatnonzero(huge), np.flatnonzero(~huge)
    out = [_to_bytes(_bitmap_from_sorted(_sorted(v[bounds[i]:bounds[i + 1]]), False)) for i in hrows]
    parts = [(hrows, _binary_array(out, large))]
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
    arr = _array(lists)
    n = len(arr)
    empty = EMPTY64 if wide else EMPTY32
    if pa.types.is_null(arr.type) or n == 0:
        return _binary_array([empty] * n, large)
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
        parts.append((drows, _binary_array(out, large)))
    prows = np.flatnonzero(python)
    if prows.size:
        out = []
        for i in prows:
            items = [d[eoff[e]:eoff[e + 1]].tobytes() for e in range(loff[i], loff[i + 1]) if ev[e]]
            out.append(_to_bytes(_union_loaded([load(b) for b in items], wide)))
        parts.append((prows, _binary_array(out, large)))
    if not parts:
        return _binary_array([empty] * n, large)
    return _assemble(n, parts, large)


def _binary_values(arr: pa.Array) -> list:
    """Python bytes (or None) of a binary array."""
    return arr.to_pylist()


def _broadcast(x: pa.Array, y: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Repeat a length-1 argument (a constant, as an engine may pass it) to the other argument's length."""
    if len(x) == len(y):
        return x, y
    if len(x) == 1:
        return pa.concat_arrays([x] * len(y)) if len(y) else x.slice(0, 0), y
    if len(y) == 1:
        return x, pa.concat_arrays([y] * len(x)) if len(x) else y.slice(0, 0)
    raise ValueError(f"argument lengths differ: {len(x)} and {len(y)}")


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)


def count_arrow(x: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``dl_count``: set (list<int>) or bitmap (binary) array -> int64 (NULL lineage counts 0).

    Sets are trusted to be sets (sorted, distinct: what the rewriter builds); their NULL elements are ignored.
    """
    arr = _array(x)
    if _is_binary(arr.type):
        return pa.array(_cardinalities(*_binary_parts(arr))[0])
    if pa.types.is_null(arr.type):
        return pa.array(np.zeros(len(arr), np.int64))
    _, off, _ = _list_parts(arr)  # a set is distinct by contract: its non-null elements
    return pa.array(np.diff(off))


def contains_arrow(x: pa.Array | pa.ChunkedArray, rids: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``dl_contains``: NULL lineage -> false, NULL rid -> NULL."""
    arr, r = _broadcast(_array(x), _array(rids))
    rl = r.to_pylist()
    if _is_binary(arr.type):
        vals = _binary_values(arr)
        return pa.array([None if q is None else (False if b is None else _bm_contains(load(b), q))
                         for b, q in zip(vals, rl)], pa.bool_())
    if pa.types.is_null(arr.type):
        return pa.array([None if q is None else False for q in rl], pa.bool_())
    _, off, v = _list_parts(arr)
    return pa.array([None if q is None else bool((v[off[i]:off[i + 1]] == q).any()) for i, q in enumerate(rl)],
                    pa.bool_())


def to_list_arrow(x: pa.Array | pa.ChunkedArray, large: bool = False) -> pa.Array:
    """``dl_to_list``: set or bitmap array -> list<int64> sorted distinct (NULL lineage -> []).

    A set comes back as it is (trusted sorted and distinct) without its NULL elements."""
    arr = _array(x)
    n = len(arr)
    if _is_binary(arr.type):
        return _bitmaps_to_lists(arr, large)
    if pa.types.is_null(arr.type):
        return _list_array(np.zeros(n + 1, np.int64), np.zeros(0, np.int64), large)
    _, off, v = _list_parts(arr)
    return _list_array(off, v, large)


def _list_array(offsets: np.ndarray, values: np.ndarray, large: bool, mask: np.ndarray | None = None) -> pa.Array:
    vals = pa.array(values, pa.int64())
    m = None if mask is None or not mask.any() else pa.array(mask)
    if large:
        return pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), vals, mask=m)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32), pa.int32()), vals, mask=m)


def set_union_arrow(a: pa.Array | pa.ChunkedArray, b: pa.Array | pa.ChunkedArray, large: bool = False) -> pa.Array:
    """``dl_union`` of two set arrays: per row the sorted distinct union (NULL elements dropped); NULL only when
    both inputs are NULL. One sort of the batch's (row, id) pairs, no per-row Python (DuckDB's own
    list_distinct costs about 4 us per distinct element, seconds on a large lineage)."""
    x, y = _broadcast(_array(a), _array(b))
    n = len(x)
    rows, vals, valid = [], [], np.zeros(n, bool)
    for arr in (x, y):
        if pa.types.is_null(arr.type):
            continue
        ok, off, v = _list_parts(arr)
        valid |= ok
        rows.append(np.repeat(np.arange(n, dtype=np.int64), np.diff(off)))
        vals.append(v)
    row = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    v = np.concatenate(vals) if vals else np.zeros(0, np.int64)
    if v.size:
        order = np.lexsort((v, row))
        row, v = row[order], v[order]
        keep = np.ones(v.size, bool)
        keep[1:] = (row[1:] != row[:-1]) | (v[1:] != v[:-1])
        row, v = row[keep], v[keep]
    offsets = np.concatenate(([0], np.cumsum(np.bincount(row, minlength=n))))
    return _list_array(offsets, v, large, mask=~valid)


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
    return _list_array(offsets, vals, large)


def union_arrow(a: pa.Array | pa.ChunkedArray, b: pa.Array | pa.ChunkedArray, large: bool = False) -> pa.Array:
    """``dl_union`` of two bitmap arrays, or (Spark, where one name has one return type) of two arrays of any
    lineage representation: always returns bitmaps (64-bit if an input is 64-bit or an id needs it);
    NULL only when both inputs are NULL."""
    x, y = _broadcast(_array(a), _array(b))
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
    return _binary_array(out, large)


def _row_values(arr: pa.Array) -> list:
    if _is_binary(arr.type):
        return _binary_values(arr)
    if pa.types.is_null(arr.type):
        return [None] * len(arr)
    valid, off, v = _list_parts(arr)
    return [v[off[i]:off[i + 1]] if valid[i] else None for i in range(len(arr))]
