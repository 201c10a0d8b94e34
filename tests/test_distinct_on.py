"""DISTINCT ON runs as a QUALIFY over row_number() (passes/distinct_on.py): the engine's rows, in order, and each
row's lineage the same forward (set, bitmap) and backward. Every query orders totally within its keys, so the
row DISTINCT ON keeps is one row, the same in the engine and in the rewrite."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dltrace
from lineage_compare import rows_in_order

EMP = pa.table({"dept": pa.array([1, 1, 2, 2, None, 3, None], pa.int64()),
                "name": ["a", "b", "c", "d", "e", "f", "g"],
                "salary": pa.array([10, 20, 5, None, 7, 3, 7], pa.int64())})
DEPT = pa.table({"dept": pa.array([1, 2, 4], pa.int64()), "dname": ["x", "y", "z"]})

QUERIES = [
    "SELECT DISTINCT ON (dept) dept, name, salary FROM emp ORDER BY dept, salary DESC NULLS LAST, name",
    "SELECT DISTINCT ON (dept) dept, name FROM emp ORDER BY dept NULLS FIRST, name DESC",
    "SELECT DISTINCT ON (1) dept, name FROM emp ORDER BY 1, 2 DESC",
    # the keys need not lead the ORDER BY; an expression as a key
    "SELECT DISTINCT ON (salary % 2) salary % 2 AS parity, name FROM emp ORDER BY name",
    # over groups, with LIMIT; over a join; as a derived table (a star inside)
    "SELECT DISTINCT ON (dept) dept, count(*) AS n FROM emp GROUP BY dept, name ORDER BY dept, name LIMIT 3",
    "SELECT DISTINCT ON (d.dname) d.dname, e.name FROM emp AS e JOIN dept AS d ON e.dept = d.dept "
    "ORDER BY d.dname, e.salary DESC NULLS LAST, e.name",
    "SELECT x.dept, x.name FROM (SELECT DISTINCT ON (dept) * FROM emp ORDER BY dept, salary NULLS FIRST, name) AS x "
    "ORDER BY 1, 2",
    "SELECT dept, count(*) AS n FROM (SELECT DISTINCT ON (dept, salary) dept, salary FROM emp "
    "ORDER BY dept, salary, name) AS x GROUP BY dept ORDER BY dept",
]


@pytest.fixture(scope="module")
def s():
    session = dltrace.connect("duckdb")
    session.register("emp", EMP)
    session.register("dept", DEPT)
    yield session
    session.close()


@pytest.mark.parametrize("sql", QUERIES)
def test_distinct_on_equals_the_engine_and_backward(s, sql):
    backward = rows_in_order(s.trace(sql))
    ordered = "ORDER BY" in sql.rsplit(")", 1)[-1]  # the outermost query orders its rows
    engine = [tuple(r.values()) for r in s.sql(sql).to_pylist()]
    rows = [row for row, _ in backward]
    assert (rows if ordered else sorted(rows, key=repr)) == (engine if ordered else sorted(engine, key=repr))
    for strategy in ("set", "bitmap"):
        forward = rows_in_order(s.run(sql, lineage=strategy))
        assert (forward if ordered else sorted(forward, key=repr)) == (backward if ordered else sorted(backward, key=repr))


def test_the_kept_row_by_hand(s):
    r = s.run("SELECT DISTINCT ON (dept) dept, name FROM emp ORDER BY dept NULLS FIRST, salary DESC, name")
    assert rows_in_order(r) == [((None, "e"), {"emp": [4]}), ((1, "b"), {"emp": [1]}), ((2, "c"), {"emp": [2]}),
                           ((3, "f"), {"emp": [5]})]


@pytest.mark.parametrize("sql,needle", [
    ("SELECT DISTINCT ON (d) name, dept + 1 AS d FROM emp ORDER BY d", "output alias"),
    ("SELECT DISTINCT ON (dept) dept, name FROM emp ORDER BY dept, n", "could not be resolved"),
    ("SELECT DISTINCT ON (dept) dept, name, row_number() OVER () AS r FROM emp QUALIFY r > 1", "QUALIFY"),
    ("SELECT DISTINCT ON (2) * FROM emp", "position 2"),
])
def test_what_the_window_cannot_read_alike_is_refused(s, sql, needle):
    with pytest.raises(dltrace.DltraceError, match=needle):
        s.run(sql)
