"""Shared fixtures: TPC-H at SF 0.01 (generated once into the cache), one DuckDB session, and ONE
SparkSession for the whole test run (local[2], few shuffle partitions, workers on this interpreter)."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

TEST_SF = 0.01


from hypothesis import HealthCheck, settings  # noqa: E402

# "ci": the default, a few hundred examples over the suite, derandomised so CI is repeatable.
# "long": 10,000 per test, with fresh randomness: pytest --hypothesis-profile=long tests/test_differential.py
settings.register_profile("ci", max_examples=150, deadline=None, suppress_health_check=list(HealthCheck),
                          derandomize=True, print_blob=True)
# a look at fresh random examples after a change, between CI's fixed 150 and the long profile
settings.register_profile("medium", max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck),
                          print_blob=True)
settings.register_profile("long", max_examples=10000, deadline=None, suppress_health_check=list(HealthCheck),
                          print_blob=True)


def pytest_configure(config):
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile("ci")


def pytest_collection_modifyitems(config, items):
    """Under the long profile a property test runs 10,000 examples (hours on a busy machine): pytest-timeout's
    900 s (pyproject.toml) would interrupt it mid-example -- DuckDB reports the SIGALRM as "Query interrupted"."""
    if config.getoption("hypothesis_profile", None) != "long":
        return
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.timeout(0))


@pytest.fixture(scope="session")
def tpch_folder():
    from dltrace.tpch import ensure_tpch

    return ensure_tpch(TEST_SF)


@pytest.fixture(scope="session")
def duck(tpch_folder):
    """A DuckDB dltrace session with the 8 TPC-H tables at SF 0.01."""
    import dltrace

    s = dltrace.connect("duckdb")
    s.load_tpch(TEST_SF)
    yield s
    s.close()


@pytest.fixture(scope="session")
def spark_session():
    """The one SparkSession of the test run."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("dltrace-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()


@pytest.fixture(scope="session")
def sparks(spark_session, tpch_folder):
    """A Spark dltrace session (on the shared SparkSession) with TPC-H at SF 0.01."""
    import dltrace

    s = dltrace.connect("spark", spark=spark_session)
    s.load_tpch(TEST_SF)
    yield s


@pytest.fixture(scope="module")
def paper():
    """A DuckDB session with the paper's store/item/sales tables (tests/paper_example.py)."""
    import dltrace
    import paper_example

    s = dltrace.connect("duckdb")
    paper_example.register(s)
    yield s
    s.close()


@pytest.fixture(scope="module")
def small():
    """A DuckDB session with the small hand-checked tables t and u of tests/test_semantics.py."""
    import dltrace
    from test_semantics import T, U

    s = dltrace.connect("duckdb")
    s.register("t", T)
    s.register("u", U)
    yield s
    s.close()
