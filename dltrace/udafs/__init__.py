"""DLUNION and the dl_* helper functions, per engine: native "set" arrays and roaring "bitmap"s."""

from __future__ import annotations

from typing import Any


def install(target: Any) -> None:
    """Register the dl_* functions on a DuckDB connection or a SparkSession."""
    module = type(target).__module__
    if module.startswith("duckdb"):
        from dltrace.udafs.duckdb_functions import install_duckdb

        install_duckdb(target)
    elif module.startswith("pyspark"):
        from dltrace.udafs.spark_functions import install_spark

        install_spark(target)
    else:
        from dltrace.errors import DltraceError

        raise DltraceError(f"cannot install dl_* functions on a {type(target).__name__}")
