"""What the TPC-H runner measures on a lineage result: ids, bytes, agreement digests and the paper's Table 7.

Everything here works on *canonical rows*: for each output row, its values normalised for comparison and its
lineage as ``{table: sorted distinct numpy int64 array}`` with empty tables left out (forward lineage lists every
base table read, backward tracing may omit the ones a row does not touch; both mean "nothing from that table").

Definitions (paper 003, section 4.1 and Tables 7 and 9), over the output rows of one query:

- cardinality: the number of output rows;
- average lineage size: ids per output row, summed over the base tables;
- replication factor: on average, how many output rows a base tuple that appears in some lineage appears in
  (total ids / distinct ``(table, id)`` pairs);
- clustering factor: with each row's per-table lineage set sorted, the percentage of its ids whose distance to
  a neighbour (the previous or the next id) is < 3;
- bytes_raw: 4 bytes per id (the paper stored one 32-bit integer per id, Table 9).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections import Counter
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from dltrace.udafs import decode
from dltrace.udafs.bitmap import load as load_bitmap

Lineage = dict[str, np.ndarray]
CanonicalRow = tuple[tuple, Lineage]

BYTES_PER_RAW_ID = 4  # the paper's Table 9: one 32-bit integer per id
BYTES_PER_SET_ID = 8  # the set strategy stores BIGINT arrays: 8 bytes per id as the engine holds them


# -- decoding ----------------------------------------------------------------------------------------

def _column_arrays(col: pa.ChunkedArray | pa.Array) -> list[np.ndarray]:
    """One lineage column -> one sorted distinct int64 array per row (empty for NULL)."""
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    out: list[np.ndarray] = []
    for chunk in chunks:
        t = chunk.type
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            lengths = pc.fill_null(pc.list_value_length(chunk), 0).to_numpy(zero_copy_only=False).astype(np.int64)
            flat = pc.list_flatten(chunk)
            values = flat.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64) if len(flat) else \
                np.empty(0, dtype=np.int64)
            # list_flatten drops the values of NULL lists, whose lengths were filled with 0 above
            parts = np.split(values, np.cumsum(lengths)[:-1]) if len(lengths) else []
            for p in parts:
                p = p[p >= 0] if p.size and p.min() < 0 else p
                out.append(np.unique(p))
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
            out.extend(_bitmap_ids(v) for v in chunk.to_pylist())
        else:
            for v in chunk.to_pylist():
                out.append(np.asarray(decode(v), dtype=np.int64))
    return out


def _bitmap_ids(value: bytes | None) -> np.ndarray:
    """A serialised roaring bitmap -> sorted int64 ids, without a Python int per id."""
    if value is None:
        return np.empty(0, dtype=np.int64)
    try:
        bm = load_bitmap(value)
        dtype = np.uint64 if isinstance(bm, BitMap64) else np.uint32
        return np.frombuffer(bm.to_array(), dtype=dtype).astype(np.int64)
    except (AttributeError, TypeError):  # another bitmap layout: the generic decoder
        return np.asarray(decode(value), dtype=np.int64)


def canonical_rows(table: pa.Table, lineage_columns: dict[str, Any], rows: list[int] | None = None
                   ) -> list[CanonicalRow]:
    """``(normalised values, {table: ids})`` for each output row (or for ``rows`` only)."""
    n = table.num_rows
    idx = list(range(n)) if rows is None else [i for i in rows if 0 <= i < n]
    values = table.to_pylist()
    per_table = {t: _column_arrays(c) for t, c in lineage_columns.items()}
    out: list[CanonicalRow] = []
    for i in idx:
        lin = {t: arrs[i] for t, arrs in per_table.items() if i < len(arrs) and arrs[i].size}
        out.append((normalise_values(values[i].values()), lin))
    return out


def normalise_values(values) -> tuple:
    """Row values as comparable keys: floats and decimals to 9 significant digits (the same aggregate summed
    in another order differs in the last bits), dates as ISO text."""
    key = []
    for v in values:
        if isinstance(v, bool) or v is None:
            key.append(v)
        elif isinstance(v, (float, Decimal)):
            f = float(v)
            key.append(f if f != f else float(f"{f:.9g}"))
        elif isinstance(v, (_dt.date, _dt.datetime, _dt.time)):
            key.append(v.isoformat())
        else:
            key.append(v)
    return tuple(key)


# -- figures -----------------------------------------------------------------------------------------

def lineage_ids(rows: list[CanonicalRow]) -> int:
    return int(sum(a.size for _, lin in rows for a in lin.values()))


def bytes_stored(lineage_columns: dict[str, Any], rows: list[int] | None = None) -> int:
    """Serialised lineage bytes: the bitmaps' own bytes for binary columns; 8 bytes per stored id for arrays
    (the engine's BIGINT payload, duplicates included, without Arrow's offsets)."""
    total = 0
    for col in lineage_columns.values():
        if rows is not None:
            col = pa.chunked_array([col]) if isinstance(col, pa.Array) else col
            col = col.take(pa.array([i for i in rows if 0 <= i < len(col)], type=pa.int64()))
        t = col.type
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            s = pc.sum(pc.binary_length(col)).as_py()
            total += int(s or 0)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            total += BYTES_PER_SET_ID * int(pc.sum(pc.fill_null(pc.list_value_length(col), 0)).as_py() or 0)
        else:
            total += BYTES_PER_SET_ID * sum(a.size for a in _column_arrays(col))
    return total


def characteristics(rows: list[CanonicalRow]) -> dict[str, Any]:
    """The paper's Table 7 (plus Table 9's totals) for one query's output."""
    n = len(rows)
    total = 0
    near = 0
    per_table: dict[str, list[np.ndarray]] = {}
    for _, lin in rows:
        for t, a in lin.items():
            total += a.size
            per_table.setdefault(t, []).append(a)
            if a.size > 1:
                d = np.diff(a) < 3
                close = np.zeros(a.size, dtype=bool)
                close[1:] |= d
                close[:-1] |= d
                near += int(close.sum())
    distinct = 0
    tables = {}
    for t, arrs in sorted(per_table.items()):
        ids = int(sum(a.size for a in arrs))
        d = int(np.unique(np.concatenate(arrs)).size) if arrs else 0
        distinct += d
        tables[t] = {"lineage_ids": ids, "distinct_ids": d, "replication_factor": round(ids / d, 3) if d else None}
    return {
        "cardinality": n,
        "avg_lineage_size": round(total / n, 3) if n else 0.0,
        "replication_factor": round(total / distinct, 3) if distinct else None,
        "clustering_factor": round(100.0 * near / total, 2) if total else None,
        "total_lineage_size": total,
        "distinct_ids": distinct,
        "bytes_raw": BYTES_PER_RAW_ID * total,
        "tables": tables,
    }


