"""What a Spark user's own queries and data bring (found by a new user's review on Spark 4): join hints, grouping()
in a HAVING, an empty result registered, MAP columns saved and traced, a parquet column named ``_metadata``,
columns that differ only in case, a case-sensitive session, and table aliases that rename columns. Each runs with
Spark's own rows, or is refused in one line naming what to change."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dltrace

pytestmark = pytest.mark.spark

T = pa.table({"k": ["a", "b", "a"], "id": pa.array([1, 2, 3], pa.int64())})
U = pa.table({"k": ["a", "a"], "y": pa.array([10, 20], pa.int64())})


@pytest.fixture(scope="module")
def s(spark_session):
    session = dltrace.connect("spark", spark=spark_session)
    session.register("h_t", T)
    session.register("h_u", U)
    yield session
    session.close()


def rows(table: pa.Table) -> Counter:
    return Counter(repr(tuple(r.values())) for r in table.to_pylist())


@pytest.mark.parametrize("sql", [
    "SELECT /*+ BROADCAST(h_u) */ h_t.id, h_u.y FROM h_t JOIN h_u ON h_t.k = h_u.k",
    "SELECT /*+ BROADCAST(x) */ h_t.id, x.y FROM h_t JOIN h_u AS x ON h_t.k = x.k",
    "SELECT /*+ MERGE(h_t, h_u), REPARTITION(2) */ h_t.id, h_u.y FROM h_t JOIN h_u ON h_t.k = h_u.k",
])
def test_a_join_hint_names_the_querys_relations(s, spark_session, sql):
    """A hint's table was pointed at dltrace's rows relation (`BROADCAST(_dl_rows_u AS u)`, a Spark parse error)
    or looked up among the registered tables (`x`)."""
    want = rows(spark_session.sql(sql).toArrow())
    for strategy in ("set", "bitmap"):
        result = s.run(sql, lineage=strategy)
        assert rows(result.table) == want
        assert all(len(result.lineage(i)["h_u"]) == 1 for i in range(result.table.num_rows))
    assert rows(s.trace(sql).table) == want


def test_grouping_in_a_having(s, spark_session):
    """Spark 4 cannot resolve grouping(t.k) in a HAVING once the SELECT names t.k `AS k` (qualification's way)."""
    sql = "SELECT k, grouping(k) AS g, count(*) AS n FROM h_t GROUP BY ROLLUP(k) HAVING grouping(k) = 1"
    result = s.run(sql, lineage="set")
    assert result.table.to_pylist() == spark_session.sql(sql).toArrow().to_pylist() == [{"k": None, "g": 1, "n": 3}]
    assert result.lineage(0) == {"h_t": [0, 1, 2]}


def test_an_empty_set_result_registers(s):
    """PySpark 4 fails on an empty Arrow table with a nested column: a step that matched nothing could not be
    registered, its lineage views neither."""
    empty = s.run("SELECT id FROM h_t WHERE id > 100", lineage="set")
    empty.register("h_none")
    assert s.sql("SELECT count(*) AS n FROM h_none_lineage").column(0).to_pylist() == [0]
    s.register("h_step", empty)
    assert s.run("SELECT count(*) AS n FROM h_step").table.column(0).to_pylist() == [0]


def test_map_columns_are_saved_and_refused_by_name_backward(s, spark_session, tmp_path):
    """Spark hashes no MAP (`save` fingerprinted the table with xxhash64(*)) and compares none (backward tracing
    matches rows with <=>)."""
    s.register("h_m", spark_session.sql("SELECT id, map('a', id) AS mm FROM range(4)"))
    result = s.run("SELECT id, mm FROM h_m WHERE id > 0")
    result.save(tmp_path / "m")
    assert dltrace.load(tmp_path / "m", s).table.num_rows == 3
    with pytest.raises(dltrace.UnsupportedQuery, match=r"MAP column in its output \(mm\)"):
        s.trace("SELECT id, mm FROM h_m")
    assert s.trace("SELECT id FROM h_m WHERE mm['a'] > 1").table.num_rows == 2


@pytest.mark.parametrize("sql,want", [
    ("SELECT m, count(*) AS n FROM h_g GROUP BY m HAVING count(*) > 1", [(3, [0, 2, 4]), (3, [1, 3, 5])]),
    ("SELECT st, count(*) AS n FROM h_g GROUP BY st HAVING count(*) > 1", [(3, [0, 2, 4]), (3, [1, 3, 5])]),
    # an EXISTS correlated by a range: its witnesses are joined to the groups by their keys, or it is refused
    ("SELECT m, count(*) AS n FROM h_g WHERE EXISTS (SELECT 1 FROM h_g AS o WHERE o.id > h_g.id) GROUP BY m",
     "could not be decorrelated"),
])
def test_groups_by_a_map_find_their_rows_without_comparing_maps(s, spark_session, sql, want):
    """Spark groups by a MAP (or a struct holding one) and compares none: the rules that find a HAVING's kept
    groups' rows again, or join an EXISTS's witnesses to the groups, by `<=>` on the keys gave a raw Spark error
    naming dltrace's columns; such groups keep their DLUNION."""
    s.register("h_g", spark_session.sql("SELECT id, map('a', id % 2) AS m, named_struct('m', map('a', id % 2)) "
                                        "AS st FROM range(6)"), replace=True)
    if isinstance(want, str):
        with pytest.raises(dltrace.UnsupportedQuery, match=want):
            s.run(sql, lineage="bitmap")
        return
    result = s.run(sql, lineage="bitmap")
    assert sorted(result.table.column("n").to_pylist()) == sorted(r.n for r in spark_session.sql(sql).collect())
    assert sorted((result.table.column("n")[i].as_py(), sorted(result.lineage(i)["h_g"]))
                  for i in range(result.table.num_rows)) == want


def test_a_dataframe_of_another_session_is_registered_in_dltraces(spark_session):
    """A DataFrame made on `spark.newSession()` (a second notebook) had its views made in that session: the
    user's view of the same name there was replaced, the query found no rows relation, and close() left the views
    there. It is now read into dltrace's session; the other session keeps its own view, and nothing of dltrace's."""
    mine, other = spark_session.newSession(), spark_session.newSession()
    other.range(100).createOrReplaceTempView("h_x")
    s = dltrace.connect("spark", spark=mine)
    try:
        s.register("h_x", other.range(5))
        result = s.run("SELECT count(*) AS n FROM h_x")
        assert result.table.to_pylist() == [{"n": 5}] and list(result.lineage(0)["h_x"]) == [0, 1, 2, 3, 4]
        assert other.table("h_x").count() == 100
    finally:
        s.close()
    assert [t.name for t in other.catalog.listTables() if t.isTemporary] == ["h_x"]
    assert other.table("h_x").count() == 100


@pytest.mark.parametrize("make,sql", [
    # a map's entries came back in the order of a Python dict built from a Java HashMap
    ("SELECT id, map('k' || id, id, 'z', 0) AS m FROM range(4)",
     "SELECT id, map_keys(m) AS k, to_json(m) AS j FROM h_py ORDER BY id"),
    # a YEAR TO MONTH interval: "An exception was thrown from the Python worker"
    ("SELECT id, INTERVAL '1-2' YEAR TO MONTH AS ym FROM range(3)", "SELECT id, CAST(ym AS STRING) AS ym FROM h_py "
                                                                    "ORDER BY id"),
])
def test_a_dataframes_rows_never_go_through_python(s, spark_session, make, sql):
    """A DataFrame registered or adopted was numbered through Python (rdd.zipWithIndex, createDataFrame): values
    Python does not round-trip came back changed (also a TIMESTAMP in the repeated hour of a daylight-saving night,
    an hour off in the worker's local zone) or failed. Its rows are now numbered in the JVM."""
    spark_session.sql(make).createOrReplaceTempView("h_py")
    want = [r.asDict() for r in spark_session.sql(sql).collect()]
    s.adopt("h_py", replace="h_py" in s.tables)
    assert s.run(sql).table.to_pylist() == want
    s.register("h_py2", spark_session.sql(make), replace="h_py2" in s.tables)
    assert s.run(sql.replace("h_py", "h_py2")).table.to_pylist() == want


def test_adopting_a_global_temp_view_says_to_adopt_a_view_of_it(s, spark_session):
    """`s.adopt("global_temp.gv")` said there was no such view, which the user could see there."""
    spark_session.sql("SELECT 1 AS id").createOrReplaceGlobalTempView("h_gv")
    try:
        with pytest.raises(dltrace.SourceError, match=r"'global_temp.h_gv'.*not schema.table .*adopt a view of it"):
            s.adopt("global_temp.h_gv")
    finally:
        spark_session.catalog.dropGlobalTempView("h_gv")


def test_a_parquet_column_named_metadata_does_not_give_the_row_ids(s, tmp_path):
    """Row ids were read from `_metadata.row_index`, which a data column of that name shadows (every row got the
    stored 100)."""
    path = tmp_path / "meta.parquet"
    pq.write_table(pa.table({"_metadata": pa.array([{"row_index": 100}] * 3), "v": [1, 2, 3]}), path)
    s.register("h_meta", str(path))
    result = s.run("SELECT v FROM h_meta ORDER BY v")
    assert [result.lineage(i) for i in range(3)] == [{"h_meta": [0]}, {"h_meta": [1]}, {"h_meta": [2]}]


def test_columns_that_differ_only_in_case_are_refused_at_register(s):
    with pytest.raises(dltrace.SourceError, match="'a' and 'A' differ only in case"):
        s.register("h_case", pa.table({"a": [1, 2], "A": [3, 4]}))


def test_a_case_sensitive_session_is_refused_not_misread(s, spark_session):
    """With spark.sql.caseSensitive=true, `SELECT A` over columns a and A read a (names are resolved without case)."""
    spark_session.conf.set("spark.sql.caseSensitive", "true")
    try:
        with pytest.raises(dltrace.QueryError, match="spark.sql.caseSensitive"):
            s.run("SELECT id FROM h_t")
    finally:
        spark_session.conf.set("spark.sql.caseSensitive", "false")
    assert s.run("SELECT id FROM h_t").table.num_rows == 3


@pytest.mark.parametrize("key", ["spark.sql.ansi.doubleQuotedIdentifiers", "spark.sql.parser.escapedStringLiterals"])
def test_a_session_parsing_otherwise_is_refused_not_misread(s, spark_session, key):
    """Under these settings Spark read `"k"` as a column and kept the backslash of `'\\d'`, where dltrace (sqlglot's
    Spark dialect) read a string and an escape: other rows and lineage, silently."""
    spark_session.conf.set(key, "true")
    try:
        with pytest.raises(dltrace.QueryError, match=key.replace(".", r"\.")):
            s.run('SELECT "k", count(*) AS n FROM h_t GROUP BY "k"')
    finally:
        spark_session.conf.unset(key)
    assert s.run("SELECT id FROM h_t").table.num_rows == 3


def test_a_table_alias_that_renames_columns(s, spark_session):
    sql = "SELECT uu.a, uu.b FROM h_u AS uu (a, b) WHERE uu.b > 15"
    result = s.run(sql)
    assert result.table.to_pylist() == spark_session.sql(sql).toArrow().to_pylist() == [{"a": "a", "b": 20}]
    assert result.lineage(0) == {"h_u": [1]}


def test_a_collated_string_key_is_tested_once_per_group(s, spark_session):
    """Under UTF8_LCASE 'x' and 'X' are one group: a HAVING test over the key moved to the WHERE read each row's
    own text and kept a group whose key failed (found by a probe on DuckDB's NOCASE). Spark's types show the
    collation (``string collate UTF8_LCASE``): such a key is not taken for the same string on every row."""
    spark_session.createDataFrame([("x", 1), ("X", 2), ("y", 3)], "s string, x int") \
        .selectExpr("CAST(s AS STRING COLLATE UTF8_LCASE) AS s", "x").createOrReplaceTempView("h_coll")
    s.adopt("h_coll")
    s.register("h_z", pa.table({"z": ["X", "y"]}))
    sql = "SELECT s, sum(x) AS n FROM h_coll GROUP BY s HAVING CAST(s AS STRING COLLATE UTF8_BINARY) IN " \
          "(SELECT z FROM h_z)"
    expected = rows(spark_session.sql(sql).toArrow())
    try:
        got = s.run(sql)
    except dltrace.UnsupportedQuery:
        return  # refused by name: never a wrong answer
    assert rows(got.table) == expected


def test_identifier_clause_reads_the_registered_table(s):
    """``FROM IDENTIFIER('h_t')`` was refused as a table function without row ids, naming a registered table (a new
    Spark user's review): it reads the table, rows and lineage as written plainly."""
    sql = "SELECT x.id, h_u.y FROM IDENTIFIER('h_t') AS x JOIN h_u ON x.k = h_u.k"
    r, plain = s.run(sql), s.run(sql.replace("IDENTIFIER('h_t')", "h_t"))
    assert rows(r.table) == rows(plain.table) == rows(s.sql(sql))
    assert sorted(map(repr, (r.lineage(i) for i in range(r.num_rows)))) == \
        sorted(map(repr, (plain.lineage(i) for i in range(plain.num_rows))))
    assert s.trace(sql).num_rows == r.num_rows
    # impact read the tables itself and said "the query does not read table 'h_t'" (a new user's)
    assert s.impact(sql, "h_t", [0]).rows == r.forward("h_t", [0])


@pytest.mark.parametrize("clause", ["SORT BY x", "DISTRIBUTE BY x", "CLUSTER BY x"])
def test_backward_tracing_reads_past_spark_row_placement(s, clause):
    """SORT BY / DISTRIBUTE BY / CLUSTER BY on an output alias: the trace kept the clause over its match columns,
    where the alias no longer is (Spark: "x cannot be resolved"; a review's find). They keep every row."""
    sql = f"SELECT h_t.id AS x, h_t.k FROM h_t {clause}"
    forward, backward = s.run(sql), s.trace(sql)
    assert rows(forward.table) == rows(backward.table) == rows(s.sql(sql))
    by_id = {row["x"]: forward.lineage(i) for i, row in enumerate(forward.table.to_pylist())}
    assert all(backward.lineage(i) == by_id[row["x"]] for i, row in enumerate(backward.table.to_pylist()))


def test_master_beside_your_own_session_is_refused(spark_session):
    """``connect("spark", spark=spark, master="local[4]")`` dropped master without a word (a Spark tester's)."""
    with pytest.raises(dltrace.ArgumentError, match="master= builds a SparkSession, and spark= gives yours"):
        dltrace.connect("spark", spark=spark_session, master="local[4]")


def test_a_python_function_that_raises_says_what_it_raised(s, spark_session):
    """The error read "Spark: An exception was thrown from the Python worker:" and stopped (a Spark tester's)."""
    spark_session.udf.register("test_boom", lambda x: 1 / 0, "double")
    try:
        for ask in (s.run, s.sql):
            with pytest.raises(dltrace.QueryError, match="Python worker: ZeroDivisionError: division by zero"):
                ask("SELECT test_boom(id) AS b FROM h_t")
    finally:
        spark_session.sql("DROP TEMPORARY FUNCTION IF EXISTS test_boom")
