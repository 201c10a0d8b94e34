"""LATERAL joins (passes/lateral_joins.py): the top rows of each key, grouped, distinct and windowed rows per outer
row, LEFT JOIN LATERAL's padding. Each row and its lineage computed here by hand from the tables -- for each outer
row, the rows its subquery gives over that row, as the SQL standard evaluates a LATERAL -- and checked against
DuckDB's own answer to the query as written. The data has NULL keys, NULL order values (DuckDB orders them last,
ascending and descending alike), empty partitions and partitions of one to three rows."""

from __future__ import annotations

import re
from collections import Counter

import duckdb
import pyarrow as pa
import pytest

import dltrace
from lineage_compare import assert_by_hand, counted_rows, guest_fixtures, lineage_of

T = pa.table({"a": pa.array([1, 2, None, 2, 4, 3], pa.int64()),
              "b": pa.array([10, 20, 30, None, 5, 50], pa.int64())})
# p: key 1 has three rows (one NULL d), 2 two, 3 one (NULL x), 4 none; a NULL key row
P = pa.table({"k": pa.array([1, 2, 1, None, 3, 1, 2], pa.int64()),
              "d": pa.array([3, 1, None, 7, 2, 1, 5], pa.int64()),
              "x": pa.array([11, 22, 13, 99, None, 15, 26], pa.int64())})
T_ROWS, P_ROWS = T.to_pylist(), P.to_pylist()


con, s = guest_fixtures({"t": T, "p": P})


def _partition(o, keep=lambda r: True):
    """(rid, row) of p whose key equals the outer row's a (none for a NULL a), kept by ``keep``."""
    return [(i, r) for i, r in enumerate(P_ROWS) if o["a"] is not None and r["k"] == o["a"] and keep(r)]


def _by(rows, key, desc=False):
    """(rid, row) pairs in DuckDB's order: NULLs last, ascending and descending alike."""
    present = sorted((r for r in rows if key(r[1]) is not None), key=lambda r: key(r[1]), reverse=desc)
    return present + [r for r in rows if key(r[1]) is None]


def _expected(rows_of, value, left=False) -> Counter:
    """For each row of t: the rows ``rows_of(o)`` gives ([(value tuple, p rids)]), each an output row with the t row's
    and those p rows' lineage; with ``left`` a t row without rows is padded (``value(o, None)``)."""
    out = Counter()
    for oid, o in enumerate(T_ROWS):
        rows = rows_of(o)
        for values, rids in rows:
            out[(repr((o["a"], *values)), lineage_of(t={oid}, p=set(rids)))] += 1
        if left and not rows:
            out[(repr((o["a"], *value)), lineage_of(t={oid}))] += 1
    return out


def got(result, prefix: str = "") -> Counter:
    return counted_rows(result, prefix=prefix)


def _groups(o, key, value):
    """The subquery's groups for the outer row: (value(rows), rids) per distinct ``key`` of its partition."""
    groups: dict = {}
    for i, r in _partition(o):
        groups.setdefault(key(r), []).append((i, r))
    return [(value(k, [r for _, r in members]), [i for i, _ in members]) for k, members in groups.items()]


