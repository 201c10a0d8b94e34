"""Everything that depends on which engine runs: the adapters, their lineage SQL and their dl_* functions.

The rule: nothing outside ``engines/`` knows which engine runs (``tests/test_engine_boundary.py`` checks it).
Other code reaches an engine through the :class:`~dltrace.engines.base.Engine` protocol, the lineage SQL of a
dialect through :func:`lineage_functions` (and what its engine adds to sqlglot's generator through
:func:`generator_transforms`), and a user's own connection through :func:`install_functions_on`.

Per engine, beside each other: the adapter (``duckdb.py``, ``spark.py``, with ``duckdb_sources.py`` registering a
source as DuckDB relations and ``spark_frames.py`` reading one as a DataFrame, with its row ids: they import the
engine's library), its lineage SQL (``duckdb_sql.py``, ``spark_sql.py``: pure sqlglot, so ``dltrace.rewrite()``
runs with no engine installed or started) and the installation of its dl_* functions (``duckdb_udfs.py``,
``spark_udfs.py``). The engine-free parts (the Engine protocol and who made each relation, the table sources, the
shared lineage SQL builders) are ``base.py``, ``sources.py`` and ``lineage_sql.py``.
"""

from __future__ import annotations

from typing import Any

from dltrace.engines import duckdb as duckdb_adapter
from dltrace.engines import spark as spark_adapter
from dltrace.engines.base import Engine, types_show_collation
from dltrace.engines.duckdb_sql import DuckDBFunctions
from dltrace.engines.lineage_sql import (
    BITS64,
    EMPTY_BITMAP32,
    EMPTY_BITMAP64,
    STRATEGIES,
    GeneratorTransforms,
    LineageFunctions,
)
from dltrace.engines.sources import RID, resolve_source
from dltrace.engines.spark_sql import SparkFunctions
from dltrace.errors import ArgumentError, DltraceError, UnknownChoice, check_count, got

ENGINES = ("duckdb", "spark")

# sqlglot dialect name -> the lineage SQL of the engine that runs that dialect
_FUNCTIONS: dict[str, type[LineageFunctions]] = {
    name: functions for functions in (DuckDBFunctions, SparkFunctions) for name in functions.dialects
}


def make_engine(kind: str, **options: Any) -> Engine:
    """Build the adapter for ``kind`` ("duckdb" or "spark"); options go to its constructor."""
    if kind not in ENGINES:
        raise UnknownChoice(f"unknown engine {kind!r}: choose one of {', '.join(ENGINES)}")
    takes = _OPTIONS[kind]
    unknown = sorted(set(options) - set(takes)) if kind == "duckdb" else []  # (Spark takes any spark.* setting)
    if kind == "spark" and "threads" in options:  # (spark.threads is no setting: Spark sets it and reads nothing)
        raise ArgumentError("connect('spark') takes no option 'threads' (DuckDB's): a local Spark's threads are "
                            "its master, master='local[4]'")
    if unknown:
        raise ArgumentError(f"connect({kind!r}) takes no option {unknown[0]!r}: it takes {', '.join(takes)}")
    _check_numbers(kind, options)
    if kind == "duckdb":
        connection = options.get("connection")
        if connection is not None and not duckdb_adapter.owns(connection):
            raise ArgumentError(f"connection= must be a DuckDB connection, got {type(connection).__name__}")
        return duckdb_adapter.DuckDBEngine(**options)
    spark = options.get("spark")
    if spark is not None and not spark_adapter.owns(spark):
        raise ArgumentError(f"spark= must be a SparkSession, got {type(spark).__name__}")
    if spark is not None and "master" in options:  # (it was dropped without a word: a Spark tester's)
        raise ArgumentError("master= builds a SparkSession, and spark= gives yours, whose master stays: pass one")
    return spark_adapter.SparkEngine(**options)  # (pyspark itself is imported only when a session starts)


# the options each engine's constructor names (Spark's others are spark.* settings of a session it builds)
_OPTIONS = {"duckdb": ("connection", "threads"), "spark": ("spark", "master")}


def _check_numbers(kind: str, options: dict[str, Any]) -> None:
    """Refuse an option of the wrong type before the engine reads it: DuckDB's ``SET threads`` took int(1.5) as 1,
    int("x") raised a ValueError and -1 DuckDB's own syntax error."""
    if kind == "duckdb" and options.get("threads") is not None:
        check_count(options["threads"], "threads", least=1)
    if kind == "spark" and not isinstance(options.get("master", ""), str):
        raise ArgumentError(f"master must be a string such as 'local[2]', got {got(options['master'])}")
    if kind == "spark":
        # a Spark setting's value is text or a number: anything else is an option misspelt (session=spark was
        # set as spark.session on the user's session, and dltrace went on on the active one)
        for key, value in options.items():
            if key in _OPTIONS["spark"] or isinstance(value, (str, int, float)):  # (a bool is an int)
                continue
            if key.startswith("spark."):
                raise ArgumentError(f"Spark setting {key!r} takes text or a number, got {got(value)}")
            raise ArgumentError(f"connect('spark') takes no option {key!r}: it takes spark= (your SparkSession), "
                                f"master= and Spark settings (spark.* names, or driver_memory=...) whose values "
                                f"are text or numbers, got {got(value)}")


