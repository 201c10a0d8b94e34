"""Correlated scalar subqueries with ORDER BY ... LIMIT / OFFSET (passes/limited_lookups.py): the latest price of
each item. The engine's rows, and each row's lineage computed here by hand from the tables -- the outer row and the
one row its subquery keeps (for a comparison, only where it holds) -- and the engine's error where a LIMIT keeps two
rows. The data has NULL keys, NULL order values (DuckDB orders them last, ascending and descending alike), empty
partitions and partitions of one to three rows; the order values are distinct within a partition except where a
test says (ties)."""

from __future__ import annotations

import re
from collections import Counter

import duckdb
import pyarrow as pa
import pytest

import dltrace
from lineage_compare import counted_rows, guest_fixtures, lineage_of
from dltrace.errors import DltraceError

T = pa.table({"a": pa.array([1, 2, None, 2, 4, 3, 5], pa.int64()),
              "b": pa.array([10, 20, 30, None, 5, 50, 70], pa.int64())})
# p: key 1 has three rows (one NULL d), 2 two, 3 one (NULL x), 4 none, 5 one; a NULL key row
P = pa.table({"k": pa.array([1, 2, 1, None, 3, 1, 2, 5], pa.int64()),
              "d": pa.array([3, 1, None, 7, 2, 1, 5, 4], pa.int64()),
              "x": pa.array([11, 22, 13, 99, None, 15, 26, 55], pa.int64())})
Q = pa.table({"x": pa.array([11, 26, 55, 15], pa.int64()), "tag": pa.array(["a", "b", "c", "d"], pa.string())})


con, s = guest_fixtures({"t": T, "p": P, "q": Q})


def _rows(table: pa.Table) -> list[dict]:
    return table.to_pylist()


def _ordered(rows, key, desc=False, nulls_first=False):
    """(rid, row) pairs sorted as DuckDB sorts them (NULLs last unless ``nulls_first``)."""
    present = sorted((r for r in rows if key(r[1]) is not None), key=lambda r: key(r[1]), reverse=desc)
    absent = [r for r in rows if key(r[1]) is None]
    return absent + present if nulls_first else present + absent


def _partition(k, keep=lambda r: True):
    return [(i, r) for i, r in enumerate(_rows(P)) if k is not None and r["k"] == k and keep(r)]


def got(result, prefix: str = "") -> Counter:
    """Each row and its lineage (table names without ``prefix``), counted."""
    return counted_rows(result, prefix=prefix)


def _per_row(kept, value, keep=None, witness=lambda o, r: True) -> Counter:
    """For each row of t: the p rows ``kept(o)`` selects (at most one), the row ``value(o, r)``, kept when
    ``keep(o, r)``; its lineage the t row and the p row where ``witness(o, r)``."""
    out = Counter()
    for oid, o in enumerate(_rows(T)):
        rows = kept(o)
        assert len(rows) <= 1
        rid, r = rows[0] if rows else (None, None)
        if keep is not None and keep(o, r) is not True:
            continue
        seen = {rid} if rid is not None and witness(o, r) else set()
        out[(repr(value(o, r)), lineage_of(t={oid}, p=seen))] += 1
    return out


def _x(r):
    return None if r is None else r["x"]


