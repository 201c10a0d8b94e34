"""SEMI / ANTI joins (DuckDB's ``SEMI JOIN``, Spark's ``LEFT SEMI JOIN``) run as [NOT] EXISTS
(passes/semi_joins.py): the engine's rows, and each row's lineage the same forward (set, bitmap) and backward.
Keys have NULLs and duplicates; a NULL comparison matches nothing, as the engine's anti join has it."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dltrace
from dltrace.errors import UnsupportedQuery
from lineage_compare import assert_engine_forward_backward, registered_fixture, rows_with_lineage

T = pa.table({"a": pa.array([1, 2, None, 2, 3], pa.int64()), "b": pa.array([1, 2, 3, 4, 5], pa.int64())})
U = pa.table({"a": pa.array([2, None, 5, 2], pa.int64()), "c": pa.array([7, 8, 9, 1], pa.int64())})

QUERIES = [
    "SELECT * FROM t SEMI JOIN u ON t.a = u.a",
    "SELECT * FROM t ANTI JOIN u ON t.a = u.a",
    "SELECT * FROM t SEMI JOIN u USING (a)",
    "SELECT x.b FROM t AS x ANTI JOIN u USING (a) WHERE x.b > 1",
    # a non-equality in the condition, an aggregate over the kept rows
    "SELECT t.a, count(*) AS n FROM t SEMI JOIN u ON t.a = u.a AND u.c > t.b GROUP BY t.a",
    # unqualified names: c is u's, b is t's
    "SELECT b FROM t SEMI JOIN u ON c = b + 6",
    # joins after it (inner, LEFT) and before it; two of them; a derived table on the right
    "SELECT t.b, w.c FROM t SEMI JOIN u ON t.a = u.a LEFT JOIN u AS w ON w.a = t.a",
    "SELECT t.b, w.c FROM t JOIN u AS w ON w.c > t.b SEMI JOIN u ON u.a = t.a",
    "SELECT t.b FROM t SEMI JOIN u ON t.a = u.a ANTI JOIN (SELECT c FROM u WHERE c < 5) AS s ON s.c = t.b",
    "SELECT DISTINCT t.a FROM t ANTI JOIN u ON t.a = u.a OR u.c = t.b",
    # a semi join inside another's right side, and inside an EXISTS in another's ON (found by the generator: the
    # inner one moved into the outer EXISTS before it was rewritten)
    "SELECT t.b FROM t SEMI JOIN (SELECT u.a FROM u SEMI JOIN t AS w ON u.a = w.a) AS x ON t.a = x.a",
    "SELECT t.b FROM t SEMI JOIN u ON t.a = u.a AND EXISTS (SELECT 1 FROM u AS v SEMI JOIN t AS w ON v.a = w.a "
    "WHERE v.c = u.c)",
]


s = registered_fixture({"t": T, "u": U})


@pytest.mark.parametrize("sql", QUERIES)
def test_semi_and_anti_joins_equal_the_engine_and_backward(s, sql):
    assert_engine_forward_backward(s, sql)


def test_witnesses_by_hand(s):
    r = s.run("SELECT t.b FROM t SEMI JOIN u ON t.a = u.a ORDER BY t.b")
    assert [(row["b"], r.lineage(i)) for i, row in enumerate(r.table.to_pylist())] == [
        (2, {"t": [1], "u": [0, 3]}), (4, {"t": [3], "u": [0, 3]})]
    r = s.run("SELECT t.b FROM t ANTI JOIN u ON t.a = u.a ORDER BY t.b")  # no witnesses of an absence
    assert [(row["b"], r.lineage(i)) for i, row in enumerate(r.table.to_pylist())] == [
        (1, {"t": [0], "u": []}), (3, {"t": [2], "u": []}), (5, {"t": [4], "u": []})]


@pytest.mark.parametrize("sql,needle", [
    ("SELECT t.b FROM t SEMI JOIN u ON t.a = u.a RIGHT JOIN u AS w ON w.a = t.a", "RIGHT JOIN after a SEMI JOIN"),
    ("SELECT t.b FROM t, u AS w ANTI JOIN u USING (a)", "USING after several relations"),
])
def test_what_cannot_move_to_the_where_is_refused(s, sql, needle):
    for run in (lambda: s.run(sql), lambda: s.trace(sql)):
        with pytest.raises(UnsupportedQuery, match=needle):
            run()


@pytest.mark.spark
def test_spark_left_semi_and_anti_joins(spark_session):
    s = dltrace.connect("spark", spark=spark_session)
    s.register("sj_t", T)
    s.register("sj_u", U)
    duck = dltrace.connect("duckdb")
    duck.register("sj_t", T)
    duck.register("sj_u", U)
    for spark_sql, duck_sql in [
        ("SELECT sj_t.b FROM sj_t LEFT SEMI JOIN sj_u ON sj_t.a = sj_u.a",
         "SELECT sj_t.b FROM sj_t SEMI JOIN sj_u ON sj_t.a = sj_u.a"),
        ("SELECT sj_t.b FROM sj_t LEFT ANTI JOIN sj_u ON sj_t.a = sj_u.a",
         "SELECT sj_t.b FROM sj_t ANTI JOIN sj_u ON sj_t.a = sj_u.a"),
    ]:
        assert sorted(repr(r) for r in s.sql(spark_sql).to_pylist()) == sorted(
            repr(r) for r in duck.sql(duck_sql).to_pylist())
        for strategy in ("set", "bitmap"):
            assert rows_with_lineage(s.run(spark_sql, lineage=strategy)) == rows_with_lineage(duck.run(duck_sql))
    duck.close()