CASES = {
    # the latest row of each key (NULL d last even descending): key 4 and NULL have none, and the row goes
    "latest": ("SELECT t.a, x.x FROM t CROSS JOIN LATERAL (SELECT p.x FROM p WHERE p.k = t.a ORDER BY p.d DESC "
               "LIMIT 1) AS x",
               lambda: _expected(lambda o: [((r["x"],), [i]) for i, r in _by(_partition(o), lambda r: r["d"],
                                                                                 desc=True)[:1]], None)),
    # the second and third rows by d, LEFT JOIN: a t row without them is padded; the key on the left
    "left_offset": ("SELECT t.a, x.d FROM t LEFT JOIN LATERAL (SELECT p.d FROM p WHERE t.a = p.k ORDER BY p.d "
                    "LIMIT 2 OFFSET 1) AS x ON TRUE",
                    lambda: _expected(lambda o: [((r["d"],), [i]) for i, r in _by(_partition(o), lambda r: r["d"])
                                                 [1:3]], (None,), left=True)),
    # plain rows, a filter of the subquery's own and a test of the outer row alone, the ON over both
    "plain_on": ("SELECT t.a, x.x, x.d FROM t JOIN LATERAL (SELECT p.x, p.d FROM p WHERE p.k = t.a AND p.x > 12 "
                 "AND t.b >= 10) AS x ON x.d < 5",
                 lambda: _expected(lambda o: [((r["x"], r["d"]), [i]) for i, r in _partition(
                     o, lambda r: r["x"] is not None and r["x"] > 12 and r["d"] is not None and r["d"] < 5)
                     if o["b"] is not None and o["b"] >= 10], None)),
    # LEFT JOIN LATERAL with an ON that fails for some rows: those rows go, a t row left without any is padded
    "left_on": ("SELECT t.a, x.x FROM t LEFT JOIN LATERAL (SELECT p.x FROM p WHERE p.k = t.a) AS x ON x.x > 12",
                lambda: _expected(lambda o: [((r["x"],), [i]) for i, r in _partition(
                    o, lambda r: r["x"] is not None and r["x"] > 12)], (None,), left=True)),
    # grouped per outer row: the groups of its partition (by whether x is NULL), each its rows' lineage
    "grouped": ("SELECT t.a, x.missing, x.n, x.m FROM t CROSS JOIN LATERAL (SELECT p.x IS NULL AS missing, "
                "count(*) AS n, max(p.d) AS m FROM p WHERE p.k = t.a GROUP BY p.x IS NULL) AS x",
                lambda: _expected(lambda o: _groups(o, lambda r: r["x"] is None, lambda k, rows: (
                    k, len(rows), max((r["d"] for r in rows if r["d"] is not None), default=None))), None)),
    # DISTINCT per outer row: each distinct value's rows
    "distinct": ("SELECT t.a, x.big FROM t, LATERAL (SELECT DISTINCT p.x > 12 AS big FROM p WHERE p.k = t.a) AS x",
                 lambda: _expected(lambda o: _groups(o, lambda r: None if r["x"] is None else r["x"] > 12,
                                                     lambda k, rows: (k,)), None)),
    # a window over the outer row's rows: the partition's size; a window's row has its own row's lineage
    "window": ("SELECT t.a, x.x, x.n FROM t, LATERAL (SELECT p.x, count(*) OVER () AS n FROM p WHERE p.k = t.a) AS x",
               lambda: _expected(lambda o: [((r["x"], len(_partition(o))), [i]) for i, r in _partition(o)], None)),
    # an aggregate without GROUP BY: one row per outer row, its group's lineage; over no rows (key 4, a NULL key,
    # or the outer test failing) count 0, max NULL, and no p row
    "aggregated": ("SELECT t.a, x.n, x.m FROM t CROSS JOIN LATERAL (SELECT count(*) AS n, max(p.x) AS m FROM p "
                   "WHERE p.k = t.a AND t.b < 40) AS x",
                   lambda: _expected(lambda o: [_counted(_partition(o) if o["b"] is not None and o["b"] < 40 else [])],
                                     None)),
}


def _counted(rows):
    return (len(rows), max((r["x"] for _, r in rows if r["x"] is not None), default=None)), [i for i, _ in rows]


def test_an_aggregate_over_no_rows_is_read_as_its_value_everywhere(s, con):
    """The count of an outer row without rows is 0 in WHERE and GROUP BY too (read through COALESCE): t rows of a
    NULL, 4 (no p rows) and 3 (one p row, its d 2) have counts 0, 0 and 1; lineage the t rows and p's row 4."""
    sql = ("SELECT x.n, count(*) AS c FROM t, LATERAL (SELECT count(p.d) AS n FROM p WHERE p.k = t.a) AS x "
           "WHERE x.n < 2 GROUP BY x.n")
    assert got(s.run(sql)) == Counter({("(0, 2)", lineage_of(t={2, 4})): 1, ("(1, 1)", lineage_of(t={5}, p={4})): 1})
    assert sorted(con.sql(sql).fetchall()) == [(0, 2), (1, 1)]


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_lateral_join_by_hand(s, con, name, strategy):
    sql, expected = CASES[name]
    result = s.run(sql, lineage=strategy)
    assert got(result) == expected()
    assert sorted(map(repr, result.table.to_pylist())) == sorted(
        map(repr, con.sql(sql).to_arrow_table().to_pylist()))  # the engine's own answer to the query as written


@pytest.mark.parametrize("name", ["plain_on", "left_on", "grouped", "distinct", "aggregated"])
def test_backward_tracing_agrees(s, name):
    """Without a LIMIT the derived table is an ordinary one: backward tracing gives every row's forward lineage
    (t.b added: backward tracing reads a row's lineage off its values, which two t rows of a = 2 would share)."""
    sql = CASES[name][0].replace("SELECT t.a,", "SELECT t.a, t.b,", 1)
    forward = got(s.run(sql, lineage="set"))
    traced = s.trace(sql)
    assert sum(forward.values()) == traced.table.num_rows
    assert counted_rows(traced) == forward


def test_backward_tracing_refuses_a_limit(s):
    """Reverse queries would number the rows again and could keep another tied row than the query's."""
    with pytest.raises(dltrace.UnsupportedQuery, match=r"backward tracing of a LATERAL subquery with ORDER BY \.\.\. "
                                                       r"LIMIT / OFFSET is not supported, at line 1"):
        s.trace(CASES["latest"][0])


