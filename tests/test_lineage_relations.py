"""Lineage as data: ``lineage_table`` / ``lineage_batches`` / ``to_pandas`` / views in the session / the saved
``row`` column / the LINEAGE ON shape / the notebook display / the one-line errors. Each relation is checked
against ``r.lineage(i)`` (the reference the rest of the suite checks)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dltrace
from dltrace.tpch import query_sql

Q3 = query_sql(3).replace("LIMIT 10", "LIMIT 25")  # more rows than the notebook display shows


def triples(r) -> list[tuple[int, str, int]]:
    return [(i, t, rid) for i in range(r.num_rows) for t, ids in r.lineage(i).items() for rid in ids]


@pytest.fixture(scope="module", params=["set", "bitmap"])
def q3(duck, request):
    return duck.run(Q3, lineage=request.param)


def test_lineage_table_is_the_lineage(q3):
    got = q3.lineage_table()
    assert got.column_names == ["row", "table", "rid"]
    assert list(zip(*got.to_pydict().values())) == triples(q3)
    one = q3.lineage_table("ORDERS")
    assert one.column_names == ["row", "rid"]
    assert list(zip(*one.to_pydict().values())) == [(i, rid) for i, t, rid in triples(q3) if t == "orders"]


def test_lineage_is_streamed_in_batches_of_rows(q3):
    batches = list(q3.lineage_batches(batch_rows=3))
    assert len(batches) == -(-q3.num_rows // 3)
    for k, b in enumerate(batches):  # each batch holds the triples of its own rows only
        assert set(b.column("row").to_pylist()) <= set(range(3 * k, 3 * k + 3))
    assert pa.Table.from_batches(batches).equals(q3.lineage_table())


def test_to_pandas_counts_and_ids(q3):
    frame = q3.to_pandas()
    assert list(frame.columns) == [*q3.table.column_names, "dl_count_customer", "dl_count_orders",
                                   "dl_count_lineitem"]
    assert frame["dl_count_lineitem"].tolist() == [len(q3.lineage(i)["lineitem"]) for i in range(q3.num_rows)]
    ids = q3.to_pandas(lineage="ids")
    assert ids["dl_orders"].tolist() == [q3.lineage(i)["orders"] for i in range(q3.num_rows)]
    assert list(q3.to_pandas(lineage=None).columns) == q3.table.column_names
    with pytest.raises(dltrace.DltraceError, match="'count', 'ids' or None"):
        q3.to_pandas(lineage="all")


def test_views_make_lineage_plain_sql(duck, q3):
    names = q3.register("q3", replace=True)
    assert names == {"rows": "q3", "lineage": "q3_lineage", "customer": "q3_lineage_customer",
                     "orders": "q3_lineage_orders", "lineitem": "q3_lineage_lineitem"}
    rows = duck.sql("SELECT * FROM q3 ORDER BY row")
    assert rows.column_names == ["row", *q3.table.column_names]
    assert rows.drop_columns(["row"]).equals(q3.table)
    lineage = duck.sql('SELECT row, "table", rid FROM q3_lineage ORDER BY row, "table", rid')
    assert sorted(zip(*lineage.to_pydict().values())) == sorted(triples(q3))
    # a rid joins its base row through dl_rid (the user's lineitem does not show it; naming it reads the rows)
    joined = duck.sql("SELECT l.row, sum(li.l_quantity) AS q FROM q3_lineage_lineitem AS l "
                      "JOIN lineitem AS li ON li.dl_rid = l.rid GROUP BY l.row ORDER BY l.row")
    want = [sum(q3.backward(i, "lineitem")["lineitem"].column("l_quantity").to_pylist()) for i in range(3)]
    assert joined.column("q").to_pylist()[:3] == want
    plain = duck.sql(f"SELECT count(*) AS n FROM {duck.rows('lineitem')} WHERE dl_rid < 5")
    assert plain.column("n").to_pylist() == [5]
    with pytest.raises(dltrace.DuplicateTable, match="q3"):
        q3.register("q3")
    with pytest.raises(dltrace.UnknownTable, match="lineage view"):
        duck.run("SELECT count(*) FROM q3_lineage")


def test_views_are_refused_for_a_result_with_a_row_column(duck):
    r = duck.run("SELECT n_nationkey AS row FROM nation")
    with pytest.raises(dltrace.DltraceError, match="column named 'row'"):
        r.register("nations")


def test_a_results_views_keep_its_types_while_its_tables_are_as_they_were():
    """The rows view was scanned from Arrow: an ENUM became text, ordered alphabetically (a notebook user's); typed
    by its query, only while the query's tables are as they were (a DOUBLE registered again as integers cast the
    old rows to 1 and 3; a review), once per name (replaced views each left a copy of the rows), and a result that
    reads dl_rid is refused by name."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TYPE tier AS ENUM ('bronze', 'silver', 'gold')")
    con.execute("CREATE TABLE cust (t tier, w DECIMAL(3, 2))")
    con.execute("INSERT INTO cust VALUES ('gold', 1.25), ('bronze', 2.75), ('silver', 3.5)")
    s = dltrace.connect("duckdb", connection=con)
    s.adopt("cust")
    for _ in range(2):
        r = s.run("SELECT t, w, (w * 100000000000000000000)::HUGEINT AS big FROM cust")
        r.register("tv", replace=True)
    assert s.sql("SELECT max(t) AS m FROM tv").to_pylist() == [{"m": "gold"}]
    assert s.sql("SELECT typeof(big) AS b FROM tv LIMIT 1").to_pylist() == [{"b": "HUGEINT"}]
    typed = [n for (n,) in con.sql("SELECT table_name FROM duckdb_tables() WHERE table_name LIKE '%typed%'").fetchall()]
    assert len(typed) == 1, typed
    s.register("w", pa.table({"v": [1.25, 2.75]}))
    old = s.run("SELECT v FROM w")
    s.register("w", pa.table({"v": [1, 2]}), replace=True)
    old.register("wv")
    assert s.sql("SELECT v FROM wv ORDER BY row").to_pylist() == [{"v": 1.25}, {"v": 2.75}]
    with pytest.raises(dltrace.ReservedName, match="a column named 'dl_rid'.*alias it"):
        s.run("SELECT dl_rid, w FROM cust").register("rv")
    s.close()
    assert not con.sql("SELECT table_name FROM duckdb_tables() WHERE table_name LIKE '%dl%'").fetchall()


