"""A table source as a Spark DataFrame with its row ids ``dl_rid``: what :class:`~dltrace.engines.spark.SparkEngine`
registers and :func:`~dltrace.engines.spark.add_rids` gives a user's view.

Parquet files get ``_metadata.row_index`` (the row's position within its file) plus the file's offset, files in
sorted name order (docs/design.md "Row ids"); an Arrow table is cast to types Spark's Arrow reader takes; a
user's DataFrame gets dense ids in its partition order, frozen so re-evaluation cannot change them, computed in
the JVM (no RDD API is required, so Spark Connect works too, and no value goes through Python).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pyarrow as pa
from sqlglot import exp

from dltrace.engines.sources import RID, ParquetSource, check_columns
from dltrace.engines.spark_errors import one_line, spark_errors
from dltrace.errors import SourceError


def _quote(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql("spark")


def _is_connect(obj: Any) -> bool:
    return type(obj).__module__.startswith("pyspark.sql.connect")


def parquet_frame(spark: Any, name: str, source: ParquetSource) -> Any:
    """The rows of ``source``'s files with their ids: ``_metadata.row_index`` plus the file's offset."""
    from pyspark.sql import functions as F

    frames = []
    try:
        for path, offset in zip(source.files, source.offsets):
            base = _partition_base(path)
            df = (spark.read.option("basePath", base) if base else spark.read).parquet(_literal_path(path))
            check_columns(df.columns)
            # row_index is the row's position within its file, whatever the splits and pushed filters. Read
            # through metadataColumn: a data column named _metadata shadows the name (its values were ids)
            rid = (df.metadataColumn("_metadata").getField("row_index") + F.lit(int(offset))).cast("bigint").alias(RID)
            frames.append(df.select(*[F.col(_quote(c)) for c in df.columns], rid))
        df = frames[0]
        for other in frames[1:]:
            df = df.unionByName(other)
        df.schema  # noqa: B018 - analyse now, so a bad file fails here and not in a later query
    except spark_errors() as e:
        raise SourceError(f"cannot register {name!r}: {one_line(e)}") from None
    return df


def _literal_path(path: str) -> str:
    """``path`` as Spark's reader takes it for that one file: Hadoop reads every path as a glob, and a file named
    ``s [2024].parquet`` was not found (its characters ``[]{}*?`` and backslash escaped)."""
    return re.sub(r"([\\\[\]{}*?])", r"\\\1", path)


def _partition_base(path: str) -> str | None:
    """The folder above a file's first ``key=value`` folder (a hive-partitioned layout), or None.

    Read alone, a file has only the columns it holds; DuckDB's ``read_parquet`` (and ``spark.read.parquet`` of
    the folder) add the partition columns its path names. With ``basePath`` Spark names them from the path
    below it too."""
    parts = path.split("/")
    for i, part in enumerate(parts[:-1]):
        if "=" in part and not part.startswith(("_", ".")) and part.index("=") > 0:
            return "/".join(parts[:i]) or "/"
    return None


def arrow_frame(spark: Any, name: str, table: pa.Table) -> Any:
    """An Arrow table as a DataFrame, its types cast to ones Spark reads (the ids are a column already)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    table = _spark_friendly(table)
    try:
        # Naive Arrow timestamps stay naive (TIMESTAMP_NTZ), like DuckDB's TIMESTAMP.
        schema = from_arrow_schema(table.schema, prefer_timestamp_ntz=True)
        if table.num_rows == 0:  # PySpark 4.x fails on an empty Arrow table with a nested column
            return spark.createDataFrame([], schema)
        return spark.createDataFrame(table, schema)
    except (*spark_errors(), pa.ArrowException, TypeError, ValueError) as e:
        raise SourceError(f"cannot register {name!r}: {one_line(e)}") from None


def typed_frame(spark: Any, df: Any, query: str, own: list[str]) -> Any:
    """``df`` (rows read from Arrow) with its own columns ``own`` in the types Spark gives ``query``, the query
    the rows are the result of: the Arrow form of a result loses a string's collation (``UTF8_LCASE``: 'a' and
    'A' grouped apart) and an interval's fields (``INTERVAL DAY`` came back ``DAY TO SECOND``). Only columns
    whose type differs are cast (nullability aside: Spark casts no nullable element to a non-nullable one); as
    they are when the query no longer binds as it did (a table it read was registered again since)."""
    from pyspark.sql import functions as F

    try:
        wanted = [f.dataType for f in spark.sql(query).schema.fields]  # by position: the rows' names are the run's
        if len(wanted) != len(own):
            return df
        current = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        cols = [F.col(_quote(c)).cast(t).alias(c) if t.simpleString() != current[c] else F.col(_quote(c))
                for c, t in zip(own, wanted)]
        typed = df.select(*cols, *[F.col(_quote(c)) for c in df.columns if c not in own])
        typed.schema  # noqa: B018 - analyse now: a cast Spark refuses leaves the Arrow types
        return typed
    except spark_errors():
        return df


