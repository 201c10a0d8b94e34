"""Both exact rewrites of an aggregate over a grouped derived table, on DuckDB at TPC-H SF 1 (memory, one thread):
a list of ids per inner group (the default) and the outer groups' rows found again through the inner keys
(``rules/nested_lineage.py``), for Q13 (150,000 inner groups), a global aggregate over the same groups and a
Q9-like grouping of 1.5M rows into 175 groups; prints which one the engine's estimate picks and each one's time
over the original query (median of 5).

    python benchmarks/nested_groups.py --sf 1
"""

from __future__ import annotations

import argparse
import statistics
import time

import dltrace
from dltrace.rewriter.rules import nested_lineage
from dltrace.tpch.queries import query_sql

FEW_GROUPS = """SELECT x.nation, sum(x.profit) AS p FROM (
  SELECT n_name AS nation, extract(year FROM o_orderdate) AS o_year, sum(l_extendedprice) AS profit
  FROM lineitem, orders, supplier, nation
  WHERE l_orderkey = o_orderkey AND l_suppkey = s_suppkey AND s_nationkey = n_nationkey
    AND l_shipdate < DATE '1993-01-01'
  GROUP BY 1, 2) AS x
GROUP BY x.nation"""
GLOBAL = """SELECT count(*) AS customers, avg(c_count) AS mean FROM (
  SELECT c_custkey, count(o_orderkey) AS c_count
  FROM customer LEFT OUTER JOIN orders ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%'
  GROUP BY c_custkey) AS c_orders"""


def _median(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    session = dltrace.connect("duckdb", threads=1)
    session.load_tpch(args.sf, storage="memory")
    kept = nested_lineage.MIN_GROUPS, nested_lineage.ROWS_PER_GROUP
    shapes = (("Q13", query_sql(13, "duckdb")), ("a global aggregate over Q13's groups", GLOBAL),
              ("175 groups of 1.5M rows", FEW_GROUPS))
    for name, sql in shapes:
        original = _median(lambda: session.engine.sql(sql), args.repeat)
        times = {}
        for rewrite, limits in (("lists", (10**15, 1)), ("rows found again", (0, 10**15)), ("estimate", kept)):
            nested_lineage.MIN_GROUPS, nested_lineage.ROWS_PER_GROUP = limits
            session.plans.clear()
            found_again = "_dl_o1" in session.run(sql, lineage="bitmap").rewritten_sql
            times[rewrite] = _median(lambda: session.run(sql, lineage="bitmap"), args.repeat) / original
            if rewrite == "estimate":
                picked = "rows found again" if found_again else "lists"
        nested_lineage.MIN_GROUPS, nested_lineage.ROWS_PER_GROUP = kept
        print(f"{name}: original {original * 1000:.0f} ms; lists {times['lists']:.2f}x, rows found again "
              f"{times['rows found again']:.2f}x; the estimate picks {picked} ({times['estimate']:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