CASES = {
    # the latest row of each key (NULL d last even descending): key 1 -> d 3, key 2 -> d 5, key 4 none
    "latest": ("SELECT t.a, (SELECT p.x FROM p WHERE p.k = t.a ORDER BY p.d DESC LIMIT 1) AS x FROM t",
               lambda: _per_row(lambda o: _ordered(_partition(o["a"]), lambda r: r["d"], desc=True)[:1],
                                lambda o, r: (o["a"], _x(r)))),
    # the second row, NULLs first, the key on the right of the equality
    "second_nulls_first": ("SELECT t.a, (SELECT p.x FROM p WHERE t.a = p.k ORDER BY p.d NULLS FIRST LIMIT 1 "
                           "OFFSET 1) AS x FROM t",
                           lambda: _per_row(lambda o: _ordered(_partition(o["a"]), lambda r: r["d"],
                                                               nulls_first=True)[1:2],
                                            lambda o, r: (o["a"], _x(r)))),
    # FETCH FIRST, a filter of the subquery's own rows (before they are numbered)
    "fetch_after_a_filter": ("SELECT t.a, (SELECT p.d FROM p WHERE p.k = t.a AND p.x > 12 ORDER BY p.d "
                             "FETCH FIRST 1 ROWS ONLY) AS d FROM t",
                             lambda: _per_row(lambda o: _ordered(_partition(o["a"], lambda r: (r["x"] or 0) > 12),
                                                                 lambda r: r["d"])[:1],
                                              lambda o, r: (o["a"], None if r is None else r["d"]))),
    # ordered by the projection's alias, an expression; the key an expression of the subquery's columns
    "by_the_alias": ("SELECT t.a, (SELECT p.x * 2 AS y FROM p WHERE p.k + 1 = t.a ORDER BY y DESC LIMIT 1) AS y "
                     "FROM t",
                     lambda: _per_row(lambda o: _ordered(_partition(None if o["a"] is None else o["a"] - 1),
                                                         lambda r: r["x"], desc=True)[:1],
                                      lambda o, r: (o["a"], None if _x(r) is None else 2 * _x(r)))),
    # compared in WHERE: the rows kept, each with the p row its comparison read
    "where": ("SELECT t.a, t.b FROM t WHERE t.b < (SELECT p.x FROM p WHERE p.k = t.a ORDER BY p.d LIMIT 1)",
              lambda: _per_row(lambda o: _ordered(_partition(o["a"]), lambda r: r["d"])[:1],
                               lambda o, r: (o["a"], o["b"]),
                               keep=lambda o, r: None if o["b"] is None or _x(r) is None else o["b"] < _x(r))),
    # negated: the comparison is FALSE for the rows kept, so the p row is no witness
    "negated": ("SELECT t.a, t.b FROM t WHERE NOT (t.b < (SELECT p.x FROM p WHERE p.k = t.a ORDER BY p.d LIMIT 1))",
                lambda: _per_row(lambda o: _ordered(_partition(o["a"]), lambda r: r["d"])[:1],
                                 lambda o, r: (o["a"], o["b"]),
                                 keep=lambda o, r: None if o["b"] is None or _x(r) is None else o["b"] >= _x(r),
                                 witness=lambda o, r: False)),
    # LIMIT 0 keeps nothing: NULL everywhere, no p rows
    "limit_zero": ("SELECT t.a, (SELECT p.x FROM p WHERE p.k = t.a ORDER BY p.d LIMIT 0) AS x FROM t",
                   lambda: _per_row(lambda o: [], lambda o, r: (o["a"], None))),
    # LIMIT 2 OFFSET 1 where no key left has more than two rows (key 1, whose three would keep two, filtered away)
    "limit_two_offset": ("SELECT t.a, (SELECT p.x FROM p WHERE p.k = t.a ORDER BY p.d LIMIT 2 OFFSET 1) AS x FROM t "
                         "WHERE t.a <> 1",
                         lambda: _per_row(lambda o: [] if o["a"] == 1 else
                                          _ordered(_partition(o["a"]), lambda r: r["d"])[1:3],
                                          lambda o, r: (o["a"], _x(r)),
                                          keep=lambda o, r: o["a"] is not None and o["a"] != 1)),
}


def _over_a_join() -> Counter:
    """``FROM p JOIN q``: each key's rows with a q match, the one with the highest d; its p and q rows."""
    out = Counter()
    for oid, o in enumerate(_rows(T)):
        pairs = [((pi, qi), (pr, qr)) for pi, pr in _partition(o["a"]) for qi, qr in enumerate(_rows(Q))
                 if pr["x"] is not None and pr["x"] == qr["x"]]
        pairs.sort(key=lambda pair: pair[1][0]["d"], reverse=True)  # (the joined rows' d are not NULL)
        ids, rows = pairs[0] if pairs else ((None, None), (None, None))
        out[(repr((o["a"], None if rows[1] is None else rows[1]["tag"])),
             lineage_of(t={oid}, p={ids[0]} - {None}, q={ids[1]} - {None}))] += 1
    return out


CASES["over_a_join"] = ("SELECT t.a, (SELECT q.tag FROM p JOIN q ON q.x = p.x WHERE p.k = t.a ORDER BY p.d DESC "
                        "LIMIT 1) AS tag FROM t", _over_a_join)


def _aggregated(value) -> Counter:
    """For each row of t: ``value(rows)`` of its key's p rows, its lineage the t row and every one of those rows
    (an aggregate's lineage is its whole group; an empty group has none)."""
    out = Counter()
    for oid, o in enumerate(_rows(T)):
        rows = _partition(o["a"])
        out[(repr((o["a"], value([r for _, r in rows]))), lineage_of(t={oid}, p={i for i, _ in rows}))] += 1
    return out


def _max_x(rows):
    return max((r["x"] for r in rows if r["x"] is not None), default=None)


# an aggregate without GROUP BY gives one row: its LIMIT and an ORDER BY of its output go (passes/aggregate_limit.py)
CASES["aggregate_limit"] = ("SELECT t.a, (SELECT max(p.x) FROM p WHERE p.k = t.a LIMIT 1) AS m FROM t",
                            lambda: _aggregated(_max_x))
CASES["aggregate_fetch_ordered"] = ("SELECT t.a, (SELECT count(*) AS n FROM p WHERE t.a = p.k ORDER BY n DESC "
                                    "OFFSET 0 ROWS FETCH FIRST 2 ROWS ONLY) AS n FROM t", lambda: _aggregated(len))


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_limited_lookup_by_hand(s, con, name, strategy):
    sql, expected = CASES[name]
    result = s.run(sql, lineage=strategy)
    assert got(result) == expected()
    assert sorted(map(repr, result.table.to_pylist())) == sorted(
        map(repr, con.sql(sql).to_arrow_table().to_pylist()))  # the engine's own answer to the query as written