# What a command line may set when it opens each engine, and which engines take long enough to start that a
# user should be told (a JVM).
_COMMAND_LINE_OPTIONS = {"duckdb": (), "spark": ("master",)}
_SLOW_TO_START = frozenset({"spark"})


def command_line_options(kind: str) -> tuple[str, ...]:
    """The constructor options of engine ``kind`` a command line passes on (e.g. Spark's ``master``)."""
    return _COMMAND_LINE_OPTIONS.get(kind, ())


def starts_slowly(kind: str) -> bool:
    """Does starting engine ``kind`` take seconds (worth a status line)?"""
    return kind in _SLOW_TO_START


def lineage_functions(dialect: str, strategy: str, finish_on_read: bool = False) -> LineageFunctions:
    """The builders of lineage SQL in sqlglot dialect ``dialect`` for ``strategy`` ("set" or "bitmap");
    ``finish_on_read``: for a session's result, which finishes the final columns when first read."""
    functions = _FUNCTIONS.get(dialect.lower())
    if functions is None:
        raise DltraceError(
            f"no engine runs the dialect {dialect!r}: lineage SQL is written for {', '.join(_FUNCTIONS)}"
        )
    return functions(dialect, strategy, finish_on_read)


def _own_dialect(dialect: str) -> type[LineageFunctions] | None:
    """The lineage functions of the engine whose own dialect ``dialect`` is (not a dialect it also writes)."""
    functions = _FUNCTIONS.get(dialect.lower())
    return functions if functions is not None and dialect.lower() == functions.dialects[0] else None


def generator_transforms(dialect: str) -> GeneratorTransforms:
    """What an engine adds to sqlglot's generator of its own dialect ``dialect`` (functions sqlglot does not
    transpile there); nothing for any other dialect, whether an engine runs it or not."""
    functions = _own_dialect(dialect)
    return dict(functions.generator_transforms) if functions is not None else {}


def string_escapes(dialect: str) -> tuple[str, ...] | None:
    """How the engine of ``dialect`` escapes characters in a string literal, where sqlglot's tokenizer of its own
    dialect reads them otherwise; None for any other dialect."""
    functions = _own_dialect(dialect)
    return functions.string_escapes if functions is not None else None


def string_agg_separator(dialect: str) -> str | None:
    """What the engine of ``dialect`` joins ``string_agg`` values with when the query gives no separator; None for a
    dialect no engine runs."""
    functions = _own_dialect(dialect)
    return functions.string_agg_separator if functions is not None else None


def names_columns_as_written(dialect: str) -> bool:
    """Does the engine of ``dialect`` name a bare column in a SELECT list as the query spells it (Spark), rather
    than as its table stores it (DuckDB)? False for a dialect no engine runs."""
    functions = _FUNCTIONS.get(dialect.lower())
    return bool(functions is not None and functions.names_columns_as_written)


def aggregates_over_no_rows(dialect: str) -> tuple[dict, dict]:
    """What the engine of ``dialect`` gives an aggregate over no rows: ({sqlglot class: value}, {name: value}), the
    values "null", "zero" or "empty_array"; nothing for a dialect no engine runs."""
    functions = _FUNCTIONS.get(dialect.lower())
    return (functions.empty_by_class, functions.empty_by_name) if functions is not None else ({}, {})


def install_functions_on(target: Any) -> None:
    """Register the dl_* SQL functions on a user's own DuckDB connection or SparkSession."""
    for adapter in (duckdb_adapter, spark_adapter):
        if adapter.owns(target):
            adapter.install_functions_on(target)
            return
    raise ArgumentError(f"cannot install dl_* functions on a {type(target).__name__}: pass a DuckDB connection or "
                        f"SparkSession")


def add_rids_on(target: Any, table: str) -> None:
    """Give the user's own ``table`` on a DuckDB connection or SparkSession its row id column ``dl_rid``."""
    for adapter in (duckdb_adapter, spark_adapter):
        if adapter.owns(target):
            adapter.add_rids(target, table)
            return
    raise ArgumentError(f"cannot add row ids on a {type(target).__name__}: pass a DuckDB connection or SparkSession")


__all__ = [
    "BITS64", "EMPTY_BITMAP32", "EMPTY_BITMAP64", "ENGINES", "RID", "STRATEGIES", "Engine", "GeneratorTransforms",
    "LineageFunctions", "add_rids_on", "generator_transforms", "install_functions_on", "lineage_functions", "make_engine",
    "string_escapes",
    "names_columns_as_written",
    "aggregates_over_no_rows",
    "resolve_source",
    "types_show_collation",
]
