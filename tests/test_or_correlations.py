"""A subquery correlated under OR, read as the OR of one subquery per disjunct (passes/or_correlations.py), and an OR
of its own columns beside the correlation, written without OR (passes/uncorrelated_ors.py): the engine's rows, each
row's lineage the same forward (set, bitmap) and backward, and the witnesses by hand. Keys and values have NULLs,
so each side of an IN may be NULL where the other is FALSE."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dltrace.errors import UnsupportedQuery
from lineage_compare import assert_engine_forward_backward, registered_fixture

T = pa.table({"k": pa.array([1, 1, 2, None, 3], pa.int64()), "v": pa.array([1, 2, 3, 4, 5], pa.int64()),
              "m": pa.array(["a", "b", None, "d", "e"])})
U = pa.table({"k": pa.array([1, 2, 2, None, 7], pa.int64()), "w": pa.array([7, 8, None, 10, 11], pa.int64()),
              "m": pa.array(["x", "b", "d", None, "e"])})

QUERIES = [
    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k OR u.m = t.m)",
    "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.k OR u.m = t.m)",
    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.w > 7 AND (u.k = t.k OR u.m = t.m OR u.w = t.v + 6))",
    "SELECT t.k, t.v, EXISTS (SELECT 1 FROM u WHERE u.k = t.k OR u.m = t.m) AS found FROM t",
    "SELECT * FROM t WHERE t.v + 6 IN (SELECT u.w FROM u WHERE u.k = t.k OR u.k IS NULL)",
    "SELECT * FROM t WHERE t.v + 6 NOT IN (SELECT u.w FROM u WHERE u.k = t.k OR u.m = t.m)",
    "SELECT t.k, count(*) AS n FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k OR u.m = t.m) GROUP BY t.k",
    # an OR of the subquery's own columns beside the correlation (passes/uncorrelated_ors.py), NULLs on both sides
    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND (u.w > 7 OR u.m IS NULL))",
    "SELECT t.k, t.v, (SELECT count(*) FROM u WHERE u.k = t.k AND (u.w = 8 OR u.w IS NULL OR u.m = 'x')) AS n FROM t",
    "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND (u.w > 7 OR u.m IS NULL))",
    "SELECT * FROM t WHERE t.v + 6 IN (SELECT u.w FROM u WHERE u.k = t.k AND (u.m <> 'b' OR u.w IS NULL))",
    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE (u.k = t.k OR u.m = t.m) AND (u.w < 9 OR u.w > 10))",
    "SELECT t.m FROM t WHERE t.v = 5 OR EXISTS (SELECT 1 FROM u WHERE (u.k = t.k OR u.m = t.m) AND u.w < 11)",
]


s = registered_fixture({"t": T, "u": U})


@pytest.mark.parametrize("sql", QUERIES)
def test_or_correlation_equals_the_engine_and_backward(s, sql):
    assert_engine_forward_backward(s, sql)


def test_witnesses_by_hand(s):
    # a match by key or by name: every row of u matching either way
    r = s.run("SELECT v FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k OR u.m = t.m) ORDER BY v")
    assert [(row["v"], r.lineage(i)) for i, row in enumerate(r.table.to_pylist())] == [
        (1, {"t": [0], "u": [0]}), (2, {"t": [1], "u": [0, 1]}), (3, {"t": [2], "u": [1, 2]}),
        (4, {"t": [3], "u": [2]}), (5, {"t": [4], "u": [4]})]
    # IN: the rows comparing TRUE. t's row 1 (v + 6 = 8) meets u's row 0 by key (7) and row 1 by name (8): TRUE by
    # row 1 alone; t's rows 2 and 3 meet a NULL w and no equal one (NULL: dropped); t's row 4 meets row 4 by name
    r = s.run("SELECT v FROM t WHERE t.v + 6 IN (SELECT u.w FROM u WHERE u.k = t.k OR u.m = t.m) ORDER BY v")
    assert [(row["v"], r.lineage(i)) for i, row in enumerate(r.table.to_pylist())] == [
        (1, {"t": [0], "u": [0]}), (2, {"t": [1], "u": [1]}), (5, {"t": [4], "u": [4]})]


def test_control_semantics_still_refuses_it(s):
    with pytest.raises(UnsupportedQuery, match="correlated under OR"):
        s.run("SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k OR u.m = t.m)", semantics="control")


def test_an_aggregate_correlated_under_or_is_still_refused(s):
    # (a count over the union of two row sets is not a function of the two counts)
    with pytest.raises(UnsupportedQuery, match="correlated under OR"):
        s.run("SELECT t.k, (SELECT count(*) FROM u WHERE u.k = t.k OR u.m = t.m) AS n FROM t")
