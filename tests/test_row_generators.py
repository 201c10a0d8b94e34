"""Table functions that generate rows from constants in FROM (passes/row_generators.py): a number or calendar spine
joined to the user's tables. Each row and its lineage computed here by hand -- a generated row has none, as a VALUES
row -- and checked against the engine's own answer to the query as written."""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime, timedelta

import pyarrow as pa
import pytest

import dltrace
from lineage_compare import assert_backward_agrees, assert_by_hand, counted_rows, guest_fixtures, lineage_of

# t: an order per row (key k, day d); k 1 twice, a NULL key, a day with none
T = pa.table({"k": pa.array([1, 2, None, 1, 4], pa.int64()),
              "d": pa.array([date(2024, 1, 1), date(2024, 1, 3), date(2024, 1, 3), None, date(2024, 1, 2)])})
T_ROWS = T.to_pylist()


con, s = guest_fixtures({"t": T})


def _spine(values, match, value=lambda i, rows: (i, len(rows))) -> Counter:
    """A row per generated value: ``value`` of it and its matching t rows, with those rows as lineage."""
    out = Counter()
    for i in values:
        rows = [rid for rid, r in enumerate(T_ROWS) if match(i, r)]
        out[(repr(value(i, rows)), lineage_of(t=set(rows)))] += 1
    return out


def _joined(values, match) -> Counter:
    """A row per (generated value, matching t row): ``(value, k, d)``, the t row its lineage."""
    out = Counter()
    for i in values:
        for rid, r in enumerate(T_ROWS):
            if match(i, r):
                out[(repr((i, r["k"], r["d"])), lineage_of(t={rid}))] += 1
    return out


DAYS = [datetime(2024, 1, 1) + timedelta(days=n) for n in range(4)]
CASES = {
    # count per key 0..4 (range's end is not in it), zero where no row has the key
    "count_per_key": ("SELECT g.i, count(t.k) AS n FROM range(5) AS g(i) LEFT JOIN t ON t.k = g.i GROUP BY g.i",
                      lambda: _spine(range(5), lambda i, r: r["k"] == i)),
    # a calendar (generate_series includes its end; over dates it gives TIMESTAMPs)
    "calendar": ("SELECT c.day, count(t.d) AS n FROM generate_series(DATE '2024-01-01', DATE '2024-01-04', "
                 "INTERVAL 1 DAY) AS c(day) LEFT JOIN t ON t.d = c.day GROUP BY c.day",
                 lambda: _spine(DAYS, lambda day, r: r["d"] is not None and datetime(*r["d"].timetuple()[:3]) == day)),
    # an inner join: a row per pair; no alias, so the column is the function's name
    "inner": ("SELECT range, t.k, t.d FROM range(1, 3) JOIN t ON t.k = range",
              lambda: _joined(range(1, 3), lambda i, r: r["k"] == i)),
    # aliased without a column list: the column takes the alias's name (DuckDB's)
    "alias_names_column": ("SELECT n.n, t.k, t.d FROM generate_series(2, 4) AS n, t WHERE t.k = n.n",
                           lambda: _joined(range(2, 5), lambda i, r: r["k"] == i)),
    # the generated side in a correlated subquery: each key's rows by a lookup
    "correlated": ("SELECT g.i, (SELECT count(*) FROM t WHERE t.k = g.i) AS n FROM range(0, 6, 2) AS g(i)",
                   lambda: _spine(range(0, 6, 2), lambda i, r: r["k"] == i)),
    # and inside the subquery: t's rows whose key is generated
    "in_subquery": ("SELECT t.k FROM t WHERE EXISTS (SELECT 1 FROM range(2, 9) AS g(i) WHERE g.i = t.k)",
                    lambda: Counter({(repr((r["k"],)), lineage_of(t={rid})): 1 for rid, r in enumerate(T_ROWS)
                                     if r["k"] is not None and 2 <= r["k"] < 9})),
    # no rows generated (the end before the start): a count over none
    "empty": ("SELECT count(*) AS n FROM range(3, 1) AS g(i) JOIN t ON t.k = g.i",
              lambda: Counter({(repr((0,)), ()): 1})),
}


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_row_generator_by_hand(s, con, name, strategy):
    sql, expected = CASES[name]
    assert_by_hand(s, con, sql, expected(), strategy)


