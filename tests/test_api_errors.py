"""Bad arguments to the public API: one dltrace error naming the argument and what it got, never a raw
AttributeError / TypeError from deep inside (found by a tester's probe of every entry point)."""

from __future__ import annotations

import logging

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dltrace


@pytest.fixture
def s():
    con = duckdb.connect()
    con.execute("CREATE TABLE mine AS SELECT 1 AS a")
    session = dltrace.connect("duckdb", connection=con)
    session.register("t", pa.table({"a": [1, 2, 2], "b": ["x", "y", "x"]}))
    session.register("u", pa.table({"a": [1, 2], "c": ["p", "q"]}))
    yield session
    session.close()


def test_arguments_of_the_wrong_type_are_named(s, tmp_path):
    r = s.run("SELECT b, count(*) AS n FROM t GROUP BY b ORDER BY b")
    r.save(tmp_path / "saved")
    cases = [
        (lambda: s.run(None), "the SQL text must be a string, got NoneType None"),
        (lambda: s.run(42), "the SQL text must be a string, got int 42"),
        (lambda: s.trace(42), "the SQL text must be a string"),
        (lambda: s.sql(None), "the SQL text must be a string"),
        (lambda: s.impact(None, "t", [0]), "the SQL text must be a string"),
        (lambda: s.impact("SELECT a FROM t", 5, [0]), "table must be a string, got int 5"),
        (lambda: s.impact("SELECT b, count(*) AS n FROM t GROUP BY b ORDER BY b", "t", [0], saved=r.table),
         r"saved must be a result \(s.run\(...\)\) or the folder r.save wrote, got Table pyarrow.Table b: string"),
        (lambda: s.run("SELECT a FROM t", end_to_end="x"), "end_to_end must be True or False, got str 'x'"),
        (lambda: s.trace("SELECT a FROM t", end_to_end=1), "end_to_end must be True or False, got int 1"),
        (lambda: s.adopt(None), "a table name must be a string, got NoneType None"),
        (lambda: s.adopt(3), "a table name must be a string, got int 3"),
        (lambda: s.adopt("mine", replace="yes"), "replace must be True or False, got str 'yes'"),
        (lambda: s.register(5, pa.table({"a": [1]})), "a table name must be a string, got int 5"),
        (lambda: s.register("v", pa.table({"a": [1]}), replace="no"), "replace must be True or False"),
        (lambda: s.rows(5), "table must be a string, got int 5"),
        (lambda: s.lineage_view("x", "lv"), "takes a result .* got str 'x'"),
        (lambda: r.register(5), "name must be a string, got int 5"),
        (lambda: r.register("q", replace="yes"), "replace must be True or False"),
        (lambda: r.backward(0, tables=5), "tables must be a name or a list of names, got int 5"),
        (lambda: r.backward(0, columns="a"), "columns must be a dict .* got str 'a'"),
        (lambda: r.backward(0, columns={"t": 5}), r"columns\['t'\] must be a name or a list of names"),
        (lambda: r.verify(0, unrestricted=5), "unrestricted must be a name or a list of names"),
        (lambda: r.save(None), "path must be a str or os.PathLike, got NoneType None"),
        (lambda: dltrace.rewrite("SELECT a FROM t", schema="x"), "schema must be a dict .* got str 'x'"),
        (lambda: dltrace.rewrite("SELECT a FROM t", schema={"t": ["a"]}), r"schema\['t'\] must be a dict"),
        (lambda: dltrace.rewrite(None, schema={"t": {"a": "INT"}}), "the SQL text must be a string"),
        (lambda: dltrace.load(tmp_path / "saved", None), "load needs the session .* got NoneType None"),
        (lambda: dltrace.load(tmp_path / "saved", "x"), "load needs the session .* got str 'x'"),
        (lambda: dltrace.load(None, s), "path must be a str or os.PathLike"),
        (lambda: dltrace.load(tmp_path / "saved", s, allow_stale="yes"), "allow_stale must be True or False"),
        (lambda: dltrace.add_rids(duckdb.connect(), 5), "table must be a string, got int 5"),
        (lambda: dltrace.pipeline(None), "path must be a str or os.PathLike"),
        (lambda: dltrace.pipeline(tmp_path, tables=["t"]), "tables must be a dict .* got list"),
        (lambda: dltrace.pipeline(tmp_path, session="s"), "session must be a dltrace session"),
        # DuckDB's SET took int(1.5) as 1 and True as 1; "x" was a raw ValueError and -1 DuckDB's syntax error
        (lambda: dltrace.connect("duckdb", threads="x"), "threads must be a positive int, got str 'x'"),
        (lambda: dltrace.connect("duckdb", threads=1.5), "threads must be a positive int, got float 1.5"),
        (lambda: dltrace.connect("duckdb", threads=-1), "threads must be a positive int, got int -1"),
        (lambda: dltrace.connect("duckdb", threads=True), "threads must be a positive int, got bool True"),
        (lambda: dltrace.connect("spark", master=2), "master must be a string such as 'local\\[2\\]', got int 2"),
        (lambda: r.backward(0, limit=1.5), "limit must be an int >= 0, got float 1.5"),
        # a raw AttributeError ('int' object has no attribute 'lower'), or a plain DltraceError for a wrong type
        (lambda: r.lineage_table(3), "table must be a string, got int 3"),
        (lambda: r.lineage_batches(3), "table must be a string, got int 3"),  # (at the call, not the first batch)
        (lambda: r.forward("t", None), "rids must be integers, got NoneType None"),
        (lambda: r.forward("t", [None]), r"rids must be integers, got list \[None\]"),
        (lambda: r.to_pandas(lineage=3), "to_pandas.* takes 'count', 'ids' or None, got int 3"),
        (lambda: s.run("SELECT a FROM t", lineage=True), "lineage must be one of set, bitmap or None, got bool True"),
        (lambda: s.run("SELECT a FROM t", semantics=None), "semantics must be one of witness, control, got NoneType"),
        (lambda: s.trace("SELECT a FROM t", semantics=None), "semantics must be one of witness, control, got"),
        (lambda: s.impact("SELECT a FROM t", "t", [0], semantics=1), "semantics must be .* or None, got int 1"),
        (lambda: s.impact("SELECT a FROM t", "t", [0], lineage=True), "lineage must be .* or None, got bool True"),
        (lambda: dltrace.rewrite("SELECT 1", strategy=None), "strategy must be one of set, bitmap, got NoneType"),
        (lambda: dltrace.rewrite("SELECT 1", semantics=None), "semantics must be one of witness, control, got"),
        (lambda: dltrace.pipeline(tmp_path, lineage=True), "lineage must be one of set, bitmap or None, got bool"),
        (lambda: dltrace.pipeline(tmp_path, method=None), "method must be one of forward, backward, got NoneType"),
        # a name or path that names nothing: register("") was a plain DltraceError, save("") wrote into the cwd
        (lambda: s.register("", pa.table({"a": [1]})), "a table name must be a non-empty string, got ''"),
        (lambda: s.adopt(" "), "a table name must be a non-empty string, got ' '"),
        (lambda: r.save(""), "path must be a non-empty path, got ''"),
        (lambda: dltrace.load("", s), "path must be a non-empty path, got ''"),
    ]
    for call, needle in cases:
        with pytest.raises(dltrace.ArgumentError, match=needle) as info:
            call()
        assert "\n" not in str(info.value)
        assert isinstance(info.value, TypeError)  # as Python's own error for a wrong type is
    assert dltrace.load(tmp_path / "saved", s).lineage(0) == r.lineage(0)  # the right types still work
    assert r.backward(0, tables="t", columns={"T": "a"})["t"].column_names == ["a", "dl_rid"]


