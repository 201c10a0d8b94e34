"""Time the two ways Spark can build bitmap lineage against the original query, interleaved in one session.

    python benchmarks/spark_bitmap_routes.py --sf 1 --queries 1,3,9,13,18 --repeat 3

Routes (see dltrace/engines/spark_sql.py):
  native  Spark builds the sets with JVM array functions; the driver encodes them as roaring bitmaps (dltrace's
          route: ``SparkFunctions.builds_bitmaps`` is False);
  udf     Python arrow UDFs (dltrace.engines.spark_udfs) build and merge the bitmaps on the executors (the route
          before; recreated here by switching ``builds_bitmaps`` back on, which gives exactly the SQL it ran).
Per query, the median over ``--repeat`` runs of the original query and of each route (each run fetches every
row and lineage column to the driver, as ``Session.run`` does), on one local[2] SparkSession; the runs of one
query are interleaved (original, native, udf, original, ...) so the machine's load hits all alike. One JSON
line per query, then the geometric means.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from contextlib import contextmanager

import pyarrow as pa

import dltrace
from dltrace.engines.spark_sql import SparkFunctions
from dltrace.tpch import query_sql

ROUTES = ("none", "native", "udf")


@contextmanager
def route(name: str):
    """Run with Spark bitmaps built by ``name`` ("native" or "udf"); "none" is the original query."""
    if name != "udf":
        yield
        return
    saved = SparkFunctions.builds_bitmaps, SparkFunctions.scalar_subquery_arguments
    SparkFunctions.builds_bitmaps = property(lambda self: self.strategy == "bitmap")
    # a scalar subquery as a Python UDF's argument fails on Spark 4.3 (NullPointerException in the task)
    SparkFunctions.scalar_subquery_arguments = property(lambda self: self.strategy != "bitmap")
    try:
        yield
    finally:
        SparkFunctions.builds_bitmaps, SparkFunctions.scalar_subquery_arguments = saved


def timed(session, sql: str, name: str) -> float:
    with route(name):
        start = time.perf_counter()
        result = session.run(sql, lineage=None if name == "none" else "bitmap")
        elapsed = time.perf_counter() - start
    assert name == "none" or all(pa.types.is_binary(c.type) for c in result.lineage_columns.values())
    return elapsed


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sf", type=float, default=1.0)
    p.add_argument("--queries", default="1,3,9,13,18")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--driver-memory", default="6g")
    args = p.parse_args()
    print(f"# dltrace from {dltrace.__file__}", file=sys.stderr)
    s = dltrace.connect("spark", master="local[2]", driver_memory=args.driver_memory)
    s.load_tpch(args.sf)
    queries = [int(q) for q in args.queries.split(",")]
    for name in ROUTES:  # warm-up: JIT, file listing, Python workers
        timed(s, query_sql(queries[0], "spark"), name)
    ratios: dict[str, list[float]] = {"native": [], "udf": []}
    for n in queries:
        sql = query_sql(n, "spark")
        times: dict[str, list[float]] = {name: [] for name in ROUTES}
        for _ in range(args.repeat):
            for name in ROUTES:
                times[name].append(timed(s, sql, name))
        row = {"query": f"Q{n}", **{name: round(statistics.median(t), 3) for name, t in times.items()}}
        for name in ("native", "udf"):
            row[f"{name}/original"] = round(row[name] / row["none"], 2)
            ratios[name].append(row[name] / row["none"])
        print(json.dumps(row), flush=True)
    print(json.dumps({f"geomean {k}/original": round(statistics.geometric_mean(v), 2) for k, v in ratios.items()}))
    s.close()


if __name__ == "__main__":
    main()
