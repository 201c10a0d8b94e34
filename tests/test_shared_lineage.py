"""Lineage every output row has (an uncorrelated scalar subquery's: Q11's HAVING threshold) is computed once and
kept once per result -- in memory, on disk, in the session's views -- and is still part of every row's lineage
through every reader: ``lineage(i)``, ``sets``, ``backward``, ``forward``, ``lineage_table``, counts, views,
save/load. The reference is the single query ``dltrace.rewrite()`` gives a user, which merges it into each row."""

from __future__ import annotations

import duckdb
import pytest

import dltrace
from dltrace.lineage_data import decode_ids
from dltrace.tpch import TPCH_SCHEMA, query_sql

Q11 = query_sql(11)
# a shared part that overlaps the rows' own (the threshold reads the same table), and one only in the shared part
OVERLAP = ("SELECT o.o_custkey, count(*) AS n FROM orders AS o GROUP BY o.o_custkey "
           "HAVING count(*) > (SELECT avg(o2.o_totalprice) / 10000 FROM orders AS o2 WHERE o2.o_orderkey < 200)")
ONLY_SHARED = "SELECT r.r_name FROM region AS r WHERE r.r_regionkey < (SELECT count(*) FROM nation AS n) - 22"
# three subqueries kept apart, two of them over one table, one over no rows (its lineage empty): the shared query
# reads each one's one row once
SEVERAL = ("SELECT r.r_name FROM region AS r WHERE r.r_regionkey <= (SELECT max(n.n_regionkey) FROM nation AS n "
           "WHERE n.n_nationkey < 7) AND coalesce((SELECT min(o.o_orderkey) FROM orders AS o WHERE o.o_orderkey < 0), "
           "0) = 0 AND r.r_regionkey >= (SELECT count(*) FROM nation AS n2 WHERE n2.n_nationkey > 20) - 4")


def reference(duck, sql: str, strategy: str) -> list[dict[str, list[int]]]:
    """Every row's lineage from the single rewritten query (the form ``dltrace.rewrite`` gives)."""
    con = duckdb.connect()
    dltrace.install(con)
    for t in ("orders", "partsupp", "supplier", "nation", "region"):
        con.register(f"_arrow_{t}", duck.sql(f"SELECT *, dl_rid FROM {duck.rows(t)}"))
        con.execute(f"CREATE TABLE {t} AS SELECT * FROM _arrow_{t} ORDER BY dl_rid")
    text = dltrace.rewrite(sql, strategy=strategy, schema=TPCH_SCHEMA)
    out = con.sql(text).to_arrow_table()
    lineage = [c for c in out.column_names if c.startswith("dl_")]
    return [{c[3:]: decode_ids(out.column(c)[i].as_py()) for c in lineage} for i in range(out.num_rows)]


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
@pytest.mark.parametrize("sql", [Q11, OVERLAP, ONLY_SHARED, SEVERAL], ids=["q11", "overlap", "only-shared", "several"])
def test_shared_lineage_is_kept_once_and_read_with_every_row(duck, sql, strategy):
    r = duck.run(sql, lineage=strategy)
    assert r.shared_lineage, "the scalar subquery's lineage is kept apart"
    for t, col in r.shared_lineage.items():
        assert len(col) == 1
    want = reference(duck, sql, strategy)
    assert r.num_rows == len(want) > 0
    assert [r.lineage(i) for i in range(r.num_rows)] == want
    assert r.lineage_all() == want
    for t in r.lineage_columns:  # one column per table, the shared part merged
        assert [decode_ids(v) for v in r.sets(t).to_pylist()] == [w[t] for w in want]
    triples = [(i, t, rid) for i, w in enumerate(want) for t, ids in w.items() for rid in ids]
    assert list(zip(*r.lineage_table().to_pydict().values())) == triples
    counts = r.to_pandas(lineage="count")
    for t in r.lineage_columns:
        assert counts[f"dl_count_{t}"].tolist() == [len(w[t]) for w in want]
    # forward from a rid only the shared part holds reaches every row (a table the shared part holds ids of: the
    # subquery over no rows has none)
    t, shared = next((t, decode_ids(col[0].as_py())) for t, col in r.shared_lineage.items()
                     if decode_ids(col[0].as_py()))
    own = {rid for i in range(r.num_rows) for rid in decode_ids(r.lineage_columns[t][i].as_py())}
    only = sorted(set(shared) - own)
    if only:
        assert r.forward(t, only[0]) == list(range(r.num_rows))
    assert r.forward(t, shared[0]) == [i for i, w in enumerate(want) if shared[0] in w[t]]
    got = r.backward(0, tables=[t])[t]
    assert got.column("dl_rid").to_pylist() == want[0][t]


