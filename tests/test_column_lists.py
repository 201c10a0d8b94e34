"""Relations whose alias renames their columns (found by a new user's review): ``FROM t AS x(a, b)`` failed in the
engine (the list was read against dltrace's rows relation), and a derived table or CTE with a column list over an
ORDER BY or QUALIFY was refused as an unknown column (sqlglot's qualification). Both give the engine's rows now,
with lineage, forward and backward (``passes/column_lists.py``)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

import dltrace

T = pa.table({"k": pa.array([1, 2, 2], pa.int64()), "v": pa.array([10, 20, None], pa.int64())})
U = pa.table({"k": pa.array([2, 1], pa.int64()), "w": pa.array([7, 8], pa.int64())})


@pytest.fixture(scope="module")
def s():
    session = dltrace.connect("duckdb")
    session.register("t", T)
    session.register("u", U)
    yield session
    session.close()


def rows(table: pa.Table) -> Counter:
    return Counter(repr(tuple(r.values())) for r in table.to_pylist())


CASES = [
    ("SELECT a FROM t AS x(a)", [((1,), [0]), ((2,), [1]), ((2,), [2])]),
    ("SELECT a, b FROM t x(a, b) WHERE b > 10", [((2, 20), [1])]),
    ("SELECT * FROM t AS x(a)", [((1, 10), [0]), ((2, 20), [1]), ((2, None), [2])]),
    ("SELECT a, count(*) AS n FROM t AS x(a) GROUP BY a", [((1, 1), [0]), ((2, 2), [1, 2])]),
    ("WITH c AS (SELECT * FROM t) SELECT z FROM c AS q(z) WHERE z = 1", [((1,), [0])]),
    ("SELECT c FROM (SELECT v FROM t ORDER BY v LIMIT 1) AS x(c)", [((10,), [0])]),
    ("SELECT c FROM (SELECT DISTINCT v FROM t ORDER BY v DESC NULLS LAST LIMIT 2) x(c)", [((20,), [1]), ((10,), [0])]),
    ("WITH q(c) AS (SELECT v FROM t ORDER BY v NULLS FIRST LIMIT 1) SELECT c FROM q", [((None,), [2])]),
    ("SELECT c, d FROM (SELECT k, v FROM t QUALIFY row_number() OVER (PARTITION BY k ORDER BY v) = 1) x(c, d)",
     [((1, 10), [0]), ((2, 20), [1])]),
]


@pytest.mark.parametrize("sql,expected", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("strategy", ["set", "bitmap"])
def test_a_column_list_gives_the_engines_rows_and_their_lineage(s, sql, expected, strategy):
    result = s.run(sql, lineage=strategy)
    assert rows(result.table) == rows(s.sql(sql))
    got = Counter(repr((tuple(r.values()), result.lineage(i)["t"])) for i, r in enumerate(result.table.to_pylist()))
    assert got == Counter(repr(e) for e in expected)


@pytest.mark.parametrize("sql,expected", CASES[:1] + CASES[5:], ids=[c[0] for c in CASES[:1] + CASES[5:]])
def test_and_backward(s, sql, expected):
    traced = s.trace(sql)
    assert rows(traced.table) == rows(s.sql(sql))
    for i, r in enumerate(traced.table.to_pylist()):
        # duplicate output rows are pooled backward (docs/design.md): every row's lineage holds its own
        assert any(tuple(r.values()) == row and set(rids) <= set(traced.lineage(i)["t"]) for row, rids in expected)


VERIFIED = [c[0] for c in CASES] + ["SELECT a, v FROM t AS x(a) WHERE a > 1",
                                    "SELECT x.a, y.w FROM t AS x(a, b) JOIN u AS y(kk, w) ON x.a = y.kk"]


@pytest.mark.parametrize("sql", VERIFIED)
def test_and_verify(s, sql):
    """verify's rerun put each table's restricted rows under the table's alias without its column list: the query's
    `a` was a Binder Error (a raw QueryError) where every row comes back from its lineage."""
    result = s.run(sql)
    assert [result.verify(i) for i in range(result.num_rows)] == [True] * result.num_rows


def test_a_join_reads_a_renamed_table(s):
    sql = "SELECT x.a, y.w FROM t AS x(a, b) JOIN u AS y(kk, w) ON x.a = y.kk"
    result = s.run(sql)
    assert rows(result.table) == rows(s.sql(sql))
    assert sorted(map(repr, (result.lineage(i) for i in range(3)))) == sorted(map(repr, [
        {"t": [0], "u": [1]}, {"t": [1], "u": [0]}, {"t": [2], "u": [0]}]))


def test_columns_that_differ_only_in_case_are_refused_at_register(s):
    """DuckDB renamed the second `A_1`, so `SELECT A` read column a."""
    with pytest.raises(dltrace.SourceError, match="'a' and 'A' differ only in case"):
        s.register("case_cols", pa.table({"a": [1, 2], "A": [3, 4]}))
