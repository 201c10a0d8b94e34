"""Lineage sets returned as DuckDB bit strings (``dltrace/rewriter/passes/dense_ids.py``), read as bitmaps.

``bitstring_agg(x, 0, rows - 1)`` returns, per group, a ``BIT`` value of ``rows`` bits with bit ``i`` set when
id ``i`` is in the group. Arrow receives it as binary: one byte holding the number ``p`` of padding bits, then
the bits, most significant first in each byte, the first ``p`` of them padding. A group of no rows gives NULL.

A bit string is already most of a roaring bitmap: each 65,536 ids of it, bit-reversed within its bytes, is a
roaring bitset container (1,024 little-endian 64-bit words). So the portable bytes are written from it directly --
a bitset container where more than 4,096 bits are set, an array container of the set bits' low 16 bits elsewhere
-- and pyroaring reads them, ``run_optimize()``-s and writes them again: the canonical bytes, the same as
``encode_bitmaps`` gives for the ids as a list (tests check this), without a Python int or a numpy element per id
for the dense containers.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from dltrace.udafs import encode_bitmaps
from dltrace.udafs.bitmap import _MAX_ARRAY, EMPTY32
from dltrace.udafs.bitmap_codec import _COOKIE_NORUN

_REVERSED = np.array([int(f"{b:08b}"[::-1], 2) for b in range(256)], np.uint8)  # bit order within a byte reversed
_POPCOUNT = np.array([bin(b).count("1") for b in range(256)], np.uint8)
_CONTAINER_BYTES = 8192  # 65,536 bits


def bitmaps_of_bitstrings(strings: pa.ChunkedArray | pa.Array, rows: int) -> pa.ChunkedArray:
    """The portable roaring bitmaps (32-bit) of the ids each bit string of ``rows`` bits holds: byte for byte what
    ``encode_bitmaps`` gives for the same ids as lists (a NULL string is the empty set)."""
    chunks = strings.chunks if isinstance(strings, pa.ChunkedArray) else [strings]
    out = [pa.array([EMPTY32 if v is None else bitmap_of_bitstring(v, rows) for v in c.to_pylist()], pa.binary())
           for c in chunks]  # (a Python object per group: the groups are few, each string large)
    return pa.chunked_array(out, type=pa.binary())


def bitmap_of_bitstring(value: bytes, rows: int) -> bytes:
    """The portable roaring bitmap of the set bits of one bit string of ``rows`` bits."""
    padding = value[0]
    data = np.frombuffer(value, np.uint8, offset=1)
    if padding > 7 or 8 * data.size - padding != rows:
        raise ValueError(f"a bit string of {8 * data.size - padding} bits where {rows} were expected")
    data = data.copy()
    if data.size:
        data[0] &= 0xFF >> padding  # (DuckDB sets the padding bits)
    if np.count_nonzero(data) * 4 < data.size:  # few ids: read out of the nonzero bytes alone, as a list's
        nonzero = np.flatnonzero(data)
        at = np.flatnonzero(np.unpackbits(data[nonzero]))  # (ascending: bit s of the string is id s - p)
        ids = nonzero[at >> 3] * 8 + (at & 7) - padding
        return encode_bitmaps(pa.array([ids.astype(np.int64)], pa.list_(pa.int64()))).chunk(0)[0].as_py()
    reversed_bits = _REVERSED[data]  # bit s of the string (after the padding: id s - padding) at bit s % 8
    if padding:  # id i at bit i % 8 of byte i // 8
        wide = reversed_bits.astype(np.uint16)
        following = np.append(wide[1:], np.uint16(0))
        aligned = ((wide >> padding) | (following << (8 - padding))).astype(np.uint8)
    else:
        aligned = reversed_bits
    containers = -(-aligned.size // _CONTAINER_BYTES)
    bits = np.zeros(containers * _CONTAINER_BYTES, np.uint8)
    bits[:aligned.size] = aligned
    bits = bits.reshape(containers, _CONTAINER_BYTES)
    cards = _cardinalities(bits)
    keys = np.flatnonzero(cards)
    if not keys.size:
        return EMPTY32
    # the array containers' values at once, from their nonzero bytes alone (a sparse group's string is mostly 0)
    sparse = keys[cards[keys] <= _MAX_ARRAY]
    low = np.empty(0, "<u2")
    if sparse.size:
        flat = bits[sparse].reshape(-1)
        nonzero = np.flatnonzero(flat)
        at = np.flatnonzero(np.unpackbits(flat[nonzero], bitorder="little"))  # (ascending: id i at bit i % 8)
        low = ((nonzero[at >> 3] * 8 + (at & 7)) % 65536).astype("<u2")
    ends = dict(zip(sparse.tolist(), np.cumsum(cards[sparse]).tolist()))
    parts, sizes = [], []
    for key in keys.tolist():
        if key in ends:
            end = ends[key]
            part = low[end - cards[key]:end].tobytes()
        else:
            part = bits[key].tobytes()
        parts.append(part)
        sizes.append(len(part))
    n = keys.size
    header = np.empty(n, dtype=[("key", "<u2"), ("card", "<u2")])
    header["key"], header["card"] = keys, cards[keys] - 1
    start = 8 + 8 * n  # cookie, count, (key, cardinality - 1) and an offset per container
    offsets = (start + np.concatenate(([0], np.cumsum(sizes)[:-1]))).astype("<u4")
    blob = b"".join([np.array([_COOKIE_NORUN, n], "<u4").tobytes(), header.tobytes(), offsets.tobytes(), *parts])
    bm = BitMap.deserialize(blob)
    bm.run_optimize()
    return bm.serialize()


def _cardinalities(bits: np.ndarray) -> np.ndarray:
    """The set bits of each row of ``bits`` (containers x 8192 bytes)."""
    if hasattr(np, "bitwise_count"):  # numpy 2
        return np.bitwise_count(bits.view(np.uint64)).sum(axis=1, dtype=np.int64)
    return _POPCOUNT[bits].sum(axis=1, dtype=np.int64)