def test_a_source_without_columns_is_refused_as_such(s):
    """An Arrow table or a pandas DataFrame without columns was DuckDB's Binder Error ("SELECT list is empty after
    resolving * expressions"), naming neither the source nor the problem."""
    import pandas as pd

    for empty in (pa.table({}), pd.DataFrame(), pd.DataFrame(index=range(3))):
        with pytest.raises(dltrace.SourceError, match="source has no columns: a table needs at least one"):
            s.register("e", empty)
    assert "e" not in s.tables


def test_a_pandas_column_of_mixed_types_is_refused_naming_it(s):
    """An object column mixing strings and floats raised pyarrow's own ArrowTypeError (found by a probe)."""
    import pandas as pd

    with pytest.raises(dltrace.SourceError, match="pandas DataFrame does not convert.*column o.*one type"):
        s.register("mixed", pd.DataFrame({"o": ["x", None, 3.5]}))
    assert "mixed" not in s.tables


def test_the_registered_tables_an_unknown_table_lists_are_quoted_where_a_bare_name_misleads(s):
    """`registered:  t, select, t` did not say that the first table is ' t' (a leading space)."""
    s.register(" t", pa.table({"a": [1]}))
    s.register("select", pa.table({"a": [1]}))
    listed = r"registered: ' t', select, t, u$"
    for call in (lambda: s.run("SELECT * FROM nope"), lambda: s.rows("nope"),
                 lambda: s.impact("SELECT a FROM t", "nope", [0])):
        with pytest.raises(dltrace.UnknownTable, match=r"unknown table 'nope'; " + listed):
            call()


