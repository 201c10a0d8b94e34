"""Spark SQL adapter (PySpark 4.x): tables are temp views, results come back as Arrow.

Works on a local SparkSession (built here when none is given), on any cluster master and on Spark Connect
sessions: the RDD API is only used where it exists (classic sessions), never required.

Row ids follow docs/design.md "Row ids" (each source is read as a DataFrame with them by
:mod:`.spark_frames`): for parquet, ``_metadata.row_index`` (the row's position within its file)
plus the file's offset, files in sorted name order -- the same ids DuckDB gives with ``file_row_number``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Collection, Hashable
from typing import Any

import pyarrow as pa
from sqlglot import exp

from dltrace.engines import spark_udfs
from dltrace.engines.spark_sql import SparkFunctions
from dltrace.engines.base import release_target
from dltrace.engines.guest import Made, Settings, installed_by_user, release_functions, use_functions
from dltrace.engines.sources import RID, ArrowSource, NativeSource, ParquetSource, Source, check_storage
from dltrace.engines.spark_errors import one_line, quiet, spark_errors
from dltrace.engines.spark_frames import arrow_frame, native_frame, parquet_frame, release, typed_frame
from dltrace.errors import ArgumentError, QueryError, SourceError


def owns(obj: Any) -> bool:
    """Is ``obj`` PySpark's (a SparkSession, classic or Spark Connect)? Told by its type's module, so asking
    never imports pyspark."""
    return type(obj).__module__.startswith("pyspark")


def install_functions_on(spark: Any) -> None:
    """Register the dl_* functions on a user's own SparkSession (see :mod:`dltrace.engines.spark_udfs`): theirs
    from then on, never dropped by a session."""
    installed_by_user(spark, spark_udfs.install(spark))


def _cores(master: str) -> int:
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if m is None or m.group(1) in (None, "*"):
        return 1 if m is not None and m.group(1) is None else (os.cpu_count() or 2)
    return max(1, int(m.group(1)))


# Session settings under which Spark parses or resolves SQL otherwise than its default, which dltrace (sqlglot's
# Spark dialect) writes: (key, the default dltrace needs, what dltrace does as the default does).
_PARSER_SETTINGS = (
    ("spark.sql.caseSensitive", "false", "resolves names without case"),
    ("spark.sql.ansi.doubleQuotedIdentifiers", "false", "reads \"text\" as a string"),
    ("spark.sql.parser.escapedStringLiterals", "false", "reads a backslash in a string literal as an escape"),
)


#: the masters Spark takes (the local ones with their thread and failure counts, a standalone cluster, YARN, K8s)
_MASTER = re.compile(r"local(\[[0-9*]+(,[0-9]+)?\])?|local-cluster\[[0-9, ]+\]|spark://.+|yarn|k8s://.+",
                     re.IGNORECASE)


def _check_master(master: Any) -> None:
    """Refuse a master Spark does not take, before a JVM starts: Spark said only JAVA_GATEWAY_EXITED, its reason in
    the Java log lines (a new user's ``sc://`` address and ``spork://x``)."""
    if isinstance(master, str) and master.startswith("sc://"):
        raise ArgumentError(f"master {master!r} is a Spark Connect address: connect to it yourself and pass the "
                            f"session, connect('spark', spark=SparkSession.builder.remote({master!r}).getOrCreate())")
    if not isinstance(master, str) or not _MASTER.fullmatch(master):
        raise ArgumentError(f"master {master!r} is no Spark master: local, local[N], local[*], spark://HOST:PORT, "
                            f"yarn or k8s://URL")


def _conf_key(key: str) -> str:
    """``driver_memory`` -> ``spark.driver.memory``; keys already starting with ``spark.`` stay as they are."""
    return key if key.startswith("spark.") else "spark." + key.replace("_", ".")


class SparkEngine:
    """One SparkSession; every registered table is a temp view with its ``dl_rid`` column."""

    name = "spark"
    compares_maps = SparkFunctions.compares_maps  # Spark's <=> (and =) take no MAP

    def __init__(self, spark: Any = None, master: str = "local[*]", **conf: Any) -> None:
        self._owned = False
        self._settings = Settings()  # what dltrace set on a session it did not build, put back at close
        if spark is None:
            _check_master(master)  # (also where a running session is taken: a master it ignores is no typo's cover)
            from pyspark.sql import SparkSession

            spark = SparkSession.getActiveSession()
            if spark is None:
                spark = self._build(master, conf)
                self._owned = True
        if not self._owned:
            # One SparkContext per JVM: a running session (the user's, or the active one) keeps its settings
            # except the ones asked for here, which close() puts back; it is never stopped.
            self.spark = spark
            self._apply(conf)
        self.spark = spark
        self.made = Made(spark, self, self.exists, self._view_plan)  # every temp view this engine made
        self._frames: dict[str, Any] = {}  # name -> DataFrame kept cached/checkpointed for that view
        self._installed = False

    def _apply(self, conf: dict[str, Any]) -> None:
        """Set ``conf`` on the user's session; when Spark refuses one (a static setting such as
        spark.driver.memory, a bad value), those already set are put back: no session exists yet to close."""
        for k, v in conf.items():
            key = _conf_key(k)
            try:
                with quiet():
                    before = self.spark.conf.get(key, None)
                    self.spark.conf.set(key, str(v))
            except spark_errors() as e:
                self._settings.restore(lambda name: self.spark.conf.get(name, None), self._put_setting)
                raise QueryError(f"Spark cannot set {key} on this SparkSession: {one_line(e)}") from None
            self._settings.record(key, before, str(v))

    @staticmethod
    def _build(master: str, conf: dict[str, Any]):
        from pyspark.sql import SparkSession

        if master.startswith("local"):
            # Python workers must run this interpreter (same version, same installed packages).
            os.environ["PYSPARK_PYTHON"] = sys.executable
            os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        parts = str(max(2, 2 * _cores(master)))
        settings = {
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": parts,
            "spark.default.parallelism": parts,
            "spark.sql.session.timeZone": "UTC",
        }
        settings.update({_conf_key(k): str(v) for k, v in conf.items()})
        builder = SparkSession.builder.master(master).appName("dltrace")
        for k, v in settings.items():
            builder = builder.config(k, v)
        try:
            spark = builder.getOrCreate()
        except spark_errors() as e:  # (a raw Py4JJavaError or JAVA_GATEWAY_EXITED, a Java stack in its text)
            hint = "; the JVM's own reason is in the lines Spark printed before" if "GATEWAY" in str(e) else ""
            raise QueryError(f"Spark did not start (master {master!r}): {one_line(e)}{hint}") from None
        try:
            spark.sparkContext.setLogLevel("ERROR")
        except Exception:  # noqa: BLE001 - a Spark Connect session (SPARK_REMOTE) has no SparkContext
            pass
        return spark

    # -- tables ---------------------------------------------------------------------------------
    def quote(self, name: str) -> str:
        return exp.to_identifier(name, quoted=True).sql(self.name)

    def register(self, name: str, source: Source, storage: str = "source") -> None:
        """``name``: a temp view of the source's columns; :func:`rows_relation` of it: the same rows with
        ``dl_rid``. ``storage="memory"``: the rows with their ids are cached (``DataFrame.cache()``, Spark's
        default level: memory, spilling to local disk what does not fit, never re-read from the source) and
        materialised by a count before the views are made; both views read the one cached DataFrame (the
        user's drops ``dl_rid`` from it, so Spark scans the cached columns it needs); it is unpersisted when
        the table is replaced or dropped, or the session closes. A DataFrame (frozen by a local checkpoint
        when registered) is already in Spark's storage either way."""
        check_storage(storage)
        with quiet():
            if isinstance(source, ParquetSource):
                df = parquet_frame(self.spark, name, source)
            elif isinstance(source, ArrowSource):
                df = arrow_frame(self.spark, name, source.table)
                if source.typed_by is not None:
                    df = typed_frame(self.spark, df, source.typed_by, source.own_columns)
            elif isinstance(source, NativeSource):
                df = native_frame(self.spark, name, source.obj)
            else:  # pragma: no cover - resolve_source only builds the three kinds
                raise SourceError(f"cannot register a {type(source).__name__} on Spark")
            keep = isinstance(source, NativeSource)
            # Unpersist a previous registration first: Spark shares one cache entry between equal plans, so
            # the same files registered again would be cached as the old entry, which unpersisting it later
            # would take away from the new view.
            _unpersist(self._frames.pop(name, None))
            if storage == "memory" and not keep:
                try:
                    df = df.cache()
                    df.count()
                except spark_errors() as e:
                    _unpersist(df)
                    raise SourceError(f"cannot register {name!r}: {one_line(e)}") from None
                keep = True
            if keep:
                self._frames[name] = df  # the frozen ids / cached rows live as long as the view
            if RID in df.columns:  # the user's columns as `name`, the rows with their ids privately
                self._temp_view(self.made.new_rows_name(name), df)
                df = df.drop(RID, *getattr(source, "private", ()))
            self._temp_view(name, df)

    def _temp_view(self, name: str, df: Any) -> None:
        self.made.check_free(name)
        df.createOrReplaceTempView(self.quote(name))  # parsed: quoted
        self.made.add(name)

    def _view_plan(self, name: str) -> Any:
        """What temp view ``name`` is: its SQL text, or the hash of the plan a DataFrame's view stores (Spark keeps
        that plan object, so the hash is the same until the view is made again); another when the user replaced
        it. None where the JVM is not at hand (Spark Connect): there a replaced view is not told apart."""
        try:
            view = self.spark._jsparkSession.sessionState().catalog().getTempView(name)
            if view.isEmpty():
                return None
            plan = view.get()
            text = plan.desc().viewText()  # (a SQL view holding a Python UDF hashes anew at each read: not its text)
            return text.get() if text.isDefined() else plan.hashCode()
        except Exception:  # noqa: BLE001 - not a classic session, or another Spark's catalog: cannot tell
            return None

    def fresh_name(self, base: str) -> str:
        return self.made.fresh(base)

    def rows_name(self, name: str) -> str:
        return self.made.rows_name(name)

    # -- the user's relations: dltrace is a guest on a SparkSession passed in -----------------------------
    def exists(self, name: str) -> bool:
        """Is there a temp view or table ``name`` in this SparkSession, whoever made it?"""
        try:
            with quiet():
                return bool(self.spark.catalog.tableExists(self.quote(name)))
        except spark_errors():
            return False

    def created(self, name: str) -> bool:
        """Did this engine make temp view ``name`` (so that it may replace or drop it), and is it still its own
        (another dltrace session on the same SparkSession may have taken the name over)?"""
        return self.made.holds(name)

    def taken_over(self, name: str) -> bool:
        return self.made.taken_over(name)

    def replaced_by_user(self, names: Collection[str]) -> list[str]:
        return self.made.replaced_among(names)

    def create_view(self, name: str, query: exp.Expression) -> None:
        """A temp view ``name`` over ``query`` (a sqlglot tree), owned by this engine."""
        self.made.check_free(name)
        self.sql(exp.Create(this=exp.Table(this=exp.to_identifier(name, quoted=True)), kind="VIEW", replace=True,
                            expression=query, properties=exp.Properties(expressions=[exp.TemporaryProperty()]))
                 .sql(self.name))
        self.made.add(name)

    def adopt(self, name: str) -> None:
        """Give the user's temp view or table ``name`` a rows relation with row ids (numbered in the DataFrame's
        partition order, then frozen like a registered DataFrame), leaving ``name`` itself alone."""
        if not self.exists(name):
            hint = ("; a name is one relation of the session, not schema.table (a global temp view too): adopt a "
                    "view of it" if "." in name else "")
            raise SourceError(f"no table or temp view named {name!r} in this SparkSession{hint}")
        with quiet():
            df = native_frame(self.spark, name, self.spark.table(self.quote(name)))
            rows = self.made.new_rows_name(name)
            old = self._frames.pop(rows, None)
            self._frames[rows] = df
            self._temp_view(rows, df)
            _unpersist(old)

    def adopted_state(self, name: str) -> tuple[Hashable, int | None] | None:
        """The semantic hash of the relation's analysed plan (no job runs): a temp view replaced over other rows
        (``createOrReplaceTempView``) changes it; an INSERT into a table, whose plan reads the same table, may
        not."""
        try:
            with quiet():
                return self.spark.table(self.quote(name)).semanticHash(), None
        except spark_errors():
            if self.exists(name):
                raise
            return None

    def columns(self, name: str) -> dict[str, str]:
        try:
            with quiet():
                schema = self.spark.table(self.quote(name)).schema
        except spark_errors() as e:
            raise QueryError(f"Spark: {one_line(e)}") from None
        return {f.name: f.dataType.simpleString() for f in schema.fields if f.name != RID}

    # -- queries --------------------------------------------------------------------------------
    def _check_parser_settings(self) -> None:
        """dltrace writes and reads SQL as Spark's default parser does (sqlglot's Spark dialect, names resolved
        without case): on a session set to parse otherwise the same text is another query (`a` told from `A`, a
        "g" read as a column, '\\d' kept with its backslash). Asked at each query, since the user may change the
        settings at any time."""
        for key, default, why in _PARSER_SETTINGS:
            if str(self.spark.conf.get(key, default)).lower() != default:
                raise QueryError(f"dltrace {why}, as Spark does by default: set {key} to {default} on this "
                                 "SparkSession to run queries through dltrace")

    def sql(self, text: str) -> pa.Table:
        self._check_parser_settings()
        try:
            with quiet():
                return self.spark.sql(text).toArrow()
        except spark_errors() as e:
            raise QueryError(f"Spark: {one_line(e)}") from None
        except pa.ArrowException as e:  # (PySpark's own conversion: a VARIANT column holding a NULL, a probe found)
            raise QueryError(f"Spark: the result cannot be read as Arrow: {str(e).splitlines()[0]}") from None

    def content_hash(self, name: str, exclude: Collection[str] = ()) -> tuple[int, int]:
        """(row count, an order-independent hash of every row) of table ``name``, computed by Spark."""
        try:
            with quiet():
                fields = self.spark.table(self.quote(name)).schema.fields
        except spark_errors() as e:
            raise QueryError(f"Spark: {one_line(e)}") from None
        # Spark hashes no MAP (at any depth): such a column is hashed as its JSON text
        values = ", ".join(f"to_json({self.quote(f.name)})" if "map<" in f.dataType.simpleString()
                           else self.quote(f.name) for f in fields if f.name not in exclude)
        text = f"SELECT count(*) AS n, bit_xor(xxhash64({values})) AS h FROM {self.quote(name)}"
        out = self.sql(text)
        return int(out.column(0)[0].as_py()), int(out.column(1)[0].as_py() or 0)

    def table_column_names(self, names: list[str]) -> list[str]:
        return list(names)  # (Spark refuses a table with two columns of one name, and so does dltrace)

    def column_names(self, text: str) -> list[str]:
        """The names the engine gives the output columns of query ``text`` (analysed, not run)."""
        self._check_parser_settings()
        try:
            with quiet():
                return list(self.spark.sql(text).columns)
        except spark_errors() as e:
            raise QueryError(f"Spark: {one_line(e)}") from None

    def column_types(self, text: str) -> list[str]:
        """The SQL types of the output columns of query ``text``, as Spark spells them (analysed, not run)."""
        self._check_parser_settings()
        try:
            with quiet():
                return [f.dataType.simpleString() for f in self.spark.sql(text).schema.fields]
        except spark_errors() as e:
            raise QueryError(f"Spark: {one_line(e)}") from None

    def estimated_rows(self, text: str) -> int | None:
        """None: Spark's row count statistics exist only for analysed tables (not for temp views or cached
        DataFrames), so the rewrites that need an estimate keep their default."""
        return None

    def integer_range(self, text: str) -> tuple[int, int] | None:
        """None: Spark has no statistics of temp views or cached DataFrames (see :meth:`estimated_rows`)."""
        return None

    def collated_strings(self, names: Collection[str]) -> bool:
        """False: Spark's types show a column's collation (``string collate UTF8_LCASE``: :meth:`columns`), and
        a session's default collation applies to literals, not to the columns of its tables."""
        return False

    def volatile_functions(self, names: Collection[str]) -> frozenset[str]:
        """Empty: Spark's catalog does not say whether a registered function is deterministic (a Python UDF
        marked ``asNondeterministic()`` is known only to its plan)."""
        return frozenset()

    def functions_reading_relations(self, names: Collection[str]) -> frozenset[str]:
        """Empty: a SQL function of Spark's catalog whose body reads a table is not looked for (its body is
        known only to DESCRIBE FUNCTION's text)."""
        return frozenset()

    def materialize(self, name: str, text: str) -> None:
        self.made.check_free(name)
        try:
            with quiet():
                df = self.spark.sql(text).cache()
                df.count()
        except spark_errors() as e:
            raise QueryError(f"Spark: {one_line(e)}") from None
        old = self._frames.pop(name, None)
        self._frames[name] = df
        self._temp_view(name, df)
        _unpersist(old)

    def drop(self, name: str) -> None:
        for relation in (name, self.made.rows.get(name)):
            if relation is None:
                continue
            _unpersist(self._frames.pop(relation, None))
            if not self.made.forget(relation):
                continue
            try:
                with quiet():
                    self.spark.catalog.dropTempView(relation)
            except Exception:  # noqa: BLE001 - dropping is best effort and never raises
                pass

    def install_functions(self) -> None:
        if self._installed:
            return
        use_functions(self.spark, self, spark_udfs.install(self.spark))
        self._installed = True

    def close(self) -> None:
        """Stop the SparkSession dltrace built; on a user's session, drop only the temp views this engine made."""
        for name in list(self._frames):
            _unpersist(self._frames.pop(name))
        if self._owned:
            self.spark.stop()
            self._owned = False
            release_target(self.spark)
            return
        rows = set(self.made.rows.values())
        for view in sorted(self.made.names, key=lambda r: r in rows):
            self.drop(view)
        spark_udfs.uninstall(self.spark, set(release_functions(self.spark, self)))
        self._settings.restore(lambda key: self.spark.conf.get(key, None), self._put_setting)

    def _put_setting(self, key: str, value: Any) -> None:
        if value is None:
            self.spark.conf.unset(key)
        else:
            self.spark.conf.set(key, value)


def add_rids(spark: Any, table: str) -> None:
    """Give the user's temp view or table ``table`` the row id column ``dl_rid``: the view ``table`` is replaced
    by the same rows plus their ids (0..n-1 in the DataFrame's partition order, frozen with a local
    checkpoint), so SQL from ``dltrace.rewrite`` runs on ``spark`` as it is. A persistent table is shadowed by
    the temp view for this SparkSession only (the table itself is not written)."""
    engine = SparkEngine(spark)
    if not engine.exists(table):
        raise SourceError(f"no table or temp view named {table!r} in this SparkSession")
    with quiet():
        df = spark.table(engine.quote(table))
        if RID in [c.lower() for c in df.columns]:
            raise SourceError(f"table {table!r} already has a {RID} column")
        native_frame(spark, table, df).createOrReplaceTempView(engine.quote(table))


def _unpersist(df: Any) -> None:
    if df is not None:
        release(df)
