"""The values over no rows that passes/empty_aggregates.py states, checked on each engine, and the rewrite of a
correlated scalar subquery over such aggregates run on Spark against Spark's own answer.

Every aggregate the module lists has a sample call here (a test fails when one is listed without); each sample is
evaluated by the engine over no rows, where it must give the value the module states, and -- where that value is
not NULL, read through ``COALESCE`` -- over rows of NULLs too, where it must not be NULL (a COALESCE would
change it). The two engines differ (``count_if``, ``array_agg``), so each has its own samples.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
import sqlglot
from sqlglot import exp

import dltrace
from dltrace.engines import aggregates_over_no_rows, lineage_functions
from dltrace.rewriter.passes.empty_aggregates import aggregate_call, over_no_rows

# the columns the samples read: x, y integers, s a string, b a boolean
DUCKDB_SAMPLES = [
    "sum(x)", "avg(x)", "min(x)", "max(x)", "string_agg(s, ',')", "bool_or(b)", "bool_and(b)", "first(x)",
    "last(x)", "arg_max(x, y)", "arg_min(x, y)", "any_value(x)", "median(x)", "mode(x)", "stddev(x)",
    "stddev_pop(x)", "stddev_samp(x)", "variance(x)", "var_pop(x)", "kurtosis(x)", "skewness(x)", "corr(x, y)",
    "covar_pop(x, y)", "covar_samp(x, y)", "regr_slope(x, y)", "regr_intercept(x, y)", "regr_avgx(x, y)",
    "regr_avgy(x, y)", "regr_r2(x, y)", "regr_sxx(x, y)", "regr_syy(x, y)", "regr_sxy(x, y)", "quantile(x, 0.5)",
    "approx_quantile(x, 0.5)", "quantile_cont(x, 0.5)", "quantile_disc(x, 0.5)", "bit_and(x)", "bit_or(x)",
    "bit_xor(x)", "count(x)", "approx_count_distinct(x)", "regr_count(x, y)", "list(x)", "count_if(b)",
    "arbitrary(x)", "arg_max_null(x, y)", "arg_max_nulls_last(x, y)", "arg_min_null(x, y)",
    "arg_min_nulls_last(x, y)", "bitstring_agg(x, 1, 10)", "favg(x)", "fsum(x)", "histogram(x)",
    "histogram_exact(x, [1, 2])", "kahan_sum(x)", "kurtosis_pop(x)", "lttb(x, y, 2)", "mad(x)", "mean(x)",
    "product(x)", "reservoir_quantile(x, 0.5)", "sem(x)", "sum_no_overflow(x)", "sumkahan(x)", "count_star()",
    "entropy(x)", "geomean(x)", "geometric_mean(x)", "weighted_avg(x, y)", "wavg(x, y)", "json_group_array(x)",
    "json_group_object('k', x)", "json_group_structure(to_json(x))", "variant_group_array(x)",
    # a FILTER reads fewer rows; the value over none is the aggregate's
    "count(*) FILTER (WHERE x > 0)", "list(x) FILTER (WHERE x > 0)",
]
SPARK_SAMPLES = [
    "sum(x)", "avg(x)", "min(x)", "max(x)", "string_agg(s, ',')", "bool_or(b)", "bool_and(b)", "first(x)",
    "last(x)", "max_by(x, y)", "min_by(x, y)", "any_value(x)", "median(x)", "mode(x)", "stddev(x)",
    "stddev_pop(x)", "stddev_samp(x)", "variance(x)", "var_pop(x)", "kurtosis(x)", "skewness(x)", "corr(x, y)",
    "covar_pop(x, y)", "covar_samp(x, y)", "regr_slope(x, y)", "regr_intercept(x, y)", "regr_avgx(x, y)",
    "regr_avgy(x, y)", "regr_r2(x, y)", "regr_sxx(x, y)", "regr_syy(x, y)", "regr_sxy(x, y)",
    "percentile(x, 0.5)", "percentile_approx(x, 0.5)", "percentile_cont(0.5) WITHIN GROUP (ORDER BY x)",
    "percentile_disc(0.5) WITHIN GROUP (ORDER BY x)", "bit_and(x)", "bit_or(x)", "bit_xor(x)", "count(x)",
    "approx_count_distinct(x)", "regr_count(x, y)", "collect_list(x)", "collect_set(x)", "count_if(b)",
    "every(b)", "some(b)", "std(x)", "histogram_numeric(x, 2)", "try_avg(x)", "try_sum(x)",
    "count(*) FILTER (WHERE x > 0)", "collect_list(x) FILTER (WHERE x > 0)",
]
_EXPECTED = {"null": lambda v: v is None, "zero": lambda v: v == 0, "empty_array": lambda v: list(v) == []}


def _stated(sample: str, dialect: str) -> tuple[exp.Expression, str | None]:
    """The sample's aggregate call (as passes/known_aggregates.py reads the engine's names sqlglot does not know)
    and the value over no rows the module states for it."""
    select = sqlglot.parse_one(f"SELECT {sample} FROM z", read=dialect)
    names = lineage_functions(dialect, "set").aggregate_functions
    for call in list(select.find_all(exp.Anonymous)):
        if call.name.lower() in names:
            call.replace(exp.AnonymousAggFunc(this=call.name, expressions=call.expressions))
    call = aggregate_call(select.expressions[0])
    return call, over_no_rows(call, dialect) if call is not None else None


@pytest.mark.parametrize("dialect,samples", [("duckdb", DUCKDB_SAMPLES), ("spark", SPARK_SAMPLES)])
def test_every_listed_aggregate_has_a_sample(dialect, samples):
    stated = [_stated(sample, dialect) for sample in samples]
    assert all(value is not None for _, value in stated), [s for s, (_, v) in zip(samples, stated) if v is None]
    classes = {type(call) for call, _ in stated}
    names = {call.name.lower() for call, _ in stated if type(call) is exp.AnonymousAggFunc}
    by_class, by_name = aggregates_over_no_rows(dialect)
    assert set(by_class) <= classes
    assert set(by_name) <= names


def _check(samples, dialect, evaluate):
    """Evaluate every sample over no rows and over two rows of NULLs (``evaluate(items, source)`` -> one row)."""
    stated = [_stated(sample, dialect)[1] for sample in samples]
    items = ", ".join(f"{sample} AS c{i}" for i, sample in enumerate(samples))
    empty = evaluate(items, "z WHERE false")
    nulls = evaluate(items, "n")
    for sample, value, over_none, over_nulls in zip(samples, stated, empty, nulls):
        assert _EXPECTED[value](over_none), (sample, value, over_none)
        if value != "null":  # (read through COALESCE: never NULL over rows)
            assert over_nulls is not None, (sample, over_nulls)


def test_duckdb_gives_the_values_over_no_rows_stated():
    con = duckdb.connect()
    con.execute("CREATE TABLE z AS SELECT * FROM (VALUES (1, 2, 'a', true)) AS v(x, y, s, b)")
    con.execute("CREATE TABLE n AS SELECT * FROM (VALUES (NULL::INT, NULL::INT, NULL::VARCHAR, NULL::BOOLEAN), "
                "(NULL, NULL, NULL, NULL)) AS v(x, y, s, b)")
    _check(DUCKDB_SAMPLES, "duckdb", lambda items, source: con.execute(f"SELECT {items} FROM {source}").fetchone())


@pytest.mark.spark
def test_spark_gives_the_values_over_no_rows_stated(spark_session):
    spark_session.sql("CREATE OR REPLACE TEMP VIEW z AS SELECT * FROM VALUES (1, 2, 'a', true) AS v(x, y, s, b)")
    spark_session.sql("CREATE OR REPLACE TEMP VIEW n AS SELECT * FROM VALUES (CAST(NULL AS INT), CAST(NULL AS INT), "
                      "CAST(NULL AS STRING), CAST(NULL AS BOOLEAN)), (NULL, NULL, NULL, NULL) AS v(x, y, s, b)")
    try:
        _check(SPARK_SAMPLES, "spark", lambda items, source: spark_session.sql(f"SELECT {items} FROM {source}")
               .collect()[0])
    finally:
        spark_session.catalog.dropTempView("z")
        spark_session.catalog.dropTempView("n")


# -- the rewrite on Spark: Spark's own answer, the lineage by hand ---------------------------------------------

T = pa.table({"k": pa.array([1, 2, 3, None], pa.int64()), "y": pa.array([10, 20, 30, 40], pa.int64())})
U = pa.table({"k": pa.array([1, 1, 2, None, 4], pa.int64()), "x": pa.array([5, 6, None, 8, 9], pa.int64()),
              "name": ["a", "b", "c", "d", "e"]})
# u's rows per t row (u.k = t.k): k 1 -> 0, 1; k 2 -> 2 (x NULL); k 3 and NULL -> none
WITNESSES = {10: [0, 1], 20: [2], 30: [], 40: []}
SPARK_QUERIES = [
    # Spark's arrays are empty over no rows (DuckDB's list: NULL), its count_if 0 (DuckDB's: NULL)
    "SELECT t.y, (SELECT sort_array(collect_list(u.x)) FROM u WHERE u.k = t.k) AS v FROM t",
    "SELECT t.y, (SELECT sort_array(collect_set(u.name)) FROM u WHERE u.k = t.k) AS v FROM t",
    "SELECT t.y, (SELECT size(collect_list(u.x)) + 1 FROM u WHERE u.k = t.k) AS v FROM t",
    "SELECT t.y, (SELECT count_if(u.x > 5) FROM u WHERE u.k = t.k) AS v FROM t",
    "SELECT t.y, (SELECT count(*) FILTER (WHERE u.x > 5) FROM u WHERE u.k = t.k) AS v FROM t",
    "SELECT t.y, (SELECT collect_list(u.name) FILTER (WHERE u.x > 5) FROM u WHERE u.k = t.k) AS v FROM t",
    "SELECT t.y, (SELECT bool_or(u.x > 5) FROM u WHERE u.k = t.k) AS v FROM t",
    "SELECT t.y, (SELECT every(u.x > 5) FROM u WHERE u.k = t.k) AS v FROM t",
    "SELECT t.y, (SELECT string_agg(u.name, ',') WITHIN GROUP (ORDER BY u.name) FROM u WHERE u.k = t.k) AS v FROM t",
    "SELECT t.y, (SELECT max_by(u.name, u.x) FROM u WHERE u.k = t.k) AS v FROM t",
    "SELECT t.y, (SELECT approx_count_distinct(u.x) FROM u WHERE u.k = t.k) AS v FROM t",
    "SELECT t.y, (SELECT percentile(u.x, 0.5) FROM u WHERE u.k = t.k) AS v FROM t",
    "SELECT t.y FROM t WHERE (SELECT count_if(u.x > 5) FROM u WHERE u.k = t.k) = 0",
]


@pytest.mark.spark
@pytest.mark.parametrize("sql", SPARK_QUERIES)
def test_on_spark_a_correlated_scalar_over_another_aggregate(spark_session, sql):
    session = dltrace.connect("spark", spark=spark_session)
    try:
        session.register("t", T)
        session.register("u", U)
        own = session.sql(sql)
        result = session.run(sql)
        assert sorted(map(repr, result.table.to_pylist())) == sorted(map(repr, own.to_pylist()))
        # the same types (a COALESCE-filled column is not nullable where Spark's own may be: the values agree)
        assert [f.type for f in result.table.schema] == [f.type for f in own.schema]
        for i, row in enumerate(result.table.to_pylist()):  # (in WHERE: the kept rows, their comparison TRUE)
            got = {t: list(ids) for t, ids in result.lineage(i).items() if len(ids)}
            want = {"t": [T["y"].to_pylist().index(row["y"])]}
            if WITNESSES[row["y"]]:
                want["u"] = WITNESSES[row["y"]]
            assert got == want, (row, got, want)
    finally:
        session.close()


@pytest.mark.parametrize("dialect,call,name", [
    ("spark", "count_min_sketch(u.c, 0.5d, 0.5d, 1)", "COUNT_MIN_SKETCH"),  # (a binary state over no rows)
    ("spark", "hll_sketch_agg(u.c)", "HLL_SKETCH_AGG"),
    ("duckdb", "approx_top_k(u.c, 2)", "APPROX_TOP_K"),
    ("duckdb", "len(approx_top_k(u.c, 2)) + count(*)", "APPROX_TOP_K"),  # (inside an expression of aggregates)
])
def test_an_aggregate_whose_value_over_no_rows_is_not_stated_is_refused_by_name(dialect, call, name):
    sql = f"SELECT t.a, (SELECT {call} FROM u WHERE u.a = t.a) AS v FROM t"
    schema = {"t": {"a": "BIGINT"}, "u": {"a": "BIGINT", "c": "BIGINT"}}
    with pytest.raises(dltrace.UnsupportedQuery, match=rf"\(SCALAR over {name}, whose value over no rows dltrace "
                                                        rf"does not know on {dialect}\), at line 1, col"):
        dltrace.rewrite(sql, dialect=dialect, schema=schema)


def test_a_users_aggregate_is_the_engines_error_not_an_answer():
    """A function dltrace does not know as an aggregate (a DuckDB macro over sum) reads as a lookup of a value:
    the engine refuses the MAX() around it as a nested aggregate, and that error is returned."""
    session = dltrace.connect("duckdb")
    try:
        session.register("t", pa.table({"a": [1, 2]}))
        session.register("u", pa.table({"a": [1, 1], "c": [5, 6]}))
        session.engine.sql("CREATE MACRO twice_the_sum(x) AS sum(x) * 2")  # (the engine's own statement)
        sql = "SELECT t.a, (SELECT twice_the_sum(u.c) FROM u WHERE u.a = t.a) AS v FROM t"
        assert sorted(session.sql(sql).to_pylist(), key=repr) == [{"a": 1, "v": 22}, {"a": 2, "v": None}]
        with pytest.raises(dltrace.QueryError, match="nested"):
            session.run(sql)
    finally:
        session.close()
