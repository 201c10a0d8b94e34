"""From traced pairs to lineage columns: one sorted distinct list of rids per output row and base table.

Tracing queries return ``(output row, rid)`` pairs per base table; a child whose lineage is the same for every
row that reads it (a global aggregate, a subquery taken whole) is traced once and attached to those rows as a
*constant* part, so the engine never builds the product of rows x constant lineage.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa

_EMPTY = np.empty(0, dtype=np.int64)


class Collector:
    """Lineage gathered while tracing: pairs and constant parts per base table."""

    def __init__(self) -> None:
        self.pairs: dict[str, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
        self.consts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)

    def add_pairs(self, table: str, tids: np.ndarray, rids: np.ndarray) -> None:
        if len(tids):
            self.pairs[table].append((np.asarray(tids, dtype=np.int64), np.asarray(rids, dtype=np.int64)))

    def add_const(self, tids: np.ndarray, lineage: dict[str, np.ndarray]) -> None:
        if not len(tids):
            return
        tids = _distinct(np.asarray(tids, dtype=np.int64))
        for table, rids in lineage.items():
            if len(rids):
                self.consts[table].append((tids, rids))

    def flatten(self) -> dict[str, np.ndarray]:
        """Everything gathered, whatever row it was for (the lineage of a whole relation)."""
        out = {}
        for table in set(self.pairs) | set(self.consts):
            parts = [r for _, r in self.pairs[table]] + [r for _, r in self.consts[table]]
            out[table] = _distinct(np.concatenate(parts)) if parts else _EMPTY
        return out

    def columns(self, n: int, traced: np.ndarray | None, tables: list[str]) -> dict[str, pa.ChunkedArray]:
        """``{table: list<int64> per output row}``; rows not in ``traced`` are NULL (None: all traced)."""
        names = list(dict.fromkeys([*tables, *self.pairs, *self.consts]))
        mask = None
        if traced is not None:
            mask = pa.array(~np.isin(np.arange(n), traced))
        return {t: pa.chunked_array([self._column(t, n, mask)]) for t in names}

    def _column(self, table: str, n: int, mask: pa.Array | None) -> pa.Array:
        tids, rids = _sorted_pairs(self.pairs.get(table, []))
        offsets = np.searchsorted(tids, np.arange(n + 1)).astype(np.int64)
        consts = self.consts.get(table, [])
        if consts:
            rows = [rids[offsets[i]: offsets[i + 1]] for i in range(n)]
            for ctids, crids in consts:
                for i in ctids[(ctids >= 0) & (ctids < n)]:
                    rows[i] = _distinct(np.concatenate([rows[i], crids]))
            rids = np.concatenate(rows) if rows else _EMPTY
            offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
        values = pa.array(rids, type=pa.int64())
        if len(rids) < 2**31 - 1:
            return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), values, mask=mask)
        return pa.LargeListArray.from_arrays(pa.array(offsets, type=pa.int64()), values, mask=mask)


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values."""
    values = np.sort(values)
    if len(values) > 1:
        values = values[np.concatenate([[True], values[1:] != values[:-1]])]
    return values


def _sorted_pairs(chunks: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct pairs, sorted by (tid, rid) (a plain sort: numpy's hash-based unique is far slower)."""
    if not chunks:
        return _EMPTY, _EMPTY
    tids = np.concatenate([c[0] for c in chunks])
    rids = np.concatenate([c[1] for c in chunks])
    width = int(rids.max()) + 1
    if int(tids.max()) < (2**62) // max(width, 1):
        keys = tids * width + rids
        keys.sort()
        if len(keys) > 1:
            keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
        return keys // width, keys % width
    order = np.lexsort((rids, tids))
    tids, rids = tids[order], rids[order]
    keep = np.ones(len(tids), dtype=bool)
    keep[1:] = (tids[1:] != tids[:-1]) | (rids[1:] != rids[:-1])
    return tids[keep], rids[keep]
