"""Arrow plumbing the lineage kernels share: list arrays as (valid, offsets, values) numpy parts and back,
binary arrays from bytes or one buffer, a length-1 argument broadcast, the distinct (row, id) pairs of a batch.
Used by the bitmap kernels (``bitmap_arrow.py``) and the set kernels (``sets_arrow.py``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def as_array(x: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(x, pa.ChunkedArray):
        if x.num_chunks == 1:
            return x.chunk(0)
        if x.num_chunks == 0:
            return pa.array([], type=x.type)
        return x.combine_chunks()
    return x


def list_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def list_array(offsets: np.ndarray, values: np.ndarray, large: bool, mask: np.ndarray | None = None) -> pa.Array:
    vals = pa.array(values, pa.int64())
    m = None if mask is None or not mask.any() else pa.array(mask)
    if large:
        return pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), vals, mask=m)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32), pa.int32()), vals, mask=m)


def binary_array(chunks: list[bytes | None], large: bool = False) -> pa.Array:
    return pa.array(chunks, type=pa.large_binary() if large else pa.binary())


def binary_from_buffer(sizes: np.ndarray, buf: np.ndarray, large: bool) -> pa.Array:
    offsets = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
    if large:
        typ, off = pa.large_binary(), offsets.astype(np.int64)
    else:
        if offsets[-1] > np.iinfo(np.int32).max:
            return binary_from_buffer(sizes, buf, True).cast(pa.binary())  # raises if too big
        typ, off = pa.binary(), offsets.astype(np.int32)
    return pa.Array.from_buffers(typ, len(sizes), [None, pa.py_buffer(off), pa.py_buffer(buf)])


# ---------------------------------------------------------------------------------------------------------------
# vectorised functions over Arrow arrays (one call per engine batch)
# ---------------------------------------------------------------------------------------------------------------


#: Rows with more ids than this skip the vectorised writer/reader: their per-row pyroaring cost is negligible
#: next to their size, and pyroaring is faster on them (bitset and run containers, no per-id numpy passes).


def broadcast(x: pa.Array, y: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Repeat a length-1 argument (a constant, as an engine may pass it) to the other argument's length."""
    if len(x) == len(y):
        return x, y
    if len(x) == 1:
        return pa.concat_arrays([x] * len(y)) if len(y) else x.slice(0, 0), y
    if len(y) == 1:
        return x, pa.concat_arrays([y] * len(x)) if len(x) else y.slice(0, 0)
    raise ValueError(f"argument lengths differ: {len(x)} and {len(y)}")


def is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)


def distinct_pairs(row: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (row, id) pairs, sorted by row then id: one sort of the batch, no per-row Python."""
    if not v.size:
        return row, v
    order = np.lexsort((v, row))
    row, v = row[order], v[order]
    keep = np.ones(v.size, bool)
    keep[1:] = (row[1:] != row[:-1]) | (v[1:] != v[:-1])
    return row[keep], v[keep]
