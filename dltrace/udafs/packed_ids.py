"""Row ids of one table read out of packed lists (``dltrace/rewriter/passes/pack_ids.py``).

A packed list holds, per input row of a group, one BIGINT whose bits ``[shift, shift + bits)`` are a table's
row id (plus ``offset``: 1 where a NULL id is stored as 0). The table's own list is those fields, less the
NULLs, in the same order: what ``LIST(<its id>)`` returns once its readers drop NULL ids.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dltrace.udafs.arrow_lists import list_array, list_parts


def unpack_ids(packed: pa.ChunkedArray | pa.Array, shift: int, bits: int, offset: int) -> pa.ChunkedArray:
    """The id lists (list<int64>) of field ``(shift, bits, offset)`` of each row's packed list (a NULL row stays
    NULL: a group of no rows)."""
    chunks = packed.chunks if isinstance(packed, pa.ChunkedArray) else [packed]
    return pa.chunked_array([_unpack(c, shift, bits, offset) for c in chunks], type=pa.list_(pa.int64()))


def _unpack(arr: pa.Array, shift: int, bits: int, offset: int) -> pa.Array:
    if pa.types.is_null(arr.type) or len(arr) == 0:
        return pa.array([None] * len(arr), pa.list_(pa.int64()))
    valid, offsets, values = list_parts(arr)
    ids = ((values >> shift) & ((1 << bits) - 1)) - offset
    keep = ids >= 0
    kept = np.concatenate(([0], np.cumsum(keep, dtype=np.int64)))
    return list_array(kept[offsets], ids[keep], False, None if valid.all() else ~valid)
