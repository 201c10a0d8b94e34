"""A correlated ``x op ALL (subquery)`` in a WHERE conjunct (passes/quantified_all.py): the engine's rows, and each
row's lineage computed here by hand -- the outer row and, where the ALL holds, every row of its subquery (each
comparison held). The tables hold NULLs on both sides, an empty subquery for some rows, and duplicates.
"""

from __future__ import annotations

import operator
from collections import Counter

import pyarrow as pa
import pytest

import dltrace
from lineage_compare import counted_rows

T = pa.table({"a": pa.array([1, 2, 3, 4, 5, 6, 7], pa.int64()),
              "d": pa.array([1, 5, None, 3, 2, None, 9], pa.int64()),
              "k": pa.array([1, 2, None, 1, 9, 2, 1], pa.int64())})
U = pa.table({"d": pa.array([0, 4, 2, None, 7, 6, 2], pa.int64()),
              "k": pa.array([1, 2, 1, None, 2, 7, 1], pa.int64())})

_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "=": operator.eq,
        "<>": operator.ne}


@pytest.fixture(scope="module", params=["source", "memory"])
def s(request):
    session = dltrace.connect("duckdb")
    session.register("t", T, storage=request.param)
    session.register("u", U, storage=request.param)
    yield session
    session.close()


def _cmp(op: str, x, y):
    return None if x is None or y is None else _OPS[op](x, y)


def expected(op: str, correlated, also=lambda o: True) -> Counter:
    """Rows of t whose ``d op ALL (u.d of the rows correlated(o, r))`` is TRUE and ``also(o)``, each with itself
    and every u row of its subquery."""
    out = Counter()
    for oid, o in enumerate(T.to_pylist()):
        found = [(i, r) for i, r in enumerate(U.to_pylist()) if correlated(o, r) is True]
        if all(_cmp(op, o["d"], r["d"]) is True for _, r in found) and also(o):
            lineage = (("t", (oid,)),) + ((("u", tuple(i for i, _ in found)),) if found else ())
            out[((o["a"],), lineage)] += 1
    return out


def got(result) -> Counter:
    return counted_rows(result, text=lambda values: values)


def _eq(x, y):
    return None if x is None or y is None else x == y


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
@pytest.mark.parametrize("op", sorted(_OPS))
def test_all_by_hand(s, op, strategy):
    sql = f"SELECT t.a FROM t WHERE t.d {op} ALL (SELECT u.d FROM u WHERE u.k = t.k)"
    result = s.run(sql, lineage=strategy)
    assert Counter(tuple(r.values()) for r in result.table.to_pylist()) == \
        Counter(tuple(r.values()) for r in s.sql(sql).to_pylist())
    assert got(result) == expected(op, lambda o, r: _eq(r["k"], o["k"])), sql


def test_all_beside_other_conditions_and_by_a_range(s):
    sql = "SELECT t.a FROM t WHERE t.a > 1 AND t.d >= ALL (SELECT u.d FROM u WHERE u.k = t.k AND u.d IS NOT NULL)"
    assert got(s.run(sql)) == expected(">=", lambda o, r: _eq(r["k"], o["k"]) and r["d"] is not None,
                                       also=lambda o: o["a"] > 1)
    # correlated by a range: forward lineage reads the NOT EXISTS in place and the count over a domain
    sql = "SELECT t.a FROM t WHERE t.d <> ALL (SELECT u.d FROM u WHERE u.k < t.k)"
    assert got(s.run(sql)) == expected(
        "<>", lambda o, r: None if r["k"] is None or o["k"] is None else r["k"] < o["k"])


def test_all_in_other_positions_stays_refused(s):
    """Under OR (a row may pass with the ALL FALSE) the NOT EXISTS form would need other witnesses: refused."""
    with pytest.raises(dltrace.UnsupportedQuery, match=r"could not be decorrelated \(ALL\)"):
        s.run("SELECT t.a FROM t WHERE t.d < ALL (SELECT u.d FROM u WHERE u.k = t.k) OR t.a = 1")


def test_all_over_a_set_returning_projection_stays_refused(s):
    """``unnest`` in the subquery's SELECT list gives each of its rows several values: a repeat of its FROM and
    WHERE would count other rows, and the value moved into a WHERE is an error (the long generator profile: the
    engine's "UNNEST not supported here" from the rewrite, where the plain query answers)."""
    sql = "SELECT t.a FROM t WHERE t.d >= ALL (SELECT unnest([u.d, u.d + 1]) FROM u WHERE u.k = t.k)"
    assert sorted(s.sql(sql).column("a").to_pylist()) == [3, 4, 5, 7]  # the engine answers
    with pytest.raises(dltrace.UnsupportedQuery, match=r"could not be decorrelated \(ALL\)"):
        s.run(sql)


# -- the same for a correlated ANY (passes/quantified_any.py): witnesses are the rows whose comparison holds --

def expected_any(op: str, correlated, also=lambda o: True) -> Counter:
    """Rows of t whose ``d op ANY (u.d of the rows correlated(o, r))`` is TRUE and ``also(o)``, each with itself
    and the u rows of its subquery whose comparison holds."""
    out = Counter()
    for oid, o in enumerate(T.to_pylist()):
        held = [i for i, r in enumerate(U.to_pylist())
                if correlated(o, r) is True and _cmp(op, o["d"], r["d"]) is True]
        if held and also(o):
            out[((o["a"],), (("t", (oid,)), ("u", tuple(held))))] += 1
    return out


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
@pytest.mark.parametrize("op", sorted(_OPS))
def test_any_by_hand(s, op, strategy):
    """``t.d < ANY (SELECT u.d FROM u WHERE u.k = t.k)`` was refused as a correlated subquery that could not be
    decorrelated, while the same ALL ran (found by a probe); it is read as an EXISTS of a row that holds."""
    sql = f"SELECT t.a FROM t WHERE t.a > 0 AND t.d {op} ANY (SELECT u.d FROM u WHERE u.k = t.k)"
    result = s.run(sql, lineage=strategy)
    assert Counter(tuple(r.values()) for r in result.table.to_pylist()) == \
        Counter(tuple(r.values()) for r in s.sql(sql).to_pylist())
    assert got(result) == expected_any(op, lambda o, r: _eq(r["k"], o["k"])), sql
    traced = s.trace(sql)
    assert got(traced) == got(result)


def test_any_under_control_semantics_or_under_or_stays_refused(s):
    """Control lineage gives the outer row every row of the subquery, where the EXISTS finds only those that
    hold; under OR a row may pass with the ANY not TRUE."""
    sql = "SELECT t.a FROM t WHERE t.d < ANY (SELECT u.d FROM u WHERE u.k = t.k)"
    with pytest.raises(dltrace.UnsupportedQuery, match=r"could not be decorrelated \(control lineage of ANY\)"):
        s.run(sql, semantics="control")
    with pytest.raises(dltrace.UnsupportedQuery, match=r"could not be decorrelated \(ANY\)"):
        s.run(sql + " OR t.a = 1")
