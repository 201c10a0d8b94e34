"""Where registered tables live while queries run: ``storage="source"`` (views over the parquet files, Arrow in
place) or ``"memory"`` (a DuckDB native table: on its own connection compressed in its own in-memory database, on a user's a temporary table; a cached Spark DataFrame). The row ids, rows and lineage
must be the same in both, on both engines; dltrace stays a guest on a user's connection; ``dltrace tpch
--storage`` runs either and says which in its report."""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa
import pytest

import dltrace
from dltrace.cli import build_parser
from dltrace.names import rows_relation
from dltrace.tpch.queries import query_sql
from dltrace.tpch.runner import main
from dltrace.tpch_data import TABLES

from test_cli import cli, fails

SF = 0.01
QUERIES = (2, 3, 11, 13, 18, 21, 22)  # joins, aggregation, correlated and scalar subqueries, NOT EXISTS


@pytest.fixture(scope="module")
def memory(tpch_folder):
    s = dltrace.connect("duckdb")
    s.load_tpch(SF, storage="memory")
    yield s
    s.close()


def rows_with_ids(s, table: str) -> pa.Table:
    """The rows relation of ``table`` (its columns and ``dl_rid``, as BIGINT) in id order (memory storage keeps
    the ids of a table under 2**31 rows as INTEGER: the same ids)."""
    t = s.engine.sql(f"SELECT * FROM {s.rows(table)} ORDER BY dl_rid")
    return t.set_column(t.column_names.index("dl_rid"), "dl_rid", t.column("dl_rid").cast(pa.int64()))


def test_memory_storage_keeps_ids_in_four_bytes(memory):
    """What the capture reads per kept row: a 4-byte id (every TPC-H table has fewer than 2**31 rows)."""
    types = dict(memory.engine.con.execute(f"SELECT column_name, data_type FROM information_schema.columns "
                                           f"WHERE table_name = '{rows_relation('lineitem')}'").fetchall())
    assert types["dl_rid"] == "INTEGER"
    r = memory.run("SELECT l_returnflag, count(*) AS n FROM lineitem GROUP BY ALL ORDER BY 1", lineage="set")
    assert r.lineage_columns["lineitem"].type == pa.list_(pa.int64())  # readers see 64-bit ids as before


#: memory storage on dltrace's own connection: a table of its in-memory database and the temporary view of it
HELD = ["BASE TABLE", "VIEW"]


def relation_kinds(con, name: str) -> list[str]:
    return [k for (k,) in con.execute("SELECT table_type FROM information_schema.tables WHERE table_name = ?",
                                      [name]).fetchall()]


def test_memory_storage_is_native_tables_with_the_users_columns(memory, duck):
    con = memory.engine.con
    for t in TABLES:
        # on its own connection: a table of dltrace's in-memory database, with the rows relation the temporary
        # view of it
        kinds = con.execute("SELECT table_catalog, table_type FROM information_schema.tables WHERE table_name = ? "
                            "ORDER BY 1", [rows_relation(t)]).fetchall()
        assert kinds == [("_dl_store", "BASE TABLE"), ("temp", "VIEW")]
        assert relation_kinds(con, t) == ["VIEW"]  # the user's columns, no dl_rid
        assert memory.storage[t] == "memory" and duck.storage[t] == "source"
        assert memory.engine.columns(t) == duck.engine.columns(t)
        assert "dl_rid" not in memory.sql(f"SELECT * FROM {t} LIMIT 0").column_names


def test_memory_storage_is_compressed_on_its_own_connection(memory):
    """DuckDB compresses an in-memory database's tables at a checkpoint, never a temporary table's."""
    codecs = {c for (c,) in memory.engine.con.execute(
        f"SELECT DISTINCT compression FROM pragma_storage_info('_dl_store.main.{rows_relation('lineitem')}')"
    ).fetchall()}
    assert codecs and "Uncompressed" not in codecs