def test_saved_lineage_has_the_row_column_and_old_saves_load(duck, q3, tmp_path):
    folder = q3.save(tmp_path / "q3")
    saved = pq.read_table(folder / "lineage.parquet")
    assert saved.column_names[0] == "row"
    assert saved.column("row").to_pylist() == list(range(q3.num_rows))
    # a save from before the row column: lineage.parquet without it, row i at position i
    pq.write_table(saved.drop_columns(["row"]), folder / "lineage.parquet")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["lineage.parquet"]["bytes"] = (folder / "lineage.parquet").stat().st_size
    (folder / "manifest.json").write_text(json.dumps(manifest))
    old = dltrace.load(folder, duck)
    assert [old.lineage(i) for i in range(old.num_rows)] == [q3.lineage(i) for i in range(q3.num_rows)]


def test_lineage_on_values_are_per_table(duck):
    r = duck.run("SELECT o_orderpriority, count(*) AS n FROM orders JOIN customer ON o_custkey = c_custkey "
                 "GROUP BY o_orderpriority LINEAGE ON (c_mktsegment) ORDER BY 1")
    lin = r.lineage(0)
    assert list(lin) == ["customer"]
    assert lin["customer"] == sorted({(v,) for v in duck.sql("SELECT DISTINCT c_mktsegment FROM customer")
                                     .column(0).to_pylist()})
    with pytest.raises(dltrace.DltraceError, match="LINEAGE ON"):
        r.lineage_table()
    with pytest.raises(dltrace.DltraceError, match="LINEAGE ON"):
        r.verify(0)


def test_html_display(q3):
    text = q3._repr_html_()
    assert text.count("<tr>") == 1 + 10  # the header and the first 10 rows
    assert f"{q3.num_rows} rows" in text and "first 10 shown" in text
    assert f"<td>{len(q3.lineage(0)['lineitem'])}</td>" in text


# -- errors: one line, naming the problem -------------------------------------------------------------------


def test_lineage_of_a_non_integer_row(q3):
    for bad in ("0", 1.0, None, True):
        with pytest.raises(dltrace.DltraceError, match="row index must be an int") as info:
            q3.lineage(bad)
        assert "\n" not in str(info.value)


def test_lineage_from_a_run_without_lineage(duck):
    r = duck.run("SELECT count(*) FROM nation", lineage=None)
    with pytest.raises(dltrace.DltraceError, match="has no lineage"):
        r.lineage(0)
    with pytest.raises(dltrace.DltraceError, match="has no lineage"):
        r.lineage_table()


def test_rids_outside_the_table(duck, q3):
    with pytest.raises(dltrace.DltraceError, match="rid 15000 is outside table 'orders' \\(it has 15000 rows\\)"):
        q3.forward("orders", [3, 15000])
    with pytest.raises(dltrace.DltraceError, match="rid -1 is outside table 'orders'"):
        q3.forward("orders", -1)
    with pytest.raises(dltrace.DltraceError, match="rids must be integers"):
        q3.forward("orders", ["a"])
    with pytest.raises(dltrace.DltraceError, match="outside table 'orders'"):
        duck.impact(Q3, "orders", [10**9])
    with pytest.raises(dltrace.DltraceError, match="outside table 'orders'"):
        duck.impact(Q3, "orders", [10**9], saved=q3)


def test_csv_with_only_a_header_is_read_as_duckdb_reads_it(tmp_path):
    # ("no returns today": DuckDB's read_csv gives VARCHAR columns and no rows, which a join matches nothing with)
    path = tmp_path / "empty.csv"
    path.write_text("a,b\n")
    with dltrace.connect("duckdb") as s:
        s.register("empty", str(path))
        assert s.schema("SELECT * FROM empty") == {"empty": {"a": "VARCHAR", "b": "VARCHAR"}}
        assert s.run("SELECT a, count(*) AS n FROM empty GROUP BY a").num_rows == 0


