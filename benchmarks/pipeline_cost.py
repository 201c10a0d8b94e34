"""What end-to-end lineage costs for a whole pipeline: the example (examples/tpch_pipeline) run with lineage
against the same pipeline run without it, on one session.

    python benchmarks/pipeline_cost.py --sf 1 --repeat 3

Each run executes every step and registers its result as the next step's source (the plain run registers the
rows only; a lineage run, the rows with their lineage columns). One warm-up run per variant, then ``--repeat``
runs with the variants interleaved (plain, set, bitmap, plain, ...) so the machine's load hits all alike; the
median wall time of each and its ratio to the plain run are printed (``--json`` for a machine-readable line).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import dltrace

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tpch_pipeline"
VARIANTS = {"plain": None, "set": "set", "bitmap": "bitmap"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--engine", default="duckdb")
    ap.add_argument("--path", default=str(EXAMPLE), help="the pipeline (default: the example)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    s = dltrace.connect(args.engine)
    s.load_tpch(args.sf)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    rows = {}
    try:
        for k in range(args.repeat + 1):
            for name, lineage in VARIANTS.items():
                t = time.perf_counter()
                p = dltrace.pipeline(args.path, session=s, lineage=lineage)
                took = time.perf_counter() - t
                rows[name] = {d: r.num_rows for d, r in p.datasets.items()}
                if k:  # the first round warms up
                    times[name].append(took)
    finally:
        s.close()
    assert rows["plain"] == rows["set"] == rows["bitmap"], rows
    base = statistics.median(times["plain"])
    out = {"sf": args.sf, "engine": args.engine, "repeat": args.repeat, "rows": rows["plain"],
           "median_s": {v: round(statistics.median(ts), 3) for v, ts in times.items()},
           "ratio": {v: round(statistics.median(ts) / base, 2) for v, ts in times.items()}}
    if args.json:
        print(json.dumps(out))
        return
    print(f"pipeline {Path(args.path).name} on {args.engine}, TPC-H SF {args.sf:g}, median of {args.repeat}:")
    for v in VARIANTS:
        print(f"  {v:<7} {out['median_s'][v]:8.3f} s  {out['ratio'][v]:5.2f}x")
    print("  datasets: " + ", ".join(f"{d} {n:,} rows" for d, n in rows["plain"].items()))


if __name__ == "__main__":
    main()
