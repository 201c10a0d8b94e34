"""Lineage a hoisted subquery holds whole is not carried per row (rules/covered_lineage.py), and every row's
lineage stays exactly what it was: forward (per-row columns plus the shared part) equals backward tracing, which
never drops anything, on tables with NULLs and duplicate rows; the rows are the engine's own. The per-row parts
checked by hand-computed lineage in test_exact_lineage."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

import dltrace
from dltrace.lineage_data import decode_ids

T = pa.table({"a": pa.array([1, 2, None, 2, 2], pa.int64()), "b": pa.array([10, 20, 30, None, 20], pa.int64())})
U = pa.table({"a": pa.array([2, None, 5, 2, 1], pa.int64()), "c": pa.array([7, 8, 9, 1, 7], pa.int64())})
SCHEMA = {"t": {"a": "BIGINT", "b": "BIGINT"}, "u": {"a": "BIGINT", "c": "BIGINT"}}

# (query, the tables whose per-row lineage the hoisted subquery holds whole)
COVERED = [
    # Q11's shape: the threshold reads the same join under the same conditions
    ("SELECT t.a, sum(t.b) AS s FROM t, u WHERE t.a = u.a GROUP BY t.a "
     "HAVING sum(t.b) > (SELECT avg(t.b) FROM t, u WHERE t.a = u.a)", {"t", "u"}),
    # under other aliases, with fewer conditions than the query's, the join written with ON
    ("SELECT x.a, y.c FROM t AS x JOIN u AS y ON x.a = y.a WHERE x.b > 5 AND x.b >= (SELECT min(z.b) FROM t AS z)",
     {"t"}),
    # Q15's shape: a CTE read by the query and by the subquery's maximum over all its rows
    ("WITH g AS (SELECT a, sum(b) AS s FROM t GROUP BY a) SELECT u.c, g.s FROM u, g WHERE u.a = g.a "
     "AND g.s = (SELECT max(s) FROM g)", {"t"}),
    # in the SELECT list, and a LEFT join of another table beside it
    ("SELECT t.a, u.c, (SELECT count(*) FROM t WHERE t.b > 0) AS n FROM t LEFT JOIN u ON t.a = u.a WHERE t.b > 0",
     {"t"}),
    # a CTE elsewhere named like the table (which base_tables() leaves out): t's empty column is still there
    ("SELECT t.a FROM t WHERE t.b >= (SELECT min(t.b) FROM t) AND t.a IN (WITH t AS (SELECT 2 AS a) SELECT a FROM t)",
     {"t"}),
]

KEPT = [
    # the subquery keeps fewer rows (a condition the query does not have)
    "SELECT a FROM t WHERE b < (SELECT max(b) FROM t WHERE a > 1)",
    "SELECT t.a FROM t, u WHERE t.a = u.a AND t.b > (SELECT min(t.b) FROM t, u WHERE t.a = u.a + 0)",
    # the table is on the padded side of a join, or every side is padded
    "SELECT t.a, u.c FROM t LEFT JOIN u ON t.a = u.a WHERE t.b > (SELECT min(u.c) FROM u)",
    "SELECT t.a, u.c FROM t FULL JOIN u ON t.a = u.a WHERE coalesce(t.b, 0) > (SELECT min(t.b) FROM t)",
    # the table read twice by the query: which of its readings would be meant
    "SELECT x.a FROM t AS x, t AS y WHERE x.a = y.a AND x.b > (SELECT min(b) FROM t)",
    # a volatile condition: evaluated again, it may keep other rows
    "SELECT a FROM t WHERE random() < 2 AND b > (SELECT min(b) FROM t WHERE random() < 2)",
    # the subquery keeps some of its rows only (LIMIT, HAVING) or reads a join it does not share
    "SELECT a FROM t WHERE b >= (SELECT b FROM t ORDER BY b LIMIT 1)",
    "SELECT a FROM t WHERE b >= (SELECT max(s) FROM (SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) < 35) AS g)",
    "SELECT t.a FROM t WHERE t.b > (SELECT min(u.c) FROM t, u WHERE t.a = u.a)",
    # conditions that sqlglot's own SQL writes alike but the engine runs differently (a review found range() taken
    # for generate_series(), which includes its end)
    "SELECT a FROM t WHERE len(generate_series(1, b)) >= 10 AND b >= (SELECT min(b) FROM t WHERE len(range(1, b)) >= 10)",
    # conditions evaluated again by the shared lineage's statement: volatile, reading the clock, unknown to sqlglot
    "SELECT a FROM t WHERE hash(uuidv4()) >= 0 AND b >= (SELECT min(b) FROM t WHERE hash(uuidv4()) >= 0)",
    "SELECT a FROM t WHERE now() > DATE '2000-01-01' AND b >= (SELECT min(b) FROM t WHERE now() > DATE '2000-01-01')",
    # a CTE whose rows may differ when the shared lineage's statement computes it again
    "WITH g AS (SELECT a, b FROM t WHERE random() < 2) SELECT g.a FROM g WHERE g.b >= (SELECT min(g.b) FROM g)",
    "WITH g AS (SELECT a, b FROM t ORDER BY b LIMIT 3) SELECT g.a FROM g WHERE g.b >= (SELECT min(g.b) FROM g)",
    "WITH g AS (SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > 0) SELECT g.a FROM g WHERE g.s >= "
    "(SELECT min(g.s) FROM g)",
]


@pytest.fixture(scope="module")
def s():
    session = dltrace.connect("duckdb")
    session.register("t", T)
    session.register("u", U)
    yield session
    session.close()


def merged_lineage(result) -> dict[str, dict[str, set[int]]]:
    """Per distinct output row, the union of its copies' lineage (backward tracing gives duplicate rows the
    pool of their copies' lineage: they cannot be told apart)."""
    out: dict[str, dict[str, set[int]]] = {}
    for i, row in enumerate(result.table.to_pylist()):
        found = out.setdefault(repr(tuple(row.values())), {})
        for t, ids in result.lineage(i).items():
            found.setdefault(t, set()).update(ids)
    return out


