"""Lineage through a pipeline of steps (dltrace.compose, dltrace.pipelines).

The oracle: a pipeline's end-to-end lineage of every final row equals the lineage of the one query that inlines
the steps as CTEs (forward and backward, set and bitmap, DuckDB and Spark); forward impact across steps equals
the rows that change when the pipeline is rerun without the source row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dltrace
from dltrace import PipelineError
from dltrace.pipelines import read_pipeline

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "tpch_pipeline"


def _tables() -> dict[str, pa.Table]:
    regions = ["north", "south", "east", "west"]
    items = ["apple", "pear", "plum", "fig", "kiwi"]
    rows = [(i, regions[(i * 7) % 4], items[(i * 3) % 5], (i * 5) % 11 + 1, i % 10) for i in range(48)]
    sales = pa.table({"id": [r[0] for r in rows], "region": [r[1] for r in rows], "item": [r[2] for r in rows],
                      "amount": [r[3] for r in rows], "day": [r[4] for r in rows]})
    catalog = pa.table({"item": items, "category": ["tree", "tree", "tree", "vine", "vine"], "price": [3, 4, 2, 7, 5]})
    where = pa.table({"region": ["north", "south", "east"], "country": ["NO", "ZA", "JP"]})
    return {"p_sales": sales, "p_items": catalog, "p_regions": where}


PIPELINES = {
    "join_then_aggregate": [
        ("p_clean", "SELECT s.id, s.region, s.amount, i.category FROM p_sales AS s JOIN p_items AS i "
                    "ON i.item = s.item WHERE s.amount > 2"),
        ("p_totals", "SELECT c.region, c.category, count(*) AS n, sum(c.amount) AS total FROM p_clean AS c "
                     "JOIN p_regions AS r ON r.region = c.region GROUP BY c.region, c.category"),
    ],
    "distinct_and_subquery": [
        ("p_pairs", "SELECT DISTINCT s.region, s.item FROM p_sales AS s WHERE s.day < 8"),
        ("p_busy", "SELECT s.region, count(*) AS n FROM p_sales AS s "
                   "WHERE s.item IN (SELECT p.item FROM p_pairs AS p WHERE p.region = 'north') GROUP BY s.region"),
        ("p_report", "SELECT b.region, b.n, r.country FROM p_busy AS b JOIN p_regions AS r ON r.region = b.region "
                     "WHERE b.n > 1"),
    ],
    "four_steps": [
        ("p_day", "SELECT s.day, s.region, sum(s.amount) AS amount FROM p_sales AS s GROUP BY s.day, s.region"),
        ("p_big", "SELECT d.day, d.region, d.amount FROM p_day AS d "
                  "WHERE d.amount > (SELECT avg(x.amount) FROM p_day AS x)"),
        ("p_join", "SELECT b.region, r.country, count(*) AS days, sum(b.amount) AS amount FROM p_big AS b "
                   "LEFT JOIN p_regions AS r ON r.region = b.region GROUP BY b.region, r.country"),
        ("p_top", "SELECT j.region, j.country, j.amount FROM p_join AS j ORDER BY j.amount DESC, j.region LIMIT 2"),
    ],
}


def inlined(steps: list[tuple[str, str]]) -> str:
    """The pipeline as one query: every step but the last a CTE."""
    *ctes, (_, last) = steps
    if not ctes:
        return last
    return "WITH " + ", ".join(f"{name} AS ({sql})" for name, sql in ctes) + " " + last


def write_folder(folder: Path, steps: list[tuple[str, str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for k, (name, sql) in enumerate(steps):
        (folder / f"{k:02d}_{name}.sql").write_text(f"CREATE TABLE {name} AS\n{sql};\n")
    return folder


def pairs(r) -> list:
    """(row values, lineage) of every row, as a sorted list: results compared as multisets."""
    rows = [tuple(map(_plain, row.values())) for row in r.table.to_pylist()]
    lin = [tuple(sorted((t, tuple(ids)) for t, ids in r.lineage(i).items())) for i in range(r.num_rows)]
    return sorted(zip(rows, lin), key=repr)


def _plain(v):
    return int(v) if hasattr(v, "as_integer_ratio") and float(v).is_integer() else v


def _session(engine: str, spark=None) -> dltrace.Session:
    s = dltrace.connect(engine, spark=spark) if spark is not None else dltrace.connect(engine)
    for name, table in _tables().items():
        s.register(name, table, replace=True)
    return s


def check_pipeline(s: dltrace.Session, folder: Path, steps, lineage: str, backward: bool = False,
                   backward_run: bool = True) -> None:
    p = dltrace.pipeline(folder, session=s, lineage=lineage)
    final = p[steps[-1][0]]
    assert final.composed_from or len(steps) == 1
    one = s.run(inlined(steps), lineage=lineage)
    assert pairs(final) == pairs(one)
    if backward:
        traced = s.trace(inlined(steps))
        assert pairs(p.trace(steps[-1][0])) == pairs(traced)
        if not backward_run:
            return
        b = dltrace.pipeline(folder, session=s, method="backward")
        assert pairs(b[steps[-1][0]]) == pairs(traced)


@pytest.mark.parametrize("lineage", ["set", "bitmap"])
@pytest.mark.parametrize("name", list(PIPELINES))
def test_pipeline_equals_inlined_query_duckdb(tmp_path, name, lineage):
    s = _session("duckdb")
    try:
        check_pipeline(s, write_folder(tmp_path / name, PIPELINES[name]), PIPELINES[name], lineage,
                       backward=lineage == "set")
    finally:
        s.close()


@pytest.mark.spark
@pytest.mark.parametrize("lineage,name,backward", [
    # (bitmap traced too: a step's bitmaps read as Spark's sets are converted, which p.trace took for another
    # run's registration and refused, a new user's)
    ("set", "join_then_aggregate", True), ("bitmap", "distinct_and_subquery", True), ("set", "four_steps", False),
])
def test_pipeline_equals_inlined_query_spark(tmp_path, spark_session, lineage, name, backward):
    s = _session("spark", spark_session)
    try:
        check_pipeline(s, write_folder(tmp_path / name, PIPELINES[name]), PIPELINES[name], lineage, backward,
                       backward_run=False)  # every step traced by reverse queries: on DuckDB (Spark: slow)
    finally:
        s.close()


def test_one_step_lineage_and_create_table_through_a_session():
    s = _session("duckdb")
    try:
        first = s.run("CREATE TABLE p_clean AS " + PIPELINES["join_then_aggregate"][0][1])
        assert s.sql("SELECT * FROM p_clean").column_names == ["id", "region", "amount", "category"]
        sql = PIPELINES["join_then_aggregate"][1][1]
        end = s.run(sql)
        one = s.run(sql, end_to_end=False)
        assert set(end.lineage_columns) == {"p_sales", "p_items", "p_regions"} and end.composed_from == ("p_clean",)
        assert set(one.lineage_columns) == {"p_clean", "p_regions"} and not one.composed_from
        # (two runs of a GROUP BY without ORDER BY: its rows come in any order, matched by their group)
        end_row = {(r["region"], r["category"]): i for i, r in enumerate(end.table.to_pylist())}
        for i, row in enumerate(one.table.to_pylist()):  # one step, then the stored lineage of the p_clean rows
            via = sorted({rid for r in one.lineage(i)["p_clean"] for rid in first.lineage(r)["p_sales"]})
            assert end.lineage(end_row[row["region"], row["category"]])["p_sales"] == via
        assert s.trace(sql, end_to_end=False).lineage(0).keys() == {"p_clean", "p_regions"}
        with pytest.raises(dltrace.DltraceError, match="p_clean"):
            end.verify(0)
        assert one.verify(0)
    finally:
        s.close()


def test_a_one_step_result_over_a_step_is_registered_in_the_original_ids():
    """A step created with end_to_end=False over another step held that step's ids, which a later end-to-end query
    read as if they were a base table's (and its rows showed the step's private lineage column)."""
    s = dltrace.connect("duckdb")
    try:
        s.register("o", pa.table({"k": [1, 2, 2, 3], "v": [1, 2, 3, 4]}))
        s.run("CREATE TABLE s1 AS SELECT k, v FROM o WHERE v > 1")
        s.run("CREATE TABLE s2 AS SELECT k, sum(v) AS t FROM s1 GROUP BY k ORDER BY k", end_to_end=False)
        assert s.run("SELECT sum(t) AS total FROM s2").lineage(0) == {"o": [1, 2, 3]}
        one = s.run("SELECT k, v FROM s1 WHERE k = 2", end_to_end=False)
        assert one.lineage(0) == {"s1": [0]}
        assert one.backward(0)["s1"].column_names == ["k", "v", "dl_rid"]
    finally:
        s.close()


@pytest.mark.parametrize("lineage", ["set", "bitmap"])
@pytest.mark.parametrize("end_to_end", [True, False])
def test_a_step_shows_only_its_own_columns(lineage, end_to_end):
    """A query over a step saw the step's lineage column (``dl_t``) that only its rows relation holds: a NATURAL
    join of two steps also matched on it and lost rows, a whole-row reference and ``to_json`` gained the field,
    and ``SELECT *`` was refused as expanding to more columns than it named (found by a probe: a regression of
    the adopted relations' frozen columns)."""
    s = dltrace.connect("duckdb")
    try:
        s.register("t", pa.table({"g": ["a", "b", "a"], "v": [1, 2, 3]}))
        s.run("CREATE TABLE s1 AS SELECT g, count(*) AS n FROM t GROUP BY g ORDER BY g", lineage=lineage)
        s.run("CREATE TABLE s2 AS SELECT g, v FROM t", lineage=lineage)
        for q in ["SELECT g, n, v FROM s1 NATURAL JOIN s2 ORDER BY g, v",
                  "SELECT s1 AS whole FROM s1 ORDER BY g",
                  "SELECT to_json(s1) AS j FROM s1 ORDER BY g",
                  "SELECT * FROM s1 ORDER BY g",
                  "SELECT s1.* EXCLUDE (n) FROM s1 ORDER BY g",
                  "SELECT count(DISTINCT s2) AS n FROM s2"]:
            got = s.run(q, lineage=lineage, end_to_end=end_to_end)
            assert got.table.to_pylist() == s.sql(q).to_pylist(), q
        star = s.run("SELECT * FROM s1 ORDER BY g", lineage=lineage, end_to_end=end_to_end)
        assert star.table.column_names == ["g", "n"]
        assert star.lineage(0) == ({"t": [0, 2]} if end_to_end else {"s1": [0]})
    finally:
        s.close()


@pytest.mark.parametrize("step, query", [("witness", "control"), ("control", "witness")])
def test_a_query_asking_other_semantics_than_a_step_it_reads_is_refused(step, query):
    """A step captured with witness semantics read by a query run with semantics="control" gave the step's witness
    lineage labelled control (and the reverse): end to end, lineage is the pipeline inlined, in one semantics."""
    s = dltrace.connect("duckdb")
    try:
        s.register("t", pa.table({"k": [1, 2, 3], "g": ["a", "a", "b"]}))
        s.register("u", pa.table({"k": [1, 3, 9]}))
        q1 = "SELECT k, g FROM t WHERE k IN (SELECT k FROM u) ORDER BY k"  # (s1's row 0 is 'a': rows in one order)
        q2 = "SELECT g, count(*) AS n FROM s1 GROUP BY g ORDER BY g"
        s.run(f"CREATE TABLE s1 AS {q1}", semantics=step)
        refused = f"'s1' holds {step} lineage, and this query asks for {query} semantics.*semantics='{query}'"
        for ask in (lambda: s.run(q2, semantics=query), lambda: s.trace(q2, semantics=query),
                    lambda: s.impact(q2, "u", [1], semantics=query)):
            with pytest.raises(dltrace.UnsupportedQuery, match=refused):
                ask()
        # one step: the step's own ids are the lineage, whatever its semantics
        assert s.run(q2, semantics=query, end_to_end=False).lineage(0) == {"s1": [0]}
        assert s.trace(q2, semantics=query, end_to_end=False).lineage(0) == {"s1": [0]}
        with pytest.raises(dltrace.UnsupportedQuery, match=f"run the query with semantics='{step}' to register it"):
            s.register("s2", s.run(q2, semantics=query, end_to_end=False))  # (composed through s1's lineage)
        inlined = s.run(f"WITH s1 AS ({q1}) {q2}", semantics=step)
        for same in (s.run(q2, semantics=step), s.trace(q2, semantics=step)):
            assert [same.lineage(i) for i in range(same.num_rows)] == \
                [inlined.lineage(i) for i in range(inlined.num_rows)]
    finally:
        s.close()


def test_a_table_a_step_read_is_not_replaced_under_it():
    """Replaced, the step's stored lineage named rows of the new table that did not produce it."""
    s = dltrace.connect("duckdb")
    try:
        s.register("o", pa.table({"g": ["a", "a", "b"], "v": [5, 5, 1]}))
        s.run("CREATE TABLE st AS SELECT g, sum(v) AS t FROM o GROUP BY g ORDER BY g")
        with pytest.raises(dltrace.DuplicateTable, match="'o' is in the lineage of 'st'"):
            s.register("o", pa.table({"g": ["x", "y", "z"], "v": [7, 8, 9]}), replace=True)
        assert s.run("SELECT g, t FROM st ORDER BY g").backward(0)["o"].column("g").to_pylist() == ["a", "a"]
    finally:
        s.close()


def test_an_adopted_source_changed_under_a_pipeline_is_adopted_again_and_the_pipeline_run_again(tmp_path):
    """A new user: after an INSERT into an adopted source, the pipeline's run asked to adopt it again and the
    adoption to replace the step reading it first; running the pipeline again forgets its datasets, and says so."""
    (tmp_path / "01_clean.sql").write_text("CREATE TABLE clean AS SELECT * FROM orders WHERE amt > 0;")
    (tmp_path / "02_report.sql").write_text("CREATE TABLE report AS SELECT cid, sum(amt) AS total FROM clean "
                                            "GROUP BY cid;")
    con = duckdb.connect()
    con.sql("CREATE TABLE orders AS SELECT * FROM (VALUES (1, 1, 10), (2, 2, 20), (3, 1, -5)) v(id, cid, amt)")
    s = dltrace.connect("duckdb", connection=con)
    try:
        s.adopt("orders")
        p = dltrace.pipeline(tmp_path, session=s)
        con.sql("INSERT INTO orders VALUES (4, 2, 40)")
        assert p.stale() == {"clean": ["orders"], "report": ["orders"]}
        with pytest.raises(dltrace.DuplicateTable, match="running the pipeline again makes its datasets anew"):
            s.adopt("orders", replace=True)
        with pytest.raises(dltrace.PipelineError, match=r"adopt it again \(s.adopt\('orders', replace=True\)\)"):
            dltrace.pipeline(tmp_path, session=s)
        s.adopt("orders", replace=True)
        p = dltrace.pipeline(tmp_path, session=s)
        report = p.datasets["report"]
        assert sorted(report.table.to_pylist(), key=lambda r: r["cid"]) == [{"cid": 1, "total": 10},
                                                                            {"cid": 2, "total": 60}]
    finally:
        s.close()
        con.close()


def test_a_step_keeps_the_types_duckdb_gives_its_query(tmp_path):
    """A step was stored through Arrow: sum()'s HUGEINT became DECIMAL(38,0) (`total // 2` gave 3.5, not 3), an
    ENUM a VARCHAR (ORDER BY alphabetical), a NOCASE collation was dropped ('a' and 'A' grouped apart), a UUID a
    VARCHAR and a BIT its bytes: the next step answered otherwise than the pipeline inlined."""
    con = duckdb.connect()
    con.execute("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
    con.execute("CREATE TABLE t (k INTEGER, v INTEGER, m mood, s VARCHAR COLLATE NOCASE, u UUID, b BIT)")
    con.execute("INSERT INTO t VALUES (1, 3, 'happy', 'a', uuid(), '101'), (1, 4, 'sad', 'A', uuid(), '0'), "
                "(2, 5, 'ok', 'b', uuid(), '11111101')")
    s = dltrace.connect("duckdb", connection=con)
    try:
        s.adopt("t")
        step = "SELECT k, sum(v) AS total, m, s, u, b FROM t GROUP BY ALL"
        s.run(f"CREATE TABLE by_run AS {step}")
        s.register("by_result", s.run(step, lineage="bitmap"))
        s.run(f"CREATE TABLE plain AS {step}", lineage=None)
        write_folder(tmp_path / "p", [("by_pipeline", step)])
        dltrace.pipeline(tmp_path / "p", session=s)
        inlined = f"({step})"
        for name in ("by_run", "by_result", "plain", "by_pipeline"):
            assert con.sql(f"DESCRIBE {name}").fetchall() == con.sql(f"DESCRIBE {step}").fetchall(), name
            for q in ("SELECT k, total // 2 AS half FROM {} ORDER BY k, half", "SELECT m FROM {} ORDER BY m",
                      "SELECT lower(s) AS s, count(*) AS n FROM {} GROUP BY s ORDER BY 1",
                      "SELECT b::VARCHAR AS b, u FROM {} ORDER BY b"):
                assert s.sql(q.format(name)).to_pylist() == s.sql(q.format(inlined)).to_pylist(), (name, q)
        r = s.run("SELECT s, count(*) AS n FROM by_run GROUP BY s ORDER BY s")
        assert [r.lineage(i) for i in range(r.num_rows)] == [{"t": [0, 1]}, {"t": [2]}]
    finally:
        s.close()


@pytest.mark.spark
def test_a_spark_step_keeps_the_types_spark_gives_its_query(spark_session):
    """Through Arrow, a Spark step lost a string's collation (UTF8_LCASE: 'a' and 'A' grouped apart) and an
    interval's fields (INTERVAL DAY came back DAY TO SECOND)."""
    s = dltrace.connect("spark", spark=spark_session.newSession())
    try:
        s.register("t", pa.table({"k": [1, 1, 2], "s": ["a", "A", "b"]}))
        step = "SELECT k, s COLLATE UTF8_LCASE AS s, INTERVAL '2' DAY AS d FROM t"
        s.run(f"CREATE TABLE st AS {step}")
        spark = s.engine.spark
        inlined = spark.sql(step.replace("FROM t", f"FROM {s.engine.quote('t')}")).schema
        assert [f.dataType for f in spark.table(s.engine.quote("st")).schema] == [f.dataType for f in inlined]
        r = s.run("SELECT s, count(*) AS n FROM st GROUP BY s ORDER BY n")
        assert [tuple(row.values()) for row in r.table.to_pylist()] == [("b", 1), ("a", 2)]
        assert sorted(r.lineage(1)["t"]) == [0, 1]
    finally:
        s.close()


def test_a_step_read_inside_a_cte_of_its_name(tmp_path):
    """A step read inside a CTE named like it was taken for the CTE: its lineage came back in the step's own ids
    ({'st': [1]}, not its source rows), and a pipeline ran such a step before the step it reads."""
    s = dltrace.connect("duckdb")
    try:
        s.register("o", pa.table({"k": [1, 2, 2, 3], "v": [1, 2, 3, 4]}))
        s.run("CREATE TABLE st AS SELECT k, sum(v) AS v FROM o GROUP BY k ORDER BY k")
        for q in ("SELECT k, v FROM st WHERE v > 1", "WITH st AS (SELECT * FROM st WHERE v > 1) SELECT k, v FROM st"):
            r = s.run(q)
            assert r.composed_from == ("st",), q
            assert [r.lineage(i) for i in range(r.num_rows)] == [{"o": [1, 2]}, {"o": [3]}], q
        folder = write_folder(tmp_path / "p", [
            ("b", "WITH a AS (SELECT * FROM a WHERE v > 1) SELECT k, sum(v) AS v FROM a GROUP BY k ORDER BY k"),
            ("a", "SELECT k, v FROM o")])
        p = dltrace.pipeline(folder, session=s)
        assert list(p) == ["a", "b"] and p.lineage("b", 0) == {"o": [1, 2]}
        # impact's datasets read in any case, as the engines read names (a new user's "Customer Value" step)
        assert p.impact("O", [1])["B"] == p.impact("o", [1])["b"] == [0]
    finally:
        s.close()


def test_create_if_not_exists_does_nothing_over_a_name_that_exists(tmp_path):
    """CREATE TABLE IF NOT EXISTS over a name that exists raised DuplicateTable; SQL makes it a no-op."""
    con = duckdb.connect()
    con.execute("CREATE TABLE mine AS SELECT 1 AS z")
    s = dltrace.connect("duckdb", connection=con)
    try:
        s.register("o", pa.table({"k": [1, 2, 3]}))
        first = s.run("CREATE TABLE IF NOT EXISTS a AS SELECT k FROM o WHERE k > 1")
        assert first.lineage(0) == {"o": [1]}
        for sql in ("CREATE TABLE IF NOT EXISTS a AS SELECT 7 AS other", "CREATE VIEW IF NOT EXISTS a AS SELECT 7",
                    "CREATE TABLE IF NOT EXISTS o AS SELECT 7", "CREATE VIEW IF NOT EXISTS mine AS SELECT k FROM o"):
            assert s.run(sql) is None, sql
        assert s.sql("SELECT * FROM a").to_pylist() == [{"k": 2}, {"k": 3}]
        assert con.sql("SELECT * FROM mine").fetchall() == [(1,)]
        assert s.run("CREATE VIEW IF NOT EXISTS v AS SELECT k FROM a").lineage(1) == {"o": [2]}
        with pytest.raises(dltrace.DuplicateTable):
            s.run("CREATE TABLE a AS SELECT 7 AS other")
        # a pipeline's datasets are its own, made anew at each run, IF NOT EXISTS or not
        folder = write_folder(tmp_path / "p", [("c", "SELECT k FROM o WHERE k < 3")])
        (folder / "00_c.sql").write_text("CREATE TABLE IF NOT EXISTS c AS SELECT k FROM o WHERE k < 3;\n")
        for _ in range(2):
            assert dltrace.pipeline(folder, session=s).lineage("c", 1) == {"o": [1]}
    finally:
        s.close()


def test_impact_over_a_query_that_reads_a_step():
    """impact() said the query did not read the source table, and for the step's own rows named an internal
    relation and a LINEAGE ON clause the user never wrote (a review); an aggregating EXISTS correlated by an
    inequality, which s.run takes, was refused."""
    s = dltrace.connect("duckdb")
    try:
        s.register("o", pa.table({"id": [1, 2, 3], "amt": [10, 20, 30]}))
        s.run("CREATE TABLE step AS SELECT id, amt FROM o WHERE amt > 15")
        q = "SELECT id, amt FROM step WHERE amt < 25 UNION ALL SELECT 0, sum(amt) FROM step"
        r = s.run(q)
        assert s.impact(q, "o", [2]).rows == r.forward("o", [2]) == [1]
        assert s.impact(q, "o", [1]).rows == r.forward("o", [1]) == [0, 1]
        assert s.impact(q, "step", [1]).rows == [1]  # the step's own row 1 (amt 30) reaches the sum only
        s.register("b", pa.table({"y": [2, 3, 5]}))
        s.register("a", pa.table({"x": [1, 2, 3], "g": ["p", "p", "q"]}))
        e = "SELECT g, count(*) AS n FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.y > a.x) GROUP BY g ORDER BY g"
        assert s.impact(e, "b", [2]).rows == s.run(e).forward("b", [2]) == [0, 1]
    finally:
        s.close()


@pytest.mark.parametrize("first,second", [("set", "bitmap"), ("bitmap", "set")])
def test_mixed_strategies_convert_exactly(first, second):
    steps = PIPELINES["join_then_aggregate"]
    s = _session("duckdb")
    try:
        s.run(f"CREATE TABLE {steps[0][0]} AS {steps[0][1]}", lineage=first)
        mixed = s.run(steps[1][1], lineage=second)
        assert pairs(mixed) == pairs(s.run(inlined(steps), lineage=second))
    finally:
        s.close()


@pytest.mark.spark
def test_mixed_strategies_spark(spark_session):
    steps = PIPELINES["join_then_aggregate"]
    s = _session("spark", spark_session)
    try:
        s.run(f"CREATE TABLE {steps[0][0]} AS {steps[0][1]}", lineage="bitmap")
        assert pairs(s.run(steps[1][1], lineage="set")) == pairs(s.run(inlined(steps), lineage="set"))
    finally:
        s.close()


# -- the example pipeline -------------------------------------------------------------------------------------

def _tpch_arrow(folder: Path, drop: dict[str, int] | None = None) -> dict[str, pa.Table]:
    out = {}
    for t in ("orders", "customer", "nation"):
        table = pq.read_table(folder / f"{t}.parquet")
        if drop and t in drop:
            table = pa.concat_tables([table.slice(0, drop[t]), table.slice(drop[t] + 1)])
        out[t] = table
    return out


def test_example_reads_as_sdp_project():
    p = read_pipeline(EXAMPLE)
    assert p.layout == "sdp" and p.names == ["clean_orders", "daily_revenue", "nation_totals", "top_nations"]
    assert p.sources == ["orders", "customer", "nation"]
    assert p.step("nation_totals").kind == "temporary view"
    assert p.upstream("top_nations") == {"nation_totals", "daily_revenue", "clean_orders", "orders", "customer",
                                         "nation"}


@pytest.mark.parametrize("table,rid", [("orders", 93), ("customer", 4), ("nation", 3)])
def test_forward_impact_equals_brute_force(tpch_folder, table, rid):
    p = dltrace.pipeline(EXAMPLE, tables=_tpch_arrow(tpch_folder), lineage="bitmap")
    without = dltrace.pipeline(EXAMPLE, tables=_tpch_arrow(tpch_folder, {table: rid}), lineage=None)
    try:
        impact = p.impact(table, [rid])
        assert any(impact.values())
        for name, r in p.datasets.items():
            before = Counter(map(repr, r.table.to_pylist()))
            after = Counter(map(repr, without[name].table.to_pylist()))
            changed = before - after  # rows of the run that are gone or changed without the source row
            hit = Counter(repr(r.table.slice(i, 1).to_pylist()[0]) for i in impact[name])
            assert hit == changed, name
    finally:
        p.close()
        without.close()


def test_stale_datasets_after_a_source_file_changes(tmp_path, tpch_folder):
    nation = tmp_path / "nation.parquet"
    pq.write_table(pq.read_table(tpch_folder / "nation.parquet"), nation)
    tables = {"orders": str(tpch_folder / "orders.parquet"), "customer": str(tpch_folder / "customer.parquet"),
              "nation": str(nation)}
    p = dltrace.pipeline(EXAMPLE, tables=tables)
    try:
        assert p.stale() == {}
        t = pq.read_table(nation)
        names = t.column("n_name").to_pylist()
        names[0] = "ATLANTIS"
        pq.write_table(t.set_column(1, "n_name", pa.array(names)), nation)
        assert p.stale() == {"daily_revenue": ["nation"], "nation_totals": ["nation"], "top_nations": ["nation"]}
    finally:
        p.close()


def test_a_rerun_over_a_csv_source_changed_since_it_was_registered_is_stale(tmp_path):
    """A CSV file is read when it is registered: a run after the file changed reads the rows as registered, and its
    stale() says so (a new user fixed a file, ran the pipeline again in the same session, and saw nothing stale)."""
    csv = tmp_path / "c.csv"
    csv.write_text("id,region\n1,north\n2,south\n")
    (tmp_path / "p.sql").write_text("CREATE TABLE rep AS SELECT region, count(*) AS n FROM c GROUP BY region")
    s = dltrace.connect("duckdb")
    try:
        s.register("c", str(csv))
        first = dltrace.pipeline(str(tmp_path / "p.sql"), session=s)
        assert first.stale() == {}
        csv.write_text("id,region\n1,south\n2,south\n")
        again = dltrace.pipeline(str(tmp_path / "p.sql"), session=s)
        assert sorted(again["rep"].table.to_pylist(), key=repr) == [{"region": "north", "n": 1},
                                                                   {"region": "south", "n": 1}]
        assert first.stale() == again.stale() == {"rep": ["c"]}
    finally:
        s.close()


def test_example_backward_equals_forward(tpch_folder):
    p = dltrace.pipeline(EXAMPLE, tpch=0.01)
    try:
        assert p.trace("top_nations", rows=[0]).lineage(0) == p.lineage("top_nations", 0)
        assert p.backward("top_nations", 0, tables="nation")["nation"].column("n_name").to_pylist() == \
            [p["top_nations"].table.column("nation")[0].as_py()]
    finally:
        p.close()


# -- bad input: one line naming the step and the file -------------------------------------------------------

BAD = {
    "cycle": ({"a.sql": "CREATE TABLE a AS SELECT * FROM b", "b.sql": "CREATE TABLE b AS SELECT * FROM a"},
              r"step 'a' \(a.sql\): cycle a -> b -> a \(files a.sql, b.sql\)"),
    "unknown": ({"a.sql": "CREATE TABLE a AS SELECT * FROM nowhere"},
                r"step 'a' \(a.sql\) reads 'nowhere', which no step defines: unknown table 'nowhere'; registered: "
                r"p_items, p_regions, p_sales"),
    "streaming": ({"s.sql": "CREATE STREAMING TABLE s AS SELECT * FROM STREAM(p_sales)"},
                  r"step 's' \(s.sql\): streaming tables are not supported"),
    "stream read": ({"s.sql": "CREATE MATERIALIZED VIEW s AS SELECT * FROM STREAM(p_sales)"},
                    r"step 's' \(s.sql\): it reads a STREAM"),
    "fails": ({"a.sql": "CREATE TABLE a AS SELECT 1 AS x", "b.sql": "CREATE TABLE b AS SELECT no_such FROM a"},
              r"step 'b' \(b.sql\) failed: .*no_such"),
    "twice": ({"a.sql": "CREATE TABLE a AS SELECT 1 AS x", "b.sql": "CREATE VIEW a AS SELECT 2 AS x"},
              r"step 'a' \(b.sql\): dataset 'a' is also defined in a.sql"),
    "not a definition": ({"a.sql": "CREATE TABLE a AS SELECT 1 AS x; INSERT INTO a VALUES (2)"},
                         r"a.sql: only CREATE ... AS SELECT statements define datasets"),
    "replaces a source": ({"a.sql": "CREATE TABLE p_sales AS SELECT 1 AS x"},
                          r"step 'p_sales' \(a.sql\) defines 'p_sales', a table registered in the session"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_pipelines_are_one_line_errors(tmp_path, case):
    files, message = BAD[case]
    for name, text in files.items():
        (tmp_path / name).write_text(text + ";\n")
    s = _session("duckdb")
    try:
        with pytest.raises(PipelineError, match=message) as e:
            dltrace.pipeline(tmp_path, session=s)
        assert "\n" not in str(e.value)
    finally:
        s.close()


def test_a_step_reading_a_relation_not_adopted_says_adopt_it(tmp_path):
    """On the user's own connection, a step reading their table 'sales' said "no table of that name is registered
    (sources: none)", where s.run says to adopt it."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE sales AS SELECT * FROM (VALUES ('n', 10), ('s', 20)) AS v(region, amount)")
    (tmp_path / "01.sql").write_text("CREATE TABLE agg AS SELECT region, sum(amount) AS total FROM sales GROUP BY 1")
    s = dltrace.connect("duckdb", connection=con)
    with pytest.raises(PipelineError, match=r"step 'agg' \(01.sql\) reads 'sales', which no step defines: table "
                                            r"'sales' is on the engine but dltrace does not trace it yet: "
                                            r"s.adopt\('sales'\) it \(or register it\) first"):
        dltrace.pipeline(tmp_path, session=s)
    s.adopt("sales")
    assert dltrace.pipeline(tmp_path, session=s)["agg"].num_rows == 2
    s.close()
    con.close()


def test_sdp_python_library_is_refused(tmp_path):
    (tmp_path / "spark-pipeline.yml").write_text("name: x\nstorage: s\nlibraries:\n  - glob:\n      include: t/**\n")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.py").write_text("")
    with pytest.raises(PipelineError, match=r"t/a.py: Python pipeline libraries are not supported"):
        read_pipeline(tmp_path)


def test_trace_finds_the_run_s_rows_holding_nan_lists_and_structs(tmp_path):
    """p.trace matched the run's rows with the traced ones by Python equality in a dict: a row holding a NaN never
    matched ("the sources changed" while stale() was {}), a LIST or STRUCT column was a raw TypeError."""
    src = pa.table({"k": [1, 2, 1, 3], "v": [0.0, 1.0, 0.0, 2.0], "w": [0.0, 2.0, 0.0, 4.0]})
    (tmp_path / "01.sql").write_text("CREATE TABLE ratio AS SELECT k, sum(v) / sum(w) AS r, list(w ORDER BY w) AS ws, "
                                     "{'k': k, 'r': sum(v) / sum(w)} AS st FROM src GROUP BY k")
    p = dltrace.pipeline(tmp_path, tables={"src": src})
    assert p.stale() == {} and sum(r != r for r in p["ratio"].table.column("r").to_pylist()) == 1  # one NaN
    traced = p.trace("ratio")
    assert [traced.lineage(i) for i in range(3)] == [p.lineage("ratio", i) for i in range(3)]
    with pytest.raises(dltrace.ArgumentError, match="rows must be a list of row indexes or None, got int 0"):
        p.trace("ratio", rows=0)  # (a raw TypeError: 'int' object is not iterable)
    assert p.trace("ratio", rows=[-1]).lineage(2) == p.lineage("ratio", 2)
    p.close()


def test_trace_refuses_once_a_source_file_changed_with_as_many_rows(tmp_path):
    """p.trace ran the step again over the sources as they are now and matched its rows to the run's: over a file
    rewritten with as many rows it answered with the new rows as the lineage of the old ones (its snapshot taken
    then), where p.backward, s.run(...).backward and stale() all said the source changed."""
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"k": [1, 2, 3], "g": ["a", "b", "a"]}), path)
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "01.sql").write_text("CREATE TABLE agg AS SELECT g, count(*) AS n FROM t GROUP BY g ORDER BY g")
    (tmp_path / "steps" / "02.sql").write_text("CREATE TABLE rep AS SELECT g, n FROM agg WHERE n > 1")
    p = dltrace.pipeline(tmp_path / "steps", tables={"t": str(path)})
    try:
        before = p.trace("rep", rows=[0])
        assert before.lineage(0) == {"t": [0, 2]}
        pq.write_table(pa.table({"k": [9, 8, 7], "g": ["a", "b", "a"]}), path)  # as many rows, other values
        stamp = path.stat().st_mtime_ns + 10**9  # (a file system whose clock did not move: still another stat)
        os.utime(path, ns=(stamp, stamp))
        assert p.stale() == {"agg": ["t"], "rep": ["t"]}
        for dataset in ("rep", "agg"):  # over a step, and over the source itself
            with pytest.raises(dltrace.StaleLineage, match=f"trace of '{dataset}'.*table 't' has files changed"):
                p.trace(dataset, rows=[0])
        with pytest.raises(dltrace.StaleLineage, match="'t' has files changed"):
            before.backward(0)  # (a trace made before the change names the rows of the run)
    finally:
        p.close()


def test_trace_of_an_earlier_run_names_the_step_a_later_run_registered_again(tmp_path):
    """A second run of the pipeline in the session, with a step's file edited, registers that step again; tracing
    the first run's later step read the new step and said "the sources changed (see stale())" while stale() was {}
    (a new user's review). The step registered again is named; the newest run traces."""
    (tmp_path / "01.sql").write_text("CREATE TABLE clean AS SELECT k, g FROM t WHERE k > 1")
    (tmp_path / "02.sql").write_text("CREATE TABLE rep AS SELECT g, count(*) AS n FROM clean GROUP BY g")
    s = dltrace.connect("duckdb")
    s.register("t", pa.table({"k": [1, 2, 3, 4], "g": ["a", "b", "a", "b"]}))
    first = dltrace.pipeline(tmp_path, session=s)
    (tmp_path / "01.sql").write_text("CREATE TABLE clean AS SELECT k, g FROM t WHERE k > 2")
    second = dltrace.pipeline(tmp_path, session=s)
    assert first.stale() == {}
    with pytest.raises(dltrace.PipelineError, match="trace of 'rep': 'clean', which it reads, was registered again"):
        first.trace("rep")
    assert first.trace("clean").lineage(0) == first.lineage("clean", 0)  # (it reads the source only)
    traced = second.trace("rep")
    assert sorted(traced.lineage(i)["t"] for i in range(2)) == [[2], [3]]
    s.close()


def test_row_keys_compare_values_as_a_rerun_gives_them():
    """NaN is NaN (Python's NaN != NaN), -0.0 is not 0.0 (Python's -0.0 == 0.0 could pair two rows' lineage
    crosswise), lists, structs and maps are keys."""
    from dltrace.names import row_key

    nan = float("nan")
    assert row_key((1, nan)) == row_key((1, float("nan"))) != row_key((1, 0.0))
    assert row_key((-0.0,)) != row_key((0.0,)) and row_key((-0.0,)) == row_key((-0.0,))
    assert row_key(([1.0, nan], {"a": [nan]}, [("k", nan)])) == row_key(([1.0, nan], {"a": [nan]}, [("k", nan)]))
    assert len({row_key(([1], {"a": None})), row_key(([1], {"a": None}))}) == 1


def test_one_sql_file_is_a_pipeline(tmp_path):
    """A .sql file given as the pipeline was read as a spark-pipeline.yml: "expected a mapping with a 'libraries'
    list"; it is a pipeline of its CREATE ... AS statements (in dependency order), and a file of another kind is
    named as no pipeline."""
    (tmp_path / "steps.sql").write_text("-- two steps, the second first\nCREATE TABLE b AS SELECT x + 1 AS y FROM a;\n"
                                        "CREATE TABLE a AS SELECT k AS x FROM src;\n")
    p = dltrace.pipeline(tmp_path / "steps.sql", tables={"src": pa.table({"k": [1, 2]})})
    assert p.pipeline.names == ["a", "b"] and p.sources == ["src"] and p.lineage("b", 1) == {"src": [1]}
    assert p.pipeline.steps[0].file == "steps.sql"
    p.close()
    (tmp_path / "notes.txt").write_text("CREATE TABLE a AS SELECT 1 AS x")
    with pytest.raises(PipelineError, match=r"notes.txt' is not a pipeline: give a folder of .sql files, a .sql file"):
        read_pipeline(tmp_path / "notes.txt")


def test_a_file_that_is_not_utf8_is_a_pipeline_error(tmp_path):
    """A raw UnicodeDecodeError came out of dltrace.pipeline for a Latin-1 step file or spec."""
    (tmp_path / "01.sql").write_bytes(b"CREATE TABLE a AS SELECT 'caf\xe9' AS x")
    with pytest.raises(PipelineError, match=r"cannot read step file .*01.sql'.*not UTF-8 text \(byte 0xe9 at line 1, "
                                            r"col 30\)"):
        read_pipeline(tmp_path)
    (tmp_path / "spark-pipeline.yml").write_bytes(b"name: caf\xe9\n")
    with pytest.raises(PipelineError, match=r"cannot read pipeline spec .*not UTF-8 text"):
        dltrace.pipeline(tmp_path)


def test_cli_pipeline(tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "dltrace.cli", "pipeline", *args], capture_output=True,
                              text=True, cwd=ROOT)

    out = cli(str(EXAMPLE), "--tpch", "0.01", "--forward", "nation:3", "--row", "top_nations:0", "--tuples", "1")
    assert out.returncode == 0, out.stderr
    assert "top_nations:" in out.stdout and "nation    1 tuple; rids 3" in out.stdout
    assert "  nation_totals: 1 of 25 rows" in out.stdout
    (tmp_path / "a.sql").write_text("CREATE TABLE a AS SELECT * FROM b; CREATE TABLE b AS SELECT * FROM a;")
    bad = cli(str(tmp_path), "--tpch", "0.01")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("dltrace: error: step 'a' (a.sql): cycle a -> b -> a")
    # JSON names each line's dataset and question; one CSV table cannot hold several datasets' rows (a review
    # found them printed under one header, unnamed)
    js = cli(str(EXAMPLE), "--tpch", "0.01", "--forward", "nation:3", "--json")
    lines = [json.loads(line) for line in js.stdout.splitlines()]
    assert js.returncode == 0 and {line["dataset"] for line in lines} >= {"nation_totals", "top_nations"}
    assert {line["question"] for line in lines} == {"--forward nation:3"}
    for args in (["--forward", "nation:3"], ["--row", "top_nations:0", "--row", "nation_totals:0"]):
        mixed = cli(str(EXAMPLE), "--tpch", "0.01", *args, "--csv")
        assert mixed.returncode == 2 and mixed.stdout == "" and "--csv writes one table" in mixed.stderr
    one = cli(str(EXAMPLE), "--tpch", "0.01", "--row", "top_nations:0", "--row", "top_nations:1", "--csv")
    assert one.returncode == 0 and len(one.stdout.splitlines()) == 3


# -- the same SQL under Spark's own spark-pipelines -----------------------------------------------------------

@pytest.mark.sdp
def test_example_runs_under_spark_pipelines(tmp_path, tpch_folder):
    """The example project's SQL, run by `spark-pipelines run` (Spark Declarative Pipelines, a Spark Connect
    server in a subprocess on loopback), gives the rows dltrace's run gives."""
    import shutil

    import pyspark

    tool = Path(pyspark.__file__).parent / "bin" / "spark-pipelines"
    if not tool.exists():
        pytest.skip(f"this pyspark ({pyspark.__version__}) ships no bin/spark-pipelines (Spark 4.1+ does)")
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project)
    # the sources, as Spark temporary views over the same parquet files dltrace reads
    sources = "\n".join(f"CREATE TEMPORARY VIEW {t} AS SELECT * FROM parquet.`{tpch_folder / (t + '.parquet')}`;"
                        for t in ("orders", "customer", "nation"))
    (project / "transformations" / "00_sources.sql").write_text(sources + "\n")
    spec = (project / "spark-pipeline.yml").read_text().replace("storage: pipeline-storage",
                                                               f"storage: file://{project / 'storage'}")
    (project / "spark-pipeline.yml").write_text(spec + "configuration:\n  spark.sql.shuffle.partitions: \"2\"\n")
    env = {**__import__("os").environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "PATH": f"{Path(sys.executable).parent}:{__import__('os').environ.get('PATH', '')}"}
    run = subprocess.run([str(tool), "run", "--spec", str(project / "spark-pipeline.yml")], cwd=project, env=env,
                         capture_output=True, text=True, timeout=600)
    if run.returncode != 0 and "Run is COMPLETED" not in run.stdout + run.stderr:
        lines = [ln for ln in (run.stdout + run.stderr).splitlines() if "Error" in ln or "Exception" in ln]
        pytest.fail("spark-pipelines run failed: " + (lines[-1] if lines else run.stderr[-500:]))
    p = dltrace.pipeline(EXAMPLE, tpch=0.01)
    try:
        for name in ("clean_orders", "daily_revenue", "top_nations"):  # the materialized views Spark stores
            spark_rows = pq.read_table(project / "spark-warehouse" / name).to_pylist()
            mine = p[name].table.to_pylist()
            norm = lambda rows: sorted(repr({k: _plain(v) for k, v in r.items()}) for r in rows)  # noqa: E731
            assert norm(spark_rows) == norm(mine), name
    finally:
        p.close()
