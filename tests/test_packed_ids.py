"""Packed ids (rewriter/passes/pack_ids.py): several tables' row ids in one BIGINT list per lineage column of an
aggregate, read out again per table when the lineage is first read. The lineage must be exactly the lineage of
the same query run with one list per table, under both strategies, and the one backward tracing finds."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from sqlglot import exp

import dltrace
from dltrace.engines import lineage_functions
from dltrace.engines.duckdb_sql import DuckDBFunctions
from dltrace.rewriter.grammar import generate, parse
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.instrument import instrument
from dltrace.rewriter.passes.pack_ids import PACKED_IDS, pack_ids
from dltrace.rewriter.analysis import prepare
from dltrace.udafs.packed_ids import unpack_ids

T = pa.table({"a": pa.array([1, 2, None, 2, 3], pa.int64()), "b": pa.array([10, 20, 30, None, 50], pa.int64())})
U = pa.table({"a": pa.array([2, None, 5, 2, 1, 2], pa.int64()), "c": pa.array([7, 8, 9, 1, 4, 6], pa.int64())})
S = pa.table({"a": pa.array([2, 1], pa.int64()), "n": pa.array([100, 200], pa.int64())})

QUERIES = [
    # three tables, inner joins: plain ids
    "SELECT t.a, sum(u.c) AS total, count(*) AS n FROM t JOIN u ON t.a = u.a JOIN s ON s.a = t.a GROUP BY t.a",
    # an outer join pads u's id: id + 1, NULL as 0
    "SELECT t.a, count(u.c) AS n FROM t LEFT JOIN u ON t.a = u.a GROUP BY t.a",
    "SELECT u.a, count(t.b) AS n FROM t RIGHT JOIN u ON t.a = u.a GROUP BY u.a",
    "SELECT coalesce(t.a, u.a) AS a, count(*) AS n FROM t FULL JOIN u ON t.a = u.a GROUP BY 1",
    # a derived table's ids, and a self-join (two lists of one table's ids, concatenated)
    "SELECT x.a, count(*) AS n FROM (SELECT t.a, u.c FROM t JOIN u ON t.a = u.a WHERE u.c > 1) AS x GROUP BY x.a",
    "SELECT t1.a, count(*) AS n FROM t AS t1 JOIN t AS t2 ON t1.a = t2.a JOIN u ON u.a = t1.a GROUP BY t1.a",
    # a global aggregate over no rows (NULL lists), and over some
    "SELECT count(*) AS n, max(u.c) AS m FROM t JOIN u ON t.a = u.a WHERE t.b > 1000",
    "SELECT count(*) AS n, max(u.c) AS m FROM t JOIN u ON t.a = u.a",
    # a POSITIONAL JOIN pads the shorter table (t, 5 rows) with NULLs, with no side or kind: t's id + 1 (a
    # review found u's row 5, paired with t's padding, dropped with the NULL when t's id was stored as it is)
    "SELECT t.a, count(*) AS n FROM t POSITIONAL JOIN u GROUP BY t.a",
    # HAVING and ORDER BY with LIMIT
    "SELECT t.a, count(*) AS n FROM t JOIN u ON t.a = u.a GROUP BY t.a HAVING count(*) > 1 ORDER BY n DESC LIMIT 1",
]


@pytest.fixture(scope="module")
def s():
    session = dltrace.connect("duckdb")
    session.register("t", T)
    session.register("u", U)
    session.register("s", S)
    yield session
    session.close()


def lineage_of(r) -> Counter:
    return Counter((repr(row), repr(sorted((t, tuple(ids)) for t, ids in r.lineage(i).items())))
                   for i, row in enumerate(r.table.to_pylist()))


@pytest.mark.parametrize("sql", QUERIES)
@pytest.mark.parametrize("strategy", ["set", "bitmap"])
def test_packed_lineage_is_the_lineage_of_one_list_per_table(s, sql, strategy, monkeypatch):
    packed = s.run(sql, lineage=strategy)
    monkeypatch.setattr(DuckDBFunctions, "packs_ids", False)
    s.plans.clear()
    one_per_table = s.run(sql, lineage=strategy)
    monkeypatch.undo()
    s.plans.clear()
    assert lineage_of(packed) == lineage_of(one_per_table)
    assert Counter(map(repr, packed.table.to_pylist())) == Counter(map(repr, s.sql(sql).to_pylist()))


def test_the_queries_do_pack(s):
    """(else the test above compares a rewrite with itself) -- all but the self-join, whose table's lists are
    concatenated (FLATTEN(LIST_VALUE(LIST(t1 id), LIST(t2 id)))), not one list: left as it is."""
    for sql in QUERIES:
        s.run(sql, lineage="set")
        assert bool(list(s.plans._plans.values())[-1].packed) == ("t AS t2" not in sql), sql


@pytest.mark.parametrize("sql", [QUERIES[0], QUERIES[1], QUERIES[4]])
def test_packed_lineage_is_backward_lineage(s, sql):
    assert lineage_of(s.run(sql, lineage="bitmap")) == lineage_of(s.trace(sql))


def test_unpack_reads_each_field_and_drops_nulls():
    # rows: [t=3 u=NULL, t=0 u=5], NULL (a group of no rows), [], [t=7 u=1]; t offset 1 in 4 bits, u at 4
    def word(t, u):
        return (0 if t is None else t + 1) | ((0 if u is None else u + 1) << 4)
    lists = pa.array([[word(3, None), word(0, 5)], None, [], [word(7, 1)]], pa.list_(pa.int64()))
    sliced = pa.chunked_array([lists.slice(1), lists.slice(0, 1)])
    assert unpack_ids(lists, 0, 4, 1).to_pylist() == [[3, 0], None, [], [7]]
    assert unpack_ids(lists, 4, 4, 1).to_pylist() == [[5], None, [], [1]]
    assert unpack_ids(sliced, 4, 4, 1).to_pylist() == [None, [], [1], [5]]
    plain = pa.array([[2 | (9 << 2)], [1 | (0 << 2)]], pa.list_(pa.int64()))
    assert unpack_ids(plain, 0, 2, 0).to_pylist() == [[2], [1]]
    assert unpack_ids(plain, 2, 4, 0).to_pylist() == [[9], [0]]


def _rewritten(sql: str, rows: dict) -> exp.Expression:
    fns = lineage_functions("duckdb", "bitmap", finish_on_read=True)
    schema = {"t": {"a": "BIGINT", "b": "BIGINT"}, "u": {"a": "BIGINT", "c": "BIGINT"}}
    context = PassContext("duckdb", fns, schema, table_rows=rows)
    from dltrace.rewriter.passes.build_on_read import build_on_read
    return build_on_read(instrument(prepare(parse(sql, "duckdb")[0], context).tree, context), context), context


def test_pack_ids_needs_every_row_count_and_leaves_its_input_alone():
    sql = 'SELECT "t"."a" AS "a", COUNT(*) AS "n" FROM "t" AS "t" JOIN "u" AS "u" ON "t"."a" = "u"."a" GROUP BY "t"."a"'
    tree, context = _rewritten(sql, {"t": 5, "u": 6})
    before = generate(tree, "duckdb")
    out = pack_ids(tree, context)
    assert generate(tree, "duckdb") == before  # not mutated
    assert out.meta[PACKED_IDS] == {"t": ("dl_t", 0, 3, 0), "u": ("dl_t", 3, 3, 0)}
    assert [p.alias_or_name for p in out.expressions] == ["a", "n", "dl_t"]
    tree, context = _rewritten(sql, {"t": 5})  # u's size unknown: its ids are not packed, t alone is left
    assert PACKED_IDS not in pack_ids(tree, context).meta
    tree, context = _rewritten(sql, {"t": 2**40, "u": 6})  # 40 bits and 3 fit a word
    assert pack_ids(tree, context).meta[PACKED_IDS] == {"t": ("dl_t", 0, 40, 0), "u": ("dl_t", 40, 3, 0)}
    tree, context = _rewritten(sql, {"t": 2**62, "u": 6})  # 62 and 3 do not: a word each, nothing packed
    assert PACKED_IDS not in pack_ids(tree, context).meta


def test_parquet_read_in_place_is_packed_and_checked(tmp_path):
    """Its files may be rewritten with more rows: ids beyond the count registered would spill into the next field
    (a review: t's file rewritten from 5 rows to 20 gave t the ids 0..7). A query refuses a file whose count
    changed before it runs (Catalog.check_numbering), and one whose files changed while it ran (their stat)."""
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": list(range(1, 6))}), tmp_path / "t.parquet")
    pq.write_table(pa.table({"a": list(range(1, 21))}), tmp_path / "u.parquet")
    session = dltrace.connect("duckdb")
    session.register("t", tmp_path / "t.parquet")
    session.register("u", tmp_path / "u.parquet")
    sql = "SELECT t.a % 2 AS odd, count(*) AS n FROM t JOIN u ON t.a = u.a GROUP BY 1"
    r = session.run(sql)
    plan = list(session.plans._plans.values())[-1]
    assert {p[0] for p in plan.packed} == {"t", "u"}
    assert lineage_of(r) == lineage_of(session.trace(sql))
    run = session.engine.sql

    def rewritten_meanwhile(text, *args, **kwargs):  # (the race: the file rewritten once the checks are done)
        if text == plan.text:
            pq.write_table(pa.table({"a": list(range(1, 21))}), tmp_path / "t.parquet")
        return run(text, *args, **kwargs)

    session.engine.sql = rewritten_meanwhile
    with pytest.raises(dltrace.StaleLineage, match=r"table 't' has files changed on disk \(t.parquet\) while the "
                                                   r"query ran"):
        session.run(sql)
    session.engine.sql = run
    with pytest.raises(dltrace.StaleLineage, match="t.parquet has 20 rows, 5 then"):
        session.run(sql)
    session.register("t", tmp_path / "t.parquet", replace=True)
    r = session.run(sql)
    assert lineage_of(r) == lineage_of(session.trace(sql))
    assert sorted(i for k in range(r.num_rows) for i in r.lineage(k)["t"]) == list(range(20))
    session.close()
