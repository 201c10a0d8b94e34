"""Bytes per lineage id, in memory and saved: TPC-H on DuckDB, bitmap strategy, every query.

In memory a row's lineage is a serialised portable roaring bitmap (what ``dltrace tpch`` reports as
``bytes_stored``: the bitmaps' own bytes); ``result.save(folder)`` writes those columns to parquet with zstd, which
squeezes the per-bitmap headers and the repeated small bitmaps of many-row results. This prints both per query
(ids: distinct (row, table, id) triples, the shared lineage counted once per row that has it) and their medians.

It also prints the share of the stored ids that sit in array containers. The bitmaps are ``run_optimize()``-d, so
each 65,536-id chunk already takes the smallest of roaring's three containers: an array (2 bytes per id) is chosen
where the chunk holds fewer than 4,096 ids and they form few runs. Those ids cost 2 bytes each in the portable format
whatever writes them, so a query whose ids sit mostly in arrays cannot go below about 2 bytes per id in it.

    python benchmarks/lineage_space.py --sf 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import pyarrow.compute as pc
from pyroaring import BitMap64

import dltrace
from dltrace.tpch.queries import query_sql
from dltrace.udafs.bitmap import load as load_bitmap


def _bitmap_bytes(columns: dict) -> int:
    return sum(int(pc.sum(pc.binary_length(col)).as_py() or 0) for col in columns.values())


def _ids_in_arrays(columns: dict) -> tuple[int, int]:
    """(ids in array containers, ids) over the 32-bit bitmaps of the columns (TPC-H's tables all have fewer than
    2^32 rows; a 64-bit bitmap is left out of both counts)."""
    in_arrays = total = 0
    for col in columns.values():
        for blob in col.to_pylist():
            bitmap = None if blob is None else load_bitmap(blob)
            if bitmap is None or isinstance(bitmap, BitMap64):
                continue
            stats = bitmap.get_statistics()
            in_arrays += stats["n_values_array_containers"]
            total += stats["cardinality"]
    return in_arrays, total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--queries", default="1-22")
    args = parser.parse_args()
    lo, _, hi = args.queries.partition("-")
    queries = range(int(lo), int(hi or lo) + 1)
    session = dltrace.connect("duckdb")
    session.load_tpch(args.sf, storage="memory")
    memory, saved = [], []
    print(f"{'query':>5} {'ids':>12} {'memory B/id':>12} {'saved B/id':>11} {'in arrays':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in queries:
            result = session.run(query_sql(n, "duckdb"), lineage="bitmap")
            ids = sum(len(ids) for i in range(result.num_rows) for ids in result.lineage(i).values())
            if not ids:
                print(f"Q{n:<4} {0:>12} {'-':>12} {'-':>11} {'-':>10}")
                continue
            in_memory = _bitmap_bytes(result.lineage_columns) + _bitmap_bytes(result.shared_lineage)
            folder = Path(tmp) / f"q{n}"
            result.save(folder)
            files = json.loads((folder / "manifest.json").read_text())["files"]
            on_disk = sum(f["bytes"] for name, f in files.items() if name != "rows.parquet")
            memory.append(in_memory / ids)
            saved.append(on_disk / ids)
            arrays, stored = map(sum, zip(_ids_in_arrays(result.lineage_columns),
                                          _ids_in_arrays(result.shared_lineage)))
            share = f"{100 * arrays / stored:.0f}%" if stored else "-"
            print(f"Q{n:<4} {ids:>12,} {in_memory / ids:>12.2f} {on_disk / ids:>11.2f} {share:>10}", flush=True)
    print(f"median over {len(memory)} queries with lineage: memory {statistics.median(memory):.2f} B/id, "
          f"saved {statistics.median(saved):.2f} B/id")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
