"""Snapshot the lineage of the 22 TPC-H queries, to show that a change to the code leaves it exactly as it was.

    python benchmarks/lineage_snapshot.py --sf 0.01 --engines duckdb,spark --out before.json
    (change the code)
    python benchmarks/lineage_snapshot.py --sf 0.01 --engines duckdb,spark --out after.json --compare before.json

For every engine x query x strategy (set, bitmap, reverse-all) the file holds a digest of the rows and of
every row's lineage (row by row, in the query's output order; rows without a full ORDER BY are sorted with
their lineage first, so an engine's free choice of order does not count as a change).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys

import dltrace
from dltrace.tpch import QUERY_NUMBERS, query_sql

STRATEGIES = ("set", "bitmap", "reverse-all")


def digest(result) -> str:
    rows = []
    table = result.table
    for i in range(result.num_rows):
        values = tuple(repr(table.column(c)[i].as_py()) for c in range(table.num_columns))
        lineage = result.lineage(i)
        rows.append(repr((values, sorted((t, tuple(v)) for t, v in lineage.items()))))
    rows.sort()
    return hashlib.blake2b("\n".join(rows).encode(), digest_size=12).hexdigest()


def snapshot(engine: str, sf: float) -> dict[str, str]:
    options = {"master": "local[2]"} if engine == "spark" else {}
    s = dltrace.connect(engine, **options)
    s.load_tpch(sf)
    out = {}
    try:
        for q in QUERY_NUMBERS:
            sql = query_sql(q)
            for strategy in STRATEGIES:
                key = f"{engine}/Q{q}/{strategy}"
                try:
                    r = s.trace(sql) if strategy == "reverse-all" else s.run(sql, lineage=strategy)
                    out[key] = digest(r)
                except dltrace.DltraceError as e:
                    out[key] = f"error: {e}"
                print(key, out[key], file=sys.stderr, flush=True)
    finally:
        s.close()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sf", type=float, default=0.01)
    p.add_argument("--engines", default="duckdb,spark")
    p.add_argument("--out", required=True)
    p.add_argument("--compare", help="an earlier snapshot: report every key whose digest differs")
    args = p.parse_args()
    found: dict[str, str] = {}
    for engine in args.engines.split(","):
        found.update(snapshot(engine, args.sf))
    with open(args.out, "w") as f:
        json.dump(found, f, indent=1, sort_keys=True)
    if not args.compare:
        return 0
    with open(args.compare) as f:
        before = json.load(f)
    changed = sorted(k for k in found if before.get(k) != found[k])
    print(f"{len(found) - len(changed)} of {len(found)} unchanged")
    for k in changed:
        print(f"CHANGED {k}: {before.get(k)} -> {found[k]}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