def test_a_table_backward_columns_names_must_be_in_the_lineage(s):
    """A misspelt table in columns= was ignored (every column read): now refused, as a misspelt column is."""
    r = s.run("SELECT t.a, c FROM t JOIN u ON t.a = u.a")
    with pytest.raises(dltrace.UnknownTable, match="no lineage for table 'nope'; it has: t, u"):
        r.backward(0, columns={"nope": ["a"]})
    with pytest.raises(dltrace.UnknownColumn, match="no column 'zz'"):
        r.backward(0, columns={"t": ["zz"]})


def _pipeline(tmp_path):
    pq.write_table(pa.table({"a": [1, 2, None, 4], "b": ["x", "y", "x", "y"]}), tmp_path / "t.parquet")
    folder = tmp_path / "pipe"
    folder.mkdir(exist_ok=True)
    (folder / "01.sql").write_text("CREATE TABLE s1 AS SELECT a, b FROM t WHERE a IS NOT NULL")
    (folder / "02.sql").write_text("CREATE VIEW s2 AS SELECT b, count(*) AS n FROM s1 GROUP BY b")
    return folder, {"t": str(tmp_path / "t.parquet")}


def test_a_pipeline_without_lineage_refuses_impact(tmp_path):
    """impact over a plain run answered "reaches nothing" for every dataset: a wrong answer, not an empty one."""
    folder, tables = _pipeline(tmp_path)
    p = dltrace.pipeline(folder, lineage=None, tables=tables)
    with pytest.raises(dltrace.DltraceError, match="impact needs lineage: this pipeline ran with lineage=None"):
        p.impact("t", [0])
    with pytest.raises(dltrace.DltraceError, match="trace needs lineage: this pipeline ran with lineage=None"):
        p.trace("s2")  # (its lineage came back empty: the earlier step's rows hold none to compose with)
    with pytest.raises(dltrace.ArgumentError, match="a dataset name must be a string, got int 5"):
        p[5]
    p.close()
    with_lineage = dltrace.pipeline(folder, tables=tables)
    x_row = with_lineage["s2"].table.column("b").to_pylist().index("x")  # (a GROUP BY's rows come in any order)
    assert with_lineage.impact("t", [0]) == {"s1": [0], "s2": [x_row]}
    with_lineage.close()


def test_a_pipeline_refuses_an_unknown_strategy_before_any_step_runs(tmp_path, monkeypatch):
    folder, tables = _pipeline(tmp_path)
    opened = []
    monkeypatch.setattr(dltrace.pipelines.run, "connect", lambda *a, **k: opened.append(1))
    with pytest.raises(dltrace.DltraceError, match="unknown lineage strategy 'foo': choose one of set, bitmap or None"):
        dltrace.pipeline(folder, lineage="foo", tables=tables)
    assert not opened  # refused before a session opened, let alone a step ran