@pytest.mark.parametrize("name", sorted(CASES))
def test_backward_tracing_agrees(s, name):
    """(No case gives two equal rows, which backward tracing would give the lineage of both.)"""
    assert_backward_agrees(s, CASES[name][0])


def test_the_engine_names_the_columns(s, con):
    """``SELECT *`` gives the engine's names: the function's own, or the alias's."""
    for sql in ("SELECT * FROM range(2)", "SELECT * FROM generate_series(1, 2) AS q",
                "SELECT * FROM range(2) AS x(a)"):
        assert s.run(sql).table.column_names == con.sql(sql).columns


def test_an_aliased_generators_column_read_by_the_functions_name(s, con):
    """``range(0, 4) r`` and ``r.range``, which DuckDB reads as r's column, was refused (a new user's review)."""
    sql = "SELECT r.range, t.k FROM range(0, 4) r JOIN t ON t.k = r.range"
    r = s.run(sql)
    assert r.table.column_names == con.sql(sql).columns
    assert counted_rows(r) == Counter({(repr((row["k"], row["k"])), lineage_of(t={rid})): 1
                                       for rid, row in enumerate(T_ROWS) if row["k"] in range(0, 4)})


def test_lineage_on_a_generated_column_is_refused(s):
    """LINEAGE ON reads a table's values: a generated column is none (a review found it read as a table named '')."""
    with pytest.raises(dltrace.UnknownColumn, match="'g' is a derived table, CTE, unnest or row generator"):
        s.run("SELECT g.i, count(*) AS n FROM range(3) AS g(i), t GROUP BY g.i LINEAGE ON (g.i)")


def test_the_engines_error_stays(s):
    """``range(0, 5, 0)`` raises on DuckDB; run as written, it raises through dltrace too."""
    with pytest.raises(dltrace.QueryError, match="interval cannot be 0"):
        s.run("SELECT * FROM range(0, 5, 0) AS g(i)")


@pytest.mark.parametrize("sql,match", [
    # its rows depend on a row of t: a lateral call
    ("SELECT * FROM t, range(t.k) AS g(i)", r"table function reading a column \(RANGE\(0, t\.k\)"),
    # its rows depend on t's rows through a subquery, whose lineage they would owe
    ("SELECT * FROM range((SELECT max(k) FROM t)) AS g(i)", r"table function over a subquery"),
    # more names than columns (DuckDB drops the extra ones)
    ("SELECT * FROM range(2) AS g(i, j)", r"gives 1 column, and its alias names 2"),
    # DuckDB's ordinality column (found by a review: a NATURAL join did not join on it)
    ("SELECT * FROM range(3) WITH ORDINALITY AS g", r"WITH ORDINALITY"),
    # aliased without a column list, DuckDB reads the column by the function's name too, which qualification bound
    # to t's column of that name (found by a review)
    ("SELECT t.k FROM t WHERE EXISTS (SELECT 1 FROM generate_series(1, 3) AS g WHERE generate_series = 3)",
     r"generate_series may read g's column"),
    # a file's rows have no ids
    ("SELECT * FROM read_csv('rows.csv')", r"table function .*READ_CSV.* has no row ids; register it as a table"),
])
def test_refused(s, sql, match):
    with pytest.raises(dltrace.UnsupportedQuery, match=match):
        s.run(sql)


@pytest.mark.spark
def test_spark_range(spark_session):
    """Spark's range: its column is id, aliased or not; a key count over it as on DuckDB."""
    session = dltrace.connect("spark", spark=spark_session)
    try:
        session.register("generated_t", T)
        sql = "SELECT g.id, count(t.k) AS n FROM range(5) AS g LEFT JOIN generated_t AS t ON t.k = g.id GROUP BY g.id"
        assert counted_rows(session.run(sql, dialect="spark", lineage="set"), prefix="generated_") == \
            _spine(range(5), lambda i, r: r["k"] == i)
        assert session.run("SELECT * FROM range(1, 7, 2)", dialect="spark").table.to_pylist() == \
            [{"id": 1}, {"id": 3}, {"id": 5}]
    finally:
        session.close()
