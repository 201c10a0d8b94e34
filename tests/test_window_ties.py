"""Window functions whose value depends on how the engine orders tied rows (backward/ties.py): backward tracing
refuses them where rows of a partition tie in the window's ORDER BY, and traces them where none do; forward lineage
reads them either way. A new user's ``ROW_NUMBER() ... = 1`` dedupe over 300k rows with a tied ORDER BY came back
with no lineage for most rows, silently: each evaluation of the query picked other rows among the tied ones."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dltrace
from lineage_compare import rows_in_order

# k 1: d 0, 0 (tied), 1; k 2: d 5, 6; k 3: d NULL, NULL (tied: NULLs are peers)
SRC = pa.table({"k": pa.array([1, 1, 1, 2, 2, 3, 3], pa.int64()), "d": pa.array([0, 0, 1, 5, 6, None, None], pa.int64()),
                "v": pa.array([10, 11, 12, 20, 21, 30, 31], pa.int64()),
                "f": pa.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], pa.float64())})


@pytest.fixture(scope="module")
def s():
    session = dltrace.connect("duckdb")
    session.register("src", SRC)
    yield session
    session.close()


TIED = [
    "SELECT k, v FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY d) AS rn FROM src) AS x WHERE rn = 1",
    "SELECT k, v FROM src QUALIFY row_number() OVER (PARTITION BY k ORDER BY d) = 1",
    "SELECT DISTINCT ON (k) k, v FROM src ORDER BY k, d",
    "SELECT k, v, lag(v) OVER (PARTITION BY k ORDER BY d) AS prev FROM src",
    "SELECT k, v, sum(v) OVER (PARTITION BY k ORDER BY d ROWS UNBOUNDED PRECEDING) AS running FROM src",
    "SELECT k, v, first_value(v) OVER (PARTITION BY k ORDER BY d) AS first FROM src",
    "SELECT k, v, row_number() OVER w AS rn FROM src WINDOW w AS (PARTITION BY k ORDER BY d)",
    "SELECT k, list(v) OVER (PARTITION BY k) AS vs FROM src",
    "SELECT k, row_number() OVER (ORDER BY k) AS rn FROM src",
    # (a review's finds) an aggregate's own ORDER BY tied; mode over equally frequent values; a DOUBLE sum over tied
    # rows, whose last bits follow the order of its terms
    "SELECT k, v, string_agg(CAST(v AS VARCHAR), ',' ORDER BY d) OVER (PARTITION BY k) AS vs FROM src",
    "SELECT k, v, mode(v) OVER (PARTITION BY k ORDER BY d) AS m FROM src",
    "SELECT k, v, sum(f) OVER (PARTITION BY k ORDER BY d) AS s FROM src",
    "SELECT k, v, avg(f) OVER (PARTITION BY k) AS a FROM src",
    "WITH c AS (SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY d) AS rn FROM src) SELECT k, v FROM c "
    "WHERE rn = 1",
]


@pytest.mark.parametrize("sql", TIED)
def test_a_tie_sensitive_window_over_tied_rows_is_refused_by_tracing(s, sql):
    with pytest.raises(dltrace.UnsupportedQuery, match="tie in its ORDER BY .*order by columns that tell the rows"):
        s.trace(sql)
    r = s.run(sql)  # forward lineage: each row's own input row, from the same evaluation
    assert r.table.num_rows == s.sql(sql).num_rows
    assert all(len(r.lineage(i)["src"]) == 1 for i in range(r.table.num_rows))


TRACED = [
    # a total order within each partition: every evaluation numbers the rows alike
    "SELECT k, v FROM src QUALIFY row_number() OVER (PARTITION BY k ORDER BY d, v) = 1",
    "SELECT k, v, lag(v) OVER (PARTITION BY k ORDER BY v) AS prev FROM src",
    "SELECT DISTINCT ON (k) k, v FROM src ORDER BY k, d, v DESC",
    # tied rows get one value: a rank, an aggregate over whole runs of peers (the default RANGE frame)
    "SELECT k, v, rank() OVER (PARTITION BY k ORDER BY d) AS r FROM src",
    "SELECT k, v, sum(v) OVER (PARTITION BY k ORDER BY d) AS running FROM src",
    "SELECT k, v, count(*) OVER (PARTITION BY k) AS n FROM src",
    "SELECT k, v, avg(v) OVER (PARTITION BY k) AS a FROM src",
    "SELECT k, v, sum(f) OVER (PARTITION BY k ORDER BY v) AS s FROM src",
    "SELECT k, v, string_agg(CAST(v AS VARCHAR), ',' ORDER BY v) OVER (PARTITION BY k) AS vs FROM src",
    # the window reads rows a WHERE keeps, where none tie
    "SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY d) AS rn FROM src WHERE d IS NOT NULL AND v <> 10",
]


@pytest.mark.parametrize("sql", TRACED)
def test_a_window_without_ties_is_traced(s, sql):
    backward = rows_in_order(s.trace(sql))
    forward = rows_in_order(s.run(sql))
    assert sorted(backward, key=repr) == sorted(forward, key=repr)