@pytest.mark.parametrize("name", ["x;y", "x--y", "x/*y", "a;--/*b"])
def test_names_sqlglot_reads_as_sql_are_tables_and_columns_like_others(name):
    """sqlglot's MappingSchema parses each key as SQL: `x;y` became the table '' and `x--y` the table x with a
    comment, so such a table registered fine and no query could read it (UnknownColumn)."""
    quoted, col = f'"{name}"', f'"{name}c"'  # (a column of the table's own name is DuckDB's struct field syntax)
    con = duckdb.connect()
    con.execute(f'CREATE TABLE {quoted} AS SELECT * FROM (VALUES (1, 10), (2, 20), (2, 30)) v(k, {col})')
    s = dltrace.connect("duckdb", connection=con)
    s.register("r", pa.table({"k": [2, 1], name + "c": ["p", "q"]}))
    s.adopt(name)
    sql = (f"SELECT r.k, sum({quoted}.{col}) AS total, max(r.{col}) AS m FROM {quoted} JOIN r "
           f"ON {quoted}.k = r.k GROUP BY r.k ORDER BY r.k")
    forward, backward = s.run(sql), s.trace(sql)
    assert forward.table.to_pylist() == [{"k": 1, "total": 10, "m": "q"}, {"k": 2, "total": 50, "m": "p"}]
    assert forward.lineage(1) == backward.lineage(1) == {name: [1, 2], "r": [0]}
    assert forward.verify(1)
    schema = {name: {"k": "INT", name + "c": "INT"}, "r": {"k": "INT", name + "c": "VARCHAR"}}
    assert "dl_r" in dltrace.rewrite(sql, schema=schema)  # the rewriter alone resolves them from schema= too
    s.close()


def test_a_statement_sqlglot_cannot_parse_is_named_and_not_logged(s, caplog):
    """sqlglot logs a warning and keeps such a statement as a Command: the user saw that warning (twice for run)
    and then "not a COMMAND statement"."""
    cases = [
        ("CREATE TABLE zz AS SELEC a FROM t", dltrace.ParseError, "SQL does not parse: `SELEC` at line 1, col 20 "
         "begins no SQL statement"),
        ("CREATE TABLE zz AS SELECT a FROM t WHERE", dltrace.ParseError, "WHERE with nothing after it at line 1, col 40"),
        # a call without its argument was "SUBSTRING with nothing after it"
        ("SELECT substr() FROM t", dltrace.ParseError, "a call of SUBSTRING / SUBSTR without its first argument at line 1"),
        ("EXPLAIN SELECT a FROM t", dltrace.UnsupportedQuery, "EXPLAIN is not a query dltrace traces"),
        ("PIVOT t ON b USING count(*) GROUP BY a", dltrace.UnsupportedQuery, "a PIVOT is supported ON one column IN "
         r"\(a list of values\).*, at"),
        ("SELECT * FROM t UNPIVOT (v FOR n IN (a, b))", dltrace.UnsupportedQuery, "PIVOT/UNPIVOT is not supported, at"),
        ("SUMMARIZE t", dltrace.UnsupportedQuery, "not a SUMMARIZE statement"),
        # statements sqlglot reads as nodes of their own (ATTACH said it did not parse: a review's)
        ("ATTACH ':memory:' AS x", dltrace.UnsupportedQuery, "not an ATTACH statement"),
        ("TRUNCATE t", dltrace.UnsupportedQuery, "not a TRUNCATE statement"),
    ]
    with caplog.at_level("WARNING", logger="sqlglot"):
        for sql, error, needle in cases:
            for call in (s.run, s.trace, lambda q: dltrace.rewrite(q, schema={"t": {"a": "INT", "b": "INT"}})):
                with pytest.raises(error, match=needle):
                    call(sql)
    assert not [r for r in caplog.records if r.name.startswith("sqlglot")]
    # the filter was the parse's only: sqlglot's logger is as the user configured it
    assert not logging.getLogger("sqlglot").filters
    # run takes CREATE ... AS; trace said "not a CREATE statement" of what run had just run (a new user's)
    for call in (s.trace, lambda q: dltrace.rewrite(q, schema={"t": {"a": "INT", "b": "INT"}})):
        with pytest.raises(dltrace.UnsupportedQuery, match=r"CREATE TABLE \.\.\. AS <query> makes a pipeline step"):
            call("CREATE TABLE zz AS SELECT a FROM t")


