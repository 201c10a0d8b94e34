"""SQL text as the engines read a script (found by a new user's ELT pipeline): comments before a CREATE ... AS and
after the last ``;``, a byte-order mark, DuckDB's ``CREATE TABLE ... AS PIVOT``, and a typo after ``AS`` named as
a typo in a plain query is."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dltrace

T = pa.table({"a": [1, 2], "status": ["x", "y"]})


@pytest.fixture()
def s():
    session = dltrace.connect("duckdb")
    session.register("t", T)
    yield session
    session.close()


@pytest.mark.parametrize("sql", [
    "-- stage 1: copy\nCREATE TABLE c AS SELECT a FROM t",
    "/* stage 1 */ CREATE TABLE c AS SELECT a FROM t",
    "CREATE TABLE c AS SELECT a FROM t;\n-- the end\n",
    "\ufeffCREATE TABLE c AS SELECT a FROM t",
])
def test_a_create_as_with_comments_registers_its_result(s, sql):
    assert s.run(sql).table.num_rows == 2
    assert s.run("SELECT a FROM c ORDER BY a").lineage(1) == {"t": [1]}


@pytest.mark.parametrize("sql", ["SELECT a FROM t; -- end of report", "SELECT a FROM t; /* done */",
                                 "\ufeffSELECT a FROM t"])
def test_a_comment_after_the_last_semicolon_is_no_statement(s, sql):
    assert s.run(sql).table.num_rows == 2
    assert s.sql(sql).num_rows == 2
    assert s.trace(sql).table.num_rows == 2
    assert "SELECT" in dltrace.rewrite(sql, schema={"t": {"a": "BIGINT", "status": "VARCHAR"}})
    with pytest.raises(dltrace.ParseError, match="expected one SQL statement, got 2"):
        s.run("SELECT a FROM t; SELECT a FROM t; -- two")


def test_create_as_pivot_registers_its_result(s, tmp_path):
    pivot = "PIVOT t ON status IN ('x', 'y') USING sum(a)"
    r = s.run(f"CREATE TABLE p AS {pivot}")
    assert r.table.to_pylist() == [{"x": 1, "y": 2}]
    assert s.run("SELECT x, y FROM p").lineage(0) == {"t": [0, 1]}
    # in a pipeline file too, beside a comment after a statement's `;`
    (tmp_path / "steps.sql").write_text(f"CREATE TABLE q AS {pivot}; -- step 1 done\nCREATE TABLE r AS SELECT x FROM q;\n")
    p = dltrace.pipeline(tmp_path, session=s)
    assert list(p.datasets) == ["q", "r"]
    assert p.lineage("r", 0) == {"t": [0, 1]}


def test_a_typo_after_as_is_named_as_in_a_plain_query(s):
    with pytest.raises(dltrace.ParseError, match=r"`SELEC` at line 1, col 19 begins no SQL statement"):
        s.run("CREATE TABLE c AS SELEC * FROM t")


@pytest.mark.parametrize("sql", [
    # sqlglot 30.30 read these as DATE ('2024-01-01'::VARCHAR): a DATE where DuckDB gives the text (a new user)
    "SELECT a, DATE '2024-01-01'::VARCHAR AS d FROM t",
    "SELECT a, TIMESTAMP '2024-05-01 13:45:00'::DATE + 1 AS d FROM t",
    "SELECT a, TIME '13:45:00'::VARCHAR AS d, TIMESTAMPTZ '2024-05-01 13:45:00+00'::DATE AS e FROM t",
    "SELECT a FROM t WHERE status || '2024-05-01' > DATE '2024-05-01'::VARCHAR",
    # .5 was written 0.5: a DECIMAL(2,1) where DuckDB's .5 is DECIMAL(1,1), '0.5' where it is '.5'
    "SELECT a, .5::VARCHAR AS h, typeof(.5) AS ty, -.25 * a AS m FROM t",
])
def test_literals_are_read_as_duckdb_reads_them(s, sql):
    assert s.run(sql).table.to_pylist() == s.sql(sql).to_pylist()
    assert s.run(sql).table.schema == s.sql(sql).schema


@pytest.mark.parametrize("dialect", ["spark", "duckdb"])
def test_window_before_a_parenthesis_is_a_call(dialect):
    """Spark's time buckets, `GROUP BY window(ts, '1 day')`: sqlglot took WINDOW for the clause after GROUP BY and
    said "Expecting )" (a new user); the clause `WINDOW w AS (...)` reads as it did."""
    from dltrace.rewriter.grammar import generate, parse
    tree = parse("SELECT count(*) AS n FROM o GROUP BY window(ts, '1 day') ORDER BY 1", dialect)[0]
    assert generate(tree.args["group"], dialect).upper() == "GROUP BY WINDOW(TS, '1 DAY')"
    tree = parse("SELECT sum(x) OVER w AS s FROM t WINDOW w AS (ORDER BY y)", dialect)[0]
    assert tree.args["windows"][0].name == "w"


def test_create_as_numbers_a_repeated_column_as_duckdb_does():
    """`CREATE TABLE j AS SELECT * FROM a JOIN b USING (k)` over two tables with an `amount` was refused ("two columns
    named 'amount'"), where DuckDB's table names the second amount_1 (a new user's pipeline step)."""
    import duckdb
    s = dltrace.connect("duckdb")
    try:
        s.register("a", pa.table({"k": [1, 2], "amount": [10, 20]}))
        s.register("b", pa.table({"k": [1, 2], "amount": [5, 6]}))
        s.run("CREATE TABLE j AS SELECT *, 0 AS a, 1 AS A FROM a JOIN b USING (k)")
        r = s.run("SELECT * FROM j ORDER BY k")
        con = duckdb.connect()
        con.register("a", pa.table({"k": [1, 2], "amount": [10, 20]}))
        con.register("b", pa.table({"k": [1, 2], "amount": [5, 6]}))
        con.sql("CREATE TABLE j AS SELECT *, 0 AS a, 1 AS A FROM a JOIN b USING (k)")
        assert r.table.column_names == con.sql("SELECT * FROM j").columns == ["k", "amount", "amount_1", "a", "A_1"]
        assert [tuple(x.values()) for x in r.table.to_pylist()] == con.sql("SELECT * FROM j ORDER BY k").fetchall()
        assert [r.lineage(i) for i in range(2)] == [{"a": [0], "b": [0]}, {"a": [1], "b": [1]}]
    finally:
        s.close()
