"""Helpers to compare lineage results across engines and strategies."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal


def _norm(v):
    if isinstance(v, (float, Decimal)):
        return float(f"{float(v):.6g}")
    return v


def keyed_rows(result) -> Counter:
    """Multiset of (row values, lineage) pairs: ties in ORDER BY may come back in any order."""
    out = Counter()
    for i, row in enumerate(result.table.to_pylist()):
        lin = result.lineage(i)
        out[(tuple(_norm(v) for v in row.values()), tuple(sorted((t, tuple(ids)) for t, ids in lin.items())))] += 1
    return out


def sample_rows(n: int, k: int = 3) -> list[int]:
    if n <= k:
        return list(range(n))
    return sorted({0, n // 2, n - 1})
