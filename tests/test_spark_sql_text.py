"""Spark SQL text read and written as Spark runs it (found by a new user's review on Spark 4): a doubled quote
inside a string literal is a quote ('a''b' is a'b; sqlglot's Spark dialect read two strings concatenated), an
exact percentile stays exact (sqlglot wrote percentile_cont ... WITHIN GROUP as PERCENTILE_APPROX), and a
generator of several columns without their names is refused by name (qualification named it once)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pyarrow as pa
import pytest

import dltrace
from dltrace.rewriter.grammar import generate, parse

pytestmark = pytest.mark.spark

T = pa.table({"id": pa.array([1, 2, 3, 4], pa.int32()), "s": ["a'b", "ab", "it's", "x"],
              "x": pa.array([10, 30, 20, 40], pa.int64()), "k": pa.array([1, 1, 2, 2], pa.int32())})

QUERIES = [
    "SELECT id, s FROM q_t WHERE s = 'a''b'",
    "SELECT id FROM q_t WHERE s IN ('a''b', 'it''s')",
    "SELECT 'it''s' AS a, 'a' 'b' AS b, 'c\\'d' AS c, id FROM q_t WHERE id = 1",
    "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) AS p FROM q_t",
    "SELECT k, percentile_cont(0.25) WITHIN GROUP (ORDER BY x DESC) AS p, "
    "percentile_disc(0.5) WITHIN GROUP (ORDER BY x) AS d FROM q_t GROUP BY k",
    # Spark 4's TIME literal and parse_json (sqlglot wrote a TIMESTAMP of today's date, and the text unparsed)
    "SELECT id, TIME '06:30:45' AS t FROM q_t WHERE TIME '06:30:45' < TIME '07:00:00' AND id < 3",
    "SELECT id, to_json(parse_json('{\"a\": ' || CAST(x AS STRING) || '}')) AS j, "
    "variant_get(parse_json('{\"a\": ' || CAST(x AS STRING) || '}'), '$.a', 'int') AS a FROM q_t",
]


@pytest.fixture(scope="module")
def s(spark_session):
    session = dltrace.connect("spark", spark=spark_session)
    session.register("q_t", T)
    yield session
    session.close()


def test_the_text_as_written():
    tree = parse("SELECT 'a''b' AS x, percentile_cont(0.5) WITHIN GROUP (ORDER BY y) AS p FROM t", "spark")[0]
    assert generate(tree, "spark") == "SELECT 'a\\'b' AS x, PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY y) AS p FROM t"


def test_time_and_json_as_written():
    tree = parse("SELECT TIME '06:30:45' AS t, CAST(c AS TIME(3)) AS u, CAST(c AS TIMESTAMP) AS v, parse_json(j) AS w, "
                 "to_json(parse_json(j)) AS x, to_json(parse_json('{\"a\": 1}')) AS y FROM t", "spark")[0]
    assert generate(tree, "spark") == ("SELECT TIME '06:30:45' AS t, CAST(c AS TIME(3)) AS u, CAST(c AS TIMESTAMP) AS v, "
                                       "PARSE_JSON(j) AS w, TO_JSON(PARSE_JSON(j)) AS x, "
                                       "TO_JSON(PARSE_JSON('{\"a\": 1}')) AS y FROM t")


@pytest.mark.parametrize("sql", QUERIES)
def test_rows_are_sparks_own(s, spark_session, sql):
    engine = sorted(repr(tuple(r)) for r in spark_session.sql(sql).collect())
    for lineage in (None, "set", "bitmap"):
        r = s.run(sql, lineage=lineage)
        assert sorted(repr(tuple(row.values())) for row in r.table.to_pylist()) == engine
        assert r.table.schema.types == [f.type for f in s.sql(sql).schema]


def test_a_generator_of_several_columns_needs_their_names(s):
    s.register("q_tags", pa.table({"id": [1], "tags": pa.array([[1, 2]], pa.list_(pa.int32()))}))
    with pytest.raises(dltrace.UnsupportedQuery, match=r"POSEXPLODE\(...\) in the SELECT list without AS"):
        s.run("SELECT id, posexplode(tags) FROM q_tags")
    r = s.run("SELECT id, posexplode(tags) AS (p, t) FROM q_tags")
    assert sorted(tuple(row.values()) for row in r.table.to_pylist()) == [(1, 0, 1), (1, 1, 2)]
    assert [r.lineage(i) for i in range(r.num_rows)] == [{"q_tags": [0]}, {"q_tags": [0]}]


STRUCTS = [
    "SELECT Id, struct(Id, NaMe) AS st, struct(q.name, Id + 1) AS t FROM q_named AS q",
    "SELECT named_struct('CamelKey', Id) AS st, to_json(struct(NaMe AS TheName, Id)) AS j FROM q_named",
    "SELECT CAST(struct(Id, NaMe) AS STRUCT<ID: INT, Nm: STRING>) AS st FROM q_named",
    "SELECT to_json(collect_list(struct(NaMe, Id))) AS j FROM q_named",
    # a one-field named_struct on the left of IN (subquery): sqlglot wrote STRUCT(k AS K), which Spark unpacks there
    "SELECT Id FROM q_named WHERE named_struct('K', Id) IN (SELECT named_struct('K', Id) FROM q_named WHERE Id > 1)",
    "SELECT Id, named_struct('K', Id) IN (SELECT named_struct('K', Id) FROM q_named WHERE Id > 1) AS f FROM q_named",
]


@pytest.mark.parametrize("sql", STRUCTS)
def test_struct_fields_keep_the_names_spark_gives(s, spark_session, sql):
    """Qualification lower-cased every struct field name: `named_struct('CamelKey', id)` came back as camelkey, and
    to_json wrote "name" for Spark's "Name" (a new user's review on Spark). Spark names a field as written, a bare
    column's as the reference is written, an expression's col<n>."""
    s.register("q_named", pa.table({"Id": pa.array([1, 2], pa.int32()), "NaMe": ["a", "b"]}), replace=True)
    engine = spark_session.sql(sql).toArrow()
    for lineage in ("set", "bitmap"):
        r = s.run(sql, lineage=lineage)
        assert r.table.schema.types == engine.schema.types and r.table.column_names == engine.column_names
        assert sorted(map(repr, r.table.to_pylist())) == sorted(map(repr, engine.to_pylist()))


NULL_SAFE = [
    "SELECT Id FROM q_named AS c LEFT SEMI JOIN q_keys AS u ON u.k <=> c.Id",
    "SELECT Id, NaMe FROM q_named AS c WHERE EXISTS (SELECT 1 FROM q_keys AS u WHERE u.k <=> c.Id AND u.w > 0)",
    "SELECT Id, (SELECT sum(w) FROM q_keys AS u WHERE u.k <=> c.Id) AS s FROM q_named AS c",
]


@pytest.mark.parametrize("sql", NULL_SAFE)
def test_a_null_safe_correlation_is_decorrelated(s, spark_session, sql):
    """`LEFT SEMI JOIN u ON u.k <=> c.id` was refused as an EXISTS correlated through <=> (a new user's review on
    Spark): it is an equality of one-field structs, which Spark compares with NULL equal to NULL."""
    s.register("q_named", pa.table({"Id": pa.array([1, 2, None], pa.int32()), "NaMe": ["a", "b", "c"]}), replace=True)
    keys = {"k": pa.array([1, None, None, 3], pa.int32()), "w": pa.array([5, 6, 7, 8], pa.int32())}
    s.register("q_keys", pa.table(keys), replace=True)
    engine = sorted(map(repr, spark_session.sql(sql).toArrow().to_pylist()))
    for lineage in ("set", "bitmap"):
        r = s.run(sql, lineage=lineage)
        assert sorted(map(repr, r.table.to_pylist())) == engine
        by_id = {row["Id"]: r.lineage(i) for i, row in enumerate(r.table.to_pylist())}
        assert by_id[None]["q_keys"] == [1, 2]  # (the NULL key's rows)
        assert by_id[None]["q_named"] == [2]


def test_structs_and_null_safe_keys_as_spark_reads_them(s, spark_session):
    """The review of the change: a struct(...) on the left of IN (subquery), which Spark unpacks into a row value,
    stays STRUCT (a named_struct stays NAMED_STRUCT, which it does not unpack); a <=> correlation between TIMESTAMPs
    or a string and lower() of one is decorrelated; between `d + 0` and a DECIMAL column, which sqlglot and Spark
    type apart, it is refused by name (it was a Spark analysis error)."""
    s.register("q_n", pa.table({"Id": pa.array([1, 2, None, 2], pa.int32()), "NaMe": ["a", "b", "c", None]}),
               replace=True)
    s.register("q_v", pa.table({"k": pa.array([2, None, 5], pa.int32()), "s": ["b", "c", "z"]}), replace=True)
    ts = pa.array([datetime.datetime(2020, 1, 1), None], pa.timestamp("us", tz="UTC"))
    d = pa.array([Decimal("2.00"), None], pa.decimal128(10, 2))
    s.register("q_o", pa.table({"ts": ts, "s": ["a", None], "d": d, "x": pa.array([1, 2], pa.int32())}), replace=True)
    s.register("q_i", pa.table({"ts": ts, "s": ["A", None], "d": d}), replace=True)
    for sql in ["SELECT Id FROM q_n WHERE struct(Id) NOT IN (SELECT k FROM q_v WHERE k IS NOT NULL)",
                "SELECT Id FROM q_n WHERE struct(Id AS a, NaMe AS b) NOT IN (SELECT k, s FROM q_v WHERE k IS NOT NULL)",
                "SELECT Id FROM q_n WHERE named_struct('K', Id) IN (SELECT named_struct('K', k) FROM q_v)",
                "SELECT x FROM q_o AS o WHERE EXISTS (SELECT 1 FROM q_i AS i WHERE i.ts <=> o.ts)",
                "SELECT x FROM q_o AS o WHERE EXISTS (SELECT 1 FROM q_i AS i WHERE lower(i.s) <=> o.s)"]:
        r = s.run(sql, lineage="bitmap")
        assert sorted(map(repr, r.table.to_pylist())) == sorted(map(repr, spark_session.sql(sql).toArrow().to_pylist()))
    with pytest.raises(dltrace.UnsupportedQuery, match="correlated through IS NOT DISTINCT FROM"):
        s.run("SELECT x FROM q_o AS o WHERE EXISTS (SELECT 1 FROM q_i AS i WHERE i.d + 0 <=> o.d)")


@pytest.mark.parametrize("sql", [
    "SELECT k, count(*) AS n, grouping(k) AS g FROM q_t GROUP BY ROLLUP (k) ORDER BY grouping(k), k",
    "SELECT k, count(*) AS n, grouping_id(k) AS g FROM q_t GROUP BY CUBE (k) ORDER BY grouping_id(k) DESC, k",
])
def test_an_order_by_grouping_call_the_query_selects_is_its_position(s, spark_session, sql):
    """Spark fails on ``ORDER BY grouping(k)`` once the item of ``k`` has an alias (GROUPING_COLUMN_MISMATCH), and
    qualification names every item: a key that is a selected call orders by its position (a new user's)."""
    got = s.run(sql)
    assert got.table.to_pylist() == [r.asDict() for r in spark_session.sql(sql).collect()]


def test_an_order_by_grouping_call_not_selected_is_refused_with_the_way_round(s):
    with pytest.raises(dltrace.UnsupportedQuery, match=r"grouping\(\) of a column in ORDER BY is not supported on this "
                                                       r"engine .* select it with a name and order by that name"):
        s.run("SELECT k, count(*) AS n FROM q_t GROUP BY ROLLUP (k) ORDER BY grouping(k), k")


@pytest.mark.parametrize("sql", [
    "SELECT id FROM q_t WHERE id NOT IN ((SELECT k FROM q_t WHERE k > 100))",
    "SELECT id, id IN ((SELECT k FROM q_t WHERE k > 100)) AS f FROM q_t",
    "SELECT id FROM q_t WHERE id IN ((SELECT max(k) FROM q_t))",
])
def test_in_over_a_query_in_two_parentheses_is_a_list_of_one_scalar(s, spark_session, sql):
    """Spark reads ``x IN ((SELECT ...))`` as a list holding one scalar subquery: over no row NOT IN is NULL (no
    row kept), not TRUE; dltrace read it as IN (SELECT ...) and kept every row (a review)."""
    engine = sorted(repr(tuple(r)) for r in spark_session.sql(sql).collect())
    for lineage in ("set", "bitmap"):
        assert sorted(repr(tuple(row.values())) for row in s.run(sql, lineage=lineage).table.to_pylist()) == engine