NOT_TAKEN = [
    ("SELECT t.a, x.m FROM t, LATERAL (SELECT max(p.x) + 1 AS m FROM p WHERE p.k = t.a) AS x", "with an item"),
    ("SELECT t.a, x.n FROM t JOIN LATERAL (SELECT count(*) AS n FROM p WHERE p.k = t.a) AS x ON x.n > 1",
     "joined ON a condition"),
    ("SELECT t.a, x.n FROM t, LATERAL (SELECT count(*) AS n FROM p WHERE p.k = t.a HAVING count(*) > 1) AS x",
     "with a HAVING"),
    ("SELECT t.a, x.x FROM t, LATERAL (SELECT p.x FROM p WHERE p.k < t.a) AS x", "correlated by"),
    ("SELECT t.a, x.v FROM t, LATERAL (SELECT p.x + t.b AS v FROM p WHERE p.k = t.a) AS x", "outside its WHERE"),
    ("SELECT t.a, x.x FROM t, LATERAL (SELECT p.x FROM p WHERE p.k = t.a LIMIT 1) AS x", "no ORDER BY"),
    ("SELECT t.a, x.x FROM t, LATERAL (SELECT p.x FROM p WHERE p.k = t.a UNION ALL SELECT 1) AS x", "one SELECT"),
    ("SELECT t.a, x.x FROM t, LATERAL (SELECT p.x FROM p WHERE p.k = t.a OR p.k IS NULL) AS x", "correlated by"),
    ("SELECT t.a, x.x FROM t, LATERAL (SELECT p.x FROM p WHERE p.k = t.a ORDER BY p.d FETCH FIRST 1 ROWS WITH TIES) "
     "AS x", "WITH TIES"),
    ("SELECT t.a, x.r FROM t, LATERAL (SELECT random() AS r FROM p WHERE p.k = t.a) AS x", "random"),
    # its columns are read through COALESCE, which would turn a later join's padding into the count's 0
    ("SELECT t.a, x.n, q.k FROM t CROSS JOIN LATERAL (SELECT count(*) AS n FROM p WHERE p.k = t.a) AS x "
     "RIGHT JOIN p AS q ON q.d = t.b", "followed by a RIGHT or FULL join"),
    # an ORDER BY without LIMIT goes: a key that could raise the engine's error is not dropped
    ("SELECT t.a, x.x FROM t, LATERAL (SELECT p.x FROM p WHERE p.k = t.a ORDER BY CAST('z' || p.x AS INT)) AS x",
     "ORDER BY key"),
]


def test_group_by_empty_is_the_aggregate_over_no_rows_too(s, con):
    """GROUP BY () has its one group over no rows too (grouped by the key as well, t rows without p rows lost it;
    refused then). It is written as the global aggregate before the analysis (passes/grouping_tuples.py): each t row
    gets its count, 0 where p has no row of its key."""
    sql = "SELECT t.a, x.n FROM t, LATERAL (SELECT count(*) AS n FROM p WHERE p.k = t.a GROUP BY ()) AS x"
    plain = sql.replace(" GROUP BY ()", "")
    assert got(s.run(sql)) == got(s.run(plain))
    assert sorted(map(repr, s.run(sql).table.to_pylist())) == sorted(
        map(repr, con.sql(sql).to_arrow_table().to_pylist()))


@pytest.mark.parametrize("sql, why", NOT_TAKEN)
def test_not_taken_is_refused(s, sql, why):
    """What the rewrite does not take is refused, naming the LATERAL and why (the engine would answer)."""
    with pytest.raises(dltrace.UnsupportedQuery, match=rf"a LATERAL subquery .*{re.escape(why)}.* is not supported, "
                                                       rf"at line 1"):
        s.run(sql)


def test_a_collated_key_is_refused_where_partitions_matter():
    """Under NOCASE, 'A' = 'a': one outer row's rows are two partitions of the inner side, and its LIMIT would keep
    a row of each; a plain join compares as the subquery did and is taken."""
    connection = duckdb.connect()
    connection.execute("CREATE TABLE o (s VARCHAR COLLATE NOCASE); INSERT INTO o VALUES ('a')")
    connection.execute("CREATE TABLE i (s VARCHAR COLLATE NOCASE, v INT); INSERT INTO i VALUES ('A', 1), ('a', 2)")
    session = dltrace.connect("duckdb", connection=connection)
    try:
        session.adopt("o")
        session.adopt("i")
        with pytest.raises(dltrace.UnsupportedQuery, match="a LATERAL subquery correlated by a string equality"):
            session.run("SELECT o.s, x.v FROM o, LATERAL (SELECT i.v FROM i WHERE i.s = o.s ORDER BY i.v LIMIT 1) x")
        plain = "SELECT o.s, x.v FROM o, LATERAL (SELECT i.v FROM i WHERE i.s = o.s) x"
        assert sorted(session.run(plain).table.column("v").to_pylist()) == [1, 2]
    finally:
        session.close()
        connection.close()