def test_shared_lineage_round_trips_and_is_saved_once(duck, tmp_path):
    r = duck.run(Q11, lineage="bitmap")
    saved = r.save(tmp_path / "q11")
    manifest = dltrace.store.read_manifest(saved)[1]
    assert manifest["shared_lineage"]["tables"] == list(r.shared_lineage)
    back = dltrace.load(saved, duck)
    assert back.lineage_all() == r.lineage_all()
    # the rows' own part is saved without the shared part: far smaller than the merged columns
    own = sum(len(v or b"") for t in r.lineage_columns for v in r.lineage_columns[t].to_pylist())
    merged = sum(len(v or b"") for t in r.lineage_columns for v in r.sets(t).to_pylist())
    assert own < merged


def test_shared_lineage_in_the_session_views():
    with dltrace.connect("duckdb") as s:  # (its own session: the views stay behind in it)
        s.load_tpch(0.01)
        r = s.run(ONLY_SHARED, lineage="set")
        names = r.register("shared_views_test")
        for t in r.lineage_columns:
            rows = s.sql(f"SELECT row, rid FROM {names[t]} ORDER BY row, rid").to_pylist()
            assert [(x["row"], x["rid"]) for x in rows] == [(i, rid) for i in range(r.num_rows)
                                                            for rid in r.lineage(i)[t]]


@pytest.mark.spark
@pytest.mark.parametrize("strategy", ["set", "bitmap"])
def test_spark_keeps_the_shared_lineage_apart_too(duck, sparks, strategy):
    """On Spark (no scalar subquery in a lineage union) the shared part is kept apart as well, same lineage."""
    got = sparks.run(query_sql(11, "spark"), lineage=strategy)
    assert got.shared_lineage
    assert got.lineage_all() == duck.run(Q11, lineage=strategy).lineage_all()


def _temporaries(session) -> set[str]:
    return {t for (t,) in session.engine.con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()}


def test_a_threshold_read_in_place_is_computed_once_with_its_lineage_and_dropped(duck):
    """Over parquet read in place, Q11's threshold (an aggregate without GROUP BY over base tables) is stored
    with its lineage in one evaluation, which the query and its shared lineage both read; the rows and the
    lineage are those of the same query over memory tables (where the shared lineage computes it again), and
    the session keeps nothing of it, also when the query fails after it was stored."""
    before = _temporaries(duck)
    r = duck.run(Q11, lineage="bitmap")
    assert '"_dl_value"' in r.rewritten_sql and _temporaries(duck) == before
    # what the user reads runs on its own (the stored threshold a CTE of it), with the query's rows
    again = duck.engine.sql(r.rewritten_sql)
    assert again.select(list(range(r.table.num_columns))).rename_columns(r.table.column_names).equals(r.table)
    memory = dltrace.connect("duckdb")
    try:
        memory.load_tpch(0.01, storage="memory")
        m = memory.run(Q11, lineage="bitmap")
        assert '"_dl_value"' not in m.rewritten_sql
        assert r.table.equals(m.table)
        assert r.lineage_all() == m.lineage_all() and r.lineage_all()
    finally:
        memory.close()
    failing = "SELECT CAST(n_name AS INTEGER) AS x FROM nation WHERE n_nationkey > (SELECT avg(r_regionkey) FROM region)"
    with pytest.raises(dltrace.DltraceError):
        duck.run(failing, lineage="bitmap")
    assert list(duck.plans._plans.values())[-1].preludes  # (it failed after its threshold was stored)
    assert _temporaries(duck) == before


def test_a_query_failing_in_the_users_transaction_reports_its_own_error(tmp_path):
    """A query that fails after its threshold was stored, inside the user's open transaction: the error is the
    query's (the engine refuses the drop in the failed transaction, and rolls the table back with it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"k": [1, 2, 3], "s": ["a", "b", "c"]}), path)
    con = duckdb.connect()
    s = dltrace.connect("duckdb", connection=con)
    try:
        s.register("t", str(path))
        con.execute("BEGIN")
        with pytest.raises(dltrace.DltraceError, match="(?i)conver|cast"):
            s.run("SELECT CAST(s AS INTEGER) AS x FROM t WHERE k > (SELECT avg(k) FROM t)", lineage="bitmap")
        con.execute("ROLLBACK")
        assert not _temporaries(s) & {name for name, _ in list(s.plans._plans.values())[-1].preludes}
    finally:
        s.close()
    con.close()
