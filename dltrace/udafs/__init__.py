"""Lineage values without an engine: the portable roaring-bitmap codec and its vectorised Arrow helpers.

``decode(value)`` turns one lineage value as it comes back from any engine into a sorted list of row ids. The
bitmap format (portable roaring, 32- or 64-bit, told apart by the first two bytes) is described in
:mod:`dltrace.udafs.bitmap`; :mod:`dltrace.udafs.bitmap_arrow` holds the batch functions each engine's dl_*
functions call (registered by :func:`dltrace.engines.install_functions_on`). ``encode_bitmaps`` is the driver's
side of an engine that returns bitmap lineage as sets of ids (Spark).
"""

from __future__ import annotations

import pyarrow as pa

from dltrace.udafs.bitmap import decode
from dltrace.udafs.bitmap_arrow import build_arrow


def encode_bitmaps(sets: pa.Array | pa.ChunkedArray, wide: bool = False) -> pa.ChunkedArray:
    """A column of lineage sets (list<int64>, NULL = empty) as portable roaring bitmaps, 64-bit when ``wide``:
    byte for byte what an engine's ``dl_bitmap_build`` writes for the same ids."""
    chunks = sets.chunks if isinstance(sets, pa.ChunkedArray) else [sets]
    return pa.chunked_array([build_arrow(c, wide=wide) for c in chunks], type=pa.binary())


__all__ = ["decode", "encode_bitmaps"]