def test_memory_storage_on_a_users_connection_attaches_nothing():
    """A guest attaches no database: the rows are a temporary table, and a write inside the user's own open
    transaction stays possible (DuckDB lets one transaction write to one database only)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE mine AS SELECT 1 AS a")
    before = con.execute("SELECT database_name FROM duckdb_databases() ORDER BY 1").fetchall()
    con.execute("BEGIN")
    con.execute("INSERT INTO mine VALUES (2)")
    with dltrace.connect("duckdb", connection=con) as s:
        s.register("t", pa.table({"k": [1, 2, 2]}), storage="memory")
        assert relation_kinds(con, rows_relation("t")) == ["LOCAL TEMPORARY"]
        assert con.execute("SELECT database_name FROM duckdb_databases() ORDER BY 1").fetchall() == before
        assert s.run("SELECT k, count(*) AS n FROM t GROUP BY k ORDER BY k").lineage(1) == {"t": [1, 2]}
    con.execute("COMMIT")
    assert con.execute("SELECT sum(a) FROM mine").fetchone()[0] == 3


def test_same_row_ids_in_both_storages(memory, duck):
    for t in TABLES:
        a, b = rows_with_ids(duck, t), rows_with_ids(memory, t)
        assert a.num_rows == b.num_rows == memory.num_rows(t)
        assert a.column("dl_rid").to_pylist() == list(range(a.num_rows))
        assert a.equals(b), t


@pytest.mark.parametrize("q", QUERIES)
def test_same_rows_and_lineage_in_both_storages(memory, duck, q):
    sql = query_sql(q, "duckdb")
    for strategy in ("set", "bitmap"):
        a, b = duck.run(sql, lineage=strategy), memory.run(sql, lineage=strategy)
        assert a.table.equals(b.table), (q, strategy)
        assert [a.lineage(i) for i in range(a.num_rows)] == [b.lineage(i) for i in range(b.num_rows)], (q, strategy)
    ta, tb = duck.trace(sql, rows=[0]), memory.trace(sql, rows=[0])
    assert ta.lineage(0) == tb.lineage(0)


def test_arrow_and_csv_sources_in_memory(tmp_path):
    csv = tmp_path / "sales.csv"
    csv.write_text("region,amount\nn,10\ns,20\nn,30\n")
    arrow = pa.table({"k": [3, 1, 2], "v": ["c", "a", "b"]})
    with dltrace.connect("duckdb") as a, dltrace.connect("duckdb") as b:
        for s, storage in ((a, "source"), (b, "memory")):
            s.register("sales", str(csv), storage=storage)
            s.register("t", arrow, storage=storage)
        assert sorted(relation_kinds(b.engine.con, rows_relation("t"))) == HELD
        for t in ("sales", "t"):
            assert rows_with_ids(a, t).equals(rows_with_ids(b, t))
        sql = "SELECT region, sum(amount) AS total FROM sales GROUP BY region ORDER BY region"
        assert b.run(sql).lineage(0) == a.run(sql).lineage(0) == {"sales": [0, 2]}


def test_a_pipeline_step_in_memory(tpch_folder):
    """A result registered as the next step's source (its rows carry lineage) can live in memory too."""
    with dltrace.connect("duckdb") as s:
        s.register("orders", str(tpch_folder / "orders.parquet"), storage="memory")
        step = s.run("SELECT o_custkey, count(*) AS n FROM orders GROUP BY o_custkey ORDER BY o_custkey")
        s.register("by_source", step)
        s.register("by_memory", step, storage="memory")
        assert sorted(relation_kinds(s.engine.con, rows_relation("by_memory"))) == HELD
        assert s.sql("SELECT * FROM by_memory").column_names == step.table.column_names  # lineage stays private
        sql = "SELECT n, count(*) AS k FROM {} GROUP BY n ORDER BY n"
        a, b = s.run(sql.format("by_source")), s.run(sql.format("by_memory"))
        assert a.table.equals(b.table)
        assert [a.lineage(i) for i in range(a.num_rows)] == [b.lineage(i) for i in range(b.num_rows)]
        assert set(b.lineage(0)) == {"orders"}  # end to end: in the original table's row ids


def test_register_again_in_the_other_storage(tpch_folder):
    path = str(tpch_folder / "nation.parquet")
    with dltrace.connect("duckdb") as s:
        s.register("nation", path)
        before = rows_with_ids(s, "nation")
        for storage, kinds in (("memory", HELD), ("source", ["VIEW"]), ("memory", HELD)):
            s.register("nation", path, replace=True, storage=storage)
            assert sorted(relation_kinds(s.engine.con, rows_relation("nation"))) == kinds
            assert rows_with_ids(s, "nation").equals(before)


def test_unknown_storage_is_refused(tpch_folder):
    with dltrace.connect("duckdb") as s:
        with pytest.raises(dltrace.UnknownChoice, match="unknown storage 'disk'.*source, memory"):
            s.register("nation", str(tpch_folder / "nation.parquet"), storage="disk")
        with pytest.raises(dltrace.UnknownChoice, match="unknown storage"):
            s.load_tpch(SF, storage="parquet")  # the library's names: source, memory
        with pytest.raises(dltrace.ArgumentError, match="storage must be one of source, memory, got int 3"):
            s.register("nation", str(tpch_folder / "nation.parquet"), storage=3)
        assert not s.tables


