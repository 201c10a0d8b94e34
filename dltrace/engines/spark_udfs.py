"""The dl_* functions users call on Spark: scalar Arrow UDFs (``pyspark.sql.functions.arrow_udf``, Spark >= 4.1).

In SQL, DLUNION over bitmaps is ``dl_bitmap_build(collect_list(t.dl_rid))`` /
``dl_bitmap_merge(collect_list(sub.dl_x))``: ``collect_list`` aggregates on the JVM (with partial aggregation
before the shuffle) and one vectorised UDF call per Arrow batch finishes the job. A grouped-aggregate pandas/arrow UDF is not usable for us: Spark refuses to mix
it with built-in aggregates in one aggregation (``INVALID_PANDAS_UDF_PLACEMENT``), and rewritten queries always
have ``sum``/``count``/... next to the lineage column; it would also ship every row of a group to Python
without partial aggregation. Of the scalar routes, ``arrow_udf`` (the batch as a ``pyarrow`` array, handed to the
same vectorised code as DuckDB's) measured about 2x faster than ``pandas_udf`` and ``udf(useArrow=True)`` on many
small groups (300k groups of 4 ids, local[2]) and no slower on a few huge ones.

One name for both strategies: Python UDFs declare only a return type; the inputs arrive as Arrow arrays whose type
we inspect at run time (``list<int64>`` = set, ``binary`` = bitmap). So ``dl_count``, ``dl_contains`` and
``dl_to_list`` are single UDFs that accept either representation. ``dl_union`` cannot return "the type of its
input": a Spark function name maps to exactly one function (``spark.udf.register`` and
``CREATE TEMPORARY FUNCTION`` both refuse/replace a second definition; SQL UDFs cannot be overloaded either) and a
UDF has one declared return type. So on Spark ``dl_union`` accepts sets or bitmaps and always returns a bitmap
(BINARY; 64-bit when an input is 64-bit or an id needs it). For a set-typed union of set columns use Spark's
``array_sort(array_union(a, b))``; ``dl_to_list(dl_union(a, b))`` gives the ids either way.

Signatures (NULL lineage = the empty set):

=================================================  ===============================================================
``dl_bitmap_build(array<bigint>) -> binary``        32-bit bitmap of the non-null ids; NULL/empty -> empty bitmap
``dl_bitmap_build64(array<bigint>) -> binary``      same, 64-bit format
``dl_bitmap_merge(array<binary>) -> binary``        union of the non-null bitmaps; NULL/empty -> empty bitmap
``dl_bitmap_merge64(array<binary>) -> binary``      same, 64-bit output
``dl_count(array<bigint> | binary) -> bigint``      NULL -> 0
``dl_contains(array<bigint> | binary, bigint) -> boolean``  NULL lineage -> false, NULL rid -> NULL
``dl_to_list(array<bigint> | binary) -> array<bigint>``     sorted distinct; NULL -> []
``dl_union(x, y) -> binary``                        x, y sets or bitmaps; NULL only when both are NULL
=================================================  ===============================================================

A set value (array<bigint>) is trusted to be a set, sorted and distinct, as the rewriter builds it; the helpers
only drop NULL elements (same as on DuckDB).

Spark evaluates a Python UDF on *every* row of its input, also inside a CASE branch that is not taken (the UDF is
pulled out of the expression into its own ArrowEvalPython operator): do not guard a UDF call with CASE to keep
bad input away from it (e.g. ``CASE WHEN big THEN dl_bitmap_build64(x) ELSE dl_bitmap_build(x) END`` fails on
the big rows).

dltrace's own lineage queries on Spark call none of these (bitmap lineage is built with JVM functions and encoded
on the driver: :mod:`dltrace.engines.spark_sql`); they are for users' SQL over saved or returned lineage
(``dltrace.install(spark)``). The executors' Python workers then import ``dltrace.udafs.bitmap_arrow``, so dltrace
and pyroaring (a compiled wheel) must be installed in the executors' Python.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from dltrace.engines.guest import dltrace_functions
from dltrace.errors import ReservedName
from dltrace.udafs import bitmap_arrow as B


def _udfs() -> dict[str, Any]:
    from pyspark.sql.functions import arrow_udf

    def build(x: pa.Array) -> pa.Array:
        return B.build_arrow(x, wide=False)

    def build64(x: pa.Array) -> pa.Array:
        return B.build_arrow(x, wide=True)

    def merge(x: pa.Array) -> pa.Array:
        return B.merge_arrow(x, wide=False)

    def merge64(x: pa.Array) -> pa.Array:
        return B.merge_arrow(x, wide=True)

    def count(x: pa.Array) -> pa.Array:
        return B.count_arrow(x)

    def contains(x: pa.Array, r: pa.Array) -> pa.Array:
        return B.contains_arrow(x, r)

    def to_list(x: pa.Array) -> pa.Array:
        return B.to_list_arrow(x)

    def union(x: pa.Array, y: pa.Array) -> pa.Array:
        return B.union_arrow(x, y)

    return {
        "dl_bitmap_build": arrow_udf(build, "binary"),
        "dl_bitmap_build64": arrow_udf(build64, "binary"),
        "dl_bitmap_merge": arrow_udf(merge, "binary"),
        "dl_bitmap_merge64": arrow_udf(merge64, "binary"),
        "dl_count": arrow_udf(count, "bigint"),
        "dl_contains": arrow_udf(contains, "boolean"),
        "dl_to_list": arrow_udf(to_list, "array<bigint>"),
        "dl_union": arrow_udf(union, "binary"),
    }


NAMES = ("dl_bitmap_build", "dl_bitmap_build64", "dl_bitmap_merge", "dl_bitmap_merge64", "dl_count", "dl_contains",
         "dl_to_list", "dl_union")


def install(spark: Any) -> set[str]:
    """Register the dl_* functions ``spark`` does not have yet as its temporary SQL functions; returns the names
    it made (idempotent).

    A function of one of these names that dltrace did not make on this SparkSession (the user's) is refused,
    never replaced: Spark's catalog cannot tell what a Python function computes, so only dltrace's own record
    (:func:`dltrace.engines.guest.dltrace_functions`) says a function is dltrace's.
    """
    ours = dltrace_functions(spark)
    present = {name for name in NAMES if spark.catalog.functionExists(name)}
    clash = sorted(present - ours)
    if clash:
        raise ReservedName(f"the SparkSession has function{'s' if len(clash) > 1 else ''} {', '.join(clash)} that "
                           "dltrace did not define: dltrace's SQL calls its own dl_* functions and does not replace "
                           "yours; rename or drop them, or give dltrace another SparkSession")
    udfs = _udfs()
    missing = {name for name in NAMES if name not in present}
    for name in NAMES:
        if name in missing:
            spark.udf.register(name, udfs[name])
    return missing


def uninstall(spark: Any, names: set[str]) -> None:
    """Drop the temporary functions of ``names`` that :func:`install` made on ``spark``."""
    for name in sorted(names):
        try:
            spark.sql(f"DROP TEMPORARY FUNCTION IF EXISTS {name}")
        except Exception:  # noqa: BLE001 - the session may be stopped already: its functions went with it
            pass
