"""Bad input to the rewriter: a clear dltrace error naming the problem and where, never a deep traceback."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dltrace

S = {"t": {"a": "BIGINT", "b": "BIGINT"}, "u": {"a": "BIGINT", "c": "BIGINT"}}

BAD = [
    ("SELECT a FROM", dltrace.ParseError, "does not parse"),
    ("SELECT a FROM t; SELECT 1", dltrace.ParseError, "one SQL statement"),
    ("SELECT a AS dl_x FROM t", dltrace.ReservedName, "'dl_x'"),
    ("SELECT t.a FROM t AS dl_t", dltrace.ReservedName, "'dl_t'"),
    ("WITH dl_c AS (SELECT 1 AS one) SELECT one FROM dl_c", dltrace.ReservedName, "'dl_c'"),
    ("SELECT a FROM (SELECT a FROM t) AS s(dl_z)", dltrace.ReservedName, "'dl_z'"),
    ("SELECT dl_foo FROM t", dltrace.ReservedName, "'dl_foo'"),
    ("SELECT x FROM t", dltrace.UnknownColumn, "'x'"),
    ("SELECT a FROM nope", dltrace.UnknownTable, "'nope'"),
    ("INSERT INTO t VALUES (1, 2)", dltrace.UnsupportedQuery, "INSERT"),
    ("WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r",
     dltrace.UnsupportedQuery, "recursive CTE"),
    ("SELECT * FROM t, LATERAL (SELECT max(c) + 1 AS m FROM u WHERE u.a = t.a) AS x", dltrace.UnsupportedQuery,
     "a LATERAL subquery that aggregates without GROUP BY, with an item (MAX("),
    ("SELECT DISTINCT ON (d) a, b + 1 AS d FROM t", dltrace.UnsupportedQuery, "DISTINCT ON"),
    ("SELECT a, b FROM t TABLESAMPLE (10 PERCENT)", dltrace.UnsupportedQuery, "TABLESAMPLE"),
    ("SELECT * FROM read_parquet('x.parquet')", dltrace.UnsupportedQuery, "table function"),
    # a second clause replaced the first, silently (a review); a correlated INTERSECT was refused as "two levels up"
    ("SELECT a, count(*) FROM t GROUP BY a LINEAGE ON (b) HAVING count(*) > 1 LINEAGE ON (b)", dltrace.ParseError,
     "a second LINEAGE ON clause: a query takes one"),
    ("SELECT a FROM t WHERE EXISTS (SELECT u.a FROM u WHERE u.a = t.a INTERSECT SELECT u.c FROM u WHERE u.c = t.b)",
     dltrace.UnsupportedQuery, "it is a set operation whose branches read the outer query"),
    # DuckDB's star over the columns whose names match was refused as "`*` inside LIKE(...)"
    ("SELECT * LIKE 'a%' FROM t", dltrace.UnsupportedQuery, "* LIKE ... (a star over the columns whose names match)"),
    # a qualified column its table lacks: sqlglot says "Unknown column: zz", naming neither the table nor where
    ("SELECT x.a FROM t AS x WHERE x.zz = 1", dltrace.UnknownColumn, "x has no column 'zz' (x.zz), at line 1, col 33"),
    # a row value against a subquery is read as a filter only (passes/row_in_subqueries.py): a row value was once
    # compared with the first column only
    ("SELECT a FROM t WHERE ((a, b) IN (SELECT a, c FROM u)) IS NOT NULL", dltrace.UnsupportedQuery,
     'row value ("t"."a", "t"."b") compared with a subquery is supported only as a filter'),
    ("SELECT a FROM t WHERE (a, b) <> ANY (SELECT a, c FROM u)", dltrace.UnsupportedQuery, "IN or = ANY only"),
    ("SELECT a FROM t WHERE (a, b) <> (SELECT a, c FROM u)", dltrace.UnsupportedQuery, "IN or = ANY only"),
    # sqlglot's decorrelation read the value through MAX() in GROUP BY too: DuckDB refused the rewrite
    ("SELECT (SELECT max(c) FROM u) > t.a AS k, count(*) AS n FROM t GROUP BY 1", dltrace.UnsupportedQuery,
     "a subquery in a GROUP BY key is not supported: compute the key in a derived table"),
    # sqlglot says "could not be resolved" for a column in two sources too: the user looked for a missing column
    ("SELECT a FROM t, u", dltrace.UnknownColumn, "'a' is ambiguous: 't' and 'u' each have a column 'a'"),
    ("SELECT x.b FROM (SELECT b, a FROM t JOIN u ON b = c) AS x", dltrace.UnknownColumn, "'a' is ambiguous"),
    ("SELECT zz FROM t, u", dltrace.UnknownColumn, "Column 'zz' could not be resolved"),
    # the parenthesised join is the refusal, not the star over its inner side (checked first)
    ("SELECT t.*, u.* FROM t JOIN (u JOIN t AS t2 USING (a)) ON t.a = u.a", dltrace.UnsupportedQuery,
     "a parenthesised join attached by, or holding, a USING or NATURAL join is not supported"),
    # a SEMI JOIN is read as an EXISTS: the refusal names the null-safe correlation the user wrote (one of two
    # types: passes/null_safe_keys.py takes one type alone)
    ("SELECT a FROM t SEMI JOIN u ON t.a IS NOT DISTINCT FROM u.a / 2", dltrace.UnsupportedQuery,
     "correlated through IS NOT DISTINCT FROM"),
    ("SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a / 2 <=> t.a)", dltrace.UnsupportedQuery,
     "correlated through IS NOT DISTINCT FROM"),
    # a correlated subquery that is not decorrelated says why (it said only "could not be decorrelated (SCALAR)", or
    # "correlated two levels up" of a correlation the user wrote once, inside a derived table)
    # (an inner join's moves to the WHERE, passes/inner_join_lookups.py, but before a POSITIONAL join)
    ("SELECT t.a, u.c FROM t JOIN u ON u.a = t.a AND u.c = (SELECT max(u2.c) FROM u AS u2 WHERE u2.a = u.a) "
     "POSITIONAL JOIN u AS w", dltrace.UnsupportedQuery, "it stands in a join's ON condition"),
    ("SELECT sum((SELECT count(*) FROM u WHERE u.a = t.a)) AS n FROM t", dltrace.UnsupportedQuery,
     "it stands inside an aggregate's argument"),
    ("SELECT a, (SELECT count(*) FROM u WHERE u.a = t.a HAVING count(*) > 1) AS n FROM t", dltrace.UnsupportedQuery,
     "it has a HAVING of its own"),
    # a grouped query's subquery item stands in the aggregate a pass wraps it in: it was "inside an aggregate's
    # argument" where the user's query has none (a new user's)
    ("SELECT t.a, (SELECT count(*) FROM u WHERE EXISTS (SELECT 1 FROM t AS t2 WHERE t2.a = u.a AND t2.b = t.a)) AS n "
     "FROM t GROUP BY t.a", dltrace.UnsupportedQuery, "correlated two levels up"),
    ("SELECT a, (SELECT count(*) FROM (SELECT DISTINCT c FROM u WHERE u.a = t.a) AS d) AS n FROM t",
     dltrace.UnsupportedQuery, "a derived table in its FROM reads the outer query"),
    # DuckDB's rowid pseudo-column: said only "could not be resolved", a column the engine has
    ("SELECT rowid, a FROM t", dltrace.UnknownColumn, "dl_rid is the row's id"),
    # sqlglot drops an empty list item: `a,, b` rewrote as `a, b`, where the engines raise a syntax error
    ("SELECT a,, b FROM t", dltrace.ParseError, "an empty item in a list"),
    ("SELECT coalesce(, a) FROM t", dltrace.ParseError, "an empty item in a list"),
    ("SELECT a FROM t WHERE a IN (,1)", dltrace.ParseError, "an empty item in a list"),
]


@pytest.mark.parametrize("sql,error,needle", BAD, ids=[b[0][:40] for b in BAD])
def test_bad_input_is_refused_clearly(sql, error, needle):
    with pytest.raises(error) as info:
        dltrace.rewrite(sql, schema=S)
    message = str(info.value)
    assert needle in message
    assert "\n" not in message


def test_a_refusal_quotes_the_construct_in_the_dialect_it_was_written_in():
    """Spark's LATERAL VIEW was quoted as DuckDB's translation, `CROSS JOIN UNNEST(arr) AS x(e)`, which the user
    never wrote (found by a probe on Spark)."""
    schema = {"t": {"k": "INT", "arr": "ARRAY<INT>"}}
    with pytest.raises(dltrace.UnsupportedQuery, match=r"LATERAL VIEW without column names is not supported: name "
                                                       r"them .*, at line 1, col \d+ \(`LATERAL VIEW EXPLODE\(arr\) x`\)"):
        dltrace.rewrite("SELECT k FROM t LATERAL VIEW explode(arr) x", dialect="spark", schema=schema)


def test_unsupported_names_its_position():
    with pytest.raises(dltrace.UnsupportedQuery, match=r"LATERAL .*line 1, col \d+"):
        dltrace.rewrite("SELECT * FROM t, LATERAL (SELECT * FROM u WHERE u.a < t.a) AS x", schema=S)


def test_control_lineage_of_a_correlated_not_in_is_refused_not_guessed():
    sql = "SELECT a FROM t WHERE a NOT IN (SELECT c FROM u WHERE u.a = t.b)"
    assert "dl_u" in dltrace.rewrite(sql, schema=S)  # witness: nothing from u, an empty column
    with pytest.raises(dltrace.UnsupportedQuery, match="NOT IN"):
        dltrace.rewrite(sql, schema=S, semantics="control")


def test_reading_dl_rid_is_allowed_but_not_in_star():
    out = dltrace.rewrite("SELECT * FROM t", schema=S)
    assert '"t"."dl_rid" AS "dl_rid"' not in out
    assert '"t"."dl_rid" AS "dl_rid"' in dltrace.rewrite("SELECT dl_rid, a FROM t", schema=S)


def test_unknown_strategy_and_semantics():
    with pytest.raises(dltrace.DltraceError, match="strategy"):
        dltrace.rewrite("SELECT a FROM t", schema=S, strategy="bdd")
    with pytest.raises(dltrace.DltraceError, match="semantics"):
        dltrace.rewrite("SELECT a FROM t", schema=S, semantics="why")


def test_output_dialect_without_an_engine():
    with pytest.raises(dltrace.DltraceError, match="no engine runs the dialect 'postgres'"):
        dltrace.rewrite("SELECT a FROM t", schema=S, dialect="postgres")
    # the Spark family shares Spark's lineage SQL; the input may be in any dialect sqlglot reads
    spark = dltrace.rewrite("SELECT a FROM t", schema=S, dialect="spark")
    assert dltrace.rewrite("SELECT a FROM t", schema=S, dialect="databricks") == spark
    assert dltrace.rewrite("SELECT a FROM t", schema=S, dialect="spark", read="postgres") == spark


def test_source_with_reserved_column_is_refused(tmp_path):
    s = dltrace.connect("duckdb")
    with pytest.raises(dltrace.ReservedName, match="dl_x"):
        s.register("bad", pa.table({"dl_x": [1]}))
    path = tmp_path / "rid.parquet"
    pq.write_table(pa.table({"dl_rid": [1], "a": [2]}), path)
    for storage in ("source", "memory"):  # named as the file has it (DuckDB's scan beside the rid said dl_rid_1)
        with pytest.raises(dltrace.ReservedName, match="'dl_rid' uses"):
            s.register("bad", str(path), storage=storage)


def test_quoted_identifiers_survive():
    s = dltrace.connect("duckdb")
    s.register("my table", pa.table({"weird \"col\"": [1, 2, 2], "sélect": ["a'b", "c", "c"]}))
    r = s.run('SELECT "sélect", count(*) AS n FROM "my table" GROUP BY "sélect" ORDER BY 1')
    assert r.table.to_pylist() == [{"sélect": "a'b", "n": 1}, {"sélect": "c", "n": 2}]
    assert [r.lineage(0), r.lineage(1)] == [{"my table": [0]}, {"my table": [1, 2]}]
    assert r.verify(0) and r.verify(1)


@pytest.mark.parametrize("sql", ["SELECT a, (SELECT 1) AS one FROM t", "SELECT a FROM t WHERE a > (SELECT 1)",
                                 "SELECT a FROM t WHERE EXISTS (SELECT 1)",
                                 "SELECT a, count(*) OVER (ORDER BY (SELECT 1)) AS n FROM t"])
@pytest.mark.parametrize("strategy", ["set", "bitmap"])
def test_a_subquery_reading_no_table_runs(sql, strategy):
    """It has no lineage to keep: nothing is hoisted (it was a CTE of no columns, which no engine parses)."""
    s = dltrace.connect("duckdb")
    s.register("t", pa.table({"a": [1, 2, 3]}))
    r = s.run(sql, lineage=strategy)
    assert r.table.to_pylist() == s.sql(sql).to_pylist()
    assert [r.lineage(i) for i in range(r.num_rows)] == [s.trace(sql).lineage(i) for i in range(r.num_rows)]
    s.close()


def test_a_row_value_in_a_list_is_not_a_subquery():
    s = dltrace.connect("duckdb")
    s.register("t", pa.table({"a": [1, 2, 2], "b": [1, 5, 2]}))
    sql = "SELECT a FROM t WHERE (a, b) IN ((1, 1), (2, 2)) ORDER BY a"
    assert s.run(sql).table.to_pylist() == s.sql(sql).to_pylist() == [{"a": 1}, {"a": 2}]
    s.close()


def test_every_bad_call_a_review_made_is_one_dltrace_error(tmp_path):
    """Each raised a raw Python or DuckDB exception (IndexError, ValueError, TypeError, AttributeError, KeyError,
    ArrowInvalid, duckdb's IOException / ConnectionException) before: found by a new user's review."""
    import duckdb
    import pyarrow.parquet as pq

    s = dltrace.connect("duckdb")
    s.register("t", pa.table({"k": [1, 2], "v": [10, 20]}))
    r = s.run("SELECT k, v FROM t")
    assert r.lineage(-1) == r.lineage(1) and r.backward(-1)["t"].equals(r.backward(1)["t"])
    (tmp_path / "dup.csv").write_text("a,a\n1,2\n")
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "gone.parquet")
    s.register("gone", str(tmp_path / "gone.parquet"))
    (tmp_path / "gone.parquet").unlink()
    dup = s.run("SELECT a.k, b.k FROM t AS a JOIN t AS b ON a.k = b.k")
    s.register("été", pa.table({"a": [1]}))
    cases = [
        (lambda: s.register("", pa.table({"a": [1]})), "non-empty string"),
        (lambda: s.register("Émp", pa.table({"a": [1]})), "capital letter outside ASCII.*'émp'"),
        # "Été" over the registered été: DuckDB finds no such table; dltrace found it, then said "two columns of the
        # same name" or "Column 'a' could not be resolved" (a third review)
        (lambda: s.run('SELECT a FROM "Été"'),
         r"unknown table 'Été': a capital letter outside ASCII is matched by its case.*\('été'\)"),
        (lambda: r.lineage(2), "row 2 out of range"),
        (lambda: r.verify(-3), "row -3 out of range"),
        (lambda: r.explain(9), "row 9 out of range"),
        (lambda: list(r.lineage_batches(batch_rows=0)), "batch_rows must be a positive int"),
        (lambda: r.backward(0, limit=-1), "limit must be an int >= 0"),
        (lambda: r.explain(0, samples=-1), "samples must be an int >= 0"),
        (lambda: dltrace.rewrite("SELEC x", schema={"t": {"x": "INT"}}), "does not parse as a statement"),
        (lambda: dltrace.rewrite("SELECT 1", dialect="nope"), "unknown SQL dialect 'nope'"),
        # a DuckDB query read as Spark's: its "name" is a string there (a new user's CLI run on Spark)
        (lambda: dltrace.rewrite('SELECT k."Région" FROM k', dialect="spark", schema={"k": {"Région": "STRING"}}),
         "k has no column 'Région'.*; in this dialect \"Région\" is a string: quote a name with ` \\(`Région`\\)"),
        (lambda: s.run("SELECT 1", dialect="nope"), "unknown SQL dialect 'nope'"),
        (lambda: dltrace.rewrite("SELECT dept FROM emp"), "without schema="),
        (lambda: dltrace.connect("duckdb", connection="nope"), "must be a DuckDB connection"),
        (lambda: dltrace.connect("duckdb", foo=1), "takes no option 'foo'"),
        (lambda: dltrace.connect("spark", threads=2), "takes no option 'threads' \\(DuckDB's\\)"),
        # (any other name was a Spark setting: session=spark was set as spark.session on the user's session)
        (lambda: dltrace.connect("spark", session=s), "takes no option 'session': it takes spark= \\(your"),
        # Spark said only JAVA_GATEWAY_EXITED for these, its reason in Java's log lines (a new user's); refused
        # before a JVM starts, and where a running session would be taken, which ignored the master
        (lambda: dltrace.connect("spark", master="sc://127.0.0.1:1"), "is a Spark Connect address: .*remote"),
        (lambda: dltrace.connect("spark", master="spork://x"), "'spork://x' is no Spark master: local, local\\[N\\]"),
        (lambda: s.register("dups", pa.table([[1], [2]], names=["a", "a"])), "two columns named 'a'"),
        (lambda: s.run("SELECT a FROM gone"), "No files found"),
        (lambda: s.register("f16", pa.table({"h": pa.array([1.0], pa.float16())})), "cannot register|DuckDB"),
        # a second review's: pyarrow's format error for a string, tpchgen-cli's `--help` line for -1, an
        # AttributeError for SQL text, DuckDB's parser error for `a,, b` (plain SQL parses through sqlglot first)
        (lambda: s.load_tpch("x"), r"sf \(the TPC-H scale factor\) must be a number > 0, got str 'x'"),
        (lambda: s.load_tpch(-1), r"must be a number > 0, got int -1"),
        (lambda: s.schema(3), "query must be SQL text"),
        (lambda: s.sql("SELECT k,, v FROM t"), "an empty item in a list"),
        # arguments that were ignored without a word: another engine or its options beside session=, a misspelt
        # table left restricted
        (lambda: dltrace.pipeline(tmp_path, session=s, engine="spark"), "engine would open a new session"),
        (lambda: dltrace.pipeline(tmp_path, session=s, threads=2), "threads would open a new session"),
        (lambda: r.verify(0, unrestricted=("nope",)), "unrestricted names 'nope', which this query does not read"),
        # s.sql ran DDL: `CREATE TABLE mine AS ...` said "unknown table 'mine'", `DROP TABLE t` dropped the table
        # under the session (a user's own on a guest connection)
        (lambda: s.sql("CREATE TABLE mine AS SELECT 1 AS x"), "CREATE ... AS <query> goes through s.run"),
        (lambda: s.sql("DROP TABLE t"), "s.sql runs queries and what reads the tables, not DROP statements"),
        (lambda: s.sql("TRUNCATE t"), "not TRUNCATE statements"),
        # COPY ... FROM added rows to a registered table (the next run answered from the rows it had), a PRAGMA
        # setting changed the connection's
        (lambda: s.sql(f"COPY t FROM '{tmp_path / 'dup.csv'}'"), "not COPY statements"),
        (lambda: s.sql("PRAGMA threads=1"), "not PRAGMA statements"),
        (lambda: s.sql("BEGIN TRANSACTION"), "not TRANSACTION statements"),
        # a third review's: CHECKPOINT was "not COLUMN statements" (sqlglot reads it as a column), CREATE MACRO "goes
        # through s.run", a CREATE ... AS holding LINEAGE ON "not a CREATE statement", a UNION column a pyarrow
        # traceback from to_pandas
        (lambda: s.sql("-- a comment\nCHECKPOINT"), "not 'CHECKPOINT'"),
        (lambda: s.sql("CREATE MACRO m(x) AS x + 1"), "not CREATE MACRO statements"),
        (lambda: s.sql("CREATE MACRO m2(x) AS TABLE SELECT 1"), "not CREATE MACRO statements"),
        # CREATE over a registered name said "pass replace=True", the API's word, not SQL's (a new user)
        (lambda: s.run("CREATE TABLE t AS SELECT 1 AS k"), "write CREATE OR REPLACE TABLE to replace it"),
        (lambda: s.run("CREATE TABLE lo AS SELECT k, count(*) AS n FROM t GROUP BY k LINEAGE ON (v)"),
         "a CREATE ... AS query cannot hold LINEAGE ON"),
        (lambda: s.run("SELECT union_value(num := k) AS u FROM t").to_pandas(),
         "column 'u' is of a type pandas cannot hold"),
    ]
    for call, needle in cases:
        with pytest.raises(dltrace.DltraceError, match=needle):
            call()
    assert s.schema("SELECT k FROM t") == {"t": {"k": "BIGINT", "v": "BIGINT"}}
    assert s.sql("DESCRIBE t").num_rows == 2 and s.sql("SELECT count(*) AS n FROM t").to_pylist() == [{"n": 2}]
    assert s.sql("PRAGMA table_info('t')").num_rows == 2 and s.sql("EXPLAIN SELECT k FROM t").num_rows >= 1
    assert dup.row(0) == {"k": 1, "k_1": 1} and dup.explain(0).startswith("row 0 of 2: k=1, k_1=1")
    con = duckdb.connect()
    guest = dltrace.connect("duckdb", connection=con)
    guest.register("x", pa.table({"a": [1]}))
    con.close()  # the user closes their connection under dltrace
    with pytest.raises(dltrace.QueryError, match="Connection"):
        guest.run("SELECT a FROM x")
    guest.close()  # what dltrace made went with the connection: nothing to drop, no error
    s.close()


def test_spark_identifier_clause_reads_the_table_it_names():
    """Spark's FROM IDENTIFIER('t') was refused as a table function without row ids, naming a table the session had
    (a new Spark user's review); DuckDB has no such clause, and its error for the call stands."""
    schema = {"cust": {"a": "INT"}}
    sql = "SELECT c.a FROM IDENTIFIER('cust') AS c WHERE c.a > 1"
    assert dltrace.rewrite(sql, dialect="spark", schema=schema) == \
        dltrace.rewrite("SELECT c.a FROM cust AS c WHERE c.a > 1", dialect="spark", schema=schema)
    with pytest.raises(dltrace.UnsupportedQuery, match="table function"):
        dltrace.rewrite(sql, dialect="duckdb", schema=schema)


def test_a_name_some_stays_a_name():
    """SOME after a comparison is read as ANY (grammar._parse_tokens); a table or column named some is not."""
    text = dltrace.rewrite("SELECT a AS some, some.x FROM t AS some", schema={"t": {"a": "INT", "x": "INT"}})
    assert '"some"."a" AS "some"' in text
