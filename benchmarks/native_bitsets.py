"""DuckDB's native bitset aggregate against the id list dltrace builds, per aggregation, at TPC-H SF 1 (memory, one
thread or ``--threads``): what the capture-cost issue asked to measure before choosing a representation per group
(``dltrace/rewriter/passes/dense_ids.py`` takes the bit strings for few groups of a large table).

Three aggregates over lineitem's row ids, each added to the same query (the time the query takes without them is
the baseline), interleaved, median of ``--repeat`` runs:

- ``LIST(dl_rid)``: what the bitmap strategy computes inside a query (built into roaring bitmaps when read);
- ``bitstring_agg(dl_rid, min, max)``: one bit per possible id, set for the ids present (Arrow receives it as
  binary, as the rewrite reads it; an earlier version of this benchmark cast it to BLOB, a conversion the rewrite
  does not make);
- ``MIN(dl_rid)``: the floor of any aggregate that reads the ids.

over groupings from few large groups (Q1's four) to many small ones (lineitem per part: 200,000 groups of ~30
ids, where the bitstrings would hold 150 GB and are not run), and prints each one's extra time, that time per id
aggregated (to compare scale factors: ``--sf 10`` shows what grows faster than the rows) and the bytes the result
holds per group. A bitstring's size is the id range over 8 whatever the group holds, so its total is groups x
range / 8: the measure says when that is cheaper, and the group count (which the rewrite cannot know: DuckDB's own
estimate of Q9's 175 groups is 55,208) says when it would not fit.

    python benchmarks/native_bitsets.py --sf 1 [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import dltrace

GROUPINGS = {
    "Q1: 4 groups": ("l_returnflag, l_linestatus", "l_shipdate <= DATE '1998-09-02'"),
    "per ship month: ~84 groups": ("date_trunc('month', l_shipdate)", "TRUE"),
    "per part: ~200,000 groups": ("l_partkey", "TRUE"),
}
MAX_BITSTRING_BYTES = 2 * 2**30  # (a grouping whose bitstrings would hold more is not run: its size is printed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    session = dltrace.connect("duckdb", threads=args.threads)
    session.load_tpch(args.sf, storage="memory")
    con = session.engine.con
    top = con.sql('SELECT max(dl_rid) FROM "_dl_rows_lineitem"').fetchall()[0][0]
    aggregates = {"none": "", "LIST": ", LIST(dl_rid) AS ids", "bitstring_agg":
                  f", bitstring_agg(dl_rid, 0, {top}) AS ids", "MIN": ", MIN(dl_rid) AS ids"}
    for title, (keys, where) in GROUPINGS.items():
        queries = {name: f'SELECT {keys}, count(*) AS n, sum(l_extendedprice) {agg} FROM "_dl_rows_lineitem" '
                         f'WHERE {where} GROUP BY {keys}' for name, agg in aggregates.items()}
        groups, ids = con.sql(f"SELECT count(*), sum(n) FROM ({queries['none']})").fetchall()[0]
        if groups * (top + 1) / 8 > MAX_BITSTRING_BYTES:
            print(f"{title}: bitstring_agg not run, its {groups:,} bitsets would hold "
                  f"{groups * (top + 1) / 8 / 2**30:,.0f} GiB")
            del queries["bitstring_agg"]
        times: dict[str, list[float]] = {name: [] for name in queries}
        sizes = {}
        for name, sql in queries.items():  # (a warm-up, and the result's size)
            table = con.sql(sql).to_arrow_table()
            sizes[name] = (table.column("ids").nbytes / table.num_rows if "ids" in table.column_names else 0,
                           table.num_rows)
        for _ in range(args.repeat):
            for name, sql in queries.items():
                start = time.perf_counter()
                con.sql(sql).to_arrow_table()
                times[name].append(time.perf_counter() - start)
        base = statistics.median(times["none"])
        print(f"{title} (the query alone: {base * 1000:.0f} ms, {sizes['none'][1]:,} groups, {ids:,} ids)")
        for name in [n for n in ("LIST", "bitstring_agg", "MIN") if n in queries]:
            extra = statistics.median(times[name]) - base
            print(f"  {name:14s} +{extra * 1000:6.0f} ms  {extra * 1e9 / max(ids, 1):5.1f} ns per id  "
                  f"{sizes[name][0]:12,.0f} bytes per group")
    session.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
