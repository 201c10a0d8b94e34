"""A correlated EXISTS over a subquery that groups (passes/grouped_exists.py): "an item with two prices above 12".
Each row and its lineage computed here by hand from the tables -- for each outer row, the groups of its own p rows,
those that pass HAVING its witnesses -- and checked against DuckDB's own answer to the query as written."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

import dltrace
from lineage_compare import assert_backward_agrees, assert_by_hand, guest_fixtures, lineage_of

T = pa.table({"a": pa.array([1, 2, None, 2, 4, 3], pa.int64()), "b": pa.array([10, 20, 30, None, 5, 50], pa.int64())})
# p: key 1 has three rows (x 11, 13, 15), 2 two (22, 26), 3 one (NULL x), 4 none; a NULL key row
P = pa.table({"k": pa.array([1, 2, 1, None, 3, 1, 2], pa.int64()),
              "x": pa.array([11, 22, 13, 99, None, 15, 26], pa.int64())})
T_ROWS, P_ROWS = T.to_pylist(), P.to_pylist()


con, s = guest_fixtures({"t": T, "p": P})


def _passing(o, key, having):
    """The p rows of the outer row's groups (by ``key``) that pass ``having``."""
    groups: dict = {}
    for i, r in enumerate(P_ROWS):
        if o["a"] is not None and r["k"] == o["a"]:
            groups.setdefault(key(r), []).append((i, r))
    return {i for rows in groups.values() if having([r for _, r in rows]) for i, _ in rows}


def _expected(keep, value, witnesses) -> Counter:
    out = Counter()
    for oid, o in enumerate(T_ROWS):
        if keep(o):
            out[(repr(value(o)), lineage_of(t={oid}, p=witnesses(o)))] += 1
    return out


def _big(o):  # key: is x above 12 (NULL apart); HAVING count(*) > 1
    return _passing(o, lambda r: None if r["x"] is None else r["x"] > 12, lambda rows: len(rows) > 1)


CASES = {
    # key 1: x 13 and 15 are one group of two; key 2: 22 and 26; key 3's one row and key 1's 11 are groups of one
    "exists": ("SELECT t.a, t.b FROM t WHERE EXISTS (SELECT 1 FROM p WHERE p.k = t.a GROUP BY p.x > 12 "
               "HAVING count(*) > 1)",
               lambda: _expected(lambda o: bool(_big(o)), lambda o: (o["a"], o["b"]), _big)),
    # NOT EXISTS: the rows without such a group, no witnesses (it is negated)
    "not_exists": ("SELECT t.a, t.b FROM t WHERE NOT EXISTS (SELECT 1 FROM p WHERE p.k = t.a GROUP BY p.x > 12 "
                   "HAVING count(*) > 1)",
                   lambda: _expected(lambda o: not _big(o), lambda o: (o["a"], o["b"]), lambda o: set())),
    # in the SELECT list: its witnesses where it is TRUE
    "in_select": ("SELECT t.a, t.b, EXISTS (SELECT 1 FROM p WHERE p.k = t.a GROUP BY p.x > 12 HAVING count(*) > 1) "
                  "AS e FROM t",
                  lambda: _expected(lambda o: True, lambda o: (o["a"], o["b"], bool(_big(o))), _big)),
    # a test of the outer row alone beside the equality
    "outer_test": ("SELECT t.a, t.b FROM t WHERE EXISTS (SELECT 1 FROM p WHERE p.k = t.a AND t.b > 10 "
                   "GROUP BY p.x > 12 HAVING count(*) > 1)",
                   lambda: _expected(lambda o: bool(_big(o)) and o["b"] is not None and o["b"] > 10,
                                     lambda o: (o["a"], o["b"]), _big)),
    # grouped by the key itself, a HAVING over the values
    "by_the_key": ("SELECT t.a, t.b FROM t WHERE EXISTS (SELECT 1 FROM p WHERE p.k = t.a GROUP BY p.k "
                   "HAVING max(p.x) > 20)",
                   lambda: _expected(lambda o: o["a"] == 2, lambda o: (o["a"], o["b"]), lambda o: {1, 6})),
}


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_grouped_exists_by_hand(s, con, name, strategy):
    sql, expected = CASES[name]
    assert_by_hand(s, con, sql, expected(), strategy)


@pytest.mark.parametrize("name", sorted(CASES))
def test_backward_tracing_agrees(s, name):
    assert_backward_agrees(s, CASES[name][0])


@pytest.mark.parametrize("sql", [
    "SELECT t.a FROM t WHERE EXISTS (SELECT 1 FROM p WHERE p.k < t.a GROUP BY p.x HAVING count(*) > 1)",
    "SELECT t.a FROM t WHERE EXISTS (SELECT 1 FROM p WHERE p.k = t.a GROUP BY ROLLUP (p.x) HAVING count(*) > 1)",
    "SELECT t.a FROM t WHERE EXISTS (SELECT 1 FROM p WHERE p.k = t.a GROUP BY p.x HAVING max(p.x) > t.b)",
    # (found by a review: GROUP BY () has its one group over no rows too, which grouping by the key loses; a
    # set-returning call gives no row for a group whose list is empty, which dropping the SELECT list loses)
    "SELECT t.a FROM t WHERE EXISTS (SELECT 1 FROM p WHERE p.k = t.a GROUP BY () HAVING count(*) = 0)",
    "SELECT t.a FROM t WHERE EXISTS (SELECT unnest(range(count(*) - 1)) FROM p WHERE p.k = t.a GROUP BY p.x)",
])
def test_not_taken_stays_refused(s, sql):
    """A range correlation, ROLLUP or () (a grand total over no rows), a HAVING that reads the outer row, a
    set-returning call: as before."""
    with pytest.raises(dltrace.UnsupportedQuery, match=r"could not be decorrelated \(EXISTS\)"):
        s.run(sql)