def test_memory_storage_is_a_guest_on_a_users_database(tpch_folder, tmp_path):
    """On a user's persistent database, memory storage writes nothing into their file (temporary tables only),
    and close drops exactly what dltrace made."""
    con = duckdb.connect(str(tmp_path / "user.duckdb"))
    con.execute("CREATE TABLE mine AS SELECT 1 AS x")
    s = dltrace.connect("duckdb", connection=con)
    s.register("nation", str(tpch_folder / "nation.parquet"), storage="memory")
    assert s.sql("SELECT count(*) AS n FROM nation").column(0)[0].as_py() == 25
    s.close()
    left = sorted(n for (n,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall())
    assert left == ["mine"]
    con.close()
    with duckdb.connect(str(tmp_path / "user.duckdb")) as again:
        assert [n for (n,) in again.execute("SELECT table_name FROM information_schema.tables").fetchall()] == ["mine"]


# -- Spark: the parquet rows with their ids, cached -------------------------------------------------------------

@pytest.mark.spark
def test_spark_memory_storage_has_duckdbs_ids_and_lineage(spark_session, memory, tpch_folder):
    s = dltrace.connect("spark", spark=spark_session)
    names = {t: f"m_{t}" for t in ("customer", "orders", "nation")}  # beside the shared session's own tables
    try:
        for t, name in names.items():
            s.register(name, str(tpch_folder / f"{t}.parquet"), storage="memory")
            assert spark_session.catalog.isCached(s.engine.quote(rows_relation(name)))
            got = rows_with_ids(s, name)
            want = rows_with_ids(memory, t)
            assert got.column("dl_rid").to_pylist() == want.column("dl_rid").to_pylist()
            assert got.select(want.column_names[:2]).to_pylist() == want.select(want.column_names[:2]).to_pylist()
        sql = ("SELECT n_name, count(*) AS n FROM {c} JOIN {o} ON c_custkey = o_custkey JOIN {n} "
               "ON c_nationkey = n_nationkey WHERE o_orderpriority = '1-URGENT' GROUP BY n_name ORDER BY n_name")
        r = s.run(sql.format(c=names["customer"], o=names["orders"], n=names["nation"]), lineage="bitmap")
        d = memory.run(sql.format(c="customer", o="orders", n="nation"), lineage="bitmap")
        assert r.table.to_pylist() == d.table.to_pylist()
        for i in range(d.num_rows):
            assert {k.removeprefix("m_"): v for k, v in r.lineage(i).items()} == d.lineage(i)
    finally:
        engine = s.engine
        s.close()
    for name in names.values():  # guest: what it made is gone, the cache released (the session is closed)
        assert not engine.exists(name) and not engine.exists(rows_relation(name))
    assert not any(i.numCachedPartitions() for i in spark_session.sparkContext._jsc.sc().getRDDStorageInfo()
                   if "m_" in str(i.name()))


# -- dltrace tpch --storage / --threads ------------------------------------------------------------------------

def test_cli_storage_and_threads_are_checked(tmp_path):
    out = tmp_path / "r"
    fails(cli("tpch", "--storage", "disk", "--out", out), "--storage", "memory,parquet")
    fails(cli("tpch", "--storage", "", "--out", out), "--storage")
    fails(cli("tpch", "--threads", "0", "--out", out), "--threads", "> 0")
    fails(cli("tpch", "--threads", "two", "--out", out), "--threads", "number")
    args = build_parser().parse_args(["tpch", "--storage", "parquet,memory", "--threads", "1"])
    assert args.storage == ["memory", "parquet"] and args.threads == 1  # memory first: the report's main table
    args = build_parser().parse_args(["tpch"])
    assert args.storage == ["memory"] and args.threads is None


def test_report_states_the_storage_and_shows_both(tmp_path):
    out = tmp_path / "report"
    args = build_parser().parse_args(["tpch", "--sf", str(SF), "--engines", "duckdb", "--repeat", "1",
                                      "--queries", "6,11", "--strategies", "original,set,bitmap",
                                      "--storage", "memory,parquet", "--threads", "1", "--out", str(out)])
    assert main(args) == 0
    records = json.loads((out / "results.json").read_text())
    assert {(r["storage"], r["query"], r["strategy"]) for r in records} == {
        (st, q, s) for st in ("memory", "parquet") for q in (6, 11) for s in ("original", "set", "bitmap")}
    assert all(r["status"] == "ok" for r in records), [r["message"] for r in records if r["status"] != "ok"]
    meta = json.loads((out / "run.json").read_text())
    assert meta["storage"] == ["memory", "parquet"] and meta["threads"] == 1
    assert meta["engine_details"]["duckdb memory"]["threads"] == 1
    report = (out / "report.md").read_text()
    assert report.startswith("# dltrace TPC-H report: SF 0.01, memory storage")
    assert "Storage: **memory (DuckDB native tables" in report and "DuckDB threads: 1 (--threads)" in report
    assert "--storage memory,parquet --threads 1" in report
    assert "## Storage: parquet beside memory" in report and "### DuckDB, parquet storage" in report
    assert "Set lineage (rows and ids) is identical on both storages for 2 of 2 queries" in report


def test_report_of_results_from_before_storage_says_parquet(tmp_path):
    """Results written before --storage existed ran on views over the parquet files: the report says so."""
    rec = {"engine": "duckdb", "sf": 0.01, "query": 6, "strategy": "original", "status": "ok", "seconds": 0.01,
           "seconds_all": [0.01], "ratio": 1.0, "output_rows": 1, "lineage_ids": None, "bytes_raw": None,
           "bytes_stored": None, "agrees": None, "peak_rss_bytes": None, "message": None}
    (tmp_path / "results.json").write_text(json.dumps([rec]))
    assert main(build_parser().parse_args(["tpch", "--report-only", "--out", str(tmp_path)])) == 0
    report = (tmp_path / "report.md").read_text()
    assert report.startswith("# dltrace TPC-H report: SF 0.01, parquet storage")
    assert "Storage: **parquet (views over the parquet files" in report