@pytest.mark.parametrize("sql", [
    "SELECT t.a, (SELECT p.x FROM p WHERE p.k = t.a ORDER BY p.d LIMIT 2) AS x FROM t",  # key 1: two rows kept
    "SELECT t.a FROM t WHERE t.b > (SELECT p.x FROM p WHERE p.k = t.a ORDER BY p.d OFFSET 1)",  # key 1: two left
])
def test_a_limit_keeping_two_rows_raises_as_the_engine_does(s, con, sql):
    with pytest.raises(duckdb.Error, match="(?i)more than one row"):
        con.sql(sql).fetchall()
    with pytest.raises(DltraceError, match="(?i)more than one row"):
        s.run(sql)


def test_tied_rows_give_one_of_them_with_its_ownlineage_of(s):
    """Key 1's rows tie in the ORDER BY (all one constant): the engine keeps any of them, and so does dltrace; the
    value is the kept row's, and so is the lineage."""
    result = s.run("SELECT t.a, (SELECT p.x FROM p WHERE p.k = t.a ORDER BY p.k LIMIT 1) AS x FROM t")
    for i, row in enumerate(result.table.to_pylist()):
        found = result.lineage(i).get("p", [])
        assert [_x(_rows(P)[j]) for j in found] == ([] if row["x"] is None and not found else [row["x"]])
        assert {_rows(P)[j]["k"] for j in found} <= {row["a"]}


@pytest.mark.parametrize("sql, construct", [
    ("SELECT t.a, (SELECT p.x FROM p WHERE p.k < t.a ORDER BY p.d LIMIT 1) FROM t", "LIMIT"),  # a range
    ("SELECT t.a, (SELECT p.x FROM p WHERE p.k = t.a ORDER BY abs(p.d - t.b) LIMIT 1) FROM t", "LIMIT"),
    ("SELECT t.a, (SELECT p.x FROM p WHERE p.k = t.a AND t.b > 5 ORDER BY p.d LIMIT 1) FROM t", "SCALAR"),
    ("SELECT t.a, (SELECT p.x FROM p WHERE p.k = t.a ORDER BY p.d FETCH FIRST 1 ROWS WITH TIES) FROM t", "LIMIT"),
    ("SELECT t.a, (SELECT p.x FROM p JOIN q ON q.x = p.x AND q.x > t.b WHERE p.k = t.a ORDER BY p.d LIMIT 1) FROM t",
     "LIMIT"),
])
def test_not_taken_stays_refused(s, sql, construct):
    """A range correlation, an ORDER BY or a join that reads the outer row (the rows would be numbered per outer
    row), a test of the outer row alone beside the numbered rows, WITH TIES: refused, naming the subquery."""
    with pytest.raises(dltrace.UnsupportedQuery, match=r"could not be decorrelated \(SCALAR\), at line 1"):
        s.run(sql)


def test_backward_tracing_refuses_it(s):
    """Reverse queries would number the rows again and could keep another tied row than the query's."""
    with pytest.raises(dltrace.UnsupportedQuery, match=r"backward tracing of a correlated scalar subquery with "
                                                       r"ORDER BY \.\.\. LIMIT / OFFSET is not supported, at line 1"):
        s.trace(CASES["latest"][0])


@pytest.mark.spark
@pytest.mark.parametrize("name", ["latest", "where", "second_nulls_first"])
def test_limited_lookup_on_spark(spark_session, name):
    """Spark orders NULLs first ascending (last descending): the window's ORDER BY is the user's, so it keeps the
    rows Spark's LIMIT would. Checked against the same rows computed with Spark's NULL order."""
    # (names of this test's own: other tests' sessions hold a `t` and a `p` on the shared SparkSession)
    # (the text kept as written: through sqlglot, DuckDB's NULL order would be written out for Spark)
    sql = re.sub(r"\bFROM (t|p)\b", r"FROM limited_\1 AS \1", CASES[name][0])
    session = dltrace.connect("spark", spark=spark_session)
    try:
        for table_name, table in (("limited_t", T), ("limited_p", P)):
            session.register(table_name, table)
        order = {"latest": dict(desc=True), "where": dict(nulls_first=True),
                 "second_nulls_first": dict(nulls_first=True)}[name]
        kept = {"second_nulls_first": slice(1, 2)}.get(name, slice(0, 1))
        value = (lambda o, r: (o["a"], o["b"])) if name == "where" else (lambda o, r: (o["a"], _x(r)))
        keep = (lambda o, r: None if o["b"] is None or _x(r) is None else o["b"] < _x(r)) if name == "where" else None
        expected = _per_row(lambda o: _ordered(_partition(o["a"]), lambda r: r["d"], **order)[kept], value, keep)
        assert got(session.run(sql, dialect="spark", lineage="set"), prefix="limited_") == expected
    finally:
        session.close()