def test_a_range_of_rids_is_checked_by_its_ends_before_it_is_expanded(s, tmp_path):
    """r.forward(t, range(10**12)) made the list of every id first (a MemoryError, or gigabytes and seconds before
    "rid ... is outside"); a rid beyond 64 bits said "rids must be integers"."""
    sql = "SELECT a, count(*) AS n FROM t GROUP BY a ORDER BY a"
    r = s.run(sql)
    folder, tables = _pipeline(tmp_path)
    p = dltrace.pipeline(folder, tables=tables)
    for call in (lambda: r.forward("t", range(10**12)), lambda: s.impact(sql, "t", range(10**12)),
                 lambda: s.impact(sql, "t", range(10**12), saved=r), lambda: p.impact("t", range(10**12))):
        with pytest.raises(dltrace.DltraceError, match=r"rid 999999999999 is outside table 't' \(it has \d rows\)"):
            call()
    assert r.forward("t", range(1, 3)) == [1] == s.impact(sql, "t", range(1, 3)).rows
    assert p.impact("t", range(0, 4, 3)) == {"s1": [0, 2], "s2": [0, 1]}
    with pytest.raises(dltrace.DltraceError, match="rids must be 64-bit integers, got 100000000000000000000"):
        r.forward("t", 10**20)
    with pytest.raises(dltrace.DltraceError, match=r"rids must be 64-bit integers, got \[100000000000000000000\]"):
        r.forward("t", [10**20])
    p.close()


@pytest.mark.parametrize("column", ["dl_x", "_dl_x", "_u_0"])
def test_a_source_column_of_any_reserved_prefix_is_refused_when_registered(column):
    """A query naming ``_u_0`` or ``_dl_x`` is refused (decorrelation's and dltrace's own names): registering such a
    column is refused up front, as ``dl_x`` was (a probe found it accepted, then unreadable by name)."""
    with dltrace.connect("duckdb") as s:
        with pytest.raises(dltrace.ReservedName, match=f"'{column}' uses the reserved prefix"):
            s.register("t", pa.table({column: [1]}))


def test_a_parquet_column_named_like_duckdbs_row_numbers_is_refused_by_name(tmp_path):
    """A new user: DuckDB's binder error named an option (file_row_number) they never gave. dltrace reads a
    parquet file's row positions as DuckDB's file_row_number; the same rows as an Arrow table are read."""
    import pyarrow.parquet as pq

    rows = pa.table({"File_Row_Number": [7, 8], "v": [1, 2]})
    pq.write_table(rows, tmp_path / "f.parquet")
    with dltrace.connect("duckdb") as s:
        for storage in ("source", "memory"):
            with pytest.raises(dltrace.SourceError, match="has a column named 'File_Row_Number', the name of the row "
                                                          "numbers dltrace reads with DuckDB's read_parquet"):
                s.register("f", tmp_path / "f.parquet", storage=storage)
        s.register("f", rows)
        r = s.run("SELECT File_Row_Number FROM f WHERE v = 2")
        assert r.table.to_pylist() == [{"File_Row_Number": 8}]
        assert r.backward(0)["f"].column("File_Row_Number").to_pylist() == [8]