def native_frame(spark: Any, name: str, df: Any) -> Any:
    """Dense ids in the DataFrame's own partition order, then frozen so re-evaluation cannot change them: a
    DataFrame of ``spark``, the session its views go in.

    The rows never leave the JVM. ``monotonically_increasing_id()`` numbers each partition's rows from
    ``partition << 33``; the numbered rows are frozen (a local checkpoint), each partition's row count is
    counted over them, and a row's id is its partition's offset plus its position. (Through Python, with
    ``rdd.zipWithIndex()``, a TIMESTAMP in the repeated hour of a daylight-saving night came back an hour off in
    the worker's local zone, a MAP's entries in another order, and a YEAR TO MONTH interval failed.) A DataFrame
    of another session of the same SparkContext (``spark.newSession()``) is first made a DataFrame of ``spark``
    over the same rows: its views went in that other session, over the user's own view of the name there."""
    from pyspark.sql import functions as F

    if not hasattr(df, "schema") or not hasattr(df, "createOrReplaceTempView"):
        raise SourceError(f"cannot register a {type(df).__name__} on Spark: pass a DataFrame")
    check_columns(df.columns)
    passed = None
    try:
        if not _same_session(df.sparkSession, spark):
            df = passed = _into_session(spark, name, df)
        cols = [F.col(_quote(c)) for c in df.columns]
        tag = next(n for n in (f"_dl_mid{i or ''}" for i in range(len(df.columns) + 1))
                   if n.lower() not in {c.lower() for c in df.columns})
        numbered = _frozen(df.select(*cols, F.monotonically_increasing_id().alias(tag)))
        mid = F.col(_quote(tag))
        partition = F.shiftright(mid, 33)
        counts = sorted((r[0], r[1]) for r in numbered.groupBy(partition.alias("p")).count().collect())
        offsets, total = [], 0
        for p, n in counts:
            offsets += [F.lit(p), F.lit(total)]
            total += n
        first = F.create_map(*offsets)[partition] if offsets else F.lit(0)
        out = numbered.select(*cols, (first + mid.bitwiseAND(F.lit((1 << 33) - 1))).cast("bigint").alias(RID))
    except spark_errors() as e:
        raise SourceError(f"cannot register {name!r}: {one_line(e)}") from None
    finally:
        if passed is not None:
            release(passed)  # (numbered from it, and frozen again: its own frozen rows are read no more)
    setattr(out, FROZE, (numbered,))
    return out


#: attribute of a DataFrame dltrace made over rows it froze: those frozen DataFrames, released with it
FROZE = "_dl_froze"


def _frozen(df: Any) -> Any:
    """``df`` computed once and kept: a local checkpoint, or where the session has none, a cache filled now."""
    try:
        return df.localCheckpoint(eager=True)
    except Exception:  # noqa: BLE001 - localCheckpoint unsupported here: keep it cached instead
        df = df.cache()
        df.count()
        return df


def release(df: Any) -> None:
    """Free what dltrace keeps for ``df``: its cache, and the rows it froze for it (:data:`FROZE`). A local
    checkpoint's rows are held by its RDD, which ``DataFrame.unpersist`` leaves alone: a guest session's adopted
    and registered DataFrames stayed in the user's SparkContext after ``close()`` (9 MB for 100k rows, a new user
    found). Spark Connect's checkpoint is released by the server when its DataFrame goes."""
    try:  # (the instance's own attribute: getattr on a Connect DataFrame without it gives a Column of that name)
        froze = tuple(vars(df).get(FROZE, ()))
    except TypeError:
        froze = ()
    for frame in [df, *froze]:
        try:
            frame.unpersist()
            plan = frame._jdf.queryExecution().analyzed()  # (classic Spark only: AttributeError on Connect)
            if plan.getClass().getSimpleName() == "LogicalRDD":  # (the checkpoint's own plan: its RDD holds the rows)
                plan.rdd().unpersist(False)
        except Exception:  # noqa: BLE001 - the session may be gone already; releasing never raises
            pass


def _into_session(spark: Any, name: str, df: Any) -> Any:
    """``df``'s rows as a DataFrame of ``spark``: passed through a global temp view (the SparkContext's
    ``global_temp`` database, which its sessions share) under a name of dltrace's own, frozen, and the view
    dropped again."""
    view = f"_dl_from_session_{uuid.uuid4().hex}"
    df.createOrReplaceGlobalTempView(view)
    try:
        database = spark.conf.get("spark.sql.globalTempDatabase", "global_temp")
        return _frozen(spark.table(f"{_quote(database)}.{_quote(view)}"))
    finally:
        spark.catalog.dropGlobalTempView(view)


def _same_session(a: Any, b: Any) -> bool:
    """Are ``a`` and ``b`` one SparkSession (Python wrappers of one JVM session, or one Connect session id)?"""
    if a is b:
        return True
    ja, jb = getattr(a, "_jsparkSession", None), getattr(b, "_jsparkSession", None)
    if ja is not None and jb is not None:
        return bool(ja.equals(jb))
    return getattr(a, "session_id", None) is not None and getattr(a, "session_id", None) == getattr(b, "session_id",
                                                                                                   None)


def _spark_friendly(table: pa.Table) -> pa.Table:
    """Cast Arrow types Spark's Arrow reader does not take (views, large/dictionary types) to plain ones."""
    fields, changed = [], False
    for f in table.schema:
        t = _plain_type(f.type)
        changed |= t != f.type
        fields.append(pa.field(f.name, t, f.nullable))
    return table.cast(pa.schema(fields), safe=False) if changed else table


def _plain_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _plain_type(t.value_type)
    if pa.types.is_string_view(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_binary_view(t) or pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return pa.list_(_plain_type(t.value_type))
    if pa.types.is_list(t):
        return pa.list_(_plain_type(t.value_type))
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return pa.timestamp("us", t.tz)
    return t
