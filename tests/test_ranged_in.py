"""A one-value IN correlated by more than equalities, as a filter (passes/ranged_in.py): "a salary a colleague of
the same department earns" was refused; it runs as an EXISTS of a matching row. The engine's rows, each row's
lineage the same forward (set, bitmap) and backward, the witnesses by hand (NULL salaries and departments match
nothing), and what stays as it was."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dltrace
from lineage_compare import assert_engine_forward_backward, registered_fixture, rows_with_lineage

EMP = pa.table({"id": pa.array([1, 2, 3, 4, 5, 6], pa.int64()), "dept": pa.array([1, 1, 2, 2, None, 2], pa.int64()),
                "salary": pa.array([10, 10, 20, 30, 10, None], pa.int64())})

QUERIES = [
    "SELECT e.id FROM emp AS e WHERE e.salary IN (SELECT x.salary FROM emp AS x WHERE x.dept = e.dept AND x.id <> e.id)",
    "SELECT e.id FROM emp AS e WHERE e.salary IN (SELECT x.salary FROM emp AS x WHERE x.id < e.id) OR e.id = 6",
    "SELECT e.dept, count(*) AS n FROM emp AS e WHERE e.salary + 0 IN (SELECT x.salary FROM emp AS x "
    "WHERE x.dept = e.dept AND x.id > e.id) GROUP BY e.dept",
    "SELECT e.id FROM emp AS e WHERE e.id > 1 AND e.salary IN (SELECT x.salary FROM emp AS x WHERE x.salary <= e.id * 5)",
]

s = registered_fixture({"emp": EMP})


@pytest.mark.parametrize("sql", QUERIES)
def test_ranged_in_equals_the_engine_and_backward(s, sql):
    assert_engine_forward_backward(s, sql)


def test_witnesses_by_hand(s):
    # ids 1 and 2 (dept 1) both earn 10: each is the other's witness, and its own row; id 5 (dept NULL) matches none
    r = s.run("SELECT e.id FROM emp AS e WHERE e.salary IN (SELECT x.salary FROM emp AS x WHERE x.dept = e.dept "
              "AND x.id <> e.id) ORDER BY e.id")
    assert [(row["id"], r.lineage(i)) for i, row in enumerate(r.table.to_pylist())] == [
        (1, {"emp": [0, 1]}), (2, {"emp": [0, 1]})]


def test_control_semantics_still_refuses_it(s):
    # (an IN's control lineage is all of the subquery's rows for the outer row; the EXISTS's only those matching)
    with pytest.raises(dltrace.UnsupportedQuery, match="could not be decorrelated"):
        s.run("SELECT e.id FROM emp AS e WHERE e.salary IN (SELECT x.salary FROM emp AS x WHERE x.id <> e.id)",
              semantics="control")


@pytest.mark.spark
def test_spark_ranged_in(spark_session):
    spark = dltrace.connect("spark", spark=spark_session)
    duck = dltrace.connect("duckdb")
    spark.register("rin_emp", EMP)
    duck.register("rin_emp", EMP)
    sql = QUERIES[0].replace("emp AS", "rin_emp AS")
    for strategy in ("set", "bitmap"):
        assert rows_with_lineage(spark.run(sql, lineage=strategy)) == rows_with_lineage(duck.run(sql))