def _relation_equals_rows(s, r) -> None:
    assert sorted(zip(*r.lineage_table().to_pydict().values())) == sorted(triples(r))


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
def test_tpch_lineage_as_one_relation_duckdb(duck, strategy):
    from dltrace.tpch import QUERY_NUMBERS

    for q in QUERY_NUMBERS:
        _relation_equals_rows(duck, duck.run(query_sql(q), lineage=strategy))


@pytest.mark.spark
def test_tpch_lineage_as_one_relation_spark(sparks):
    """All 22 on Spark (bitmap: its lineage comes back as Spark's BINARY), and a view joined with its base
    table gives the tuples backward(i) gives."""
    from dltrace.tpch import QUERY_NUMBERS

    for q in QUERY_NUMBERS:
        _relation_equals_rows(sparks, sparks.run(query_sql(q), lineage="bitmap"))
    r = sparks.run(query_sql(10), lineage="set")
    r.register("q10s", replace=True)
    joined = sparks.sql("SELECT l.row, o.o_orderkey FROM q10s_lineage_orders AS l "
                        "JOIN orders AS o ON o.dl_rid = l.rid WHERE l.row < 3")
    got = sorted(zip(*joined.to_pydict().values()))
    want = sorted((i, k) for i in range(3) for k in r.backward(i, "orders")["orders"].column("o_orderkey").to_pylist())
    assert got == want


def test_views_registered_again_under_a_name_replace_the_earlier_ones():
    """The per-table views of the earlier result stayed behind, broken (a review), and a name taken by another
    registration's view could not be registered with replace=True (a raw DuckDB error)."""
    s = dltrace.connect("duckdb")
    try:
        s.register("t", pa.table({"x": [1, 2, 3]}))
        s.register("u", pa.table({"y": [7]}))
        s.run("SELECT x FROM t WHERE x > 1").register("q")
        s.run("SELECT y FROM u").register("q", replace=True)
        assert s.sql("SELECT rid FROM q_lineage_u").column("rid").to_pylist() == [0]
        with pytest.raises(dltrace.UnknownTable, match="q_lineage_t"):
            s.sql("SELECT * FROM q_lineage_t")
        s.run("SELECT count(*) AS c FROM t").register("q_lineage", replace=True)
        assert s.sql("SELECT c FROM q_lineage").column("c").to_pylist() == [3]
    finally:
        s.close()


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
def test_a_query_reading_no_table_has_empty_lineage_everywhere(strategy):
    """``SELECT 1`` run with lineage: ``lineage(0) == {}``, yet backward, lineage_table and register said "this
    result has no lineage (run it with lineage='set' or 'bitmap')", which the user had done (probe 40 #14). Every
    reader answers the empty lineage now; forward names the table, as for any table a result's lineage lacks."""
    s = dltrace.connect("duckdb")
    try:
        r = s.run("SELECT 1 AS one UNION ALL SELECT 2", lineage=strategy)
        assert r.lineage(0) == {} and r.backward(1) == {}
        assert r.lineage_table().num_rows == 0 and r.lineage_table().schema.names == ["row", "table", "rid"]
        assert list(r.lineage_batches()) == []
        assert r.register("q") == {"rows": "q", "lineage": "q_lineage"}
        assert s.sql("SELECT * FROM q_lineage").num_rows == 0
        assert s.sql("SELECT one FROM q ORDER BY one").column("one").to_pylist() == [1, 2]
        assert "empty lineage" in r.explain(0)
        with pytest.raises(dltrace.UnknownTable, match="no lineage for table 't'; it has: none"):
            r.forward("t", [0])
        off = s.run("SELECT 1 AS one", lineage=None)  # no lineage captured is not an empty lineage
        for read in (lambda: off.backward(0), off.lineage_table, lambda: off.register("q0")):
            with pytest.raises(dltrace.DltraceError, match="has no lineage: it was run with lineage=None"):
                read()
    finally:
        s.close()


@pytest.mark.spark
def test_a_refused_register_leaves_no_view_behind(spark_session):
    """A Spark tester's: the user's own dl_count function refused the bitmap views' functions (ReservedName) after
    the rows' views were made, which stayed, and the name stayed taken once the function was gone."""
    spark = spark_session.newSession()
    spark.createDataFrame([(1,), (2,), (3,)], "v long").createOrReplaceTempView("t")
    before = {t.name for t in spark.catalog.listTables()}
    with dltrace.connect("spark", spark=spark) as s:
        s.adopt("t")
        r = s.run("SELECT v FROM t WHERE v < 2", lineage="bitmap")
        spark.udf.register("dl_count", lambda x: 0, "int")
        with pytest.raises(dltrace.ReservedName, match="dl_count"):
            r.register("res")
        assert not {t.name for t in spark.catalog.listTables()} - before - {n for n in s.engine.made.names}
        assert not spark.catalog.tableExists("res")
        spark.sql("DROP TEMPORARY FUNCTION dl_count")
        r.register("res")
        assert s.sql("SELECT count(*) AS n FROM res").to_pylist() == [{"n": 1}]
