"""Run dltrace on a Spark session that is not the test process's own, and save what it finds.

    python tests/spark_lineage_run.py (--master spark://HOST:PORT | --remote sc://HOST:PORT) --out DIR
                                      [--sf 0.01] [--queries 1,3,11,18,21]

The cluster and Connect tests start this script in a subprocess: a process holds one SparkContext, and the
test process already has the shared local one (tests/conftest.py). Per TPC-H query it saves the set and bitmap
lineage (``r.save``) and the backward trace of every row to ``DIR/q<N>-<set|bitmap|trace>``; the test loads
those saves into its DuckDB session (``dltrace.load``: the same parquet files, so the fingerprints match) and
compares them with DuckDB's own lineage. It also registers an Arrow table and a Spark DataFrame, checks their
row ids and a save/load round trip on this session, and prints one JSON object: what ran where, and the
checks' outcomes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from pathlib import Path

import pyarrow.parquet as pq

import dltrace
from dltrace.tpch import query_sql
from dltrace.tpch_data import ensure_tpch


def classic_session(master: str):
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master).appName("dltrace-cluster-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )


def remote_session(url: str):
    from pyspark.sql import SparkSession

    return SparkSession.builder.remote(url).getOrCreate()


def where_it_ran(spark) -> dict:
    """The session's kind, and for a classic one its master and the executors' processes (not the driver)."""
    info: dict = {"session": type(spark).__module__}
    if ".connect." in info["session"]:
        return info
    sc = spark.sparkContext
    info["master"] = sc.master
    ids = sc._jsc.sc().getExecutorIds().mkString(",")  # noqa: SLF001 - a Scala Seq of the executors, no driver
    info["executors"] = sorted(filter(None, str(ids).split(",")))
    # Python workers of the executors: their process ids, never the driver's
    info["python_worker_pids"] = sorted(set(
        sc.parallelize(range(8), 8).map(lambda _: os.getpid()).collect()
    ))
    info["driver_pid"] = os.getpid()
    return info


def sources_round_trip(s, spark, sf: float, out: Path) -> dict:
    """Arrow and DataFrame sources: their row ids, a query over them with lineage, saved and loaded back."""
    folder = ensure_tpch(sf)
    nation = pq.read_table(folder / "nation.parquet")
    s.register("nation_arrow", nation)
    region_rows = pq.read_table(folder / "region.parquet").to_pylist()
    s.register("region_df", spark.createDataFrame(region_rows))
    checks = {}
    rids = s.sql("SELECT dl_rid, n_nationkey FROM nation_arrow ORDER BY dl_rid").to_pylist()
    checks["arrow_rids_are_positions"] = [r["n_nationkey"] for r in rids] == nation.column("n_nationkey").to_pylist()
    first = s.sql("SELECT dl_rid, r_name FROM region_df ORDER BY dl_rid").to_pylist()
    again = s.sql("SELECT dl_rid, r_name FROM region_df ORDER BY dl_rid").to_pylist()
    checks["dataframe_rids_dense_and_stable"] = first == again and [r["dl_rid"] for r in first] == list(range(5))
    sql = """SELECT r_name, count(*) AS n FROM nation_arrow JOIN region_df ON n_regionkey = r_regionkey
             GROUP BY r_name"""
    for strategy in ("set", "bitmap"):
        r = s.run(sql, lineage=strategy)
        r.save(out / f"sources-{strategy}")
        back = dltrace.load(out / f"sources-{strategy}", s)
        same = all(r.lineage(i) == back.lineage(i) for i in range(r.num_rows)) and back.num_rows == r.num_rows == 5
        checks[f"sources_{strategy}_save_load"] = same
        # each region's lineage: its own region row and exactly the nations in it
        checks[f"sources_{strategy}_lineage"] = all(
            len(r.lineage(i)["region_df"]) == 1 and len(r.lineage(i)["nation_arrow"]) == r.row(i)["n"]
            for i in range(r.num_rows)
        )
    return checks


def main() -> None:
    p = argparse.ArgumentParser()
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--master")
    target.add_argument("--remote")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--sf", type=float, default=0.01)
    p.add_argument("--queries", default="1,3,11,18,21")
    args = p.parse_args()
    spark = classic_session(args.master) if args.master else remote_session(args.remote)
    try:
        before = sorted(t.name for t in spark.catalog.listTables())
        s = dltrace.connect("spark", spark=spark)
        s.load_tpch(args.sf)
        s.register("orders_copy", str(ensure_tpch(args.sf) / "orders.parquet"), storage="memory")
        report = {"dltrace": dltrace.__file__, "saved": {}}
        for n in [int(q) for q in args.queries.split(",")]:
            sql = query_sql(n, "spark")
            for strategy in ("set", "bitmap"):
                r = s.run(sql, lineage=strategy)
                report["saved"][f"q{n}-{strategy}"] = str(r.save(args.out / f"q{n}-{strategy}"))
            t = s.trace(sql)
            report["saved"][f"q{n}-trace"] = str(t.save(args.out / f"q{n}-trace"))
        report["checks"] = sources_round_trip(s, spark, args.sf, args.out)
        # bitmap lineage needs no Python on the executors: no Python UDF in the plan of a bitmap query
        plan = spark.sql(s.run(query_sql(18, "spark"), lineage="bitmap").rewritten_sql)
        report["checks"]["bitmap_plan_has_no_python"] = "Python" not in _plan_text(plan)
        report["where"] = where_it_ran(spark)  # last: by now every executor has registered
        # a guest's close() leaves the user's session as it was (on Connect it raised at a memory copy's
        # release, a new user's, and left dltrace's views behind)
        s.close()
        report["checks"]["close_leaves_the_session_as_it_was"] = \
            sorted(t.name for t in spark.catalog.listTables()) == before
    finally:
        spark.stop()
    json.dump(report, sys.stdout)


def _plan_text(df) -> str:
    """The physical plan as text: ``explain`` prints it, on classic and Connect sessions alike."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        df.explain(mode="formatted")
    return buffer.getvalue()


if __name__ == "__main__":
    main()
