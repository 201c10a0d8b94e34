"""DLUNION and the dl_* helper functions, per engine: native "set" arrays and roaring "bitmap"s.

``install(target)`` registers the functions on a DuckDB connection or a SparkSession; ``decode(value)`` turns one
lineage value as it comes back from either engine into a sorted list of row ids. The bitmap format (portable
roaring, 32- or 64-bit, told apart by the first two bytes) is described in :mod:`dltrace.udafs.bitmap`.
"""

from __future__ import annotations

from typing import Any


def decode(value: Any) -> list[int]:
    """One lineage value (a list/array of ints with or without NULLs, a 32- or 64-bit roaring bitmap as
    bytes, or None) as a sorted list of distinct ints; None is the empty list."""
    from dltrace.udafs.bitmap import decode as _decode

    return _decode(value)


def install(target: Any) -> None:
    """Register the dl_* functions on a DuckDB connection or a SparkSession."""
    module = type(target).__module__
    if module.lstrip("_").startswith("duckdb"):
        from dltrace.udafs.duckdb_functions import install_duckdb

        install_duckdb(target)
    elif module.startswith("pyspark"):
        from dltrace.udafs.spark_functions import install_spark

        install_spark(target)
    else:
        from dltrace.errors import DltraceError

        raise DltraceError(f"cannot install dl_* functions on a {type(target).__name__}")


__all__ = ["decode", "install"]
