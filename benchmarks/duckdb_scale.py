"""Does capture cost grow with scale? DuckDB, TPC-H SF 1 and SF 10 side by side (slow: not CI).

Runs ``dltrace tpch`` once per scale factor (the same queries, original and bitmap, ``--storage`` memory (native
tables, the default) or parquet, one thread, median of ``--repeat`` after a warm-up) into ``--out/sf<N>-<storage>``,
then prints, per query, the bitmap/original ratio at each scale and the worker's peak memory running the bitmap
query and the original, and says whether any ratio grew or the memory passed the limit.

    python benchmarks/duckdb_scale.py --out /tmp/dltrace-scale            # SF 1 and SF 10, Q1 Q3 Q6 Q9 Q13 Q18 Q21
    python benchmarks/duckdb_scale.py --sf 0.1,1 --queries 1,6 --repeat 1  # a quick look
    python benchmarks/duckdb_scale.py --storage parquet --out /tmp/dltrace-scale-parquet

The peak is the worker's whole memory while it runs a query, the tables it holds included: with memory storage
DuckDB's SF 10 tables alone take about 13 GiB, so the parquet run is the one that shows what a query and its
capture need beside the data.

Generating SF 10 (tpchgen-cli, into the cache folder) takes a few minutes and about 4 GB of disk.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

QUERIES = "1,3,6,9,13,18,21"
LIMIT_GIB = 12.0


def run(sf: float, args: argparse.Namespace) -> dict[int, dict]:
    out = Path(args.out) / f"sf{sf:g}-{args.storage}"
    cmd = [sys.executable, "-m", "dltrace.cli", "tpch", "--sf", f"{sf:g}", "--engines", "duckdb", "--storage", args.storage,
           "--threads", str(args.threads), "--strategies", "original,bitmap", "--queries", args.queries,
           "--repeat", str(args.repeat), "--warmup", "1", "--timeout", str(args.timeout), "--out", str(out)]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    records = json.loads((out / "results.json").read_text())
    records = records["records"] if isinstance(records, dict) else records
    by_query: dict[int, dict] = {}
    for r in records:
        by_query.setdefault(int(r["query"]), {})[r["strategy"]] = r
    return by_query


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sf", default="1,10", help="comma-separated scale factors, smallest first (default 1,10)")
    p.add_argument("--queries", default=QUERIES, help=f"TPC-H queries (default {QUERIES})")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--storage", choices=("memory", "parquet"), default="memory")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--out", default="dltrace-report-scale")  # (.gitignore: dltrace-report*/)
    args = p.parse_args()
    factors = [float(x) for x in args.sf.split(",")]
    results = {sf: run(sf, args) for sf in factors}
    head = "query | " + " | ".join(f"SF {sf:g} ratio | SF {sf:g} peak GiB (original)" for sf in factors)
    print("\n" + head + "\n" + "|".join(["---"] * (1 + 2 * len(factors))))
    grew, heavy = [], []
    for q in sorted(results[factors[0]]):
        cells, ratios = [], []
        for sf in factors:
            bitmap = results[sf].get(q, {}).get("bitmap", {})
            ratio, peak = bitmap.get("ratio"), bitmap.get("peak_rss_bytes")
            original_peak = results[sf].get(q, {}).get("original", {}).get("peak_rss_bytes")
            ratios.append(ratio)
            gib = peak / 2**30 if peak else None
            if gib and gib > LIMIT_GIB:
                heavy.append((q, sf, gib))
            peaks = f"{gib:.1f}" if gib else "-"
            if original_peak:
                peaks += f" ({original_peak / 2**30:.1f})"
            cells += [f"{ratio:.2f}x" if ratio else bitmap.get("status", "-"), peaks]
        if all(ratios) and ratios[-1] > ratios[0] * 1.1:  # 10%: run-to-run noise on a shared machine
            grew.append(q)
        print(f"Q{q} | " + " | ".join(cells))
    print(f"\nratio grew by more than 10% from SF {factors[0]:g} to SF {factors[-1]:g}: "
          f"{', '.join(f'Q{q}' for q in grew) or 'none'}")
    print(f"peak memory above {LIMIT_GIB:g} GiB: {', '.join(f'Q{q} SF {sf:g} ({g:.1f})' for q, sf, g in heavy) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
