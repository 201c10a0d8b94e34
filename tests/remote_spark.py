"""What the cluster and Connect tests share: run tests/spark_lineage_run.py against a Spark session in a
subprocess and check its saves against DuckDB's lineage of the same TPC-H data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dltrace
from dltrace.tpch import query_sql
from lineage_compare import assert_same_rows_and_lineage

RUNNER = Path(__file__).with_name("spark_lineage_run.py")
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def run_lineage_driver(target: list[str], queries: list[int], out: Path, timeout: float = 900) -> dict:
    """Run the driver script (``target``: ``--master URL`` or ``--remote URL``) and return its JSON report."""
    env = dict(os.environ)
    # the driver imports this tree's dltrace, installed or not
    env["SPARK_LOCAL_IP"] = "127.0.0.1"  # loopback only
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, str(RUNNER), *target, "--out", str(out), "--queries", ",".join(map(str, queries))],
        env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"driver failed ({done.returncode}):\n{done.stderr[-5000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_matches_duckdb(report: dict, duck, queries: list[int]) -> None:
    """Every saved Spark result (set, bitmap, backward trace) has DuckDB's rows and lineage."""
    for n in queries:
        sql = query_sql(n)
        expected = duck.run(sql, lineage="set")
        for strategy in ("set", "bitmap"):
            saved = dltrace.load(report["saved"][f"q{n}-{strategy}"], duck)  # same files: same fingerprints
            assert saved.strategy == strategy
            assert_same_rows_and_lineage(saved, expected)
        traced = dltrace.load(report["saved"][f"q{n}-trace"], duck)
        assert_same_rows_and_lineage(traced, duck.trace(sql))