def test_an_aggregates_column_list_renames_its_values(s, con):
    """``AS x(z)``: the count read as z, through its COALESCE (0 where a t row has no p rows)."""
    sql = "SELECT t.a, x.z FROM t, LATERAL (SELECT count(*) AS n FROM p WHERE p.k = t.a) AS x(z) WHERE x.z < 2"
    expected = sorted([{"a": None, "z": 0}, {"a": 3, "z": 1}, {"a": 4, "z": 0}], key=repr)
    assert sorted(s.run(sql).table.to_pylist(), key=repr) == expected
    assert sorted(con.sql(sql).to_arrow_table().to_pylist(), key=repr) == expected


def test_duckdbs_implicit_lateral_is_read_as_duckdb_reads_it(s, con):
    """``FROM t, (SELECT ... WHERE p.k = t.a) AS x`` without the keyword: DuckDB reads it as LATERAL, and so does
    dltrace (it failed to resolve ``t.a``)."""
    sql, expected = CASES["latest"]
    implicit = sql.replace("CROSS JOIN LATERAL (", ", (")
    assert got(s.run(implicit)) == expected()
    assert sorted(map(repr, s.run(implicit).table.to_pylist())) == sorted(
        map(repr, con.sql(implicit).to_arrow_table().to_pylist()))


@pytest.mark.parametrize("join", ["CROSS JOIN LATERAL", ", LATERAL", "JOIN LATERAL", "LEFT JOIN LATERAL"])
def test_lateral_before_an_unnest_is_the_join_duckdb_reads_without_it(s, con, join):
    """``t CROSS JOIN LATERAL unnest(...)`` was refused ("LATERAL over anything but a joined subquery") where ``t,
    unnest(...)`` ran: each row of the unnest has its t row's lineage (a new user's review). A LEFT JOIN too."""
    sql = f"SELECT t.a, z.e FROM t {join} unnest([t.a, t.b]) AS z(e)" + (" ON TRUE" if "JOIN LATERAL" in join and
                                                                          "CROSS" not in join else "")
    r = s.run(sql)
    assert sorted(map(repr, r.table.to_pylist())) == sorted(map(repr, con.sql(sql).to_arrow_table().to_pylist()))
    expected = Counter()
    for oid, o in enumerate(T_ROWS):
        for e in (o["a"], o["b"]):
            expected[(repr((o["a"], e)), lineage_of(t={oid}))] += 1
    assert got(r) == expected


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
def test_left_join_lateral_unnest_pads_an_empty_list(s, con, strategy):
    """``LEFT JOIN LATERAL unnest(...) ON <condition>``: a row whose list is empty or NULL, or has no element passing
    the condition, is padded with NULL, its lineage its own row; DuckDB reads it as the LEFT JOIN without LATERAL."""
    sql = ("SELECT t.a, z.e FROM t LEFT JOIN LATERAL unnest(CASE WHEN t.a > 1 THEN [t.a, t.b] "
           "WHEN t.a = 1 THEN [] END) AS z(e) ON z.e > 2")
    expected = Counter()
    for oid, o in enumerate(T_ROWS):
        items = [o["a"], o["b"]] if o["a"] is not None and o["a"] > 1 else []
        kept = [e for e in items if e is not None and e > 2]
        for e in kept or [None]:
            expected[(repr((o["a"], e)), lineage_of(t={oid}))] += 1
    assert_by_hand(s, con, sql, expected, strategy)
    with pytest.raises(dltrace.UnsupportedQuery, match="LATERAL over anything but a joined subquery"):
        s.run("SELECT t.a, z.e FROM t FULL JOIN LATERAL unnest([t.a]) AS z(e) ON TRUE")


@pytest.mark.spark
@pytest.mark.parametrize("name", ["latest", "grouped", "left_on", "aggregated"])
def test_lateral_join_on_spark(spark_session, name):
    """Spark's LATERAL subqueries, rewritten alike. Spark orders NULLs first ascending (last descending): the
    latest row is the same as DuckDB's."""
    # (names of this test's own: other tests' sessions hold a `t` and a `p` on the shared SparkSession)
    sql = re.sub(r"\bFROM (t|p)\b", r"FROM lateral_\1 AS \1", CASES[name][0])
    session = dltrace.connect("spark", spark=spark_session)
    try:
        for table_name, table in (("lateral_t", T), ("lateral_p", P)):
            session.register(table_name, table)
        assert got(session.run(sql, dialect="spark", lineage="set"), prefix="lateral_") == CASES[name][1]()
    finally:
        session.close()
