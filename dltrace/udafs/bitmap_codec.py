"""Vectorised writer and reader of many 32-bit roaring bitmaps in the portable format, with numpy.

No Python loop per row: the (row, id) pairs of a batch are split into roaring containers and written straight
into the portable format, byte-identical to ``BitMap(ids); run_optimize(); serialize()``; the portable headers are
parsed with numpy and containers expanded with numpy (array, run) or ``unpackbits`` (bitset). Used by
:mod:`dltrace.udafs.bitmap_arrow`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64

from dltrace.udafs.bitmap import _MAX_ARRAY

_COOKIE_NORUN = 12346
_COOKIE_RUN = 12347
_NO_OFFSET_THRESHOLD = 4


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
