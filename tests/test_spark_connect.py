"""dltrace on Spark Connect: ``dltrace.connect("spark", spark=SparkSession.builder.remote("sc://...").getOrCreate())``.

The fixture starts a Connect server from the pyspark package (``sbin/start-connect-server.sh --wait`` on a
free loopback port, its own local[2] Spark) and stops it afterwards. The client runs in a subprocess
(tests/spark_lineage_run.py with ``--remote``): PySpark's builder refuses a remote session
(SESSION_ALREADY_EXIST) in a process that already runs a classic SparkContext, as the test process does
(tests/conftest.py), and a process that made one is marked Connect-only (SPARK_CONNECT_MODE_ENABLED). The
client registers parquet, Arrow and DataFrame sources, runs set and bitmap lineage and backward tracing, saves
and loads; this test compares the saves with DuckDB's lineage.
"""

from __future__ import annotations

import pytest

from remote_spark import assert_matches_duckdb, run_lineage_driver
from spark_processes import connect_server

pytestmark = [pytest.mark.spark, pytest.mark.connect]

QUERIES = [3, 11, 18]


@pytest.fixture(scope="module")
def connect_report(tmp_path_factory):
    with connect_server() as url:
        report = run_lineage_driver(["--remote", url], QUERIES, tmp_path_factory.mktemp("connect"))
    return report


def test_client_used_spark_connect(connect_report):
    assert ".connect." in connect_report["where"]["session"]


def test_connect_lineage_equals_duckdb(connect_report, duck):
    assert_matches_duckdb(connect_report, duck, QUERIES)


def test_connect_sources_save_load_and_plans(connect_report):
    failed = [name for name, ok in connect_report["checks"].items() if not ok]
    assert not failed, connect_report["checks"]