def test_a_value_that_is_no_option_is_a_value_error_and_a_wrong_thing_passed_a_type_error():
    """A user catching ValueError for `lineage="bitmaps"` (as Python's own functions raise for a bad value of the
    right type) caught nothing: it was a bare DltraceError, as was `connection=` given a string."""
    s = dltrace.connect("duckdb")
    s.register("t", pa.table({"x": [1, 2]}))
    for call, choices in ((lambda: s.run("SELECT x FROM t", lineage="bitmaps"), "set, bitmap or None"),
                          (lambda: dltrace.connect("postgres"), "duckdb, spark")):
        with pytest.raises(dltrace.UnknownChoice, match=f"choose one of {choices}") as raised:
            call()
        assert isinstance(raised.value, ValueError)
    for call in (lambda: dltrace.connect("duckdb", connection="nope"), lambda: dltrace.connect("duckdb", foo=1),
                 lambda: dltrace.install({})):
        with pytest.raises(dltrace.ArgumentError):
            call()
    r = s.run("SELECT x FROM t")
    with pytest.raises(dltrace.UnknownChoice, match="takes 'count', 'ids' or None, not 'x'"):
        r.to_pandas(lineage="x")
    with pytest.raises(dltrace.ArgumentError, match="a table name must be a non-empty string"):
        r.register("")
    # a rows relation read by name was "on the engine but not traced yet: s.adopt it", which is refused
    with pytest.raises(dltrace.UnknownTable, match="'_dl_rows_t' is dltrace's rows relation of table 't': query 't'"):
        s.run("SELECT x FROM _dl_rows_t")
    for rid in (-1, 2, 10**20):  # no row of t: an IndexError, as a row number out of range is
        with pytest.raises(dltrace.RowOutOfRange):
            r.forward("t", rid)
    s.close()


def test_a_query_nested_past_the_recursion_limit_is_refused_by_name():
    """A UNION ALL of about 100 queries raised a bare RecursionError through s.run (a review)."""
    s = dltrace.connect("duckdb")
    s.register("deep_t", pa.table({"a": [1, 2]}))
    sql = " UNION ALL ".join(f"SELECT a + {i} AS a FROM deep_t" for i in range(150))
    for call in (lambda: s.run(sql), lambda: s.impact(sql, "deep_t", [0]),
                 lambda: dltrace.rewrite(sql, schema={"deep_t": {"a": "INT"}})):
        with pytest.raises(dltrace.UnsupportedQuery, match="a query nested this deeply is not supported"):
            call()
    s.close()


def test_to_pandas_of_a_date_pandas_cannot_hold_names_the_column():
    """A DATE 'infinity' or BC raised Python's ValueError "year 5881580 is out of range" from pyarrow (a review's)."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE far AS SELECT * FROM (VALUES ('infinity'::DATE, 1), ('0044-03-15 (BC)'::DATE, 2)) v(d, x)")
    with dltrace.connect("duckdb", connection=con) as s:
        s.adopt("far")
        with pytest.raises(dltrace.DltraceError, match="to_pandas: column 'd' holds a value pandas cannot hold"):
            s.run("SELECT d, x FROM far").to_pandas()
        assert s.run("SELECT x FROM far ORDER BY x").to_pandas()["x"].tolist() == [1, 2]


def test_a_file_read_in_place_runs_as_plain_sql_and_is_refused_with_lineage(tmp_path):
    """DuckDB reads FROM 'sales.csv' as the file: s.sql said "unknown table", and run and trace the same, where the
    file has no row ids (a review's)."""
    import pyarrow.csv as pcsv

    path = tmp_path / "g.csv"
    pcsv.write_csv(pa.table({"a": [1, 2]}), path)
    with dltrace.connect("duckdb") as s:
        assert s.sql(f"SELECT sum(a) AS n FROM '{path}'").to_pylist() == [{"n": 3}]
        for call in (s.run, s.trace):
            with pytest.raises(dltrace.UnsupportedQuery, match=r"a file read in place \(FROM '.*g\.csv'\) has no row "
                               r"ids: register it as a table.*, at line 1, col 15"):
                call(f"SELECT * FROM '{path}'")