def own_parts(result) -> dict[str, list[list[int]]]:
    """Each table's per-row lineage column, without the shared part every row also has."""
    return {t: [decode_ids(v) for v in col.to_pylist()] for t, col in result.lineage_columns.items()}


@pytest.mark.parametrize("sql", [q for q, _ in COVERED] + KEPT)
@pytest.mark.parametrize("strategy", ["set", "bitmap"])
def test_lineage_is_the_same_as_backward_tracing(s, sql, strategy):
    forward = s.run(sql, lineage=strategy)
    assert Counter(tuple(r.values()) for r in forward.table.to_pylist()) == Counter(
        tuple(r.values()) for r in s.sql(sql).to_pylist())
    assert forward.num_rows > 0
    assert merged_lineage(forward) == merged_lineage(s.trace(deterministic_twin(sql)))


def deterministic_twin(sql: str) -> str:
    """``sql`` with its random calls and its clock replaced by a value they may take (``random() < 2``,
    ``hash(uuidv4()) >= 0``, ``now() > DATE '2000-01-01'``: TRUE either way), for backward tracing, which refuses
    random draws and the time of day (its reverse queries evaluate them again)."""
    return (sql.replace("random()", "0.5").replace("uuidv4()", "'x'")
            .replace("now()", "TIMESTAMPTZ '2026-01-01 00:00:00+00'"))


@pytest.mark.parametrize("sql, covered", COVERED)
def test_covered_tables_are_not_carried_per_row(s, sql, covered):
    forward = s.run(sql, lineage="bitmap")
    own = own_parts(forward)
    assert {t for t, parts in own.items() if not any(parts)} == covered
    assert covered <= set(forward.shared_lineage)


@pytest.mark.parametrize("sql", KEPT)
def test_other_subqueries_leave_the_rows_lineage(s, sql):
    own = own_parts(s.run(sql, lineage="bitmap"))
    assert all(any(parts) for t, parts in own.items() if t == "t")


@pytest.mark.parametrize("sql", [q for q, _ in COVERED])
def test_the_lineage_columns_keep_their_order(s, sql, monkeypatch):
    """A table left to the shared lineage keeps the place its rows' column had (a review found `dl_u, dl_t` in
    the CSV header, the `to_pandas` counts and `lineage(i)` where the rule did not apply gave `t, u`)."""
    from dltrace.rewriter.rules import covered_lineage

    covered = s.run(sql, lineage="bitmap")
    monkeypatch.setattr(covered_lineage, "covered_items", lambda *args: set())
    s.plans.clear()
    try:
        plain = s.run(sql, lineage="bitmap")
    finally:
        s.plans.clear()
    assert not any(not any(parts) for parts in own_parts(plain).values())  # (the rule was off)
    assert list(covered.lineage_columns) == list(plain.lineage_columns)
    assert list(covered.lineage(0)) == list(plain.lineage(0))
