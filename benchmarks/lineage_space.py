"""Bytes per lineage id, in memory and saved: TPC-H on DuckDB, bitmap strategy, every query.

In memory a row's lineage is a serialised portable roaring bitmap (what ``dltrace tpch`` reports as
``bytes_stored``: the bitmaps' own bytes); ``result.save(folder)`` writes those columns to parquet with zstd, which
squeezes the per-bitmap headers and the repeated small bitmaps of many-row results. This prints both per query
(ids: distinct (row, table, id) triples, the shared lineage counted once per row that has it) and their medians.

    python benchmarks/lineage_space.py --sf 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import pyarrow.compute as pc

import dltrace
from dltrace.tpch.queries import query_sql


def _bitmap_bytes(columns: dict) -> int:
    return sum(int(pc.sum(pc.binary_length(col)).as_py() or 0) for col in columns.values())


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
    print(f"{'query':>5} {'ids':>12} {'memory B/id':>12} {'saved B/id':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in queries:
            result = session.run(query_sql(n, "duckdb"), lineage="bitmap")
            ids = sum(len(ids) for i in range(result.num_rows) for ids in result.lineage(i).values())
            if not ids:
                print(f"Q{n:<4} {0:>12} {'-':>12} {'-':>11}")
                continue
            in_memory = _bitmap_bytes(result.lineage_columns) + _bitmap_bytes(result.shared_lineage)
            folder = Path(tmp) / f"q{n}"
            result.save(folder)
            files = json.loads((folder / "manifest.json").read_text())["files"]
            on_disk = sum(f["bytes"] for name, f in files.items() if name != "rows.parquet")
            memory.append(in_memory / ids)
            saved.append(on_disk / ids)
            print(f"Q{n:<4} {ids:>12,} {in_memory / ids:>12.2f} {on_disk / ids:>11.2f}", flush=True)
    print(f"median over {len(memory)} queries with lineage: memory {statistics.median(memory):.2f} B/id, "
          f"saved {statistics.median(saved):.2f} B/id")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
