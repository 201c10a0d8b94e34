"""The DuckDB benchmarks still run: each at TPC-H SF 0.01 with one repeat, in its own process (their figures are
the closing notes' and design.md's; this checks only that the scripts work). Two had broken unseen: a stand-in
for a pass whose signature had changed, a layout hook the engine no longer called. The Spark and cluster
benchmarks start their own JVMs and are left to their own runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

RUNS = [
    ("late_witnesses.py", ["--sf", "0.01", "--repeat", "1"]),
    ("lineage_snapshot.py", ["--sf", "0.01", "--engines", "duckdb", "--out", "{out}/snapshot.json"]),
    ("lineage_space.py", ["--sf", "0.01", "--queries", "1-2"]),
    ("lookups.py", ["--sf", "0.01", "--queries", "1,3", "--n", "2", "--out", "{out}/lookups"]),
    ("native_bitsets.py", ["--sf", "0.01", "--repeat", "1"]),
    ("nested_groups.py", ["--sf", "0.01", "--repeat", "1"]),
    ("pipeline_cost.py", ["--sf", "0.01", "--repeat", "1"]),
    ("duckdb_memory_layouts.py", ["--sf", "0.01", "--queries", "1", "--repeat", "1"]),
    ("duckdb_scale.py", ["--sf", "0.01", "--queries", "1", "--repeat", "1", "--out", "{out}/scale"]),
]


@pytest.mark.parametrize("script,args", RUNS, ids=[r[0] for r in RUNS])
def test_a_benchmark_runs(tmp_path, script, args):
    cmd = [sys.executable, str(BENCHMARKS / script), *(a.format(out=tmp_path) for a in args)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_duckdb_benchmark_is_run_here():
    spark = {"spark_bitmap_routes.py", "spark_cluster_tpch.py"}
    assert {p.name for p in BENCHMARKS.glob("*.py")} - spark == {script for script, _ in RUNS}
