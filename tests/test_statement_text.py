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
