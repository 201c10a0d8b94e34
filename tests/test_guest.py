"""dltrace is a guest on a connection or SparkSession the user passes in: it sees the user's objects (adopt),
never registers over them, and on close drops only what it made -- the user's tables, views and their contents
are the same before and after. ``dltrace.add_rids`` gives a user's own table the row ids ``rewrite()`` reads."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

import dltrace

SALES = pa.table({"region": ["n", "s", "n", "e", "s"], "amount": [10, 20, 30, 40, 50]})
BY_REGION = "SELECT region, sum(amount) AS total FROM {t} GROUP BY region ORDER BY region"
WANT = [("e", 40, [3]), ("n", 40, [0, 2]), ("s", 70, [1, 4])]


def per_region(r, table: str) -> list[tuple]:
    return [(row["region"], row["total"], r.lineage(i)[table]) for i, row in enumerate(r.table.to_pylist())]


# -- DuckDB -----------------------------------------------------------------------------------------------------


def duckdb_state(con: duckdb.DuckDBPyConnection) -> dict:
    """Every relation of the connection with its kind and sorted contents."""
    state = {}
    for name, kind in con.sql("SELECT table_name, table_type FROM information_schema.tables").fetchall():
        state[name] = (kind, sorted(con.sql(f'SELECT * FROM "{name}"').fetchall(), key=repr))
    return state


@pytest.fixture
def user_con():
    con = duckdb.connect()
    con.sql("CREATE TABLE sales AS SELECT * FROM (VALUES ('n', 10), ('s', 20), ('n', 30), ('e', 40), ('s', 50)) "
            "AS v(region, amount)")
    con.sql("CREATE VIEW big_sales AS SELECT * FROM sales WHERE amount >= 30")
    con.register("arrow_sales", SALES)
    yield con
    con.close()


def test_duckdb_connection_is_unchanged_after_a_session(user_con):
    before = duckdb_state(user_con)
    s = dltrace.connect("duckdb", connection=user_con)
    for name in ("sales", "big_sales", "arrow_sales"):
        with pytest.raises(dltrace.DuplicateTable, match=f"'{name}' already exists on the connection"):
            s.register(name, SALES)
        with pytest.raises(dltrace.DuplicateTable, match=f"'{name}'"):
            s.register(name, SALES, replace=True)
    s.adopt("sales")
    s.adopt("big_sales")
    s.register("mine", SALES)
    assert per_region(s.run(BY_REGION.format(t="sales")), "sales") == WANT
    big = s.run("SELECT count(*) AS n FROM big_sales")
    assert big.table.column(0).to_pylist() == [3] and big.lineage(0) == {"big_sales": [0, 1, 2]}
    assert s.sql("SELECT * FROM sales").num_rows == 5  # plain SQL reads the user's own table
    assert s.run(BY_REGION.format(t="sales")).backward(1)["sales"].column("amount").to_pylist() == [10, 30]
    s.run(BY_REGION.format(t="mine")).register("q")
    with pytest.raises(dltrace.DuplicateTable, match="adopted"):
        s.register("sales", SALES, replace=True)
    s.close()
    assert duckdb_state(user_con) == before  # nothing of dltrace's left, nothing of the user's changed
    assert user_con.sql("SELECT count(*) FROM sales").fetchall() == [(5,)]  # still open


def test_only_dltraces_own_connection_draws_no_progress_bar(user_con):
    """DuckDB writes its progress bar into the process's stdout, a pipe or a file too (a review found the CLI's CSV
    starting with one): off on the connection dltrace opens, as the user set it on theirs."""
    setting = "SELECT current_setting('enable_progress_bar')"
    own = dltrace.connect("duckdb")
    assert own.engine.con.sql(setting).fetchall() == [(False,)]
    own.close()
    user_con.execute("SET enable_progress_bar = true")
    guest = dltrace.connect("duckdb", connection=user_con)
    guest.close()
    assert user_con.sql(setting).fetchall() == [(True,)]


def test_duckdb_relations_and_readers_are_sources(user_con):
    with dltrace.connect("duckdb", connection=user_con) as s:
        s.register("rel", user_con.sql("SELECT * FROM sales"))
        s.register("stream", pa.RecordBatchReader.from_batches(SALES.schema, SALES.to_batches()))
        assert per_region(s.run(BY_REGION.format(t="rel")), "rel") == WANT
        assert per_region(s.run(BY_REGION.format(t="stream")), "stream") == WANT
        user_con.register("user_stream", pa.RecordBatchReader.from_batches(SALES.schema, SALES.to_batches()))
        s.adopt("user_stream")  # a one-shot stream: adopting reads it into dltrace's rows relation
        assert per_region(s.run(BY_REGION.format(t="user_stream")), "user_stream") == WANT
    assert {r[0] for r in user_con.sql("SELECT table_name FROM information_schema.tables").fetchall()} == {
        "sales", "big_sales", "arrow_sales", "user_stream"}


def test_create_as_over_an_adopted_name_says_it_is_the_users(user_con):
    """CREATE ... AS over an adopted relation's name said to write CREATE OR REPLACE, which is then refused: it
    names the relation as the user's, and the user's table stays as it was (a new user's)."""
    with dltrace.connect("duckdb", connection=user_con) as s:
        s.adopt("sales")
        before = user_con.sql("SELECT * FROM sales ORDER BY ALL").fetchall()
        for sql in ("CREATE TABLE sales AS SELECT 1 AS x", "CREATE OR REPLACE TABLE sales AS SELECT 1 AS x"):
            with pytest.raises(dltrace.DuplicateTable, match="'sales' is your own relation \\(adopted\\).*another name"):
                s.run(sql)
        assert s.run("CREATE TABLE IF NOT EXISTS sales AS SELECT 1 AS x") is None
        assert user_con.sql("SELECT * FROM sales ORDER BY ALL").fetchall() == before


def test_create_as_under_a_schema_is_refused_not_made_in_main(user_con):
    """CREATE TABLE s2.y AS ... made main.y (and nodb.main.zz too), where the user asked for s2.y (a new user's)."""
    user_con.execute("CREATE SCHEMA IF NOT EXISTS s2")
    with dltrace.connect("duckdb", connection=user_con) as s:
        s.adopt("sales")
        for sql in ("CREATE TABLE s2.y AS SELECT * FROM sales", "CREATE VIEW nodb.main.zz AS SELECT * FROM sales"):
            with pytest.raises(dltrace.UnsupportedQuery, match="schema-qualified name is not supported"):
                s.run(sql)
        made = user_con.sql("SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views() "
                            "WHERE NOT internal").fetchall()
        assert not {("y",), ("zz",)} & set(made)


def test_a_macro_reading_a_relation_is_refused_and_one_over_its_arguments_runs(user_con):
    """A macro holding a subquery reads rows no FROM names: its lineage left them out, and DuckDB pastes the call's
    arguments into its query as text, where the bare k of has(k) binds to u.k (the rewrite's has(t.k) answered
    otherwise; an adversarial review's)."""
    user_con.execute("CREATE TABLE mu AS SELECT * FROM (VALUES (1, 10), (2, 20)) v(k, w)")
    user_con.execute("CREATE MACRO has_mu(x) AS EXISTS (SELECT 1 FROM mu WHERE mu.k = x)")
    user_con.execute("CREATE MACRO total_mu() AS (SELECT sum(w) FROM mu)")
    user_con.execute("CREATE MACRO plus_one(x) AS x + 1")
    with dltrace.connect("duckdb", connection=user_con) as s:
        s.adopt("sales")
        for sql in ("SELECT amount FROM sales WHERE has_mu(amount)", "SELECT amount, Total_Mu() FROM sales"):
            for call in (s.run, s.trace):
                with pytest.raises(dltrace.UnsupportedQuery, match=r"a call of (has_mu|Total_Mu), a function of yours "
                                   r"whose body reads a relation.*at line 1, col (32|16):"):
                    call(sql)
        # a macro named as a function sqlglot knows: DuckDB calls the user's upper() in place of its own
        user_con.execute("CREATE MACRO upper(x) AS (SELECT max(w) FROM mu)")
        with pytest.raises(dltrace.UnsupportedQuery, match="a call of upper, a function of yours"):
            s.run("SELECT upper(region) FROM sales")
        r = s.run("SELECT amount, plus_one(amount) AS p FROM sales ORDER BY amount")
        assert r.table.column("p").to_pylist() == [a + 1 for a in r.table.column("amount").to_pylist()]
        assert [r.lineage(i)["sales"] for i in range(r.num_rows)] and all(len(r.lineage(i)["sales"]) == 1
                                                                        for i in range(r.num_rows))


def test_a_relation_off_the_search_path_leaves_its_plain_name_free(user_con):
    """s2.x, which the plain name x does not read, blocked registering x, and the message's s.adopt('x') failed on
    DuckDB's "does not exist" (a new user's). x is registered beside it; s2.x stays the user's, untouched."""
    user_con.execute("CREATE SCHEMA IF NOT EXISTS s2; CREATE TABLE s2.x AS SELECT 1 AS who")
    with dltrace.connect("duckdb", connection=user_con) as s:
        with pytest.raises(dltrace.SourceError, match="no table, view or registered object named 'x'"):
            s.adopt("x")
        s.register("x", pa.table({"a": [5]}))
        assert s.run("SELECT a FROM x").table.to_pylist() == [{"a": 5}]
    assert user_con.sql("SELECT * FROM s2.x").fetchall() == [(1,)]
    assert user_con.sql("SELECT count(*) FROM duckdb_views() WHERE view_name = 'x'").fetchall() == [(0,)]


def test_adopt_unknown_and_reserved(user_con):
    s = dltrace.connect("duckdb", connection=user_con)
    with pytest.raises(dltrace.SourceError, match="no table, view or registered object named 'nope'"):
        s.adopt("nope")
    with pytest.raises(dltrace.ReservedName):
        s.adopt("_dl_rows_sales")
    user_con.execute("CREATE SCHEMA IF NOT EXISTS other")
    user_con.execute("CREATE OR REPLACE TABLE other.sales AS SELECT 42 AS amount")
    with pytest.raises(dltrace.SourceError, match="not schema.table: adopt a view of it"):
        s.adopt("other.sales")
    s.adopt("sales")
    for sql in ("SELECT amount FROM other.sales", "SELECT amount FROM main.sales"):  # neither is the adopted name
        with pytest.raises(dltrace.UnsupportedQuery, match=r"schema-qualified table \(\w+\.sales\)"):
            s.run(sql)
        with pytest.raises(dltrace.UnsupportedQuery, match="schema-qualified"):
            s.trace(sql)
    assert s.sql("SELECT amount FROM other.sales").to_pylist() == [{"amount": 42}]  # plain SQL reads it
    s.close()
    user_con.execute("DROP TABLE other.sales")
    user_con.execute("DROP SCHEMA other")


def test_add_rids_then_rewrite_on_the_users_connection(user_con):
    dltrace.add_rids(user_con, "sales")
    assert user_con.sql("SELECT dl_rid FROM sales ORDER BY dl_rid").fetchall() == [(i,) for i in range(5)]
    dltrace.install(user_con)
    sql = dltrace.rewrite(BY_REGION.format(t="sales"), schema={"sales": {"region": "VARCHAR", "amount": "INT"}})
    got = user_con.sql(sql).fetchall()
    assert [(region, total, list(ids)) for region, total, ids in got] == WANT
    with pytest.raises(dltrace.SourceError, match="already has a dl_rid"):
        dltrace.add_rids(user_con, "sales")
    with pytest.raises(dltrace.SourceError, match="is a view, not a table"):
        dltrace.add_rids(user_con, "big_sales")
    # the same table traced by a session: its message blamed the user's naming for the column add_rids added
    s = dltrace.connect("duckdb", connection=user_con)
    with pytest.raises(dltrace.ReservedName, match="it is dltrace's row id column, which dltrace.add_rids gives a "
                                                   "table; register or adopt a view without it"):
        s.adopt("sales")
    user_con.execute("CREATE VIEW sales_rows AS SELECT * EXCLUDE (dl_rid) FROM sales")
    s.adopt("sales_rows")
    assert s.run(BY_REGION.format(t="sales_rows")).lineage(0) == {"sales_rows": WANT[0][2]}
    s.close()


# -- Spark ------------------------------------------------------------------------------------------------------


def spark_state(spark) -> dict:
    return {t.name: (t.isTemporary, sorted(map(tuple, spark.table(f"`{t.name}`").collect())))
            for t in spark.catalog.listTables()}


@pytest.mark.spark
def test_spark_session_is_unchanged_after_a_session(spark_session):
    spark = spark_session.newSession()
    spark.createDataFrame(SALES.to_pandas()).createOrReplaceTempView("sales")
    spark.sql("CREATE TEMPORARY VIEW big_sales AS SELECT * FROM sales WHERE amount >= 30")
    before = spark_state(spark)
    s = dltrace.connect("spark", spark=spark)
    with pytest.raises(dltrace.DuplicateTable, match="'sales' already exists on the connection"):
        s.register("sales", SALES, replace=True)
    s.adopt("sales")
    s.register("mine", SALES)
    assert per_region(s.run(BY_REGION.format(t="sales")), "sales") == WANT
    r = s.run(BY_REGION.format(t="mine"), lineage="bitmap")
    r.register("q")
    got = s.sql("SELECT row, rid FROM q_lineage_mine ORDER BY row, rid").to_pydict()
    assert list(zip(got["row"], got["rid"])) == [(i, rid) for i, (_, _, ids) in enumerate(WANT) for rid in ids]
    every = s.sql("SELECT row, `table`, rid FROM q_lineage ORDER BY row, rid").to_pylist()
    assert every == [{"row": i, "table": "mine", "rid": rid} for i, (_, _, ids) in enumerate(WANT) for rid in ids]
    s.close()
    assert spark_state(spark) == before
    spark.sql("SELECT 1").collect()  # the session still runs


@pytest.mark.spark
@pytest.mark.parametrize("key, value", [("spark.driver.memory", "2g"), ("spark.sql.shuffle.partitions", "abc")])
def test_spark_setting_refused_puts_back_the_ones_set(spark_session, key, value):
    """A setting Spark cannot change at runtime (or a bad value) raised a raw pyspark error, and the settings set
    before it stayed changed on the user's session."""
    spark = spark_session.newSession()
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    with pytest.raises(dltrace.DltraceError, match=f"Spark cannot set {key} on this SparkSession") as e:
        dltrace.connect("spark", spark=spark, **{"spark.sql.session.timeZone": "Europe/Paris",
                                                   "spark.sql.shuffle.partitions": "3", key: value})
    assert "\n" not in str(e.value)
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


@pytest.mark.spark
def test_spark_guest_frees_the_rows_it_froze_at_close(spark_session):
    """Each adopted or registered DataFrame's rows are frozen by a local checkpoint, whose RDD holds them:
    DataFrame.unpersist left them in the user's SparkContext after close() (a new user: 9 MB for 100k rows)."""
    spark = spark_session.newSession()
    context = spark.sparkContext._jsc

    def held() -> set[int]:
        return {int(k) for k in context.getPersistentRDDs().keySet().toArray()}

    spark.range(1000).selectExpr("id", "id % 7 AS k").createOrReplaceTempView("mine")
    before = held()
    s = dltrace.connect("spark", spark=spark)
    s.adopt("mine")
    s.register("other", spark.range(50).toDF("x"))
    s.register("elsewhere", spark_session.range(20).toDF("y"))  # (a DataFrame of another session: frozen twice)
    s.adopt("mine", replace=True)  # (the first adoption's rows go)
    assert len(held() - before) == 3
    assert s.run("SELECT k, count(*) AS n FROM mine GROUP BY k ORDER BY k").lineage(0)["mine"][:2] == [0, 7]
    s.close()
    assert held() <= before
    assert spark.table("mine").count() == 1000


@pytest.mark.spark
def test_spark_add_rids(spark_session):
    spark = spark_session.newSession()
    spark.createDataFrame(SALES.to_pandas()).createOrReplaceTempView("sales")
    dltrace.add_rids(spark, "sales")
    dltrace.install(spark)
    sql = dltrace.rewrite(BY_REGION.format(t="sales"), dialect="spark",
                          schema={"sales": {"region": "STRING", "amount": "BIGINT"}})
    got = [(r[0], r[1], sorted(r[2])) for r in spark.sql(sql).collect()]
    assert got == WANT


@pytest.mark.spark
def test_spark_guest_takes_no_name_and_puts_settings_back(spark_session):
    """On Spark too: a user's temp view of a rows relation's name stays theirs, a user's dl_* function is refused
    and stays, dltrace's own functions go at close, and a setting passed to connect() is put back."""
    spark = spark_session.newSession()
    spark.createDataFrame(SALES.to_pandas()).createOrReplaceTempView("sales")
    spark.sql("CREATE TEMPORARY VIEW _dl_rows_sales AS SELECT 'mine' AS v")
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    before = spark_state(spark)
    s = dltrace.connect("spark", spark=spark, **{"spark.sql.shuffle.partitions": "2"})
    s.adopt("sales")
    r = s.run(BY_REGION.format(t="sales"), lineage="bitmap")
    assert per_region(r, "sales") == WANT
    r.register("q")  # its views decode the bitmaps with dltrace's dl_to_list
    assert s.sql("SELECT count(*) AS n FROM q_lineage").column(0).to_pylist() == [5]
    assert spark.table("_dl_rows_sales").collect()[0][0] == "mine"
    s.close()
    assert spark_state(spark) == before
    assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    assert not spark.catalog.functionExists("dl_to_list")
    spark.udf.register("dl_count", lambda x: 1, "int")
    s = dltrace.connect("spark", spark=spark)
    s.adopt("sales")
    with pytest.raises(dltrace.ReservedName, match="has function dl_count that dltrace did not define"):
        s.run(BY_REGION.format(t="sales"), lineage="bitmap").register("q")
    s.close()
    assert spark.sql("SELECT dl_count(1)").collect()[0][0] == 1
    # a registered table's view the user replaced since is theirs: close() leaves it
    s = dltrace.connect("spark", spark=spark)
    s.register("regs", SALES)
    spark.createDataFrame([("e", 99)], "region string, amount long").createOrReplaceTempView("regs")
    s.close()
    assert [tuple(r) for r in spark.table("regs").collect()] == [("e", 99)]


def test_a_volatile_query_runs_once_per_call(user_con):
    """Naming a query's columns binds it and never runs it (a relation from DuckDB's con.sql ran a query calling
    nextval at once): each call takes one value of the user's sequence per row, as the engine would."""
    user_con.execute("CREATE SEQUENCE dltrace_test_seq")
    s = dltrace.connect("duckdb", connection=user_con)
    s.adopt("sales")
    sql = "SELECT nextval('dltrace_test_seq') AS n FROM sales"
    taken = []
    for lineage in (None, "set", "bitmap"):
        taken += s.run(sql, lineage=lineage).table.column("n").to_pylist()
    assert sorted(taken) == list(range(1, 16))  # five rows, three calls
    s.close()
    user_con.execute("DROP SEQUENCE dltrace_test_seq")


def test_plain_sql_reads_the_users_relations_and_lineage_asks_to_adopt_them(user_con):
    s = dltrace.connect("duckdb", connection=user_con)
    assert s.sql("SELECT count(*) AS n FROM big_sales").to_pylist() == user_con.sql(
        "SELECT count(*) AS n FROM big_sales").to_arrow_table().to_pylist()
    with pytest.raises(dltrace.UnknownTable, match=r"'big_sales' is on the engine .* s.adopt\('big_sales'\)"):
        s.run("SELECT count(*) AS n FROM big_sales")
    with pytest.raises(dltrace.UnknownTable, match="unknown table 'nowhere'"):
        s.sql("SELECT * FROM nowhere")
    s.close()


def test_two_sessions_on_one_connection_keep_their_own_tables():
    """A second session that takes a name over (replace=True) holds it: the first neither reads its rows as its
    own nor drops them at close() (a review found s1 reading s2's rows, then dropping s2's table)."""
    con = duckdb.connect()
    s1 = dltrace.connect("duckdb", connection=con)
    s2 = dltrace.connect("duckdb", connection=con)
    s1.register("t2s", pa.table({"x": [1, 2]}))
    s1.register("mine", pa.table({"y": [1]}))
    s2.register("t2s", pa.table({"x": [5, 6, 7]}), replace=True)
    with pytest.raises(dltrace.DuplicateTable, match="another dltrace session"):
        s1.run("SELECT x FROM t2s")
    assert s1.run("SELECT y FROM mine").table.num_rows == 1
    s1.close()
    assert s2.run("SELECT x FROM t2s").table.column("x").to_pylist() == [5, 6, 7]
    assert s2.run("SELECT x FROM t2s").lineage(2) == {"t2s": [2]}
    s2.close()
    assert con.sql("SELECT count(*) FROM information_schema.tables").fetchall() == [(0,)]
    con.close()


# -- what dltrace creates never takes a name of the user's (a tester's probe found each of these) ---------------


def test_dltraces_own_relations_take_no_name_of_the_users(user_con):
    """Rows relations, impact's tables and a result's private lineage relation are dltrace's names; a user's
    object of that name (any kind, temp or persistent) is neither replaced, shadowed nor dropped: dltrace's goes
    under another name (a tester's impact replaced a user's view, then dropped it; a registration replaced a
    user's Arrow object and temp table of the rows relation's name, and dropped them at close)."""
    user_con.execute("CREATE TABLE _dl_rows_sales AS SELECT 'persistent' AS v")  # a temp copy would shadow it
    user_con.execute("CREATE TEMP TABLE _dltrace_impact_sales AS SELECT 'impact table' AS v")
    user_con.execute("CREATE TEMP VIEW _dltrace_impact_keep_big AS SELECT 'impact view' AS v")
    user_con.execute("CREATE TEMP VIEW _dl_rows_t2 AS SELECT 'temp view' AS v")
    user_con.execute("CREATE TEMP TABLE _dl_rows_t3 AS SELECT 'temp table' AS v")
    user_con.register("_dl_lineage_q", pa.table({"v": ["arrow"]}))
    mine = ["_dl_rows_sales", "_dltrace_impact_sales", "_dltrace_impact_keep_big", "_dl_rows_t2", "_dl_rows_t3",
            "_dl_lineage_q"]
    before = duckdb_state(user_con)
    s = dltrace.connect("duckdb", connection=user_con)
    s.adopt("sales")
    s.register("t2", SALES)
    s.register("t3", SALES, storage="memory")
    for t in ("sales", "t2", "t3"):
        assert per_region(s.run(BY_REGION.format(t=t)), t) == WANT
        assert s.rows(t) != f'"_dl_rows_{t}"'
        assert s.sql(f"SELECT dl_rid FROM {t} ORDER BY dl_rid").column(0).to_pylist() == list(range(5))
    assert s.impact(BY_REGION.format(t="sales"), "sales", [1]).rows == [2]
    s.register("big", pa.table({"k": range(3000)}))
    assert s.impact("SELECT k % 2 AS p, count(*) AS n FROM big GROUP BY 1 ORDER BY 1", "big", range(1, 2500, 2)).rows == [1]
    assert s.trace(BY_REGION.format(t="sales")).lineage(1) == {"sales": [0, 2]}
    r = s.run(BY_REGION.format(t="t3"))
    assert r.verify(1)
    r.register("q")
    assert s.sql("SELECT rid FROM q_lineage ORDER BY rid").column(0).to_pylist() == list(range(5))
    assert {k: v for k, v in duckdb_state(user_con).items() if k in mine} == {k: before[k] for k in mine}
    s.close()
    assert duckdb_state(user_con) == before


def test_a_users_dl_functions_are_refused_never_replaced(user_con):
    """The dl_* functions are dltrace's public names: a user's function of one of them (a macro, a temp macro, a
    Python function) is refused in one line naming it when dltrace needs its own, never replaced (a tester's
    macros and functions were replaced when a session started and never put back)."""
    user_con.execute("CREATE MACRO dl_count(x) AS 'user macro'")
    user_con.execute("CREATE TEMP MACRO dl_to_list(x) AS 'user temp macro'")
    user_con.create_function("dl_bitmap_count", lambda x: "user function", ["VARCHAR"], "VARCHAR")
    users = "SELECT dl_count(1), dl_to_list(1), dl_bitmap_count('z')"
    want = user_con.sql(users).fetchall()
    s = dltrace.connect("duckdb", connection=user_con)
    s.adopt("sales")
    assert per_region(s.run(BY_REGION.format(t="sales")), "sales") == WANT  # set lineage needs no function
    with pytest.raises(dltrace.ReservedName, match="has functions dl_bitmap_count, dl_count, dl_to_list that "
                                                   "dltrace did not define"):
        s.run(BY_REGION.format(t="sales"), lineage="bitmap")
    assert user_con.sql(users).fetchall() == want
    s.close()
    assert user_con.sql(users).fetchall() == want
    with pytest.raises(dltrace.ReservedName, match="dl_count"):
        dltrace.install(user_con)


DL_FUNCTIONS = "SELECT count(*) FROM duckdb_functions() WHERE function_name LIKE 'dl\\_%' ESCAPE '\\'"


def _functions_go_with_the_last_session(con, first_on, second_on) -> None:
    """Sessions on ``first_on`` and ``second_on`` (``con`` or a cursor of it) both use the dl_* functions; the
    first closes, the second still reads its lineage views (which decode with dl_to_list), and closes: none stay."""
    first, second = (dltrace.connect("duckdb", connection=c) for c in (first_on, second_on))
    for s in (first, second):
        s.adopt("t")
        assert per_region(s.run(BY_REGION.format(t="t"), lineage="bitmap"), "t") == WANT
    first.close()
    second.run(BY_REGION.format(t="t"), lineage="bitmap").register("q")
    assert second.sql("SELECT count(*) AS n FROM q_lineage").column(0).to_pylist() == [5]
    second.close()
    assert con.sql(DL_FUNCTIONS).fetchall() == [(0,)]


def test_dltraces_functions_leave_with_the_last_session_that_used_them():
    """A session's dl_* functions stay while another session on the connection uses them and go with the last
    one; those the user installed (dltrace.install) stay theirs."""
    con = duckdb.connect()
    con.register("t", SALES)
    _functions_go_with_the_last_session(con, con, con)
    dltrace.install(con)
    installed = con.sql(DL_FUNCTIONS).fetchall()
    with dltrace.connect("duckdb", connection=con) as s:
        s.adopt("t")
        assert per_region(s.run(BY_REGION.format(t="t"), lineage="bitmap"), "t") == WANT
    assert con.sql(DL_FUNCTIONS).fetchall() == installed
    con.close()


def test_dltraces_functions_stay_while_a_cursor_of_the_database_uses_them():
    """A new user: DuckDB's Python functions live in the database's catalog, seen by each cursor of it, and a
    session's close dropped those it made while the user's install on a cursor (which found them there) or a
    session on another cursor still called them; they go with the last of them, where they were made."""
    built = "SELECT dl_count(dl_bitmap_build([1, 2]))"
    con = duckdb.connect()
    con.register("t", SALES)
    s = dltrace.connect("duckdb", connection=con)
    s.adopt("t")
    assert per_region(s.run(BY_REGION.format(t="t"), lineage="bitmap"), "t") == WANT
    cursor = con.cursor()
    dltrace.install(cursor)  # (the functions are there: it makes the cursor's macros alone)
    s.close()
    assert cursor.sql(built).fetchall() == [(2,)]
    cursor.close()
    con.close()

    con = duckdb.connect()
    con.register("sales", SALES)
    con.sql("CREATE TABLE t AS SELECT * FROM sales")  # (a registered view is the connection's alone)
    cursor = con.cursor()
    _functions_go_with_the_last_session(con, cursor, con)  # (the first makes the functions, on the cursor)
    cursor.close()
    con.close()


def test_threads_is_put_back_at_close(user_con):
    user_con.execute("SET threads = 3")
    s = dltrace.connect("duckdb", connection=user_con, threads=1)
    assert user_con.sql("SELECT current_setting('threads')").fetchall() == [(1,)]
    s.close()
    assert user_con.sql("SELECT current_setting('threads')").fetchall() == [(3,)]


def test_a_closed_session_says_so(user_con, tmp_path):
    """After close() every use of the session, and of a result that needs the engine, is one dltrace error (a
    tester got DuckDB's "Connection has already been closed", a SourceError, and a rows relation's name)."""
    s = dltrace.connect("duckdb")
    s.register("t", SALES)
    r = s.run(BY_REGION.format(t="t"))
    saved = r.save(tmp_path / "saved")
    s.close()
    s.close()  # again: nothing to do
    for use in (lambda: s.run(BY_REGION.format(t="t")), lambda: s.sql("SELECT 1"), lambda: r.verify(0),
                lambda: s.rows("t"), lambda: s.register("u", SALES), lambda: s.trace(BY_REGION.format(t="t")),
                lambda: dltrace.load(saved, s)):  # (it loaded: a result bound to no engine)
        with pytest.raises(dltrace.SessionClosed, match="this dltrace session is closed"):
            use()
    assert r.lineage(0) == {"t": [3]}  # what the result holds is still there


def test_a_registered_name_the_user_replaced_stays_theirs(user_con):
    """The user replaces the view dltrace made for a registered table (CREATE OR REPLACE): it is theirs now -- close() leaves it, and dltrace does not register over it again
    (a Spark tester's probe: close dropped the user's view by name)."""
    s = dltrace.connect("duckdb", connection=user_con)
    s.register("mine", SALES)
    user_con.sql("CREATE OR REPLACE TEMP VIEW mine AS SELECT 'e' AS region, 99 AS amount")
    with pytest.raises(dltrace.DltraceError, match="is not dltrace's"):
        s.register("mine", SALES, replace=True)
    s.close()
    assert user_con.sql("SELECT * FROM mine").fetchall() == [("e", 99)]



def test_a_registered_name_the_user_made_again_is_stale_for_lineage(user_con):
    """A Spark tester's: the user's CREATE OR REPLACE over a table dltrace registered, and s.run answered from
    the registered rows where the engine (s.sql) answered from the user's; with other columns, the user's column
    names over the registered values. Queries with lineage refuse it (StaleLineage); s.sql reads the user's."""
    s = dltrace.connect("duckdb", connection=user_con)
    s.register("mine", SALES)
    assert s.run("SELECT count(*) AS n FROM mine").table.to_pylist() == [{"n": 5}]
    user_con.sql("CREATE OR REPLACE TEMP VIEW mine AS SELECT 'e' AS other")
    for ask in (s.run, s.trace):
        with pytest.raises(dltrace.StaleLineage, match="table 'mine', which dltrace registered, was made again"):
            ask("SELECT * FROM mine")
    assert s.sql("SELECT * FROM mine").to_pylist() == [{"other": "e"}]
    assert s.run("SELECT * FROM mine", lineage=None).table.to_pylist() == [{"other": "e"}]  # (as s.sql)
    with pytest.raises(dltrace.DuplicateTable, match="is not dltrace's"):
        s.register("mine", SALES, replace=True)
    s.close()
    assert user_con.sql("SELECT * FROM mine").fetchall() == [("e",)]


@pytest.mark.spark
def test_a_registered_name_the_user_made_again_on_spark_is_stale_for_lineage(spark_session):
    spark = spark_session.newSession()
    with dltrace.connect("spark", spark=spark) as s:
        s.register("reg2", pa.table({"k": [1, 2]}))
        assert s.run("SELECT k FROM reg2 ORDER BY k").table.to_pylist() == [{"k": 1}, {"k": 2}]
        spark.createDataFrame([(7,), (8,)], "k long").createOrReplaceTempView("reg2")
        with pytest.raises(dltrace.StaleLineage, match="table 'reg2', which dltrace registered, was made again"):
            s.run("SELECT k FROM reg2")
        assert sorted(r["k"] for r in s.sql("SELECT k FROM reg2").to_pylist()) == [7, 8]
    assert sorted(r.k for r in spark.sql("SELECT k FROM reg2").collect()) == [7, 8]


def test_a_rolled_back_adoption_asks_to_adopt_again(user_con):
    """A transaction of the user's that adopted a table, rolled back, takes dltrace's rows relation with it: the
    next run said only "Table with name _dl_rows_sales does not exist!" (a new user's review)."""
    with dltrace.connect("duckdb", connection=user_con) as s:
        user_con.begin()
        s.adopt("sales")
        user_con.rollback()
        with pytest.raises(dltrace.QueryError, match="dltrace's own relation, gone from the connection.*adopt the "
                                                     "table again"):
            s.run("SELECT region FROM sales")


def test_a_relation_named_with_a_capital_outside_ascii_is_adopted_through_a_view():
    """Adopting the user's "Zoë Ü" said to register it as 'zoë ü', under which DuckDB finds no relation (a new user's
    review): the hint is a view of another name, which adopts."""
    import duckdb

    con = duckdb.connect()
    con.execute('CREATE TABLE "Zoë Ü" AS SELECT 1 AS x')
    s = dltrace.connect("duckdb", connection=con)
    with pytest.raises(dltrace.DltraceError, match=r'create a view of it .*CREATE VIEW v AS SELECT \* FROM "Zoë Ü"'):
        s.adopt("Zoë Ü")
    con.execute('CREATE VIEW zoe AS SELECT * FROM "Zoë Ü"')
    s.adopt("zoe")
    assert s.run("SELECT x FROM zoe").lineage(0) == {"zoe": [0]}
    s.close()
    assert con.sql('SELECT x FROM "Zoë Ü"').fetchall() == [(1,)]


@pytest.mark.parametrize("setting", ["SET default_null_order = 'nulls_first'", "SET default_order = 'desc'",
                                     "SET default_null_order = 'nulls_last_on_asc_first_on_desc'"])
def test_the_users_ordering_settings_and_the_querys_own_words_both_hold(setting):
    """sqlglot reads `NULLS LAST` as DuckDB's default placement and wrote it back so, which the connection reads by
    its own default_null_order: a new user's ranking on a connection set to nulls_first put the NULLs first where
    the query said last. An ORDER BY without words follows the setting, as the engine's own answer does."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 10, 'a'), (2, NULL, 'b'), (3, 5, 'a'), (4, 5, NULL)) "
                "AS v(id, amt, g)")
    con.execute(setting)
    settings = "SELECT current_setting('default_null_order'), current_setting('default_order')"
    users = con.execute(settings).fetchall()
    outside = duckdb.connect()  # (dltrace.rewrite's SQL run outside a session, on the same rows and setting)
    outside.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 10, 'a'), (2, NULL, 'b'), (3, 5, 'a'), (4, 5, NULL)) "
                    "AS v(id, amt, g)")
    outside.execute(setting)
    dltrace.add_rids(outside, "t")
    dltrace.install(outside)
    s = dltrace.connect("duckdb", connection=con)
    s.adopt("t")
    for sql in ("SELECT id, amt, rank() OVER (ORDER BY amt DESC NULLS LAST) AS rnk FROM t "
                "ORDER BY amt ASC NULLS LAST, id ASC",
                "SELECT id FROM t ORDER BY amt NULLS LAST, id ASC LIMIT 2",
                "SELECT id FROM t ORDER BY amt, id LIMIT 2",
                "SELECT g, string_agg(id::VARCHAR, ',' ORDER BY amt NULLS LAST, id ASC) AS s FROM t GROUP BY g "
                "ORDER BY g ASC NULLS LAST",
                "SELECT * FROM t ORDER BY ALL NULLS LAST LIMIT 3",
                "SELECT id, row_number() OVER (ORDER BY amt NULLS LAST, id ASC) AS rn FROM t QUALIFY rn <= 2 "
                "ORDER BY id ASC",
                # passes that rebuild an ORDER BY key (a review): ORDER BY ALL, a HAVING's late lineage, an
                # aggregation's late witnesses, the bitmaps built after the LIMIT
                "SELECT amt, id FROM t ORDER BY ALL NULLS LAST LIMIT 3",
                "SELECT g, max(amt) AS m FROM t GROUP BY g HAVING count(*) > 0 ORDER BY m NULLS LAST, g ASC NULLS LAST",
                "SELECT g, max(amt) AS m FROM t WHERE EXISTS (SELECT 1 FROM t AS u WHERE u.g = t.g AND u.id <> t.id) "
                "GROUP BY g ORDER BY m NULLS LAST, g ASC NULLS LAST",
                "SELECT id, amt FROM t ORDER BY amt NULLS LAST, id ASC LIMIT 3"):
        r = s.run(sql)
        assert [tuple(row.values()) for row in r.table.to_pylist()] == con.execute(sql).fetchall(), sql
        bitmap = dltrace.rewrite(sql, strategy="bitmap", schema={"t": {"id": "INT", "amt": "INT", "g": "VARCHAR"}})
        assert [row[:r.table.num_columns] for row in outside.execute(bitmap).fetchall()] == \
            con.execute(sql).fetchall(), sql
        traced = s.trace(sql)
        for i in range(r.table.num_rows):
            assert sorted(traced.lineage(i).get("t", [])) == sorted(r.lineage(i).get("t", [])), (sql, i)
    s.close()
    assert con.execute(settings).fetchall() == users  # (the user's setting, as they left it)
