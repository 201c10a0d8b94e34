"""dltrace on a real Spark cluster: a standalone master and two workers started from the pyspark package.

The executors are separate JVMs on the workers, each with its own Python workers. The test process already
holds the shared local SparkContext (tests/conftest.py) and a process can hold only one, so the driver of the
cluster application is a subprocess (tests/spark_lineage_run.py): it runs TPC-H queries with set and bitmap
lineage and backward tracing on the cluster and saves every result; this test loads the saves into its DuckDB
session and checks each has DuckDB's rows and lineage. The cluster's processes are children of the fixture,
stopped (with their executors) when the module ends.
"""

from __future__ import annotations

import pytest

from remote_spark import assert_matches_duckdb, run_lineage_driver
from spark_processes import standalone_cluster

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

QUERIES = [1, 3, 11, 18, 21]


@pytest.fixture(scope="module")
def cluster_master():
    """The ``spark://`` URL of a running standalone cluster (1 master, 2 workers of 1 core and 1 GiB)."""
    with standalone_cluster(workers=2, worker_memory="1g") as url:
        yield url


@pytest.fixture(scope="module")
def cluster_report(cluster_master, tmp_path_factory):
    return run_lineage_driver(["--master", cluster_master], QUERIES, tmp_path_factory.mktemp("cluster"))


def test_driver_ran_on_the_cluster(cluster_report, cluster_master):
    where = cluster_report["where"]
    assert where["master"] == cluster_master
    assert len(where["executors"]) == 2, where  # one executor per worker
    assert where["python_worker_pids"] and where["driver_pid"] not in where["python_worker_pids"]


def test_cluster_lineage_equals_duckdb(cluster_report, duck):
    assert_matches_duckdb(cluster_report, duck, QUERIES)


def test_cluster_sources_and_plans(cluster_report):
    """Arrow and DataFrame sources get stable dense rids, their lineage saves and loads, and a bitmap query
    has no Python UDF in its plan (the executors need no dltrace)."""
    failed = [name for name, ok in cluster_report["checks"].items() if not ok]
    assert not failed, cluster_report["checks"]
