"""Roaring-bitmap lineage sets: the pure pyroaring/numpy core shared by both engines (no engine imports).

One value at a time; the vectorised functions over Arrow arrays (one call per engine batch) are
:mod:`dltrace.udafs.bitmap_arrow`.

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
"""

from __future__ import annotations

from array import array
from typing import Any, Iterable

import numpy as np
from pyroaring import BitMap, BitMap64

MAX_ID32 = (1 << 32) - 1
#: Largest id a 64-bit bitmap may hold so that its first two bytes can never look like a 32-bit cookie.
MAX_ID64 = (12345 << 32) - 1

_MAX_ARRAY = 4096  # roaring's array-container limit

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
    """``v`` sorted, duplicates maybe dropped (engines often hand over already sorted lists: checking is cheaper
    than sorting; ids dense in their range -- a big group's, from several threads -- are found by a mask over the
    range, several times faster than a sort)."""
    if v.size < 2 or bool((v[1:] >= v[:-1]).all()):
        return v
    if v.size > _MAX_ARRAY:
        lo, hi = int(v.min()), int(v.max())
        if hi - lo < 8 * v.size:
            mask = np.zeros(hi - lo + 1, bool)
            mask[v - lo] = True
            return np.flatnonzero(mask).astype(np.int64) + lo
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


def _bm_contains(bm: BitMap | BitMap64, rid: int) -> bool:
    """Whether ``rid`` is in ``bm``: False for an id outside the bitmap's range (pyroaring would refuse it)."""
    limit = MAX_ID64 if isinstance(bm, BitMap64) else MAX_ID32
    return 0 <= rid <= limit and rid in bm