# -- agreement ---------------------------------------------------------------------------------------

def row_digest(row: CanonicalRow, with_values: bool = True) -> str:
    values, lin = row
    h = hashlib.blake2b(repr(values if with_values else ()).encode(), digest_size=16)
    for t in sorted(lin):
        h.update(b"\x00" + t.encode() + b"\x00")
        h.update(np.ascontiguousarray(lin[t], dtype="<i8").tobytes())
    return h.hexdigest()


def digests(rows: list[CanonicalRow]) -> list[str]:
    return sorted(row_digest(r) for r in rows)


def lineage_digest(rows: list[CanonicalRow]) -> str:
    """One digest of a result's multiset of per-row lineage sets, row values left out: equal on two engines iff
    they give the same lineage (engines may round or type an aggregate's value differently)."""
    return result_digest([row_digest(r, with_values=False) for r in rows])


def result_digest(row_digests: list[str]) -> str:
    """One digest for a multiset of row digests."""
    h = hashlib.blake2b(digest_size=16)
    for d in sorted(row_digests):
        h.update(d.encode())
    return h.hexdigest()


def compare(rows: list[CanonicalRow], reference: list[str], complete: bool,
            reference_rows: list[CanonicalRow] | None = None) -> tuple[bool, str | None]:
    """Does this strategy's lineage equal the reference (set) lineage row by row?

    ``complete``: ``rows`` are all output rows (compare multisets) or only some (each must be in the reference).
    With ``reference_rows`` at hand, a disagreement says whether the reference lineage is a subset of this one
    on the differing rows (expected for backward tracing where output rows are duplicates or use negation).
    """
    ref = Counter(reference)
    mine = Counter(row_digest(r) for r in rows)
    if complete:
        equal = mine == ref
        if len(rows) != sum(ref.values()):
            return False, f"{len(rows)} output rows, set has {sum(ref.values())}"
    else:
        equal = all(ref[d] >= c for d, c in mine.items())
    if equal:
        return True, None
    differing = [r for r in rows if ref.get(row_digest(r), 0) == 0]
    what = f"lineage differs from set on {len(differing)} of {len(rows)} rows"
    if reference_rows is None or not differing:
        return False, what
    by_values: dict[tuple, list[Lineage]] = {}
    for values, lin in reference_rows:
        by_values.setdefault(values, []).append(lin)
    superset = sum(1 for values, lin in differing if any(_subset(f, lin) for f in by_values.get(values, [])))
    if superset == len(differing):
        return False, what + "; set's lineage is a subset on each of them"
    return False, what + f"; set's lineage is a subset on {superset} of them"


def _subset(small: Lineage, big: Lineage) -> bool:
    for t, a in small.items():
        b = big.get(t)
        if b is None or not np.isin(a, b, assume_unique=True).all():
            return False
    return True
