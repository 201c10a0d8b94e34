"""The LINEAGE ON clause: grammar, lineage off, per-table lineage, variable granularity (the paper's 4.3)."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

import dltrace
from dltrace.rewriter.grammar import LineageOn, generate, parse
from dltrace.tpch import TPCH_SCHEMA, query_sql
from lineage_compare import assert_same_rows_and_lineage

ON = "LINEAGE ON (year(l_shipdate), week(l_shipdate), l_shipmode)"
PAPER_QUERIES = (5, 6, 7, 9, 15)


def with_clause(sql: str, clause: str = ON) -> str:
    """Insert ``clause`` before the outermost ORDER BY (or at the end)."""
    sql = sql.rstrip().rstrip(";")
    upper = sql.upper()
    at = upper.rfind("ORDER BY")
    if at > upper.rfind(")"):
        return f"{sql[:at]}{clause}\n{sql[at:]}"
    return f"{sql}\n{clause}"


@pytest.mark.parametrize("dialect", ["duckdb", "spark"])
@pytest.mark.parametrize("clause", [
    "LINEAGE ON (YEAR(d), l_shipmode)", "LINEAGE ON ()", "LINEAGE ON TABLES (lineitem, orders)",
])
def test_round_trip(dialect, clause):
    sql = f"SELECT a, COUNT(*) FROM t WHERE x > 1 GROUP BY a HAVING COUNT(*) > 1 {clause} ORDER BY a LIMIT 3"
    tree = parse(sql, dialect)[0]
    assert isinstance(tree.args["lineage_on"], LineageOn)
    assert tree.args["order"] is not None and tree.args["limit"] is not None
    out = generate(tree, dialect)
    assert clause in out
    assert generate(parse(out, dialect)[0], dialect) == out


@pytest.mark.parametrize("before,after", [
    ("GROUP BY ALL", ""), ("GROUP BY ALL", "ORDER BY ALL"), ("GROUP BY ALL HAVING sum(v) > 1", "ORDER BY ALL LIMIT 1"),
    ("GROUP BY ALL", "LIMIT 2 OFFSET 1"), ("GROUP BY ALL WINDOW w AS (ORDER BY g)", "ORDER BY ALL DESC"),
    ("GROUP BY ALL HAVING sum(v) > 1 QUALIFY row_number() OVER (ORDER BY g) = 1", "ORDER BY 1"),
])
@pytest.mark.parametrize("clause", ["LINEAGE ON (v)", "LINEAGE ON TABLES (t)", "LINEAGE ON ()"])
def test_the_clause_follows_group_by_all(before, after, clause):
    """sqlglot reads keys after GROUP BY ALL too and took the clause's LINEAGE for one: a ParseError at ON (and
    impact, which asks for LINEAGE ON TABLES, failed on every GROUP BY ALL query)."""
    sql = f"SELECT g, sum(v) AS total FROM t {before} {clause} {after}".strip()
    tree = parse(sql, "duckdb")[0]
    assert isinstance(tree.args["lineage_on"], LineageOn) and tree.args["group"].args.get("all")
    out = generate(tree, "duckdb")
    assert clause in out and generate(parse(out, "duckdb")[0], "duckdb") == out
    tree.set("lineage_on", None)
    assert generate(tree, "duckdb") == generate(parse(f"SELECT g, sum(v) AS total FROM t {before} {after}",
                                                      "duckdb")[0], "duckdb")


@pytest.mark.parametrize("rest,tail", [("HAVING sum(v) > 1", ""), ("WINDOW w AS (ORDER BY g)", ""),
                                       ("QUALIFY row_number() OVER (ORDER BY g) = 1", ""),
                                       ("HAVING sum(v) > 1", "ORDER BY 1")])
def test_the_clause_before_having_window_or_qualify(rest, tail):
    """The README shows the clause right after GROUP BY: a HAVING after it was "Unexpected token" (a new user). Written
    there, it is the same clause."""
    before = parse(f"SELECT g, sum(v) AS total FROM t GROUP BY g LINEAGE ON (v) {rest} {tail}", "duckdb")[0]
    after = parse(f"SELECT g, sum(v) AS total FROM t GROUP BY g {rest} LINEAGE ON (v) {tail}", "duckdb")[0]
    assert isinstance(before.args["lineage_on"], LineageOn)
    assert generate(before, "duckdb") == generate(after, "duckdb")


def test_group_by_all_runs_with_the_clause():
    s = dltrace.connect("duckdb")
    s.register("t", pa.table({"g": ["a", "b", "a"], "v": [1, 2, 3]}))
    q = "SELECT g, sum(v) AS total FROM t GROUP BY ALL {} ORDER BY ALL"
    assert s.run(q.format("LINEAGE ON (v)")).lineage(0) == {"t": [(1,), (3,)]}
    assert s.run(q.format("LINEAGE ON TABLES (t)")).lineage(0) == {"t": [0, 2]}
    s.close()


def test_engine_transforms_only_in_the_engine_dialect():
    # sqlglot leaves DuckDB's week() as WEEK; Spark's engine module adds its WEEKOFYEAR to Spark's generator
    tree = parse("SELECT week(d) FROM t LINEAGE ON (week(d))", "duckdb")[0]
    assert generate(tree, "spark") == "SELECT WEEKOFYEAR(d) FROM t LINEAGE ON (WEEKOFYEAR(d))"
    assert generate(tree, "duckdb") == "SELECT WEEK(d) FROM t LINEAGE ON (WEEK(d))"
    assert generate(tree, "postgres") == "SELECT WEEK(d) FROM t LINEAGE ON (WEEK(d))"  # any sqlglot dialect


def test_lineage_is_still_a_name():
    tree = parse("SELECT lineage FROM t AS lineage", "duckdb")[0]
    assert tree.args.get("lineage_on") is None


def test_lineage_off_runs_the_original(duck):
    q = query_sql(3)
    r = duck.run(with_clause(q, "LINEAGE ON ()"))
    assert r.tables == [] and r.strategy is None
    assert r.table.equals(duck.sql(q))
    # the same plan shape: the SQL sent is the original query, no lineage columns
    assert dltrace.rewrite(with_clause(q, "LINEAGE ON ()"), schema=TPCH_SCHEMA).count("dl_") == 0


def test_lineage_on_tables_prunes_the_others(duck):
    q = with_clause(query_sql(3), "LINEAGE ON TABLES (orders)")
    sql = dltrace.rewrite(q, schema=TPCH_SCHEMA)
    assert '"dl_orders"' in sql and "dl_lineitem" not in sql and "dl_customer" not in sql
    r, full = duck.run(q), duck.run(query_sql(3))
    assert r.tables == ["orders"]
    assert all(r.lineage(i)["orders"] == full.lineage(i)["orders"] for i in range(r.num_rows))


def _projection(session, result, n):
    """Per-tuple lineage projected onto (year, week, shipmode), computed independently of the rewriter."""
    values = {
        row["dl_rid"]: (row["y"], row["w"], row["m"])
        for row in session.sql(
            "SELECT dl_rid, year(l_shipdate) AS y, weekofyear(l_shipdate) AS w, l_shipmode AS m FROM lineitem"
        ).to_pylist()
    }
    return [sorted({values[x] for x in result.lineage(i)["lineitem"]}) for i in range(result.num_rows)]


@pytest.mark.parametrize("n", PAPER_QUERIES)
def test_paper_experiment_duckdb(duck, n):
    r = duck.run(with_clause(query_sql(n)))
    per_tuple = duck.run(query_sql(n))
    assert r.table.equals(per_tuple.table)
    assert r.tables == ["lineitem"]
    assert [r.lineage(i)["lineitem"] for i in range(r.num_rows)] == _projection(duck, per_tuple, n)


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
def test_bitmap_and_set_agree(duck, strategy):
    r = duck.run(with_clause(query_sql(6)), lineage=strategy)
    assert r.lineage(0) == duck.run(with_clause(query_sql(6))).lineage(0)


@pytest.mark.spark
@pytest.mark.parametrize("n", PAPER_QUERIES)
def test_paper_experiment_spark_equals_duckdb(duck, sparks, n):
    r_spark = sparks.run(with_clause(query_sql(n)), dialect="duckdb")
    r_duck = duck.run(with_clause(query_sql(n)))
    assert_same_rows_and_lineage(r_spark, r_duck)


BAD = [
    ("SELECT count(*) FROM lineitem LINEAGE ON (nope)", dltrace.UnknownColumn, "'nope'"),
    ("SELECT count(*) FROM lineitem LINEAGE ON (sum(l_quantity))", dltrace.UnsupportedQuery, "aggregate"),
    ("SELECT count(*) FROM lineitem LINEAGE ON (row_number() OVER ())", dltrace.UnsupportedQuery, "window"),
    ("SELECT n FROM (SELECT count(*) AS n FROM lineitem LINEAGE ON (l_shipmode)) AS x", dltrace.UnsupportedQuery,
     "outermost"),
    ("SELECT count(*) FROM lineitem, orders WHERE l_orderkey = o_orderkey LINEAGE ON (l_shipmode, o_orderstatus)",
     dltrace.UnsupportedQuery, "one base table"),
    ("SELECT count(*) FROM lineitem LINEAGE ON TABLES (orders)", dltrace.UnknownTable, "orders"),
    ("SELECT n_name FROM nation UNION SELECT r_name FROM region LINEAGE ON (r_name)", dltrace.UnsupportedQuery,
     "over a UNION, wrap it: SELECT * FROM (...) LINEAGE ON (...)"),
    # the clause numbers the table's rows by their values: a query's own dl_rid read those (a review's)
    ("SELECT l_orderkey FROM lineitem WHERE dl_rid > 1 LINEAGE ON (l_shipmode)", dltrace.UnsupportedQuery,
     "reading dl_rid"),
]


@pytest.mark.parametrize("sql,error,needle", BAD, ids=[b[2] for b in BAD])
def test_errors_point_at_the_clause(sql, error, needle):
    with pytest.raises(error, match="LINEAGE ON") as info:
        dltrace.rewrite(sql, schema=TPCH_SCHEMA)
    assert needle in str(info.value)
    assert "line 1" in str(info.value)


@pytest.mark.parametrize("n", PAPER_QUERIES)
def test_backward_at_lineage_on_granularity_equals_forward(duck, n):
    sql = with_clause(query_sql(n))
    forward, backward = duck.run(sql), duck.trace(sql)
    assert backward.tables == ["lineitem"]
    assert_same_rows_and_lineage(backward, forward)


def test_backward_lineage_on_tables_and_off(duck):
    r = duck.trace(with_clause(query_sql(3), "LINEAGE ON TABLES (orders)"))
    assert r.tables == ["orders"]
    assert duck.trace(with_clause(query_sql(3), "LINEAGE ON ()")).tables == []


@pytest.mark.spark
@pytest.mark.parametrize("n", (6, 15))
def test_backward_at_lineage_on_granularity_spark(duck, sparks, n):
    sql = with_clause(query_sql(n))
    assert_same_rows_and_lineage(sparks.trace(sql, dialect="duckdb"), duck.run(sql))


def test_the_clause_says_what_it_turns_off_and_a_trace_of_none_has_no_lineage():
    """An EXISTS by a range beside a GROUP BY runs, and with any clause was refused as "could not be decorrelated"
    alone (the clause keeps witnesses in place); a trace under LINEAGE ON () read as a query of no table ({}), where
    run's has no lineage; to_pandas gives LINEAGE ON's value tuple counts (a review's)."""
    s = dltrace.connect("duckdb")
    s.register("t", pa.table({"id": [1, 2, 3], "a": [1, 2, 9], "b": ["x", "y", "x"]}))
    s.register("u", pa.table({"k": [2, 3]}))
    q = "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k > t.a) GROUP BY id"
    assert s.run(q).num_rows == 2
    with pytest.raises(dltrace.UnsupportedQuery, match="under LINEAGE ON, which keeps a subquery's witnesses"):
        s.run(q + " LINEAGE ON TABLES (t)")
    off = "SELECT b, count(*) AS n FROM t GROUP BY b ORDER BY b LINEAGE ON ()"
    for found in (s.run(off), s.trace(off)):
        assert found.strategy is None and found.tables == []
        with pytest.raises(dltrace.DltraceError, match="this result has no lineage"):
            found.lineage(0)
    on = s.run("SELECT b, count(*) AS n FROM t GROUP BY b ORDER BY b LINEAGE ON (t.a)")
    assert on.to_pandas()["dl_count_t"].tolist() == [2, 1]
    s.close()


def test_minus_zero_and_zero_are_one_value():
    """SQL takes -0.0 and 0.0 for one value: DuckDB's dictionary named a group holding only 0.0 by the -0.0 of
    another group's row, Spark by 0.0 (a review compared the two engines); both read 0.0 now."""
    s = dltrace.connect("duckdb")
    s.register("z", pa.table({"k": ["a", "c", "c"], "d": [-0.0, 0.0, 1.5]}))
    q = "SELECT k, count(*) AS n FROM z GROUP BY k LINEAGE ON (d) ORDER BY k"
    for found in (s.run(q), s.trace(q)):
        got = [found.lineage(i)["z"] for i in range(2)]
        assert got == [[(0.0,)], [(0.0,), (1.5,)]]
        assert all(math.copysign(1.0, v[0]) == 1.0 for row in got for v in row)
    s.close()


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
def test_control_lineage_of_a_subquery_reads_the_value_tuples(strategy):
    """Control lineage adds every WHERE subquery's whole lineage from a copy decorrelation keeps aside; that copy
    read the clause's table's row ids instead of its value tuples' ids (a KeyError when read: a review)."""
    s = dltrace.connect("duckdb")
    s.register("t", pa.table({"a": [1, 2, None, 2, 2], "b": [10, 20, 30, None, 20]}))
    q = "SELECT t.a FROM t WHERE t.b >= (SELECT min(t.b) FROM t) LINEAGE ON (t.b)"
    r = s.run(q, lineage=strategy, semantics="control")
    assert r.num_rows == 4
    assert all(r.lineage(i)["t"] == [(10,), (20,), (30,), (None,)] for i in range(4))
    s.close()


@pytest.mark.parametrize("sql", ["SELECT k, v + 1 FROM t ORDER BY k, v",
                                 "SELECT k, sum(v) FROM t GROUP BY k ORDER BY k",
                                 "SELECT *, v + 1 FROM t ORDER BY k, v"])
def test_lineage_off_runs_items_without_a_name(sql):
    """LINEAGE ON () runs the query as written; its width was counted from the named items, so an expression
    without an alias (or a star) was refused as "1 items gave 2 columns" (a tester's finding)."""
    s = dltrace.connect("duckdb")
    s.register("t", pa.table({"k": [1, 1, 2], "v": [10, 20, 30]}))
    off = sql.replace(" ORDER BY", " LINEAGE ON () ORDER BY")
    r = s.run(off)
    assert r.tables == [] and r.table.equals(s.sql(sql))
    s.close()


def test_lineage_on_a_struct_or_a_list_holding_nulls():
    """r.lineage(i) sorted the value tuples in Python, which compared dicts (a STRUCT) and a list's None with its
    strings: TypeError (a tester's finding); they come in the engine's order of the values now."""
    s = dltrace.connect("duckdb")
    s.register("t", pa.table({"g": [1, 1, 2], "st": [{"a": 2}, {"a": 1}, {"a": 3}],
                              "tags": [["x", None], [None], ["y"]]}))
    r = s.run("SELECT g, count(*) AS n FROM t GROUP BY g LINEAGE ON (st) ORDER BY g")
    assert [r.lineage(i) for i in range(2)] == [{"t": [({"a": 1},), ({"a": 2},)]}, {"t": [({"a": 3},)]}]
    r = s.run("SELECT g, count(*) AS n FROM t GROUP BY g LINEAGE ON (tags) ORDER BY g")
    assert [r.lineage(i) for i in range(2)] == [{"t": [(["x", None],), ([None],)]}, {"t": [(["y"],)]}]
    s.close()


def test_lineage_on_tables_takes_the_querys_name_for_a_table():
    """``LINEAGE ON TABLES (c)`` for ``FROM customer AS c`` was "unknown table 'c'" (a new user's review)."""
    s = dltrace.connect("duckdb")
    s.register("t", pa.table({"a": [1, 2, 2]}))
    s.register("u", pa.table({"a": [2, 3]}))
    sql = "SELECT x.a FROM t AS x JOIN u AS y ON x.a = y.a LINEAGE ON TABLES (x)"
    r = s.run(sql)
    assert list(r.lineage_columns) == ["t"] and sorted(r.lineage(i)["t"][0] for i in range(2)) == [1, 2]
    assert sorted(s.trace(sql).lineage(0)["t"]) == [1, 2]  # (equal rows: backward gives both theirs)
    s.close()


@pytest.mark.parametrize("on", ["st.b", "t.st.b", "x.st.a + 1, x.st.b"])
def test_lineage_on_a_structs_field(on):
    """``LINEAGE ON (st.b)``, a field of a STRUCT column, was "no table or alias 'st'" (a new user's review): the
    field's values are each row's lineage, as for ``(st).b``, forward and backward alike."""
    s = dltrace.connect("duckdb")
    s.register("t", pa.table({"g": [1, 1, 2, 2], "st": [{"a": 2, "b": "p"}, {"a": 1, "b": "q"}, {"a": 3, "b": "p"},
                                                           None]}))
    sql = f"SELECT g, count(*) AS n FROM t AS x GROUP BY g LINEAGE ON ({on}) ORDER BY g"
    r, b = s.run(sql), s.trace(sql)
    values = {"st.b": [[("p",), ("q",)], [("p",), (None,)]],
              "t.st.b": [[("p",), ("q",)], [("p",), (None,)]],
              "x.st.a + 1, x.st.b": [[(2, "q"), (3, "p")], [(4, "p"), (None, None)]]}[on]
    for i in range(2):
        assert sorted(r.lineage(i)["t"], key=repr) == sorted(values[i], key=repr)
        assert sorted(b.lineage(i)["t"], key=repr) == sorted(values[i], key=repr)
    with pytest.raises(dltrace.UnknownColumn, match="no table or alias 'nope'"):
        s.run("SELECT count(*) FROM t LINEAGE ON (nope.b)")
    s.close()


def test_lineage_on_a_derived_tables_column_is_not_a_struct_field():
    """``st.b`` where ``st`` is a derived table (or a CTE) and another table has a STRUCT column ``st``: SQL reads
    the derived table's column, which the clause does not read (a review found the struct's field read)."""
    s = dltrace.connect("duckdb")
    s.register("t", pa.table({"g": [1], "st": [{"b": "p"}]}))
    for sql in ("SELECT g, count(*) AS n FROM t, (SELECT 1 AS b) AS st GROUP BY g LINEAGE ON (st.b)",
                "WITH st AS (SELECT 1 AS b) SELECT g, count(*) AS n FROM t, st GROUP BY g LINEAGE ON (st.b)"):
        with pytest.raises(dltrace.UnknownColumn, match="'st' is a derived table, CTE, unnest or row generator of the query"):
            s.run(sql)
    s.close()


@pytest.mark.parametrize("on", ["w", "[a, b]", "struct_pack(a := a, w := w)", "a, w"])
def test_backward_gives_forwards_distinct_values_in_its_order(on):
    """Backward tracing deduplicated the value tuples with a Python set: two NaN rows gave the NaN tuple twice,
    unsorted, and a LIST or STRUCT value raised ``unhashable type`` (probe 40 #7). It maps the traced rows through
    forward's dictionary now: the same distinct tuples, in the same order."""
    s = dltrace.connect("duckdb")
    try:
        s.register("p", pa.table({"g": ["x", "x", "x", "y", "y"], "a": [1, 2, 1, 1, None],
                                  "b": [1, 1, 2, 2, 2], "w": [float("nan"), float("nan"), 1.0, None, -0.0]}))
        q = f"SELECT g, count(*) AS n FROM p GROUP BY g ORDER BY g LINEAGE ON ({on})"
        forward, backward = s.run(q), s.trace(q)
        for i in range(2):
            f, b = forward.lineage(i), backward.lineage(i)
            assert repr(b) == repr(f)  # (repr: NaN equals no NaN)
        assert len(backward.lineage(0)["p"]) == (2 if on == "w" else 3)
    finally:
        s.close()
